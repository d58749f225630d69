"""An agent whose server dies on purpose at a chosen point of a payment (tests/test_crashes.py).

Served with ``ADK_STREAM_AGENT=tests.support.agents.crash:app``. ``CRASH_AT`` names the point
where the process kills itself (SIGKILL, as a crash or an OOM kill does: no clean-up runs):

- ``before-start``: in a plugin that runs before the server records the tool's start;
- ``in-body``: inside the tool, before it does its work;
- ``after-effect``: inside the tool, after its work, before its result is stored;
- ``before-answer``: in the model call after the result was stored.

``STALL_READY`` names a file the plugin writes just before the server would record the tool's
start; the process then stops itself (SIGSTOP) at that point, as a stalled machine or a long
GC pause would stop it, until the test lets it go on (SIGCONT).

``AGENT_STALL_READY`` does the same in the agent's own ``before_tool_callback``, which ADK runs
after the plugins': after the server checked the chat's lease and recorded the tool's start,
so a process that wakes from it runs the tool although it lost the chat (docs/adr/0073).

``MODEL_LOG`` names a file each model call appends a line to: the results of ``pay`` calls the
model's request carries (JSON), so a test sees what the model learnt.

``RESULT_READY`` names a file the tool writes after its work, then waits ``RESULT_WAIT``
seconds (default 1) before it returns: the test stops the session store meanwhile, so the
tool's result cannot be stored (tests/faults/test_kept_results.py).

``CRASH_LEDGER`` is a file the tool appends the call's id to when it does its work: the
ground truth for "the payment ran once", whatever the session says. ``TOKEN_LEDGER``, when
set, is a file it appends the call's id and its fencing token (``lease_generation``) to.

``PAY_RAISES=1`` makes the tool fail (raise) before its work.

``IDEMPOTENT_IN_CODE=1`` declares the tool idempotent in code (``adk_stream_protocol.idempotent``);
``ADK_STREAM_IDEMPOTENT_TOOLS=pay`` declares it by the setting.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.apps import App
from google.adk.models.llm_request import LlmRequest
from google.adk.plugins import BasePlugin
from google.adk.tools import BaseTool, FunctionTool, ToolContext

from adk_stream_protocol import idempotent, lease_generation
from adk_stream_protocol.testing import ScriptedLlm, call


def _crash_at(point: str) -> None:
    if os.environ.get("CRASH_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


async def pay(amount: float, to: str, tool_context: ToolContext) -> dict[str, Any]:
    """Sends money; needs the user's approval."""
    _crash_at("in-body")
    if os.environ.get("PAY_RAISES") == "1":
        raise RuntimeError("the bank is closed")
    call_id = tool_context.function_call_id or ""
    if tokens := os.environ.get("TOKEN_LEDGER"):
        await asyncio.to_thread(
            record_payment, tokens, f"{call_id}:{lease_generation(tool_context)}"
        )
    await asyncio.to_thread(record_payment, os.environ["CRASH_LEDGER"], call_id)
    _crash_at("after-effect")
    if ready := os.environ.get("RESULT_READY"):
        await asyncio.to_thread(Path(ready).write_text, "paid", encoding="utf-8")
        await asyncio.sleep(float(os.environ.get("RESULT_WAIT", "1")))
    return {"paid": amount, "to": to}


def record_payment(ledger: str, call_id: str) -> None:
    """One line per payment made, its call id: appended whole, whichever process writes."""
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{call_id}\n".encode())
    finally:
        os.close(fd)


async def stall_in_agent(
    tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
) -> dict[str, Any] | None:
    """The agent's own callback: stops the process after the server's start mark."""
    if tool_context.tool_confirmation is not None and (
        ready := os.environ.get("AGENT_STALL_READY")
    ):
        await asyncio.to_thread(Path(ready).write_text, "stalling", encoding="utf-8")
        os.kill(os.getpid(), signal.SIGSTOP)
    return None


def log_model_request(path: str, llm_request: LlmRequest) -> None:
    """One line: the ``pay`` results the model's request carries."""
    results = [
        part.function_response.response
        for content in llm_request.contents
        for part in content.parts or []
        if part.function_response is not None and part.function_response.name == "pay"
    ]
    with Path(path).open("a", encoding="utf-8") as log:
        log.write(json.dumps(results) + "\n")


class CrashPlugin(BasePlugin):
    def __init__(self) -> None:
        super().__init__(name="test_crashes")

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        if tool_context.tool_confirmation is not None:  # the approved run, not the ask
            _crash_at("before-start")
            if ready := os.environ.get("STALL_READY"):
                # The process stops itself here, at a known point, as a stalled machine or a
                # long GC pause would stop it; the test lets it go on (SIGCONT). No await
                # after it: the lease check at the tool's start is the next thing that runs.
                await asyncio.to_thread(Path(ready).write_text, "stalling", encoding="utf-8")
                os.kill(os.getpid(), signal.SIGSTOP)
        return None

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> None:
        if model_log := os.environ.get("MODEL_LOG"):
            await asyncio.to_thread(log_model_request, model_log, llm_request)
        last = llm_request.contents[-1] if llm_request.contents else None
        if last and any(
            p.function_response and p.function_response.name == "pay" for p in last.parts or []
        ):
            _crash_at("before-answer")


model = ScriptedLlm(
    script={
        "pay": [call("pay", amount=10, to="Bob"), "Paid Bob."],
        "": ["Hello again."],
    }
)
agent = LlmAgent(
    name="payer",
    model=model,
    instruction="Pay when asked.",
    tools=[
        FunctionTool(
            idempotent(pay) if os.environ.get("IDEMPOTENT_IN_CODE") == "1" else pay,
            require_confirmation=True,
        )
    ],
    before_tool_callback=stall_in_agent,
)
app = App(name="crashes", root_agent=agent, plugins=[CrashPlugin()])
