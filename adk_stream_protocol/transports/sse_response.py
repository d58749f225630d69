"""The HTTP response of a Server-Sent Events stream, as a plain ASGI application.

It writes the body's framed events as they come, a keep-alive comment when the stream has
been quiet for a while, and stops the body when the client goes away. One helper task per
response listens for the disconnect; the keep-alive is a timer that starts a send only when
one is due (docs/adr/0052: sse-starlette's response ran four tasks per response, about
0.4 ms of CPU on each answer).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping

from starlette.background import BackgroundTask
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

logger = logging.getLogger(__name__)


class EventStreamResponse(Response):
    """Streams ``body`` (SSE-framed bytes) with ``headers``; a ``keep_alive`` comment after
    each ``keep_alive_seconds`` without a write (0 turns them off). The body is closed
    however the response ends, so its own clean-up runs (a turn learns its client left).
    A ``Response`` for FastAPI's sake (it passes responses through); none of its body
    handling is used."""

    def __init__(
        self,
        body: AsyncIterator[bytes],
        *,
        headers: Mapping[str, str],
        keep_alive_seconds: float,
        keep_alive: bytes,
    ) -> None:
        self.body_iterator = body
        self.status_code = 200
        self.media_type = headers.get("content-type")
        self.background: BackgroundTask | None = None
        self.raw_headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        self._keep_alive_seconds = keep_alive_seconds
        self._keep_alive = keep_alive

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start: Message = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": self.raw_headers,
        }
        if scope.get("method") == "HEAD":  # the headers alone; nothing runs
            await _aclose(self.body_iterator)
            await send(start)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            stream = _Stream(send, self._keep_alive_seconds, self._keep_alive)
            await stream.run(start, self.body_iterator, receive)
        if self.background is not None:
            await self.background()


class _Stream:
    """One response's writes: its body, its keep-alive timer and its disconnect listener."""

    def __init__(self, send: Send, keep_alive_seconds: float, keep_alive: bytes) -> None:
        self._send = send
        self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("an SSE response is written from a task")
        self._task = task
        self._keep_alive_seconds = keep_alive_seconds
        self._keep_alive: Message = {
            "type": "http.response.body",
            "body": keep_alive,
            "more_body": True,
        }
        self._written_at = self._loop.time()
        self._writing = False  # a write waits for the client to read: no comment meanwhile
        self._client_left = False
        self._ended = False
        self._timer: asyncio.TimerHandle | None = None
        self._keep_alive_write: asyncio.Task[None] | None = None  # held: the loop keeps no ref

    async def run(self, start: Message, body: AsyncIterator[bytes], receive: Receive) -> None:
        listener = self._loop.create_task(self._listen(receive))
        if self._keep_alive_seconds > 0:
            self._timer = self._loop.call_later(self._keep_alive_seconds, self._keep_alive_due)
        try:
            await self._send(start)
            await self._write_all(body)
        finally:
            self._ended = True
            listener.cancel()
            if self._timer is not None:
                self._timer.cancel()
            if self._keep_alive_write is not None:
                self._keep_alive_write.cancel()
            await _aclose(body)

    async def _write_all(self, body: AsyncIterator[bytes]) -> None:
        try:
            async for data in body:
                await self._write(data)
        except asyncio.CancelledError:
            # The listener cancels this task when the client leaves; anything else goes on.
            if not self._client_left or self._task.uncancel() > 0:
                raise
            return
        self._ended = True
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _write(self, data: bytes) -> None:
        await self._write_message({"type": "http.response.body", "body": data, "more_body": True})

    async def _listen(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
        if not self._ended:
            logger.debug("sse client left")
            self._client_left = True
            self._task.cancel()

    def _keep_alive_due(self) -> None:
        quiet = self._loop.time() - self._written_at
        if quiet >= self._keep_alive_seconds and not self._writing and not self._ended:
            self._keep_alive_write = self._loop.create_task(self._write_keep_alive())
            quiet = 0.0
        self._timer = self._loop.call_later(self._keep_alive_seconds - quiet, self._keep_alive_due)

    async def _write_keep_alive(self) -> None:
        if self._writing or self._ended:
            return
        try:
            await self._write_message(self._keep_alive)
        except Exception as exc:  # the client is gone; the listener ends the stream
            logger.debug("keep-alive not written: %s", type(exc).__name__)

    async def _write_message(self, message: Message) -> None:
        self._writing = True
        try:
            await self._send(message)
        finally:
            self._writing = False
            self._written_at = self._loop.time()


async def _aclose(body: AsyncIterator[bytes]) -> None:
    aclose = getattr(body, "aclose", None)
    if aclose is not None:
        await aclose()
