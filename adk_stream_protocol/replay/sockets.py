"""``WS /live`` of the replay server: both protocols of the real ``/live``
(docs/live-protocol.md), answered from recordings.

- Without ``?chatId=``: ai 7's ``WebSocketChatTransport`` protocol. A ``send`` gets its
  recording as numbered ``chunk`` frames and ``end``; a ``resume`` gets ``no-active`` (nothing
  runs); an ``abort`` stops that request's replay. A request no recording answers gets its
  ``error`` frame, with the list of what is recorded.
- With ``?chatId=``: our envelope protocol. A ``message`` frame gets its recording as
  ``data:`` frames and ``[DONE]``; ``ping`` a ``pong``; ``interrupt`` ends the response being
  replayed as the real server ends an interrupted one (open blocks closed, ``finish``).
  Voice and tool-result frames need an agent and are refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Coroutine
from contextlib import suppress
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.limits import RequestLimits, read_json
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.sse import DONE
from adk_stream_protocol.protocol.ui_messages import ChatRequest, parse_chat_request
from adk_stream_protocol.replay.store import Replay, ReplayStore, paced, sse_event
from adk_stream_protocol.transports.chat_socket_frames import (
    NO_REQUEST_ID,
    AbortFrame,
    ResumeFrame,
    chunk_frame,
    control_frame,
    error_frame,
    parse_client_frame,
    request_id_of,
)
from adk_stream_protocol.transports.chat_sockets import MAX_OPEN_REQUESTS
from adk_stream_protocol.transports.live_frames import (
    InterruptFrame,
    PingFrame,
    parse_frame,
    receive,
)

logger = logging.getLogger(__name__)

CLOSE_BAD_FRAME = 4400


class _ReplaySocket(ABC):
    """What both protocols share: reading frames under the limits, sending under a lock."""

    def __init__(
        self, websocket: WebSocket, store: ReplayStore, settings: Settings, speed: float
    ) -> None:
        self._ws = websocket
        self._store = store
        self._settings = settings
        self._speed = speed
        self._limits = RequestLimits.from_settings(settings)
        self._send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def serve(self) -> None:
        try:
            while (frame := await receive(self._ws)) is not None:
                if frame.text is None:
                    await self._close(1003, "send JSON text frames")
                    return
                if frame.size > self._settings.max_frame_bytes:
                    await self._close(1009, "the frame is too large")
                    return
                if not await self.on_frame(frame.text):
                    return
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    @abstractmethod
    async def on_frame(self, text: str) -> bool:
        """Handle one frame; False when the socket was closed for it."""

    def spawn(self, play: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(play)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def send_text(self, text: str) -> None:
        async with self._send_lock:
            try:
                await self._ws.send_text(text)
            except (WebSocketDisconnect, RuntimeError):
                logger.debug("replay: send after disconnect")

    async def _close(self, code: int, reason: str) -> None:
        with suppress(RuntimeError):
            await self._ws.close(code, reason)


class ChatSocketReplay(_ReplaySocket):
    """ai 7's protocol: many requests, each named by its ``requestId``."""

    def __init__(
        self, websocket: WebSocket, store: ReplayStore, settings: Settings, speed: float
    ) -> None:
        super().__init__(websocket, store, settings, speed)
        self._requests: dict[str, asyncio.Task[None]] = {}

    async def on_frame(self, text: str) -> bool:
        try:
            frame = read_json(text, self._limits.max_json_depth)
        except RequestError as exc:
            await self._close(CLOSE_BAD_FRAME, exc.message[:120])
            return False
        request_id = request_id_of(frame)
        if request_id is None:
            await self._close(CLOSE_BAD_FRAME, NO_REQUEST_ID)
            return False
        assert isinstance(frame, dict)
        try:
            parsed = parse_client_frame(frame)
            if isinstance(parsed, AbortFrame):
                if (task := self._requests.pop(request_id, None)) is not None:
                    task.cancel()  # the client has closed its stream: nothing more is sent
                return True
            if request_id in self._requests:
                raise RequestError(409, "this requestId is already open")
            if len(self._requests) >= MAX_OPEN_REQUESTS:
                raise RequestError(429, f"a socket may have {MAX_OPEN_REQUESTS} requests open")
            if isinstance(parsed, ResumeFrame):
                await self.send_text(control_frame("no-active", request_id))
                return True
            chat = parse_chat_request(parsed.chat_request(), self._limits)
            replay = self._store.pick(chat, 7)
        except RequestError as exc:
            logger.info("replay: ai 7 request refused status=%s", exc.status)
            await self.send_text(error_frame(request_id, exc.message))
            return True
        logger.info("replay: ai 7 socket plays %s", replay.name)
        self._requests[request_id] = self.spawn(self._play(request_id, replay))
        return True

    async def _play(self, request_id: str, replay: Replay) -> None:
        try:
            sequence = 0
            async for chunk in paced(replay.chunks, self._speed):
                await self.send_text(chunk_frame(request_id, sequence, sse_event(chunk)))
                sequence += 1
            await self.send_text(control_frame("end", request_id))
        finally:
            if self._requests.get(request_id) is asyncio.current_task():
                del self._requests[request_id]


