"""A user's own agent that names the offline model as a string (`model="offline-demo"`)
answers, whether served with `ADK_STREAM_AGENT=module:attr` or `create_app(agent)`, with no
call of the user's to register the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from google.adk.agents import LlmAgent, SequentialAgent
from google.adk.models import LLMRegistry
from google.adk.models import registry as adk_registry

from adk_stream_protocol.demo.names import OFFLINE_MODEL_PATTERN
from adk_stream_protocol.testing import serve_agent
from tests.support import chat_body, post_stream, run_server, user_message


@pytest.fixture
def unregistered() -> Iterator[None]:
    """ADK's registry as in a fresh process: without the offline model, which other tests of
    this process (the demo's) registered. Put back afterwards, whatever the test did."""
    table = adk_registry._llm_registry_dict
    saved = table.pop(OFFLINE_MODEL_PATTERN, None)
    LLMRegistry.resolve.cache_clear()
    try:
        with pytest.raises(ValueError):
            LLMRegistry.resolve("offline-demo")
        yield
    finally:
        if saved is not None:
            table[OFFLINE_MODEL_PATTERN] = saved
        LLMRegistry.resolve.cache_clear()


def test_create_app_with_an_own_agent_on_the_offline_model(unregistered: None) -> None:
    agent = LlmAgent(name="mine", model="offline-demo")
    with serve_agent(agent) as chat:
        answer = chat.send("What's the weather in Tokyo?")
    assert answer.status == 200 and answer.errors == []
    assert "Tokyo" in answer.text


# ADK 2.13 deprecates SequentialAgent, the simplest agent whose sub-agent always runs.
@pytest.mark.filterwarnings("ignore:SequentialAgent is deprecated:DeprecationWarning")
def test_a_sub_agent_naming_the_offline_model_answers(unregistered: None) -> None:
    """ADK resolves each agent's model at its own first call: a sub-agent's too."""
    helper = LlmAgent(name="helper", model="offline-fast")
    root = SequentialAgent(name="root", sub_agents=[helper])
    with serve_agent(root) as chat:
        answer = chat.send("What's the weather in Tokyo?")
    assert answer.status == 200 and answer.errors == [], answer.chunks
    assert "Tokyo" in answer.text


def test_the_agent_setting_serves_an_own_agent_on_the_offline_model(tmp_path: Path) -> None:
    """`uvicorn server:app` in a fresh process, where nothing registered the model before."""
    env = {"ADK_STREAM_AGENT": "tests.agents:offline_agent"}
    with run_server(tmp_path, env) as server:
        result = post_stream(server, chat_body("c-own", user_message("Weather in Paris?", "u1")))
    assert result.of_type("error") == [], result.chunks
    assert "Paris" in result.text()
