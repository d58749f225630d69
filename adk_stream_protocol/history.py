"""Reading an ADK session's history: the session, not the client, is the source of truth.

The client re-sends its whole message list on every request; the server takes from it only
what the session does not hold yet. These helpers answer the questions that needs: which
events are still live after rewinds, which user message started which invocation, and which
tool calls are waiting for the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from google.adk.events import Event

from adk_stream_protocol.converter import CONFIRMATION_TOOL

# Keys stamped on every event of a run (RunConfig.custom_metadata), linking ADK invocations
# to the client's message ids.
USER_MESSAGE_ID_KEY = "ui_user_message_id"
ASSISTANT_MESSAGE_ID_KEY = "ui_assistant_message_id"


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


def is_user_turn(event: Event) -> bool:
    """A message the user typed (or spoke), as opposed to tool results sent for them."""
    if event.author != "user" or not event.content or not event.content.parts:
        return False
    return not any(p.function_response for p in event.content.parts)


def last_user_turn(events: Sequence[Event]) -> Event | None:
    return next((e for e in reversed(events) if is_user_turn(e)), None)


def find_user_turn(events: Sequence[Event], ui_message_id: str) -> Event | None:
    for event in events:
        metadata = event.custom_metadata or {}
        if is_user_turn(event) and metadata.get(USER_MESSAGE_ID_KEY) == ui_message_id:
            return event
    return None


@dataclass
class PendingCalls:
    """Tool calls of the current turn that wait for the client."""

    # confirmation call id -> id of the tool call it gates
    confirmations: dict[str, str] = field(default_factory=dict)
    # tool call id -> tool name, for tools the browser executes (ADK long-running tools)
    client_calls: dict[str, str] = field(default_factory=dict)
    invocation_id: str | None = None

    def __bool__(self) -> bool:
        return bool(self.confirmations or self.client_calls)


def pending_calls(events: Sequence[Event]) -> PendingCalls:
    """Calls since the last user turn that still have no real answer.

    Only the current turn counts: once the user has typed something new, older requests
    are stale and their answers are refused.
    """
    start = 0
    for index in range(len(events) - 1, -1, -1):
        if is_user_turn(events[index]):
            start = index
            break
    pending = PendingCalls()
    answered: set[str] = set()
    for event in events[start:]:
        parts = event.content.parts if event.content and event.content.parts else []
        placeholders = (
            set(event.actions.requested_tool_confirmations or ()) if event.actions else set()
        )
        long_running = set(event.long_running_tool_ids or ())
        for part in parts:
            call = part.function_call
            if call and call.id and not event.partial:
                if call.name == CONFIRMATION_TOOL:
                    original = (call.args or {}).get("originalFunctionCall") or {}
                    if isinstance(original, dict) and original.get("id"):
                        pending.confirmations[call.id] = str(original["id"])
                        pending.invocation_id = event.invocation_id
                elif call.id in long_running:
                    pending.client_calls[call.id] = call.name or ""
                    pending.invocation_id = event.invocation_id
            response = part.function_response
            if response and response.id and response.id not in placeholders:
                answered.add(response.id)
    for call_id in answered:
        pending.confirmations.pop(call_id, None)
        pending.client_calls.pop(call_id, None)
    return pending
