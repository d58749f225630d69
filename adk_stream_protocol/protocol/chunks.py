"""The AI SDK UI message stream chunk catalogue.

One pydantic model per chunk type. Field names are snake_case in Python and camelCase on the
wire. Only the portable field set is modelled: the keys that the strict ai@6.0.25 client accepts.
Newer-only keys (``inputEncoding``, ``toolMetadata``, ``signature``…) are left out on purpose,
because a 6.0.25 client rejects a chunk that carries them. The few that ai 7 adds and this
server uses (``text-end.citations``, ``tool-approval-response``, the finish reason
``interrupted``, a ``tool-approval-request``'s ``reason`` and ``approvalDescriptor``) are
marked "ai 7 only": the converter sends them only to a client known to be ai 7.

Serialisation rules (see docs/adr/0002-chunk-catalogue.md):

- optional fields that are ``None`` are omitted, never sent as ``null``;
- fields the client types as ``unknown`` (``input``, ``output``, ``data`` and
  ``messageMetadata`` on ``message-metadata``) are required keys and are always sent,
  even when their value is ``None``.

``to_wire_json()`` and ``to_wire_dict()`` apply these rules; plain ``model_dump()`` does not.
The general path is pydantic-core's own ``exclude_none`` serialiser; a chunk whose always-sent
field holds ``None`` rebuilds its dict (docs/adr/0018). The chunks every streamed word makes
(steps, text and reasoning blocks and deltas) write their few keys with orjson instead, and the
converter builds them with ``built()``, unvalidated: tests hold every chunk it emits to the
catalogue and to the general path's bytes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

import orjson
from pydantic import Discriminator, Field, JsonValue, Tag, TypeAdapter

from adk_stream_protocol.protocol.chunk_base import BaseChunk as BaseChunk

# The hot chunks' serialiser: the same bytes as pydantic-core's for their str fields in half
# the time, the dict being built by hand (tests/protocol/test_hot_path.py compares them).
_dumps = orjson.dumps

FinishReason: TypeAlias = Literal[
    "stop", "length", "content-filter", "tool-calls", "error", "other", "interrupted"
]  # "interrupted": ai 7 only

# The AI SDK major version a client is known to speak. 6 is the portable set every client
# accepts; 7 allows what ai 7 adds.
AiSdkVersion: TypeAlias = Literal[6, 7]

# What carries a response's chunks to its client: POST /stream, an ai 7 socket (/live), or our
# envelope protocol (/live?chatId=). Spans, metrics and recordings name it.
Transport: TypeAlias = Literal["stream", "ai7-socket", "live"]

# A value the client types as `unknown` (tool input and output, data, message metadata): any
# JSON value. Not validated item by item: pydantic's JsonValue calls Python for every nested
# value (86 µs for a 50-row tool result, against about 1 µs unchecked), and the client checks
# nothing inside it either. The converter makes such values JSON (`json_safe`).
UnknownJson: TypeAlias = Any

# Two levels: provider name, then that provider's keys. {"google": {"k": 1}}.
ProviderMetadata: TypeAlias = dict[str, dict[str, JsonValue]]


class StartChunk(BaseChunk):
    type: Literal["start"] = "start"
    message_id: str | None = None
    message_metadata: UnknownJson = None


class FinishChunk(BaseChunk):
    type: Literal["finish"] = "finish"
    finish_reason: FinishReason | None = None
    message_metadata: UnknownJson = None


class StartStepChunk(BaseChunk):
    type: Literal["start-step"] = "start-step"

    def to_wire_json(self) -> bytes:
        return b'{"type":"start-step"}'


class FinishStepChunk(BaseChunk):
    type: Literal["finish-step"] = "finish-step"

    def to_wire_json(self) -> bytes:
        return b'{"type":"finish-step"}'


class TextStartChunk(BaseChunk):
    type: Literal["text-start"] = "text-start"
    id: str
    provider_metadata: ProviderMetadata | None = None

    def to_wire_json(self) -> bytes:
        if self.provider_metadata is None:
            return _dumps({"type": self.type, "id": self.id})
        return super().to_wire_json()


class TextDeltaChunk(BaseChunk):
    type: Literal["text-delta"] = "text-delta"
    id: str
    delta: str
    provider_metadata: ProviderMetadata | None = None

    def to_wire_json(self) -> bytes:
        if self.provider_metadata is None:
            return _dumps({"type": self.type, "id": self.id, "delta": self.delta})
        return super().to_wire_json()


class CitationSource(BaseChunk):
    type: Literal["source"] = "source"
    source_type: Literal["url"] = "url"
    id: str
    url: str
    title: str | None = None


class Citation(BaseChunk):
    """Where a stretch of the text comes from (ai 7 only)."""

    source: CitationSource
    start_index: Annotated[int, Field(ge=0)] | None = None
    end_index: Annotated[int, Field(ge=0)] | None = None
    cited_text: str | None = None


class TextEndChunk(BaseChunk):
    type: Literal["text-end"] = "text-end"
    id: str
    provider_metadata: ProviderMetadata | None = None
    citations: list[Citation] | None = None  # ai 7 only

    def to_wire_json(self) -> bytes:
        if self.provider_metadata is None and self.citations is None:
            return _dumps({"type": "text-end", "id": self.id})
        return super().to_wire_json()


class ReasoningStartChunk(BaseChunk):
    type: Literal["reasoning-start"] = "reasoning-start"
    id: str
    provider_metadata: ProviderMetadata | None = None

    def to_wire_json(self) -> bytes:
        if self.provider_metadata is None:
            return _dumps({"type": self.type, "id": self.id})
        return super().to_wire_json()


class ReasoningDeltaChunk(BaseChunk):
    type: Literal["reasoning-delta"] = "reasoning-delta"
    id: str
    delta: str
    provider_metadata: ProviderMetadata | None = None

    def to_wire_json(self) -> bytes:
        if self.provider_metadata is None:
            return _dumps({"type": self.type, "id": self.id, "delta": self.delta})
        return super().to_wire_json()


class ReasoningEndChunk(BaseChunk):
    type: Literal["reasoning-end"] = "reasoning-end"
    id: str
    provider_metadata: ProviderMetadata | None = None

    def to_wire_json(self) -> bytes:
        if self.provider_metadata is None:
            return _dumps({"type": self.type, "id": self.id})
        return super().to_wire_json()


class ToolInputStartChunk(BaseChunk):
    type: Literal["tool-input-start"] = "tool-input-start"
    tool_call_id: str
    tool_name: str
    provider_executed: bool | None = None
    dynamic: bool | None = None
    title: str | None = None


class ToolInputDeltaChunk(BaseChunk):
    type: Literal["tool-input-delta"] = "tool-input-delta"
    tool_call_id: str
    input_text_delta: str


class ToolInputAvailableChunk(BaseChunk):
    _always_sent = ("input",)
    type: Literal["tool-input-available"] = "tool-input-available"
    tool_call_id: str
    tool_name: str
    input: UnknownJson
    provider_executed: bool | None = None
    provider_metadata: ProviderMetadata | None = None
    dynamic: bool | None = None
    title: str | None = None


class ToolInputErrorChunk(BaseChunk):
    _always_sent = ("input",)
    type: Literal["tool-input-error"] = "tool-input-error"
    tool_call_id: str
    tool_name: str
    input: UnknownJson
    error_text: str
    provider_executed: bool | None = None
    provider_metadata: ProviderMetadata | None = None
    dynamic: bool | None = None
    title: str | None = None


class ToolApprovalRequestChunk(BaseChunk):
    type: Literal["tool-approval-request"] = "tool-approval-request"
    approval_id: str
    tool_call_id: str
    # ai 7 only: a confirmation's hint (the client's `approval.requestReason`) and payload
    # (`approval.descriptor`).
    reason: str | None = None
    approval_descriptor: UnknownJson = None


class ToolApprovalResponseChunk(BaseChunk):
    """The decision the server acted on (ai 7 only)."""

    type: Literal["tool-approval-response"] = "tool-approval-response"
    approval_id: str
    approved: bool
    reason: str | None = None


class ToolOutputAvailableChunk(BaseChunk):
    _always_sent = ("output",)
    type: Literal["tool-output-available"] = "tool-output-available"
    tool_call_id: str
    output: UnknownJson
    provider_executed: bool | None = None
    dynamic: bool | None = None
    preliminary: bool | None = None


class ToolOutputErrorChunk(BaseChunk):
    type: Literal["tool-output-error"] = "tool-output-error"
    tool_call_id: str
    error_text: str
    provider_executed: bool | None = None
    dynamic: bool | None = None


class ToolOutputDeniedChunk(BaseChunk):
    type: Literal["tool-output-denied"] = "tool-output-denied"
    tool_call_id: str


class SourceUrlChunk(BaseChunk):
    type: Literal["source-url"] = "source-url"
    source_id: str
    url: str
    title: str | None = None
    provider_metadata: ProviderMetadata | None = None


class SourceDocumentChunk(BaseChunk):
    type: Literal["source-document"] = "source-document"
    source_id: str
    media_type: str
    title: str
    filename: str | None = None
    provider_metadata: ProviderMetadata | None = None


class FileChunk(BaseChunk):
    type: Literal["file"] = "file"
    url: str
    media_type: str
    provider_metadata: ProviderMetadata | None = None


class DataChunk(BaseChunk):
    """``data-<name>``: app-specific data. ``transient`` data reaches only ``onData``."""

    _always_sent = ("data",)
    type: Annotated[str, Field(pattern=r"^data-.+")]
    data: UnknownJson
    id: str | None = None
    transient: bool | None = None


class MessageMetadataChunk(BaseChunk):
    _always_sent = ("message_metadata",)
    type: Literal["message-metadata"] = "message-metadata"
    message_metadata: UnknownJson


class ErrorChunk(BaseChunk):
    type: Literal["error"] = "error"
    error_text: str


class AbortChunk(BaseChunk):
    type: Literal["abort"] = "abort"
    reason: str | None = None


def _chunk_tag(value: Any) -> str | None:
    chunk_type = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(chunk_type, str):
        return None
    return "data" if chunk_type.startswith("data-") else chunk_type


UIMessageChunk: TypeAlias = Annotated[
    Annotated[StartChunk, Tag("start")]
    | Annotated[FinishChunk, Tag("finish")]
    | Annotated[StartStepChunk, Tag("start-step")]
    | Annotated[FinishStepChunk, Tag("finish-step")]
    | Annotated[TextStartChunk, Tag("text-start")]
    | Annotated[TextDeltaChunk, Tag("text-delta")]
    | Annotated[TextEndChunk, Tag("text-end")]
    | Annotated[ReasoningStartChunk, Tag("reasoning-start")]
    | Annotated[ReasoningDeltaChunk, Tag("reasoning-delta")]
    | Annotated[ReasoningEndChunk, Tag("reasoning-end")]
    | Annotated[ToolInputStartChunk, Tag("tool-input-start")]
    | Annotated[ToolInputDeltaChunk, Tag("tool-input-delta")]
    | Annotated[ToolInputAvailableChunk, Tag("tool-input-available")]
    | Annotated[ToolInputErrorChunk, Tag("tool-input-error")]
    | Annotated[ToolApprovalRequestChunk, Tag("tool-approval-request")]
    | Annotated[ToolApprovalResponseChunk, Tag("tool-approval-response")]
    | Annotated[ToolOutputAvailableChunk, Tag("tool-output-available")]
    | Annotated[ToolOutputErrorChunk, Tag("tool-output-error")]
    | Annotated[ToolOutputDeniedChunk, Tag("tool-output-denied")]
    | Annotated[SourceUrlChunk, Tag("source-url")]
    | Annotated[SourceDocumentChunk, Tag("source-document")]
    | Annotated[FileChunk, Tag("file")]
    | Annotated[DataChunk, Tag("data")]
    | Annotated[MessageMetadataChunk, Tag("message-metadata")]
    | Annotated[ErrorChunk, Tag("error")]
    | Annotated[AbortChunk, Tag("abort")],
    Discriminator(_chunk_tag),
]

# Validates a wire dict against the strict catalogue (tests and debugging use it).
UI_MESSAGE_CHUNK = TypeAdapter[UIMessageChunk](UIMessageChunk)
