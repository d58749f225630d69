"""ADK's workflow agents that its live mode cannot run (docs/adr/0063): a ``ParallelAgent``
inside a ``SequentialAgent`` (two branches, then a summary) and a ``LoopAgent``. Each model
is a ``ScriptedLlm``; each factory builds fresh agents (an agent has one parent)."""

from __future__ import annotations

import warnings

from google.adk.agents import LlmAgent, LoopAgent, ParallelAgent, SequentialAgent

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


def loop_agent() -> LoopAgent:
    """A drafter that runs two rounds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return LoopAgent(
            name="drafting", sub_agents=[_says("drafter", "Draft done.")], max_iterations=2
        )
