"""Deciding what one request asks the agent to do: the plan step of a turn (docs/adr/0020).

``collect_answers`` and ``check_complete`` are the one set of rules for what a continuation
answers (approvals, browser results), on both transports: each reads what is pending through
a ``PendingView``. ``take_steering`` adds the steering messages that ride with the answers
(docs/adr/0022).

``plan_turn`` (``/stream``; ``/live`` for regenerate and edit) compares the client's message
list with the session's history and returns a ``TurnPlan``: the message id to stream under, the
new content for ADK (never history the session already holds), whether the session must first
be rewound to before a user message's event (regenerate, edit), and for continuations which
approvals and browser results the request answers. It is a pure function of the request and
the stored events, so it is tested without running anything.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from google.adk.events import Event
from google.genai import types
from pydantic import JsonValue

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.confirmations import confirmation_response, edited_payloads
from adk_stream_protocol.protocol.inputs import browser_result, steering_input, user_content
from adk_stream_protocol.protocol.tool_calls import ABANDONED_RESULT, TurnCalls, turn_calls
from adk_stream_protocol.protocol.ui_messages import ChatRequest, UIMessage
from adk_stream_protocol.store.history import (
    STEERING_IDS_KEY,
    USER_MESSAGE_ID_KEY,
    current_turn,
    find_user_turn,
    held_responses,
    last_user_turn,
    live_events,
    used_steering_ids,
)
from adk_stream_protocol.turns.recovery import Recovery, recovery_of

logger = logging.getLogger(__name__)


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
    rewind_before_event_id: str | None = None
    # Stored before the run, in the paused invocation: browser results (ADK drops them from a
    # message that also answers a confirmation), cancellations, and steering messages (ADK
    # refuses text beside function responses; docs/adr/0022).
    prior_tool_results: types.Content | None = None
    prior_invocation_id: str | None = None
    prior_metadata: dict[str, Any] | None = None  # the stored event's custom_metadata
    denied_tool_call_ids: frozenset[str] = frozenset()
    # Approved browser tools still waiting for the browser: the response hands them back to
    # the client (tool-input-available again) and ADK is not resumed until their results
    # arrive, so the model never sees an approved call without its result.
    rearmed_calls: list[RearmedCall] = field(default_factory=list)
    # Agent events of earlier responses of this turn that held back text and results.
    replay: list[list[Event]] = field(default_factory=list)
    # Hold back text and earlier results if this response pauses for the client again.
    defer: bool = False
    # A cut run of this turn to finish (docs/adr/0032): as this response when the request
    # answers nothing new (a retry), else before the new message runs.
    recovery: Recovery | None = None
    state_delta: dict[str, Any] | None = None  # the page's shared state, on the user's event


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
            rewind_before_event_id=earlier.id,
        )
    # Calls still waiting for the client get a result, so the model's history stays valid;
    # ADK gives the model the latest result of a call, which replaces an approval placeholder.
    calls = turn_calls(current_turn(history))
    abandoned = sorted(calls.pending_browser_calls() | calls.gated_calls())
    cancellations = [_response_part(calls.calls[c], c, dict(ABANDONED_RESULT)) for c in abandoned]
    return TurnPlan(
        message_id=new_id(),
        new_message=user_content(last),
        user_message_id=last.id,
        prior_tool_results=types.Content(role="user", parts=cancellations) if abandoned else None,
        prior_invocation_id=calls.invocation_id,
        recovery=recovery_of(calls),
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
        rewind_before_event_id=previous.id,
    )


@dataclass(frozen=True)
class Decision:
    """The user's answer to one approval request."""

    approval_id: str
    call_id: str
    approved: bool
    payload: JsonValue = None  # the payload the user edited, if any (docs/adr/0041)


