"""The request parts ai 7's ``useChat`` can send back (docs/adr/0022): every one is accepted by
``POST /stream`` and ``/live``; what the model can use becomes ADK content, the rest is left out.

Steering messages are followed to the model itself: ``recording_agent`` (served through the
``ADK_STREAM_AGENT`` setting, with the real ADK Runner) records the contents of every model
request, so a test sees where a steering message landed in the model's input.
"""

from __future__ import annotations

import base64
import copy
import uuid
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm, LlmCapabilities
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import FunctionTool, LongRunningFunctionTool
from google.genai import types

from adk_stream_protocol.demo.tools import ApprovalLongRunningFunctionTool
from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.limits import RequestLimits
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.parts.custom import CustomUIPart
from adk_stream_protocol.protocol.parts.files import FileUIPart, ReasoningFileUIPart
from adk_stream_protocol.protocol.parts.steering import SteeringMessageUIPart
from adk_stream_protocol.protocol.parts.text import TextUIPart
from adk_stream_protocol.protocol.ui_messages import parse_chat_request
from adk_stream_protocol.store.history import STEERING_IDS_KEY
from tests.support.ai7_socket import V7Socket
from tests.support.rig import (
    PNG_1X1,
    InProcessApp,
    LiveSocket,
    StreamResult,
    answer_approvals,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    stored_events,
    user_message,
    user_turn_texts,
)

PNG = PNG_1X1
PNG_URL = "data:;base64," + base64.b64encode(PNG).decode()  # the header names no type
LIMITS = RequestLimits.from_settings(Settings())


def new_chat() -> str:
    return f"v7-{uuid.uuid4().hex[:12]}"


