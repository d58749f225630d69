"""One ``/live`` socket: a ``LiveConnection`` reads and answers its frames, holds the chat
for the socket's life (``HeldChat``: its lease, its stops), and drives the socket's turns.

The flow goes one way. The connection drives its current ``LiveTurn``: it hands the turn the
client's messages, answers and interrupts, the calls that start to wait for the client, and
whatever the socket's ``LiveRun`` (one ADK ``run_live`` for the socket's life) reports: its
events, its tools' data parts, its failure. The run only reports (``RunReports``); nothing
calls back up into the connection. Every ``message`` frame is a request and gets exactly one
response (``[DONE]``-terminated), sent as one text frame per SSE event; the turn decides what
goes in it. The handshake is in ``live.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect

from adk_stream_protocol.coordination.base import (
    ChatKey,
    ChatLease,
    StopSubscription,
    WaitingCall,
)
from adk_stream_protocol.foundation.errors import RequestError, new_error_reference
from adk_stream_protocol.foundation.limits import RequestLimits, ResponseSlots, run_bounded
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.chunks import ErrorChunk
from adk_stream_protocol.protocol.refusals import log_failure
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
    Received,
    ToolResultFrame,
    parse_frame,
    read_frame,
    receive,
)
from adk_stream_protocol.transports.live_restarts import AnswerSink, LiveRestart
from adk_stream_protocol.turns.live_messages import plan_live_message, rewind_live_chat
from adk_stream_protocol.turns.live_runs import LiveRun, RunFailed, RunReport, ToolData
from adk_stream_protocol.turns.live_turns import LiveTurn
from adk_stream_protocol.turns.planning import new_message_id
from adk_stream_protocol.turns.response import Delivery
from adk_stream_protocol.turns.stored_pauses import StoredPause
from adk_stream_protocol.turns.turn_services import TurnServices

logger = logging.getLogger(__name__)

# How long a socket that left lets its open response run on (resumable streams) before it
# interrupts it: a response that waits for the client ends at once, so only the model's own
# work is waited for.
DETACHED_RESPONSE_SECONDS = 120.0


@dataclass(frozen=True)
class HeldChat:
    """The chat as a socket holds it: its key, its lease, and its stops (watched since
    before the lease was taken, so that a delete sent meanwhile still reaches the socket)."""

    chat: ChatKey
    lease: ChatLease
    stop: StopSubscription


class SocketIO:
    """The socket as its connection uses it: frames in, within the request limits; text
    frames out, one at a time; its close."""

    def __init__(self, websocket: WebSocket, settings: Settings, chat_id: str) -> None:
        self._ws = websocket
        self.limits = RequestLimits.from_settings(settings)
        self.max_frame_bytes = settings.max_frame_bytes
        self._chat_id = chat_id  # for the logs
        self._sending = asyncio.Lock()  # one frame at a time, and the delete's close after

    async def receive(self) -> Received | None:
        """The client's next frame; None once it has gone."""
        return await receive(self._ws)

    async def send_text(self, text: str) -> None:
        async with self._sending:
            try:
                await self._ws.send_text(text)
            except (WebSocketDisconnect, RuntimeError):
                logger.debug("live send after disconnect chat=%s", self._chat_id)

    async def control_error(self, message: str) -> None:
        logger.info("live frame refused chat=%s reason=%s", self._chat_id, message)
        await self.send_text(json.dumps({"type": "error", "message": message}))

    async def close(self, code: int, reason: str) -> None:
        """Close the socket; one the client has closed already is left as it is."""
        with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):
            await self._ws.close(code, reason)

    async def close_after_sends(self, code: int, reason: str) -> None:
        """Close once the frame being sent is out."""
        async with self._sending:
            await self.close(code, reason)


class ResponseSlot:
    """The process's response slot a socket holds while a response of it is open (at most
    one at a time): taken for each message, given back once, by whoever ends first."""

    def __init__(self, slots: ResponseSlots) -> None:
        self._slots = slots
        self._held = False

    def take(self) -> None:
        """Take a slot for a new response; ``RequestError`` (503) while the process is full."""
        if not self._slots.try_acquire():
            raise self._slots.busy_error()
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._slots.release()


