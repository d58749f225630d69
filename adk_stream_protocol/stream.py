"""``POST /stream``: the SSE transport. One request, one turn (``request_turns``), one
Server-Sent Events response.

The turn runs in its own task and hands framed events to the response body through a queue
(``QueueSink``); when the client goes away, the body tells the turn, which aborts its run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from adk_stream_protocol.bridge import bridge_of
from adk_stream_protocol.errors import RequestError
from adk_stream_protocol.identity import current_user
from adk_stream_protocol.limits import RequestLimits, run_bounded
from adk_stream_protocol.request_turns import RequestTurn, begin_request_turn
from adk_stream_protocol.settings import Settings
from adk_stream_protocol.sse import KEEP_ALIVE_COMMENT, SSE_HEADERS
from adk_stream_protocol.ui_messages import ChatRequest, parse_chat_body

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
                    (503, "The server is at its response limit; retry after Retry-After"),
                )
            },
        },
    }


@router.post("/stream", response_model=None, openapi_extra=_openapi())
async def stream(request: Request, user_id: Annotated[str, Depends(current_user)]) -> Response:
    bridge = bridge_of(request.app.state)
    slots = bridge.response_slots
    if not slots.try_acquire():
        exc = slots.busy_error()
        logger.warning("stream request shed: %s responses open", slots.in_use)
        return JSONResponse(
            {"detail": exc.message},
            status_code=exc.status,
            headers={"retry-after": str(slots.RETRY_AFTER_SECONDS)},
        )
    sink = QueueSink()
    try:
        chat = await read_chat_request(request, bridge.settings)
        turn = await begin_request_turn(bridge, user_id, chat, sink, on_end=slots.release)
    except BaseException as exc:
        slots.release()  # the turn never began, so it will not release it
        if not isinstance(exc, RequestError):
            raise
        logger.info("stream request refused status=%s reason=%s", exc.status, exc.message)
        return JSONResponse({"detail": exc.message}, status_code=exc.status)
    return EventSourceResponse(
        sink.body(turn),
        headers=dict(SSE_HEADERS),
        sep="\n",
        ping=bridge.settings.keep_alive_seconds,
        ping_message_factory=lambda: ServerSentEvent(comment=KEEP_ALIVE_COMMENT, sep="\n"),
    )


async def read_chat_request(request: Request, settings: Settings) -> ChatRequest:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise RequestError(415, "send the chat request as application/json")
    limits = RequestLimits.from_settings(settings)
    max_bytes = limits.max_request_bytes
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
    chat: ChatRequest = await run_bounded(len(body), parse_chat_body, bytes(body), limits)
    return chat


class QueueSink:
    """The turn's events, handed to the response body through a queue."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._closed = False

    async def send(self, events: Sequence[bytes]) -> None:
        for event in events:
            self._queue.put_nowait(event)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put_nowait(None)

    async def body(self, turn: RequestTurn) -> AsyncIterator[bytes]:
        # Bytes pass through sse-starlette untouched; it only adds the keep-alive comments.
        completed = False
        try:
            while (event := await self._queue.get()) is not None:
                yield event
            completed = True
        finally:
            if not completed:
                turn.client_left()
