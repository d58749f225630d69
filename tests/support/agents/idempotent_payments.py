"""An agent whose payments go to a deduplicating backend (tests/support/dedup_backend.py), for
the exactly-once chaos tests (tests/faults/test_exactly_once.py, issue 39).

Served with ``ADK_STREAM_AGENT=tests.support.agents.idempotent_payments:app``. Three tools,
each needing the user's approval, each calling the backend with the call's id as the
idempotency key and the chat's lease generation as the fencing token:

- ``pay`` ("Pay Bob 10"), declared idempotent by the deployment's setting
  (``ADK_STREAM_IDEMPOTENT_TOOLS=pay``);
- ``refund`` ("Refund Bob 10"), declared idempotent in code (``idempotent``);
- ``wire`` ("Wire Bob 10"), not declared: it keeps the default, never run twice.

``EXACTLY_ONCE_BACKEND`` is the backend's directory. ``EXACTLY_ONCE_FAULTS`` is a directory
where the test plans a fault for a chat: a file named by the chat's id holding
``<action>:<point>``. The first run of that chat to reach the point takes the fault (renamed
to ``<chat>.fired``, so the run that finishes the turn after it never takes it again), writes
``<chat>.reached`` and then:

- ``kill``: waits (its event loop free, its lease renewed) for the test to SIGKILL the process;
- ``stop``: stops its own process (SIGSTOP) on the spot, as a stalled machine or a long GC pause
  would, until the test lets it go on (SIGCONT), past its lease.

Points: ``before-effect`` and ``after-effect`` in the tool's body, around the backend's call;
``callback`` in the agent's own ``before_tool_callback``, which ADK runs after the server's
start mark.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.tools import BaseTool, FunctionTool, ToolContext

from adk_stream_protocol import idempotent, lease_generation
from adk_stream_protocol.testing import ScriptedLlm, call
from tests.support import dedup_backend

APP_NAME = "exactly_once"
BACKEND_ENV = "EXACTLY_ONCE_BACKEND"
FAULTS_ENV = "EXACTLY_ONCE_FAULTS"


def _take_fault(point: str, tool_context: ToolContext) -> str | None:
    """The fault's action when one is planned for this chat at ``point`` and no run took it
    yet; the run that takes it says so in ``<chat>.reached``."""
    faults = Path(os.environ[FAULTS_ENV])
    chat = tool_context.session.id
    planned = faults / chat
    try:
        action, _, where = planned.read_text(encoding="utf-8").partition(":")
        if where != point:
            return None
        os.rename(planned, faults / f"{chat}.fired")  # one run takes it, whichever process
    except FileNotFoundError:
        return None
    (faults / f"{chat}.reached").write_text(f"{action}:{point}:{os.getpid()}", encoding="utf-8")
    return action


async def _fault_at(point: str, tool_context: ToolContext) -> None:
    action = _take_fault(point, tool_context)
    if action == "stop":
        # No await before it: the stop lands exactly here, and what follows runs on waking.
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "kill":
        await asyncio.Event().wait()  # until the test kills the process


def _charge(tool: str, amount: float, to: str, tool_context: ToolContext) -> str:
    """The backend's transaction for this call. Called without an await around it, so that a
    run woken from a stop reaches the backend before anything else of the process runs."""
    return dedup_backend.charge(
        Path(os.environ[BACKEND_ENV]),
        key=tool_context.function_call_id or "",
        chat=tool_context.session.id,
        tool=tool,
        token=lease_generation(tool_context),
        amount=amount,
        to=to,
    )


async def _payment(tool: str, amount: float, to: str, tool_context: ToolContext) -> dict[str, Any]:
    await _fault_at("before-effect", tool_context)
    transaction = _charge(tool, amount, to, tool_context)
    await _fault_at("after-effect", tool_context)
    return {"transaction": transaction, "amount": amount, "to": to}


async def pay(amount: float, to: str, tool_context: ToolContext) -> dict[str, Any]:
    """Pays; needs the user's approval. Idempotent by the deployment's setting."""
    return await _payment("pay", amount, to, tool_context)


@idempotent
async def refund(amount: float, to: str, tool_context: ToolContext) -> dict[str, Any]:
    """Refunds; needs the user's approval. Idempotent by its marker."""
    return await _payment("refund", amount, to, tool_context)


async def wire(amount: float, to: str, tool_context: ToolContext) -> dict[str, Any]:
    """Wires money; needs the user's approval. Not declared idempotent."""
    return await _payment("wire", amount, to, tool_context)


async def stall_before_tool(
    tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
) -> dict[str, Any] | None:
    """The agent's own callback: after the server's start mark, before the body."""
    if tool_context.tool_confirmation is not None:  # the approved run, not the ask
        await _fault_at("callback", tool_context)
    return None


model = ScriptedLlm(
    script={
        "pay": [call("pay", amount=10, to="Bob"), "Paid."],
        "refund": [call("refund", amount=10, to="Bob"), "Refunded."],
        "wire": [call("wire", amount=10, to="Bob"), "Wired."],
        "": ["Hello again."],
    }
)
agent = LlmAgent(
    name="payer",
    model=model,
    instruction="Pay, refund or wire when asked.",
    tools=[
        FunctionTool(pay, require_confirmation=True),
        FunctionTool(refund, require_confirmation=True),
        FunctionTool(wire, require_confirmation=True),
    ],
    before_tool_callback=stall_before_tool,
)
app = App(name=APP_NAME, root_agent=agent)
