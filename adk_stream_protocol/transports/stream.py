"""``POST /stream``: the SSE transport. One request, one turn (``request_turns``), one
Server-Sent Events response.

The turn runs in its own task and hands framed events to the response body through a queue
(``QueueSink``); when the client goes away, the body tells the turn, which aborts its run
(unless streams are resumable).

The AI SDK's resume convention lives here too: ``GET /stream/{chatId}/stream`` replays the
chat's active response from the chunk log and follows it to its end (204 when there is
none), and ``DELETE`` on the same path stops it, on whichever instance runs it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.identity import current_user
from adk_stream_protocol.foundation.limits import RequestLimits, ResponseSlots, run_bounded
from adk_stream_protocol.foundation.outages import REDIS
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.sse import KEEP_ALIVE, SSE_HEADERS
from adk_stream_protocol.protocol.ui_messages import CHAT_ID_PATTERN, ChatRequest, parse_chat_body
from adk_stream_protocol.transports.sse_response import EventStreamResponse
from adk_stream_protocol.turns.bridge import Bridge, bridge_of
from adk_stream_protocol.turns.openings import Client
from adk_stream_protocol.turns.request_turns import RequestTurn, begin_request_turn
from adk_stream_protocol.turns.resumed_turns import begin_resumed_turn

logger = logging.getLogger(__name__)

router = APIRouter()


def _inlined(schema: Any, defs: dict[str, Any]) -> Any:
    """The schema with its local ``$ref``s replaced by what they name (no type refers to
    itself), so it can stand inline in the OpenAPI document."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inlined(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inlined(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inlined(item, defs) for item in schema]
    return schema


def _openapi() -> dict[str, Any]:
    """The body is read by hand (size, time and depth limits come first), so FastAPI cannot
    derive its schema: it is declared here for /docs and for the schema-driven fuzz tests."""
    schema = ChatRequest.model_json_schema(by_alias=True)
    error = {"content": {"application/json": {"schema": {"type": "object"}}}}
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _inlined(schema, schema.get("$defs", {}))}},
        },
        "responses": {
            "200": {
                "description": "The UI message stream (Server-Sent Events)",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            **{
                str(status): {"description": description, **error}
                for status, description in (
                    (408, "The body arrived too slowly"),
                    (409, "The chat is busy, or the request conflicts with its history"),
                    (413, "Over a request limit"),
                    (415, "Not JSON"),
                    (422, "Not a valid chat request"),
                    (
                        503,
                        "The server is at its response limit, or a store it needs is "
                        "unavailable; retry after Retry-After",
                    ),
                )
            },
        },
    }


@router.post("/stream", response_model=None, openapi_extra=_openapi())
async def stream(request: Request, user_id: Annotated[str, Depends(current_user)]) -> Response:
    bridge = bridge_of(request.app.state)
    if bridge.drain.draining:  # a restart: another instance answers
        return _draining(bridge)
    slots = bridge.response_slots
    if not slots.try_acquire():
        logger.warning("stream request shed: %s responses open", slots.in_use)
        bridge.telemetry.refused("stream", 503)
        return _refused(slots.busy_error())
    sink = QueueSink()
    try:
        chat = await read_chat_request(request, bridge.settings)
        turn = await begin_request_turn(
            bridge.turns,
            user_id,
            chat,
            sink,
            client=Client("stream", chat.ai_sdk),
            on_end=slots.release,
        )
    except BaseException as exc:
        slots.release()  # the turn never began, so it will not release it
        if not isinstance(exc, RequestError):
            raise
        logger.info("stream request refused status=%s reason=%s", exc.status, exc.message)
        bridge.telemetry.refused("stream", exc.status)
        return _refused(exc)
    return _event_stream(sink.body(turn), bridge.settings)


def _event_stream(body: AsyncIterator[bytes], settings: Settings) -> EventStreamResponse:
    """Framed events as an SSE response, with keep-alive comments while they pause."""
    return EventStreamResponse(
        body,
        headers=SSE_HEADERS,
        keep_alive_seconds=settings.keep_alive_seconds,
        keep_alive=KEEP_ALIVE,
    )


def _chat_key(user_id: str, chat_id: str) -> ChatKey:
    if not re.fullmatch(CHAT_ID_PATTERN, chat_id):
        raise RequestError(422, "not a chat id: letters, digits and _.:- (at most 128)")
    return (user_id, chat_id)


def _draining(bridge: Bridge) -> JSONResponse:
    bridge.telemetry.refused("stream", 503)
    return _refused(bridge.drain.refusal())


def _refused(exc: RequestError) -> JSONResponse:
    headers = {"retry-after": str(exc.retry_after)} if exc.retry_after is not None else None
    return JSONResponse({"detail": exc.message}, status_code=exc.status, headers=headers)


_JSON_ERROR: dict[str, Any] = {"content": {"application/json": {"schema": {"type": "object"}}}}
_NOT_A_CHAT_ID: dict[int | str, dict[str, Any]] = {
    422: {"description": "Not a chat id", **_JSON_ERROR}
}


