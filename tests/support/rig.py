"""Test rig: the app in this process or the real server under uvicorn, SSE parsing, and
protocol invariants.

A test talks to a *target*, one of:

- ``InProcessApp``: the app (``create_app``: real ADK Runner, offline demo model, SQLite
  store) in this process, through Starlette's ``TestClient`` with its lifespan entered. No
  server to start: most endpoint behaviour is tested this way, with whatever ``Settings`` a
  test needs.
- ``LiveServer``: the app under real uvicorn on a loopback port, for what crosses the wire
  (the real AI SDK clients, the browser, raw sockets): ``run_server`` starts ``server:app`` in
  a subprocess, as deployed (forked from the fork server: tests/support/forked_servers.py);
  ``serve_in_thread`` serves an app built with other settings from a thread of this process.

Both have ``http`` (an httpx client whose base URL is the target), ``db_path`` (the SQLite file
of the session store, read by ``stored_events``) and ``connect`` (a WebSocket, see
``LiveSocket``), so the helpers below take either.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from google.adk.events import Event
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.types import ASGIApp
from starlette.websockets import WebSocketDisconnect

from adk_stream_protocol import Settings, create_app, testing
from adk_stream_protocol.protocol.chunks import UI_MESSAGE_CHUNK, BaseChunk
from adk_stream_protocol.protocol.sse import encode_event, format_event
from adk_stream_protocol.store.history import is_user_turn, live_events

# The package's own (users' tests use them too), offered to the tests from here.
from adk_stream_protocol.testing import answer_approvals as answer_approvals
from adk_stream_protocol.testing import sse_payloads as sse_payloads
from tests.support.forked_servers import fork_uvicorn
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
# The built playground, which every test app serves at `/` (the default, whatever the
# environment says).
PLAYGROUND_DIST = ROOT / "playground" / "dist"

# Variables that would switch the demo agent to Gemini: the tests always use the offline model.
# A 1x1 PNG, for file parts.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
_GOOGLE_VARIABLES = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")
# Seconds: the longest any test waits for an HTTP answer or a socket to open.
HTTP_TIMEOUT = 60.0
OPEN_TIMEOUT = 10.0


class Response(Protocol):
    """An HTTP response: httpx's from a ``LiveServer``, or the TestClient's (``httpx2``'s where
    that is installed) from an ``InProcessApp``."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def text(self) -> str: ...

    def json(self, **kwargs: Any) -> Any: ...


# -- WebSockets, on the wire or in-process -----------------------------------------------------


class SocketClosed(Exception):
    """The server closed the socket (``code`` is the close code it sent)."""

    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(f"socket closed with {code}: {reason}")
        self.code = code
        self.reason = reason


class HandshakeRefused(Exception):
    """The server answered the WebSocket handshake with an HTTP status instead of a socket."""

    def __init__(self, status: int, body: bytes = b"") -> None:
        super().__init__(f"handshake refused with {status}: {body!r}")
        self.status = status
        self.body = body


class WebSocketLike(Protocol):
    def send(self, text: str) -> None: ...

    def recv(self, timeout: float) -> str:
        """The next text frame; ``TimeoutError`` if none comes in time, ``SocketClosed``
        once the server has closed the socket."""
        ...

    def close(self) -> None: ...


class WireSocket:
    """A real WebSocket (the ``websockets`` client) to a ``LiveServer``."""

    def __init__(self, url: str, headers: Mapping[str, str], **options: Any) -> None:
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        headers = dict(headers)
        origin = headers.pop("origin", None)
        try:
            self._ws = connect(
                url,
                origin=origin,  # type: ignore[arg-type]
                additional_headers=headers or None,
                open_timeout=OPEN_TIMEOUT,
                **options,
            )
        except InvalidStatus as refused:
            response = refused.response
            raise HandshakeRefused(response.status_code, response.body or b"") from None

    def send(self, text: str) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            self._ws.send(text)
        except ConnectionClosed as closed:
            raise _socket_closed(closed) from None

    def recv(self, timeout: float) -> str:
        from websockets.exceptions import ConnectionClosed

        try:
            frame = self._ws.recv(timeout=timeout)
        except ConnectionClosed as closed:
            raise _socket_closed(closed) from None
        assert isinstance(frame, str), "the server sends text frames"
        return frame

    def close(self) -> None:
        self._ws.close()