class EnvelopeReplay(_ReplaySocket):
    """Our envelope protocol: one chat, one response at a time."""

    def __init__(
        self, websocket: WebSocket, store: ReplayStore, settings: Settings, speed: float
    ) -> None:
        super().__init__(websocket, store, settings, speed)
        self._playing: asyncio.Task[None] | None = None
        self._open = _OpenParts()

    async def on_frame(self, text: str) -> bool:
        try:
            frame = read_json(text, self._limits.max_json_depth)
            if not isinstance(frame, dict):
                raise RequestError(422, "a frame must be a JSON object with a type")
            parsed = parse_frame(frame, self._limits)
        except RequestError as exc:
            await self._control_error(exc.message)
            return True
        if isinstance(parsed, ChatRequest):
            await self._on_message(parsed)
        elif isinstance(parsed, PingFrame):
            await self.send_text(json.dumps({"type": "pong", "timestamp": parsed.timestamp}))
        elif isinstance(parsed, InterruptFrame):
            await self._interrupt()
        else:
            await self._control_error("the replay server answers message frames only")
        return True

    async def _on_message(self, request: ChatRequest) -> None:
        if self._playing is not None and not self._playing.done():
            await self._control_error("a response is still streaming; send after its [DONE]")
            return
        try:
            replay = self._store.pick(request, 6)
        except RequestError as exc:
            logger.info("replay: envelope message refused status=%s", exc.status)
            await self.send_text(sse_event({"type": "error", "errorText": exc.message}).decode())
            await self.send_text(DONE)
            return
        logger.info("replay: envelope socket plays %s", replay.name)
        self._open = _OpenParts()
        self._playing = self.spawn(self._play(replay))

    async def _play(self, replay: Replay) -> None:
        async for chunk in paced(replay.chunks, self._speed):
            self._open.saw(chunk)
            await self.send_text(sse_event(chunk).decode())
        await self.send_text(DONE)

    async def _interrupt(self) -> None:
        playing, self._playing = self._playing, None
        if playing is None or playing.done():
            return
        playing.cancel()
        await asyncio.gather(playing, return_exceptions=True)
        for chunk in self._open.closing():
            await self.send_text(sse_event(chunk).decode())
        await self.send_text(DONE)

    async def _control_error(self, message: str) -> None:
        await self.send_text(json.dumps({"type": "error", "message": message}))


class _OpenParts:
    """The text and reasoning blocks and the step a replayed response has open, to close
    them when it is interrupted."""

    def __init__(self) -> None:
        self.blocks: dict[str, str] = {}  # id -> "text" | "reasoning"
        self.step = False
        self.finished = False

    def saw(self, chunk: dict[str, Any]) -> None:
        kind = str(chunk.get("type"))
        if kind in ("text-start", "reasoning-start"):
            self.blocks[str(chunk.get("id"))] = kind.removesuffix("-start")
        elif kind in ("text-end", "reasoning-end"):
            self.blocks.pop(str(chunk.get("id")), None)
        elif kind in ("start-step", "finish-step"):
            self.step = kind == "start-step"
        elif kind == "finish":
            self.finished = True

    def closing(self) -> list[dict[str, Any]]:
        chunks: list[dict[str, Any]] = [
            {"type": f"{kind}-end", "id": block_id} for block_id, kind in self.blocks.items()
        ]
        if self.step:
            chunks.append({"type": "finish-step"})
        if not self.finished:
            chunks.append({"type": "finish", "finishReason": "other"})
        return chunks
