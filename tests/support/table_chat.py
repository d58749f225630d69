"""One chat driven as ``useChat`` drives it, on any of the three transports of the behaviour
table (docs/agent/features.md):

- ``stream``: ``POST /stream`` (``DefaultChatTransport``);
- ``ai7``: ai 7's ``WebSocketChatTransport`` protocol on ``/live`` (``send`` frames);
- ``live``: our ``/live?chatId=`` socket (``message`` frames, ``run_live``).

Each request carries the whole chat; approvals and browser outputs continue the assistant
message, as the stock helpers do, and each response is folded onto the message the page holds
(``MessageFold``), as the client folds it. Every response is checked against what the AI SDK client
requires (``assert_valid_stream``: ai 7's chunk set on ``ai7``, the portable one elsewhere),
and the chat keeps every call's id.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from starlette.testclient import TestClient

from adk_stream_protocol.foundation.identity import LOCAL_USER
from adk_stream_protocol.protocol.chunks import AiSdkVersion
from adk_stream_protocol.protocol.message_fold import MessageFold
from adk_stream_protocol.testing import (
    ChatResponse,
    answer_approvals,
    assistant_message,
    sse_payloads,
)
from tests.support.rig import HTTP_TIMEOUT, InProcessSocket, StreamResult, assert_valid_stream

TRANSPORTS = ("stream", "ai7", "live")


class TableChat:
    """One chat on one transport (its socket opened on first use, closed by ``close``)."""

    def __init__(
        self,
        http: TestClient,
        transport: str,
        chat_id: str | None = None,
        timeout: float = HTTP_TIMEOUT,
    ) -> None:
        assert transport in TRANSPORTS, transport
        self.timeout = timeout  # seconds a socket read waits for the next frame
        self.http = http
        self.transport = transport
        self.chat_id = chat_id or f"{transport}-{uuid.uuid4().hex[:10]}"
        self.messages: list[dict[str, Any]] = []
        self._socket: InProcessSocket | None = None
        # The browser's outputs, by call: the page keeps them on their parts (no chunk does).
        self._outputs: dict[str, Any] = {}
        # The id of each call the chat's answers made, in order (a test checks they differ).
        self.call_ids: list[str] = []
        # What the app adds to the next request's body (the transport's `body` option): on
        # ai 7's socket the `send` frame's `body`, elsewhere beside the messages.
        self.body: dict[str, Any] = {}

    # -- what the page does ------------------------------------------------------------------

    def send(self, text: str) -> ChatResponse:
        """``sendMessage({ text })``."""
        number = sum(m["role"] == "user" for m in self.messages) + 1
        parts = [{"type": "text", "text": text}]
        self.messages.append({"id": f"user-{number}", "role": "user", "parts": parts})
        return self._request()

    def approve(self, *decisions: bool) -> ChatResponse:
        """``addToolApprovalResponse`` for each waiting call, then the automatic send."""
        answer_approvals(self.messages[-1], *decisions)
        return self._request()

    def tool_output(self, call_id: str, output: Any) -> ChatResponse:
        """``addToolOutput`` for a browser call, then the automatic send."""
        assert any(p.get("toolCallId") == call_id for p in self.messages[-1]["parts"]), call_id
        self._outputs[call_id] = output
        self._apply_outputs(self.messages[-1])
        return self._request()

    def refused_tool_output(self, call_id: str, output: Any) -> str:
        """``addToolOutput`` whose automatic send the server refuses: the refusal's text (the
        HTTP error's detail, or the socket's error frame). The page's part keeps the output,
        as the stock client's does; ``withdraw_output`` takes it back."""
        self._outputs[call_id] = output
        self._apply_outputs(self.messages[-1])
        return self._refusal(
            {
                "id": self.chat_id,
                "messages": self.messages,
                "trigger": "submit-message",
                "messageId": self.messages[-1]["id"],
            }
        )

    def refused_send(self, text: str) -> str:
        """``sendMessage({ text })`` that the server refuses: the refusal's text. The message
        stays in the page's chat, as the stock client keeps it."""
        number = sum(m["role"] == "user" for m in self.messages) + 1
        parts = [{"type": "text", "text": text}]
        self.messages.append({"id": f"user-{number}", "role": "user", "parts": parts})
        return self._refusal(
            {"id": self.chat_id, "messages": self.messages, "trigger": "submit-message"}
        )

    def _refusal(self, body: dict[str, Any]) -> str:
        if self.transport == "stream":
            response = self.http.post("/stream", json=body)
            assert 400 <= response.status_code < 500, response.text
            return str(response.json()["detail"])
        if self.transport == "live":
            # A message our socket refuses is answered by an error and [DONE], no response.
            self._frame({"type": "message", "version": "1", **body})
            socket = self._connect()
            error, done = socket.recv(self.timeout), socket.recv(self.timeout)
            assert sse_payloads(done) == ["[DONE]"], done
            (payload,) = sse_payloads(error)
            chunk = json.loads(payload)
            assert chunk["type"] == "error", chunk
            return str(chunk["errorText"])
        request_id = uuid.uuid4().hex[:16]
        self._frame({"type": "send", "requestId": request_id, "headers": {}, "body": {}} | body)
        frame = json.loads(self._connect().recv(self.timeout))
        assert frame["type"] == "error" and frame["requestId"] == request_id, frame
        return str(frame["errorText"])

    def withdraw_output(self, call_id: str) -> None:
        """The page puts a call's part back to waiting (its answer was refused)."""
        self._outputs.pop(call_id, None)
        for part in self.messages[-1]["parts"]:
            if part.get("toolCallId") == call_id:
                part["state"] = "input-available"
                part.pop("output", None)

    def regenerate(self) -> ChatResponse:
        """``regenerate()``: the last answer dropped, the last user message answered again."""
        if self.messages[-1]["role"] == "assistant":
            self.messages.pop()
        return self._request(trigger="regenerate-message")

    def edit(self, index: int, text: str) -> ChatResponse:
        """``sendMessage({ text, messageId })`` of the user message at ``index``: the chat is
        cut there and the message replaced, keeping its id."""
        edited = self.messages[index]
        assert edited["role"] == "user", edited
        self.messages[index:] = [{**edited, "parts": [{"type": "text", "text": text}]}]
        return self._request(message_id=edited["id"])

    def reload(self) -> None:
        """A page reload: the socket goes, and the chat is what ``GET /chats/{chatId}`` gives
        back (the page builds ``useChat({ id, messages })`` from it). The read waits until the
        server has let the old socket go, as a page takes a moment to load."""
        if self._socket is not None:
            self.close()
            if self.transport == "live":  # the socket's shutdown ends with the chat's lease
                leases = self.http.app.state.bridge.coordination.leases  # type: ignore[attr-defined]
                assert self.http.portal is not None

                async def let_go() -> None:
                    await (await leases.acquire((LOCAL_USER, self.chat_id), self.timeout)).release()

                self.http.portal.call(let_go)
        response = self.http.get(f"/chats/{quote(self.chat_id, safe='')}")
        assert response.status_code == 200, response.text
        self.messages = response.json()["messages"]

    def resume(self, started: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
        """``useChat({ resume: true })``: the chat's active response, or ``[]`` for none;
        ``started`` is called once its first chunk has arrived."""
        if self.transport == "ai7":
            request_id = uuid.uuid4().hex[:16]
            frame = {"type": "resume", "requestId": request_id, "id": self.chat_id}
            self._frame(frame | {"headers": {}, "body": {}})
            return self._read_ai7(request_id, started)
        assert self.transport == "stream", "our /live socket resumes by reconnecting"
        path = f"/stream/{quote(self.chat_id, safe='')}/stream"
        with self.http.stream("GET", path) as response:
            if response.status_code == 204:
                return []
            assert response.status_code == 200, response.read()
            lines = response.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            started()
            return self._checked("\n".join([first, *lines]) + "\n")

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    # -- the wire ----------------------------------------------------------------------------

    def _request(
        self, *, trigger: str = "submit-message", message_id: str | None = None
    ) -> ChatResponse:
        body: dict[str, Any] = {"id": self.chat_id, "messages": self.messages, "trigger": trigger}
        if self.messages[-1]["role"] == "assistant":
            body["messageId"] = self.messages[-1]["id"]  # as the stock client continues one
        elif message_id is not None:
            body["messageId"] = message_id  # an edit
        extra, self.body = self.body, {}
        if self.transport == "stream":
            response = self.http.post("/stream", json=extra | body)
            assert response.status_code == 200, response.text
            chunks = self._checked(response.text)
        elif self.transport == "live":
            self._frame({"type": "message", "version": "1", **extra, **body})
            chunks = self._read_live()
        else:
            request_id = uuid.uuid4().hex[:16]
            frame = {"type": "send", "requestId": request_id, "headers": {}, "body": extra}
            self._frame(frame | body)
            chunks = self._read_ai7(request_id)
        self._note_calls(chunks)
        ai_sdk: AiSdkVersion = 7 if self.transport == "ai7" else 6
        if self.messages[-1]["role"] == "assistant":
            # A continuation (or a message read back): folded onto the message as the page
            # holds it, with the approvals and outputs it added, as the client folds it.
            fold = MessageFold(self.messages, ai_sdk=ai_sdk, message_id=self.messages[-1]["id"])
            self.messages = copy.deepcopy(fold.apply_all(chunks))
            message = self._apply_outputs(self.messages[-1])
            return ChatResponse(200, json.dumps(chunks), chunks, message)
        message = self._apply_outputs(assistant_message(chunks, ai_sdk=ai_sdk))
        self.messages.append(message)
        return ChatResponse(200, json.dumps(chunks), chunks, message)

    def _apply_outputs(self, message: dict[str, Any]) -> dict[str, Any]:
        for part in message["parts"]:
            if part.get("toolCallId") in self._outputs and part["state"] == "input-available":
                part.update(state="output-available", output=self._outputs[part["toolCallId"]])
        return message

    def connect(self) -> None:
        """Open the socket now, before the first message (the socket transports)."""
        if self.transport != "stream":
            self._connect()

    def _connect(self) -> InProcessSocket:
        if self._socket is None:
            path = "/live"
            if self.transport == "live":
                path += f"?chatId={quote(self.chat_id, safe='')}"
            self._socket = InProcessSocket(self.http, f"ws://localhost{path}", {})
        return self._socket

    def _frame(self, frame: dict[str, Any]) -> None:
        self._connect().send(json.dumps(frame))

    def _read_live(self) -> list[dict[str, Any]]:
        socket = self._connect()
        frames: list[str] = []
        while True:
            frame = socket.recv(self.timeout)
            if not frame.startswith("data:"):
                assert json.loads(frame).get("type") != "error", f"/live refused: {frame}"
                continue
            frames.append(frame)
            if sse_payloads(frame) == ["[DONE]"]:
                return self._checked("".join(frames))

    def _read_ai7(
        self, request_id: str, started: Callable[[], None] = lambda: None
    ) -> list[dict[str, Any]]:
        socket = self._connect()
        chunks: list[dict[str, Any]] = []
        while True:
            frame = json.loads(socket.recv(self.timeout))
            assert frame["requestId"] == request_id, frame  # one request at a time here
            if frame["type"] == "chunk":
                chunks.append(frame["chunk"])
                if len(chunks) == 1:
                    started()
            elif frame["type"] == "no-active":
                return []
            elif frame["type"] == "start":
                continue  # a resume found the chat's active response
            else:
                assert frame["type"] == "end", frame
                body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                return self._checked(body)

    def _checked(self, body: str) -> list[dict[str, Any]]:
        payloads = sse_payloads(body)
        chunks = [json.loads(p) for p in payloads if p != "[DONE]"]
        result = StreamResult(200, {}, body, payloads, chunks)
        assert_valid_stream(result, ai_sdk=7 if self.transport == "ai7" else 6)
        return chunks

    def _note_calls(self, chunks: list[dict[str, Any]]) -> None:
        held = self.messages[-1] if self.messages[-1]["role"] == "assistant" else {"parts": []}
        continued = {p.get("toolCallId") for p in held["parts"]}
        for chunk in chunks:
            if chunk["type"] == "tool-input-start" and chunk["toolCallId"] not in continued:
                self.call_ids.append(chunk["toolCallId"])
