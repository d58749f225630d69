"""Step parts (``step-start``): a response is a sequence of steps, ``start-step`` …
``finish-step``, and the text and reasoning blocks stream inside one.

- From ADK: ``ResponseSteps`` opens and ends a response's steps; a new step closes the open
  blocks first. Built without validation, as the blocks are: the chunks are constant.
- The fold: ``start-step`` pushes a ``step-start`` part without a write (the chat's list shows
  it only with the next change); ``finish-step`` and ai 7's ``reset-step`` tell every kind, so
  that each forgets what it kept open (``reset-step`` also drops the step's parts).
- The rebuild: ``start-step``; ``message_chunks`` ends each step.
- The request: ``StepStartUIPart``, shown only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from adk_stream_protocol.protocol.chunk_base import built
from adk_stream_protocol.protocol.chunks import BaseChunk, FinishStepChunk, StartStepChunk
from adk_stream_protocol.protocol.clients import AiSdkClient
from adk_stream_protocol.protocol.parts.base import (
    Chunk,
    Fold,
    FoldTarget,
    PartKind,
    UIPart,
    step_parts,
)
from adk_stream_protocol.protocol.parts.text import ResponseBlocks


def _finish_step() -> FinishStepChunk:
    return built(FinishStepChunk, {"type": "finish-step"}, set())


class ResponseSteps:
    """The open step of one response, around its blocks."""

    def __init__(self, blocks: ResponseBlocks) -> None:
        self._blocks = blocks
        self.open = False
        # Set when tool results were sent after the last model content: the model's next
        # content (or the end of the response) opens a new step, as the stock helpers expect.
        self.after_tool_results = False

    def ensure(self, out: list[BaseChunk]) -> None:
        """Open a step unless one is open and no tool results came since."""
        if not self.open or self.after_tool_results:
            out.extend(self.new())

    def new(self) -> list[BaseChunk]:
        out = self._blocks.close_all()
        if self.open:
            out.append(_finish_step())
        out.append(built(StartStepChunk, {"type": "start-step"}, set()))
        self.open = True
        self.after_tool_results = False
        return out

    def finish(self) -> list[BaseChunk]:
        """The open step's end, if one is open (blocks must be closed already)."""
        if not self.open:
            return []
        self.open = False
        return [_finish_step()]


class StepStartUIPart(UIPart):
    type: Literal["step-start"]


class Steps(PartKind):
    """``step-start`` parts, and the chunks that end and reset a step."""

    part_types = ("step-start",)
    request_parts = (("step-start", StepStartUIPart),)

    def folds(self) -> dict[str, Fold]:
        return {"start-step": self._start, "finish-step": self._finish, "reset-step": self._reset}

    def _start(self, target: FoldTarget, chunk: Chunk) -> None:
        target.message["parts"].append({"type": "step-start"})
        target.pushed_unwritten()  # the client pushes it without a write

    def _finish(self, target: FoldTarget, chunk: Chunk) -> None:
        target.step_finished()

    def _reset(self, target: FoldTarget, chunk: Chunk) -> None:
        removed = len(step_parts(target.message))
        target.step_reset()
        if removed:
            del target.message["parts"][-removed:]
            target.write()

    @classmethod
    def rebuild(
        cls, part: Mapping[str, Any], client: AiSdkClient, block_id: str
    ) -> list[BaseChunk]:
        return [StartStepChunk()]
