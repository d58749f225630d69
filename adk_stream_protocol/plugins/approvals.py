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

Each approval is stored in the session as ``run_async`` stores ADK's own pause, when it is
asked (docs/adr/0057): the call's "needs confirmation" placeholder with the request in its
actions, then the ``adk_request_confirmation`` call under the approval's id; and its end when
it ends: the user's answer, or the server's result for a wait that timed out or was cancelled.
So what a chat waits for is read from its session on every transport, and a socket that
leaves while an approval waits (``pausing_on_leave``) has nothing to convert: the wait ends without
an answer, the call pauses as under ``run_async``, and any instance answers it from the
session.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from google.adk.events import Event, EventActions
from google.adk.plugins import BasePlugin
from google.adk.tools import BaseTool, FunctionTool, ToolContext
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from adk_stream_protocol.coordination.base import (
    ChatKey,
    Outcome,
    PendingCalls,
    Verdict,
    WaitingCall,
)
from adk_stream_protocol.plugins.page_states import PageStates
from adk_stream_protocol.plugins.tool_reruns import rerun_confirmed
from adk_stream_protocol.protocol.confirmations import confirmation_response
from adk_stream_protocol.protocol.tool_calls import (
    APPROVAL_CANCELLED_RESULT,
    APPROVAL_TIMEOUT_RESULT,
    CONFIRMATION_TOOL,
    DISCONNECTED_RESULT,
    REJECTED_RESULT,
    Confirmation,
)

_UNANSWERED = {"timeout": APPROVAL_TIMEOUT_RESULT, "cancelled": APPROVAL_CANCELLED_RESULT}

# ADK's own result of a call that waits for confirmation (``FunctionTool``'s gate): what the
# stored history holds for a declared confirmation's call until the answer, as under
# ``run_async``.
NEEDS_CONFIRMATION_RESULT = {
    "error": "This tool call requires confirmation, please approve or reject."
}


def _declared_request(tool_name: str) -> ToolConfirmation:
    """The request ``FunctionTool``'s gate makes for a declared confirmation, in its words (a
    note to the developer: ``shown_hint`` keeps it from the page)."""
    return ToolConfirmation(
        hint=f"Please approve or reject the tool call {tool_name}() by responding with a "
        "FunctionResponse with an expected ToolConfirmation payload."
    )


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
        append: Callable[[ToolContext, Event], Awaitable[None]],
    ) -> None:
        super().__init__(name="adk_stream_protocol_live_approvals")
        self._pending = pending
        self._timeout = timeout_seconds
        self._on_outcome = on_outcome  # the traces and metrics
        # The page's changes that came with an answer, and how the run stores an event of its
        # own: those, and each approval's pause and end.
        self._page_states = page_states or PageStates()
        self._append = append
        # Chats whose socket is leaving: their approvals stay paused, not cancelled.
        self._leaving: set[ChatKey] = set()

    @contextmanager
    def pausing_on_leave(self, chat: ChatKey) -> Iterator[None]:
        """While the chat's socket ends its waits: an approval left unanswered stays paused,
        as stored when it was asked, instead of being cancelled."""
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
        outcome = (
            await self._ask(tool, tool_args, tool_context, NEEDS_CONFIRMATION_RESULT)
        ).outcome
        if self._paused(tool_context, outcome):
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
            # A socket that left pauses the call as run_async pauses it: the request stays.
            # Asked again then (a declared confirmation's own gate), it was stored already.
            if self._paused(tool_context):
                asked[call_id] = request
                break
            placeholder = answer if isinstance(answer, dict) else {"result": answer}
            verdict = await self._ask(tool, tool_args, tool_context, placeholder, request)
            if self._paused(tool_context, verdict.outcome):
                asked[call_id] = request
                break
            if verdict.outcome not in ("approved", "denied"):
                return dict(_UNANSWERED[verdict.outcome])
            # As /stream answers ADK: the decision, and the payload the user edited, else the
            # one the tool asked with.
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
        self,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        placeholder: dict[str, Any],
        asked: ToolConfirmation | None = None,
    ) -> Verdict:
        """The user's answer to a confirmation of the call, stored before and after the wait
        as ``run_async`` stores ADK's pause: ``placeholder`` is the call's result meanwhile,
        ``asked`` what its body asked with (None: a declared confirmation)."""
        call_id = tool_context.function_call_id or ""
        hint, payload = (asked.hint, asked.payload) if asked is not None else (None, None)
        approval_id = f"apr_{uuid.uuid4().hex}"  # named here: stored before the wait starts
        call = WaitingCall(call_id, tool.name, approval_id, hint=hint, payload=payload)
        chat = _chat(tool_context)
        request = asked if asked is not None else _declared_request(tool.name)
        original = types.FunctionCall(id=call_id, name=tool.name, args=tool_args)
        for event in _pause(tool_context, approval_id, original, placeholder, request):
            await self._append(tool_context, event)
        verdict = await self._pending.ask_confirmation(chat, call, self._timeout)
        if not self._paused(tool_context, verdict.outcome):
            self._on_outcome(verdict.outcome)  # a paused approval has no outcome yet
            confirmation = Confirmation(approval_id, call_id, payload)
            await self._append(tool_context, _end(tool_context, confirmation, verdict))
        await self._store_page_state(tool_context)
        return verdict

    def _paused(self, tool_context: ToolContext, outcome: Outcome = "cancelled") -> bool:
        """Whether the call pauses rather than ends: its socket is leaving, and the wait, if
        any, ended for that reason (cancelled), not with an answer or a timeout."""
        return outcome == "cancelled" and _chat(tool_context) in self._leaving

    async def _store_page_state(self, tool_context: ToolContext) -> None:
        """What the page changed with its answer, stored before the call goes on."""
        delta = self._page_states.take(_chat(tool_context))
        if delta:
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


