"""A long-running call completed by a backend, not by the page (docs/adr/0040).

ADK's long-running tools start work elsewhere and return at once, often with a "pending"
result; the final result comes later, as a ``FunctionResponse`` with the call's id that
resumes the call's invocation. When that result comes from a backend (a payment provider's
webhook, a job queue), ``POST /chats/{chatId}/calls/{callId}/result`` hands it here: the
chat's lease is taken as for any request, the call is looked up in the chat's session, and
the invocation is continued with the result as a turn of its own. Its response has no
client of its own: it goes to the chat's chunk log, where the page's resume
(``GET /stream/{chatId}/stream``, ai 7's ``resume``) follows it; and it is in the session,
where the page's next request finds it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.session import Session
from google.genai import types

from adk_stream_protocol.coordination.base import ChatKey, ChatLease
from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.limits import ResponseSlots
from adk_stream_protocol.foundation.outages import REDIS, SESSION_POOL, SESSION_STORE
from adk_stream_protocol.store.history import (
    ASSISTANT_MESSAGE_ID_KEY,
    current_turn,
    live_events,
)
from adk_stream_protocol.turns.late_results import settle_late_results
from adk_stream_protocol.turns.openings import Client
from adk_stream_protocol.turns.planning import TurnPlan
from adk_stream_protocol.turns.request_turns import PlannedTurn, RequestTurn, take_chat
from adk_stream_protocol.turns.runners import Runners
from adk_stream_protocol.turns.turn_services import TurnServices

logger = logging.getLogger(__name__)

# How long the route waits for the continuation's response to begin, so that a resume sent
# right after the route's answer finds it.
BEGIN_WAIT_SECONDS = 10.0
NO_SUCH_CALL = "no such call in this chat"


@dataclass(frozen=True)
class StoredCall:
    """A long-running call found in the chat's session."""

    call_id: str
    name: str
    invocation_id: str
    message_id: str | None  # the page's last assistant message, when it holds the call


class BeginSignal:
    """The continuation's ``ChunkSink``: its events go only to the chunk log (the response
    has no client of its own); the first of them says the response has begun."""

    def __init__(self) -> None:
        self.begun = asyncio.Event()

    async def send(self, events: Sequence[bytes]) -> None:
        self.begun.set()

    async def close(self) -> None:
        self.begun.set()


def find_long_running_call(events: Sequence[Event], call_id: str) -> StoredCall:
    """The call ``call_id`` of the session, if it is long-running and still waits for its
    final result; else a ``RequestError`` that says why not (404, 409)."""
    history = live_events(events)
    found: tuple[Event, types.FunctionCall] | None = None
    for event in history:
        for call in event.get_function_calls():
            if call.id == call_id:
                found = (event, call)
    if found is None:
        raise RequestError(404, NO_SUCH_CALL)
    event, call = found
    if call_id not in (event.long_running_tool_ids or ()):
        raise RequestError(409, "this call is not long-running: its function gave its result")
    if any(
        response.id == call_id
        for later in history
        if later.author == "user"
        for response in later.get_function_responses()
    ):
        raise RequestError(409, "this call already has its final result")
    turn = current_turn(history)
    message_id = None
    if any(e.invocation_id == event.invocation_id for e in turn):
        message_id = next(
            (
                stamp
                for e in reversed(turn)
                if isinstance(stamp := (e.custom_metadata or {}).get(ASSISTANT_MESSAGE_ID_KEY), str)
            ),
            None,
        )
    return StoredCall(
        call_id=call_id,
        name=call.name or "",
        invocation_id=event.invocation_id,
        message_id=message_id,
    )


def final_result(output: Any = None, error: str | None = None) -> dict[str, Any]:
    """The ``FunctionResponse.response`` of a delivered result: ADK's shapes, a dict as it
    is, any other value under ``result``, a failure as ``{"error": …}``."""
    if error is not None:
        return {"error": error}
    return output if isinstance(output, dict) else {"result": output}


async def continue_completed_call(
    services: TurnServices,
    slots: ResponseSlots,
    chat: ChatKey,
    call_id: str,
    result: dict[str, Any],
) -> StoredCall:
    """Deliver ``result`` as the final result of the chat's long-running call ``call_id`` and
    continue its invocation, in one of the process's response ``slots``; returns once the
    continuation's response has begun."""
    if not slots.try_acquire():
        raise slots.busy_error()
    outages = services.runtime.outages
    try:
        with services.runtime.drain.admission():
            signal, call = await _begin(services, chat, call_id, result, slots.release)
    except Exception as exc:
        slots.release()  # the turn never began, so it will not release it
        refusal = None if isinstance(exc, RequestError) else outages.refusal(exc, "a call")
        if refusal is None:
            raise
        raise refusal from exc
    outages.up(REDIS, SESSION_STORE, SESSION_POOL)
    try:
        await asyncio.wait_for(signal.begun.wait(), BEGIN_WAIT_SECONDS)
    except TimeoutError:
        logger.warning("call result chat=%s: the continuation has not begun yet", chat[1])
    return call


async def _begin(
    services: TurnServices,
    chat: ChatKey,
    call_id: str,
    result: dict[str, Any],
    on_end: Callable[[], None],
) -> tuple[BeginSignal, StoredCall]:
    lease = await take_chat(services, chat)
    responses = services.responses
    try:
        async with responses.opening(chat, lease) as log:
            plan, call = await _plan(services.runners, chat, lease, call_id, result)
            # No request: the chat's stored messages go on.
            opened = await responses.open(Client(), chat, lease, log, None)
    except BaseException:
        await lease.release()
        raise
    logger.info(
        "call result delivered user=%s chat=%s call=%s: continuing its invocation", *chat, call_id
    )
    signal = BeginSignal()
    turn = RequestTurn(services, opened, PlannedTurn(plan), signal, on_end=on_end)
    turn.begin()
    return signal, call


async def _plan(
    runners: Runners, chat: ChatKey, lease: ChatLease, call_id: str, result: dict[str, Any]
) -> tuple[TurnPlan, StoredCall]:
    """The turn that continues the call's invocation with its result, and the call."""
    session: Session | None
    sessions = runners.sessions
    if lease.unclean:  # the former holder lapsed: its writes are refused from now on
        session = await sessions.fence(*chat, lease.generation)
    else:
        session = await sessions.service.get_session(
            app_name=sessions.app_name, user_id=chat[0], session_id=chat[1]
        )
    # Results of a run that lost the chat, before the call is looked for.
    if session is not None and await settle_late_results(runners, chat):
        session = await sessions.service.get_session(
            app_name=sessions.app_name, user_id=chat[0], session_id=chat[1]
        )
    if session is None:  # also another user's chat: the same answer as an unknown call
        raise RequestError(404, NO_SUCH_CALL)
    call = find_long_running_call(session.events, call_id)
    answer = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    name=call.name, id=call_id, response=result
                )
            )
        ],
    )
    plan = TurnPlan(
        # The page's message that holds the call goes on; else the answer is a new one.
        message_id=call.message_id or f"msg-{uuid.uuid4().hex}",
        new_message=answer,
        continuation=True,
        prior_invocation_id=call.invocation_id,
        # The result itself: shown on the call's part when the page's message holds it
        # (ADK does not yield the message it resumes with).
        replay=[[Event(author="user", invocation_id=call.invocation_id, content=answer)]]
        if call.message_id is not None
        else [],
    )
    return plan, call
