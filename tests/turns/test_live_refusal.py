"""Which agents ``/live?chatId=`` refuses (docs/adr/0063): read once from the agent's tree
when the runners are built, at any depth; the refusal itself is tested through the app in
tests/test_table_workflow_agents.py."""

from __future__ import annotations

import warnings

from google.adk.agents import LlmAgent, SequentialAgent
from google.adk.apps import App

from adk_stream_protocol.testing import ScriptedLlm
from adk_stream_protocol.turns.runners import live_refusal
from tests.support.agents.workflow_agents import fan_out_agent, loop_agent


def test_a_parallel_agent_under_a_sequence_is_found_and_named() -> None:
    refusal = live_refusal(fan_out_agent())
    assert refusal is not None and "'research' is a ParallelAgent" in refusal


def test_a_loop_agent_under_an_app_and_a_sequence_is_found_and_named() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        root = SequentialAgent(name="outer", sub_agents=[loop_agent()])
    refusal = live_refusal(App(name="drafts", root_agent=root).root_agent)
    assert refusal is not None and "'drafting' is a LoopAgent" in refusal


def test_a_tree_of_llm_agents_in_a_sequence_is_not_refused() -> None:
    helper = LlmAgent(name="helper", model=ScriptedLlm(script={"": ["Hi."]}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        root = SequentialAgent(name="desk", sub_agents=[helper])
    assert live_refusal(root) is None