@dataclass
class Answers:
    """What a continuation message answers, collected part by part."""

    decisions: list[Decision] = field(default_factory=list)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # browser results
    rearmed: list[str] = field(default_factory=list)  # approved browser calls, no result yet
    # Steering messages not taken before: they go with the answers, never on their own.
    steering_ids: list[str] = field(default_factory=list)
    steering: list[types.Part] = field(default_factory=list)

    @property
    def denied(self) -> set[str]:
        return {d.call_id for d in self.decisions if not d.approved}

    def empty(self) -> bool:
        return not self.decisions and not self.outputs and not self.rearmed


class PendingView(Protocol):
    """What a chat is waiting for from the client: read from the stored session on
    ``/stream`` (``TurnCalls``) and from the running turn on ``/live``."""

    def approval_call(self, approval_id: str) -> str | None:
        """The call an approval of this turn gates (pending or already decided)."""

    def approval_decided(self, approval_id: str) -> bool: ...

    def asks_payload(self, approval_id: str) -> bool:
        """Whether the confirmation asked with a payload, which the user may edit."""

    def pending_approvals(self) -> set[str]: ...

    def waiting_calls(self) -> set[str]:
        """Browser calls without their result (including those still gated)."""

    def gated_calls(self) -> set[str]: ...

    def answered_calls(self) -> set[str]: ...


def collect_answers(message: UIMessage, view: PendingView) -> Answers:
    """The approvals and browser results the client's last assistant message gives.

    An answer counts only if it answers something pending in this user's chat, in the
    current turn; anything else is refused before anything runs. A decision already acted on
    is skipped, so the same approval sent twice runs the tool once.
    """
    answers = Answers()
    edited = edited_payloads(message)
    for part in message.tool_parts():
        call_id = part.tool_call_id
        has_output = part.state in ("output-available", "output-error")
        approval = part.approval
        if approval is not None and approval.approved is not None:
            if view.approval_call(approval.id) != call_id:
                raise RequestError(
                    409, f"approval {approval.id!r} answers no approval pending in this chat"
                )
            if not view.approval_decided(approval.id):
                payload = edited.get(approval.id)
                if payload is not None and not view.asks_payload(approval.id):
                    raise RequestError(422, f"approval {approval.id!r} asked for no payload")
                answers.decisions.append(Decision(approval.id, call_id, approval.approved, payload))
                if approval.approved and call_id in view.waiting_calls():
                    if has_output:
                        answers.outputs[call_id] = browser_result(part)
                    else:
                        answers.rearmed.append(call_id)  # the browser runs it now
                continue
            # Decided before (acts once); a browser call approved earlier may bring its result.
        if not has_output or call_id in view.answered_calls():
            continue  # not answered yet, or the server's own result shown back to it
        if call_id not in view.waiting_calls():
            raise RequestError(409, f"tool output for {call_id!r} answers no pending browser call")
        if call_id in view.gated_calls():
            raise RequestError(
                409, f"tool call {call_id!r} needs the user's approval before its output"
            )
        answers.outputs[call_id] = browser_result(part)
    return answers


def take_steering(answers: Answers, message: UIMessage, used: Collection[str]) -> None:
    """Add to ``answers`` the steering messages of the client's last message that were not
    taken before (a client re-sends them with every continuation): their ids and content."""
    seen = set(used)
    for steering in message.steering_parts():
        if steering.id in seen:
            continue
        seen.add(steering.id)
        answers.steering_ids.append(steering.id)
        answers.steering.extend(steering_input([steering]))


def check_complete(answers: Answers, message_id: str, view: PendingView) -> None:
    """Refuse a continuation that answers nothing, or only part of a step: ADK would call
    the model with some calls still open."""
    if answers.empty() and answers.steering_ids:
        raise RequestError(
            409,
            f"message {message_id!r} adds a steering message but answers no pending approval "
            "or tool call, so there is no turn to add it to; send it in a user message",
        )
    if answers.empty():
        raise RequestError(
            409,
            f"message {message_id!r} answers no pending approval or tool call of this chat "
            "(already answered, or nothing is waiting)",
        )
    if answers.rearmed:
        return  # the step is answered in full once the browser's results arrive
    decided = {d.approval_id for d in answers.decisions}
    unanswered = sorted(
        (view.pending_approvals() - decided)
        | (view.waiting_calls() - set(answers.outputs) - view.gated_calls())
    )
    if unanswered:
        raise RequestError(
            409,
            "answer all pending approvals and tool calls of this step together; still "
            f"open: {', '.join(unanswered)}",
        )


