"""Approvals in live mode (docs/adr/0013-live-approval-gate.md, 0038-live-tool-calls.md).

ADK's live flow cannot confirm tools: a confirmation-gated tool only ever gets a "needs
approval" error, and a tool that asks from its body (``request_confirmation``) only its own
placeholder. So on ``/live`` the server gates them itself. ``LiveApprovalPlugin`` runs around
every tool call of a live run: before it, a tool that requires confirmation (the same
declaration ``/stream`` honours through ADK) waits in ``PendingCalls`` for the user's decision;
after it, a call whose body asked for confirmation waits there too and is run again with the
answer, as ADK's resume does on ``/stream``; and a long-running call whose function returned
nothing is the browser's (ADK's rule: nothing now, the answer comes later): it waits there for
the browser's result, which it returns as its own, so ADK stores it and sends it to the model.
A long-running function that returns a value has answered: that value is the call's result.

A socket that leaves while an approval waits hands it over (``handing_off``, ADR 0047): the
wait ends without an answer and the call ends as ``run_async`` pauses it, with ADK's "needs
confirmation" placeholder and the request in its actions, so that any instance can answer it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from google.adk.events import Event, EventActions
from google.adk.plugins import BasePlugin
from google.adk.tools import BaseTool, FunctionTool, ToolContext
from google.adk.tools.tool_confirmation import ToolConfirmation

from adk_stream_protocol.coordination.base import (
    ChatKey,
    Outcome,
    PendingCalls,
    Verdict,
    WaitingCall,
)
from adk_stream_protocol.plugins.page_states import PageStates
from adk_stream_protocol.plugins.tool_reruns import rerun_confirmed
from adk_stream_protocol.protocol.tool_calls import (
    APPROVAL_CANCELLED_RESULT,
    APPROVAL_TIMEOUT_RESULT,
    DISCONNECTED_RESULT,
    REJECTED_RESULT,
)

_UNANSWERED = {"timeout": APPROVAL_TIMEOUT_RESULT, "cancelled": APPROVAL_CANCELLED_RESULT}


class LiveApprovalPlugin(BasePlugin):
    """Around each tool call of a live run: the user's approval for tools that require it or
    ask for it, and the browser's result for tools the browser executes."""

    def __init__(
        self,
        pending: PendingCalls,
        timeout_seconds: float,
        on_outcome: Callable[[Outcome], None] = lambda outcome: None,
        *,
        page_states: PageStates | None = None,
        append: Callable[[ToolContext, Event], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(name="adk_stream_protocol_live_approvals")
        self._pending = pending
        self._timeout = timeout_seconds
        self._on_outcome = on_outcome  # the traces and metrics (docs/adr/0027)
        # The page's changes that came with an answer, and how the run stores an event of
        # its own (docs/adr/0044).
        self._page_states = page_states or PageStates()
        self._append = append
        # Chats whose socket is leaving: their approvals are handed over, not cancelled.
        self._leaving: set[ChatKey] = set()

    @contextmanager
    def handing_off(self, chat: ChatKey) -> Iterator[None]:
        """While the chat's socket ends its waits: an approval left unanswered pauses its
        call in ADK's shape instead of cancelling it (docs/adr/0047)."""
        self._leaving.add(chat)
        try:
            yield
        finally:
            self._leaving.discard(chat)

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        if tool_context.tool_confirmation is not None:
            return None  # the re-run of an answered confirmation: decided already
        if not await _requires_approval(tool, tool_args, tool_context):
            return None
        outcome = (await self._ask(tool, tool_context)).outcome
        if outcome == "cancelled" and _chat(tool_context) in self._leaving:
            return None  # the tool's own gate pauses the call, as under run_async
        if outcome == "denied":
            return dict(REJECTED_RESULT)
        if outcome != "approved":
            return dict(_UNANSWERED[outcome])
        # Lets the tool's own confirmation check pass, as an approved resume does.
        tool_context.tool_confirmation = ToolConfirmation(confirmed=True)
        return None

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        answer: Any = result
        call_id = tool_context.function_call_id or ""
        asked = tool_context.actions.requested_tool_confirmations
        # Taken out of the call's actions: the answer, not a placeholder, is the call's result.
        while (request := asked.pop(call_id, None)) is not None:
            verdict = await self._ask(tool, tool_context, request)
            if verdict.outcome == "cancelled" and _chat(tool_context) in self._leaving:
                asked[call_id] = request  # paused as run_async pauses it: the request stays
                break
            if verdict.outcome not in ("approved", "denied"):
                return dict(_UNANSWERED[verdict.outcome])
            # As /stream answers ADK: the decision, and the payload the user edited, else the
            # one the tool asked with (docs/adr/0041).
            payload = verdict.payload if verdict.payload is not None else request.payload
            confirmation = ToolConfirmation(
                confirmed=verdict.outcome == "approved", payload=payload
            )
            answer = await rerun_confirmed(tool, tool_args, tool_context, confirmation)
        if tool.is_long_running and not answer:
            answer = await self._pending.wait_result(
                _chat(tool_context), call_id, self._timeout, unwatched=dict(DISCONNECTED_RESULT)
            )
            await self._store_page_state(tool_context)
        return None if answer is result else answer

    async def _ask(
        self, tool: BaseTool, tool_context: ToolContext, asked: ToolConfirmation | None = None
    ) -> Verdict:
        call_id = tool_context.function_call_id or ""
        hint, payload = (asked.hint, asked.payload) if asked is not None else (None, None)
        call = WaitingCall(call_id, tool.name, hint=hint, payload=payload)
        chat = _chat(tool_context)
        verdict = await self._pending.ask_confirmation(chat, call, self._timeout)
        if not (verdict.outcome == "cancelled" and chat in self._leaving):
            self._on_outcome(verdict.outcome)  # a handed-off approval has no outcome yet
        await self._store_page_state(tool_context)
        return verdict

    async def _store_page_state(self, tool_context: ToolContext) -> None:
        """What the page changed with its answer, stored before the call goes on."""
        delta = self._page_states.take(_chat(tool_context))
        if delta and self._append is not None:
            event = Event(
                author="user",
                invocation_id=tool_context.invocation_id,
                actions=EventActions(state_delta=delta),
            )
            await self._append(tool_context, event)


def _chat(tool_context: ToolContext) -> ChatKey:
    return (tool_context.session.user_id, tool_context.session.id)


async def _requires_approval(tool: BaseTool, args: dict[str, Any], context: ToolContext) -> bool:
    if isinstance(tool, FunctionTool):
        return await tool.check_require_confirmation(args, context)
    return False
