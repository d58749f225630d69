"""`adk_stream_protocol.testing`: the scripted model and the client, through the real app."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator

import pytest
import starlette.testclient
from google.adk.agents import LlmAgent
from google.adk.tools import FunctionTool, LongRunningFunctionTool
from google.genai import types
from starlette.testclient import TestClient, WebSocketDenialResponse

from adk_stream_protocol.testing import (
    NO_BRANCH,
    NO_SCRIPT,
    SCRIPT_ENDED,
    AgentClient,
    Answer,
    Branch,
    ScriptedLlm,
    call,
    outcome_of,
    serve_agent,
)
from tests.support.rig import ROOT


def transfer(amount: float) -> dict[str, float]:
    """Moves money (after the user's approval)."""
    return {"transferred": amount}


def lookup(city: str) -> dict[str, str]:
    return {"city": city, "sky": "sunny"}


def forecast(city: str) -> dict[str, str]:
    """Fails as tools report failures to ADK: an error-shaped result."""
    return {"error": f"no forecast for {city}"}


def play(track: int) -> None:
    """Runs in the browser (a long-running tool that returns nothing)."""


# Each answer after a call says how the call came back.
AFTER_PAYMENT = Branch(approved="Done.", denied="I did not transfer the money.")
AFTER_FORECAST = Branch(error="There is no forecast for Oslo.", otherwise="Here it is.")
AFTER_PLAY = Branch(browser="Playing.", error="The page could not play it.")

SCRIPT = ScriptedLlm(
    script={
        "transfer": [call("transfer", amount=50), AFTER_PAYMENT],
        "forecast": [call("forecast", city="Oslo"), AFTER_FORECAST],
        "play": [call("play", track=2), AFTER_PLAY],
        "branch first": [Branch(denied="Never.")],
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
        tools=[
            lookup,
            forecast,
            LongRunningFunctionTool(play),
            FunctionTool(transfer, require_confirmation=True),
        ],
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


@pytest.mark.parametrize("live", [False, True], ids=["stream", "live"])
def test_a_denied_call_does_not_run_and_the_model_answers_the_denial(
    chat: AgentClient, live: bool
) -> None:
    chat.send("transfer 50", chat=f"deny-{live}", live=live)
    denied = chat.approve(False, chat=f"deny-{live}", live=live)
    assert denied.of_type("tool-output-denied") and not denied.of_type("tool-output-available")
    assert denied.text == "I did not transfer the money."


@pytest.mark.parametrize("live", [False, True], ids=["stream", "live"])
def test_a_branch_answers_a_tools_error(chat: AgentClient, live: bool) -> None:
    answer = chat.send("forecast for Oslo", chat=f"forecast-{live}", live=live)
    assert answer.of_type("tool-output-error")[0]["errorText"] == "no forecast for Oslo"
    assert answer.text == "There is no forecast for Oslo."


@pytest.mark.parametrize("live", [False, True], ids=["stream", "live"])
def test_a_branch_answers_a_browser_tools_output_or_its_error(
    chat: AgentClient, live: bool
) -> None:
    asked = chat.send("play track 2", chat=f"play-{live}", live=live)
    assert asked.tool_calls[0]["toolName"] == "play" and asked.text == ""
    played = chat.tool_output({"playing": 2}, chat=f"play-{live}", live=live)
    assert played.text == "Playing."
    chat.send("play it again", chat=f"play-{live}", live=live)
    failed = chat.tool_output(error="autoplay is blocked", chat=f"play-{live}", live=live)
    assert failed.text == "The page could not play it."
    roles = [m["role"] for m in chat.messages(f"play-{live}")]
    assert roles == ["user", "assistant"] * 2


def test_a_branch_without_an_answer_for_the_outcome_says_so(chat: AgentClient) -> None:
    (error,) = chat.send("branch first", chat="no-branch").errors
    assert NO_BRANCH in error and "no branch for no calls" in error


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


def response(name: str, body: dict[str, object]) -> types.Content:
    reply = types.FunctionResponse(name=name, response=body)
    return types.Content(role="user", parts=[types.Part(function_response=reply)])


def test_the_outcome_is_read_from_the_results_of_the_last_calls() -> None:
    """What `Branch` answers by: the results after the last content that made calls."""
    user = types.Content(role="user", parts=[types.Part(text="go")])
    called = types.Content(
        role="model",
        parts=[
            types.Part(function_call=types.FunctionCall(name="transfer")),
            types.Part(function_call=types.FunctionCall(name="play")),
        ],
    )
    ok, played = response("transfer", {"ok": 1}), response("play", {"track": 2})
    rejected = response("transfer", {"error": "This tool call is rejected."})
    failed = response("transfer", {"error": "down"})
    assert outcome_of([user]) is None
    assert outcome_of([user, called, ok]) == "approved"
    assert outcome_of([user, called, ok, played], browser_tools={"play"}) == "browser"
    assert outcome_of([user, called, failed, played], browser_tools={"play"}) == "error"
    assert outcome_of([user, called, rejected, failed]) == "denied"
    # An earlier step's results do not count.
    assert outcome_of([user, called, rejected, called, ok]) == "approved"


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
    """docs/agent/testing.md: `chat.http.websocket_connect("/live?chatId=...")`. Starlette's own
    client sends such a socket to the host `testserver`, which the app still refuses: its host
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
