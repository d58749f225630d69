"""Deciding what one request asks the agent to do: the plan step of a turn (docs/adr/0020).

``plan_turn`` (``/stream``; ``/live`` for regenerate and edit) compares the client's message
list with the session's history and returns a ``TurnPlan``: the message id to stream under, the
new content for ADK (never history the session already holds), whether the session must first
be rewound to before a user message's event (regenerate, edit), and for continuations which
approvals and browser results the request answers (``answers.py``). It is a pure function of
the request and the stored events, so it is tested without running anything.

``plan_request`` is that step for a request turn (``POST /stream``, an ai 7 socket's ``send``),
under the chat's lease: the stored session read (or fenced after an unclean takeover), the late
results of a run that lost the chat applied, the plan made, and what must be in the session
before the run starts: a rewind, the results the plan stores in the paused invocation, and the
page's changes to the shared state when no run carries them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.events import Event, EventActions
from google.genai import types

from adk_stream_protocol.coordination.base import ChatLease
from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.confirmations import confirmation_response
from adk_stream_protocol.protocol.inputs import user_content
from adk_stream_protocol.protocol.shared_state import SharedState
from adk_stream_protocol.protocol.tool_calls import ABANDONED_RESULT, turn_calls
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
from adk_stream_protocol.turns.answers import (
    OpenInterrupts,
    check_complete,
    collect_answers,
    take_steering,
)
from adk_stream_protocol.turns.late_results import late_events, settle_late_results
from adk_stream_protocol.turns.recovery import Recovery, recovery_of
from adk_stream_protocol.turns.runners import Runners

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
    # refuses text beside function responses).
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
    # A cut run of this turn to finish: as this response when the request answers nothing new
    # (a retry), else before the new message runs.
    recovery: Recovery | None = None
    state_delta: dict[str, Any] | None = None  # the page's shared state, on the user's event
    # Calls whose late result the plan's step applied: the chat's record changed under the
    # request's join.
    settled_late: list[str] = field(default_factory=list)


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
    abandoned = sorted(calls.pending_page_calls() | calls.gated_calls())
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


def _continue(
    request: ChatRequest, last: UIMessage, history: list[Event], defer_intermediate: bool
) -> TurnPlan:
    """The client answered tool calls of the assistant message it sends last."""
    _check_message_id(request, last)
    calls = turn_calls(current_turn(history))
    view = OpenInterrupts(calls)
    answers = collect_answers(last, view)
    take_steering(answers, last, used_steering_ids(history))
    if answers.empty() and not answers.steering_ids and (recovery := recovery_of(calls)):
        # The same answers again, after the run they started was cut short: finish that run
        # instead of refusing the retry.
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
        # invocation too, and SteeringPlugin puts it into the model's input.
        prior.extend(answers.steering)
        plan.prior_metadata = {STEERING_IDS_KEY: answers.steering_ids}
    if prior:
        plan.prior_tool_results = types.Content(role="user", parts=prior)
    return plan


def _response_part(name: str, call_id: str, response: dict[str, Any]) -> types.Part:
    return types.Part(
        function_response=types.FunctionResponse(name=name, id=call_id, response=response)
    )


async def plan_request(
    runners: Runners,
    user_id: str,
    request: ChatRequest,
    lease: ChatLease,
    *,
    defer_intermediate: bool,
) -> tuple[TurnPlan, SharedState | None]:
    """The request's plan against the stored session, under the chat's lease, and what must
    be stored before its run: a rewind, prior results, the page's state; with the chat's shared
    state, changed by the rewind and the request, for its response. ``defer_intermediate``: a
    continuation holds back what comes before its final answer (``stream_intermediate_results``
    off)."""
    sessions = runners.sessions
    if lease.unclean:  # the former holder lapsed: its writes are refused from now on
        session = await sessions.fence(user_id, request.id, lease.generation)
    else:
        session = await sessions.open(user_id, request.id)
    # Results of a run that lost the chat, before the plan reads how its turn ended.
    settled_late = await settle_late_results(runners, (user_id, request.id))
    if settled_late:
        session = await sessions.open(user_id, request.id)
    plan = plan_turn(
        request,
        session.events,
        defer_intermediate=defer_intermediate,
    )
    plan.settled_late = settled_late
    if settled_late and plan.continuation:
        # The message the response continues shows the output of its calls settled late.
        held = {part.tool_call_id for part in request.last_message.tool_parts()}
        if shown := late_events(session.events, held.intersection(settled_late)):
            plan.replay.append(shown)
    shared_state = runners.shared_state(session.state)
    if plan.rewind_before_event_id:  # ADK's, with the keys it left None removed
        await runners.rewind(session, plan.rewind_before_event_id)
    rewound = bool(plan.rewind_before_event_id) and shared_state is not None
    if rewound or plan.prior_tool_results is not None:
        session = await sessions.open(user_id, request.id)  # after what the rewind gave back
    # Stored in the paused invocation: the calls' results, where the model expects them; the
    # page's state when nothing runs to carry it on the user's event (as ADK does).
    page_state = None if plan.new_message is not None else request.state
    if plan.prior_tool_results is not None or page_state:
        await sessions.service.append_event(
            session,
            Event(
                author="user",
                invocation_id=plan.prior_invocation_id or session.events[-1].invocation_id,
                content=plan.prior_tool_results,
                custom_metadata=plan.prior_metadata,
                actions=EventActions(state_delta=dict(page_state or {})),
            ),
        )
    if shared_state is not None:  # the page is sent what the rewind and its request changed
        shared_state.reset(session.state)
        shared_state.update(request.state)
    plan.state_delta = dict(request.state) if request.state and page_state is None else None
    logger.info(
        "turn user=%s chat=%s trigger=%s continuation=%s rewind=%s",
        user_id,
        request.id,
        request.trigger,
        plan.continuation,
        bool(plan.rewind_before_event_id),
    )
    return plan, shared_state
