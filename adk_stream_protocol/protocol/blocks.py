"""The steps and open blocks of one response: what the converter opens, closes and numbers.

A response is a sequence of steps (``start-step`` … ``finish-step``); inside a step, text and
reasoning stream as blocks (``*-start``, deltas, ``*-end``), at most one of each open at a
time. ``ResponseBlocks`` keeps that state and the block ids, so the converter only says what
comes next. Ids are ``{kind}_{prefix}_{n}``: unique within the response, and across responses
through the prefix.

These chunks are what every streamed word makes, so they are built without validation
(``built``, docs/adr/0050): their values are our own ids and the model's text (a ``str``, as
google-genai's ``Part`` validated it).
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.genai import types

from adk_stream_protocol.protocol.chunk_base import built
from adk_stream_protocol.protocol.chunks import (
    AiSdkVersion,
    BaseChunk,
    Citation,
    FinishStepChunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    ReasoningStartChunk,
    StartStepChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
)
from adk_stream_protocol.protocol.event_values import citations_of

Edge = TypeVar("Edge", TextStartChunk, ReasoningStartChunk, ReasoningEndChunk)
Delta = TypeVar("Delta", TextDeltaChunk, ReasoningDeltaChunk)


def _edge(cls: type[Edge], kind: str, block_id: str) -> Edge:
    return built(cls, {"type": kind, "id": block_id, "provider_metadata": None}, {"id"})


def _delta(cls: type[Delta], kind: str, block_id: str, text: str) -> Delta:
    fields = {"type": kind, "id": block_id, "delta": text, "provider_metadata": None}
    return built(cls, fields, {"id", "delta"})


class ResponseBlocks:
    """The open step and blocks of one response, and its block ids."""

    def __init__(self, *, id_prefix: str, ai_sdk: AiSdkVersion) -> None:
        self.id_prefix = id_prefix
        self._ai_sdk = ai_sdk
        self._counter = 0
        self.step_open = False
        # Set when tool results were sent after the last model content: the model's next
        # content (or the end of the response) opens a new step, as the stock helpers expect.
        self.after_tool_results = False
        self._text_id: str | None = None
        self._text = ""  # the open text block's text, for its citations (ai 7)
        self.grounding: types.GroundingMetadata | None = None  # seen while the text was open
        self._reasoning_id: str | None = None

    def ensure_step(self, out: list[BaseChunk]) -> None:
        """Open a step unless one is open and no tool results came since."""
        if not self.step_open or self.after_tool_results:
            out.extend(self.new_step())

    def new_step(self) -> list[BaseChunk]:
        out = self.close()
        if self.step_open:
            out.append(built(FinishStepChunk, {"type": "finish-step"}, set()))
        out.append(built(StartStepChunk, {"type": "start-step"}, set()))
        self.step_open = True
        self.after_tool_results = False
        return out

    def finish_step(self) -> list[BaseChunk]:
        """The open step's end, if one is open (blocks must be closed already)."""
        if not self.step_open:
            return []
        self.step_open = False
        return [built(FinishStepChunk, {"type": "finish-step"}, set())]

    def text_delta(self, text: str, out: list[BaseChunk]) -> None:
        if self._reasoning_id is not None:
            out.append(_edge(ReasoningEndChunk, "reasoning-end", self._reasoning_id))
            self._reasoning_id = None
        if self._text_id is None:
            self._text_id = self._next_id("txt")
            out.append(_edge(TextStartChunk, "text-start", self._text_id))
        if self._ai_sdk >= 7:
            self._text += text
        out.append(_delta(TextDeltaChunk, "text-delta", self._text_id, text))

    def reasoning_delta(self, text: str, out: list[BaseChunk]) -> None:
        if self._text_id is not None:
            out.append(self._text_end())
        if self._reasoning_id is None:
            self._reasoning_id = self._next_id("rsn")
            out.append(_edge(ReasoningStartChunk, "reasoning-start", self._reasoning_id))
        out.append(_delta(ReasoningDeltaChunk, "reasoning-delta", self._reasoning_id, text))

    def close(self) -> list[BaseChunk]:
        """End the open reasoning and text blocks."""
        out: list[BaseChunk] = []
        if self._reasoning_id is not None:
            out.append(_edge(ReasoningEndChunk, "reasoning-end", self._reasoning_id))
            self._reasoning_id = None
        if self._text_id is not None:
            out.append(self._text_end())
        return out

    def _next_id(self, kind: str) -> str:
        self._counter += 1
        return f"{kind}_{self.id_prefix}_{self._counter}"

    def _text_end(self) -> TextEndChunk:
        assert self._text_id is not None
        citations: list[Citation] | None = None
        if self.grounding is not None:
            citations = citations_of(self.grounding, self._text) or None
        # The citations were validated as citations_of made them.
        fields: dict[str, Any] = {"type": "text-end", "id": self._text_id}
        fields.update(provider_metadata=None, citations=citations)
        chunk = built(TextEndChunk, fields, {"id", "citations"})
        self._text_id, self._text, self.grounding = None, "", None
        return chunk
