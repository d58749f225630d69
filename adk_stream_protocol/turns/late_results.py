"""Late results, applied by the chat's holder (docs/adr/0073).

A run that lost its chat (paused or starved past its lease, then fenced off by the next
holder) may still finish a tool: the money moved, but its result's append is refused as stale,
and a kept result is given up once another holder has the chat. ``ResultOutbox`` hands such
results to the chat index instead of losing them; the stale run never writes the session
itself.

Whoever takes the chat applies them under its lease, after any fence and before it decides
how to finish a cut turn (``settle_late_results``). Per late result for call X:

- X has no result in the session (a start without a result): the late result becomes X's
  result, so the cut turn is finished with it, not with *outcome unknown*;
- X's last result is one the server recorded (*outcome unknown*, or *not started*): the late
  result is stored after it, marked ``late``; ADK gives a call its last response, so the model
  reads the real result from the chat's next turn on;
- X ended otherwise (a real result, a rerun's): the late result is dropped (INFO).

Then it is forgotten. An applied result also settles X's part in the chat's record
(``GET /chats/{chatId}``): output available, with the tool's output. A response that continues
the message holding X (a retry) also sends X's output on it (``late_events``, replayed); no
other response does, since its message does not hold X.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any, Literal

from google.adk.events import Event, EventActions
from google.adk.sessions import Session

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.protocol.message_fold import MessageFold
from adk_stream_protocol.protocol.parts.tools import result_chunk
from adk_stream_protocol.protocol.tool_calls import (
    CALL_OUTCOME_KEY,
    RecordedResult,
    recorded_results,
    turn_calls,
)
from adk_stream_protocol.store.chat_index import ChatIndex, LateResult
from adk_stream_protocol.store.history import current_turn, live_events
from adk_stream_protocol.turns.runners import Runners

logger = logging.getLogger(__name__)

# The outcome an applied late result is marked with (``CALL_OUTCOME_KEY``).
LATE_OUTCOME = "late"
# What the server records in a call's stead, which a late result replaces.
_SERVER_OUTCOMES = frozenset({"unknown", "not-started"})

CallState = Literal["missing", "open", "recorded", "finished"]


async def settle_late_results(runners: Runners, chat: ChatKey) -> list[str]:
    """Apply the chat's late results; the calls whose result they became. The caller holds
    the chat's lease and has fenced off a former holder. A store that fails raises (the turn
    fails as for any store failure); what was not yet applied stays for the next turn."""
    index = runners.outbox.late
    if index is None:
        return []
    app, (user_id, chat_id) = runners.sessions.app_name, chat
    try:
        pending = await index.late_results(app, user_id, chat_id)
    except Exception as exc:  # a store that is down is a 503, as opening the chat is
        refusal = runners.sessions.outages.refusal(exc, f"reading late results of chat={chat_id}")
        if refusal is None:
            raise
        raise refusal from exc
    if not pending:
        return []
    session = await runners.sessions.service.get_session(
        app_name=app, user_id=user_id, session_id=chat_id
    )
    applied: dict[str, dict[str, Any]] = {}
    for late in pending:
        state = call_state(session.events, late.call_id) if session is not None else "missing"
        if session is not None and state in ("open", "recorded"):
            await _append(runners, session, late)
            applied[late.call_id] = late.response
            logger.info(
                "late result applied chat=%s call=%s tool=%s (the call was %s)",
                chat_id,
                late.call_id,
                late.tool_name,
                "without a result" if state == "open" else "recorded as outcome unknown",
            )
        elif state == "finished":
            logger.info(
                "late result dropped: already finished under the same key chat=%s call=%s",
                chat_id,
                late.call_id,
            )
        else:
            logger.info("late result dropped: no such call chat=%s call=%s", chat_id, late.call_id)
        await index.drop_late_result(app, user_id, chat_id, late.call_id)
    if applied:
        await _settle_record(index, app, chat, applied)
    return list(applied)


def late_events(events: Sequence[Event], call_ids: Collection[str]) -> list[Event]:
    """The events that applied late results of these calls."""
    return [
        event
        for event in events
        if isinstance(outcomes := (event.custom_metadata or {}).get(CALL_OUTCOME_KEY), dict)
        and any(outcomes.get(call_id) == LATE_OUTCOME for call_id in call_ids)
    ]


def call_state(events: Sequence[Event], call_id: str) -> CallState:
    """Where call ``call_id`` stands in the session: not there, started without a result, its
    last result one the server recorded in its stead, or ended otherwise."""
    made, outcome = False, None
    answered = False
    for event in live_events(events):  # a call a rewind removed is no longer the chat's
        if event.partial or not event.content or not event.content.parts:
            continue
        placeholders = event.actions.requested_tool_confirmations if event.actions else {}
        for part in event.content.parts:
            if part.function_call is not None and part.function_call.id == call_id:
                made = True
            response = part.function_response
            if response is not None and response.id == call_id and call_id not in placeholders:
                answered = True
                outcomes = (event.custom_metadata or {}).get(CALL_OUTCOME_KEY)
                outcome = outcomes.get(call_id) if isinstance(outcomes, dict) else None
    if not made:
        return "missing"
    if not answered:
        return "open"
    return "recorded" if outcome in _SERVER_OUTCOMES else "finished"


async def _append(runners: Runners, session: Session, late: LateResult) -> None:
    """The late result as the call's result, in its agent's name and invocation. A turn that
    had ended stays ended (``skip_summarization``: no model is owed an answer to it); a turn
    cut short stays to be finished, now with this result."""
    ended = not turn_calls(current_turn(live_events(session.events))).interrupted()
    recorded = RecordedResult(
        late.author, late.call_id, late.tool_name, LATE_OUTCOME, late.response
    )
    actions = EventActions(skip_summarization=True if ended else None)
    await runners.sessions.service.append_event(
        session, recorded_results([recorded], late.invocation_id, actions=actions)
    )


async def _settle_record(
    index: ChatIndex, app: str, chat: ChatKey, applied: dict[str, dict[str, Any]]
) -> None:
    """The calls' parts in the chat's record, as the page would fold their results."""
    user_id, chat_id = chat
    record = await index.get_chat(app, user_id, chat_id)
    if record is None:
        return
    messages = list(record.messages)
    changed = False
    for call_id, response in applied.items():
        at = _holding(messages, call_id)
        if at is None:
            continue
        fold = MessageFold([messages[at]])
        fold.apply(result_chunk(call_id, response, denied=False).to_wire_dict())
        messages[at] = fold.messages[0]
        changed = True
    if changed:
        await index.record_messages(app, user_id, chat_id, messages, create=False)


def _holding(messages: Sequence[dict[str, Any]], call_id: str) -> int | None:
    """The last message with a tool part for the call."""
    for at in range(len(messages) - 1, -1, -1):
        parts = messages[at].get("parts") or []
        if any(isinstance(p, dict) and p.get("toolCallId") == call_id for p in parts):
            return at
    return None
