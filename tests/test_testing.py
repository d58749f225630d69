"""`adk_stream_protocol.testing`: the scripted model and the client, through the real app."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator

import pytest
import starlette.testclient
from google.adk.agents import LlmAgent
from google.adk.tools import FunctionTool
from google.genai import types
from starlette.testclient import TestClient, WebSocketDenialResponse

from adk_stream_protocol.testing import (
    NO_SCRIPT,
    SCRIPT_ENDED,
    AgentClient,
    Answer,
    ScriptedLlm,
    call,
    serve_agent,
)
from tests.support import ROOT


def transfer(amount: float) -> dict[str, float]:
    """Moves money (after the user's approval)."""
    return {"transferred": amount}


def lookup(city: str) -> dict[str, str]:
    return {"city": city, "sky": "sunny"}


SCRIPT = ScriptedLlm(
    script={
        "transfer": [call("transfer", amount=50), "Done."],
        "weather": [
            Answer(
                thought="The user wants the weather.",
                text="Let me look.",
                calls=[call("lookup", city="Oslo")],
            ),
            "Sunny in Oslo, a long and streamed sentence of several words.",
        ],
        "broken": [Answer(error="the quota is used up")],
        "too short": [call("lookup", city="Rome")],
        "hello": ["Hi."],
    }
)


@pytest.fixture(scope="module")
def chat() -> Iterator[AgentClient]:
    agent = LlmAgent(
        name="scripted",
        model=SCRIPT,
        tools=[lookup, FunctionTool(transfer, require_confirmation=True)],
    )
    with serve_agent(agent) as client:
        yield client


def test_text_streams_in_several_deltas(chat: AgentClient) -> None:
    answer = chat.send("weather please", chat="stream")
    assert (
        answer.text == "Let me look.Sunny in Oslo, a long and streamed sentence of several words."
    )
    assert len(answer.of_type("text-delta")) > 3, "partials, as Gemini streams"
    assert answer.of_type("reasoning-delta"), "the thought is a reasoning part"
    assert answer.tool_calls == [
        {
            "toolName": "lookup",
            "toolCallId": answer.tool_calls[0]["toolCallId"],
            "input": {"city": "Oslo"},
        }
    ]
    assert answer.of_type("tool-output-available")[0]["output"] == {"city": "Oslo", "sky": "sunny"}


def test_an_approved_call_runs_and_the_turn_goes_on(chat: AgentClient) -> None:
    paused = chat.send("transfer 50", chat="approve")
    assert paused.types()[-2:] == ["finish-step", "finish"] and paused.of_type(
        "tool-approval-request"
    )
    done = chat.approve(True, chat="approve")
    assert done.of_type("tool-output-available")[0]["output"] == {"transferred": 50}
    assert done.text == "Done."
    (tool_part,) = [p for p in done.message["parts"] if p["type"] == "tool-transfer"]  # type: ignore[index]
    assert tool_part["state"] == "output-available"


def test_a_denied_call_does_not_run(chat: AgentClient) -> None:
    chat.send("transfer 50", chat="deny")
    denied = chat.approve(False, chat="deny")
    assert denied.of_type("tool-output-denied") and not denied.of_type("tool-output-available")
    assert denied.text == "Done."  # the script's next answer, as a model would go on


def test_the_chat_goes_on_with_the_whole_history(chat: AgentClient) -> None:
    assert chat.send("hello", chat="long").text == "Hi."
    assert chat.send("hello again", chat="long").text == "Hi."
    assert [m["role"] for m in chat.messages("long")] == ["user", "assistant", "user", "assistant"]


def test_a_scripted_failure_is_an_error_chunk(chat: AgentClient) -> None:
    (error,) = chat.send("broken", chat="broken").errors
    assert "the quota is used up" in error


@pytest.mark.parametrize(
    ("text", "code", "reason"),
    [("what now?", NO_SCRIPT, "no key of the script"), ("too short", SCRIPT_ENDED, "asked for 2")],
)
def test_a_script_without_an_answer_says_why(
    chat: AgentClient, text: str, code: str, reason: str
) -> None:
    (error,) = chat.send(text, chat=f"no-{code}").errors
    assert code in error and reason in error


def test_the_answer_is_a_function_of_the_conversation() -> None:
    """The model counts the calls of the turn so far: the same contents, the same answer."""
    user = types.Content(role="user", parts=[types.Part(text="Transfer now")])
    called = types.Content(
        role="model",
        parts=[types.Part(function_call=types.FunctionCall(name="transfer", args={"amount": 50}))],
    )
    result = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(name="transfer", response={"ok": 1})
            )
        ],
    )
    assert SCRIPT.answer([user]) == Answer(calls=[call("transfer", amount=50)])
    assert SCRIPT.answer([user, called, result]) == Answer(text="Done.")
    assert SCRIPT.answer([user, called, result, user]) == SCRIPT.answer([user])


