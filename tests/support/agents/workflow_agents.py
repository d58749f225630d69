"""ADK's workflow agents that its live mode cannot run (docs/adr/0063): a ``ParallelAgent``
inside a ``SequentialAgent`` (two branches, then a summary) and a ``LoopAgent``. Each model
is a ``ScriptedLlm``; each factory builds fresh agents (an agent has one parent)."""

from __future__ import annotations

import warnings

from google.adk.agents import LlmAgent, LoopAgent, ParallelAgent, SequentialAgent
from google.adk.agents.callback_context import CallbackContext
from google.genai import types

from adk_stream_protocol.testing import ScriptedLlm


def _says(name: str, text: str) -> LlmAgent:
    return LlmAgent(name=name, model=ScriptedLlm(script={"": [text]}))


def fan_out_agent() -> SequentialAgent:
    """Two researchers at once, then a summary."""
    # ADK 2.13 deprecates its workflow agents for `Workflow`; people still bring them.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        branches = ParallelAgent(
            name="research",
            sub_agents=[_says("flights", "Flights found."), _says("hotels", "Hotels found.")],
        )
        return SequentialAgent(
            name="planner", sub_agents=[branches, _says("summary", "Here is your trip.")]
        )


# What each branch of `travel_desk` says, and the summary after them.
BRANCH_REPLIES = {
    "flights": "Two flights to Lisbon on Friday, the earlier one at seven.",
    "hotels": "Three hotels near the river have rooms for the weekend.",
}
SKIPPED_REPLY = "No car needed: Lisbon is best on foot."
SUMMARY_REPLY = "Here is your trip: fly Friday at seven, stay by the river, walk."


def travel_desk() -> SequentialAgent:
    """Three branches at once, with replies long enough to stream in several pieces each, so
    their words interleave: two researchers, and a third whose ``before_agent_callback``
    skips its model and answers for it; then a summary."""

    def no_car(callback_context: CallbackContext) -> types.Content:
        return types.Content(role="model", parts=[types.Part(text=SKIPPED_REPLY)])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        cars = LlmAgent(
            name="cars",
            model=ScriptedLlm(script={"": ["A car is waiting at the airport."]}),
            before_agent_callback=no_car,
        )
        branches = ParallelAgent(
            name="research",
            sub_agents=[*(_says(name, reply) for name, reply in BRANCH_REPLIES.items()), cars],
        )
        return SequentialAgent(name="desk", sub_agents=[branches, _says("summary", SUMMARY_REPLY)])


def loop_agent() -> LoopAgent:
    """A drafter that runs two rounds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return LoopAgent(
            name="drafting", sub_agents=[_says("drafter", "Draft done.")], max_iterations=2
        )


# The setting's form (`ADK_STREAM_AGENT=tests.support.agents.workflow_agents:travel_desk_root`),
# for a server in its own process.
travel_desk_root = travel_desk()