def _socket_closed(closed: Any) -> SocketClosed:
    """``SocketClosed`` for a ``websockets`` ``ConnectionClosed``."""
    if closed.rcvd is None:
        return SocketClosed(1006, "closed without a close frame")
    return SocketClosed(closed.rcvd.code, closed.rcvd.reason)


class InProcessSocket:
    """A WebSocket to an ``InProcessApp`` (``TestClient.websocket_connect``), with a deadline
    on every read: a server that never answers fails the test instead of hanging it."""

    def __init__(self, client: TestClient, url: str, headers: Mapping[str, str]) -> None:
        try:
            self._session = client.websocket_connect(url, headers=dict(headers)).__enter__()
        except WebSocketDenialResponse as refused:
            raise HandshakeRefused(refused.status_code, refused.content) from None
        except WebSocketDisconnect:
            # Closed before it was accepted: a server answers that handshake with 403.
            raise HandshakeRefused(403) from None
        # Reads wait in a thread of their own, so that they can be given up.
        self._reader = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ws-read")
        self._closed: SocketClosed | None = None
        self._finished = False

    def send(self, text: str) -> None:
        self._session.send_text(text)

    def recv(self, timeout: float) -> str:
        if self._closed is not None:
            raise self._closed
        pending = self._reader.submit(self._session.receive)
        try:
            message = pending.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"no frame within {timeout} s") from None
        if message["type"] == "websocket.close":
            self._closed = SocketClosed(message.get("code", 1000), message.get("reason") or "")
            raise self._closed
        text = message.get("text")
        assert isinstance(text, str), "the server sends text frames"
        return text

    def close(self) -> None:
        if self._finished:
            return
        self._finished = True
        try:
            self._session.__exit__(None, None, None)
        finally:
            self._reader.shutdown(wait=False, cancel_futures=True)


# -- targets ---------------------------------------------------------------------------------------


class ServerProcess(Protocol):
    """A server's process: a ``subprocess.Popen``, or one the fork server forked
    (tests/support/forked_servers.py), which offers the same."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


@dataclass
class LiveServer:
    """The app under real uvicorn on a loopback port."""

    base_url: str
    db_path: Path
    http: httpx.Client
    log_path: Path | None = None  # a subprocess's output; None for a server in a thread
    process: ServerProcess | None = None  # ``run_server``'s uvicorn

    def log(self) -> str:
        """What the server process wrote (``run_server`` only; in-process, use ``caplog``)."""
        assert self.log_path is not None, "a server in a thread has no log of its own: caplog"
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def connect(
        self, path: str, headers: Mapping[str, str] | None = None, **options: Any
    ) -> WireSocket:
        url = self.base_url.replace("http://", "ws://") + path
        return WireSocket(url, headers or {}, **options)


@dataclass
class InProcessApp:
    """The app in this process, through Starlette's TestClient with the lifespan entered."""

    app: FastAPI
    db_path: Path
    http: TestClient
    # The host the default trusted hosts accept; TestClient's own `testserver` is refused.
    base_url: str = "http://localhost"

    def connect(
        self, path: str, headers: Mapping[str, str] | None = None, **options: Any
    ) -> InProcessSocket:
        assert not options, f"in-process sockets take no options: {options}"
        return InProcessSocket(
            self.http, self.base_url.replace("http://", "ws://") + path, headers or {}
        )


Target = LiveServer | InProcessApp


def app_settings(workdir: Path, **fields: Any) -> Settings:
    """The settings every test app starts from: the offline model, a SQLite store in
    ``workdir``; ``fields`` override them (as keyword arguments or ``ADK_STREAM_*`` strings)."""
    values: dict[str, Any] = {
        "model": "offline-demo",
        "session_store": f"sqlite:///{workdir / 'sessions.db'}",
        "playground_dir": PLAYGROUND_DIST,
    }
    values.update(fields)
    return Settings(**values)


@contextmanager
def in_process_app(
    workdir: Path, *, identity: Callable[..., Any] | None = None, **settings: Any
) -> Iterator[InProcessApp]:
    """``create_app(identity=identity, settings=app_settings(workdir, **settings))``, started,
    for requests in this process."""
    app = create_app(identity=identity, settings=app_settings(workdir, **settings))
    with TestClient(app, base_url="http://localhost") as client:
        yield InProcessApp(app, workdir / "sessions.db", client)


