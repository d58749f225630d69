"""Agents that pause for the user the way ADK 2 builds them (issue 37): a graph ``Workflow``
whose function node pauses with ``RequestInput`` and a later node that answers from what the
user gave; an ``LlmAgent`` with ADK's ``request_input`` tool; and a tool that asks for an API
key (``request_credential``). Written for these tests in the shape of ADK's samples; the
models are ``ScriptedLlm``.

Each factory builds fresh agents. A ``Ledger`` (``samples.py``) holds one line per run of the
node that acts on the answer, so a test sees that it ran once, with what."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi.openapi.models import APIKey, APIKeyIn
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.auth.auth_credential import AuthCredential, AuthCredentialTypes
from google.adk.auth.auth_tool import AuthConfig
from google.adk.events import Event
from google.adk.events.request_input import RequestInput
from google.adk.tools import ToolContext, request_input
from google.adk.workflow import START, Workflow

from adk_stream_protocol.testing import Answer, Branch, ScriptedLlm, call
from tests.support.agents.samples import Ledger

# What the time-off workflow asks, and what it accepts as an answer.
DAYS_QUESTION = "How many days off do you need?"
DAYS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 20}},
    "required": ["days"],
}
DAYS_PAYLOAD = {"balance": 20}


def time_off_app(ledger: Ledger) -> App:
    """A workflow of two function nodes: ``intake`` greets the user and asks how many days
    (``RequestInput``); ``decide`` answers from the days given (the node's input is the
    user's answer)."""

    def intake(node_input: Any) -> Iterator[Event | RequestInput]:
        yield Event(message="Let us plan your time off.")
        yield RequestInput(message=DAYS_QUESTION, payload=DAYS_PAYLOAD, response_schema=DAYS_SCHEMA)

    def decide(node_input: dict[str, Any]) -> Event:
        days = node_input["days"]
        ledger.record(f"decide {days}")
        return Event(message=f"Approved: {days} days off.")

    workflow = Workflow(name="time_off", edges=[(START, intake), (intake, decide)])
    return App(name="time_off", root_agent=workflow)


def bare_time_off() -> Workflow:
    """The time-off workflow itself, served without an ``App`` (``root_agent = Workflow(…)``,
    as ADK's samples write it); nobody reads its ledger."""
    root = time_off_app(Ledger()).root_agent
    assert isinstance(root, Workflow)
    return root


# The setting's form of it: `ADK_STREAM_AGENT=tests.support.agents.human_input:time_off_root`.
time_off_root = bare_time_off()


# What the clarifying agent asks with ADK's `request_input` tool.
COLOUR_QUESTION = "Which colour should the logo be?"


def clarifying_agent() -> LlmAgent:
    """An LLM agent that asks the user a question through ``request_input`` (a string
    answer) before it answers."""
    model = ScriptedLlm(
        script={
            "logo": [
                call(
                    "adk_request_input",
                    message=COLOUR_QUESTION,
                    response_schema={"type": "string", "enum": ["red", "green", "blue"]},
                ),
                Branch(browser=Answer(text="A logo in the colour you chose, coming up.")),
            ],
            "": ["Ask me for a logo."],
        }
    )
    return LlmAgent(
        name="designer",
        model=model,
        instruction="Ask which colour before drawing a logo.",
        tools=[request_input],
    )


# The key the forecast service wants, sent in a header.
FORECAST_KEY = AuthConfig(
    auth_scheme=APIKey(**{"in": APIKeyIn.header, "name": "X-Api-Key"}),
    raw_auth_credential=AuthCredential(auth_type=AuthCredentialTypes.API_KEY),
    credential_key="forecast_key",
)


def forecast_agent(ledger: Ledger) -> LlmAgent:
    """A tool that needs the user's API key: without one it asks for it
    (``request_credential``); ADK runs it again once the page answers with the key."""

    def get_forecast(city: str, tool_context: ToolContext) -> dict[str, Any]:
        """The forecast for a city, from a service that wants the user's key."""
        credential = tool_context.get_auth_response(FORECAST_KEY)
        if credential is None or not credential.api_key:
            tool_context.request_credential(FORECAST_KEY)
            return {"status": "waiting for the user's key"}
        ledger.record(f"forecast {city} with a key of {len(credential.api_key)} characters")
        return {"city": city, "forecast": "sunny"}

    model = ScriptedLlm(
        script={
            "weather": [call("get_forecast", city="Oslo"), "It is sunny in Oslo."],
            "": ["Ask me about the weather."],
        }
    )
    return LlmAgent(name="forecaster", model=model, tools=[get_forecast])
