"""Reading an ADK session's history: the session, not the client, is the source of truth.

The client re-sends its whole message list on every request; the server takes from it only
what the session does not hold yet. These helpers answer the questions that needs: which
events are still live after rewinds, which user message started which invocation, and which
tool calls are waiting for the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.events import Event
from pydantic import JsonValue

from adk_stream_protocol.converter import CONFIRMATION_TOOL

# Keys stamped on every event of a run (RunConfig.custom_metadata), linking ADK invocations
# to the client's message ids and responses.
USER_MESSAGE_ID_KEY = "ui_user_message_id"
ASSISTANT_MESSAGE_ID_KEY = "ui_assistant_message_id"
RESPONSE_ID_KEY = "ui_response_id"
# Set on the runs of responses that hold back text and results (docs/adr/0010).
DEFERRED_KEY = "ui_deferred"


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


@dataclass(frozen=True)
class Confirmation:
    """An ``adk_request_confirmation`` call: ADK asking the user about another call."""

    confirmation_id: str
    call_id: str  # the call it gates
    payload: JsonValue  # what a tool asked for with request_confirmation(payload=...)


@dataclass
class TurnCalls:
    """The tool calls of the current turn (since the last user message) and their state.

    Only the current turn counts: once the user has typed something new, older requests
    are stale and their answers are refused.
    """

    calls: dict[str, str] = field(default_factory=dict)  # call id -> tool name
    call_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    confirmations: dict[str, Confirmation] = field(default_factory=dict)
    browser_calls: set[str] = field(default_factory=set)  # ADK long-running calls
    answered: set[str] = field(default_factory=set)  # calls with a real response
    placeholders: set[str] = field(default_factory=set)  # calls ADK answered "needs approval"
    denied: set[str] = field(default_factory=set)  # calls the user refused
    invocation_id: str | None = None

    def pending_confirmations(self) -> dict[str, Confirmation]:
        return {k: c for k, c in self.confirmations.items() if k not in self.answered}

    def pending_browser_calls(self) -> set[str]:
        return self.browser_calls - self.answered

    def gated_call(self, call_id: str) -> Confirmation | None:
        """The pending confirmation that gates this call, if any."""
        return next(
            (c for c in self.pending_confirmations().values() if c.call_id == call_id), None
        )


def current_turn(events: Sequence[Event]) -> list[Event]:
    for index in range(len(events) - 1, -1, -1):
        if is_user_turn(events[index]):
            return list(events[index:])
    return list(events)


def turn_calls(events: Sequence[Event]) -> TurnCalls:
    """What the current turn asked of tools and of the client, from the stored events."""
    turn = TurnCalls()
    for event in current_turn(events):
        parts = event.content.parts if event.content and event.content.parts else []
        placeholders = event.actions.requested_tool_confirmations if event.actions else {}
        long_running = set(event.long_running_tool_ids or ())
        for part in parts:
            call = part.function_call
            if call and call.id and not event.partial:
                turn.invocation_id = event.invocation_id
                if call.name == CONFIRMATION_TOOL:
                    confirmation = _confirmation(call.id, call.args or {})
                    if confirmation is not None:
                        turn.confirmations[call.id] = confirmation
                else:
                    turn.calls[call.id] = call.name or ""
                    turn.call_args[call.id] = dict(call.args or {})
                    if call.id in long_running:
                        turn.browser_calls.add(call.id)
            response = part.function_response
            if response and response.id:
                if response.name == CONFIRMATION_TOOL and event.author == "user":
                    confirmed = (response.response or {}).get("confirmed")
                    gated = turn.confirmations.get(response.id)
                    if confirmed is False and gated is not None:
                        turn.denied.add(gated.call_id)
                if response.id in placeholders:
                    turn.placeholders.add(response.id)
                else:
                    turn.answered.add(response.id)
    return turn


def _confirmation(confirmation_id: str, args: dict[str, Any]) -> Confirmation | None:
    original = args.get("originalFunctionCall")
    if not isinstance(original, dict) or not original.get("id"):
        return None
    requested = args.get("toolConfirmation")
    payload = requested.get("payload") if isinstance(requested, dict) else None
    return Confirmation(confirmation_id, str(original["id"]), payload)


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
