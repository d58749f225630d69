"""The part kinds of a UI message, listed once: the message fold takes each chunk type to its
kind, ``message_chunks`` each part type, ``inputs`` each request part, and the request's part
union holds their models; the converter reads each final ADK event through every
``EVENT_PARTS`` entry.

A new kind is a module of ``parts/`` and one entry here: in ``PART_KINDS`` and in
``UIMessagePart`` (in the same order: tests/protocol/test_part_kinds.py holds them together)
for a part type of its own, in ``EVENT_PARTS`` for one made from ADK event content (a
``data-*`` part made from ADK needs only that one).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, TypeAlias

from pydantic import Discriminator, Tag

from adk_stream_protocol.protocol.parts.base import EventPart, PartKind, UIPart
from adk_stream_protocol.protocol.parts.compactions import Compactions
from adk_stream_protocol.protocol.parts.custom import Custom, CustomUIPart
from adk_stream_protocol.protocol.parts.data import Data, DataUIPart
from adk_stream_protocol.protocol.parts.files import (
    Files,
    FileUIPart,
    ReasoningFiles,
    ReasoningFileUIPart,
)
from adk_stream_protocol.protocol.parts.node_outputs import NodeOutputs
from adk_stream_protocol.protocol.parts.routes import Routes
from adk_stream_protocol.protocol.parts.sources import (
    SourceDocumentUIPart,
    Sources,
    SourceUrlUIPart,
)
from adk_stream_protocol.protocol.parts.steering import Steering, SteeringMessageUIPart
from adk_stream_protocol.protocol.parts.steps import Steps, StepStartUIPart
from adk_stream_protocol.protocol.parts.text import Reasoning, ReasoningUIPart, Text, TextUIPart
from adk_stream_protocol.protocol.parts.tools import DynamicToolUIPart, Tools, ToolUIPart
from adk_stream_protocol.protocol.parts.ui_widgets import UiWidgets
from adk_stream_protocol.protocol.parts.workflow_nodes import WorkflowNodes

PART_KINDS: tuple[type[PartKind], ...] = (
    Text,
    Reasoning,
    Files,
    Steps,
    Sources,
    Tools,
    Data,
    Custom,
    ReasoningFiles,
    Steering,
)

# The parts made from ADK event content through the converter's hook, in the order their
# chunks follow an event's own.
EVENT_PARTS: tuple[type[EventPart], ...] = (
    UiWidgets,
    WorkflowNodes,
    NodeOutputs,
    Routes,
    Compactions,
)

# Part type -> its kind; and the families by prefix, each with its tag in the union below
# ("tool-" parts are tagged "tool").
_BY_TYPE: Mapping[str, type[PartKind]] = MappingProxyType(
    {part_type: kind for kind in PART_KINDS for part_type in kind.part_types}
)
_BY_PREFIX: tuple[tuple[str, type[PartKind]], ...] = tuple(
    (kind.part_prefix, kind) for kind in PART_KINDS if kind.part_prefix is not None
)
_BY_MODEL: Mapping[type[UIPart], type[PartKind]] = MappingProxyType(
    {model: kind for kind in PART_KINDS for _, model in kind.request_parts}
)


def kind_of(part_type: str) -> type[PartKind] | None:
    """The kind of a part type (``None`` for a type no kind has)."""
    kind = _BY_TYPE.get(part_type)
    if kind is not None:
        return kind
    return next((k for prefix, k in _BY_PREFIX if part_type.startswith(prefix)), None)


def kind_of_part(part: UIPart) -> type[PartKind]:
    """The kind of a part the client sent (validated by ``UIMessagePart``)."""
    return _BY_MODEL[type(part)]


def _part_tag(value: Any) -> str | None:
    part_type = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(part_type, str):
        return None
    if part_type in _BY_TYPE:
        return part_type
    prefix = next((p for p, _ in _BY_PREFIX if part_type.startswith(p)), None)
    return prefix.removesuffix("-") if prefix is not None else None


# The tags of the part union; pydantic puts them in validation error locations.
PART_TAGS = frozenset(tag for kind in PART_KINDS for tag, _ in kind.request_parts)
_NAMES = [*_BY_TYPE, *(f"{prefix}<name>" for prefix, _ in _BY_PREFIX)]
_EXPECTED = f"{', '.join(_NAMES[:-1])} or {_NAMES[-1]}"

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
        custom_error_message=f"unknown part type; expected {_EXPECTED}",
    ),
]