def _pause(
    tool_context: ToolContext,
    approval_id: str,
    original: types.FunctionCall,
    placeholder: dict[str, Any],
    request: ToolConfirmation,
) -> list[Event]:
    """ADK's pause of ``original`` as ``run_async`` stores it: the call's placeholder result
    with the request in its actions (ADK's resume checks that the request was made), then the
    ``adk_request_confirmation`` call, long-running, under the approval's id (as ADK's
    ``generate_request_confirmation_event`` builds it). Each in an event of its own: ADK
    leaves the confirmation's events out of the model's contents, not the placeholder's."""
    response = types.FunctionResponse(name=original.name, id=original.id, response=placeholder)
    confirmation = types.FunctionCall(
        name=CONFIRMATION_TOOL,
        id=approval_id,
        args={
            "originalFunctionCall": original.model_dump(exclude_none=True, by_alias=True),
            "toolConfirmation": request.model_dump(by_alias=True, exclude_none=True),
        },
    )
    return [
        _run_event(
            tool_context,
            types.Part(function_response=response),
            actions=EventActions(
                skip_summarization=True,
                requested_tool_confirmations={original.id or "": request},
            ),
        ),
        _run_event(
            tool_context,
            types.Part(function_call=confirmation),
            role="model",
            long_running={approval_id},
        ),
    ]


def _end(tool_context: ToolContext, confirmation: Confirmation, verdict: Verdict) -> Event:
    """How an approval's wait ended, stored under its id as ``run_async`` stores an answer:
    the user's decision; or, for a wait that timed out or was cancelled, the server's result,
    authored by the agent, which ADK's resume (it acts on the user's answers only) ignores."""
    if verdict.outcome in ("approved", "denied"):
        part = confirmation_response(
            confirmation, approved=verdict.outcome == "approved", edited=verdict.payload
        )
        return _run_event(tool_context, part, author="user")
    response = types.FunctionResponse(
        name=CONFIRMATION_TOOL,
        id=confirmation.confirmation_id,
        response=dict(_UNANSWERED[verdict.outcome]),
    )
    return _run_event(tool_context, types.Part(function_response=response))


def _run_event(
    tool_context: ToolContext,
    part: types.Part,
    *,
    role: str = "user",
    author: str | None = None,
    actions: EventActions | None = None,
    long_running: set[str] | None = None,
) -> Event:
    """An event of the call's run: its invocation, its agent (unless ``author``), its branch."""
    return Event(
        invocation_id=tool_context.invocation_id,
        author=author or tool_context.agent_name,
        branch=tool_context.branch,
        content=types.Content(role=role, parts=[part]),
        actions=actions or EventActions(),
        long_running_tool_ids=long_running,
    )
