"""Test rig: the real server under uvicorn, SSE parsing, and protocol invariants."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from google.adk.events import Event

from adk_stream_protocol.chunks import UI_MESSAGE_CHUNK
from adk_stream_protocol.history import is_user_turn, live_events

ROOT = Path(__file__).resolve().parent.parent

# Variables that would switch the demo agent to Gemini: the tests always use the offline model.
_GOOGLE_VARIABLES = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")


@dataclass
class LiveServer:
    base_url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


@contextmanager
def run_server(
    workdir: Path, env: Mapping[str, str] | None = None, app: str = "server:app"
) -> Iterator[LiveServer]:
    """Start ``uvicorn <app>`` in a subprocess on a free loopback port.

    The listening socket is made here and handed to uvicorn (``--fd``), so no other process
    can take the port between choosing and binding it.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    full_env = {k: v for k, v in os.environ.items() if k not in _GOOGLE_VARIABLES}
    full_env.update(
        {
            "ADK_STREAM_MODEL": "offline-demo",
            "ADK_STREAM_SESSION_STORE": f"sqlite:///{workdir / 'sessions.db'}",
            "PYTHONPATH": str(ROOT),
        }
    )
    full_env.update(env or {})
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                app,
                "--fd",
                str(sock.fileno()),
                "--log-level",
                "info",
            ],
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(sock.fileno(),),
        )
    sock.close()
    server = LiveServer(f"http://127.0.0.1:{port}", log_path)
    try:
        _wait_until_healthy(server, process)
        yield server
    finally:
        stop_process(process)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Terminate a server process, killing it if it does not exit within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_until_healthy(server: LiveServer, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{server.log()}")
        try:
            if httpx.get(f"{server.base_url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server did not become healthy:\n{server.log()}")


# -- SSE ------------------------------------------------------------------------------------


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


@dataclass
class StreamResult:
    status: int
    headers: httpx.Headers
    body: str
    payloads: list[str]
    chunks: list[dict[str, Any]]

    def types(self) -> list[str]:
        return [c["type"] for c in self.chunks]

    def of_type(self, chunk_type: str) -> list[dict[str, Any]]:
        return [c for c in self.chunks if c["type"] == chunk_type]

    def text(self) -> str:
        return "".join(c["delta"] for c in self.chunks if c["type"] == "text-delta")

    def reasoning(self) -> str:
        return "".join(c["delta"] for c in self.chunks if c["type"] == "reasoning-delta")


def post_stream(base_url: str, body: Any, **kwargs: Any) -> StreamResult:
    """POST to /stream and read the whole response; every chunk is checked (see below)."""
    response = httpx.post(f"{base_url}/stream", json=body, timeout=60, **kwargs)
    payloads = sse_payloads(response.text) if response.status_code == 200 else []
    chunks = [json.loads(p) for p in payloads if p != "[DONE]"]
    result = StreamResult(response.status_code, response.headers, response.text, payloads, chunks)
    if response.status_code == 200:
        assert_valid_stream(result)
    return result


# -- protocol invariants ----------------------------------------------------------------------


def assert_strict_chunk(chunk: dict[str, Any]) -> None:
    """The chunk is in the portable 6.0.25 field set: known type, no extra key, no null
    where a field should be absent (re-serialising must give the same dict)."""
    model = UI_MESSAGE_CHUNK.validate_python(chunk)
    assert model.to_wire_dict() == chunk, f"non-portable chunk {chunk}"


def assert_valid_stream(result: StreamResult) -> None:
    """What the AI SDK client requires of one response (see the protocol notes)."""
    assert result.body.endswith("\n\n"), "the last event must end with a blank line"
    assert result.payloads[-1] == "[DONE]", "the response ends with [DONE]"
    assert result.payloads.count("[DONE]") == 1
    types = result.types()
    assert types[0] == "start", types
    assert types[-1] == "finish", types
    assert types.count("finish") == 1, types
    open_text: set[str] = set()
    open_reasoning: set[str] = set()
    tool_calls: set[str] = set()
    step_open = False
    for chunk in result.chunks:
        assert_strict_chunk(chunk)
        kind = chunk["type"]
        if kind == "start-step":
            assert not step_open, "start-step inside an open step"
            step_open = True
        elif kind == "finish-step":
            assert step_open, "finish-step without start-step"
            assert not open_text and not open_reasoning, "blocks left open at finish-step"
            step_open = False
        elif kind in ("text-start", "reasoning-start"):
            target = open_text if kind == "text-start" else open_reasoning
            assert chunk["id"] not in target, f"{kind} twice for {chunk['id']}"
            target.add(chunk["id"])
        elif kind in ("text-delta", "reasoning-delta"):
            assert chunk["id"] in (open_text if kind == "text-delta" else open_reasoning), chunk
        elif kind in ("text-end", "reasoning-end"):
            (open_text if kind == "text-end" else open_reasoning).remove(chunk["id"])
        elif kind in ("tool-input-start", "tool-input-available"):
            assert chunk["toolName"] != "adk_request_confirmation", chunk
            tool_calls.add(chunk["toolCallId"])
        elif kind == "tool-approval-request":
            # In a new turn the tool part must be in this response; a continuation may
            # answer parts of the continued message (checked by the tests that do it).
            assert chunk["toolCallId"] in tool_calls, f"approval for unknown call {chunk}"
    assert not step_open, "a step was left open"
    assert not open_text and not open_reasoning


# -- the session store, read directly -----------------------------------------------------------


def stored_events(server: LiveServer, chat_id: str, user_id: str = "local-user") -> list[Event]:
    """The ADK events the server stored for a chat, read from its SQLite file."""
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    service = SqliteSessionService(str(server.log_path.parent / "sessions.db"))

    async def read() -> list[Event]:
        session = await service.get_session(
            app_name="adk_stream_protocol", user_id=user_id, session_id=chat_id
        )
        assert session is not None, f"no session for chat {chat_id}"
        return list(session.events)

    return asyncio.run(read())


def user_turn_texts(events: list[Event]) -> list[str]:
    """The text of each user turn that is still live (after rewinds), in order."""
    return [
        "".join(p.text or "" for p in e.content.parts or [])
        for e in live_events(events)
        if is_user_turn(e) and e.content
    ]


def user_message(
    text: str, message_id: str, files: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = list(files or [])
    parts.append({"type": "text", "text": text})
    return {"id": message_id, "role": "user", "parts": parts}


def chat_body(chat_id: str, *messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": chat_id, "messages": list(messages), "trigger": "submit-message", **extra}


def stored_state(server: LiveServer, chat_id: str, user_id: str = "local-user") -> dict[str, Any]:
    """The session state the server stored for a chat."""
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    service = SqliteSessionService(str(server.log_path.parent / "sessions.db"))

    async def read() -> dict[str, Any]:
        session = await service.get_session(
            app_name="adk_stream_protocol", user_id=user_id, session_id=chat_id
        )
        assert session is not None, f"no session for chat {chat_id}"
        return dict(session.state)

    return asyncio.run(read())


# -- building the assistant message as the client would --------------------------------------


def assistant_message(*responses: StreamResult) -> dict[str, Any]:
    """The assistant message a client holds after these responses (a continuation appends to
    it), reduced to what the server reads: step starts, text and tool parts with states."""
    parts: list[dict[str, Any]] = []
    tools: dict[str, dict[str, Any]] = {}
    message_id = responses[0].chunks[0].get("messageId", "assistant")
    for response in responses:
        for chunk in response.chunks:
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
    return {"id": message_id, "role": "assistant", "parts": parts}


def answer_approvals(message: dict[str, Any], *decisions: bool) -> dict[str, Any]:
    """What addToolApprovalResponse does: the requested parts, in order, get decisions."""
    requested = [p for p in message["parts"] if p.get("state") == "approval-requested"]
    assert len(requested) == len(decisions), (len(requested), decisions)
    for part, approved in zip(requested, decisions, strict=True):
        part["state"] = "approval-responded"
        part["approval"] = {**part["approval"], "approved": approved}
    return message


def tool_call_ids(message: dict[str, Any], tool_name: str) -> list[str]:
    return [p["toolCallId"] for p in message["parts"] if p["type"] == f"tool-{tool_name}"]


# -- /live ------------------------------------------------------------------------------------


class LiveSocket:
    """A plain WebSocket client for /live: send frames, read one response until [DONE]."""

    def __init__(self, server: LiveServer, chat_id: str, **connect_options: Any) -> None:
        from websockets.sync.client import connect

        url = server.base_url.replace("http://", "ws://") + f"/live?chatId={chat_id}"
        self.chat_id = chat_id
        self.ws = connect(url, open_timeout=10, **connect_options)
        self.controls: list[dict[str, Any]] = []

    def send(self, frame: dict[str, Any]) -> None:
        self.ws.send(json.dumps(frame))

    def message(self, *messages: dict[str, Any], **extra: Any) -> StreamResult:
        """Send a `message` frame (a DefaultChatTransport body) and read its response."""
        self.send(
            {"type": "message", "version": "1", **chat_body(self.chat_id, *messages, **extra)}
        )
        return self.response()

    def response(self, timeout: float = 30) -> StreamResult:
        frames: list[str] = []
        while True:
            frame = self.ws.recv(timeout=timeout)
            assert isinstance(frame, str), "the server sends text frames"
            if not frame.startswith("data: "):
                self.controls.append(json.loads(frame))
                continue
            assert frame.endswith("\n\n"), "one whole SSE event per frame"
            frames.append(frame)
            if frame == "data: [DONE]\n\n":
                break
        body = "".join(frames)
        payloads = sse_payloads(body)
        chunks = [json.loads(p) for p in payloads if p != "[DONE]"]
        return StreamResult(200, httpx.Headers(), body, payloads, chunks)

    def control(self, timeout: float = 10) -> dict[str, Any]:
        while not self.controls:
            frame = self.ws.recv(timeout=timeout)
            assert isinstance(frame, str) and not frame.startswith("data: "), frame
            self.controls.append(json.loads(frame))
        return self.controls.pop(0)

    def close(self) -> None:
        self.ws.close()
