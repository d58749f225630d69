"""A scripted shop that shares its cart with the page (docs/adr/0044): tools and a callback
write keys under the shared state's prefix (`ui:`) and keys outside it, a tool reads what the
page wrote, and the checkout needs the user's approval. Served in-process (`serve_agent`) and
under uvicorn (`ADK_STREAM_AGENT=tests.support.agents.state:root_agent`) for the real client."""

from __future__ import annotations

from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.tools import FunctionTool, ToolContext

from adk_stream_protocol.testing import ScriptedLlm, call

# Kept beside the shared keys; never the page's to see or write.
STOCK_KEY = "stock_note"


def add_item(item: str, tool_context: ToolContext) -> dict[str, Any]:
    """Puts an item in the cart."""
    cart = [*tool_context.state.get("ui:cart", []), item]
    tool_context.state["ui:cart"] = cart
    tool_context.state[STOCK_KEY] = f"reserved {item}"
    return {"cart": cart}


def read_theme(tool_context: ToolContext) -> dict[str, Any]:
    """The theme the page chose, as the agent finds it in the session's state."""
    return {"theme": tool_context.state.get("ui:theme")}


def checkout(tool_context: ToolContext) -> dict[str, Any]:
    """Orders what is in the cart; the user approves it first."""
    state = tool_context.state
    order = {"items": state.get("ui:cart", []), "note": state.get("ui:note")}
    tool_context.state["ui:cart"] = []
    tool_context.state["ui:orders"] = tool_context.state.get("ui:orders", 0) + 1
    return order


def welcome(callback_context: CallbackContext) -> None:
    """A before-agent callback: the chat's first run marks the visitor welcome."""
    if "ui:welcome" not in callback_context.state:
        callback_context.state["ui:welcome"] = True


def build_state_agent() -> LlmAgent:
    return LlmAgent(
        name="shop",
        model=ScriptedLlm(
            script={
                "add": [call("add_item", item="lamp"), "Added."],
                "theme": [call("read_theme"), "That is your theme."],
                "checkout": [call("checkout"), "Ordered."],
                "": ["OK."],
            }
        ),
        tools=[add_item, read_theme, FunctionTool(checkout, require_confirmation=True)],
        before_agent_callback=welcome,
    )


root_agent = build_state_agent()
