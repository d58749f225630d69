"""The request side: ``UIMessage``, and the body ``DefaultChatTransport`` posts.

Parts are validated by their ``type`` (``parts/kinds.py`` holds the union of each kind's
models); an unknown type is an error, not something to drop.
Unknown *keys* on known parts are ignored, because newer clients add fields (``title``,
``callProviderMetadata``, ``preliminary``, ai 7's ``providerMetadata``…) that the server does
not need (docs/adr/0005-request-validation.md). The parts ai 7 added (``custom``,
``reasoning-file``, ``steering-message``) are modelled like the others. Values are strict: a
decision is a JSON boolean and an id a string, never a coerced ``"yes"`` or ``1``
(docs/adr/0019).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, model_validator
from pydantic_core import to_json

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.limits import RequestLimits, read_json
from adk_stream_protocol.protocol.chunks import UnknownJson
from adk_stream_protocol.protocol.parts.base import UIModel
from adk_stream_protocol.protocol.parts.data import DataUIPart
from adk_stream_protocol.protocol.parts.files import FileUIPart
from adk_stream_protocol.protocol.parts.kinds import PART_TAGS, UIMessagePart
from adk_stream_protocol.protocol.parts.steering import SteeringMessageUIPart
from adk_stream_protocol.protocol.parts.text import TextUIPart
from adk_stream_protocol.protocol.parts.tools import AnyToolUIPart, DynamicToolUIPart, ToolUIPart
from adk_stream_protocol.protocol.shared_state import check_state_field

# The part a page adds to the message that answers a confirmation, with the payload the user
# edited: {"type": "data-approval-response", "id": <approval id>, "data": {"payload": {...}}}.
APPROVAL_RESPONSE_PART = "data-approval-response"

# Chat ids become ADK session ids and appear in logs: keep them to a safe alphabet.
CHAT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"


class UIMessage(UIModel):
    id: str
    role: Literal["system", "user", "assistant"]
    metadata: UnknownJson = None
    parts: list[UIMessagePart]

    def tool_parts(self) -> list[AnyToolUIPart]:
        return [p for p in self.parts if isinstance(p, ToolUIPart | DynamicToolUIPart)]

    def steering_parts(self) -> list[SteeringMessageUIPart]:
        return [p for p in self.parts if isinstance(p, SteeringMessageUIPart)]

    def typed_text_chars(self) -> int:
        """Characters of text the user wrote: a user message's text, and in any message the
        text of its steering messages (both become the user's input)."""
        own = self.parts if self.role == "user" else []
        steered = [q for s in self.steering_parts() for q in s.parts]
        return sum(len(p.text) for p in [*own, *steered] if isinstance(p, TextUIPart))

    def files(self) -> list[FileUIPart]:
        """The file parts, those inside steering messages included."""
        steered = [q for s in self.steering_parts() for q in s.parts]
        return [p for p in [*self.parts, *steered] if isinstance(p, FileUIPart)]

    def part_count(self) -> int:
        """Parts, counting those inside steering messages too."""
        return len(self.parts) + sum(len(s.parts) for s in self.steering_parts())


class ChatRequest(UIModel):
    """The body of ``POST /stream`` as ``DefaultChatTransport`` sends it: the whole chat in
    ``messages``, or only its last message(s), or, as the AI SDK's persistence recipe sends
    it, the last message alone as ``message``. The server completes a chat sent in part from
    its record (``turns/chat_joins.py``, docs/adr/0069); ``messages`` are the ones sent.

    Fields an app adds through the transport's ``body`` option are ignored, except
    ``aiSdk``: an ai 7 app that sends ``"aiSdk": 7`` gets what ai 7 adds to the stream
    (docs/adr/0023); nothing in the request says so otherwise. And ``state``: the page's
    changes to the shared state.
    """

    id: Annotated[str, Field(pattern=CHAT_ID_PATTERN)]
    messages: Annotated[list[UIMessage], Field(min_length=1)] = Field(default_factory=list)
    # The recipe's `{ id, message }`: read as `messages: [message]`.
    message: UIMessage | None = Field(default=None, exclude=True)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = None
    ai_sdk: Literal[6, 7] = 6
    # The page's changes to the shared state: {"ui:theme": "dark"}.
    state: dict[str, UnknownJson] | None = None
    # The JSON as it arrived (unknown keys kept; `message` as `messages`), for a recording;
    # once completed from the record, with the whole chat in `messages`.
    _payload: Any = PrivateAttr(default=None)
    _record_since: int = PrivateAttr(default=0)

    @model_validator(mode="after")
    def _one_message_list(self) -> ChatRequest:
        sent_messages = "messages" in self.model_fields_set
        if self.message is not None and sent_messages:
            raise ValueError("send the chat's messages as `messages` or `message`, not both")
        if self.message is not None:
            self.messages = [self.message]
            self.message = None
        elif not sent_messages:
            raise ValueError("the request needs `messages` (or `message`)")
        # The chat's record joins a request by its message ids.
        seen: set[str] = set()
        for message in self.messages:
            if message.id in seen:
                raise ValueError(f"two messages have the id {message.id!r}: each needs its own")
            seen.add(message.id)
        return self

    @property
    def payload(self) -> Any:
        """The request as the client sent it; without one, as parsed."""
        if self._payload is not None:
            return self._payload
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @property
    def last_message(self) -> UIMessage:
        return self.messages[-1]

    @property
    def chat_messages(self) -> list[Any]:
        """The chat's messages as JSON: those sent, after the ones of the record they
        continue once the request is completed (``completed``)."""
        messages: list[Any] = self.payload["messages"]
        return messages

    @property
    def record_since(self) -> int:
        """How many of ``chat_messages``' first messages the chat's record holds as they are
        (set by ``completed``): the record's write leaves them alone."""
        return self._record_since

    def completed(
        self, earlier: list[Any], *, since: int | None = None, sent: list[Any] | None = None
    ) -> ChatRequest:
        """This request with the record's ``earlier`` messages before the ones it sent: what
        the planner and the record see. ``messages`` stay the ones sent (validated).
        ``since``: ``record_since`` (default: the ``earlier`` ones). ``sent``: the sent
        messages' JSON as the record keeps it (a late tool output kept)."""
        copy = self.model_copy()
        messages = self.payload["messages"] if sent is None else sent
        copy._payload = {**self.payload, "messages": [*earlier, *messages]}
        copy._record_since = len(earlier) if since is None else since
        return copy


def parse_chat_body(raw: bytes | str, limits: RequestLimits) -> ChatRequest:
    """A ``POST /stream`` body: untrusted JSON in, a checked ``ChatRequest`` out."""
    return parse_chat_request(read_json(raw, limits.max_json_depth), limits)


def parse_chat_request(payload: Any, limits: RequestLimits) -> ChatRequest:
    """Validate a parsed chat request and hold it to the request limits."""
    try:
        request = ChatRequest.model_validate(payload)
    except ValidationError as exc:
        raise RequestError(422, readable_validation_error(exc)) from None
    check_limits(request, limits)
    last = request.last_message
    if request.trigger == "submit-message" and request.message_id not in (None, last.id):
        # Before the request is held against the chat's record: it names no message there.
        raise RequestError(422, f"messageId {request.message_id!r} does not name the last message")
    if isinstance(payload, dict) and "message" in payload:
        sent = payload["message"]
        payload = {key: value for key, value in payload.items() if key != "message"}
        payload["messages"] = [sent]
    request._payload = payload
    return request


def check_limits(request: ChatRequest, limits: RequestLimits) -> None:
    check_state_field(request.state or {}, limits)
    for message in request.messages:
        parts = message.part_count()
        if parts > limits.max_parts_per_message:
            raise RequestError(
                413,
                f"message {message.id!r} has {parts} parts; the limit is "
                f"{limits.max_parts_per_message}",
            )
        for file in message.files():
            if _decoded_size(file.url) > limits.max_file_bytes:
                raise RequestError(
                    413,
                    f"a file in message {message.id!r} is larger than "
                    f"{limits.max_file_bytes} bytes",
                )
        for part in message.parts:
            if isinstance(part, DataUIPart) and part.type == APPROVAL_RESPONSE_PART:
                _check_edited_payload(part, message.id, limits)
        chars = message.typed_text_chars()
        if chars > limits.max_message_chars:
            raise RequestError(
                413,
                f"message {message.id!r} has {chars} characters of text; the limit is "
                f"{limits.max_message_chars}",
            )


def _check_edited_payload(part: DataUIPart, message_id: str, limits: RequestLimits) -> None:
    """A payload the user edited is typed input: a JSON object, no longer than a message's
    text may be (its depth is the request's, checked when it was read)."""
    data = part.data
    if part.id is None or not isinstance(data, dict) or not isinstance(data.get("payload"), dict):
        raise RequestError(
            422,
            f"a {APPROVAL_RESPONSE_PART} part of message {message_id!r} needs the approval's "
            'id and data {"payload": <a JSON object>}',
        )
    if len(to_json(data["payload"]).decode()) > limits.max_message_chars:
        raise RequestError(
            413,
            f"the payload answering approval {part.id!r} is longer than "
            f"{limits.max_message_chars} characters",
        )


def _decoded_size(url: str) -> int:
    """An upper bound of a data: URL's decoded size, without decoding it."""
    header, _, data = url.partition(",")
    if not header.endswith(";base64"):
        return len(data)
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def readable_validation_error(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in _data_path(error["loc"]))
        problems.append(f"{where or 'body'}: {error['msg']}")
    return "invalid chat request: " + "; ".join(problems)


def _data_path(loc: tuple[int | str, ...]) -> list[int | str]:
    # pydantic puts the matched part type's union tag right after `parts.<n>`; people need
    # the path of their data, not our type names.
    return [
        item
        for i, item in enumerate(loc)
        if not (
            i >= 2 and loc[i - 2] == "parts" and isinstance(loc[i - 1], int) and item in PART_TAGS
        )
    ]
