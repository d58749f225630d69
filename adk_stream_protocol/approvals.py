"""Approvals in live mode (docs/adr/0013-live-approval-gate.md).

ADK's live flow cannot confirm tools: a confirmation-gated tool only ever gets a "needs
approval" error. So on ``/live`` the server gates them itself. ``LiveApprovalPlugin`` runs
before every tool call of a live run; for a tool that requires confirmation (the same
declaration ``/stream`` honours through ADK) it asks the connection's ``ApprovalQueue`` and
waits for the user's decision.

The waiter is created when the request is made, before anything is sent to the client, so a
decision can never arrive "too early" and be lost; decisions, timeouts and disconnects all
resolve the same future.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from google.adk.plugins import BasePlugin
from google.adk.tools import BaseTool, FunctionTool, ToolContext
from google.adk.tools.tool_confirmation import ToolConfirmation

logger = logging.getLogger(__name__)

Outcome = Literal["approved", "denied", "timeout", "cancelled"]

# What the tool call returns to the model when it does not run.
REJECTED_RESULT = {"error": "This tool call is rejected."}
TIMEOUT_RESULT = {"error": "The approval request timed out; the tool did not run."}
CANCELLED_RESULT = {"error": "The approval request was cancelled; the tool did not run."}
BROWSER_TIMEOUT_RESULT = {"error": "The browser did not return the tool's result in time."}


@dataclass
class PendingApproval:
    approval_id: str
    call_id: str
    tool_name: str
    decision: asyncio.Future[Outcome] = field(repr=False)


class ApprovalQueue:
    """The approvals one live connection is waiting for.

    ``on_request`` is called (synchronously) when a tool starts waiting, so the connection
    can send the ``tool-approval-request``.
    """

    def __init__(
        self, timeout_seconds: float, on_request: Callable[[PendingApproval], None]
    ) -> None:
        self._timeout = timeout_seconds
        self._on_request = on_request
        self._pending: dict[str, PendingApproval] = {}
        self._decided: set[str] = set()

    def pending(self) -> list[PendingApproval]:
        return list(self._pending.values())

    def find(self, approval_id: str) -> PendingApproval | None:
        return self._pending.get(approval_id)

    def was_decided(self, approval_id: str) -> bool:
        return approval_id in self._decided

    async def ask(self, call_id: str, tool_name: str) -> Outcome:
        loop = asyncio.get_running_loop()
        pending = PendingApproval(
            f"apr_{uuid.uuid4().hex}", call_id, tool_name, loop.create_future()
        )
        self._pending[pending.approval_id] = pending
        self._on_request(pending)
        try:
            return await asyncio.wait_for(asyncio.shield(pending.decision), self._timeout)
        except TimeoutError:
            logger.info("approval %s for %s timed out", pending.approval_id, tool_name)
            return "timeout"
        finally:
            self._pending.pop(pending.approval_id, None)
            self._decided.add(pending.approval_id)

    def decide(self, approval_id: str, approved: bool) -> None:
        pending = self._pending.get(approval_id)
        if pending is not None and not pending.decision.done():
            pending.decision.set_result("approved" if approved else "denied")

    def cancel_all(self) -> None:
        """The connection is closing: nobody can approve any more, nothing runs."""
        for pending in self._pending.values():
            if not pending.decision.done():
                pending.decision.set_result("cancelled")


class BrowserCalls:
    """Browser-executed tools of one live connection, waiting for the browser's result.

    In live mode the plugin makes such a tool wait here and return the browser's result as its
    own, so ADK stores it and sends it to the model (it does neither for results a client
    sends itself). A result may arrive before the tool starts waiting (with its approval);
    it is kept until then.
    """

    def __init__(self, timeout_seconds: float, on_wait: Callable[[str], None]) -> None:
        self._timeout = timeout_seconds
        self._on_wait = on_wait
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._early: dict[str, dict[str, Any]] = {}

    def waiting(self) -> set[str]:
        return set(self._waiting)

    async def wait(self, call_id: str) -> dict[str, Any]:
        if call_id in self._early:
            return self._early.pop(call_id)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        self._on_wait(call_id)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self._timeout)
        except TimeoutError:
            return BROWSER_TIMEOUT_RESULT
        finally:
            self._waiting.pop(call_id, None)

    def deliver(self, call_id: str, result: dict[str, Any]) -> None:
        future = self._waiting.get(call_id)
        if future is None:
            self._early[call_id] = result
        elif not future.done():
            future.set_result(result)

    def cancel_all(self, result: dict[str, Any]) -> None:
        self._early.clear()
        for future in self._waiting.values():
            if not future.done():
                future.set_result(result)


class LiveToolGate(Protocol):
    """What a live connection offers the plugin."""

    approvals: ApprovalQueue
    browser: BrowserCalls


class LiveApprovalPlugin(BasePlugin):
    """Before each tool call of a live run: the user's approval for tools that require it,
    and the browser's result for tools the browser executes (ADK long-running tools).

    ``gate_for(user_id, session_id)`` returns the live connection running that session, or
    None (then calls proceed as ADK runs them: ``/stream`` uses ADK's own confirmation and
    long-running resumption).
    """

    def __init__(self, gate_for: Callable[[str, str], LiveToolGate | None]) -> None:
        super().__init__(name="adk_stream_protocol_live_approvals")
        self._gate_for = gate_for

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        gate = self._gate_for(tool_context.session.user_id, tool_context.session.id)
        if gate is None:
            return None
        call_id = tool_context.function_call_id or ""
        if await _requires_approval(tool, tool_args, tool_context):
            outcome = await gate.approvals.ask(call_id, tool.name)
            if outcome != "approved":
                return {"denied": REJECTED_RESULT, "timeout": TIMEOUT_RESULT}.get(
                    outcome, CANCELLED_RESULT
                )
            # Lets the tool's own confirmation check pass, as an approved resume does.
            tool_context.tool_confirmation = ToolConfirmation(confirmed=True)
        if tool.is_long_running:
            return await gate.browser.wait(call_id)
        return None


async def _requires_approval(tool: BaseTool, args: dict[str, Any], context: ToolContext) -> bool:
    if isinstance(tool, FunctionTool):
        return await tool.check_require_confirmation(args, context)
    return False
