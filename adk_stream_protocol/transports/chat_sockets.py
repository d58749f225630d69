"""A ``/live`` socket that speaks ai 7's ``WebSocketChatTransport`` protocol
(docs/live-protocol.md, "The ai 7 protocol"; docs/adr/0023).

One socket carries the requests of every chat of a page, each named by its ``requestId``:

- ``send`` is a chat request, answered as ``POST /stream`` answers one (a ``run_async`` turn
  of ``request_turns``); each event of the response goes out as a numbered ``chunk`` frame,
  and its ``[DONE]`` as ``end``;
- ``resume`` follows the chat's active response from the chunk log, as
  ``GET /stream/{chatId}/stream`` does (``start`` then the chunks, or ``no-active``);
- ``abort`` stops that request's run, as a stop does.

Who asks is established for each frame by the app's identity dependency, with the frame's
``headers`` laid over the handshake's. A refusal is an ``error`` frame for that request; a
frame that names no request closes the socket with the reason, as the client cannot be told
otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from contextlib import aclosing, suppress
from typing import Literal

from fastapi import WebSocket, WebSocketDisconnect

from adk_stream_protocol.foundation.errors import RequestError, log_error, new_error_reference
from adk_stream_protocol.foundation.identity import user_of
from adk_stream_protocol.foundation.limits import RequestLimits, read_json, run_bounded
from adk_stream_protocol.foundation.outages import Outages
from adk_stream_protocol.protocol.refusals import log_failure
from adk_stream_protocol.protocol.ui_messages import CHAT_ID_PATTERN, parse_chat_request
from adk_stream_protocol.transports.chat_socket_frames import (
    NO_REQUEST_ID,
    AbortFrame,
    ResumeFrame,
    SendFrame,
    chunk_frame,
    control_frame,
    error_frame,
    is_done,
    parse_client_frame,
    request_id_of,
)
from adk_stream_protocol.transports.live_frames import receive
from adk_stream_protocol.turns.bridge import Bridge
from adk_stream_protocol.turns.openings import Client
from adk_stream_protocol.turns.request_turns import RequestTurn, begin_request_turn

logger = logging.getLogger(__name__)

# Requests one socket may have open at once: a page has a few chats, each with one response.
MAX_OPEN_REQUESTS = 32

CLOSE_BAD_FRAME = 4400
CLOSE_UNSUPPORTED = 1003
CLOSE_TOO_BIG = 1009
CLOSE_RESTART = 1012  # Service Restart: connect again


class ChatSocket:
    """One ai 7 socket: its open requests, by ``requestId``."""

    def __init__(self, bridge: Bridge, websocket: WebSocket) -> None:
        self._bridge = bridge
        self._settings = bridge.settings
        self._ws = websocket
        self._limits = RequestLimits.from_settings(self._settings)
        self._requests: dict[str, SocketRequest] = {}
        self._send_lock = asyncio.Lock()

    # A socket: a restart closes it after its requests' responses ended.
    order = 2
    busy = False

    async def end_for_restart(self) -> None:
        await self._close(CLOSE_RESTART, "the server is restarting; connect again")

    async def serve(self) -> None:
        logger.info("live ai 7 socket connected")
        self._bridge.drain.add(self)
        try:
            await self._receive_frames()
        finally:
            self._bridge.drain.discard(self)
            for request in list(self._requests.values()):
                request.socket_left()
            logger.info("live ai 7 socket closed open_requests=%s", len(self._requests))

    async def _receive_frames(self) -> None:
        limit = self._settings.max_frame_bytes
        while (frame := await receive(self._ws)) is not None:
            text, size = frame.text, frame.size
            if text is None:
                await self._close(CLOSE_UNSUPPORTED, "send JSON text frames")
                return
            if size > limit:
                await self._close(CLOSE_TOO_BIG, f"frames are limited to {limit} bytes")
                return
            try:
                if not await self._on_frame(text, size):
                    return
            except Exception as exc:
                # A bug of ours must not kill the socket's other requests.
                reference = new_error_reference()
                log_error(reference, type(exc).__name__, str(exc), exc)
                await self._close(1011, f"the server could not handle a frame (ref {reference})")
                return

    async def _on_frame(self, text: str, size: int) -> bool:
        """Handle one frame; False when the socket was closed for it."""
        try:
            frame = await run_bounded(size, read_json, text, self._limits.max_json_depth)
        except RequestError as exc:
            await self._close(CLOSE_BAD_FRAME, _short(exc.message))
            return False
        request_id = request_id_of(frame)
        if request_id is None:
            await self._close(CLOSE_BAD_FRAME, NO_REQUEST_ID)
            return False
        assert isinstance(frame, dict)
        try:
            parsed = parse_client_frame(frame)
        except RequestError as exc:
            await self._refuse(request_id, exc)
            return True
        if isinstance(parsed, AbortFrame):
            request = self._requests.get(request_id)
            if request is not None:  # else it has ended: nothing to stop
                request.abort()
            return True
        if request_id in self._requests:
            await self._refuse(request_id, RequestError(409, "this requestId is already open"))
        elif len(self._requests) >= MAX_OPEN_REQUESTS:
            await self._refuse(
                request_id,
                RequestError(429, f"a socket may have {MAX_OPEN_REQUESTS} requests open"),
            )
        else:
            request = SocketRequest(self, request_id, parsed.type)
            self._requests[request_id] = request
            serve = (
                self._serve_resume(request, parsed)
                if isinstance(parsed, ResumeFrame)
                else self._serve_send(request, parsed, size)
            )
            request.task = self._bridge.tasks.spawn(serve, name=f"live-{parsed.type}")
        return True

    # -- send ---------------------------------------------------------------------------------

    async def _serve_send(self, request: SocketRequest, frame: SendFrame, size: int) -> None:
        slots = self._bridge.response_slots
        try:
            self._bridge.drain.refuse_if_draining()
            user_id = await user_of(self._ws, frame.headers)
            chat = await run_bounded(size, parse_chat_request, frame.chat_request(), self._limits)
            if not slots.try_acquire():
                raise slots.busy_error()
            try:
                turn = await begin_request_turn(
                    self._bridge.turns,
                    user_id,
                    chat,
                    request,
                    client=Client("ai7-socket", 7),
                    on_end=lambda: self._ended(request, slots.release),
                )
            except BaseException:
                slots.release()  # the turn never began, so it will not release it
                raise
        except Exception as exc:
            await self._refuse(request.request_id, _request_error(exc, self._bridge.outages))
            self._forget(request)
            return
        request.began(turn)

    def _ended(self, request: SocketRequest, release: Callable[[], None]) -> None:
        release()
        self._forget(request)

    # -- resume -------------------------------------------------------------------------------

    async def _serve_resume(self, request: SocketRequest, frame: ResumeFrame) -> None:
        slots = self._bridge.response_slots
        holds_slot = False
        try:
            self._bridge.drain.refuse_if_draining()
            user_id = await user_of(self._ws, frame.headers)
            if not re.fullmatch(CHAT_ID_PATTERN, frame.id):
                raise RequestError(422, "not a chat id: letters, digits and _.:- (at most 128)")
            if not slots.try_acquire():
                raise slots.busy_error()
            holds_slot = True
            events = await self._bridge.coordination.chunk_logs.follow((user_id, frame.id))
            if events is None:
                await self.send_text(control_frame("no-active", request.request_id))
                return
            logger.info("live ai 7 resume chat=%s", frame.id)
            await self.send_text(control_frame("start", request.request_id))
            request.skip_until(0 if frame.last_sequence is None else frame.last_sequence + 1)
            async with aclosing(self._bridge.drain.follow(events)) as followed:
                async for event in followed:
                    await request.send([event])
        except Exception as exc:
            await self._refuse(request.request_id, _request_error(exc, self._bridge.outages))
        finally:
            if holds_slot:
                slots.release()
            self._forget(request)

    # -- sending ------------------------------------------------------------------------------

    def _forget(self, request: SocketRequest) -> None:
        if self._requests.get(request.request_id) is request:
            del self._requests[request.request_id]

    async def _refuse(self, request_id: str, exc: RequestError) -> None:
        logger.info("live ai 7 request refused status=%s reason=%s", exc.status, exc.message)
        self._bridge.telemetry.refused("ai7-socket", exc.status)
        await self.send_text(error_frame(request_id, exc.message))

    async def send_text(self, text: str) -> None:
        async with self._send_lock:
            try:
                await self._ws.send_text(text)
            except (WebSocketDisconnect, RuntimeError):
                logger.debug("live ai 7 send after disconnect")

    async def _close(self, code: int, reason: str) -> None:
        logger.info("live ai 7 socket closed by the server code=%s reason=%s", code, reason)
        with suppress(RuntimeError):  # already closed
            await self._ws.close(code, reason)


class SocketRequest:
    """One open request of an ai 7 socket, and the ``ChunkSink`` of its response: every
    event becomes a numbered ``chunk`` frame, ``[DONE]`` the ``end`` frame."""

    def __init__(
        self, socket: ChatSocket, request_id: str, kind: Literal["send", "resume"]
    ) -> None:
        self._socket = socket
        self.request_id = request_id
        self.kind = kind
        self.task: asyncio.Task[None] | None = None
        self._turn: RequestTurn | None = None
        self._sequence = 0
        self._first_sent = 0  # a resume from `lastSequence` sends from here on
        self._aborted = False  # the client dropped the request: send nothing more
        self._left = False  # the socket closed before the turn began
        self._ended = False

    def began(self, turn: RequestTurn) -> None:
        self._turn = turn
        if self._aborted:
            turn.stop()
        elif self._left:
            turn.client_left()

    def skip_until(self, sequence: int) -> None:
        self._first_sent = sequence

    def abort(self) -> None:
        """``abort``: the client has closed its stream. A send's run stops; a resume stops
        following."""
        logger.info("live ai 7 abort kind=%s", self.kind)
        self._aborted = True
        if self._turn is not None:
            self._turn.stop()
        elif self.kind == "resume" and self.task is not None:
            self.task.cancel()

    def socket_left(self) -> None:
        """The socket closed: a running turn goes on only if streams are resumable."""
        self._left = True
        if self._turn is not None:
            self._turn.client_left()
        elif self.kind == "resume" and self.task is not None:
            self.task.cancel()

    async def send(self, events: Sequence[bytes]) -> None:
        for event in events:
            if is_done(event):
                frame = control_frame("end", self.request_id)
                self._ended = True
            else:
                sequence, self._sequence = self._sequence, self._sequence + 1
                if sequence < self._first_sent:
                    continue
                frame = chunk_frame(self.request_id, sequence, event)
            if not (self._aborted or self._left):
                await self._socket.send_text(frame)

    async def close(self) -> None:
        if not self._ended:
            # The response ended without its [DONE] (it could not start): say so.
            self._ended = True
            if not (self._aborted or self._left):
                await self._socket.send_text(
                    error_frame(self.request_id, "the response ended before it was complete")
                )


def _request_error(exc: Exception, outages: Outages) -> RequestError:
    """What to tell the client: a refusal as it is; a store's outage as a 503 (logged once
    per outage); a failure of ours logged, with its reference (the same as a 500 of
    ``/stream`` would be)."""
    if isinstance(exc, RequestError):
        return exc
    refusal = outages.refusal(exc, "an ai 7 socket's request")
    if refusal is not None:
        return refusal
    reference = new_error_reference()
    log_failure(reference, exc)
    return RequestError(500, f"the server could not answer this request (ref {reference})")


def _short(reason: str) -> str:
    """A close reason fits in 123 bytes."""
    encoded = reason.encode()
    return reason if len(encoded) <= 120 else encoded[:117].decode(errors="ignore") + "..."