def env_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """``ADK_STREAM_*`` variables as ``Settings`` fields (strings, read as the environment is)."""
    return {name.removeprefix("ADK_STREAM_").lower(): value for name, value in env.items()}


@contextmanager
def run_server(
    workdir: Path,
    env: Mapping[str, str] | None = None,
    app: str = "server:app",
    uvicorn_args: Sequence[str] = (),
) -> Iterator[LiveServer]:
    """Start ``uvicorn <app>`` in a subprocess on a free loopback port (``uvicorn_args`` such
    as ``--workers 2`` go on its command line).

    The listening socket is made here and handed to uvicorn (``--fd``), so no other process
    can take the port between choosing and binding it. The process is forked from the test
    process's fork server, which has imported the package already (a second of CPU less a
    server: tests/support/forked_servers.py); with ``--workers`` it is a new Python, as
    uvicorn's workers are anyway.
    """
    sock = listening_socket()
    port = sock.getsockname()[1]
    # Not the collector setting tests/conftest.py gives the apps of the test process: this
    # server runs as deployed.
    inherited = {k: v for k, v in os.environ.items() if k != "ADK_STREAM_GC_FREEZE"}
    base_env = {k: v for k, v in inherited.items() if k not in _GOOGLE_VARIABLES}
    base_env["PYTHONPATH"] = str(ROOT)
    full_env = {
        **base_env,
        "ADK_STREAM_MODEL": "offline-demo",
        "ADK_STREAM_SESSION_STORE": f"sqlite:///{workdir / 'sessions.db'}",
        "ADK_STREAM_PLAYGROUND_DIR": str(PLAYGROUND_DIST),
        **(env or {}),
    }
    args = [app, "--fd", str(sock.fileno()), "--log-level", "info", *uvicorn_args]
    log_path = workdir / "server.log"
    process: ServerProcess
    with log_path.open("wb") as log:
        if "--workers" in uvicorn_args:
            process = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", *args],
                cwd=ROOT,
                env=full_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(sock.fileno(),),
            )
        else:
            process = fork_uvicorn(
                args, env=full_env, cwd=ROOT, stdout=log, listening=sock, fork_env=base_env
            )
    sock.close()
    base_url = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base_url, timeout=HTTP_TIMEOUT) as http:
        server = LiveServer(base_url, workdir / "sessions.db", http, log_path, process)
        try:
            wait_until_healthy(server, lambda: process.poll() is not None)
            yield server
        finally:
            stop_process(process)


@contextmanager
def serve_in_thread(
    workdir: Path, *, identity: Callable[..., Any] | None = None, **settings: Any
) -> Iterator[LiveServer]:
    """Serve ``create_app(identity=identity, settings=app_settings(workdir, **settings))`` with
    real uvicorn from a thread of this process: the wire, without the seconds a new process
    takes to import ADK. Its logs go through this process's logging (``caplog``)."""
    app = create_app(identity=identity, settings=app_settings(workdir, **settings))
    with serve_app_in_thread(app, workdir / "sessions.db") as server:
        yield server


@contextmanager
def serve_app_in_thread(app: ASGIApp, db_path: Path) -> Iterator[LiveServer]:
    """Serve an ASGI app (``create_app``'s, the replay server's...) with real uvicorn from a
    thread of this process; ``db_path``: where its chats are, for tests that read them."""
    sock = listening_socket()
    port = sock.getsockname()[1]
    # log_config=None: uvicorn leaves this process's logging as it is.
    config = uvicorn.Config(app, log_config=None, log_level="warning", lifespan="on")
    uvicorn_server = uvicorn.Server(config)
    thread = threading.Thread(
        target=uvicorn_server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
    )
    thread.start()
    base_url = f"http://127.0.0.1:{port}"
    with ExitStack() as stack:
        stack.callback(sock.close)
        http = stack.enter_context(httpx.Client(base_url=base_url, timeout=HTTP_TIMEOUT))
        server = LiveServer(base_url, db_path, http)
        try:
            wait_until_healthy(server, lambda: not thread.is_alive())
            yield server
        finally:
            uvicorn_server.should_exit = True
            thread.join(30)
            assert not thread.is_alive(), "the server thread did not stop"


