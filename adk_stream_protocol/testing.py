"""Test your own agent through this server, offline: a scripted model and a client.

``ScriptedLlm`` is a real ADK model (a ``BaseLlm``) that answers from a script instead of the
network, streaming its text in partials as Gemini does. ``serve_agent`` starts the real app
(``create_app``: real ADK ``Runner``, real endpoints) in this process with an agent, and its
``AgentClient`` sends chat messages to ``POST /stream`` as ``useChat`` does and reads the
answer back as chunks and as the assistant message the page would show::

    agent = LlmAgent(name="helper", model=ScriptedLlm(script={...}), tools=[...])
    with serve_agent(agent) as chat:
        answer = chat.send("What's the weather in Tokyo?")
        assert answer.text == "It is sunny in Tokyo."

The README's "Testing your agent" shows a whole test (tests/test_readme_example.py runs it).
Install with the ``testing`` extra: ``TestClient`` needs httpx.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from google.adk.models import BaseLlm, LlmCapabilities
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import BaseModel, Field
from starlette.testclient import TestClient
from typing_extensions import override

from adk_stream_protocol.demo.history import calls_of, latest_user_message_index, text_of
from adk_stream_protocol.demo.live import OfflineLiveConnection
from adk_stream_protocol.demo.live_options import LiveOptions
from adk_stream_protocol.demo.model import reply_responses
from adk_stream_protocol.demo.plans import PlannedCall
from adk_stream_protocol.demo.replies import Reply
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.chunks import UI_MESSAGE_CHUNK
from adk_stream_protocol.server.app import create_app
from adk_stream_protocol.turns.bridge import AgentLike

__all__ = [
    "NO_SCRIPT",
    "SCRIPTED_ERROR",
    "SCRIPT_ENDED",
    "AgentClient",
    "Answer",
    "ChatResponse",
    "ScriptedLlm",
    "Step",
    "ToolCall",
    "answer_approvals",
    "assistant_message",
    "call",
    "serve_agent",
    "settings_for_tests",
    "sse_payloads",
]

# The error codes of a script that has no answer (the server logs them with the message).
NO_SCRIPT = "NO_SCRIPT"
SCRIPT_ENDED = "SCRIPT_ENDED"
SCRIPTED_ERROR = "SCRIPTED_ERROR"


# -- the scripted model --------------------------------------------------------------------


class ToolCall(BaseModel):
    """A call the model makes to one of the agent's tools."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)


def call(name: str, **args: Any) -> ToolCall:
    """``ToolCall(name=name, args=args)``: ``call("get_weather", city="Tokyo")``."""
    return ToolCall(name=name, args=args)


class Answer(BaseModel):
    """One whole model answer: a thought, text and calls (made together), or a failure."""

    text: str = ""
    thought: str = ""
    calls: list[ToolCall] = Field(default_factory=list)
    # The model fails with this message (an `error` chunk), as a refused Gemini call does.
    error: str | None = None
    error_code: str = SCRIPTED_ERROR


# One model answer in a script: text, a single call, or an `Answer`.
Step = str | ToolCall | Answer


class ScriptedLlm(BaseLlm):
    """A model that answers from ``script``: for the latest user message, the first key found
    in its text (case-insensitive; ``""`` matches any) gives the answers of that turn, one
    per model call. An answer with calls is followed, once the tools have answered (or the
    user has approved or denied them), by the next answer of the list; an answer without
    calls ends the turn. Like any model of the flow it sees the whole conversation, so a
    turn resumed after an approval continues where it stopped.

    No key matching, or a turn asking for more answers than its list has, is a model error
    (``NO_SCRIPT``, ``SCRIPT_ENDED``) whose message says which: the test sees an `error`
    chunk, and the server's log has the message. It serves every endpoint: ``POST /stream``
    and ai 7's ``/live`` (``run_async``), and ``/live?chatId=`` through a live connection
    (``run_live``) that answers from the same script, in text.
    """

    model: str = "scripted"
    script: dict[str, list[Step]] = Field(default_factory=dict)

    @property
    @override
    def capabilities(self) -> LlmCapabilities:
        return LlmCapabilities(output_schema_and_tools=False)

    @override
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        reply = await self._reply(llm_request.contents)
        async for response in reply_responses(reply, llm_request, stream, model_version=self.model):
            yield response

    @override
    @asynccontextmanager
    async def connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        """A live session (``run_live``) on the script: the demo model's live connection,
        with this script deciding each reply, and no pauses."""
        options = LiveOptions.from_config(llm_request.live_connect_config)
        connection = OfflineLiveConnection(
            options, model_version=self.model, pace_seconds=0, decide=self._reply
        )
        try:
            yield connection
        finally:
            await connection.close()

    async def _reply(self, contents: Sequence[types.Content]) -> Reply:
        """The script's answer as the demo model's reply, which both connections play."""
        answer = self.answer(contents)
        return Reply(
            thought=answer.thought or None,
            text=answer.text or None,
            calls=tuple(PlannedCall(c.name, dict(c.args)) for c in answer.calls),
            error=answer.error is not None,
            error_code=answer.error_code,
            error_message=answer.error or "",
        )

    def answer(self, contents: Sequence[types.Content]) -> Answer:
        """The answer to a conversation: a pure function of it, so retries and resumes
        give the same answer."""
        user_index = latest_user_message_index(contents)
        text = text_of(contents[user_index]) if user_index is not None else ""
        steps = next((s for key, s in self.script.items() if key.lower() in text.lower()), None)
        if steps is None:
            keys = ", ".join(repr(key) for key in self.script)
            message = f"no key of the script ({keys}) is in {text!r}"
            return Answer(error=message, error_code=NO_SCRIPT)
        later = contents[user_index + 1 :] if user_index is not None else []
        # Each earlier answer of this turn that made calls was one step of the list.
        done = sum(1 for c in later if c.role == "model" and calls_of(c))
        if done >= len(steps):
            message = f"the script has {len(steps)} answers for {text!r}; asked for {done + 1}"
            return Answer(error=message, error_code=SCRIPT_ENDED)
        step = steps[done]
        if isinstance(step, str):
            return Answer(text=step)
        if isinstance(step, ToolCall):
            return Answer(calls=[step])
        return step


