"""Two scripted agents, the root handing the chat to a sub-agent with ADK's
`transfer_to_agent`: each agent answers from its own `ScriptedLlm`, and each calls a tool
before and after the transfer. Served in-process (`serve_agent`) and under uvicorn
(`ADK_STREAM_AGENT=tests.support.agents.transfer:root_agent`) for the real client."""

from __future__ import annotations

from google.adk.agents import LlmAgent

from adk_stream_protocol.testing import ScriptedLlm, call


def lookup(city: str) -> dict[str, str]:
    """The sky over a city."""
    return {"city": city, "sky": "sunny"}


# After `transfer_to_agent` the sub-agent's own model answers, for the same user message:
# its script is keyed on the user's words, as the root's is.
forecaster = LlmAgent(
    name="forecaster",
    description="Answers questions about the weather.",
    model=ScriptedLlm(
        script={
            "weather": [call("lookup", city="Oslo"), "Sunny in Oslo too."],
            "": ["Ask me about the weather."],
        }
    ),
    tools=[lookup],
)
root_agent = LlmAgent(
    name="front_desk",
    model=ScriptedLlm(
        script={
            "weather": [
                call("lookup", city="Rome"),
                call("transfer_to_agent", agent_name="forecaster"),
            ]
        }
    ),
    tools=[lookup],
    sub_agents=[forecaster],
)
