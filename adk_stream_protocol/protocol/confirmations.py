"""What a confirmation says and carries on the page, and the payload the user answers with
(docs/adr/0041-confirmation-payloads.md).

A tool that asks ``tool_context.request_confirmation(hint=..., payload=...)`` gets, next to
its ``tool-approval-request``, a ``data-approval`` part (every client): the approval's id, the
call it gates, the hint and the payload. An ai 7 client also finds them on the approval
itself (``reason`` → ``approval.requestReason``, ``approvalDescriptor`` →
``approval.descriptor``). The page answers with an edited payload in a
``data-approval-response`` part of the message it sends the decision in, since
``addToolApprovalResponse`` carries only the id, the decision and a reason.
"""

from __future__ import annotations

from typing import Any

from google.genai import types
from pydantic import JsonValue

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk
from adk_stream_protocol.protocol.clients import AiSdkClient
from adk_stream_protocol.protocol.event_values import json_safe
from adk_stream_protocol.protocol.parts.data import DataUIPart
from adk_stream_protocol.protocol.parts.tools import approval_request_chunk
from adk_stream_protocol.protocol.tool_calls import CONFIRMATION_TOOL, Confirmation
from adk_stream_protocol.protocol.ui_messages import APPROVAL_RESPONSE_PART, UIMessage

APPROVAL_PART = "data-approval"
# How ADK words the hint of a declared confirmation (`require_confirmation`): a note to the
# developer, not to the user, and never given on /live, where our own gate asks instead.
_DECLARED_HINT = "Please approve or reject the tool call "


def shown_hint(hint: Any) -> str | None:
    """The hint to show the user: the tool's own words, not ADK's for a declared gate."""
    if not isinstance(hint, str) or not hint or hint.startswith(_DECLARED_HINT):
        return None
    return hint


def approval_request_chunks(
    approval_id: str, call_id: str, hint: str | None, payload: Any, client: AiSdkClient
) -> list[BaseChunk]:
    """``tool-approval-request``, and its ``data-approval`` when there is a hint or a payload."""
    shown = shown_hint(hint)
    payload = json_safe(payload)
    request = approval_request_chunk(approval_id, call_id, client, reason=shown, descriptor=payload)
    if shown is None and payload is None:
        return [request]
    data: dict[str, Any] = {"approvalId": approval_id, "toolCallId": call_id}
    if shown is not None:
        data["hint"] = shown
    if payload is not None:
        data["payload"] = payload
    return [request, DataChunk(type=APPROVAL_PART, id=approval_id, data=data)]


def edited_payloads(message: UIMessage) -> dict[str, JsonValue]:
    """The payloads the user answered with, by approval id: each names an approval of a tool
    part of this message (``ui_messages`` checked its shape and size)."""
    approvals = {p.approval.id for p in message.tool_parts() if p.approval is not None}
    edited: dict[str, JsonValue] = {}
    for part in message.parts:
        if not isinstance(part, DataUIPart) or part.type != APPROVAL_RESPONSE_PART:
            continue
        approval_id = part.id
        if approval_id is None or approval_id not in approvals:
            raise RequestError(
                422,
                f"a {APPROVAL_RESPONSE_PART} part names {approval_id!r}, no approval of "
                f"message {message.id!r}",
            )
        edited[approval_id] = part.data["payload"]
    return edited


def confirmation_response(
    confirmation: Confirmation, *, approved: bool, edited: JsonValue
) -> types.Part:
    """ADK's answer to a confirmation: the decision, and the payload the user edited, else
    the one the tool asked with. ADK's ``ToolConfirmation`` forbids extra keys: the client's
    ``reason`` is not passed on."""
    response: dict[str, Any] = {"confirmed": approved}
    payload = edited if edited is not None else confirmation.payload
    if payload is not None:
        response["payload"] = payload
    return types.Part(
        function_response=types.FunctionResponse(
            name=CONFIRMATION_TOOL, id=confirmation.confirmation_id, response=response
        )
    )
