"""What a continuation answers: the approvals and browser results the client's last assistant
message gives, checked against what the chat waits for.

``collect_answers`` and ``check_complete`` are the one set of rules for that on every
transport: each reads what is pending through ``OpenInterrupts``, the one view of what a turn
waits for (docs/adr/0057), made from the stored session on ``/stream`` and from the running
turn on ``/live``. ``take_steering`` adds the steering messages that ride with the answers.
"""

from __future__ import annotations

from collections.abc import Collection, Set
from dataclasses import dataclass, field
from typing import Any

from google.genai import types
from pydantic import JsonValue

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.confirmations import edited_payloads
from adk_stream_protocol.protocol.inputs import browser_result, steering_input
from adk_stream_protocol.protocol.interrupts import answer_problem
from adk_stream_protocol.protocol.parts.tools import AnyToolUIPart
from adk_stream_protocol.protocol.tool_calls import TurnCalls
from adk_stream_protocol.protocol.ui_messages import UIMessage


@dataclass(frozen=True)
class Decision:
    """The user's answer to one approval request."""

    approval_id: str
    call_id: str
    approved: bool
    payload: JsonValue = None  # the payload the user edited, if any


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


def collect_answers(message: UIMessage, view: OpenInterrupts) -> Answers:
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
                        answers.outputs[call_id] = _answer(part, view)
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
        answers.outputs[call_id] = _answer(part, view)
    return answers


def _answer(part: AnyToolUIPart, view: OpenInterrupts) -> dict[str, Any]:
    result = browser_result(part)
    view.check_answer(part.tool_call_id, result)
    return result


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


def check_complete(answers: Answers, message_id: str, view: OpenInterrupts) -> None:
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


class OpenInterrupts:
    """What a turn waits for from the page: the one view ``collect_answers`` and
    ``check_complete`` read, on every transport.

    It reads the turn's calls as its session holds them: ADK's pause on ``run_async``; on
    ``run_live`` the gate's, which it stores the same way and the live turn folds as it asks
    (``TurnCalls.ask``). A live turn adds what its run has not stored yet: the browser's
    results the page gave (``delivered``), the calls the user denied (``denied``), whose
    refusal reaches the events with the rest of their step, and which approvals the gate
    still holds (``held``): one whose wait ended (it timed out, or was cancelled) is not open,
    even before its call's result reaches the turn. ``held`` is None for a stored turn, where
    the session alone says.
    """

    def __init__(
        self,
        calls: TurnCalls,
        *,
        delivered: Set[str] = frozenset(),
        denied: Set[str] = frozenset(),
        held: Set[str] | None = None,
    ) -> None:
        self._calls = calls
        self._delivered = delivered
        self._denied = denied
        pending = calls.pending_confirmations()
        if held is not None:
            pending = {k: c for k, c in pending.items() if k in held}
        self._pending = pending

    def approval_call(self, approval_id: str) -> str | None:
        """The call an approval of this turn gates (pending or already decided)."""
        confirmation = self._calls.confirmations.get(approval_id)
        return confirmation.call_id if confirmation is not None else None

    def approval_decided(self, approval_id: str) -> bool:
        return approval_id not in self._pending

    def asks_payload(self, approval_id: str) -> bool:
        """Whether the confirmation asked with a payload, which the user may edit."""
        return self._calls.confirmations[approval_id].payload is not None

    def pending_approvals(self) -> set[str]:
        return set(self._pending)

    def waiting_calls(self) -> set[str]:
        """Calls the page answers (browser tools, input and credential requests) without
        their answer (including those still gated)."""
        return self._calls.pending_page_calls() - self._delivered - self._denied

    def check_answer(self, call_id: str, result: dict[str, Any]) -> None:
        """Refuse an answer that does not fit what its call asked (an input request's
        ``response_schema``, a credential request's ``authConfig``): nothing is resumed."""
        kind = self._calls.page_calls[call_id]
        problem = answer_problem(kind, self._calls.call_args.get(call_id, {}), result)
        if problem is not None:
            raise RequestError(
                422, f"the answer to {kind.value} request {call_id!r} does not fit it: {problem}"
            )

    def gated_calls(self) -> set[str]:
        return {c.call_id for c in self._pending.values()}

    def answered_calls(self) -> set[str]:
        return self._calls.answered | self._delivered
