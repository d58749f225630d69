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

from adk_stream_protocol.demo.replies import MISSING_TOOLS_TEXT
from adk_stream_protocol.foundation.model_names import OFFLINE_MODEL_PATTERN
from adk_stream_protocol.testing import serve_agent
from tests.support.rig import (
    LiveSocket,
    chat_body,
    in_process_app,
    post_stream,
    run_server,
    user_message,
)


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


@pytest.mark.out_of_process  # uvicorn in a fresh process
def test_the_agent_setting_serves_an_own_agent_on_the_offline_model(tmp_path: Path) -> None:
    """`uvicorn server:app` in a fresh process, where nothing registered the model before."""
    env = {"ADK_STREAM_AGENT": "tests.support.agents.tools:offline_agent"}
    with run_server(tmp_path, env) as server:
        result = post_stream(server, chat_body("c-own", user_message("Weather in Paris?", "u1")))
    assert result.of_type("error") == [], result.chunks
    assert "Paris" in result.text()


@pytest.mark.parametrize("transport", ["stream", "live"])
def test_the_offline_model_calls_only_the_tools_an_own_agent_has(
    tmp_path: Path, transport: str
) -> None:
    """An agent without the demo's tools gets no call of a tool it lacks (which ADK would
    answer with an error result), but a text that says which call the model would make; on
    `run_async` and on the live connection alike."""
    question = user_message("What's the weather in Tokyo?", "u1")
    with in_process_app(tmp_path, agent="tests.support.agents.tools:offline_agent") as target:
        if transport == "stream":
            result = post_stream(target, chat_body("c-tools", question))
        else:
            live = LiveSocket(target, "c-tools")
            try:
                result = live.message(question)
            finally:
                live.close()
    assert result.of_type("tool-input-available") == [] and result.of_type("error") == []
    assert result.text() == MISSING_TOOLS_TEXT.format(tools='get_weather(location="Tokyo")')


def get_weather(location: str) -> dict[str, object]:
    """An own tool with the demo's name and another shape of result."""
    return {"place": location, "forecast": "clear", "celsius": 21}


def process_payment(amount: float, recipient: str, currency: str) -> dict[str, object]:
    """An own payment tool whose result has none of the demo's fields."""
    return {"status": "queued", "reference": "r-1"}


@pytest.mark.parametrize("live", [False, True], ids=["stream", "live"])
def test_an_own_tool_with_a_demo_tools_name_is_reported_as_it_answered(
    unregistered: None, live: bool
) -> None:
    """The offline model words the demo's own results; an own tool of the same name that
    answers with other fields is reported as JSON, never as "None°C"."""
    agent = LlmAgent(name="mine", model="offline-demo", tools=[get_weather, process_payment])
    with serve_agent(agent) as chat:
        weather = chat.send("What's the weather in Tokyo?", chat="c-weather", live=live)
        paid = chat.send("Pay Alice 10", chat="c-pay", live=live)
    assert weather.errors == [] and paid.errors == []
    assert weather.of_type("tool-output-available")[0]["output"]["celsius"] == 21
    assert weather.text == (
        'get_weather returned {"celsius": 21, "forecast": "clear", "place": "Tokyo"}.'
    )
    assert paid.text == 'process_payment returned {"reference": "r-1", "status": "queued"}.'
    assert "None" not in weather.text + paid.text
