"""A resume that finds a cut turn instead of an active response (docs/adr/0032).

``useChat({ resume: true })`` asks ``GET /stream/{chatId}/stream`` for the chat's active
response when the page mounts. When nothing is running but the chat's last turn was cut
short (its process died with a decided approval, a started call or a stored result behind
it), the resume finishes that turn as its response, continuing the same assistant message,
exactly as a retry of the request would. Otherwise there is nothing to resume.
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
from adk_stream_protocol.turns.bridge import Bridge
from adk_stream_protocol.turns.planning import TurnPlan
from adk_stream_protocol.turns.recovery import recovery_of
from adk_stream_protocol.turns.request_turns import RequestTurn
from adk_stream_protocol.turns.response import ChunkSink

logger = logging.getLogger(__name__)


async def begin_resumed_turn(
    bridge: Bridge, chat: ChatKey, sink: ChunkSink, *, on_end: Callable[[], None]
) -> RequestTurn | None:
    """Start finishing the chat's cut turn, or None when it has none (or another request
    holds the chat: that one finishes it). Never creates a chat."""
    lease = await bridge.coordination.leases.try_acquire(chat)
    if lease is None:
        return None
    try:
        plan = await _plan(bridge, chat)
        if plan is None:
            await lease.release()
            return None
        async with bridge.opening_response(chat, lease) as log:
            opened = await bridge.open_response("stream", chat, None, log)
    except BaseException:
        await lease.release()
        raise
    logger.info("resume finishes a cut turn user=%s chat=%s", *chat)
    turn = RequestTurn(bridge, chat, plan, sink, opened=opened, lease=lease, on_end=on_end)
    turn.begin()
    return turn


async def _plan(bridge: Bridge, chat: ChatKey) -> TurnPlan | None:
    session = await bridge.sessions.service.get_session(
        app_name=bridge.sessions.app_name, user_id=chat[0], session_id=chat[1]
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
        defer=not bridge.settings.stream_intermediate_results,
        recovery=recovery,
    )
