"""The frames of ai 7's ``WebSocketChatTransport`` protocol, one typed model each
(docs/live-protocol.md, "The ai 7 protocol").

Client frames name their request (``requestId``) and, except ``abort``, their chat (``id``);
server frames answer one request each. A server frame is built here as JSON text; a
``chunk`` frame wraps one SSE event of a response without decoding its chunk again.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.chunks import UnknownJson
from adk_stream_protocol.protocol.sse import DONE
from adk_stream_protocol.transports.live_frames import invalid_frame, shown

# The chat request fields a `send` frame carries itself; the rest of the request is its body.
_REQUEST_KEYS = ("id", "messages", "trigger", "messageId")
_DONE_EVENT = DONE.encode()
_DATA_PREFIX = b"data: "


class _ClientFrame(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", strict=True
    )

    request_id: str


class _ChatFrame(_ClientFrame):
    id: str
    # Required, as ai's own `safeValidateWebSocketChatTransportRequest` requires them.
    headers: dict[str, str]
    body: dict[str, UnknownJson]
    metadata: UnknownJson = None


class SendFrame(_ChatFrame):
    type: Literal["send"]
    trigger: Literal["submit-message", "regenerate-message"]
    message_id: str | None = None
    # Validated as a chat request (ui_messages.parse_chat_request) with the body around it.
    messages: list[UnknownJson]

    def chat_request(self) -> dict[str, Any]:
        """The request as ``DefaultChatTransport`` would post it: the body, then the fields
        the transport sets itself."""
        request: dict[str, Any] = {**self.body}
        request.update(id=self.id, messages=self.messages, trigger=self.trigger)
        if self.message_id is not None:
            request["messageId"] = self.message_id
        else:
            request.pop("messageId", None)
        return request


class ResumeFrame(_ChatFrame):
    type: Literal["resume"]
    # The last chunk the client has; absent: replay the response from its start.
    last_sequence: Annotated[int, Field(ge=0)] | None = None


class AbortFrame(_ClientFrame):
    type: Literal["abort"]


ClientFrame: TypeAlias = Annotated[
    SendFrame | ResumeFrame | AbortFrame, Field(discriminator="type")
]
_CLIENT_FRAME: TypeAdapter[ClientFrame] = TypeAdapter(ClientFrame)
CLIENT_FRAME_TYPES = frozenset({"send", "resume", "abort"})
# The longest accepted requestId (the client's are 16 characters).
MAX_REQUEST_ID_CHARS = 128
# Why a socket closes on a frame that names no request: no error frame could answer it.
NO_REQUEST_ID = "ai 7 frames need a requestId; our envelope protocol connects with ?chatId="


def request_id_of(frame: object) -> str | None:
    """The ``requestId`` of a JSON frame, if it has one we can answer to."""
    request_id = frame.get("requestId") if isinstance(frame, dict) else None
    if isinstance(request_id, str) and 0 < len(request_id) <= MAX_REQUEST_ID_CHARS:
        return request_id
    return None


def parse_client_frame(frame: dict[str, Any]) -> ClientFrame:
    """A frame whose ``requestId`` is a string, validated by its ``type``; a problem is a
    ``RequestError`` to answer as that request's ``error``."""
    kind = frame.get("type")
    if not isinstance(kind, str) or kind not in CLIENT_FRAME_TYPES:
        raise RequestError(422, f"unknown frame type {shown(kind)}; expected send, resume or abort")
    try:
        return _CLIENT_FRAME.validate_python(frame)
    except ValidationError as exc:
        raise invalid_frame(kind, exc) from None


# -- server frames ---------------------------------------------------------------------------


# Compact, as the chunk frames are.
_COMPACT = (",", ":")


def control_frame(kind: Literal["start", "end", "no-active"], request_id: str) -> str:
    return json.dumps({"type": kind, "requestId": request_id}, separators=_COMPACT)


def error_frame(request_id: str, error_text: str) -> str:
    frame = {"type": "error", "requestId": request_id, "errorText": error_text}
    return json.dumps(frame, separators=_COMPACT)


def chunk_frame(request_id: str, sequence: int, event: bytes) -> str:
    """One SSE event of a response (``data: <chunk json>``) as a ``chunk`` frame. The chunk's
    JSON is placed as it is: it was made by our own encoder, so it is one valid object."""
    payload = event.removeprefix(_DATA_PREFIX).rstrip(b"\n").decode()
    return (
        f'{{"type":"chunk","requestId":{json.dumps(request_id)},'
        f'"sequence":{sequence},"chunk":{payload}}}'
    )


def is_done(event: bytes) -> bool:
    return event == _DONE_EVENT
