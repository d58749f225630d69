"""Deciding what one request asks the agent to do (docs/adr/0004-chat-sessions.md).

``plan_turn`` compares the client's message list with the session's history and returns a
``TurnPlan``: the message id to stream under, the new content for ADK (never history the
session already holds), and whether the session must first be rewound (regenerate, edit).
It is a pure function of the request and the session's events, so it is tested without
running anything.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.converter import CONFIRMATION_TOOL
from adk_stream_protocol.errors import RequestError
from adk_stream_protocol.history import (
    USER_MESSAGE_ID_KEY,
    find_user_turn,
    last_user_turn,
    live_events,
    pending_calls,
)
from adk_stream_protocol.inputs import user_content
from adk_stream_protocol.ui_messages import ChatRequest, UIMessage


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


@dataclass
class TurnPlan:
    """What to run for one request."""

    message_id: str  # start.messageId: fresh for a new turn, the continued id otherwise
    new_message: types.Content
    continuation: bool = False
    user_message_id: str | None = None  # the client's id of the user message, if any
    rewind_before_invocation_id: str | None = None
    # Tool results to store before the run: ADK drops a browser tool's result when it shares
    # a message with a confirmation answer, so those go in their own event.
    prior_tool_results: types.Content | None = None
    denied_tool_call_ids: frozenset[str] = field(default_factory=frozenset)


def plan_turn(
    request: ChatRequest,
    events: Sequence[Event],
    new_id: Callable[[], str] = new_message_id,
) -> TurnPlan:
    history = live_events(events)
    last = request.last_message
    if request.trigger == "regenerate-message":
        return _regenerate(last, history, new_id)
    if last.role == "assistant":
        return _continue(request, last, history)
    if last.role != "user":
        raise RequestError(422, "the last message must be a user or assistant message")

    if request.message_id is not None and request.message_id != last.id:
        raise RequestError(422, f"messageId {request.message_id!r} does not name the last message")
    earlier = find_user_turn(history, last.id)
    rewind: str | None = None
    if earlier is not None:
        if request.message_id != last.id:
            raise RequestError(
                409,
                f"message {last.id!r} was already sent in this chat; use regenerate to "
                "answer it again",
            )
        rewind = earlier.invocation_id  # sendMessage({messageId}): the user edited it
    return TurnPlan(
        message_id=new_id(),
        new_message=user_content(last),
        user_message_id=last.id,
        rewind_before_invocation_id=rewind,
    )


def _regenerate(last: UIMessage, history: list[Event], new_id: Callable[[], str]) -> TurnPlan:
    if last.role != "user":
        raise RequestError(422, "regenerate-message needs a user message last")
    previous = last_user_turn(history)
    if previous is None or previous.content is None:
        # Nothing stored for this chat (for example an in-memory store after a restart):
        # answer the message the client holds.
        return TurnPlan(
            message_id=new_id(), new_message=user_content(last), user_message_id=last.id
        )
    stored_id = (previous.custom_metadata or {}).get(USER_MESSAGE_ID_KEY)
    return TurnPlan(
        message_id=new_id(),
        new_message=previous.content,
        user_message_id=stored_id if isinstance(stored_id, str) else last.id,
        rewind_before_invocation_id=previous.invocation_id,
    )


def _continue(request: ChatRequest, last: UIMessage, history: list[Event]) -> TurnPlan:
    """The client answered tool calls of the assistant message it sends last."""
    if request.message_id is not None and request.message_id != last.id:
        raise RequestError(422, f"messageId {request.message_id!r} does not name the last message")
    pending = pending_calls(history)
    confirmations: list[types.Part] = []
    outputs: list[types.Part] = []
    denied: set[str] = set()
    for part in last.tool_parts():
        approval = part.approval
        if approval is not None and approval.approved is not None:
            original = pending.confirmations.pop(approval.id, None)
            if original is not None:
                confirmations.append(_confirmation_response(approval.id, approval.approved))
                if not approval.approved:
                    denied.add(original)
        tool_name = pending.client_calls.get(part.tool_call_id)
        if tool_name is not None and part.state in ("output-available", "output-error"):
            del pending.client_calls[part.tool_call_id]
            outputs.append(
                _tool_output(part.tool_call_id, tool_name, part.output, part.error_text, part.state)
            )
    if not confirmations and not outputs:
        raise RequestError(
            409,
            f"message {last.id!r} answers no pending approval or tool call of this chat",
        )
    if confirmations and outputs:
        return TurnPlan(
            message_id=last.id,
            continuation=True,
            new_message=types.Content(role="user", parts=confirmations),
            prior_tool_results=types.Content(role="user", parts=outputs),
            denied_tool_call_ids=frozenset(denied),
        )
    return TurnPlan(
        message_id=last.id,
        continuation=True,
        new_message=types.Content(role="user", parts=confirmations or outputs),
        denied_tool_call_ids=frozenset(denied),
    )


def _confirmation_response(confirmation_id: str, approved: bool) -> types.Part:
    # ADK's ToolConfirmation forbids extra keys: the client's `reason` must not be passed on.
    return types.Part(
        function_response=types.FunctionResponse(
            name=CONFIRMATION_TOOL, id=confirmation_id, response={"confirmed": approved}
        )
    )


def _tool_output(
    call_id: str, tool_name: str, output: object, error_text: str | None, state: str
) -> types.Part:
    if state == "output-error":
        response: dict[str, object] = {"error": error_text or "the tool failed in the browser"}
    elif isinstance(output, dict):
        response = output
    else:
        response = {"result": output}
    return types.Part(
        function_response=types.FunctionResponse(name=tool_name, id=call_id, response=response)
    )
