"""Deciding what one request asks the agent to do (docs/adr/0004, 0009, 0010).

``plan_turn`` compares the client's message list with the session's history and returns a
``TurnPlan``: the message id to stream under, the new content for ADK (never history the
session already holds), whether the session must first be rewound (regenerate, edit), and
for continuations which approvals and browser results the request answers. It is a pure
function of the request and the stored events, so it is tested without running anything.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.converter import CONFIRMATION_TOOL
from adk_stream_protocol.errors import RequestError
from adk_stream_protocol.history import (
    USER_MESSAGE_ID_KEY,
    Confirmation,
    TurnCalls,
    find_user_turn,
    held_responses,
    last_user_turn,
    live_events,
    turn_calls,
)
from adk_stream_protocol.inputs import browser_result, user_content
from adk_stream_protocol.ui_messages import AnyToolUIPart, ChatRequest, UIMessage

# What the model is told about a browser call the user abandoned by typing something new.
CANCELLED_RESULT = {"error": "Cancelled: the user sent a new message instead of answering."}


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


@dataclass(frozen=True)
class RearmedCall:
    """A browser tool the user approved: the browser runs it now (see ``TurnPlan``)."""

    call_id: str
    tool_name: str
    args: dict[str, Any]


@dataclass
class TurnPlan:
    """What to do for one request."""

    message_id: str  # start.messageId: fresh for a new turn, the continued id otherwise
    # The message for ADK; None when there is nothing to run yet (only re-armed calls).
    new_message: types.Content | None
    continuation: bool = False
    user_message_id: str | None = None  # the client's id of the user message, if any
    rewind_before_invocation_id: str | None = None
    # Tool results stored before the run, in the paused invocation: browser results (ADK
    # drops them from a message that also answers a confirmation) and cancellations.
    prior_tool_results: types.Content | None = None
    prior_invocation_id: str | None = None
    denied_tool_call_ids: frozenset[str] = frozenset()
    # Approved browser tools still waiting for the browser: the response hands them back to
    # the client (tool-input-available again) and ADK is not resumed until their results
    # arrive, so the model never sees an approved call without its result.
    rearmed_calls: list[RearmedCall] = field(default_factory=list)
    # Agent events of earlier responses of this turn that held back text and results.
    replay: list[list[Event]] = field(default_factory=list)
    # Hold back text and earlier results if this response pauses for the client again.
    defer: bool = False


def plan_turn(
    request: ChatRequest,
    events: Sequence[Event],
    *,
    defer_intermediate: bool = True,
    new_id: Callable[[], str] = new_message_id,
) -> TurnPlan:
    history = live_events(events)
    last = request.last_message
    if request.trigger == "regenerate-message":
        return _regenerate(last, history, new_id)
    if last.role == "assistant":
        return _continue(request, last, history, defer_intermediate)
    if last.role != "user":
        raise RequestError(422, "the last message must be a user or assistant message")

    _check_message_id(request, last)
    earlier = find_user_turn(history, last.id)
    if earlier is not None:
        if request.message_id != last.id:
            raise RequestError(
                409,
                f"message {last.id!r} was already sent in this chat; use regenerate to "
                "answer it again",
            )
        # sendMessage({messageId}): the user edited this message.
        return TurnPlan(
            message_id=new_id(),
            new_message=user_content(last),
            user_message_id=last.id,
            rewind_before_invocation_id=earlier.invocation_id,
        )
    # Calls still waiting for the client get a result, so the model's history stays valid;
    # ADK gives the model the latest result of a call, which replaces an approval placeholder.
    calls = turn_calls(history)
    abandoned = sorted(calls.pending_browser_calls() | _gated(calls))
    cancellations = [_response_part(calls.calls[c], c, CANCELLED_RESULT) for c in abandoned]
    return TurnPlan(
        message_id=new_id(),
        new_message=user_content(last),
        user_message_id=last.id,
        prior_tool_results=types.Content(role="user", parts=cancellations) if abandoned else None,
        prior_invocation_id=calls.invocation_id,
    )


def _check_message_id(request: ChatRequest, last: UIMessage) -> None:
    if request.message_id is not None and request.message_id != last.id:
        raise RequestError(422, f"messageId {request.message_id!r} does not name the last message")


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


@dataclass
class _Answers:
    """What a continuation request answers, collected part by part."""

    confirmations: list[types.Part] = field(default_factory=list)
    outputs: list[types.Part] = field(default_factory=list)
    denied: set[str] = field(default_factory=set)
    rearmed: list[str] = field(default_factory=list)
    answered_confirmations: set[str] = field(default_factory=set)
    answered_calls: set[str] = field(default_factory=set)


def _continue(
    request: ChatRequest, last: UIMessage, history: list[Event], defer_intermediate: bool
) -> TurnPlan:
    """The client answered tool calls of the assistant message it sends last.

    An answer counts only if it answers a call that is pending in this user's chat, in the
    current turn; anything else is refused before anything runs.
    """
    _check_message_id(request, last)
    calls = turn_calls(history)
    answers = _Answers()
    for part in last.tool_parts():
        _collect_answer(part, calls, answers)

    plan = TurnPlan(
        message_id=last.id,
        new_message=None,
        continuation=True,
        prior_invocation_id=calls.invocation_id,
        denied_tool_call_ids=frozenset(calls.denied | answers.denied),
        replay=held_responses(history),
        defer=defer_intermediate,
    )
    if answers.rearmed:
        plan.rearmed_calls = [
            RearmedCall(c, calls.calls[c], calls.call_args.get(c, {})) for c in answers.rearmed
        ]
        return plan
    if not answers.confirmations and not answers.outputs:
        raise RequestError(
            409,
            f"message {last.id!r} answers no pending approval or tool call of this chat "
            "(already answered, or nothing is waiting)",
        )
    unanswered = sorted(
        (set(calls.pending_confirmations()) - answers.answered_confirmations)
        | (calls.pending_browser_calls() - answers.answered_calls - _gated(calls))
    )
    if unanswered:
        # ADK would call the model with some calls still open: answer a step as a whole.
        raise RequestError(
            409,
            "answer all pending approvals and tool calls of this step together; still "
            f"open: {', '.join(unanswered)}",
        )
    if answers.confirmations and answers.outputs:
        plan.new_message = types.Content(role="user", parts=answers.confirmations)
        plan.prior_tool_results = types.Content(role="user", parts=answers.outputs)
    else:
        plan.new_message = types.Content(
            role="user", parts=answers.confirmations or answers.outputs
        )
    return plan


def _gated(calls: TurnCalls) -> set[str]:
    return {c.call_id for c in calls.pending_confirmations().values()}


def _collect_answer(part: AnyToolUIPart, calls: TurnCalls, answers: _Answers) -> None:
    call_id = part.tool_call_id
    has_output = part.state in ("output-available", "output-error")
    approval = part.approval
    if approval is not None and approval.approved is not None:
        confirmation = calls.confirmations.get(approval.id)
        if confirmation is None or confirmation.call_id != call_id:
            raise RequestError(
                409, f"approval {approval.id!r} answers no confirmation pending in this chat"
            )
        if approval.id in calls.answered:
            return  # acted on already: the same approval twice runs the tool once
        answers.answered_confirmations.add(approval.id)
        if not approval.approved:
            answers.confirmations.append(_confirmation_response(confirmation, approved=False))
            answers.denied.add(call_id)
            return
        if call_id in calls.pending_browser_calls():
            if not has_output:
                answers.rearmed.append(call_id)
                return
            answers.outputs.append(_browser_result(part, calls))
            answers.answered_calls.add(call_id)
        answers.confirmations.append(_confirmation_response(confirmation, approved=True))
        return
    if not has_output or call_id in calls.answered:
        return  # not answered yet, or the server's own result shown back to it
    if call_id not in calls.pending_browser_calls():
        raise RequestError(409, f"tool output for {call_id!r} answers no pending browser call")
    if calls.gated_call(call_id) is not None:
        raise RequestError(
            409, f"tool call {call_id!r} needs the user's approval before its output"
        )
    answers.outputs.append(_browser_result(part, calls))
    answers.answered_calls.add(call_id)


def _confirmation_response(confirmation: Confirmation, *, approved: bool) -> types.Part:
    # ADK's ToolConfirmation forbids extra keys: the client's `reason` is not passed on. A
    # payload the tool asked for is handed back unchanged.
    response: dict[str, Any] = {"confirmed": approved}
    if confirmation.payload is not None:
        response["payload"] = confirmation.payload
    return _response_part(CONFIRMATION_TOOL, confirmation.confirmation_id, response)


def _browser_result(part: AnyToolUIPart, calls: TurnCalls) -> types.Part:
    call_id = part.tool_call_id
    return _response_part(calls.calls[call_id], call_id, browser_result(part))


def _response_part(name: str, call_id: str, response: dict[str, Any]) -> types.Part:
    return types.Part(
        function_response=types.FunctionResponse(name=name, id=call_id, response=response)
    )
