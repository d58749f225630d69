"""One ``/live`` socket: a ``LiveConnection`` reads and answers its frames and owns the chat's
lease, its ``LiveRun`` (one ADK ``run_live`` for the socket's life) and its current
``LiveTurn``. Every ``message`` frame is a request and gets exactly one response
(``[DONE]``-terminated), sent as one text frame per SSE event; the turn decides what goes in
it. The handshake is in ``live.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect
from google.adk.events import Event

from adk_stream_protocol.coordination.base import (
    ChatKey,
    ChatLease,
    StopSubscription,
    WaitingCall,
)
from adk_stream_protocol.foundation.errors import RequestError, log_error, new_error_reference
from adk_stream_protocol.foundation.limits import RequestLimits, run_bounded
from adk_stream_protocol.protocol.chunks import ErrorChunk
from adk_stream_protocol.protocol.sse import DONE, format_event
from adk_stream_protocol.protocol.tool_calls import ABANDONED_RESULT
from adk_stream_protocol.protocol.ui_messages import ChatRequest
from adk_stream_protocol.transports.chat_socket_frames import CLIENT_FRAME_TYPES
from adk_stream_protocol.transports.live_frames import (
    CLOSE_BAD_REQUEST,
    CLOSE_CHAT_DELETED,
    CLOSE_INTERNAL,
    CLOSE_TOO_BIG,
    CLOSE_TRY_AGAIN_LATER,
    DELETED_REASON,
    AudioChunkFrame,
    AudioControlFrame,
    InterruptFrame,
    PingFrame,
    ToolResultFrame,
    parse_frame,
    read_frame,
    receive,
)
from adk_stream_protocol.transports.live_restarts import AnswerSink, LiveRestart
from adk_stream_protocol.turns.bridge import Bridge
from adk_stream_protocol.turns.live_handoffs import StoredPause
from adk_stream_protocol.turns.live_messages import plan_live_message, rewind_live_chat
from adk_stream_protocol.turns.live_runs import LiveRun
from adk_stream_protocol.turns.live_turns import LiveTurn
from adk_stream_protocol.turns.planning import new_message_id

logger = logging.getLogger(__name__)

# How long a socket that left lets its open response run on (resumable streams) before it
# interrupts it: a response that waits for the client ends at once, so only the model's own
# work is waited for.
DETACHED_RESPONSE_SECONDS = 120.0


class LiveConnection:
    def __init__(
        self,
        bridge: Bridge,
        websocket: WebSocket,
        *,
        chat: ChatKey,
        lease: ChatLease,
        stop: StopSubscription,  # the chat's stops, watched since before the lease was taken
        restart: LiveRestart,
    ) -> None:
        self._bridge = bridge
        self._settings = bridge.settings
        self._pending = bridge.coordination.pending
        self._ws = websocket
        self._limits = RequestLimits.from_settings(self._settings)
        self._chat = chat
        self.chat_id = chat[1]
        self._lease = lease
        self._stop = stop
        self._run = LiveRun(bridge, *chat, on_event=self._on_event, on_failure=self._on_run_failure)
        self._turn: LiveTurn | None = None
        # Confirmations waiting in the session (a socket left them): answered by run_async.
        self._stored = StoredPause(bridge, self._chat, lease)
        # The last user message: the same message sent again is refused, not answered twice.
        self._last_user_message_id: str | None = None
        self._restart = restart  # what a rolling restart sees: busy while answering
        self._send_lock = asyncio.Lock()
        # Whether this socket holds one of the process's response slots (an open response).
        self._holds_slot = False
        # Set while a new message waits for the model to end the turn it abandons.
        self._abandoning = False
        self._deleted = False  # the chat is being deleted: the socket closes, nothing runs
        self._ending: asyncio.Task[None] | None = None  # the socket's end (``_end``), once
        self._handling = asyncio.Lock()  # held while a frame is handled

    # -- the socket ---------------------------------------------------------------------------

    async def serve(self) -> None:
        self._pending.watch(self._chat, self._on_waiting)
        # Tools of this chat start only while the socket holds its lease (docs/adr/0032).
        self._bridge.tool_starts.hold(self._chat, self._lease)
        logger.info("live connected user=%s chat=%s", *self._chat)
        stops = self._bridge.spawn(self._stop_when_asked(), name="live-stop")
        lease = self._bridge.spawn(self._close_when_lease_lost(), name="live-lease")
        try:
            if await self._stored.starts_run():  # else once the stored ones are answered
                await self._run.start()
            await self._receive_frames()
        finally:
            lease.cancel()
            # Its own task: a server that cancels the handler still lets the run end and the
            # lease go (the bridge cancels it at shutdown).
            await asyncio.shield(self._end())
            stops.cancel()

    def _end(self) -> asyncio.Task[None]:
        """The socket's end, once: when it is gone, or as soon as the chat's delete closed it
        (a client that does not answer the close does not keep the chat)."""
        if self._ending is None:
            self._ending = self._bridge.spawn(self._shut_down(), name="live-end")
        return self._ending

    async def _receive_frames(self) -> None:
        limit = self._settings.max_frame_bytes
        while (frame := await receive(self._ws)) is not None:
            text, size = frame.text, frame.size
            if text is None:
                await self._control_error("binary frames are not accepted; send JSON text")
                continue
            if size > limit:
                await self._ws.close(CLOSE_TOO_BIG, f"frames are limited to {limit} bytes")
                return
            try:
                async with self._handling:
                    await self._on_frame(text, size)
            except Exception as exc:
                # A bug of ours must not kill the socket or leave a response half-open.
                await self._frame_failed(exc)

    async def _on_frame(self, text: str, size: int) -> None:
        if self._deleted:
            return  # the socket is closing: nothing more runs on the chat
        try:
            raw = await run_bounded(size, read_frame, text, self._limits)
        except RequestError as exc:
            await self._control_error(exc.message)
            return
        if raw.get("type") == "message":
            await self._on_message(raw, size)
            return
        kind = raw.get("type")
        if isinstance(kind, str) and kind in CLIENT_FRAME_TYPES:
            # ai 7's transport, given a chatId of its own: it cannot read our answers.
            await self._ws.close(
                CLOSE_BAD_REQUEST, "ai 7's WebSocketChatTransport connects without ?chatId="
            )
            return
        try:
            frame = parse_frame(raw, self._limits)
        except RequestError as exc:
            await self._control_error(exc.message)
            return
        if isinstance(frame, PingFrame):
            await self._send_text(json.dumps({"type": "pong", "timestamp": frame.timestamp}))
        elif isinstance(frame, InterruptFrame):
            if self._turn is not None:
                await self._turn.interrupt()
        elif isinstance(frame, AudioChunkFrame | AudioControlFrame):
            if await self._run_usable():
                frame.send_to(self._run.queue)  # the microphone's audio, or its start / end
        elif isinstance(frame, ToolResultFrame):
            await self._on_tool_result(frame)

    async def _frame_failed(self, exc: Exception) -> None:
        """The open response ends with the error; with none open, a control frame says it."""
        text = self._bridge.outages.interrupted(exc, f"a frame of chat={self.chat_id}")
        if self._turn is not None and await self._turn.fail_response(exc, error_text=text):
            return  # logged: as an outage, or by the converter under its error's reference
        if text is None:
            reference = new_error_reference()
            log_error(reference, type(exc).__name__, str(exc), exc)
            text = f"the server could not handle that frame (ref {reference})"
        await self._control_error(text)

    async def _shut_down(self) -> None:
        """Disconnect: nobody here can answer any more. Approvals still waiting are handed
        over to the session, for any instance to answer (ADR 0047); browser calls end. With
        resumable streams the open response is written to its end first, for a new socket
        (of this instance or another) to replay; a stop meanwhile still ends it."""
        try:
            await self._finish_open_response()
            await self._stop.close()
            await self._stored.leave(self._run, hand_over=not self._deleted)
        finally:  # even when the server cancels the handler
            self._release_slot()
            self._bridge.tool_starts.let_go(self._chat, self._lease)
            await self._lease.release()
            logger.info("live disconnected user=%s chat=%s", *self._chat)

    async def _finish_open_response(self) -> None:
        turn = self._turn
        response = turn.response if turn is not None else None
        if turn is None or response is None:
            return
        if not self._deleted:  # (the chat's delete ends it at once)
            if not self._settings.resumable_streams:
                return  # the run's close ends it
            logger.info("live socket left chat=%s: finishing its response", self.chat_id)
            try:
                await asyncio.wait_for(response.done.wait(), DETACHED_RESPONSE_SECONDS)
                return
            except TimeoutError:
                logger.warning("live response did not end chat=%s; closing", self.chat_id)
        await turn.interrupt()

    async def _stop_when_asked(self) -> None:
        """A stop of the chat (``DELETE``, from any instance) ends its open response; the
        chat's delete also closes the socket, so that its run ends and its lease is let go."""
        stop = self._stop
        while True:
            await stop.stopped.wait()
            stop.stopped.clear()
            self._deleted = stop.deleted.is_set()
            logger.info("live stop requested chat=%s deleted=%s", self.chat_id, self._deleted)
            if self._turn is not None:
                await self._turn.interrupt()  # the open response ends, with its [DONE]
            if self._deleted:
                async with self._send_lock:
                    with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):  # gone
                        await self._ws.close(CLOSE_CHAT_DELETED, DELETED_REASON)
                async with self._handling:  # a frame begun before the stop ends first
                    self._end()
                return

    async def _close_when_lease_lost(self) -> None:
        await self._lease.lost.wait()
        logger.warning("live lease lapsed chat=%s: closing the socket", self.chat_id)
        await self._ws.close(CLOSE_INTERNAL, "the server lost this chat; connect again")

    # -- requests -----------------------------------------------------------------------------

    async def _on_message(self, frame: dict[str, Any], size: int) -> None:
        await self._stored.settled()  # an answer's run, and the live run's start after it
        if self._turn is not None and await self._turn.streaming():
            await self._control_error("a response is still streaming; send after its [DONE]")
            return
        slots = self._bridge.response_slots
        sink = self._restart.answer(self._send_text)  # a restart waits for its [DONE]
        try:
            # No response is open, so this socket holds no slot: take one for this response.
            if not slots.try_acquire():
                raise slots.busy_error()
            self._holds_slot = True
            request = await self._parse_request(frame, size)
            if request.last_message.role == "assistant" and self._stored.waiting:
                await self._stored.answer(request, sink, self._run, on_end=self._release_slot)
            elif request.last_message.role == "assistant":
                await self._continue(request, sink)  # the open turn's answers: served
            else:
                self._bridge.drain.refuse_if_draining()  # no new turn while restarting
                await self._new_turn(request, sink)
        except RequestError as exc:
            logger.info("live request refused chat=%s reason=%s", self.chat_id, exc.message)
            self._bridge.telemetry.refused("live", exc.status)
            await self._send_text(format_event(ErrorChunk(error_text=exc.message)))
            await self._send_text(DONE)
            await self._restart.close_if_draining()  # connect again, to another instance
        finally:
            sink.end_unless_opened()  # refused: no response will end the answer
            if (self._turn is None or self._turn.response is None) and not self._stored.answering:
                self._release_slot()  # refused, or already ended

    async def _parse_request(self, frame: dict[str, Any], size: int) -> ChatRequest:
        request = await run_bounded(size, parse_frame, frame, self._limits)
        assert isinstance(request, ChatRequest)
        if request.id != self.chat_id:
            raise RequestError(422, f"this socket serves chat {self.chat_id!r}, not {request.id!r}")
        return request

    async def _new_turn(self, request: ChatRequest, sink: AnswerSink) -> None:
        last_sent = self._last_user_message_id
        message = await plan_live_message(self._bridge, self._chat, request, last_sent=last_sent)
        await self._stored.abandon(request)  # as POST /stream abandons them
        failure = await self._run.use()
        # Calls still waiting are abandoned: approvals are cancelled (the tools do not run)
        # and browser calls get a clear result, so the model's history stays valid.
        self._abandoning = True
        try:
            await self._pending.cancel(self._chat, dict(ABANDONED_RESULT))
            await self._run.wait_model_idle()
        finally:
            self._abandoning = False
        if message.rewind_before_event_id is not None:  # a regenerate or an edit
            failure = await rewind_live_chat(self._bridge, self._run, self._chat, message)
        self._last_user_message_id = request.last_message.id
        turn = self._turn = self._new_turn_state()
        await turn.open_response(
            new_message_id(),
            sink,
            await self._bridge.open_response_log(self._chat, self._lease),
            on_end=self._release_slot,
            records=await self._bridge.open_records("live", self._chat, request),
            page_state=request.state,
        )
        if failure is not None:  # the run failed before this message: its response says so
            await self._on_run_failure(failure)
            return
        if message.content is not None:
            self._run.send_content(message.content, stamps=message.stamps)
        logger.info("live turn chat=%s voice=%s", self.chat_id, message.content is None)

    async def _continue(self, request: ChatRequest, sink: AnswerSink) -> None:
        """Approvals and browser results for the assistant message sent last."""
        last = request.last_message
        # With no turn yet, nothing is pending: any answer is refused.
        turn = self._turn or self._new_turn_state()
        answers = await turn.plan_continuation(last)
        await turn.open_response(
            last.id,
            sink,
            await self._bridge.open_response_log(self._chat, self._lease),
            on_end=self._release_slot,
            continuation=True,
            denied=answers.denied,
            records=await self._bridge.open_records("live", self._chat, request),
            page_state=request.state,
        )
        await turn.apply_answers(answers)

    def _new_turn_state(self) -> LiveTurn:
        return LiveTurn(
            self._chat,
            settings=self._settings,
            run=self._run,
            pending=self._pending,
            spawn=lambda coro: self._bridge.spawn(coro, name=f"live-call:{self.chat_id}"),
        )

    async def _on_tool_result(self, frame: ToolResultFrame) -> None:
        """The predecessor's envelope for a browser tool's output; a refusal says why."""
        turn, call_id = self._turn, frame.tool_call_id
        why = "no turn is open" if turn is None else await turn.take_result(call_id, frame.result)
        if why is not None:
            await self._control_error(
                f"tool_result for {call_id[:64]!r} answers no waiting browser call ({why})"
            )

    # -- the run ------------------------------------------------------------------------------

    async def _on_event(self, event: Event) -> None:
        if self._turn is not None:
            await self._turn.on_event(event)

    def _on_waiting(self, call: WaitingCall) -> None:
        if self._abandoning:
            # The abandoned turn asks after its cancellation: cancelled too, so that it ends.
            self._bridge.spawn(
                self._pending.cancel(self._chat, dict(ABANDONED_RESULT)), name="live-abandon"
            )
        elif self._turn is not None:
            self._turn.on_waiting(call)

    async def _run_usable(self) -> bool:
        failure = await self._run.use()
        if failure is not None:
            await self._on_run_failure(failure)
        return failure is None

    async def _on_run_failure(self, exc: Exception) -> None:
        text = self._bridge.outages.interrupted(exc, f"the live run of chat={self.chat_id}")
        failed = self._turn is not None and await self._turn.fail_response(exc, error_text=text)
        if text is not None:  # a store's outage, logged: the client comes back after a pause
            await self._ws.close(CLOSE_TRY_AGAIN_LATER, "the chat service is unavailable")
            return
        if not failed:
            logger.exception("live run failed chat=%s", self.chat_id)
        await self._ws.close(CLOSE_INTERNAL, "the live run failed")

    # -- sending ------------------------------------------------------------------------------

    def _release_slot(self) -> None:
        """Give back the process-wide response slot the open response holds."""
        if self._holds_slot:
            self._holds_slot = False
            self._bridge.response_slots.release()

    async def _send_text(self, text: str) -> None:
        async with self._send_lock:
            try:
                await self._ws.send_text(text)
            except (WebSocketDisconnect, RuntimeError):
                logger.debug("live send after disconnect chat=%s", self.chat_id)

    async def _control_error(self, message: str) -> None:
        logger.info("live frame refused chat=%s reason=%s", self.chat_id, message)
        await self._send_text(json.dumps({"type": "error", "message": message}))