@router.get(
    "/stream/{chat_id}/stream",
    response_model=None,
    responses={
        200: {
            "description": "The active response, replayed from its start, then live",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        204: {"description": "The chat has no active response"},
        **_NOT_A_CHAT_ID,
        503: {
            "description": "The server is at its response limit, or Redis is unavailable",
            **_JSON_ERROR,
        },
    },
)
async def resume_stream(
    chat_id: str, request: Request, user_id: Annotated[str, Depends(current_user)]
) -> Response:
    """The chat's active response from its ``start``, then live to ``[DONE]``; 204 when the
    chat has none (also for a chat of another user, or one never seen)."""
    bridge = bridge_of(request.app.state)
    try:
        chat = _chat_key(user_id, chat_id)
    except RequestError as exc:
        return _refused(exc)
    if bridge.drain.draining:
        return _draining(bridge)
    slots = bridge.response_slots
    if not slots.try_acquire():
        return _refused(slots.busy_error())
    try:
        events = await bridge.coordination.chunk_logs.follow(chat)
    except BaseException as exc:
        slots.release()
        refusal = bridge.outages.refusal(exc, f"resuming chat={chat_id}")
        if refusal is None:
            raise
        bridge.telemetry.refused("stream", refusal.status)
        return _refused(refusal)
    bridge.outages.up(REDIS)
    if events is None:
        return await _finish_cut_turn(bridge, chat, slots)
    logger.info("stream resumed chat=%s", chat_id)
    # A restart ends a follower with an `error` and [DONE]: resume again elsewhere.
    return _event_stream(_followed(bridge.drain.follow(events), slots.release), bridge.settings)


async def _finish_cut_turn(bridge: Bridge, chat: ChatKey, slots: ResponseSlots) -> Response:
    """No response runs: a turn a crash cut short is finished as this response; otherwise there
    is nothing to resume (204). While the store cannot say, there is nothing to resume either:
    a page resuming on mount shows no error, and the turn is finished by the next request
    instead."""
    sink = QueueSink()
    try:
        turn = await begin_resumed_turn(bridge.turns, chat, sink, on_end=slots.release)
    except BaseException as exc:
        slots.release()
        if bridge.outages.refusal(exc, f"looking for a cut turn of chat={chat[1]}") is None:
            raise
        return Response(status_code=204)
    if turn is None:
        slots.release()
        return Response(status_code=204)
    return _event_stream(sink.body(turn), bridge.settings)


async def _followed(
    events: AsyncGenerator[bytes, None], release: Callable[[], None]
) -> AsyncIterator[bytes]:
    try:
        async for event in events:
            yield event
    finally:
        release()
        await events.aclose()


@router.delete(
    "/stream/{chat_id}/stream",
    status_code=204,
    response_model=None,
    responses={
        204: {"description": "Stopped, or nothing to stop"},
        **_NOT_A_CHAT_ID,
        503: {"description": "Redis is unavailable: the stop cannot be sent", **_JSON_ERROR},
    },
)
async def stop_stream(
    chat_id: str, request: Request, user_id: Annotated[str, Depends(current_user)]
) -> Response:
    """Stop the chat's active response wherever it runs; 204 whether or not one was running
    (a chat of another user looks like a chat with nothing to stop)."""
    bridge = bridge_of(request.app.state)
    try:
        chat = _chat_key(user_id, chat_id)
    except RequestError as exc:
        return _refused(exc)
    try:
        await bridge.coordination.stops.stop(chat)
    except Exception as exc:
        refusal = bridge.outages.refusal(exc, f"stopping chat={chat_id}")
        if refusal is None:
            raise
        return _refused(refusal)
    logger.info("stop requested chat=%s", chat_id)
    return Response(status_code=204)


# A method neither route takes is answered here: otherwise the router would answer 405 with
# only the first route's method in `Allow`.
@router.api_route(
    "/stream/{chat_id}/stream",
    methods=["HEAD", "OPTIONS", "PATCH", "POST", "PUT"],
    include_in_schema=False,
)
async def chat_stream_other_methods() -> Response:
    return JSONResponse(
        {"detail": "Method Not Allowed"}, status_code=405, headers={"allow": "GET, DELETE"}
    )


async def read_chat_request(request: Request, settings: Settings) -> ChatRequest:
    body = await read_body(request, settings)
    limits = RequestLimits.from_settings(settings)
    chat: ChatRequest = await run_bounded(len(body), parse_chat_body, body, limits)
    return chat


async def read_body(request: Request, settings: Settings) -> bytes:
    """A JSON request's body, within the size and time limits (413, 408), else 415."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise RequestError(415, "send the request as application/json")
    max_bytes = RequestLimits.from_settings(settings).max_request_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise RequestError(413, f"the request body is larger than {max_bytes} bytes")
    body = bytearray()
    try:
        async with asyncio.timeout(settings.request_body_timeout_seconds):
            async for piece in request.stream():
                body.extend(piece)
                if len(body) > max_bytes:
                    raise RequestError(413, f"the request body is larger than {max_bytes} bytes")
    except TimeoutError:
        raise RequestError(
            408,
            f"the request body did not arrive within {settings.request_body_timeout_seconds:g} s",
        ) from None
    return bytes(body)


class QueueSink:
    """The turn's events, handed to the response body through a buffer: what was sent while
    the body wrote goes out as one write, so a delivery's events go out together and a slow
    reader gets fewer, larger writes. (An ``asyncio.Queue`` would hand them over one by one.)"""

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        self._reader: asyncio.Future[None] | None = None  # the body, waiting for events
        self._closed = False
        self._reader_gone = False  # nobody reads the buffer any more (a resumable response)

    async def send(self, events: Sequence[bytes]) -> None:
        self.send_now(events)

    def send_now(self, events: Sequence[bytes]) -> None:
        if self._reader_gone or self._closed:
            return
        self._pending.extend(events)
        self._wake_reader()

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._wake_reader()

    def _wake_reader(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)

    async def body(self, turn: RequestTurn) -> AsyncIterator[bytes]:
        # The bytes go to the socket as they are (EventStreamResponse adds only keep-alives).
        completed = False
        try:
            while True:
                if self._pending:
                    events = b"".join(self._pending)
                    self._pending.clear()
                    yield events
                elif self._closed:
                    break
                else:
                    self._reader = asyncio.get_running_loop().create_future()
                    await self._reader
            completed = True
        finally:
            if not completed:
                self._reader_gone = True
                turn.client_left()
