"""The steps and open blocks of one response: what the converter opens, closes and numbers.

A response is a sequence of steps (``start-step`` … ``finish-step``); inside a step, text and
reasoning stream as blocks (``*-start``, deltas, ``*-end``), at most one of each open at a
time. ``ResponseBlocks`` keeps that state and the block ids, so the converter only says what
comes next. Ids are ``{kind}_{prefix}_{n}``: unique within the response, and across responses
through the prefix.
"""

from __future__ import annotations

from google.genai import types

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
            out.append(FinishStepChunk())
        out.append(StartStepChunk())
        self.step_open = True
        self.after_tool_results = False
        return out

    def finish_step(self) -> list[BaseChunk]:
        """The open step's end, if one is open (blocks must be closed already)."""
        if not self.step_open:
            return []
        self.step_open = False
        return [FinishStepChunk()]

    def text_delta(self, text: str, out: list[BaseChunk]) -> None:
        if self._reasoning_id is not None:
            out.append(ReasoningEndChunk(id=self._reasoning_id))
            self._reasoning_id = None
        if self._text_id is None:
            self._text_id = self._next_id("txt")
            out.append(TextStartChunk(id=self._text_id))
        if self._ai_sdk >= 7:
            self._text += text
        out.append(TextDeltaChunk(id=self._text_id, delta=text))

    def reasoning_delta(self, text: str, out: list[BaseChunk]) -> None:
        if self._text_id is not None:
            out.append(self._text_end())
        if self._reasoning_id is None:
            self._reasoning_id = self._next_id("rsn")
            out.append(ReasoningStartChunk(id=self._reasoning_id))
        out.append(ReasoningDeltaChunk(id=self._reasoning_id, delta=text))

    def close(self) -> list[BaseChunk]:
        """End the open reasoning and text blocks."""
        out: list[BaseChunk] = []
        if self._reasoning_id is not None:
            out.append(ReasoningEndChunk(id=self._reasoning_id))
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
        chunk = TextEndChunk(id=self._text_id, citations=citations)
        self._text_id, self._text, self.grounding = None, "", None
        return chunk