class LiveConnection:
    def __init__(
        self,
        services: TurnServices,
        io: SocketIO,
        held: HeldChat,
        *,
        slot: ResponseSlot,
        restart: LiveRestart,
    ) -> None:
        self._services = services
        self._io = io
        self._held = held
        self._slot = slot  # held while a response of this socket is open
        self._restart = restart  # what a rolling restart sees: busy while answering
        runtime = services.runtime
        self._run = LiveRun(
            held.chat,
            services.runners,
            services.tools,
            telemetry=runtime.telemetry,
            tasks=runtime.tasks,
        )
        self._turn: LiveTurn | None = None
        # Set when ADK's live mode cannot run the agent: no run starts, each message is
        # refused with it.
        self._refusal = services.runners.live_refusal
        # Confirmations waiting in the session (a socket left them): answered by run_async.
        self._stored = StoredPause(services, held.chat, held.lease)
        # Set while a new message waits for the model to end the turn it abandons.
        self._abandoning = False
        self._handling = asyncio.Lock()  # held while a frame is handled
        self._ending: asyncio.Task[None] | None = None  # the socket's end (``_end``), once

    @property
    def chat_id(self) -> str:
        return self._held.chat[1]

    @property
    def _deleted(self) -> bool:
        """The chat is being deleted: the socket closes, nothing more runs on it."""
        return self._held.stop.deleted.is_set()

    # -- the socket ---------------------------------------------------------------------------

    async def serve(self) -> None:
        chat, lease = self._held.chat, self._held.lease
        tasks = self._services.runtime.tasks
        self._services.coordination.pending.watch(chat, self._on_waiting)
        # Tools of this chat start only while the socket holds its lease (docs/adr/0032).
        self._services.tools.starts.hold(chat, lease)
        logger.info("live connected user=%s chat=%s", *chat)
        tasks.spawn(self._drive_turns(), name="live-reports")  # ends with the socket
        stops = tasks.spawn(self._stop_when_asked(), name="live-stop")
        lost = tasks.spawn(self._close_when_lease_lost(), name="live-lease")
        try:
            if self._refusal is None and await self._stored.starts_run():
                await self._run.start()  # else once the stored ones are answered
            await self._receive_frames()
        finally:
            lost.cancel()
            # Its own task: a server that cancels the handler still lets the run end and the
            # lease go (the application's background tasks are cancelled at shutdown).
            await asyncio.shield(self._end())
            stops.cancel()

    def _end(self) -> asyncio.Task[None]:
        """The socket's end, once: when it is gone, or as soon as the chat's delete closed it
        (a client that does not answer the close does not keep the chat)."""
        if self._ending is None:
            self._ending = self._services.runtime.tasks.spawn(self._shut_down(), name="live-end")
        return self._ending

    async def _receive_frames(self) -> None:
        io = self._io
        while (frame := await io.receive()) is not None:
            text, size = frame.text, frame.size
            if text is None:
                await io.control_error("binary frames are not accepted; send JSON text")
                continue
            if size > io.max_frame_bytes:
                await io.close(CLOSE_TOO_BIG, f"frames are limited to {io.max_frame_bytes} bytes")
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
        io = self._io
        try:
            raw = await run_bounded(size, read_frame, text, io.limits)
        except RequestError as exc:
            await io.control_error(exc.message)
            return
        if raw.get("type") == "message":
            await self._on_message(raw, size)
            return
        kind = raw.get("type")
        if isinstance(kind, str) and kind in CLIENT_FRAME_TYPES:
            # ai 7's transport, given a chatId of its own: it cannot read our answers.
            await io.close(
                CLOSE_BAD_REQUEST, "ai 7's WebSocketChatTransport connects without ?chatId="
            )
            return
        try:
            frame = parse_frame(raw, io.limits)
        except RequestError as exc:
            await io.control_error(exc.message)
            return
        if isinstance(frame, PingFrame):
            await io.send_text(json.dumps({"type": "pong", "timestamp": frame.timestamp}))
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
        outages = self._services.runtime.outages
        text = outages.interrupted(exc, f"a frame of chat={self.chat_id}")
        if self._turn is not None and await self._turn.fail_response(exc, error_text=text):
            return  # logged: as an outage, or by the converter under its error's reference
        if text is None:
            reference = new_error_reference()
            log_failure(reference, exc)
            text = f"the server could not handle that frame (ref {reference})"
        await self._io.control_error(text)

    async def _shut_down(self) -> None:
        """Disconnect: nobody here can answer any more. Approvals still waiting are handed
        over to the session, for any instance to answer (ADR 0047); browser calls end. With
        resumable streams the open response is written to its end first, for a new socket
        (of this instance or another) to replay; a stop meanwhile still ends it."""
        held = self._held
        try:
            await self._finish_open_response()
            await held.stop.close()
            await self._stored.leave(self._run, keep_paused=not self._deleted)
        finally:  # even when the server cancels the handler
            self._run.reports.close()  # the run has ended: nothing more to drive
            self._slot.release()
            self._services.tools.starts.let_go(held.chat, held.lease)
            await held.lease.release()
            logger.info("live disconnected user=%s chat=%s", *held.chat)

    async def _finish_open_response(self) -> None:
        turn = self._turn
        response = turn.response if turn is not None else None
        if turn is None or response is None:
            return
        if not self._deleted:  # (the chat's delete ends it at once)
            if not self._services.settings.resumable_streams:
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
        stop = self._held.stop
        while True:
            await stop.stopped.wait()
            stop.stopped.clear()
            deleted = self._deleted
            logger.info("live stop requested chat=%s deleted=%s", self.chat_id, deleted)
            if self._turn is not None:
                await self._turn.interrupt()  # the open response ends, with its [DONE]
            if deleted:
                await self._io.close_after_sends(CLOSE_CHAT_DELETED, DELETED_REASON)
                async with self._handling:  # a frame begun before the stop ends first
                    self._end()
                return

    async def _close_when_lease_lost(self) -> None:
        await self._held.lease.lost.wait()
        logger.warning("live lease lapsed chat=%s: closing the socket", self.chat_id)
        await self._io.close(CLOSE_INTERNAL, "the server lost this chat; connect again")

    # -- requests -----------------------------------------------------------------------------

    async def _on_message(self, frame: dict[str, Any], size: int) -> None:
        await self._stored.settled()  # an answer's run, and the live run's start after it
        if self._turn is not None and await self._turn.streaming():
            await self._io.control_error("a response is still streaming; send after its [DONE]")
            return
        runtime = self._services.runtime
        sink = self._restart.answer(self._io.send_text)  # a restart waits for its [DONE]
        try:
            if self._refusal is not None:  # before the request is read: nothing of it stays
                raise RequestError(501, self._refusal)
            # No response is open, so this socket holds no slot: take one for this response.
            self._slot.take()
            request = await self._parse_request(frame, size)
            if not (request.last_message.role == "assistant" and self._stored.waiting):
                request = await self._completed(request)
            if request.last_message.role == "assistant" and self._stored.waiting:
                await self._stored.answer(request, sink, self._run, on_end=self._slot.release)
            elif request.last_message.role == "assistant":
                await self._continue(request, sink)  # the open turn's answers: served
            else:
                runtime.drain.refuse_if_draining()  # no new turn while restarting
                await self._new_turn(request, sink)
        except RequestError as exc:
            logger.info("live request refused chat=%s reason=%s", self.chat_id, exc.message)
            runtime.telemetry.refused("live", exc.status)
            await self._io.send_text(format_event(ErrorChunk(error_text=exc.message)))
            await self._io.send_text(DONE)
            await self._restart.close_if_draining()  # connect again, to another instance
        finally:
            sink.end_unless_opened()  # refused: no response will end the answer
            if (self._turn is None or self._turn.response is None) and not self._stored.answering:
                self._slot.release()  # refused, or already ended

    async def _completed(self, request: ChatRequest) -> ChatRequest:
        """The request completed from the chat's record, under the socket's lease (a stored
        pause's answer is completed under its own); a store that is down is the request's
        refusal, saying to try again."""
        services = self._services
        try:
            return await services.responses.records.complete(
                self._held.chat, request, max_added_bytes=services.settings.max_added_bytes
            )
        except RequestError:
            raise
        except Exception as exc:
            refusal = services.runtime.outages.refusal(exc, f"a message of chat={self.chat_id}")
            if refusal is None:
                raise
            raise refusal from exc

    async def _parse_request(self, frame: dict[str, Any], size: int) -> ChatRequest:
        request = await run_bounded(size, parse_frame, frame, self._io.limits)
        assert isinstance(request, ChatRequest)
        if request.id != self.chat_id:
            raise RequestError(422, f"this socket serves chat {self.chat_id!r}, not {request.id!r}")
        return request

    async def _new_turn(self, request: ChatRequest, sink: AnswerSink) -> None:
        chat, runners = self._held.chat, self._services.runners
        last_sent = self._turn.user_message_id if self._turn is not None else None
        message = await plan_live_message(runners, chat, request, last_sent=last_sent)
        await self._stored.abandon(request)  # as POST /stream abandons them
        failure = await self._run.use()
        # Calls still waiting are abandoned: approvals are cancelled (the tools do not run)
        # and browser calls get a clear result, so the model's history stays valid.
        self._abandoning = True
        try:
            await self._services.coordination.pending.cancel(chat, dict(ABANDONED_RESULT))
            await self._run.wait_model_idle()
        finally:
            self._abandoning = False
        if message.rewind_before_event_id is not None:  # a regenerate or an edit
            failure = await rewind_live_chat(runners, self._run, chat, message)
        turn = self._turn = self._new_turn_state(request.last_message.id)
        await turn.open_response(
            new_message_id(),
            await self._delivery(request, sink),
            on_end=self._slot.release,
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
        turn = self._turn or self._new_turn_state(None)
        answers = await turn.plan_continuation(last)
        await turn.open_response(
            last.id,
            await self._delivery(request, sink),
            on_end=self._slot.release,
            continuation=True,
            denied=answers.denied,
            page_state=request.state,
        )
        await turn.apply_answers(answers)

    async def _delivery(self, request: ChatRequest, sink: AnswerSink) -> Delivery:
        """Where a response to ``request`` goes: the socket, the chat's chunk log (opened
        first: from then on the chat reads as answering), the chat's record."""
        responses, chat = self._services.responses, self._held.chat
        log = await responses.open_log(chat, self._held.lease)
        records = await responses.records.open("live", chat, request)
        window = self._services.settings.delta_coalescing_ms / 1000
        return Delivery(sink, log, records, coalescing_seconds=window)

    def _new_turn_state(self, user_message_id: str | None) -> LiveTurn:
        runtime = self._services.runtime
        return LiveTurn(
            self._held.chat,
            self._run,
            user_message_id=user_message_id,
            pending=self._services.coordination.pending,
            settings=self._services.settings,
            tasks=runtime.tasks,
        )

    async def _on_tool_result(self, frame: ToolResultFrame) -> None:
        """The predecessor's envelope for a browser tool's output; a refusal says why."""
        turn, call_id = self._turn, frame.tool_call_id
        why = "no turn is open" if turn is None else await turn.take_result(call_id, frame.result)
        if why is not None:
            await self._io.control_error(
                f"tool_result for {call_id[:64]!r} answers no waiting browser call ({why})"
            )

    # -- the run ------------------------------------------------------------------------------

    async def _drive_turns(self) -> None:
        """Hand what the run reports to the current turn, in order, until the socket ends."""
        reports = self._run.reports
        while (report := await reports.next()) is not None:
            try:
                await self._hand_on(report)
            except Exception:  # its failure could not be told: the next report still goes on
                logger.exception("live report not handled chat=%s", self.chat_id)

    async def _hand_on(self, report: RunReport) -> None:
        if isinstance(report, RunFailed):
            await self._on_run_failure(report.error)
            return
        turn = self._turn
        try:
            if isinstance(report, ToolData):
                if turn is not None:
                    await turn.tool_data(report.chunk, report.call_id)
                else:  # nothing asked yet: no message to put it in
                    logger.debug("tool data with no turn dropped chat=%s", self.chat_id)
            elif turn is not None:
                await turn.on_event(report)
        except Exception as exc:  # the run's event broke its turn: as the run failing
            await self._on_run_failure(exc)

    def _on_waiting(self, call: WaitingCall) -> None:
        """A call of the chat starts to wait for the client (``PendingCalls.watch``)."""
        if self._abandoning:
            # The abandoned turn asks after its cancellation: cancelled too, so that it ends.
            pending, chat = self._services.coordination.pending, self._held.chat
            self._services.runtime.tasks.spawn(
                pending.cancel(chat, dict(ABANDONED_RESULT)), name="live-abandon"
            )
        elif self._turn is not None:
            self._turn.on_waiting(call)

    async def _run_usable(self) -> bool:
        if self._refusal is not None:
            await self._io.control_error(self._refusal)
            return False
        failure = await self._run.use()
        if failure is not None:
            await self._on_run_failure(failure)
        return failure is None

    async def _on_run_failure(self, exc: Exception) -> None:
        outages = self._services.runtime.outages
        text = outages.interrupted(exc, f"the live run of chat={self.chat_id}")
        failed = self._turn is not None and await self._turn.fail_response(exc, error_text=text)
        if text is not None:  # a store's outage, logged: the client comes back after a pause
            await self._io.close(CLOSE_TRY_AGAIN_LATER, "the chat service is unavailable")
            return
        if not failed:
            logger.error("live run failed chat=%s", self.chat_id, exc_info=exc)
        await self._io.close(CLOSE_INTERNAL, "the live run failed")
