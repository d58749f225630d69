"""What every part kind has (``PartKind``), what the kinds' folds share with the message fold
(the message they change, JavaScript's ``undefined`` in JSON terms, the current step, and the
client's refusal to read on), and the converter's hook for the parts made from ADK event
content (``EventPart``, docs/adr/0062-event-parts.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeAlias

from google.adk.events import Event
from google.genai import types
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from adk_stream_protocol.protocol.chunks import BaseChunk
from adk_stream_protocol.protocol.clients import AiSdkClient

# A message or a part as the client holds it (JSON), and a chunk as sent (a camelCase dict).
Part: TypeAlias = dict[str, Any]
Chunk: TypeAlias = Mapping[str, Any]

# A key the client leaves undefined: absent from the JSON of the message (``None`` is null).
ABSENT: Any = object()


class Refused(Exception):
    """The client stops reading the response here (an ``error`` chunk, or one it cannot apply)."""


def chunk_id(chunk: Chunk, key: str) -> str:
    """A chunk's id field (``id``, ``toolCallId``, ``approvalId``): the client's schema
    requires a string, and refuses the chunk without one."""
    value = chunk.get(key)
    if not isinstance(value, str):
        raise Refused(f"a {chunk.get('type')} chunk without a string {key}")
    return value


def given(value: Any) -> bool:
    """JavaScript's ``value != null``: neither undefined nor null."""
    return value is not ABSENT and value is not None


def put(target: dict[str, Any], key: str, value: Any) -> None:
    """``target[key] = value``, where an undefined value leaves no key in the JSON."""
    if value is ABSENT:
        target.pop(key, None)
    else:
        target[key] = value


def pushed(chunk: Chunk, keys: tuple[str, ...]) -> Part:
    """A part made of a chunk's type and ``keys`` as they came (an absent key stays absent)."""
    part: Part = {"type": chunk["type"]}
    for key in keys:
        put(part, key, chunk.get(key, ABSENT))
    return part


def step_parts(message: Mapping[str, Any]) -> list[Part]:
    """The parts of the current step: those after the last ``step-start``."""
    parts: list[Part] = message["parts"]
    for index in range(len(parts) - 1, -1, -1):
        if parts[index].get("type") == "step-start":
            return parts[index + 1 :]
    return list(parts)


class UIModel(BaseModel):
    """The request side's models: camelCase keys, unknown keys ignored, strict values."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", strict=True
    )


class UIPart(UIModel):
    """A part of a message the client sent."""

    type: str


class FoldTarget(Protocol):
    """The response message a fold builds (``MessageFold``), as the kinds' folds see it."""

    message: Part
    client: AiSdkClient

    def write(self) -> None:
        """``AbstractChat``'s write: the chat's list takes the message as it is now."""

    def pushed_unwritten(self) -> None:
        """A part was pushed without a write (a step start): the list does not show it yet."""

    def step_finished(self) -> None:
        """``finish-step``: each kind forgets what the client forgets at a step's end."""

    def step_reset(self) -> None:
        """``reset-step``: the current step's parts are gone, and what was open in them."""


# What folds one chunk onto the message a fold builds.
Fold: TypeAlias = Callable[[FoldTarget, Chunk], None]


class PartKind:
    """One kind of part of a UI message. Subclasses are listed in ``kinds.py``.

    The class says which parts are of the kind and their request-side models, how a part
    rebuilds its chunks and what a user's part gives the model. An instance is the kind's
    share of one response's fold (``MessageFold``): the chunk types it folds, each onto the
    message the fold passes it, with what it keeps open between them. How ADK content becomes
    the kind's chunks is the module's own: an ``EventPart`` for content an event carries beside
    its text and calls, or functions the converter calls where the event's order needs them
    (text, calls, results, files, sources)."""

    # The part types of the kind; a family of them by prefix ("tool-", "data-").
    part_types: ClassVar[tuple[str, ...]] = ()
    part_prefix: ClassVar[str | None] = None
    # The request-side models, each with its tag in the part union (``kinds.py``).
    request_parts: ClassVar[tuple[tuple[str, type[UIPart]], ...]] = ()

    def __init__(self, message: Part, client: AiSdkClient) -> None:
        """The kind's share of the fold of one response onto ``message``, for ``client``
        (what it keeps, it keeps here; it never holds the fold, which holds it)."""

    def folds(self) -> dict[str, Fold]:
        """The chunk types it folds, each with the method that folds one onto the message."""
        return {}

    def prefixed_folds(self) -> dict[str, Fold]:
        """Chunk types it folds by prefix (``data-``), each prefix with its method."""
        return {}

    def step_finished(self) -> None:
        """``finish-step``: nothing to forget, unless the kind keeps parts open."""

    def step_reset(self) -> None:
        """``reset-step``: nothing to drop, unless the kind keeps parts open."""

    @classmethod
    def rebuild(
        cls, part: Mapping[str, Any], client: AiSdkClient, block_id: str
    ) -> list[BaseChunk]:
        """The chunks that rebuild ``part`` on an empty message: none for a part no chunk of
        ours makes (the client would not have it either). ``block_id``: an id for a block whose
        part names none."""
        return []

    @classmethod
    def model_input(cls, part: UIPart) -> tuple[list[types.Part], list[str]]:
        """What a user's part of this kind gives the model, as ADK parts, and what of it is
        left out (named for a log, never its content): by default the part only shows."""
        return [], [part.type]


class EventPart:
    """A part made from ADK event content, through the converter's one hook for it. Subclasses
    are listed in ``kinds.py`` (``EVENT_PARTS``).

    The converter makes one instance per response, for the response's client (which chunk
    types it accepts: ``client.accepts``), and calls ``chunks`` with each final (non-partial)
    event it converts, and with each event a paused continuation held back when a later
    response sends what was held. What it returns goes out right after the chunks of the
    event's own content, in the step they went to (none is opened for it: a tool's result in a
    continuation has none), the open text and reasoning closed first. A partial event is never
    read: the final event repeats its content, and a delta's path stays as it is
    (docs/adr/0050). A ``data-*`` part needs no ``PartKind`` of its own: ``Data`` folds and
    rebuilds every one."""

    def __init__(self, client: AiSdkClient) -> None:
        self.client = client

    def chunks(self, event: Event) -> list[BaseChunk]:
        """The chunks of this kind's parts in ``event`` (most events have none)."""
        return []
