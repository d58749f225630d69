"""Reading an ADK session's history: the session, not the client, is the source of truth.

The client re-sends its whole message list on every request; the server takes from it only
what the session does not hold yet. These helpers answer the questions that needs: which
events are still live after rewinds, which user message started which invocation, and which
events belong to the current turn (``tool_calls.turn_calls`` reads its calls).
"""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.events import Event

from adk_stream_protocol.protocol.tool_calls import CONFIRMATION_TOOL

# Keys stamped on every event of a run (RunConfig.custom_metadata), linking ADK invocations
# to the client's message ids and responses.
USER_MESSAGE_ID_KEY = "ui_user_message_id"
ASSISTANT_MESSAGE_ID_KEY = "ui_assistant_message_id"
RESPONSE_ID_KEY = "ui_response_id"
# Set on the runs of responses that hold back text and results.
DEFERRED_KEY = "ui_deferred"
# On the user event that adds steering messages to a paused turn: their ids, each taken once.
# Such an event continues its turn; it is no user turn of its own.
STEERING_IDS_KEY = "ui_steering_ids"
# ADK's live flow stores a user message's event itself, without metadata. A ``/live`` run sends
# the message's stamps along in its state delta under this key, and the app's session service
# moves them into the event's ``custom_metadata`` before storing it (``carry_stamps``), so the
# session's state never holds them.
CARRIED_STAMPS_KEY = "adk_stream:stamps"


def carry_stamps(event: Event) -> None:
    """Move the stamps an event carries in its state delta into its ``custom_metadata``."""
    delta = event.actions.state_delta if event.actions is not None else None
    if not delta or CARRIED_STAMPS_KEY not in delta:
        return
    stamps = delta.pop(CARRIED_STAMPS_KEY)
    if isinstance(stamps, dict):
        event.custom_metadata = {**(event.custom_metadata or {}), **stamps}


def live_events(events: Sequence[Event]) -> list[Event]:
    """The events that survive rewinds, in order.

    A rewind event (``actions.rewind_before_invocation_id = X``) removes itself and every
    event from the first event of invocation X up to it.
    """
    kept: list[Event] = []
    for event in events:
        target = event.actions.rewind_before_invocation_id if event.actions else None
        if not target:
            kept.append(event)
            continue
        cut = next((i for i, e in enumerate(kept) if e.invocation_id == target), None)
        if cut is not None:
            del kept[cut:]
    return kept


def ends_on_users_side(events: Sequence[Event]) -> bool:
    """Whether the history's last content is the user's (a message, or results of the model's
    calls): a live model given this history answers it as it connects. ADK leaves a
    confirmation request out of the model's contents, so it does not count."""
    for event in reversed(live_events(events)):
        if event.content is not None and event.content.parts and not event.partial:
            if _asks_confirmation(event):
                continue
            return event.content.role == "user"
    return False


def _asks_confirmation(event: Event) -> bool:
    calls = event.get_function_calls()
    return bool(calls) and all(c.name == CONFIRMATION_TOOL for c in calls)


def is_user_turn(event: Event) -> bool:
    """A message the user typed (or spoke), as opposed to tool results sent for them and
    steering messages added to a paused turn."""
    if event.author != "user" or not event.content or not event.content.parts:
        return False
    if is_steering(event):
        return False
    return not any(p.function_response for p in event.content.parts)


def is_steering(event: Event) -> bool:
    return event.author == "user" and STEERING_IDS_KEY in (event.custom_metadata or {})


def used_steering_ids(events: Sequence[Event]) -> set[str]:
    """The ids of the steering messages the session already took."""
    used: set[str] = set()
    for event in events:
        ids = (event.custom_metadata or {}).get(STEERING_IDS_KEY) if is_steering(event) else None
        if isinstance(ids, list):
            used.update(i for i in ids if isinstance(i, str))
    return used


def last_user_turn(events: Sequence[Event]) -> Event | None:
    return next((e for e in reversed(events) if is_user_turn(e)), None)


def find_user_turn(events: Sequence[Event], ui_message_id: str) -> Event | None:
    for event in events:
        metadata = event.custom_metadata or {}
        if is_user_turn(event) and metadata.get(USER_MESSAGE_ID_KEY) == ui_message_id:
            return event
    return None


def current_turn(events: Sequence[Event]) -> list[Event]:
    """The events since the last user message (all of them if there is none)."""
    for index in range(len(events) - 1, -1, -1):
        if is_user_turn(events[index]):
            return list(events[index:])
    return list(events)


def held_responses(events: Sequence[Event]) -> list[list[Event]]:
    """The agent events of this turn's deferred responses, grouped per response, in order.

    A deferred response delivered only what paused it; the final response of the turn
    delivers the rest of these.
    """
    groups: dict[str, list[Event]] = {}
    for event in current_turn(events):
        metadata = event.custom_metadata or {}
        response_id = metadata.get(RESPONSE_ID_KEY)
        if metadata.get(DEFERRED_KEY) and isinstance(response_id, str) and event.author != "user":
            groups.setdefault(response_id, []).append(event)
    return list(groups.values())
