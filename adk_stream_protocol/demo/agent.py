"""The demo agent: five tools, usable with the offline model or with Gemini."""

from __future__ import annotations

from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm

from adk_stream_protocol.foundation.model_names import OFFLINE_MODEL_NAME, is_offline_model

from .model import register_offline_model
from .tools import demo_tools

__all__ = ["OFFLINE_MODEL_NAME", "build_demo_agent"]

AGENT_NAME = "demo_agent"

INSTRUCTION = """\
You are the assistant of a demo app. Use the tools instead of guessing:
- get_weather: current weather for a city (pass the city name in English).
- process_payment: send money from the user's wallet; call it once per payment.
  The user approves each payment in the app before it runs.
- get_location: the user's current position; it runs in the browser after the
  user approves it.
- change_bgm: switch the background music to track 1 or 2; it runs in the browser.
- draw_chart: a bar chart of the demo cities' temperatures, shown in the chat.
When the user asks for several payments, call process_payment for each of them.
After a tool answers, reply briefly in the user's language using its result,
including errors and rejected calls.
"""


def build_demo_agent(model: str | BaseLlm) -> LlmAgent:
    """Builds the demo agent for a model name ("offline-demo", "gemini-…") or instance."""
    if isinstance(model, str) and is_offline_model(model):
        # Registration is deferred to here so importing the package has no side effects.
        register_offline_model()
    return LlmAgent(
        name=AGENT_NAME,
        model=model,
        instruction=INSTRUCTION,
        tools=demo_tools(),
    )
