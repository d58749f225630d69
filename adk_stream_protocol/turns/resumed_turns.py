"""A resume that finds a cut turn instead of an active response (docs/adr/0032).

``useChat({ resume: true })`` asks ``GET /stream/{chatId}/stream`` for the chat's active
response when the page mounts. When nothing is running but the chat's last turn was cut
short (its process died with a decided approval, a started call or a stored result behind
it), the resume finishes that turn as its response, continuing the same assistant message,
exactly as a retry of the request would. Otherwise there is nothing to resume.

Its client is a resumer: it holds no copy of the message the turn continues (the recipe of
docs/frontend/chats.md leaves it out, and ai 7 and the newest 6.x start a replay from an empty
message), so the response sends it the rebuild of that message after its ``start``, as every
resume of a continuation gets it from the chunk log. ``has_cut_turn`` tells a page reading the
chat back that the chat reads as answering (``active``) for that reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.protocol.tool_calls import turn_calls
from adk_stream_protocol.store.history import (
    ASSISTANT_MESSAGE_ID_KEY,
    current_turn,
    held_responses,
    live_events,
)
from adk_stream_protocol.turns.late_results import settle_late_results
from adk_stream_protocol.turns.openings import Client
from adk_stream_protocol.turns.planning import TurnPlan
from adk_stream_protocol.turns.recovery import recovery_of
from adk_stream_protocol.turns.request_turns import PlannedTurn, RequestTurn
from adk_stream_protocol.turns.response import ChunkSink
from adk_stream_protocol.turns.turn_services import TurnServices

logger = logging.getLogger(__name__)


async def begin_resumed_turn(
    services: TurnServices, chat: ChatKey, sink: ChunkSink, *, on_end: Callable[[], None]
) -> RequestTurn | None:
    """Start finishing the chat's cut turn, or None when it has none (or another request
    holds the chat: that one finishes it). Never creates a chat."""
    lease = await services.coordination.leases.try_acquire(chat)
    if lease is None:
        return None
    responses = services.responses
    try:
        if lease.unclean:  # the former holder lapsed: its writes are refused from now on
            await services.runners.sessions.fence(*chat, lease.generation)
        # Results of a run that lost the chat, before the cut turn is read.
        await settle_late_results(services.runners, chat)
        plan = await _plan(services, chat)
        if plan is None:
            await lease.release()
            return None
        async with responses.opening(chat, lease) as log:
            opened = await responses.open(Client(resumes=True), chat, lease, log, None)
    except BaseException:
        await lease.release()
        raise
    logger.info("resume finishes a cut turn user=%s chat=%s", *chat)
    turn = RequestTurn(services, opened, PlannedTurn(plan), sink, on_end=on_end)
    turn.begin()
    return turn


async def has_cut_turn(services: TurnServices, chat: ChatKey) -> bool:
    """Whether a resume of the chat would finish a cut turn (read from its session)."""
    return await _plan(services, chat) is not None


async def _plan(services: TurnServices, chat: ChatKey) -> TurnPlan | None:
    sessions = services.runners.sessions
    session = await sessions.service.get_session(
        app_name=sessions.app_name, user_id=chat[0], session_id=chat[1]
    )
    if session is None:
        return None
    history = live_events(session.events)
    turn = current_turn(history)
    calls = turn_calls(turn)
    recovery = recovery_of(calls)
    message_id = next(
        (
            stamp
            for event in reversed(turn)
            if isinstance(stamp := (event.custom_metadata or {}).get(ASSISTANT_MESSAGE_ID_KEY), str)
        ),
        None,
    )
    if recovery is None or message_id is None:
        return None
    return TurnPlan(
        message_id=message_id,
        new_message=None,
        continuation=True,
        prior_invocation_id=calls.invocation_id,
        denied_tool_call_ids=frozenset(calls.denied),
        replay=held_responses(history),
        defer=not services.settings.stream_intermediate_results,
        recovery=recovery,
    )
