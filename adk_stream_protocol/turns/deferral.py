"""Holding back a continuation's text and earlier results (docs/adr/0010): the one deferral
mechanism of both transports.

A response that continues a turn after the client answered (an approval, a browser result)
may pause for the client again. If it does, it delivers only what pauses it: its new calls,
their results and approval requests. Its text, reasoning, files, data and the results of
calls it did not introduce are held back and delivered, in order, first in the turn's final
response. Where the held chunks wait depends on the transport: ``/live`` keeps them in its
turn object; ``/stream`` finds them again in the stored session (the events are stamped).

What a tool sends the page while it runs (its data parts, the files of the artifacts it
saved) is no part of the session, so it is never held: it goes out when the response
settles, paused or not.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from adk_stream_protocol.protocol.chunks import (
    BaseChunk,
    DataChunk,
    FileChunk,
    FinishStepChunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    ReasoningStartChunk,
    StartStepChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
    ToolInputAvailableChunk,
    ToolInputStartChunk,
    ToolOutputAvailableChunk,
    ToolOutputDeniedChunk,
    ToolOutputErrorChunk,
)
from adk_stream_protocol.protocol.confirmations import APPROVAL_PART


class Deferral:
    """One deferring response: collects its chunks and, at its end, splits them into what
    is sent now and what the turn holds for later."""

    def __init__(self, held_before: Sequence[BaseChunk] = ()) -> None:
        self._before = list(held_before)  # held back by earlier responses of the turn
        self._collected: list[BaseChunk] = []
        self._kept: set[int] = set()  # ids of collected chunks that are never held

    def collect(self, chunks: Sequence[BaseChunk], *, keep: bool = False) -> None:
        self._collected.extend(chunks)
        if keep:
            self._kept.update(id(c) for c in chunks)

    def settle(self, *, paused: bool) -> tuple[list[BaseChunk], list[BaseChunk]]:
        """(what to send now, what to hold for the turn's final response)."""
        if not paused:
            return [*self._before, *self._collected], []
        kept = only_what_pauses(self._collected, keep=self._kept)
        kept_ids = {id(c) for c in kept}
        later = [c for c in self._collected if id(c) not in kept_ids]
        return kept, [*self._before, *later]


def only_what_pauses(chunks: Sequence[BaseChunk], *, keep: Collection[int] = ()) -> list[BaseChunk]:
    """A paused response without what it holds back: text, reasoning, files, data and the
    results of calls it did not introduce. What remains is the new calls, their results and
    approval requests (with their ``data-approval`` parts), in their steps, and the chunks
    whose ``id()`` is in ``keep``; steps left empty are dropped."""
    introduced = {
        c.tool_call_id
        for c in chunks
        if isinstance(c, ToolInputStartChunk | ToolInputAvailableChunk)
    }
    kept: list[BaseChunk] = []
    for chunk in chunks:
        if id(chunk) in keep:
            kept.append(chunk)
            continue
        if isinstance(chunk, _DEFERRED_CONTENT) and not _asks(chunk):
            continue
        if isinstance(chunk, _TOOL_OUTPUTS) and chunk.tool_call_id not in introduced:
            continue
        if isinstance(chunk, FinishStepChunk) and kept and isinstance(kept[-1], StartStepChunk):
            kept.pop()  # the step held nothing that is sent now
            continue
        kept.append(chunk)
    return kept


_DEFERRED_CONTENT = (
    TextStartChunk,
    TextDeltaChunk,
    TextEndChunk,
    ReasoningStartChunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    FileChunk,
    DataChunk,
)


def _asks(chunk: BaseChunk) -> bool:
    """An approval request's own data part (its hint and payload) pauses with it."""
    return isinstance(chunk, DataChunk) and chunk.type == APPROVAL_PART


_TOOL_OUTPUTS = (ToolOutputAvailableChunk, ToolOutputErrorChunk, ToolOutputDeniedChunk)
