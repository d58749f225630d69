"""Tool calls of one turn: the one tracker both transports use, and the results the server
gives a call in the client's stead.

``TurnCalls`` folds ADK events into what a turn asked of tools and of the client: which calls
were made, which the browser runs, which ADK gates behind a confirmation, which have their
result. ``/stream`` folds the stored events of a session (``turn_calls``); ``/live`` folds the
events of its run as they arrive (``observe``). Either way the same rules read the result.

It also reads what a crash leaves behind (docs/adr/0032): the start mark written just before a
tool's body runs (``CALL_STARTED_KEY``), the user's decisions, and whether the turn's run
ended. A turn that waits for nobody and did not end was cut short, and ``interrupted`` says so.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from google.adk.events import Event, EventActions
from google.genai import types
from pydantic import JsonValue

from adk_stream_protocol.protocol.interrupts import PageCall, page_call_kind, waits_for_page

# ADK's internal tool for human confirmation. It becomes `tool-approval-request` on the wire,
# never a tool part of its own.
CONFIRMATION_TOOL = "adk_request_confirmation"


def _error(text: str) -> Mapping[str, str]:
    return MappingProxyType({"error": text})


# What a call returns to the model when it does not run, or the client never answers it
# (read-only: each use takes a copy, so nothing can change them for the next call).
REJECTED_RESULT = _error("This tool call is rejected.")
APPROVAL_CANCELLED_RESULT = _error("The approval request was cancelled; the tool did not run.")
APPROVAL_TIMEOUT_RESULT = _error("The approval request timed out; the tool did not run.")
BROWSER_TIMEOUT_RESULT = _error("The browser did not return the tool's result in time.")
ABANDONED_RESULT = _error("Cancelled: the user sent a new message instead of answering.")
# A call whose body started in a process that stopped before its result was stored: it may or
# may not have done its work, and it is never run again automatically.
OUTCOME_UNKNOWN_RESULT = _error(
    "The server stopped while this tool was running; whether it completed is unknown. "
    "It was not run again."
)
# A call the model made that never started: the server stopped first.
NOT_STARTED_RESULT = _error("The server stopped before this tool started; it did not run.")

# Custom metadata of the content-less event written just before a tool's body runs: the
# call's id (plugins/tool_starts.py). A start with no result after it is a call whose outcome
# is unknown.
CALL_STARTED_KEY = "ui_call_started"
# Beside it when the tool is declared idempotent (plugins/idempotency.py): a start without a
# result is then run again under the same call id, not answered "outcome unknown".
CALL_IDEMPOTENT_KEY = "ui_call_idempotent"
# And the fencing token the tool was given, for whoever audits the chat.
CALL_TOKEN_KEY = "ui_call_token"
DISCONNECTED_RESULT = _error("Cancelled: the user left before answering; the tool did not run.")
# Custom metadata on the results the server records in a call's stead: call id -> how it got
# that result ("unknown", "not-started": a cut run's; "rerun": run again, docs/adr/0074;
# "late": handed over by a run that lost the chat, docs/adr/0073).
CALL_OUTCOME_KEY = "ui_call_outcome"


@dataclass(frozen=True)
class RecordedResult:
    """A result the server records for a call, in the call's agent's name."""

    author: str
    call_id: str
    tool_name: str
    outcome: str  # the value under CALL_OUTCOME_KEY
    response: dict[str, Any]


def recorded_results(
    results: Sequence[RecordedResult],
    invocation_id: str,
    *,
    branch: str | None = None,
    actions: EventActions | None = None,
) -> Event:
    """One event holding ``results`` (of one author), as ADK stores a tool's result."""
    parts = [
        types.Part(
            function_response=types.FunctionResponse(
                name=r.tool_name, id=r.call_id, response=r.response
            )
        )
        for r in results
    ]
    return Event(
        author=results[0].author,
        invocation_id=invocation_id,
        branch=branch,
        content=types.Content(role="user", parts=parts),
        actions=actions or EventActions(),
        custom_metadata={CALL_OUTCOME_KEY: {r.call_id: r.outcome for r in results}},
    )


@dataclass(frozen=True)
class Confirmation:
    """An ``adk_request_confirmation`` call: ADK asking the user about another call."""

    confirmation_id: str
    call_id: str  # the call it gates
    payload: JsonValue  # what a tool asked for with request_confirmation(payload=...)


