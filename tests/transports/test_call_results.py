"""``POST /chats/{chatId}/calls/{callId}/result`` (docs/adr/0040): a backend completes a
long-running call, as ADK's pattern has it, and the call's invocation continues. The real app
in this process, the real ADK Runner, a scripted model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Collection, Iterator, Sequence
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types

from adk_stream_protocol.testing import (
    Answer,
    ScriptedLlm,
    call,
    serve_agent,
    settings_for_tests,
)
from adk_stream_protocol.testing_client import AgentClient, read_response

TOKEN = "backend-secret"
AUTH = {"authorization": f"Bearer {TOKEN}"}


def open_refund(amount: int) -> dict[str, str]:
    """Starts a refund that a person decides later: pending at once."""
    return {"status": "pending", "ticket": "T-1"}


def get_balance() -> dict[str, int]:
    return {"balance": 10}


class RefundLlm(ScriptedLlm):
    """The script, and one more answer once the refund's final result came back; that
    answer waits for ``release`` (a test's resume attaches meanwhile)."""

    release: Any = None

    def answer(
        self, contents: Sequence[types.Content], *, browser_tools: Collection[str] = ()
    ) -> Answer:
        final = _final_status(contents)
        if final is not None:
            return Answer(text=f"The refund was {final}.")
        return super().answer(contents, browser_tools=browser_tools)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if self.release is not None and _final_status(llm_request.contents) is not None:
            await asyncio.to_thread(self.release.wait, 10)
        async for response in super().generate_content_async(llm_request, stream):
            yield response


def _final_status(contents: Sequence[types.Content]) -> str | None:
    last = contents[-1] if contents else None
    for part in (last.parts or []) if last is not None and last.role == "user" else []:
        response = part.function_response
        if (
            response is not None
            and response.name == "open_refund"
            and (response.response or {}).get("status") != "pending"
        ):
            status = (response.response or {}).get("status")
            return str(status) if status else "declined"
    return None


def refund_agent(release: threading.Event | None = None) -> LlmAgent:
    model = RefundLlm(
        script={
            "refund": [call("open_refund", amount=5), "Your refund is filed."],
            "balance": [call("get_balance"), "You have 10."],
        }
    )
    model.release = release
    return LlmAgent(
        name="refunds",
        model=model,
        tools=[LongRunningFunctionTool(open_refund), FunctionTool(get_balance)],
    )


@pytest.fixture
def chat() -> Iterator[AgentClient]:
    with serve_agent(refund_agent(), settings_for_tests(call_result_token=TOKEN)) as client:
        yield client


def _deliver(chat: AgentClient, chat_id: str, call_id: str, body: object, **headers: str) -> Any:
    return chat.http.post(
        f"/chats/{chat_id}/calls/{call_id}/result", json=body, headers=headers or AUTH
    )


def _refund_call(chat: AgentClient, chat_id: str) -> tuple[str, str]:
    """A refund filed in the chat: its call id and the assistant message's id."""
    filed = chat.send("refund please", chat=chat_id)
    (output,) = filed.of_type("tool-output-available")
    assert output["output"] == {"status": "pending", "ticket": "T-1"}
    assert filed.text == "Your refund is filed."
    assert filed.message is not None
    return output["toolCallId"], filed.message["id"]


@pytest.mark.parametrize(
    ("body", "shown", "answer"),
    [
        (
            {"output": {"status": "approved"}},
            {"type": "tool-output-available", "output": {"status": "approved"}},
            "The refund was approved.",
        ),
        (
            {"error": "the bank refused"},
            {"type": "tool-output-error", "errorText": "the bank refused"},
            "The refund was declined.",
        ),
    ],
    ids=["output", "error"],
)
def test_the_final_result_continues_the_call_and_the_page_sees_it_on_resume(
    body: dict[str, Any], shown: dict[str, Any], answer: str
) -> None:
    release = threading.Event()
    with serve_agent(refund_agent(release), settings_for_tests(call_result_token=TOKEN)) as chat:
        call_id, message_id = _refund_call(chat, "c1")
        delivered = _deliver(chat, "c1", call_id, body)
        assert delivered.status_code == 202, delivered.text
        assert delivered.json() == {"chatId": "c1", "callId": call_id, "status": "continuing"}
        with chat.http.stream("GET", "/stream/c1/stream") as resumed:
            assert resumed.status_code == 200
            lines = resumed.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            release.set()  # the model answers once the page follows
            text = "\n".join([first, *lines])
        _, chunks = read_response(200, text)  # each chunk of the AI SDK's schema, then [DONE]
        # The page's message that holds the call goes on: rebuilt first (the pending result)
        # for a page that resumes from an empty message (docs/adr/0045), then the result on
        # its part, then the model's answer.
        assert chunks[0] == {"type": "start", "messageId": message_id}
        results = [c for c in chunks if c["type"].startswith("tool-output")]
        pending = {"type": "tool-output-available", "toolCallId": call_id}
        assert results[0] == {**pending, "output": {"status": "pending", "ticket": "T-1"}}
        assert results[1:] == [{**shown, "toolCallId": call_id}]
        said = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
        assert said.endswith(answer)
        assert chunks[-1]["type"] == "finish"
        # Once: the same result again is refused, and the chat goes on.
        again = _deliver(chat, "c1", call_id, body)
        assert again.status_code == 409, again.text
        assert "already has its final result" in again.json()["detail"]
        assert chat.send("balance", chat="c1").text == "You have 10."


def test_the_route_is_off_without_its_credential_and_refuses_a_wrong_one() -> None:
    with serve_agent(refund_agent()) as off:
        call_id, _ = _refund_call(off, "c3")
        refused = _deliver(off, "c3", call_id, {"output": {"status": "approved"}})
        assert refused.status_code == 403
        assert "ADK_STREAM_CALL_RESULT_TOKEN" in refused.json()["detail"]
    with serve_agent(refund_agent(), settings_for_tests(call_result_token=TOKEN)) as on:
        call_id, _ = _refund_call(on, "c4")
        for headers in ({"authorization": "Bearer wrong"}, {"authorization": TOKEN}, {"x": "y"}):
            wrong = _deliver(on, "c4", call_id, {"output": {}}, **headers)
            assert wrong.status_code == 401, headers
            assert wrong.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({}, 'exactly one of "output" and "error"'),
        ({"output": 1, "error": "x"}, 'exactly one of "output" and "error"'),
        ({"error": " "}, '"error" is empty'),
        ({"output": 1, "extra": True}, "extra: Extra inputs are not permitted"),
        ([1], "send a JSON object"),
    ],
)
def test_a_body_that_is_not_a_result_gets_422(chat: AgentClient, body: object, detail: str) -> None:
    call_id, _ = _refund_call(chat, "c5")
    refused = _deliver(chat, "c5", call_id, body)
    assert refused.status_code == 422, refused.text
    assert detail in refused.json()["detail"]


def test_only_a_long_running_call_of_this_chat_takes_a_result(chat: AgentClient) -> None:
    asked = chat.send("balance", chat="c6")
    (plain,) = asked.of_type("tool-output-available")
    not_long = _deliver(chat, "c6", plain["toolCallId"], {"output": {}})
    assert not_long.status_code == 409
    assert "not long-running" in not_long.json()["detail"]
    for chat_id, call_id in (("c6", "adk-unknown"), ("never-seen", "adk-unknown")):
        unknown = _deliver(chat, chat_id, call_id, {"output": {}})
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["detail"] == "no such call in this chat"