def steering(
    steering_id: str, *texts: str, files: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    return {"type": "steering-message", "id": steering_id, "parts": [*parts, *(files or [])]}


# Every part shape, and every new field, a v7 client may hold in its messages.
V7_ASSISTANT_PARTS: list[dict[str, Any]] = [
    {"type": "step-start"},
    {"type": "custom", "kind": "openai.compaction", "providerMetadata": {"openai": {"k": 1}}},
    {"type": "reasoning", "text": "thinking", "state": "done", "providerMetadata": {}},
    {"type": "reasoning-file", "mediaType": "image/png", "url": PNG_URL, "providerMetadata": {}},
    {
        "type": "text",
        "text": "Here is a cat.",
        "state": "done",
        "citations": [
            {
                "source": {"type": "source", "sourceType": "url", "id": "s1", "url": "https://x"},
                "startIndex": 0,
                "endIndex": 4,
                "citedText": "Here",
            }
        ],
    },
    # A file the model made, uploaded to a provider: display-only here, so no data needed.
    {"type": "file", "mediaType": "image", "url": "", "providerReference": {"google": "f-9"}},
    steering("steer-old", "an earlier steer"),  # history: the session has it, or never will
    {
        "type": "tool-get_weather",
        "toolCallId": "call-old",
        "state": "output-available",
        "input": {"city": "Tokyo"},
        "output": {"temp": 20},
        "approval": {"id": "ap-old", "approved": True, "requestReason": "r", "isAutomatic": True},
    },
]


# -- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("part", V7_ASSISTANT_PARTS, ids=lambda p: p["type"])
def test_every_v7_part_shape_is_read(part: dict[str, Any]) -> None:
    body = chat_body("c", {"id": "a", "role": "assistant", "parts": [part]})
    (held,) = parse_chat_request(body, LIMITS).messages[0].parts
    assert held.type == part["type"]


def test_the_new_fields_are_held_as_sent() -> None:
    body = chat_body("c", {"id": "a", "role": "assistant", "parts": V7_ASSISTANT_PARTS})
    parts = parse_chat_request(body, LIMITS).messages[0].parts
    custom, reasoning_file, text, file, steered = (parts[i] for i in (1, 3, 4, 5, 6))
    assert isinstance(custom, CustomUIPart) and custom.kind == "openai.compaction"
    assert isinstance(reasoning_file, ReasoningFileUIPart) and reasoning_file.url == PNG_URL
    assert isinstance(text, TextUIPart) and text.citations == V7_ASSISTANT_PARTS[4]["citations"]
    assert isinstance(file, FileUIPart) and file.provider_reference == {"google": "f-9"}
    assert isinstance(steered, SteeringMessageUIPart) and steered.id == "steer-old"
    tool = parse_chat_request(body, LIMITS).messages[0].tool_parts()[0]
    assert tool.approval is not None
    assert (tool.approval.request_reason, tool.approval.is_automatic) == ("r", True)


@pytest.mark.parametrize(
    ("part", "where"),
    [
        (steering("s", files=[{"type": "reasoning", "text": "x"}]), "parts.0.parts.0"),
        ({"type": "steering-message", "parts": []}, "parts.0.id"),
        ({"type": "custom"}, "parts.0.kind"),
        ({"type": "reasoning-file", "mediaType": "image/png"}, "parts.0.url"),
        (
            {"type": "file", "mediaType": "image", "url": "", "providerReference": {"a": 1}},
            "parts.0.providerReference.a",
        ),
    ],
)
def test_malformed_v7_parts_are_refused_with_their_path(part: dict[str, Any], where: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_chat_request(chat_body("c", {"id": "u", "role": "user", "parts": [part]}), LIMITS)
    assert caught.value.status == 422
    assert f"messages.0.{where}" in caught.value.message


def test_an_approval_marked_automatic_by_a_string_is_refused() -> None:
    tool = {**V7_ASSISTANT_PARTS[-1], "approval": {"id": "a", "isAutomatic": "yes"}}
    with pytest.raises(RequestError) as caught:
        parse_chat_request(
            chat_body("c", {"id": "a", "role": "assistant", "parts": [tool]}), LIMITS
        )
    assert "approval.isAutomatic" in caught.value.message


def test_steering_files_and_text_count_toward_the_limits() -> None:
    limits = RequestLimits(
        max_request_bytes=1 << 20,
        max_message_chars=5,
        max_parts_per_message=3,
        max_added_bytes=1 << 20,
        max_json_depth=32,
        max_file_bytes=4,
    )
    cases = [
        (steering("s", "123456"), "characters of text"),  # in an assistant message too
        (steering("s", "1", "2", "3"), "parts"),
        (steering("s", files=[{"type": "file", "mediaType": "text/plain", "url": "data:,12345"}]),
         "larger than"),
    ]  # fmt: skip
    for part, reason in cases:
        message = {"id": "a", "role": "assistant", "parts": [part]}
        with pytest.raises(RequestError) as caught:
            parse_chat_request(chat_body("c", message), limits)
        assert caught.value.status == 413 and reason in caught.value.message


# -- POST /stream and /live: the demo agent ------------------------------------------------------


def v7_conversation(chat_id: str, steer_id: str = "steer-new") -> dict[str, Any]:
    """A conversation as a v7 client holds it: every part shape in an earlier answer, and a new
    user message with citations, a file of a bare type, a steering message and display parts."""
    earlier = [
        user_message("hello", "u-0"),
        {"id": "a-0", "role": "assistant", "parts": V7_ASSISTANT_PARTS},
    ]
    last = {
        "id": "u-1",
        "role": "user",
        "parts": [
            {"type": "text", "text": "Look at", "citations": []},
            {"type": "file", "mediaType": "image", "url": PNG_URL, "filename": "dot"},
            {"type": "custom", "kind": "google.thing"},
            {"type": "reasoning-file", "mediaType": "image/png", "url": PNG_URL},
            steering(steer_id, "and steer this", files=[{"type": "file", "mediaType": "text",
                     "url": "data:text/plain,note"}]),
        ],
    }  # fmt: skip
    return chat_body(chat_id, *earlier, last)


EXPECTED_USER_CONTENT = [
    types.Part(text="Look at"),
    types.Part(inline_data=types.Blob(mime_type="image/png", data=PNG)),
    types.Part(text="and steer this"),
    types.Part(inline_data=types.Blob(mime_type="text/plain", data=b"note")),
]


def test_a_v7_conversation_is_answered_and_only_model_input_is_stored(app: InProcessApp) -> None:
    chat_id = new_chat()
    result = post_stream(app, v7_conversation(chat_id))
    assert result.status == 200, result.body
    assert 'You said: "Look at and steer this"' in result.text()
    users = [e for e in stored_events(app, chat_id) if e.author == "user"]
    assert len(users) == 1, "only the new message: earlier ones are the client's history"
    assert users[0].content is not None
    assert users[0].content.parts == EXPECTED_USER_CONTENT


def test_a_v7_conversation_is_answered_on_live(app: InProcessApp) -> None:
    chat_id = new_chat()
    body = v7_conversation(chat_id)
    with LiveSocket(app, chat_id) as socket:
        socket.send({"type": "message", "version": "1", **body})
        result = socket.response()
    assert not result.of_type("error"), result.chunks
    assert 'You said: "Look at and steer this"' in result.text()
    users = [e for e in stored_events(app, chat_id) if e.author == "user" and e.content]
    assert users[0].content is not None
    assert users[0].content.parts == EXPECTED_USER_CONTENT


@pytest.mark.parametrize(
    ("file", "reason"),
    [
        ({"type": "file", "mediaType": "image", "url": "data:;base64,AAAA"}, "cannot be told"),
        (
            {"type": "file", "mediaType": "image/png", "url": "", "providerReference": {"x": "1"}},
            "providerReference",
        ),
    ],
)
def test_a_file_the_model_cannot_take_is_a_422_that_says_why(
    app: InProcessApp, file: dict[str, Any], reason: str
) -> None:
    chat_id = new_chat()
    message = {"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "hi"}, file]}
    result = post_stream(app, chat_body(chat_id, message))
    assert result.status == 422
    assert reason in result.body
    with LiveSocket(app, chat_id) as socket:
        refused = socket.message(message)
    (error,) = refused.of_type("error")
    assert reason in error["errorText"]


# -- steering a paused turn: the recording agent ------------------------------------------------

RECORDED: list[list[types.Content]] = []  # the contents of each model request, in order


def pay(amount: float) -> dict[str, float]:
    """Pays; needs the user's approval."""
    return {"paid": amount}


def locate() -> None:
    """Runs in the browser after approval."""


def play() -> None:
    """Runs in the browser."""


class RecordingLlm(BaseLlm):
    """Records each request. "pay <n>", "locate" and "play" call those tools; function
    results get "done"; any other text is echoed ("heard: …"). It reads only the last content,
    so what a steering message makes it do shows where the message landed."""

    model: str = "recording-test"

    @property
    def capabilities(self) -> LlmCapabilities:
        return LlmCapabilities(output_schema_and_tools=False)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        RECORDED.append([c.model_copy(deep=True) for c in llm_request.contents])
        last = llm_request.contents[-1].parts or []
        words = " ".join(p.text for p in last if p.text).split()
        if words[:1] == ["pay"]:
            part = types.Part(function_call=types.FunctionCall(name="pay", args={"amount": 5}))
        elif words[:1] in (["locate"], ["play"]):
            part = types.Part(function_call=types.FunctionCall(name=words[0], args={}))
        elif words:
            part = types.Part(text="heard: " + " ".join(words))
        else:
            part = types.Part(text="done")
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


recording_agent = LlmAgent(
    name="recording_agent",
    model=RecordingLlm(),
    tools=[
        FunctionTool(pay, require_confirmation=True),
        ApprovalLongRunningFunctionTool(locate),
        LongRunningFunctionTool(play),
    ],
)


@pytest.fixture(scope="module")
def recording_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    with in_process_app(
        tmp_path_factory.mktemp("steering"),
        agent="tests.protocol.test_request_parts_v7:recording_agent",
    ) as target:
        yield target


def shown(contents: list[types.Content]) -> list[str]:
    """Model input, short: ``user:pay 5``, ``model:FC pay``, ``user:FR pay``."""
    out = []
    for content in contents:
        for part in content.parts or []:
            if part.function_call:
                what = f"FC {part.function_call.name}"
            elif part.function_response:
                what = f"FR {part.function_response.name}"
            else:
                what = part.text or "?"
            out.append(f"{content.role}:{what}")
    return out


class Chat:
    """One chat with the recording agent, as a client holds it."""

    def __init__(self, target: InProcessApp, text: str) -> None:
        self.target = target
        self.id = new_chat()
        self.user = user_message(text, "u-1")
        self.responses = [post_stream(target, chat_body(self.id, self.user))]
        assert self.responses[0].status == 200

    def assistant(self) -> dict[str, Any]:
        return assistant_message(*self.responses)

    def send(self, message: dict[str, Any]) -> StreamResult:
        RECORDED.clear()
        body = chat_body(self.id, self.user, message, messageId=message["id"])
        result = post_stream(self.target, body)
        if result.status == 200:
            self.responses.append(result)
        return result


def with_steering(message: dict[str, Any], *parts: dict[str, Any]) -> dict[str, Any]:
    message = copy.deepcopy(message)
    message["parts"].extend(parts)
    return message


def test_steering_with_an_approval_reaches_the_model_in_the_resumed_turn(
    recording_app: InProcessApp,
) -> None:
    chat = Chat(recording_app, "pay 5")
    answer = with_steering(answer_approvals(chat.assistant(), True), steering("st-1", "hi there"))
    result = chat.send(answer)
    assert result.status == 200, result.body
    (call,) = RECORDED
    assert shown(call)[-3:] == ["model:FC pay", "user:FR pay", "user:hi there"]
    assert "heard: hi there" in result.text()
    events = stored_events(recording_app, chat.id)
    assert len({e.invocation_id for e in events}) == 1, "one turn: the paused one, resumed"
    steered = [e for e in events if (e.custom_metadata or {}).get(STEERING_IDS_KEY)]
    assert [e.custom_metadata[STEERING_IDS_KEY] for e in steered] == [["st-1"]]  # type: ignore[index]
    assert user_turn_texts(events) == ["pay 5"], "a steering message starts no turn"
    # The same message again answers nothing new.
    assert chat.send(answer).status == 409


def test_the_next_turn_sees_the_steering_after_the_tool_result(
    recording_app: InProcessApp,
) -> None:
    chat = Chat(recording_app, "pay 5")
    answer = with_steering(answer_approvals(chat.assistant(), True), steering("st-1", "note"))
    chat.send(answer)
    RECORDED.clear()
    later = chat_body(chat.id, chat.user, chat.assistant(), user_message("next", "u-2"))
    assert post_stream(recording_app, later).status == 200
    assert shown(RECORDED[0]) == [
        "user:pay 5",
        "model:FC pay",
        "user:FR pay",
        "user:note",
        "model:heard: note",
        "user:next",
    ]


def test_each_steering_message_is_taken_once(recording_app: InProcessApp) -> None:
    # The steering asks for another payment: taken twice, it would ask again and again.
    chat = Chat(recording_app, "pay 5")
    steer = steering("st-again", "pay 5")
    first = chat.send(with_steering(answer_approvals(chat.assistant(), True), steer))
    assert first.of_type("tool-approval-request"), "the steering made the model pay again"
    # The client re-sends the whole message, steering part included, with the next approval.
    message = chat.assistant()
    message["parts"].insert(3, steer)
    second = chat.send(answer_approvals(message, True, True))
    assert second.status == 200, second.body
    assert second.of_type("finish")[0]["finishReason"] == "stop"
    (call,) = RECORDED
    assert shown(call).count("user:pay 5") == 2, "the first message and the steering, once"
    assert shown(call)[-1] == "user:FR pay"


def test_steering_with_a_browser_result_reaches_the_model(recording_app: InProcessApp) -> None:
    chat = Chat(recording_app, "play")
    message = chat.assistant()
    (part,) = [p for p in message["parts"] if p["type"] == "tool-play"]
    part.update(state="output-available", output={"playing": True})
    result = chat.send(with_steering(message, steering("st-b", "louder")))
    assert result.status == 200, result.body
    assert shown(RECORDED[0])[-3:] == ["model:FC play", "user:FR play", "user:louder"]
    assert "heard: louder" in result.text()


def test_steering_with_an_approval_and_a_browser_result_in_one_request(
    recording_app: InProcessApp,
) -> None:
    chat = Chat(recording_app, "locate")
    message = answer_approvals(chat.assistant(), True)
    (part,) = [p for p in message["parts"] if p["type"] == "tool-locate"]
    part.update(state="output-available", output={"city": "Tokyo"})
    result = chat.send(with_steering(message, steering("st-c", "thanks")))
    assert result.status == 200, result.body
    # ADK keeps this steering itself (it shares the event of the browser's result): once.
    assert shown(RECORDED[0])[-2:] == ["user:FR locate", "user:thanks"]
    assert shown(RECORDED[0]).count("user:thanks") == 1


def test_steering_waits_while_the_browser_has_not_run_the_approved_tool(
    recording_app: InProcessApp,
) -> None:
    chat = Chat(recording_app, "locate")
    steer = steering("st-d", "hurry")
    approved = with_steering(answer_approvals(chat.assistant(), True), steer)
    rearmed = chat.send(approved)
    assert rearmed.of_type("tool-input-available"), "handed back to the browser"
    assert not RECORDED, "ADK is not resumed yet"
    assert not [e for e in stored_events(recording_app, chat.id) if e.author == "user"][1:]
    (part,) = [p for p in approved["parts"] if p["type"] == "tool-locate"]
    part.update(state="output-available", output={"city": "Kyoto"})
    result = chat.send(approved)
    assert result.status == 200, result.body
    assert shown(RECORDED[0])[-2:] == ["user:FR locate", "user:hurry"]


def test_steering_in_earlier_messages_is_history(recording_app: InProcessApp) -> None:
    chat = Chat(recording_app, "hello")
    earlier = with_steering(chat.assistant(), steering("st-e", "stale"))
    RECORDED.clear()
    body = chat_body(chat.id, chat.user, earlier, user_message("again", "u-2"))
    assert post_stream(recording_app, body).status == 200
    assert "user:stale" not in shown(RECORDED[0])


def test_steering_over_an_ai7_socket_reaches_the_resumed_turn_once(
    recording_app: InProcessApp,
) -> None:
    # ai 7's own transport (a /live socket without ?chatId=) runs the same request turn.
    socket = V7Socket(recording_app)
    try:
        chat_id, user = new_chat(), user_message("pay 5", "u-1")
        asked = socket.reply(socket.send(chat_id, user)).stream()
        answer = with_steering(
            answer_approvals(assistant_message(asked), True), steering("v", "ok")
        )
        RECORDED.clear()
        done = socket.reply(socket.send(chat_id, user, answer, messageId=answer["id"]))
        assert done.last == "end", done.frames
        assert shown(RECORDED[0])[-2:] == ["user:FR pay", "user:ok"]
        assert "heard: ok" in done.stream().text()
        again = socket.reply(socket.send(chat_id, user, answer, messageId=answer["id"]))
        assert again.last == "error", "nothing is waiting, and the steering was taken"
    finally:
        socket.close()


# -- /live: the demo agent --------------------------------------------------------------------


def test_live_steering_is_answered_once_when_the_model_has_answered(app: InProcessApp) -> None:
    chat_id = new_chat()
    user = user_message("Pay Alice 10, then pay Bob 20", "u-1")
    steer = steering("st-live", "hello there")
    with LiveSocket(app, chat_id) as socket:
        first = socket.message(user)
        alice = with_steering(answer_approvals(assistant_message(first), True), steer)
        # The turn goes on to Bob's approval; the steering waits for the model's answer.
        second = socket.message(user, alice, messageId=alice["id"])
        assert second.of_type("tool-approval-request")
        assert "hello there" not in second.text()
        both = assistant_message(first, second)
        both["parts"].insert(2, steer)  # re-sent, as a client does
        third = socket.message(user, answer_approvals(both, True, True), messageId=alice["id"])
    text = third.text()
    assert text.count('You said: "hello there"') == 1, text
    assert text.index("Sent 20 USD to Bob") < text.index("hello there")
    assert third.of_type("finish")[0]["finishReason"] == "stop"


def test_steering_that_resumes_nothing_is_refused_saying_so(
    app: InProcessApp, recording_app: InProcessApp
) -> None:
    chat = Chat(recording_app, "hello")
    lone = with_steering(chat.assistant(), steering("st-f", "more"))
    result = chat.send(lone)
    assert result.status == 409
    assert "steering message" in result.body and "user message" in result.body
    with LiveSocket(app, new_chat()) as socket:
        first = socket.message(user_message("hello", "u-1"))
        refused = socket.message(
            user_message("hello", "u-1"), with_steering(assistant_message(first), lone["parts"][-1])
        )
    (error,) = refused.of_type("error")
    assert "steering message" in error["errorText"]
