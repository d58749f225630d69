"""A test agent that pays, after approval, and writes each payment it makes to a ledger file
(``PAYMENTS_LEDGER``): one line per run of the tool, its call id. What ran twice or not at
all shows there, whatever the server said (tests/server/test_rolling_restarts.py).

"pay <amount>" asks for approval, then runs ``pay`` (a short wait, then the ledger line);
the model takes a moment before each answer, so that responses are open when a server is
told to stop."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm, LlmCapabilities
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import FunctionTool, ToolContext
from google.genai import types

from tests.support.agents.crash import record_payment

LEDGER_ENV = "PAYMENTS_LEDGER"
MODEL_SECONDS = 0.3
TOOL_SECONDS = 0.5


async def pay(amount: float, tool_context: ToolContext) -> dict[str, object]:
    """Pays ``amount``; the ledger gets the call id, once per run."""
    await asyncio.sleep(TOOL_SECONDS)
    record_payment(os.environ[LEDGER_ENV], tool_context.function_call_id or "")
    return {"paid": amount}


class PayingLlm(BaseLlm):
    model: str = "paying-test"

    @property
    def capabilities(self) -> LlmCapabilities:
        return LlmCapabilities(output_schema_and_tools=False)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        await asyncio.sleep(MODEL_SECONDS)
        parts = llm_request.contents[-1].parts or []
        if any(p.function_response for p in parts):
            reply = types.Part(text="Paid.")
        else:
            words = "".join(p.text or "" for p in parts).split()
            if words[:1] != ["pay"]:
                reply = types.Part(text="Say 'pay <amount>'.")
            else:
                call = types.FunctionCall(name="pay", args={"amount": float(words[1])})
                reply = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[reply]))


root_agent = LlmAgent(
    name="payments_agent",
    model=PayingLlm(),
    instruction="Pay what the user asks.",
    tools=[FunctionTool(pay, require_confirmation=True)],
)
