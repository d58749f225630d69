"""Consecutive text and reasoning deltas of one block merged within a short window.

A page renders once per chunk it reads, and a model that streams a token every few
milliseconds costs the browser a render each (docs/adr/0048). With a window set
(``ADK_STREAM_DELTA_COALESCING_MS``), a delta that follows its block's first one is held for at
most that window, and the deltas of the same block that arrive meanwhile join it. The first
delta of a block, every other chunk and the response's end are never held: each first sends
what is held, so nothing is reordered. The merge happens before delivery, so the client, the
chunk log a resume replays and a recording all see the same chunks.
"""

from __future__ import annotations

from collections.abc import Sequence

from adk_stream_protocol.protocol.chunks import BaseChunk, ReasoningDeltaChunk, TextDeltaChunk

Delta = TextDeltaChunk | ReasoningDeltaChunk


class DeltaCoalescer:
    """The merging of one response's deltas; its timing is the ``Response``'s."""

    def __init__(self, window_seconds: float) -> None:
        self.window_seconds = window_seconds
        self._begun: set[tuple[str, str]] = set()  # blocks whose first delta went out
        self._held: Delta | None = None

    @property
    def holding(self) -> bool:
        return self._held is not None

    def take(self, chunks: Sequence[BaseChunk]) -> list[BaseChunk]:
        """What goes out now, in order; a later delta of a block is kept back instead."""
        out: list[BaseChunk] = []
        for chunk in chunks:
            if not isinstance(chunk, TextDeltaChunk | ReasoningDeltaChunk):
                out.extend(self.release())
                out.append(chunk)
                continue
            block = (chunk.type, chunk.id)
            held = self._held
            if block not in self._begun or chunk.provider_metadata is not None:
                # A block's first delta is never late; metadata belongs to its own delta.
                self._begun.add(block)
                out.extend(self.release())
                out.append(chunk)
            elif held is not None and (held.type, held.id) == block:
                self._held = held.model_copy(update={"delta": held.delta + chunk.delta})
            else:
                out.extend(self.release())
                self._held = chunk
        return out

    def release(self) -> list[BaseChunk]:
        """The held delta, if any: its window is over, or something must follow it."""
        held, self._held = self._held, None
        return [held] if held is not None else []
