"""The request side: ``UIMessage`` and its parts, and the body ``DefaultChatTransport`` posts.

Parts are validated by their ``type``; an unknown type is an error, not something to drop.
Unknown *keys* on known parts are ignored, because newer clients add fields (``title``,
``callProviderMetadata``, ``preliminary``, ai 7's ``providerMetadata``…) that the server does
not need (docs/adr/0005-request-validation.md). The parts ai 7 added (``custom``,
``reasoning-file``, ``steering-message``) are modelled like the others. Values are strict: a
decision is a JSON boolean and an id a string, never a coerced ``"yes"`` or ``1``
(docs/adr/0019).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Discriminator, Field, PrivateAttr, Tag, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import to_json

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.limits import RequestLimits, read_json
from adk_stream_protocol.protocol.chunks import UnknownJson
from adk_stream_protocol.protocol.shared_state import check_state_field

# The part a page adds to the message that answers a confirmation, with the payload the user
# edited: {"type": "data-approval-response", "id": <approval id>, "data": {"payload": {...}}}
# (docs/adr/0041).
APPROVAL_RESPONSE_PART = "data-approval-response"

# Chat ids become ADK session ids and appear in logs: keep them to a safe alphabet.
CHAT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"

ToolState: TypeAlias = Literal[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
]


class UIModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", strict=True
    )


class TextUIPart(UIModel):
    type: Literal["text"]
    text: str
    state: Literal["streaming", "done"] | None = None
    # ai 7: references the model gave for its text. Nothing in a user's content takes them.
    citations: list[UnknownJson] | None = None


class ReasoningUIPart(UIModel):
    type: Literal["reasoning"]
    text: str
    state: Literal["streaming", "done"] | None = None


class FileUIPart(UIModel):
    type: Literal["file"]
    # ai 7 also allows a bare top-level type ("image") or a wildcard ("image/*").
    media_type: str
    # Still required in ai 7, even beside a provider reference (then it is often "").
    url: str
    filename: str | None = None
    # ai 7: provider name -> id of a file uploaded to that provider (never fetched here).
    provider_reference: dict[str, str] | None = None


class CustomUIPart(UIModel):
    """ai 7: provider-specific content (``kind`` is ``{provider}.{type}``)."""

    type: Literal["custom"]
    kind: str


class ReasoningFileUIPart(UIModel):
    """ai 7: a file the model produced while reasoning."""

    type: Literal["reasoning-file"]
    media_type: str
    url: str


def _steering_tag(value: Any) -> str | None:
    part_type = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return part_type if part_type in ("text", "file") else None


SteeringContentPart: TypeAlias = Annotated[
    Annotated[TextUIPart, Tag("text")] | Annotated[FileUIPart, Tag("file")],
    Discriminator(
        _steering_tag,
        custom_error_type="unknown_part_type",
        custom_error_message="a steering message holds only text and file parts",
    ),
]


class SteeringMessageUIPart(UIModel):
    """ai 7 (experimental): a user message added to a running generation (docs/adr/0022)."""

    type: Literal["steering-message"]
    id: str
    parts: list[SteeringContentPart]


class StepStartUIPart(UIModel):
    type: Literal["step-start"]


class SourceUrlUIPart(UIModel):
    type: Literal["source-url"]
    source_id: str
    url: str
    title: str | None = None


class SourceDocumentUIPart(UIModel):
    type: Literal["source-document"]
    source_id: str
    media_type: str
    title: str
    filename: str | None = None


class ToolApproval(UIModel):
    id: str
    approved: bool | None = None
    reason: str | None = None
    # ai 7 copies these from the approval request; the server reads its own session instead.
    request_reason: str | None = None
    is_automatic: bool | None = None


class ToolUIPartBase(UIModel):
    tool_call_id: str
    state: ToolState
    input: UnknownJson = None
    output: UnknownJson = None
    error_text: str | None = None
    approval: ToolApproval | None = None
    provider_executed: bool | None = None
    preliminary: bool | None = None


class ToolUIPart(ToolUIPartBase):
    """A static tool part: ``type`` is ``tool-<toolName>``."""

    type: Annotated[str, Field(pattern=r"^tool-.+")]

    @property
    def tool_name(self) -> str:
        return self.type.removeprefix("tool-")


class DynamicToolUIPart(ToolUIPartBase):
    type: Literal["dynamic-tool"]
    tool_name: str


class DataUIPart(UIModel):
    type: Annotated[str, Field(pattern=r"^data-.+")]
    id: str | None = None
    data: UnknownJson = None


_FIXED_PART_TYPES = frozenset(
    {
        "text",
        "reasoning",
        "file",
        "step-start",
        "source-url",
        "source-document",
        "dynamic-tool",
        "custom",
        "reasoning-file",
        "steering-message",
    }
)
# The tags of the part union; pydantic puts them in validation error locations.
PART_TAGS = _FIXED_PART_TYPES | {"tool", "data"}


def _part_tag(value: Any) -> str | None:
    part_type = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(part_type, str):
        return None
    if part_type in _FIXED_PART_TYPES:
        return part_type
    if part_type.startswith("tool-"):
        return "tool"
    if part_type.startswith("data-"):
        return "data"
    return None


UIMessagePart: TypeAlias = Annotated[
    Annotated[TextUIPart, Tag("text")]
    | Annotated[ReasoningUIPart, Tag("reasoning")]
    | Annotated[FileUIPart, Tag("file")]
    | Annotated[StepStartUIPart, Tag("step-start")]
    | Annotated[SourceUrlUIPart, Tag("source-url")]
    | Annotated[SourceDocumentUIPart, Tag("source-document")]
    | Annotated[ToolUIPart, Tag("tool")]
    | Annotated[DynamicToolUIPart, Tag("dynamic-tool")]
    | Annotated[DataUIPart, Tag("data")]
    | Annotated[CustomUIPart, Tag("custom")]
    | Annotated[ReasoningFileUIPart, Tag("reasoning-file")]
    | Annotated[SteeringMessageUIPart, Tag("steering-message")],
    Discriminator(
        _part_tag,
        custom_error_type="unknown_part_type",
        custom_error_message=(
            "unknown part type; expected text, reasoning, file, step-start, source-url, "
            "source-document, dynamic-tool, custom, reasoning-file, steering-message, "
            "tool-<name> or data-<name>"
        ),
    ),
]

AnyToolUIPart: TypeAlias = ToolUIPart | DynamicToolUIPart


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
    """The body of ``POST /stream`` as ``DefaultChatTransport`` sends it.

    Fields an app adds through the transport's ``body`` option are ignored, except
    ``aiSdk``: an ai 7 app that sends ``"aiSdk": 7`` gets what ai 7 adds to the stream
    (docs/adr/0023); nothing in the request says so otherwise. And ``state``: the page's
    changes to the shared state (docs/adr/0044).
    """

    id: Annotated[str, Field(pattern=CHAT_ID_PATTERN)]
    messages: Annotated[list[UIMessage], Field(min_length=1)]
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = None
    ai_sdk: Literal[6, 7] = 6
    # The page's changes to the shared state (docs/adr/0044): {"ui:theme": "dark"}.
    state: dict[str, UnknownJson] | None = None
    # The JSON as it arrived (unknown keys kept), for a recording (docs/adr/0026).
    _payload: Any = PrivateAttr(default=None)

    @property
    def payload(self) -> Any:
        """The request as the client sent it; without one, as parsed."""
        if self._payload is not None:
            return self._payload
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @property
    def last_message(self) -> UIMessage:
        return self.messages[-1]


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
    request._payload = payload
    return request


def check_limits(request: ChatRequest, limits: RequestLimits) -> None:
    check_state_field(request.state or {}, limits)
    if len(request.messages) > limits.max_messages_per_request:
        raise RequestError(
            413,
            f"the request holds {len(request.messages)} messages; the limit is "
            f"{limits.max_messages_per_request}",
        )
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
