"""A slow network between the browser and the server, for the Stop test.

The offline model answers in well under a second, so no person (and no test) could press Stop
in the middle of an answer. `SlowNetwork` is a reverse proxy on its own loopback port: the page
is opened through it, and it hands every event of an answer to the browser `pace` seconds
after the previous one (each SSE event of `POST /stream` and of a resume, `GET
/stream/{chatId}/stream`, each frame of `WS /live`). The server and the page are unchanged;
only the delivery is slow, as on a bad connection.
Setting `pace` to 0 lets the rest through at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager

import httpx
import uvicorn
import websockets
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.support.waiting import wait_until

# Hop-by-hop or recomputed headers: never copied from one side to the other.
_SKIPPED_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}


class SlowNetwork:
    def __init__(self, upstream: str, pace: float) -> None:
        self.upstream = upstream
        self.pace = pace
        self.base_url = ""
        self.stops: list[str] = []  # chat ids the page asked to stop (DELETE)

    async def _delay(self) -> None:
        if self.pace > 0:
            await asyncio.sleep(self.pace)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/stream", self._stream, methods=["POST"]),
                Route("/stream/{chat_id}/stream", self._stream, methods=["GET"]),
                Route("/stream/{chat_id}/stream", self._stop, methods=["DELETE"]),
                WebSocketRoute("/live", self._live),
                Route("/chats/{chat_id}", self._passed, methods=["PATCH", "DELETE"]),
                Route("/{path:path}", self._passed, methods=["GET"]),
            ]
        )

    async def _stop(self, request: Request) -> Response:
        self.stops.append(request.path_params["chat_id"])
        async with httpx.AsyncClient(timeout=30) as client:
            upstream = await client.delete(
                f"{self.upstream}{request.url.path}", headers=_copied(request.headers)
            )
        return Response(upstream.content, upstream.status_code, _copied(upstream.headers))

    async def _passed(self, request: Request) -> Response:
        """Anything else (the page, `/chats`), at once."""
        async with httpx.AsyncClient(timeout=30) as client:
            upstream = await client.request(
                request.method,
                f"{self.upstream}{request.url.path}",
                params=request.query_params,
                content=await request.body(),
                headers=_copied(request.headers),
            )
        return Response(upstream.content, upstream.status_code, _copied(upstream.headers))

    async def _stream(self, request: Request) -> Response:
        """An answer (`POST /stream`) or a resume of one (`GET`), event by event."""
        client = httpx.AsyncClient(timeout=60)
        upstream = await client.send(
            client.build_request(
                request.method,
                f"{self.upstream}{request.url.path}",
                content=await request.body(),
                headers=_copied(request.headers),
            ),
            stream=True,
        )

        async def events() -> AsyncIterator[str]:
            buffer = ""
            try:
                async for text in upstream.aiter_text():
                    buffer += text
                    while "\n\n" in buffer:
                        event, buffer = buffer.split("\n\n", 1)
                        await self._delay()
                        yield event + "\n\n"
                if buffer:
                    yield buffer
            finally:
                await upstream.aclose()
                await client.aclose()

        return StreamingResponse(events(), upstream.status_code, _copied(upstream.headers))

    async def _live(self, browser: WebSocket) -> None:
        url = self.upstream.replace("http://", "ws://", 1) + f"/live?{browser.url.query}"
        # The server's frames are read as they come (no max_queue) and held here for the
        # page: a socket the page left is then closed at once. With the client's default
        # queue, reading stopped once 16 frames waited, and the server's reply to the close
        # stayed behind them: the proxy's own exit waited out the close timeout (10 s).
        async with websockets.connect(url, open_timeout=10, max_queue=None) as server:
            await browser.accept()

            async def to_server() -> None:
                with contextlib.suppress(WebSocketDisconnect):
                    while True:
                        message = await browser.receive()
                        if message["type"] == "websocket.disconnect":
                            return
                        if message.get("text") is not None:
                            await server.send(message["text"])
                        elif message.get("bytes") is not None:
                            await server.send(message["bytes"])

            async def to_browser() -> None:
                with contextlib.suppress(websockets.ConnectionClosed):
                    async for frame in server:
                        await self._delay()
                        if isinstance(frame, str):
                            await browser.send_text(frame)
                        else:
                            await browser.send_bytes(frame)

            tasks = {asyncio.create_task(to_server()), asyncio.create_task(to_browser())}
            _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            with contextlib.suppress(Exception):
                await browser.close(server.close_code or 1000)


def _copied(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _SKIPPED_HEADERS}


@contextmanager
def slow_network(upstream: str, pace: float) -> Iterator[SlowNetwork]:
    """Run a `SlowNetwork` in front of `upstream` on a free loopback port (in a thread)."""
    network = SlowNetwork(upstream, pace)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    network.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(network.app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError("the slow network proxy did not start")
        return server.started

    # uvicorn's Server has a flag, not an event, for its start.
    wait_until(started, "the slow network proxy started")
    try:
        yield network
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
