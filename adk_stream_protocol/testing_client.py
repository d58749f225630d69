"""The client of users' tests (``adk_stream_protocol.testing`` offers it): it talks to the app
as ``useChat`` does, on ``POST /stream`` or on a ``/live?chatId=`` socket, and reads each
answer back as checked chunks and as the messages the page would hold: the chunks folded onto
the chat as ``useChat`` folds them (``MessageFold``, the server's port of the client)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urljoin

from starlette.testclient import TestClient, WebSocketTestSession
from typing_extensions import override

from adk_stream_protocol.protocol.chunks import UI_MESSAGE_CHUNK, AiSdkVersion
from adk_stream_protocol.protocol.message_fold import MessageFold

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


def assistant_message(
    *responses: Sequence[Mapping[str, Any]], ai_sdk: AiSdkVersion = 6
) -> dict[str, Any]:
    """The assistant message a client holds after these responses' chunks, each response
    continuing the message the one before left (as the stock helpers continue it after an
    approval or a browser output), folded as ``useChat`` folds them (``MessageFold``)."""
    message: dict[str, Any] | None = None
    for chunks in responses:
        fold = MessageFold([message] if message else [], ai_sdk=ai_sdk, new_message_id="assistant")
        fold.apply_all(chunks)
        message = fold.message
    return message or {"id": "assistant", "role": "assistant", "parts": []}


def _awaits_approval(part: Mapping[str, Any]) -> bool:
    return part.get("state") == "approval-requested"


def answer_approvals(message: dict[str, Any], *decisions: bool) -> dict[str, Any]:
    """What ``addToolApprovalResponse`` does: the parts awaiting approval, in order, get
    the decisions (one for each)."""
    requested = [p for p in message["parts"] if _awaits_approval(p)]
    if len(requested) != len(decisions):
        raise ValueError(f"{len(requested)} calls await approval, {len(decisions)} decisions")
    for part, approved in zip(requested, decisions, strict=True):
        part["state"] = "approval-responded"
        part["approval"] = {**part["approval"], "approved": approved}
    return message


@dataclass
class ChatResponse:
    """One response of ``POST /stream`` (or of ``/live``, read to its ``[DONE]``: status 200,
    the frames as its body): its status, its chunks (each checked against the AI SDK's chunk
    schema), and the assistant message the client holds after it."""

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


# -- the client ------------------------------------------------------------------------------


class LocalTestClient(TestClient):
    """Starlette's ``TestClient`` whose sockets go to its base URL's host, as its requests do.
    Starlette joins a socket's path to ``ws://testserver``, a host the app's trusted hosts
    refuse; so ``websocket_connect("/live?chatId=...")`` works as ``post("/stream")`` does."""

    @override
    def websocket_connect(
        self, url: str, subprotocols: Sequence[str] | None = None, **kwargs: Any
    ) -> WebSocketTestSession:
        base = str(self.base_url).replace("http", "ws", 1)  # https → wss
        return super().websocket_connect(urljoin(base, url), subprotocols, **kwargs)


@dataclass
class _Chat:
    messages: list[dict[str, Any]] = field(default_factory=list)


class AgentClient:
    """Talks to the app as ``useChat`` does: each request carries the chat id and the whole
    chat, and approvals continue the assistant message. By default over ``POST /stream``
    (``DefaultChatTransport``); with ``live=True`` over the chat's ``/live?chatId=`` socket
    (the package's ``WebSocketChatTransport``), which stays open for the chat's next turns
    until the chat goes back to ``/stream`` or the client closes."""

    def __init__(self, http: TestClient) -> None:
        self.http = http
        self._chats: dict[str, _Chat] = {}
        self._sockets: dict[str, _LiveSocket] = {}

    def send(self, text: str, *, chat: str = "chat-1", live: bool = False) -> ChatResponse:
        """Send a user message and read the whole answer."""
        state = self._chats.setdefault(chat, _Chat())
        message_id = f"user-{sum(m['role'] == 'user' for m in state.messages) + 1}"
        parts = [{"type": "text", "text": text}]
        state.messages.append({"id": message_id, "role": "user", "parts": parts})
        return self._request(chat, state, live)

    def approve(
        self,
        *decisions: bool,
        chat: str = "chat-1",
        live: bool = False,
        payload: dict[str, Any] | None = None,
    ) -> ChatResponse:
        """Approve (``True``) or deny (``False``) the calls of the last answer that await
        approval, in order, and read the continued answer. On ``/live`` the calls wait on
        the socket that asked: approve with ``live=True`` as the message was sent.

        ``payload`` answers the one call awaiting approval with a payload the user edited
        (a ``data-approval-response`` part)."""
        state = self._chats[chat]
        if not state.messages or state.messages[-1]["role"] != "assistant":
            raise ValueError("the chat's last message is not an answer awaiting approval")
        message = state.messages[-1]
        asked = [p["approval"]["id"] for p in message["parts"] if _awaits_approval(p)]
        answer_approvals(message, *decisions)
        if payload is not None:
            if len(asked) != 1:
                raise ValueError(f"a payload answers one approval; {len(asked)} await one")
            part = {"type": "data-approval-response", "id": asked[0], "data": {"payload": payload}}
            message["parts"].append(part)
        return self._request(chat, state, live)

    def tool_output(
        self,
        output: Any = None,
        *,
        error: str | None = None,
        call_id: str | None = None,
        chat: str = "chat-1",
        live: bool = False,
    ) -> ChatResponse:
        """What ``addToolOutput`` does for a browser tool (an ADK long-running tool): the
        call waiting for the page (``call_id``, or the only one) gets ``output``, or with
        ``error`` the ``output-error`` state, and the continued answer is read."""
        state = self._chats[chat]
        message = state.messages[-1] if state.messages else None
        waiting = [
            p["toolCallId"]
            for p in (message["parts"] if message and message["role"] == "assistant" else [])
            if p.get("state") == "input-available" and call_id in (None, p.get("toolCallId"))
        ]
        if len(waiting) != 1:
            raise ValueError(f"{len(waiting)} calls wait for the page's output: name call_id")
        assert message is not None
        (part,) = [p for p in message["parts"] if p.get("toolCallId") == waiting[0]]
        if error is not None:
            part.update(state="output-error", errorText=error)
        else:
            part.update(state="output-available", output=output)
        return self._request(chat, state, live)

    def messages(self, chat: str = "chat-1") -> list[dict[str, Any]]:
        """The chat as the client holds it."""
        return list(self._chats[chat].messages) if chat in self._chats else []

    def close(self) -> None:
        """Close the chats' ``/live`` sockets (``serve_agent`` does it at its end)."""
        while self._sockets:
            self._sockets.popitem()[1].close()

    def _request(self, chat: str, state: _Chat, live: bool) -> ChatResponse:
        body = {"id": chat, "messages": state.messages, "trigger": "submit-message"}
        if live:
            status, text, chunks = self._socket(chat).exchange(body)
        else:
            # The chat's socket holds the chat: a request on /stream would wait for it.
            if (socket := self._sockets.pop(chat, None)) is not None:
                socket.close()
            response = self.http.post("/stream", json=body)
            status, text = response.status_code, response.text
            _, chunks = read_response(status, text)
        if status != 200:
            return ChatResponse(status, text, [], None)
        # A continuation goes on with the chat's last (assistant) message, a new message
        # gets one of its own: as the page's chat folds the response.
        fold = MessageFold(state.messages)
        state.messages = fold.apply_all(chunks)
        last = state.messages[-1]
        return ChatResponse(status, text, chunks, last if last["role"] == "assistant" else None)

    def _socket(self, chat: str) -> _LiveSocket:
        if chat not in self._sockets:
            self._sockets[chat] = _LiveSocket(
                self.http.websocket_connect(f"/live?chatId={quote(chat, safe='')}")
            )
        return self._sockets[chat]


class _LiveSocket:
    """One chat's ``/live?chatId=`` socket: a request is a ``message`` frame, its response
    the SSE-framed text frames up to ``data: [DONE]``."""

    def __init__(self, connecting: AbstractContextManager[WebSocketTestSession]) -> None:
        self._connecting = connecting
        self._session = connecting.__enter__()

    def exchange(self, body: Mapping[str, Any]) -> tuple[int, str, list[dict[str, Any]]]:
        """Send a request; the response as ``(200, its frames, its chunks)``, as ``POST
        /stream``'s status, body and chunks."""
        self._session.send_json({"type": "message", "version": "1", **body})
        frames: list[str] = []
        while True:
            frame = self._session.receive_text()
            if not frame.startswith("data:"):
                # A control frame: a refusal (nothing follows it), or one to pass over.
                reply = json.loads(frame)
                assert reply.get("type") != "error", f"/live refused the message: {frame}"
                continue
            frames.append(frame)
            if sse_payloads(frame) == ["[DONE]"]:
                break
        body_text = "".join(frames)
        _, chunks = read_response(200, body_text)
        return 200, body_text, chunks

    def close(self) -> None:
        self._connecting.__exit__(None, None, None)
