"""An agent whose answers after an approval or a browser tool's output take a while: the page
can reload while the continuation is still being written (tests/test_real_client_resume.py)."""

from __future__ import annotations

import asyncio

from google.adk.agents import LlmAgent
from google.adk.tools import FunctionTool, LongRunningFunctionTool

from adk_stream_protocol.testing import Answer, ScriptedLlm, call


def pay(amount: float) -> dict[str, float]:
    """Pays; always asks the user first."""
    return {"paid": amount}


def get_location() -> None:
    """The page reads the browser's location; nothing to do here."""


async def slow_tool(seconds: float) -> dict[str, float]:
    """Takes a while: the continuation is still running when the page reloads."""
    await asyncio.sleep(seconds)
    return {"waited": seconds}


root_agent = LlmAgent(
    name="continuation_agent",
    model=ScriptedLlm(
        script={
            "pay": [
                Answer(text="I will pay.", calls=[call("pay", amount=50)]),
                Answer(text="Paid, now checking.", calls=[call("slow_tool", seconds=2)]),
                "All done.",
            ],
            "locate": [
                Answer(thought="Where is the user?", calls=[call("get_location")]),
                Answer(text="Looking around you.", calls=[call("slow_tool", seconds=2)]),
                "You are near Tokyo.",
            ],
        }
    ),
    tools=[
        FunctionTool(pay, require_confirmation=True),
        LongRunningFunctionTool(get_location),
        slow_tool,
    ],
)