@dataclass
class TurnCalls:
    """The tool calls of a turn (or of one response of it) and their state.

    Only the current turn counts: once the user has typed something new, older requests are
    stale and their answers are refused.
    """

    calls: dict[str, str] = field(default_factory=dict)  # call id -> tool name
    call_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    authors: dict[str, str] = field(default_factory=dict)  # call id -> the agent that made it
    branches: dict[str, str | None] = field(default_factory=dict)  # call id -> its ADK branch
    confirmations: dict[str, Confirmation] = field(default_factory=dict)
    # Calls the page answers with addToolOutput (interrupts.py): a long-running tool the
    # browser runs, an input request, a credential request; call id -> its kind.
    page_calls: dict[str, PageCall] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)  # calls (and confirmations) with a result
    denied: set[str] = field(default_factory=set)  # calls the user refused
    invocation_id: str | None = None
    # The user's answers to confirmations: confirmation id -> approved.
    decisions: dict[str, bool] = field(default_factory=dict)
    # The payload an approval came with (an edited one): confirmation id -> it.
    approval_payloads: dict[str, Any] = field(default_factory=dict)
    # Calls whose body started (a start mark) with no result of any kind after the mark.
    open_starts: set[str] = field(default_factory=set)
    # Calls whose start mark says the tool is declared idempotent.
    idempotent_starts: set[str] = field(default_factory=set)
    # Whether the turn's last event ended the run: a model answer without calls, or an error.
    ended: bool = False

    def observe(self, event: Event) -> None:
        """Take in one event's calls and results (partial events repeat in the final one)."""
        if event.partial:
            return
        if self._observe_start(event.custom_metadata or {}):
            return
        if event.error_code:
            self.ended = True  # an error, or the run was aborted: ADK sealed the invocation
            return
        if not event.content or not event.content.parts:
            return
        self.ended = _ends_run(event, self.page_calls)
        # ADK's "needs approval" stand-in result is not the call's result.
        placeholders = event.actions.requested_tool_confirmations if event.actions else {}
        long_running = set(event.long_running_tool_ids or ())
        for part in event.content.parts:
            call = part.function_call
            if call and call.id:
                self.invocation_id = event.invocation_id
                if call.name == CONFIRMATION_TOOL:
                    confirmation = _confirmation(call.id, call.args or {})
                    if confirmation is not None:
                        self.confirmations[call.id] = confirmation
                else:
                    self.calls[call.id] = call.name or ""
                    self.authors[call.id] = event.author
                    self.branches[call.id] = event.branch
                    self.call_args[call.id] = dict(call.args or {})
                    if waits_for_page(call, long_running):
                        self.page_calls[call.id] = page_call_kind(call.name or "")
            response = part.function_response
            if response and response.id:
                self.open_starts.discard(response.id)  # the placeholder, too, ends a start
            if response and response.id and response.id not in placeholders:
                self.answered.add(response.id)
                if response.name == CONFIRMATION_TOOL and event.author == "user":
                    answer = response.response or {}
                    approved = answer.get("confirmed") is True
                    self.decisions[response.id] = approved
                    if approved and "payload" in answer:
                        self.approval_payloads[response.id] = answer["payload"]
                    gated = self.confirmations.get(response.id)
                    if gated is not None and not approved:
                        self.denied.add(gated.call_id)

    def _observe_start(self, metadata: Mapping[str, Any]) -> bool:
        """Take in a start mark, if the event is one."""
        started = metadata.get(CALL_STARTED_KEY)
        if not isinstance(started, str):
            return False
        self.open_starts.add(started)
        if metadata.get(CALL_IDEMPOTENT_KEY) is True:
            self.idempotent_starts.add(started)
        self.ended = False
        return True

    def ask(self, confirmation: Confirmation) -> None:
        """A confirmation asked outside the events this tracker folds: a live run's gate
        asks itself, and stores the request in the session as ADK's."""
        self.confirmations[confirmation.confirmation_id] = confirmation

    def pending_confirmations(self) -> dict[str, Confirmation]:
        return {k: c for k, c in self.confirmations.items() if k not in self.answered}

    def pending_page_calls(self) -> set[str]:
        """Calls the page answers (interrupts.py) still without their answer."""
        return set(self.page_calls) - self.answered

    def gated_calls(self) -> set[str]:
        """Calls waiting for the user's approval."""
        return {c.call_id for c in self.pending_confirmations().values()}

    def unsettled(self) -> set[str]:
        """Calls made that have no result yet."""
        return set(self.calls) - self.answered

    def waiting_for_client(self) -> bool:
        return bool(self.pending_confirmations() or self.pending_page_calls())

    def interrupted(self) -> bool:
        """The turn's run stopped before it ended, with nothing left for the client to answer:
        its process died, or the store failed under it. Its invocation can be resumed."""
        return self.invocation_id is not None and not self.ended and not self.waiting_for_client()

    def approvals(self) -> dict[str, Any]:
        """The calls the user approved: call id -> the approval's payload (None: as asked)."""
        return {
            c.call_id: self.approval_payloads.get(k)
            for k, c in self.confirmations.items()
            if self.decisions.get(k)
        }

    def decided_unrun(self) -> set[str]:
        """Calls the user approved or denied that have no result and never started: the
        resumed invocation acts on the decision (runs or refuses them) once."""
        decided = {c.call_id for k, c in self.confirmations.items() if k in self.decisions}
        return decided - self.answered - self.open_starts


def _ends_run(event: Event, long_running: Collection[str]) -> bool:
    """Whether a run may end with this event: the model's answer, or results after which ADK
    calls no model (a summary skipped, an escalation, long-running calls that pause it)."""
    if event.author == "user":
        return False
    parts = event.content.parts if event.content and event.content.parts else []
    if any(p.function_call for p in parts):
        return False
    responses = [p.function_response for p in parts if p.function_response]
    if not responses:
        return True
    actions = event.actions
    if actions is not None and (actions.skip_summarization or actions.escalate):
        return True
    return all(r.id in long_running for r in responses)


def turn_calls(events: Iterable[Event]) -> TurnCalls:
    """What a turn asked of tools and of the client, from its stored events."""
    calls = TurnCalls()
    for event in events:
        calls.observe(event)
    return calls


def _confirmation(confirmation_id: str, args: dict[str, Any]) -> Confirmation | None:
    original = args.get("originalFunctionCall")
    if not isinstance(original, dict) or not original.get("id"):
        return None
    requested = args.get("toolConfirmation")
    payload = requested.get("payload") if isinstance(requested, dict) else None
    return Confirmation(confirmation_id, str(original["id"]), payload)