class ServerPool:
    """Servers on the wire started on demand, one per set of settings (``ADK_STREAM_*``
    variables), shared by the whole run. The default settings are ``server``."""

    def __init__(self, tmp: pytest.TempPathFactory, request: pytest.FixtureRequest) -> None:
        self._tmp = tmp
        self._request = request
        self._servers: dict[str, LiveServer] = {}
        self._stack = ExitStack()

    def get(self, env: Mapping[str, str]) -> LiveServer:
        if not env:
            server: LiveServer = self._request.getfixturevalue("server")
            return server
        key = json.dumps(dict(env), sort_keys=True)
        if key not in self._servers:
            workdir = self._tmp.mktemp("wire-server")
            self._servers[key] = self._stack.enter_context(
                serve_in_thread(workdir, **env_settings(env))
            )
        return self._servers[key]

    def close(self) -> None:
        self._stack.close()


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def stop_process(process: ServerProcess) -> None:
    """Terminate a server process, killing it if it does not exit within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_until_healthy(server: LiveServer, exited: Any) -> None:
    """Until ``/health`` answers (uvicorn says nothing a test could wait on); ``exited()``
    ends the wait at once."""

    def log() -> str:
        return server.log() if server.log_path else ""

    def healthy() -> bool:
        if exited():
            raise RuntimeError(f"server exited:\n{log()}")
        # The server's own client: a new one per poll (``httpx.get``) loads the CA bundle,
        # about 50 ms of CPU each time, on the cores the server is starting on.
        try:
            return server.http.get("/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(healthy, lambda: f"server healthy:\n{log()}", within=60, every=0.05)


# -- SSE ------------------------------------------------------------------------------------


@dataclass
class StreamResult:
    status: int
    headers: Mapping[str, str]
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


class StreamReading:
    """A streamed response read as it arrives: its first event, then the rest."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()

    def first_event(self) -> dict[str, Any]:
        for line in self._lines:
            if line.startswith("data: "):
                event: dict[str, Any] = json.loads(line.removeprefix("data: "))
                return event
        raise AssertionError("the stream ended before its first event")

    def rest(self) -> list[str]:
        """The payloads after the first event, to the end of the response."""
        return sse_payloads("\n".join(self._lines) + "\n")


@contextmanager
def streaming(
    server: LiveServer, body: Any, headers: Mapping[str, str] | None = None
) -> Iterator[StreamReading]:
    """``POST /stream`` on the wire, to read while the response is still being written."""
    with httpx.stream(
        "POST", f"{server.base_url}/stream", json=body, headers=headers, timeout=HTTP_TIMEOUT
    ) as response:
        yield StreamReading(response)


def chunks_of(payloads: list[str]) -> list[dict[str, Any]]:
    return [json.loads(p) for p in payloads if p != "[DONE]"]


def post_stream(target: Target, body: Any, *, ai_sdk: int = 6, **kwargs: Any) -> StreamResult:
    """POST to /stream and read the whole response; every chunk is checked (see below), as
    for an ai 6 client unless ``ai_sdk=7``."""
    return stream_result(target.http.post("/stream", json=body, **kwargs), ai_sdk=ai_sdk)


def stream_result(response: Response, ai_sdk: int = 6) -> StreamResult:
    """A /stream response, parsed; a 200 is checked against the protocol invariants."""
    payloads = sse_payloads(response.text) if response.status_code == 200 else []
    chunks = [json.loads(p) for p in payloads if p != "[DONE]"]
    result = StreamResult(response.status_code, response.headers, response.text, payloads, chunks)
    if response.status_code == 200:
        assert_valid_stream(result, ai_sdk)
    return result


# -- protocol invariants ----------------------------------------------------------------------


def assert_strict_chunk(chunk: dict[str, Any], ai_sdk: int = 6) -> None:
    """The chunk is in the portable 6.0.25 field set: known type, no extra key, no null
    where a field should be absent (re-serialising must give the same dict). With
    ``ai_sdk=7`` the few additions of ai 7 the server makes are allowed too."""
    model = UI_MESSAGE_CHUNK.validate_python(chunk)
    assert model.to_wire_dict() == chunk, f"non-portable chunk {chunk}"
    if ai_sdk < 7:
        assert not is_ai7_only(chunk), f"an ai 7 chunk for an ai 6 client: {chunk}"