class StoredPending:
    """``PendingView`` of a stored turn (``/stream``): its calls read from the session."""

    def __init__(self, calls: TurnCalls) -> None:
        self._calls = calls

    def approval_call(self, approval_id: str) -> str | None:
        confirmation = self._calls.confirmations.get(approval_id)
        return confirmation.call_id if confirmation is not None else None

    def approval_decided(self, approval_id: str) -> bool:
        return approval_id in self._calls.answered

    def asks_payload(self, approval_id: str) -> bool:
        return self._calls.confirmations[approval_id].payload is not None

    def pending_approvals(self) -> set[str]:
        return set(self._calls.pending_confirmations())

    def waiting_calls(self) -> set[str]:
        return self._calls.pending_browser_calls()

    def gated_calls(self) -> set[str]:
        return self._calls.gated_calls()

    def answered_calls(self) -> set[str]:
        return self._calls.answered


def _continue(
    request: ChatRequest, last: UIMessage, history: list[Event], defer_intermediate: bool
) -> TurnPlan:
    """The client answered tool calls of the assistant message it sends last."""
    _check_message_id(request, last)
    calls = turn_calls(current_turn(history))
    view = StoredPending(calls)
    answers = collect_answers(last, view)
    take_steering(answers, last, used_steering_ids(history))
    if answers.empty() and not answers.steering_ids and (recovery := recovery_of(calls)):
        # The same answers again, after the run they started was cut short: finish that run
        # instead of refusing the retry (docs/adr/0032).
        return TurnPlan(
            message_id=last.id,
            new_message=None,
            continuation=True,
            prior_invocation_id=calls.invocation_id,
            denied_tool_call_ids=frozenset(calls.denied),
            replay=held_responses(history),
            defer=defer_intermediate,
            recovery=recovery,
        )
    check_complete(answers, last.id, view)
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
        # Approved browser tools still waiting for the browser: ADK is not resumed until
        # their results arrive, so the model never sees an approved call without its result.
        plan.rearmed_calls = [
            RearmedCall(c, calls.calls[c], calls.call_args.get(c, {})) for c in answers.rearmed
        ]
        if answers.steering_ids:
            # Not taken: the message comes again with the browser's results.
            logger.debug("steering %s waits for the browser's results", answers.steering_ids)
        return plan
    confirmations = [
        confirmation_response(
            calls.confirmations[d.approval_id], approved=d.approved, edited=d.payload
        )
        for d in answers.decisions
    ]
    outputs = [
        _response_part(calls.calls[call_id], call_id, result)
        for call_id, result in answers.outputs.items()
    ]
    prior: list[types.Part] = []
    if confirmations and outputs:
        # ADK drops the results from a message that also answers a confirmation: they are
        # stored in the paused invocation first.
        plan.new_message = types.Content(role="user", parts=confirmations)
        prior.extend(outputs)
    else:
        plan.new_message = types.Content(role="user", parts=confirmations or outputs)
    if answers.steering:
        # ADK refuses text beside function responses: the steering is stored in the paused
        # invocation too, and SteeringPlugin puts it into the model's input (docs/adr/0022).
        prior.extend(answers.steering)
        plan.prior_metadata = {STEERING_IDS_KEY: answers.steering_ids}
    if prior:
        plan.prior_tool_results = types.Content(role="user", parts=prior)
    return plan


def _response_part(name: str, call_id: str, response: dict[str, Any]) -> types.Part:
    return types.Part(
        function_response=types.FunctionResponse(name=name, id=call_id, response=response)
    )