# -- reading a response ----------------------------------------------------------------------


def sse_payloads(body: str) -> list[str]:
    """The data payloads of an SSE body, in order, as the AI SDK client splits them."""
    payloads = []
    for event in body.split("\n\n"):
        lines = [line for line in event.split("\n") if line and not line.startswith(":")]
        data = [
            line.removeprefix("data:").removeprefix(" ")
            for line in lines
            if line.startswith("data:")
        ]
        if data:
            payloads.append("\n".join(data))
    return payloads


def assistant_message(*responses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The assistant message a client holds after these responses' chunks (a continuation
    appends to it), reduced to what the server reads back: step starts, text, tool parts
    with their states, inputs and outputs; and sources, files and data parts as sent."""
    parts: list[dict[str, Any]] = []
    tools: dict[str, dict[str, Any]] = {}
    message_id = responses[0][0].get("messageId", "assistant") if responses[0] else "assistant"
    for chunks in responses:
        for chunk in chunks:
            kind = chunk["type"]
            if kind == "start-step":
                parts.append({"type": "step-start"})
            elif kind == "text-start":
                parts.append({"type": "text", "text": "", "state": "done"})
            elif kind == "text-delta":
                parts[-1]["text"] += chunk["delta"]
            elif kind == "tool-input-available":
                part = tools.get(chunk["toolCallId"])
                if part is None:
                    part = {"type": f"tool-{chunk['toolName']}", "toolCallId": chunk["toolCallId"]}
                    tools[chunk["toolCallId"]] = part
                    parts.append(part)
                part.update(state="input-available", input=chunk["input"])
            elif kind == "tool-approval-request":
                tools[chunk["toolCallId"]].update(
                    state="approval-requested", approval={"id": chunk["approvalId"]}
                )
            elif kind == "tool-output-available":
                tools[chunk["toolCallId"]].update(state="output-available", output=chunk["output"])
            elif kind == "tool-output-error":
                tools[chunk["toolCallId"]].update(
                    state="output-error", errorText=chunk["errorText"]
                )
            elif kind == "tool-output-denied":
                tools[chunk["toolCallId"]]["state"] = "output-denied"
            elif kind in ("source-url", "source-document", "file"):
                parts.append({k: v for k, v in chunk.items() if k != "providerMetadata"})
            elif kind.startswith("data-") and not chunk.get("transient"):
                _add_data_part(parts, chunk)
    return {"id": message_id, "role": "assistant", "parts": parts}


def _add_data_part(parts: list[dict[str, Any]], chunk: Mapping[str, Any]) -> None:
    """As useChat does: a data part with the type and id of one already there replaces its
    data; any other is added (a transient one, never: it goes only to ``onData``)."""
    part = {k: v for k, v in chunk.items() if k != "transient"}
    if "id" in part:
        for held in parts:
            if held["type"] == part["type"] and held.get("id") == part["id"]:
                held["data"] = part["data"]
                return
    parts.append(part)


def answer_approvals(message: dict[str, Any], *decisions: bool) -> dict[str, Any]:
    """What ``addToolApprovalResponse`` does: the parts awaiting approval, in order, get
    the decisions (one for each)."""
    requested = [p for p in message["parts"] if p.get("state") == "approval-requested"]
    if len(requested) != len(decisions):
        raise ValueError(f"{len(requested)} calls await approval, {len(decisions)} decisions")
    for part, approved in zip(requested, decisions, strict=True):
        part["state"] = "approval-responded"
        part["approval"] = {**part["approval"], "approved": approved}
    return message


@dataclass
class ChatResponse:
    """One response of ``POST /stream``: its status, its chunks (each checked against the
    AI SDK's chunk schema), and the assistant message the client holds after it."""

    status: int
    body: str
    chunks: list[dict[str, Any]]
    message: dict[str, Any] | None

    @property
    def text(self) -> str:
        """The answer's text, as the page shows it."""
        return "".join(c["delta"] for c in self.chunks if c["type"] == "text-delta")

    @property
    def errors(self) -> list[str]:
        """The text of each `error` chunk."""
        return [c["errorText"] for c in self.of_type("error")]

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls, as ``{"toolName", "toolCallId", "input"}``."""
        return [
            {key: c[key] for key in ("toolName", "toolCallId", "input")}
            for c in self.of_type("tool-input-available")
        ]

    def types(self) -> list[str]:
        return [c["type"] for c in self.chunks]

    def of_type(self, chunk_type: str) -> list[dict[str, Any]]:
        return [c for c in self.chunks if c["type"] == chunk_type]


def read_response(status: int, body: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The payloads and chunks of a ``/stream`` body; a 200 must end with ``[DONE]`` and
    hold only chunks of the AI SDK's schema (``AssertionError`` otherwise)."""
    if status != 200:
        return [], []
    payloads = sse_payloads(body)
    assert payloads and payloads[-1] == "[DONE]", f"the response does not end with [DONE]: {body}"
    chunks = [json.loads(p) for p in payloads[:-1]]
    for chunk in chunks:
        UI_MESSAGE_CHUNK.validate_python(chunk)  # raises on a chunk the client would refuse
    return payloads, chunks


# -- the app and a client --------------------------------------------------------------------


@dataclass
class _Chat:
    messages: list[dict[str, Any]] = field(default_factory=list)
    # The chunks of each response that built the last assistant message.
    responses: list[list[dict[str, Any]]] = field(default_factory=list)


class AgentClient:
    """Talks to the app as ``useChat`` with ``DefaultChatTransport`` does: each request
    carries the chat id and the whole chat, and approvals continue the assistant message."""

    def __init__(self, http: TestClient) -> None:
        self.http = http
        self._chats: dict[str, _Chat] = {}

    def send(self, text: str, *, chat: str = "chat-1") -> ChatResponse:
        """Send a user message and read the whole answer."""
        state = self._chats.setdefault(chat, _Chat())
        message_id = f"user-{sum(m['role'] == 'user' for m in state.messages) + 1}"
        parts = [{"type": "text", "text": text}]
        state.messages.append({"id": message_id, "role": "user", "parts": parts})
        state.responses = []
        return self._post(chat, state)

    def approve(self, *decisions: bool, chat: str = "chat-1") -> ChatResponse:
        """Approve (``True``) or deny (``False``) the calls of the last answer that await
        approval, in order, and read the continued answer."""
        state = self._chats[chat]
        if not state.messages or state.messages[-1]["role"] != "assistant":
            raise ValueError("the chat's last message is not an answer awaiting approval")
        answer_approvals(state.messages[-1], *decisions)
        return self._post(chat, state)

    def messages(self, chat: str = "chat-1") -> list[dict[str, Any]]:
        """The chat as the client holds it."""
        return list(self._chats[chat].messages) if chat in self._chats else []

    def _post(self, chat: str, state: _Chat) -> ChatResponse:
        body = {"id": chat, "messages": state.messages, "trigger": "submit-message"}
        response = self.http.post("/stream", json=body)
        _, chunks = read_response(response.status_code, response.text)
        if response.status_code != 200:
            return ChatResponse(response.status_code, response.text, [], None)
        state.responses.append(chunks)
        message = assistant_message(*state.responses)
        if state.messages[-1]["role"] == "assistant":
            state.messages[-1] = message  # a continuation extends the same message
        else:
            state.messages.append(message)
        return ChatResponse(response.status_code, response.text, chunks, message)


def settings_for_tests(**fields: Any) -> Settings:
    """Settings for a test app: chats in memory, no page, errors shown in full (development
    settings, so that a failing script says why in its `error` chunk); ``fields`` override."""
    values: dict[str, Any] = {"session_store": "memory://", "playground_dir": None}
    values["error_detail"] = True
    values.update(fields)
    return Settings(**values)


@contextmanager
def serve_agent(
    agent: AgentLike,
    settings: Settings | None = None,
    *,
    identity: Callable[..., Any] | None = None,
) -> Iterator[AgentClient]:
    """``create_app(agent, settings=..., identity=...)``, started in this process (Starlette's
    ``TestClient``, lifespan entered), with a client for it. ``settings`` default to
    ``settings_for_tests()``; the environment's ``ADK_STREAM_*`` variables apply as for any
    ``Settings``."""
    app = create_app(agent, settings=settings or settings_for_tests(), identity=identity)
    # `localhost`: a host the default trusted hosts accept (TestClient's own is refused).
    with TestClient(app, base_url="http://localhost") as http:
        yield AgentClient(http)
