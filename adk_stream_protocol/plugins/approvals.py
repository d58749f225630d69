"""Approvals in live mode (docs/adr/0013-live-approval-gate.md).

ADK's live flow cannot confirm tools: a confirmation-gated tool only ever gets a "needs
approval" error. So on ``/live`` the server gates them itself. ``LiveApprovalPlugin`` runs
before every tool call of a live run: a tool that requires confirmation (the same declaration
``/stream`` honours through ADK) waits in ``PendingCalls`` for the user's decision, and a
tool the browser executes (an ADK long-running tool) waits there for the browser's result,
which it returns as its own, so ADK stores it and sends it to the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.adk.plugins import BasePlugin
from google.adk.tools import BaseTool, FunctionTool, ToolContext
from google.adk.tools.tool_confirmation import ToolConfirmation

from adk_stream_protocol.coordination.base import Outcome, PendingCalls
from adk_stream_protocol.protocol.tool_calls import (
    APPROVAL_CANCELLED_RESULT,
    APPROVAL_TIMEOUT_RESULT,
    DISCONNECTED_RESULT,
    REJECTED_RESULT,
)


class LiveApprovalPlugin(BasePlugin):
    """Before each tool call of a live run: the user's approval for tools that require it,
    and the browser's result for tools the browser executes."""

    def __init__(
        self,
        pending: PendingCalls,
        timeout_seconds: float,
        on_outcome: Callable[[Outcome], None] = lambda outcome: None,
    ) -> None:
        super().__init__(name="adk_stream_protocol_live_approvals")
        self._pending = pending
        self._timeout = timeout_seconds
        self._on_outcome = on_outcome  # the traces and metrics (docs/adr/0027)

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        chat = (tool_context.session.user_id, tool_context.session.id)
        call_id = tool_context.function_call_id or ""
        if await _requires_approval(tool, tool_args, tool_context):
            outcome = await self._pending.ask_approval(chat, call_id, tool.name, self._timeout)
            self._on_outcome(outcome)
            if outcome == "denied":
                return dict(REJECTED_RESULT)
            if outcome == "timeout":
                return dict(APPROVAL_TIMEOUT_RESULT)
            if outcome == "cancelled":
                return dict(APPROVAL_CANCELLED_RESULT)
            # Lets the tool's own confirmation check pass, as an approved resume does.
            tool_context.tool_confirmation = ToolConfirmation(confirmed=True)
        if tool.is_long_running:
            return await self._pending.wait_result(
                chat, call_id, self._timeout, unwatched=dict(DISCONNECTED_RESULT)
            )
        return None


async def _requires_approval(tool: BaseTool, args: dict[str, Any], context: ToolContext) -> bool:
    if isinstance(tool, FunctionTool):
        return await tool.check_require_confirmation(args, context)
    return False
