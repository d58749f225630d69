"""The frames a ``/live`` client sends (docs/live-protocol.md), one typed model each, and the
codes the server closes a socket with.

A frame is read as untrusted JSON under the same limits as a ``POST /stream`` body, then
validated strictly by its ``type``. Anything malformed becomes a ``RequestError`` whose message
names the problem; the socket answers it and stays usable.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal, TypeAlias

from google.adk.agents import LiveRequestQueue
from google.genai import types
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic.alias_generators import to_camel
from starlette.websockets import WebSocket, WebSocketDisconnect

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.limits import RequestLimits, read_json
from adk_stream_protocol.protocol.chunks import UnknownJson
from adk_stream_protocol.protocol.ui_messages import ChatRequest, parse_chat_request

# Close codes (4000-4999 are the application's own).
CLOSE_BAD_REQUEST = 4400
CLOSE_CHAT_BUSY = 4409
CLOSE_CHAT_DELETED = 4410  # as HTTP 410 Gone: the chat was deleted (DELETE /chats/{chatId})
DELETED_REASON = "this chat was deleted"
CLOSE_TOO_BIG = 1009
CLOSE_INTERNAL = 1011
CLOSE_RESTART = 1012  # Service Restart: connect again, to another instance
CLOSE_TRY_AGAIN_LATER = 1013  # a store is unavailable: reconnect after a pause

# Keys of the envelope around a `message` frame's chat request, accepted and ignored.
_ENVELOPE_KEYS = frozenset({"type", "version", "timestamp"})


class _Frame(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", strict=True
    )


class PingFrame(_Frame):
    type: Literal["ping"]
    timestamp: UnknownJson = None


class InterruptFrame(_Frame):
    type: Literal["interrupt"]
    reason: str | None = None


class AudioChunkFrame(_Frame):
    type: Literal["audio_chunk"]
    chunk: str  # base64 PCM16 LE mono
    # The rates a microphone and the live models use; anything else is a client bug.
    sample_rate: Annotated[int, Field(ge=8_000, le=48_000)] = 16_000

    @field_validator("chunk")
    @classmethod
    def _base64(cls, chunk: str) -> str:
        try:
            base64.b64decode(chunk, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("not base64 (PCM16 audio)") from None
        return chunk

    def send_to(self, queue: LiveRequestQueue) -> None:
        data = base64.b64decode(self.chunk)
        queue.send_realtime(types.Blob(mime_type=f"audio/pcm;rate={self.sample_rate}", data=data))


class AudioControlFrame(_Frame):
    type: Literal["audio_control"]
    action: Literal["start", "stop"]

    def send_to(self, queue: LiveRequestQueue) -> None:
        """The start or end of the user's speech."""
        if self.action == "start":
            queue.send_activity_start()
        else:
            queue.send_activity_end()


class ToolResultFrame(_Frame):
    """The predecessor's envelope for a browser tool's output."""

    type: Literal["tool_result"]
    tool_call_id: str
    result: UnknownJson = None


ControlFrame: TypeAlias = Annotated[
    PingFrame | InterruptFrame | AudioChunkFrame | AudioControlFrame | ToolResultFrame,
    Field(discriminator="type"),
]
_CONTROL_FRAME: TypeAdapter[ControlFrame] = TypeAdapter(ControlFrame)
_CONTROL_TYPES = frozenset({"ping", "interrupt", "audio_chunk", "audio_control", "tool_result"})

LiveFrame: TypeAlias = ChatRequest | ControlFrame


def read_frame(text: str, limits: RequestLimits) -> dict[str, Any]:
    """A frame's JSON object, before its type is known."""
    frame = read_json(text, limits.max_json_depth)
    if not isinstance(frame, dict):
        raise RequestError(422, "a frame must be a JSON object with a type")
    return frame


def parse_frame(frame: dict[str, Any], limits: RequestLimits) -> LiveFrame:
    """One client frame: a ``message`` (its chat request) or a control frame."""
    kind = frame.get("type")
    if kind == "message":
        body = {k: v for k, v in frame.items() if k not in _ENVELOPE_KEYS}
        return parse_chat_request(body, limits)
    if not isinstance(kind, str) or kind not in _CONTROL_TYPES:
        raise RequestError(422, f"unknown frame type {shown(kind)}")
    try:
        return _CONTROL_FRAME.validate_python(frame)
    except ValidationError as exc:
        raise invalid_frame(kind, exc) from None


def invalid_frame(kind: str, exc: ValidationError) -> RequestError:
    """A frame of a known type that fails its model, with the fields at fault."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in error['loc'][1:]) or 'frame'}: "
        f"{error['msg'].removeprefix('Value error, ')}"
        for error in exc.errors(include_url=False, include_input=False)
    )
    return RequestError(422, f"invalid {kind} frame: {problems}")


class Received:
    """One frame from a ``/live`` client: its text (None for a binary frame) and its size."""

    def __init__(self, text: str | None) -> None:
        self.text = text
        self.size = len(text.encode("utf-8", "surrogatepass")) if text is not None else 0


async def receive(websocket: WebSocket) -> Received | None:
    """The client's next frame; None once it has gone."""
    try:
        message = await websocket.receive()
    except WebSocketDisconnect:
        return None
    if message["type"] == "websocket.disconnect":
        return None
    return Received(message.get("text"))


def shown(value: Any) -> str:
    """A client's value in a message, cut short: it may be anything."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class SocketSink:
    """A ``/live`` response's ``ChunkSink``: its events, one WebSocket text frame each."""

    def __init__(self, send_text: Callable[[str], Awaitable[None]]) -> None:
        self._send_text = send_text

    async def send(self, events: Sequence[bytes]) -> None:
        for event in events:
            await self._send_text(event.decode())

    async def close(self) -> None:
        return None  # the socket outlives its responses