def test_a_scripted_model_answers_on_the_live_connection() -> None:
    """`/live?chatId=` runs `run_live`: the script answers there too, tools and all, and
    `send(live=True)` reads it as `send` reads `/stream`."""
    model = ScriptedLlm(script={"weather": [call("lookup", city="Oslo"), "Oslo is sunny."]})
    agent = LlmAgent(name="live_helper", model=model, tools=[lookup])
    with serve_agent(agent) as chat:
        answered = chat.send("weather?", chat="c-live", live=True)
        unscripted = chat.send("something else", chat="c-live", live=True)
    assert answered.status == 200
    assert answered.body.endswith("data: [DONE]\n\n")
    assert [c["output"] for c in answered.of_type("tool-output-available")] == [
        {"city": "Oslo", "sky": "sunny"}
    ]
    assert answered.text == "Oslo is sunny."
    (error,) = unscripted.errors
    assert "no key of the script" in error
    assert [m["role"] for m in chat.messages("c-live")] == ["user", "assistant"] * 2


def test_approvals_on_the_live_connection_and_back_to_stream() -> None:
    """The approval gate of `run_live` waits on the socket that asked; the chat then moves
    to `/stream` (its socket closed, as a page that switches transports)."""
    model = ScriptedLlm(
        script={"transfer": [call("transfer", amount=50), "Done."], "hello": ["Hi."]}
    )
    agent = LlmAgent(
        name="live_approver",
        model=model,
        tools=[FunctionTool(transfer, require_confirmation=True)],
    )
    with serve_agent(agent) as chat:
        asked = chat.send("transfer 50", chat="c-approve", live=True)
        assert asked.of_type("tool-approval-request")
        done = chat.approve(True, chat="c-approve", live=True)
        assert done.of_type("tool-output-available")[0]["output"] == {"transferred": 50}
        assert done.text == "Done."
        assert chat.send("hello", chat="c-approve").text == "Hi."  # POST /stream
    assert [m["role"] for m in chat.messages("c-approve")] == ["user", "assistant"] * 2


def test_a_socket_path_reaches_the_app_as_a_request_path_does() -> None:
    """README: `chat.http.websocket_connect("/live?chatId=...")`. Starlette's own client
    sends such a socket to the host `testserver`, which the app still refuses: its host
    policy is not loosened for tests, the test client addresses the app as `localhost`."""
    agent = LlmAgent(name="socket_path", model=ScriptedLlm(script={"": ["Hi."]}))
    with serve_agent(agent) as chat:
        with chat.http.websocket_connect("/live?chatId=c-path") as socket:
            socket.send_json({"type": "ping", "timestamp": 1})
            assert socket.receive_json() == {"type": "pong", "timestamp": 1}
        plain = TestClient(chat.http.app)
        with (
            pytest.raises(WebSocketDenialResponse) as refused,
            plain.websocket_connect("/live?chatId=c-plain"),
        ):
            pass
    assert refused.value.status_code == 400


def test_the_testing_extra_brings_the_client_starlettes_test_client_wants() -> None:
    """Starlette's TestClient uses httpx2, and with only httpx warns (a
    StarletteDeprecationWarning) in every run of a user's tests: the extra installs it.
    tests/test_readme_example.py runs a user's test file and sees no such warning."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    testing = pyproject["project"]["optional-dependencies"]["testing"]
    names = {re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0] for requirement in testing}
    wanted = vars(starlette.testclient)["httpx"].__name__  # what it imported: httpx2 first
    assert wanted == "httpx2"
    assert wanted in names
