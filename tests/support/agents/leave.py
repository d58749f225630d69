"""A test agent shaped like ADK's human-in-the-loop samples, written for these tests: a tool
that asks for confirmation from inside its body (``request_confirmation(hint=..., payload=...)``,
and one with a hint alone),
a long-running tool that files a request and answers "pending", and a long-running tool the
browser runs (it returns nothing).

Each run of a tool body that acts writes a line to the ledger file named by ``LEAVE_LEDGER``
(``<tool> <call id> <what>``), so a test sees what ran, and how often, whatever the server
said. Served as ``ADK_STREAM_AGENT=tests.support.agents.leave:root_agent``."""

from __future__ import annotations

import os
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.tools import LongRunningFunctionTool, ToolContext

from adk_stream_protocol.testing import ScriptedLlm, call
from tests.support.agents.crash import record_payment

LEDGER_ENV = "LEAVE_LEDGER"


def _record(tool_context: ToolContext, what: str) -> None:
    record_payment(os.environ[LEDGER_ENV], f"{tool_context.function_call_id} {what}")


def request_time_off(days: int, tool_context: ToolContext) -> dict[str, Any]:
    """Books days off; more than two need the manager's confirmation."""
    if days <= 2:
        _record(tool_context, f"booked {days}")
        return {"status": "ok", "approved_days": days}
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(
            hint=f"Approve {days} days off?", payload={"approved_days": days}
        )
        return {"status": "Manager approval is required."}
    if not confirmation.confirmed:
        _record(tool_context, "refused")
        return {"status": "The time off request is rejected.", "approved_days": 0}
    approved = (confirmation.payload or {}).get("approved_days", days)
    _record(tool_context, f"booked {approved}")
    return {"status": "ok", "approved_days": approved}


def cancel_time_off(tool_context: ToolContext) -> dict[str, Any]:
    """Cancels the booked days after asking, with a hint and no payload."""
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(hint="Cancel all your booked days?")
        return {"status": "Confirmation is required."}
    _record(tool_context, "cancelled" if confirmation.confirmed else "kept")
    return {"cancelled": confirmation.confirmed}


def file_reimbursement(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Files a reimbursement; a person approves it later, so the answer is "pending"."""
    _record(tool_context, "filed")
    return {"status": "pending", "ticket": f"reimb-{purpose}", "amount": amount}


def locate_device(tool_context: ToolContext) -> None:
    """Finds the user's device: the browser answers, this function returns nothing."""
    _record(tool_context, "located")


SCRIPT = {
    "days off": [call("request_time_off", days=5), "Your time off request is settled."],
    "one day": [call("request_time_off", days=1), "One day booked."],
    "cancel": [call("cancel_time_off"), "Done."],
    "reimburse": [
        call("file_reimbursement", purpose="travel", amount=120.0),
        "Filed; it is pending approval.",
    ],
    "where": [call("locate_device"), "Found your device."],
}

root_agent = LlmAgent(
    name="leave_agent",
    model=ScriptedLlm(script=SCRIPT),
    instruction="Handle time off, reimbursements and devices.",
    tools=[
        request_time_off,
        cancel_time_off,
        LongRunningFunctionTool(file_reimbursement),
        LongRunningFunctionTool(locate_device),
    ],
)


def ledger_lines(path: str) -> list[str]:
    """The ledger's lines: one per run of a tool body that acted."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().splitlines()
    except FileNotFoundError:
        return []
