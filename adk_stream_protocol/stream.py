"""``POST /stream``: one request, one ADK ``run_async``, one SSE response.

The agent runs in its own task and hands chunks to the response through a queue. When the
client goes away (``stop()``, a closed tab) the response sets ADK's abort signal; the run
then ends on its own, sealing the invocation in the session, instead of being cancelled in
the middle of a write.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.events import Event
from sse_starlette import EventSourceResponse, ServerSentEvent

from adk_stream_protocol.chunks import BaseChunk
from adk_stream_protocol.converter import StreamProtocolConverter, only_what_pauses
from adk_stream_protocol.errors import RequestError
from adk_stream_protocol.history import (
    ASSISTANT_MESSAGE_ID_KEY,
    DEFERRED_KEY,
    RESPONSE_ID_KEY,
    USER_MESSAGE_ID_KEY,
)
from adk_stream_protocol.identity import current_user
from adk_stream_protocol.limits import RequestLimits, run_bounded
from adk_stream_protocol.sessions import ChatLease
from adk_stream_protocol.settings import Settings
from adk_stream_protocol.sse import DONE, KEEP_ALIVE_COMMENT, SSE_HEADERS, encode_event
from adk_stream_protocol.turns import TurnPlan
from adk_stream_protocol.ui_messages import ChatRequest, parse_chat_body

if TYPE_CHECKING:
    from adk_stream_protocol.app import Bridge

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
    bridge: Bridge = request.app.state.bridge
    slots = bridge.response_slots
    if not slots.try_acquire():
        exc = slots.busy_error()
        logger.warning("stream request shed: %s responses open", slots.in_use)
        return JSONResponse(
            {"detail": exc.message},
            status_code=exc.status,
            headers={"retry-after": str(slots.RETRY_AFTER_SECONDS)},
        )
    try:
        chat = await read_chat_request(request, bridge.settings)
        turn = await bridge.prepare_turn(user_id, chat, on_end=slots.release)
    except BaseException as exc:
        slots.release()  # the turn never began, so it will not release it
        if not isinstance(exc, RequestError):
            raise
        logger.info("stream request refused status=%s reason=%s", exc.status, exc.message)
        return JSONResponse({"detail": exc.message}, status_code=exc.status)
    return EventSourceResponse(
        turn.sse_events(),
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


class StreamTurn:
    """One ``/stream`` response: the ADK run (producer task) and the SSE body (consumer)."""

    def __init__(
        self,
        bridge: Bridge,
        *,
        user_id: str,
        chat_id: str,
        plan: TurnPlan,
        lease: ChatLease,
        on_end: Callable[[], None],
    ) -> None:
        self._bridge = bridge
        self._on_end = on_end
        self._user_id = user_id
        self._chat_id = chat_id
        self._plan = plan
        self._lease = lease
        self._converter = StreamProtocolConverter(
            message_id=plan.message_id,
            error_detail=bridge.settings.error_detail,
            denied_tool_call_ids=plan.denied_tool_call_ids,
        )
        self._queue: asyncio.Queue[BaseChunk | None] = asyncio.Queue()
        self._abort = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def begin(self) -> None:
        self._task = self._bridge.spawn(self._run(), name=f"stream:{self._chat_id}")

    async def sse_events(self) -> AsyncIterator[bytes]:
        # Bytes pass through sse-starlette untouched; it only adds the keep-alive comments.
        completed = False
        try:
            while (chunk := await self._queue.get()) is not None:
                yield encode_event(chunk)
            yield DONE.encode()
            completed = True
        finally:
            if not completed:
                logger.info(
                    "client left user=%s chat=%s: aborting the run", self._user_id, self._chat_id
                )
                self._abort.set()

    async def _run(self) -> None:
        converter = self._converter
        plan = self._plan
        # A deferring response collects everything and decides at the end what to send:
        # only what pauses it, if it pauses for the client again (docs/adr/0010).
        held: list[BaseChunk] = []
        emit = held.extend if plan.defer else self._put
        self._put(converter.start())
        try:
            emit(converter.replay(plan.replay))
            if plan.new_message is None:
                for call in plan.rearmed_calls:
                    emit(converter.rearm(call.call_id, call.tool_name, call.args))
            else:
                async with aclosing(self._events()) as events:
                    async for event in events:
                        emit(converter.convert(event))
        except Exception as exc:
            emit(converter.fail(exc))
        else:
            emit(converter.finish())
        finally:
            if plan.defer:
                paused = converter.awaiting_client and not converter.errored
                self._put(only_what_pauses(held) if paused else held)
            self._queue.put_nowait(None)
            self._lease.release()
            self._on_end()

    def _events(self) -> AsyncGenerator[Event, None]:
        plan = self._plan
        stamps: dict[str, object] = {RESPONSE_ID_KEY: uuid.uuid4().hex}
        if plan.user_message_id is not None:
            stamps[USER_MESSAGE_ID_KEY] = plan.user_message_id
        stamps[ASSISTANT_MESSAGE_ID_KEY] = plan.message_id
        if plan.defer:
            stamps[DEFERRED_KEY] = True
        assert plan.new_message is not None
        return self._bridge.runner.run_async(
            user_id=self._user_id,
            session_id=self._chat_id,
            new_message=plan.new_message,
            run_config=RunConfig(streaming_mode=StreamingMode.SSE, custom_metadata=stamps),
            abort_signal=self._abort,
        )

    def _put(self, chunks: list[BaseChunk]) -> None:
        for chunk in chunks:
            self._queue.put_nowait(chunk)
