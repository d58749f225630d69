"""Tool parts: ``tool-<name>`` and ``dynamic-tool``, a call with its input, approval and
outcome.

- From ADK: a function call is ``tool-input-start`` and ``tool-input-available``
  (``call_chunks``); a function response its outcome, denied, failed (an error-shaped result,
  ``tool_error_text``) or its output (``result_chunk``); a confirmation the approval's request
  (``approval_request_chunk``) and, for a client that has the chunk, the decision acted on
  (``approval_response_chunks``). The converter decides which calls and results a response
  carries (``tool_calls.py`` tracks them).
- The fold: ``ToolParts`` (``tool_fold.py``), the port of the client's ``updateToolPart``.
- The rebuild: the call, its input as one delta, its approval and outcome; never
  ``tool-input-available`` for a call that ran, which would run a browser tool again.
- The request: ``ToolUIPart``, ``DynamicToolUIPart`` and their ``ToolApproval`` (what a browser
  tool returned is read from one by ``inputs.browser_result``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypeAlias

from google.genai import types
from pydantic import Field

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.chunks import (
    BaseChunk,
    ToolApprovalRequestChunk,
    ToolApprovalResponseChunk,
    ToolInputAvailableChunk,
    ToolInputDeltaChunk,
    ToolInputStartChunk,
    ToolOutputAvailableChunk,
    ToolOutputDeniedChunk,
    ToolOutputErrorChunk,
    UnknownJson,
)
from adk_stream_protocol.protocol.clients import AiSdkClient
from adk_stream_protocol.protocol.event_values import json_safe
from adk_stream_protocol.protocol.parts.base import (
    Chunk,
    Fold,
    FoldTarget,
    Part,
    PartKind,
    UIModel,
    UIPart,
)
from adk_stream_protocol.protocol.parts.tool_fold import ToolParts

# -- from ADK ----------------------------------------------------------------------------------


def call_chunks(call_id: str, name: str, args: Any) -> list[BaseChunk]:
    """A function call: its part, with its input."""
    return [
        ToolInputStartChunk(tool_call_id=call_id, tool_name=name),
        ToolInputAvailableChunk(tool_call_id=call_id, tool_name=name, input=json_safe(args)),
    ]


def rearmed_call(call_id: str, name: str, args: Any) -> ToolInputAvailableChunk:
    """An approved browser call handed back to the page to run."""
    return ToolInputAvailableChunk(tool_call_id=call_id, tool_name=name, input=json_safe(args))


def tool_error_text(response: Any) -> str | None:
    """The error text of an error-shaped tool result, or None for a normal result.

    Rule (docs/adr/0003): a dict whose ``error`` key holds a non-empty value is a failure.
    ADK itself reports tool failures this way (``{"error": "..."}``).
    """
    if isinstance(response, dict):
        error = response.get("error")
        if error:
            return error if isinstance(error, str) else str(json_safe(error))
    return None


def result_chunk(call_id: str, result: Any, *, denied: bool) -> BaseChunk:
    """A function response: the user's denial, the tool's failure, or its output."""
    if denied:
        return ToolOutputDeniedChunk(tool_call_id=call_id)
    if (error := tool_error_text(result)) is not None:
        return ToolOutputErrorChunk(tool_call_id=call_id, error_text=error)
    return ToolOutputAvailableChunk(tool_call_id=call_id, output=json_safe(result))


def approval_request_chunk(
    approval_id: str,
    call_id: str,
    client: AiSdkClient,
    *,
    reason: str | None = None,
    descriptor: Any = None,
) -> ToolApprovalRequestChunk:
    """An approval's request, with its hint (``reason``) and payload (``approvalDescriptor``)
    for a client whose schema has them."""
    details = client.approval_request_details
    return ToolApprovalRequestChunk(
        approval_id=approval_id,
        tool_call_id=call_id,
        reason=reason if details else None,
        approval_descriptor=descriptor if details else None,
    )


def approval_response_chunks(
    decisions: Sequence[tuple[str, bool, str | None]], client: AiSdkClient
) -> list[BaseChunk]:
    """The decisions (approval id, approved, reason) a continuation acts on, for a client
    that has ``tool-approval-response`` (ai 7); none for another."""
    if not client.accepts("tool-approval-response"):
        return []
    return [
        ToolApprovalResponseChunk(approval_id=approval_id, approved=approved, reason=reason)
        for approval_id, approved, reason in decisions
    ]


# -- the request -------------------------------------------------------------------------------

ToolState: TypeAlias = Literal[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
]


class ToolApproval(UIModel):
    id: str
    approved: bool | None = None
    reason: str | None = None
    # ai 7 copies these from the approval request; the server reads its own session instead.
    request_reason: str | None = None
    is_automatic: bool | None = None


class ToolUIPartBase(UIPart):
    tool_call_id: str
    state: ToolState
    input: UnknownJson = None
    output: UnknownJson = None
    error_text: str | None = None
    approval: ToolApproval | None = None
    provider_executed: bool | None = None
    preliminary: bool | None = None


class ToolUIPart(ToolUIPartBase):
    """A static tool part: ``type`` is ``tool-<toolName>``."""

    type: Annotated[str, Field(pattern=r"^tool-.+")]

    @property
    def tool_name(self) -> str:
        return self.type.removeprefix("tool-")


class DynamicToolUIPart(ToolUIPartBase):
    type: Literal["dynamic-tool"]
    tool_name: str


AnyToolUIPart: TypeAlias = ToolUIPart | DynamicToolUIPart


# -- the kind ----------------------------------------------------------------------------------

_CHUNK_TYPES = (
    "tool-input-start",
    "tool-input-delta",
    "tool-input-available",
    "tool-input-error",
    "tool-approval-request",
    "tool-approval-response",
    "tool-output-available",
    "tool-output-error",
    "tool-output-denied",
)


class Tools(PartKind):
    """``tool-<name>`` and ``dynamic-tool`` parts."""

    part_types = ("dynamic-tool",)
    part_prefix = "tool-"
    request_parts = (("tool", ToolUIPart), ("dynamic-tool", DynamicToolUIPart))

    def __init__(self, message: Part, client: AiSdkClient) -> None:
        self._parts = ToolParts(message, client)

    def folds(self) -> dict[str, Fold]:
        return dict.fromkeys(_CHUNK_TYPES, self._tool)

    def _tool(self, target: FoldTarget, chunk: Chunk) -> None:
        self._parts.apply(chunk)
        target.write()

    def step_reset(self) -> None:
        self._parts.partial_calls.clear()

    @classmethod
    def rebuild(
        cls, part: Mapping[str, Any], client: AiSdkClient, block_id: str
    ) -> list[BaseChunk]:
        call_id: str = part["toolCallId"]
        dynamic = True if part.get("type") == "dynamic-tool" else None
        name = part["toolName"] if dynamic else str(part["type"]).removeprefix("tool-")
        state = part.get("state")
        executed = part.get("providerExecuted")
        if state == "input-available":
            # Still waiting for the browser: the client runs it, as it would have.
            return [
                ToolInputAvailableChunk(
                    tool_call_id=call_id,
                    tool_name=name,
                    input=part.get("input"),
                    provider_executed=executed,
                    provider_metadata=part.get("callProviderMetadata"),
                    dynamic=dynamic,
                    title=part.get("title"),
                )
            ]
        chunks: list[BaseChunk] = [
            ToolInputStartChunk(
                tool_call_id=call_id,
                tool_name=name,
                provider_executed=executed,
                dynamic=dynamic,
                title=part.get("title"),
            )
        ]
        if "input" in part:
            text = json.dumps(part["input"], ensure_ascii=False, separators=(",", ":"))
            chunks.append(ToolInputDeltaChunk(tool_call_id=call_id, input_text_delta=text))
        approval = part.get("approval")
        if isinstance(approval, Mapping) and isinstance(approval.get("id"), str):
            chunks.append(
                approval_request_chunk(
                    approval["id"],
                    call_id,
                    client,
                    reason=approval.get("requestReason"),
                    descriptor=approval.get("descriptor"),
                )
            )
            if isinstance(approval.get("approved"), bool):
                decision = (approval["id"], approval["approved"], approval.get("reason"))
                chunks.extend(approval_response_chunks([decision], client))
        if state == "output-available":
            chunks.append(
                ToolOutputAvailableChunk(
                    tool_call_id=call_id,
                    output=part.get("output"),
                    provider_executed=executed,
                    dynamic=dynamic,
                    preliminary=part.get("preliminary"),
                )
            )
        elif state == "output-error":
            chunks.append(
                ToolOutputErrorChunk(
                    tool_call_id=call_id,
                    error_text=part.get("errorText", ""),
                    provider_executed=executed,
                    dynamic=dynamic,
                )
            )
        elif state == "output-denied":
            chunks.append(ToolOutputDeniedChunk(tool_call_id=call_id))
        return chunks

    @classmethod
    def model_input(cls, part: UIPart) -> tuple[list[types.Part], list[str]]:
        raise RequestError(422, f"a user message cannot contain a {part.type!r} part")
