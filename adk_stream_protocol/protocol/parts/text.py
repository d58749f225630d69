"""Text and reasoning parts: blocks that stream (``*-start``, deltas, ``*-end``).

- From ADK: ``ResponseBlocks`` keeps a response's open text and reasoning blocks (at most one
  of each per voice, the other closed when one opens; a ``ParallelAgent``'s branches stream
  at once, each in a voice of its own) and their ids, ``{kind}_{prefix}_{n}``: unique in
  the response, and across responses through the prefix. What every streamed word makes, so
  its chunks are built without validation (``built``): our own ids and the model's text (a
  ``str``, as google-genai's ``Part`` validated it). On ai 7 a text's end carries the citations
  of the grounding seen while it was open.
- The fold: a part opens ``streaming`` under the chunk's id and is ``done`` at its end chunk;
  a delta or an end for no open part stops the client. ai 6 forgets open parts at a step's
  end; ai 7 leaves them to their end chunks.
- The rebuild: start, the whole text as one delta, end, under the part's id when it has one.
- The request: ``TextUIPart`` (a user's text goes to the model) and ``ReasoningUIPart``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from google.genai import types

from adk_stream_protocol.protocol.chunk_base import built
from adk_stream_protocol.protocol.chunks import (
    BaseChunk,
    Citation,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    ReasoningStartChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
    UnknownJson,
)
from adk_stream_protocol.protocol.clients import AiSdkClient
from adk_stream_protocol.protocol.parts.base import (
    ABSENT,
    Chunk,
    Fold,
    FoldTarget,
    Part,
    PartKind,
    Refused,
    UIPart,
    chunk_id,
    given,
    put,
)
from adk_stream_protocol.protocol.parts.sources import citations_of

Edge = TypeVar("Edge", TextStartChunk, ReasoningStartChunk, ReasoningEndChunk)
Delta = TypeVar("Delta", TextDeltaChunk, ReasoningDeltaChunk)


def _edge(cls: type[Edge], kind: str, block_id: str) -> Edge:
    return built(cls, {"type": kind, "id": block_id, "provider_metadata": None}, {"id"})


def _delta(cls: type[Delta], kind: str, block_id: str, text: str) -> Delta:
    fields = {"type": kind, "id": block_id, "delta": text, "provider_metadata": None}
    return built(cls, fields, {"id", "delta"})


@dataclass
class _Voice:
    """The open blocks of one voice of a response: its text and reasoning, their ids."""

    text_id: str | None = None
    text: str = ""  # the open text block's text, for its citations
    grounding: types.GroundingMetadata | None = None  # seen while the text was open
    reasoning_id: str | None = None


class ResponseBlocks:
    """The open text and reasoning blocks of one response, and their ids.

    A response usually speaks with one voice. The branches of a ``ParallelAgent`` stream at
    once, each with its own voice (the event's ``branch``): each has its own open blocks, so
    their words interleave on the wire but each branch's text is a part of its own. ``voice``
    says whose blocks the next calls act on; ``close`` ends the current voice's blocks,
    ``close_all`` every voice's (a step's end, the response's end, an error)."""

    def __init__(self, *, id_prefix: str, client: AiSdkClient) -> None:
        self.id_prefix = id_prefix
        self._counter = 0
        self._cites = client.text_end_citations
        self._voices: dict[str | None, _Voice] = {None: _Voice()}
        self._voice = self._voices[None]

    def speak_as(self, voice: str | None) -> None:
        """The voice the next blocks belong to (an event's ``branch``; None for the main)."""
        found = self._voices.get(voice)
        if found is None:
            found = self._voices[voice] = _Voice()
        self._voice = found

    def ground(self, grounding: types.GroundingMetadata) -> None:
        """Grounding of the answer: the open text's end cites it, for a client that reads it."""
        if self._cites:
            self._voice.grounding = grounding

    def text_delta(self, text: str, out: list[BaseChunk]) -> None:
        voice = self._voice
        if voice.reasoning_id is not None:
            out.append(_edge(ReasoningEndChunk, "reasoning-end", voice.reasoning_id))
            voice.reasoning_id = None
        if voice.text_id is None:
            voice.text_id = self._next_id("txt")
            out.append(_edge(TextStartChunk, "text-start", voice.text_id))
        if self._cites:
            voice.text += text
        out.append(_delta(TextDeltaChunk, "text-delta", voice.text_id, text))

    def reasoning_delta(self, text: str, out: list[BaseChunk]) -> None:
        voice = self._voice
        if voice.text_id is not None:
            out.append(self._text_end(voice))
        if voice.reasoning_id is None:
            voice.reasoning_id = self._next_id("rsn")
            out.append(_edge(ReasoningStartChunk, "reasoning-start", voice.reasoning_id))
        out.append(_delta(ReasoningDeltaChunk, "reasoning-delta", voice.reasoning_id, text))

    def close(self) -> list[BaseChunk]:
        """End the current voice's open reasoning and text blocks."""
        return self._close(self._voice)

    def close_all(self) -> list[BaseChunk]:
        """End every voice's open blocks."""
        out: list[BaseChunk] = []
        for voice in self._voices.values():
            out.extend(self._close(voice))
        return out

    def _close(self, voice: _Voice) -> list[BaseChunk]:
        out: list[BaseChunk] = []
        if voice.reasoning_id is not None:
            out.append(_edge(ReasoningEndChunk, "reasoning-end", voice.reasoning_id))
            voice.reasoning_id = None
        if voice.text_id is not None:
            out.append(self._text_end(voice))
        return out

    def _next_id(self, kind: str) -> str:
        self._counter += 1
        return f"{kind}_{self.id_prefix}_{self._counter}"

    def _text_end(self, voice: _Voice) -> TextEndChunk:
        assert voice.text_id is not None
        citations: list[Citation] | None = None
        if voice.grounding is not None:
            citations = citations_of(voice.grounding, voice.text) or None
        # The citations were validated as citations_of made them.
        fields: dict[str, Any] = {"type": "text-end", "id": voice.text_id}
        fields.update(provider_metadata=None, citations=citations)
        chunk = built(TextEndChunk, fields, {"id", "citations"})
        voice.text_id, voice.text, voice.grounding = None, "", None
        return chunk


# -- the fold and the rebuild ------------------------------------------------------------------


class _Blocks(PartKind):
    """Parts that stream as blocks: each open under its chunk's id until its end chunk."""

    # Whether the end chunk's citations go onto the part (for a client that has them).
    cites: ClassVar[bool] = False

    def __init__(self, message: Part, client: AiSdkClient) -> None:
        self._open: dict[str, Part] = {}
        self._keeps_citations = self.cites and client.text_end_citations
        self._closes_at_step_end = client.finish_step_closes_blocks

    def _new_part(self, chunk: Chunk) -> Part:
        raise NotImplementedError

    def _start(self, target: FoldTarget, chunk: Chunk) -> None:
        part = self._new_part(chunk)
        put(part, "providerMetadata", chunk.get("providerMetadata", ABSENT))
        part["state"] = "streaming"
        self._open[chunk_id(chunk, "id")] = part
        target.message["parts"].append(part)
        target.write()

    def _delta(self, target: FoldTarget, chunk: Chunk) -> None:
        part = self._open_part(chunk)
        part["text"] += chunk.get("delta", "")
        _keep_metadata(part, chunk)
        target.write()

    def _end(self, target: FoldTarget, chunk: Chunk) -> None:
        part = self._open_part(chunk)
        part["state"] = "done"
        if self._keeps_citations and given(chunk.get("citations")):
            part["citations"] = chunk["citations"]
        _keep_metadata(part, chunk)
        del self._open[chunk_id(chunk, "id")]
        target.write()

    def _open_part(self, chunk: Chunk) -> Part:
        part = self._open.get(chunk_id(chunk, "id"))
        if part is None:
            raise Refused(f"{chunk['type']} for no open part {chunk.get('id')!r}")
        return part

    def step_finished(self) -> None:
        if self._closes_at_step_end:
            self._open.clear()

    def step_reset(self) -> None:
        self._open.clear()


def _keep_metadata(part: Part, chunk: Chunk) -> None:
    metadata = chunk.get("providerMetadata")
    if given(metadata):
        part["providerMetadata"] = metadata


def _block_id(part: Mapping[str, Any], block_id: str) -> str:
    """ai 7 and the newest 6.x keep a block's id on its part."""
    return part["id"] if isinstance(part.get("id"), str) else block_id


class TextUIPart(UIPart):
    type: Literal["text"]
    text: str
    state: Literal["streaming", "done"] | None = None
    # ai 7: references the model gave for its text. Nothing in a user's content takes them.
    citations: list[UnknownJson] | None = None


class ReasoningUIPart(UIPart):
    type: Literal["reasoning"]
    text: str
    state: Literal["streaming", "done"] | None = None


class Text(_Blocks):
    """``text`` parts."""

    part_types = ("text",)
    request_parts = (("text", TextUIPart),)
    cites = True

    def folds(self) -> dict[str, Fold]:
        return {"text-start": self._start, "text-delta": self._delta, "text-end": self._end}

    def _new_part(self, chunk: Chunk) -> Part:
        return {"type": "text", "text": ""}

    @classmethod
    def rebuild(
        cls, part: Mapping[str, Any], client: AiSdkClient, block_id: str
    ) -> list[BaseChunk]:
        block_id = _block_id(part, block_id)
        metadata = part.get("providerMetadata")
        citations = part.get("citations") if client.text_end_citations else None
        return [
            TextStartChunk(id=block_id, provider_metadata=metadata),
            TextDeltaChunk(id=block_id, delta=part.get("text", "")),
            TextEndChunk(
                id=block_id,
                provider_metadata=metadata,
                citations=[Citation.model_validate(c) for c in citations] if citations else None,
            ),
        ]

    @classmethod
    def model_input(cls, part: UIPart) -> tuple[list[types.Part], list[str]]:
        assert isinstance(part, TextUIPart)
        text = [types.Part(text=part.text)] if part.text else []
        return text, ["text citations"] if part.citations else []


class Reasoning(_Blocks):
    """``reasoning`` parts (the model's thoughts); the page shows them, the model never
    reads them back."""

    part_types = ("reasoning",)
    request_parts = (("reasoning", ReasoningUIPart),)

    def folds(self) -> dict[str, Fold]:
        return {
            "reasoning-start": self._start,
            "reasoning-delta": self._delta,
            "reasoning-end": self._end,
        }

    def _new_part(self, chunk: Chunk) -> Part:
        return {"type": "reasoning", "id": chunk_id(chunk, "id"), "text": ""}

    @classmethod
    def rebuild(
        cls, part: Mapping[str, Any], client: AiSdkClient, block_id: str
    ) -> list[BaseChunk]:
        block_id = _block_id(part, block_id)
        metadata = part.get("providerMetadata")
        return [
            ReasoningStartChunk(id=block_id, provider_metadata=metadata),
            ReasoningDeltaChunk(id=block_id, delta=part.get("text", "")),
            ReasoningEndChunk(id=block_id, provider_metadata=metadata),
        ]
