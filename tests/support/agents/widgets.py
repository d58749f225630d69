"""A scripted agent whose tools ask the page to render UI widgets (ADK 2.13's
``EventActions.render_ui_widgets``, docs/adr/0062): a chart tool that renders an MCP App the
way ADK's ``McpTool`` does (provider ``mcp``, the call's id, the app's resource and the call),
two of them in one model answer, and a payment that renders its receipt after the user's
approval and before a second approval. Served in-process (``serve_agent``) and under uvicorn
(``ADK_STREAM_AGENT=tests.support.agents.widgets:root_agent``) for the real client."""

from __future__ import annotations

from typing import Any

from google.adk.agents import LlmAgent
from google.adk.events.ui_widget import UiWidget
from google.adk.tools import FunctionTool, ToolContext

from adk_stream_protocol.testing import Answer, ScriptedLlm, call

CHART_APP = "ui://charts/weather.html"


def chart_payload(city: str) -> dict[str, Any]:
    """The payload ``McpTool`` gives an MCP App's widget: its resource, the tool, the call."""
    return {
        "resource_uri": CHART_APP,
        "tool": {"name": "show_chart", "_meta": {"ui": {"resourceUri": CHART_APP}}},
        "tool_args": {"city": city},
    }


def show_chart(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """Shows the week's weather in a city as a chart on the page."""
    call_id = tool_context.function_call_id or city
    tool_context.render_ui_widget(UiWidget(id=call_id, provider="mcp", payload=chart_payload(city)))
    return {"shown": city}


def pay(amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Pays; the user approves first. The page shows the receipt (a widget of no MCP App:
    its payload is the provider's own, and ``{}`` by default)."""
    tool_context.render_ui_widget(UiWidget(id=f"receipt-{amount:g}", provider="receipts"))
    return {"paid": amount}


def ship(item: str) -> dict[str, str]:
    """Ships an item; the user approves first."""
    return {"shipped": item}


def build_widgets_agent() -> LlmAgent:
    both = Answer(calls=[call("show_chart", city="Paris"), call("show_chart", city="Rome")])
    return LlmAgent(
        name="charts",
        model=ScriptedLlm(
            script={
                "compare": [both, "Paris is warmer than Rome this week."],
                "chart": [call("show_chart", city="Oslo"), "Here is Oslo's week."],
                "buy": [call("pay", amount=30), call("ship", item="lamp"), "Paid and shipped."],
                "": ["Ask for a chart."],
            }
        ),
        tools=[
            show_chart,
            FunctionTool(pay, require_confirmation=True),
            FunctionTool(ship, require_confirmation=True),
        ],
    )


root_agent = build_widgets_agent()
