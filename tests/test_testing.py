"""`adk_stream_protocol.testing`: the scripted model and the client, through the real app."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.tools import FunctionTool
from google.genai import types

from adk_stream_protocol.testing import (
    NO_SCRIPT,
    SCRIPT_ENDED,
    AgentClient,
    Answer,
    ScriptedLlm,
    call,
    serve_agent,
)


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


def read_live_response(socket: Any) -> list[dict[str, Any]]:
    """The chunks of one response on `/live?chatId=` (SSE-framed text frames), to `[DONE]`."""
    chunks: list[dict[str, Any]] = []
    while True:
        frame = socket.receive_text()
        if not frame.startswith("data: "):
            continue  # a control frame
        payload = frame.removeprefix("data: ").strip()
        if payload == "[DONE]":
            return chunks
        chunks.append(json.loads(payload))


def test_a_scripted_model_answers_on_the_live_connection() -> None:
    """`/live?chatId=` runs `run_live`: the script answers there too, tools and all."""
    model = ScriptedLlm(script={"weather": [call("lookup", city="Oslo"), "Oslo is sunny."]})
    agent = LlmAgent(name="live_helper", model=model, tools=[lookup])
    with (
        serve_agent(agent) as chat,
        chat.http.websocket_connect("ws://localhost/live?chatId=c-live") as socket,
    ):
        message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "weather?"}]}
        socket.send_json(
            {"type": "message", "version": "1", "id": "c-live", "messages": [message]}
            | {"trigger": "submit-message"}
        )
        answered = read_live_response(socket)
        message["parts"] = [{"type": "text", "text": "something else"}]
        message["id"] = "u2"
        socket.send_json(
            {"type": "message", "version": "1", "id": "c-live", "messages": [message]}
            | {"trigger": "submit-message"}
        )
        unscripted = read_live_response(socket)
    outputs = [c["output"] for c in answered if c["type"] == "tool-output-available"]
    assert outputs == [{"city": "Oslo", "sky": "sunny"}]
    text = "".join(c["delta"] for c in answered if c["type"] == "text-delta")
    assert text == "Oslo is sunny."
    (error,) = [c for c in unscripted if c["type"] == "error"]
    assert "no key of the script" in error["errorText"]
