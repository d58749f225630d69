"""``WS /live``: one socket, one ADK ``run_live``, many responses (docs/live-protocol.md).

A ``LiveConnection`` owns everything of one socket: the live request queue, the run task, the
approval queue, the browser calls waiting for results, and at most one open ``LiveResponse``.
Every ``message`` frame is a request and gets exactly one response, which ends with ``[DONE]``
when the model's turn completes, when it is interrupted, or when the turn pauses for the client
(an approval, a browser tool). Each response has its own converter, so ids, usage and
transcripts never leak into the next one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import re
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, WebSocket, WebSocketDisconnect
from fastapi.responses import PlainTextResponse
from google.adk.agents import LiveRequestQueue
from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.approvals import ApprovalQueue, BrowserCalls, PendingApproval
from adk_stream_protocol.chunks import BaseChunk, ErrorChunk
from adk_stream_protocol.converter import StreamProtocolConverter, only_what_pauses
from adk_stream_protocol.errors import RequestError, log_error, new_error_reference
from adk_stream_protocol.identity import current_user
from adk_stream_protocol.inputs import browser_result, user_content
from adk_stream_protocol.limits import RequestLimits, run_bounded
from adk_stream_protocol.live_frames import (
    AudioChunkFrame,
    AudioControlFrame,
    InterruptFrame,
    PingFrame,
    ToolResultFrame,
    parse_frame,
    read_frame,
)
from adk_stream_protocol.security import origin_allowed
from adk_stream_protocol.sessions import ChatLease
from adk_stream_protocol.sse import DONE, format_event
from adk_stream_protocol.turns import CANCELLED_RESULT, new_message_id
from adk_stream_protocol.ui_messages import (
    CHAT_ID_PATTERN,
    ChatRequest,
    DataUIPart,
    StepStartUIPart,
    UIMessage,
)

if TYPE_CHECKING:
    from adk_stream_protocol.app import Bridge

logger = logging.getLogger(__name__)

router = APIRouter()

# Close codes (4000-4999 are the application's own).
CLOSE_BAD_REQUEST = 4400
CLOSE_CHAT_BUSY = 4409
CLOSE_TOO_BIG = 1009
CLOSE_INTERNAL = 1011

# How long a new message waits for the model to close a turn it abandons.
_TURN_END_WAIT_SECONDS = 10.0


@router.websocket("/live")
async def live(websocket: WebSocket, user_id: Annotated[str, Depends(current_user)]) -> None:
    bridge: Bridge = websocket.app.state.bridge
    if not origin_allowed(websocket.headers, bridge.settings.cors_origins):
        # A page of another site: its socket would carry this user's cookies.
        logger.info("live handshake refused: origin not allowed")
        await _deny(websocket, 403, "this origin may not open /live; see ADK_STREAM_CORS_ORIGINS")
        return
    await websocket.accept()
    chat_id = websocket.query_params.get("chatId", "")
    if not re.fullmatch(CHAT_ID_PATTERN, chat_id):
        await websocket.close(CLOSE_BAD_REQUEST, "connect with ?chatId=<chat id>")
        return
    lease = await bridge.locks.try_acquire(user_id, chat_id)
    if lease is None:
        await websocket.close(CLOSE_CHAT_BUSY, "this chat already has a live connection")
        return
    connection = LiveConnection(bridge, websocket, user_id=user_id, chat_id=chat_id, lease=lease)
    await connection.serve()


async def _deny(websocket: WebSocket, status: int, reason: str) -> None:
    """Refuse a handshake with an HTTP status, where the server can send one."""
    try:
        await websocket.send_denial_response(PlainTextResponse(reason, status_code=status))
    except RuntimeError:  # no denial-response extension: a plain close (HTTP 403)
        await websocket.close(1008, reason)


class LiveResponse:
    """One response on the socket: its converter and what it is still waiting for."""

    def __init__(self, converter: StreamProtocolConverter, *, defer: bool) -> None:
        self.converter = converter
        # Collect instead of send, to hold back what the seed rule defers (docs/adr/0010).
        self.defer = defer
        self.buffer: list[BaseChunk] = []
        self.calls: set[str] = set()  # the tool calls of this response
        self.settled: set[str] = (
            set()
        )  # calls that ran (browser tools: returned nothing) or got a result
        self.announced: set[str] = set()  # approval ids whose requests were sent


class LiveConnection:
    def __init__(
        self,
        bridge: Bridge,
        websocket: WebSocket,
        *,
        user_id: str,
        chat_id: str,
        lease: ChatLease,
    ) -> None:
        self._bridge = bridge
        self._settings = bridge.settings
        self._ws = websocket
        self._limits = RequestLimits.from_settings(self._settings)
        self.user_id = user_id
        self.chat_id = chat_id
        self._lease = lease
        self.approvals = ApprovalQueue(
            self._settings.approval_timeout_seconds, self._on_approval_requested
        )
        self.browser = BrowserCalls(self._settings.approval_timeout_seconds, self._on_browser_wait)
        self._queue = LiveRequestQueue()
        self._run_task: asyncio.Task[None] | None = None
        self._response: LiveResponse | None = None
        # Events that arrived while no response was open, for the next continuation.
        self._backlog: list[Event] = []
        # Text and results held back by paused continuations, for the turn's final response.
        self._held: list[BaseChunk] = []
        # Live state of this connection's current turn.
        self._calls: dict[str, tuple[str, dict[str, Any]]] = {}  # call id -> (name, args)
        self._browser_calls: set[str] = set()  # waiting for the browser's result
        self._approved_browser_calls: set[str] = set()
        self._sent_user_messages: set[str] = set()
        self._discard_until_turn_end = False
        # Set between the live model's turns (after turn_complete), clear inside one.
        self._turn_idle = asyncio.Event()
        self._turn_idle.set()
        self._send_lock = asyncio.Lock()
        # Whether this socket holds one of the process's response slots (an open response).
        self._holds_slot = False

    # -- the socket ---------------------------------------------------------------------------

    async def serve(self) -> None:
        self._bridge.live_gates[(self.user_id, self.chat_id)] = self
        logger.info("live connected user=%s chat=%s", self.user_id, self.chat_id)
        try:
            await self._receive_frames()
        finally:
            await self._shut_down()

    async def _receive_frames(self) -> None:
        limit = self._settings.max_frame_bytes
        while True:
            try:
                message = await self._ws.receive()
            except WebSocketDisconnect:
                return
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                await self._control_error("binary frames are not accepted; send JSON text")
                continue
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > limit:
                await self._ws.close(CLOSE_TOO_BIG, f"frames are limited to {limit} bytes")
                return
            try:
                await self._on_frame(text, size)
            except Exception as exc:
                # A bug of ours must not kill the socket or leave a response half-open.
                await self._frame_failed(exc)

    async def _on_frame(self, text: str, size: int) -> None:
        try:
            raw = await run_bounded(size, read_frame, text, self._limits)
        except RequestError as exc:
            await self._control_error(exc.message)
            return
        if raw.get("type") == "message":
            await self._on_message(raw, size)
            return
        try:
            frame = parse_frame(raw, self._limits)
        except RequestError as exc:
            await self._control_error(exc.message)
            return
        if isinstance(frame, PingFrame):
            await self._send_json({"type": "pong", "timestamp": frame.timestamp})
        elif isinstance(frame, InterruptFrame):
            await self._interrupt()
        elif isinstance(frame, AudioChunkFrame):
            await self._on_audio(frame)
        elif isinstance(frame, AudioControlFrame):
            await self._on_audio_control(frame)
        elif isinstance(frame, ToolResultFrame):
            await self._on_tool_result(frame)

    async def _frame_failed(self, exc: Exception) -> None:
        """The open response ends with the error; with none open, a control frame says it."""
        if await self._fail_open_response(exc):
            return  # the converter logged it, under the reference its error chunk shows
        reference = new_error_reference()
        log_error(reference, type(exc).__name__, str(exc), exc)
        await self._control_error(f"the server could not handle that frame (ref {reference})")

    async def _shut_down(self) -> None:
        """Disconnect: nobody can answer any more. Nothing pending runs; nothing stays."""
        self.approvals.cancel_all()
        self.browser.cancel_all(CANCELLED_RESULT)
        self._queue.close()
        if self._run_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._run_task), 2)
            except (TimeoutError, Exception):
                self._run_task.cancel()
                await asyncio.gather(self._run_task, return_exceptions=True)
        self._bridge.live_gates.pop((self.user_id, self.chat_id), None)
        self._release_slot()
        self._lease.release()
        logger.info("live disconnected user=%s chat=%s", self.user_id, self.chat_id)

    # -- requests -----------------------------------------------------------------------------

    async def _on_message(self, frame: dict[str, Any], size: int) -> None:
        if self._response is not None:
            await self._control_error("a response is still streaming; send after its [DONE]")
            return
        try:
            # No response is open, so this socket holds no slot: take one for this response.
            if not self._bridge.response_slots.try_acquire():
                raise self._bridge.response_slots.busy_error()
            self._holds_slot = True
            request = await self._parse_request(frame, size)
            if request.last_message.role == "assistant":
                await self._continue(request)
            else:
                await self._new_turn(request)
        except RequestError as exc:
            logger.info("live request refused chat=%s reason=%s", self.chat_id, exc.message)
            await self._send_chunks([ErrorChunk(error_text=exc.message)])
            await self._send_text(DONE)
        finally:
            if self._response is None:  # refused, or already ended
                self._release_slot()

    async def _parse_request(self, frame: dict[str, Any], size: int) -> ChatRequest:
        request = await run_bounded(size, parse_frame, frame, self._limits)
        assert isinstance(request, ChatRequest)
        if request.id != self.chat_id:
            raise RequestError(422, f"this socket serves chat {self.chat_id!r}, not {request.id!r}")
        if request.trigger == "regenerate-message":
            raise RequestError(422, "regenerate is not available on /live; use POST /stream")
        return request

    async def _new_turn(self, request: ChatRequest) -> None:
        last = request.last_message
        if last.id in self._sent_user_messages or request.message_id is not None:
            raise RequestError(409, f"message {last.id!r} was already sent on this connection")
        content = None if _is_voice_turn(last) else user_content(last)
        await self._ensure_running()
        self._abandon_pending_calls()
        if not self._turn_idle.is_set():
            # The model's previous turn is still open (it waited for a tool or an approval, or
            # was interrupted): let it finish with the cancelled results first, so none of
            # its ending lands in the new response.
            self._discard_until_turn_end = True
            try:
                await asyncio.wait_for(self._turn_idle.wait(), _TURN_END_WAIT_SECONDS)
            except TimeoutError:
                logger.warning("live turn did not end chat=%s; continuing", self.chat_id)
        self._sent_user_messages.add(last.id)
        self._backlog.clear()  # leftovers of an earlier message cannot go into a new one
        self._held.clear()
        self._calls.clear()
        self._open_response(new_message_id())
        await self._emit(self._converter().start())
        if content is not None:
            self._turn_idle.clear()  # the model's turn has begun; it ends with turn_complete
            self._queue.send_content(content)
        logger.info("live turn chat=%s voice=%s", self.chat_id, content is None)

    async def _continue(self, request: ChatRequest) -> None:
        """Approvals and browser results for the assistant message sent last."""
        last = request.last_message
        decisions: list[tuple[PendingApproval, bool]] = []
        outputs: dict[str, dict[str, Any]] = {}
        denied: set[str] = set()
        rearm: list[str] = []
        for part in last.tool_parts():
            approval = part.approval
            has_output = part.state in ("output-available", "output-error")
            if approval is not None and approval.approved is not None:
                pending = self.approvals.find(approval.id)
                if pending is None and not self.approvals.was_decided(approval.id):
                    raise RequestError(409, f"approval {approval.id!r} answers no pending approval")
                if pending is not None:  # else answered before, or timed out: acts once
                    if pending.call_id != part.tool_call_id:
                        raise RequestError(409, f"approval {approval.id!r} is for another call")
                    decisions.append((pending, approval.approved))
                    if not approval.approved:
                        denied.add(part.tool_call_id)
                    elif part.tool_call_id in self._browser_calls and not has_output:
                        rearm.append(part.tool_call_id)
            if has_output and part.tool_call_id in self._browser_calls:
                outputs[part.tool_call_id] = browser_result(part)
            elif has_output and part.tool_call_id not in self._calls:
                raise RequestError(409, f"tool output for {part.tool_call_id!r} answers no call")
        if not decisions and not outputs and not self._backlog:
            raise RequestError(409, "this message answers no pending approval or tool call")
        self._open_response(last.id, denied, continuation=True)
        await self._emit(self._converter().start())
        backlog, self._backlog = self._backlog, []
        for event in backlog:
            await self._on_event(event)
        # Approved browser tools without their result: the browser runs them now.
        self._approved_browser_calls.update(c for c in rearm if c not in outputs)
        for pending, approved in decisions:
            self.approvals.decide(pending.approval_id, approved)
        for call_id, result in outputs.items():
            self._deliver(call_id, result)

    def _deliver(self, call_id: str, result: dict[str, Any]) -> None:
        self._browser_calls.discard(call_id)
        self.browser.deliver(call_id, result)

    def _abandon_pending_calls(self) -> None:
        """A new message while calls wait: approvals are cancelled (the tools do not run) and
        browser calls get a clear result, so the model's history stays valid."""
        self.approvals.cancel_all()
        self.browser.cancel_all(CANCELLED_RESULT)
        self._browser_calls.clear()

    async def _interrupt(self) -> None:
        response = self._response
        if response is None:
            return
        logger.info("live interrupt chat=%s", self.chat_id)
        # Only a model turn under way ends with a turn_complete to wait for: a voice turn
        # stopped before any audio has none, and discarding would swallow the next turn.
        self._discard_until_turn_end = not self._turn_idle.is_set()
        await self._end_response(reason="other")

    async def _on_audio(self, frame: AudioChunkFrame) -> None:
        try:
            data = base64.b64decode(frame.chunk, validate=True)
        except (binascii.Error, ValueError):
            await self._control_error("audio_chunk needs base64 PCM16 in `chunk`")
            return
        await self._ensure_running()
        rate = frame.sample_rate
        self._queue.send_realtime(types.Blob(mime_type=f"audio/pcm;rate={rate}", data=data))

    async def _on_audio_control(self, frame: AudioControlFrame) -> None:
        await self._ensure_running()
        if frame.action == "start":
            self._queue.send_activity_start()
        else:
            self._queue.send_activity_end()

    async def _on_tool_result(self, frame: ToolResultFrame) -> None:
        """The predecessor's envelope for a browser tool's output."""
        call_id, result = frame.tool_call_id, frame.result
        if call_id not in self._browser_calls:
            await self._control_error(
                f"tool_result for {call_id[:64]!r} answers no waiting browser call"
            )
            return
        self._deliver(call_id, result if isinstance(result, dict) else {"result": result})

    # -- the live run -------------------------------------------------------------------------

    async def _ensure_running(self) -> None:
        """Start the live run on first use: the session exists and holds the history by then,
        and the live model receives that history when it connects."""
        if self._run_task is None:
            await self._bridge.sessions.open(self.user_id, self.chat_id)
            self._run_task = self._bridge.spawn(self._run(), name=f"live:{self.chat_id}")

    async def _run(self) -> None:
        run_config = self._bridge.live_run_config()
        try:
            async for event in self._bridge.live_runner.run_live(
                user_id=self.user_id,
                session_id=self.chat_id,
                live_request_queue=self._queue,
                run_config=run_config,
            ):
                await self._on_event(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._fail(exc)

    async def _fail(self, exc: Exception) -> None:
        if not await self._fail_open_response(exc):
            logger.exception("live run failed chat=%s", self.chat_id)
        await self._ws.close(CLOSE_INTERNAL, "the live run failed")

    async def _fail_open_response(self, exc: Exception) -> bool:
        """End the open response with an ``error`` chunk and ``[DONE]``; False if none is."""
        response = self._response
        if response is None:
            return False
        self._close_response(response)
        await self._send_chunks([*response.buffer, *response.converter.fail(exc)])
        await self._send_text(DONE)
        return True

    async def _on_event(self, event: Event) -> None:
        if event.turn_complete:
            self._turn_idle.set()
        else:
            self._turn_idle.clear()
        if self._discard_until_turn_end:
            # An interrupted turn still ends with turn_complete (after `interrupted`).
            if event.turn_complete:
                self._discard_until_turn_end = False
            return
        response = self._response
        if response is None:
            self._backlog.append(event)
            return
        self._track_calls(event, response)
        await self._emit(response.converter.convert(event))
        if event.turn_complete:
            await self._end_response()
        elif event.interrupted:
            self._discard_until_turn_end = not event.turn_complete
            await self._end_response(reason="other")
        else:
            await self._end_if_paused()

    def _track_calls(self, event: Event, response: LiveResponse) -> None:
        if event.partial:
            return
        long_running = set(event.long_running_tool_ids or ())
        for call in event.get_function_calls():
            if not call.id:
                continue
            self._calls[call.id] = (call.name or "", dict(call.args or {}))
            response.calls.add(call.id)
            if call.id in long_running:
                self._browser_calls.add(call.id)
        for result in event.get_function_responses():
            if result.id:
                response.settled.add(result.id)

    async def _end_if_paused(self) -> None:
        """End the response when its turn waits only for the client."""
        response = self._response
        if response is None or not response.converter.awaiting_client:
            return
        pending = self.approvals.pending()
        if any(p.approval_id not in response.announced for p in pending):
            return  # an approval request is about to be sent in this response
        waiting = {p.call_id for p in pending} | self.browser.waiting()
        if response.calls - response.settled - waiting:
            return  # a tool of this step has not run yet: its result or request belongs here
        await self._end_response()

    async def _end_response(self, reason: str | None = None) -> None:
        response = self._response
        if response is None:
            return
        await self._emit(response.converter.finish(reason))  # type: ignore[arg-type]
        self._close_response(response)
        if response.defer:
            converter = response.converter
            if converter.awaiting_client and not converter.errored:
                kept = only_what_pauses(response.buffer)
                kept_ids = {id(c) for c in kept}
                self._held.extend(c for c in response.buffer if id(c) not in kept_ids)
                await self._send_chunks(kept)
            else:  # the final response delivers what earlier ones held back, first
                start, *rest = response.buffer
                held, self._held = self._held, []
                await self._send_chunks([start, *held, *rest])
        await self._send_text(DONE)

    # called by the approval plugin (same event loop) --------------------------------------------

    def _on_approval_requested(self, pending: PendingApproval) -> None:
        self._bridge.spawn(self._announce_approval(pending), name=f"live-approval:{self.chat_id}")

    async def _announce_approval(self, pending: PendingApproval) -> None:
        # The tool part must be in the message before its approval request.
        for _ in range(200):
            if pending.call_id in self._calls or self._response is None:
                break
            await asyncio.sleep(0.01)
        response = self._response
        if response is None:
            logger.info("approval %s requested with no open response", pending.approval_id)
            return
        await self._emit(response.converter.approval_request(pending.approval_id, pending.call_id))
        response.announced.add(pending.approval_id)
        await self._end_if_paused()

    def _on_browser_wait(self, call_id: str) -> None:
        self._bridge.spawn(self._browser_waits(call_id), name=f"live-browser:{self.chat_id}")

    async def _browser_waits(self, call_id: str) -> None:
        response = self._response
        if response is None:
            return
        if call_id in self._approved_browser_calls:
            # Approved without its result: hand the call back so the browser runs it now
            # (docs/adr/0011).
            self._approved_browser_calls.discard(call_id)
            name, args = self._calls[call_id]
            await self._emit(response.converter.rearm(call_id, name, args))
        await self._end_if_paused()

    # -- sending ------------------------------------------------------------------------------

    def _open_response(
        self, message_id: str, denied: set[str] | None = None, *, continuation: bool = False
    ) -> None:
        converter = StreamProtocolConverter(
            message_id=message_id,
            error_detail=self._settings.error_detail,
            denied_tool_call_ids=denied or (),
            # A new message holds no earlier calls; a continuation holds this turn's calls.
            known_tool_call_ids=set(self._calls) if continuation else set(),
        )
        defer = continuation and not self._settings.stream_intermediate_results
        self._response = LiveResponse(converter, defer=defer)

    def _close_response(self, response: LiveResponse) -> None:
        if self._response is response:
            self._response = None
            self._release_slot()

    def _release_slot(self) -> None:
        """Give back the process-wide response slot the open response holds."""
        if self._holds_slot:
            self._holds_slot = False
            self._bridge.response_slots.release()

    def _converter(self) -> StreamProtocolConverter:
        assert self._response is not None
        return self._response.converter

    async def _emit(self, chunks: list[BaseChunk]) -> None:
        """Chunks of the open response: sent now, or collected by a deferring response."""
        response = self._response
        if response is not None and response.defer:
            response.buffer.extend(chunks)
        else:
            await self._send_chunks(chunks)

    async def _send_chunks(self, chunks: list[BaseChunk]) -> None:
        for chunk in chunks:
            await self._send_text(format_event(chunk))

    async def _send_text(self, text: str) -> None:
        async with self._send_lock:
            try:
                await self._ws.send_text(text)
            except (WebSocketDisconnect, RuntimeError):
                logger.debug("live send after disconnect chat=%s", self.chat_id)

    async def _send_json(self, payload: dict[str, Any]) -> None:
        await self._send_text(json.dumps(payload))

    async def _control_error(self, message: str) -> None:
        logger.info("live frame refused chat=%s reason=%s", self.chat_id, message)
        await self._send_json({"type": "error", "message": message})


def _is_voice_turn(message: UIMessage) -> bool:
    """A user message with nothing to say in text: the words come as audio frames."""
    return bool(message.parts) and all(
        isinstance(p, DataUIPart | StepStartUIPart) for p in message.parts
    )