def assert_emitted_chunk(chunk: BaseChunk) -> None:
    """A chunk as the converter emits it, however it was built (the hot chunks skip validation,
    docs/adr/0050): its wire form validates against the catalogue (no extra key), the validated
    twin equals it field by field, and every serialisation gives what pydantic's general path
    gives: ``to_wire_json``, ``to_wire_dict``, the SSE bytes and the /live envelope's text."""
    fast = chunk.to_wire_json()
    wire = json.loads(fast)
    twin = UI_MESSAGE_CHUNK.validate_python(wire)
    assert type(twin) is type(chunk) and twin == chunk, f"{chunk!r} is not {twin!r}"
    # What the chunk's fields_set names is enough to build it again (model_copy relies on it).
    assert type(chunk).model_validate(chunk.model_dump(include=chunk.model_fields_set)) == chunk
    assert fast == BaseChunk.to_wire_json(twin) == BaseChunk.to_wire_json(chunk)
    assert chunk.to_wire_dict() == wire == twin.to_wire_dict()
    assert encode_event(chunk) == b"data: " + fast + b"\n\n"
    assert format_event(chunk) == encode_event(chunk).decode()


def is_ai7_only(chunk: dict[str, Any]) -> bool:
    """A chunk every ai 6 client rejects (or 6.0.25's strict schema does)."""
    return (
        chunk["type"] == "tool-approval-response"
        or (chunk["type"] == "finish" and chunk.get("finishReason") == "interrupted")
        or (chunk["type"] == "text-end" and "citations" in chunk)
    )


def assert_valid_stream(result: StreamResult, ai_sdk: int = 6) -> None:
    """What the AI SDK client requires of one response (see the protocol notes); every
    chunk in the portable set, or for ``ai_sdk=7`` in what ai 7 accepts."""
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
        assert_strict_chunk(chunk, ai_sdk)
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


def stored_events(target: Target, chat_id: str, user_id: str = "local-user") -> list[Event]:
    """The ADK events the app stored for a chat, read from its SQLite file."""
    return list(_stored_session(target, chat_id, user_id).events)


def stored_state(target: Target, chat_id: str, user_id: str = "local-user") -> dict[str, Any]:
    """The session state the app stored for a chat."""
    return dict(_stored_session(target, chat_id, user_id).state)


def _stored_session(target: Target, chat_id: str, user_id: str) -> Any:
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    service = SqliteSessionService(str(target.db_path))

    async def read() -> Any:
        session = await service.get_session(
            app_name="adk_stream_protocol", user_id=user_id, session_id=chat_id
        )
        assert session is not None, f"no session for chat {chat_id}"
        return session

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


# -- building the assistant message as the client would --------------------------------------


def assistant_message(*responses: StreamResult) -> dict[str, Any]:
    """The assistant message a client holds after these responses (a continuation appends to
    it), reduced to what the server reads (the package's own, which users' tests use too)."""
    return testing.assistant_message(*(response.chunks for response in responses))


def text_authors(parts: list[dict[str, Any]]) -> dict[str, str]:
    """Each text part's text, with the agent that said it: the name of the ``data-agent`` part
    last before it (docs/agent/workflows.md, "Who answered")."""
    authors: dict[str, str] = {}
    agent = ""
    for part in parts:
        if part["type"] == "data-agent":
            agent = part["data"]["name"]
        elif part["type"] == "text":
            authors[part["text"]] = agent
    return authors


def tool_call_ids(message: dict[str, Any], tool_name: str) -> list[str]:
    return [p["toolCallId"] for p in message["parts"] if p["type"] == f"tool-{tool_name}"]


# -- /live ------------------------------------------------------------------------------------


class LiveSocket:
    """A plain WebSocket client for /live: send frames, read one response until [DONE]."""

    def __init__(
        self,
        target: Target,
        chat_id: str,
        headers: Mapping[str, str] | None = None,
        *,
        resume: bool = False,
    ) -> None:
        self.chat_id = chat_id
        query = "&resume=true" if resume else ""
        self.ws: WebSocketLike = target.connect(f"/live?chatId={chat_id}{query}", headers)
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
            assert not frame.startswith("data: "), frame
            self.controls.append(json.loads(frame))
        return self.controls.pop(0)

    def close(self) -> None:
        self.ws.close()

    def __enter__(self) -> LiveSocket:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
