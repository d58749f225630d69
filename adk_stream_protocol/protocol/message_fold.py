"""The messages ``useChat`` holds when a response ends: the response's chunks folded onto the
messages the client held when it sent the request.

A port of the AI SDK client: ``processUIMessageStream`` (how each chunk changes the response
message) and ``AbstractChat``'s request (which message the response continues, and when the
chat's list takes the message: only on a ``write``, a pushed message is the live object, a
replaced one a snapshot). The message's own chunks (``start``, ``finish``, metadata, ``error``,
``abort``) are folded here; a part's chunks by its kind (``parts/``). ``ai_sdk=6`` is the
newest 6.x (6.0.326), ``ai_sdk=7`` ai 7.x; where they differ, ``clients.py`` says
(docs/adr/0042-chat-messages.md). The client stops reading at an ``error`` chunk, or at a chunk
it cannot apply (a delta for no open part, a result for no call, a type it does not know); so
does the fold (``refused``).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from adk_stream_protocol.protocol.chunks import AiSdkVersion
from adk_stream_protocol.protocol.clients import client_for
from adk_stream_protocol.protocol.parts.base import Chunk, PartKind, Refused
from adk_stream_protocol.protocol.parts.kinds import PART_KINDS

Trigger: TypeAlias = Literal["submit-message", "regenerate-message"]
Message: TypeAlias = dict[str, Any]


class _Entry:
    """What a slot of the chat's list holds when it is the response message."""

    def __init__(self, name: str) -> None:
        self.name = name


# The response message object itself (pushed, not replaced since): every change shows.
_LIVE = _Entry("live")
# The snapshot taken at the last write: the message minus the step starts pushed since.
_SNAPSHOT = _Entry("snapshot")


class MessageFold:
    """One response's chunks applied to the message list the client holds, as useChat does.

    ``messages``: what the client held when it sent the request (the request's messages);
    ``trigger`` and ``message_id``: the request's (``submit-message`` with the id of the
    message it continues; a regeneration starts a new message). ``new_message_id``: the id the
    client gives a new message when ``start`` carries none (it draws one at random)."""

    def __init__(
        self,
        messages: Sequence[Message],
        *,
        ai_sdk: AiSdkVersion = 6,
        trigger: Trigger = "submit-message",
        message_id: str | None = None,
        new_message_id: str | None = None,
    ) -> None:
        self.ai_sdk = ai_sdk
        self.client = client_for(ai_sdk)
        self._held: list[Message | _Entry] = list(messages)
        index = len(messages) - 1
        if trigger == "submit-message" and message_id is not None:
            index = next((i for i, m in enumerate(messages) if m.get("id") == message_id), -1)
        answered = messages[index] if index != -1 else (messages[-1] if messages else None)
        self._original_id = answered.get("id") if answered is not None else None
        self._uses_earlier = (
            index != -1 and index < len(messages) - 1 and messages[index].get("role") == "assistant"
        )
        if trigger != "regenerate-message" and answered and answered.get("role") == "assistant":
            self.message: Message = copy.deepcopy(dict(answered))
        else:
            new_id = new_message_id or uuid.uuid4().hex
            self.message = {"id": new_id, "role": "assistant", "parts": []}
        self._unwritten = 0  # step starts pushed since the last write (nothing else is)
        self.refused: str | None = None  # why the client stopped reading, if it did
        # Each kind's share of the fold, and each chunk type the client has with its fold.
        self._kinds: list[PartKind] = [kind(self.message, self.client) for kind in PART_KINDS]
        folds: dict[str, _Fold] = dict(_MESSAGE_FOLDS)
        prefixed: dict[str, _Fold] = {}
        for kind in self._kinds:
            folds.update(kind.folds())
            prefixed.update(kind.prefixed_folds())
        types = self.client.chunk_types
        self._folds = {t: fold for t, fold in folds.items() if t in types}
        self._prefixed = tuple(prefixed.items())

    @property
    def messages(self) -> list[Message]:
        """The chat's messages now (shared with the fold: read them, do not change them)."""
        return [self._render(entry) for entry in self._held]

    def apply(self, chunk: Mapping[str, Any]) -> None:
        """One chunk, as sent on the wire (a camelCase dict)."""
        if self.refused is not None:
            return
        kind = chunk.get("type")
        try:
            if not isinstance(kind, str):
                raise Refused("a chunk without a type")
            fold = self._folds.get(kind)
            if fold is None:
                fold = next((f for prefix, f in self._prefixed if kind.startswith(prefix)), None)
            if fold is None:
                raise Refused(f"a chunk of type {kind!r} is not in the ai {self.ai_sdk} schema")
            fold(self, chunk)
        except Refused as refusal:
            self.refused = str(refusal)

    def apply_all(self, chunks: Sequence[Mapping[str, Any]]) -> list[Message]:
        for chunk in chunks:
            self.apply(chunk)
        return self.messages

    # -- the chat's list: AbstractChat's write -------------------------------------------------

    def _render(self, entry: Message | _Entry) -> Message:
        if entry is _LIVE:
            return self.message
        if entry is _SNAPSHOT:
            if not self._unwritten:
                return self.message
            return {**self.message, "parts": self.message["parts"][: -self._unwritten]}
        assert isinstance(entry, dict)
        return entry

    def _entry_id(self, entry: Message | _Entry) -> Any:
        return self.message["id"] if isinstance(entry, _Entry) else entry.get("id")

    def write(self) -> None:
        target = self._last_index(self.message["id"])
        if target is None and self._uses_earlier:
            target = self._last_index(self._original_id)
        if target is None:
            self._held.append(_LIVE)
        else:
            self._held[target] = _SNAPSHOT
        self._unwritten = 0

    def pushed_unwritten(self) -> None:
        self._unwritten += 1

    def step_finished(self) -> None:
        for kind in self._kinds:
            kind.step_finished()

    def step_reset(self) -> None:
        for kind in self._kinds:
            kind.step_reset()

    def _last_index(self, message_id: Any) -> int | None:
        for i in range(len(self._held) - 1, -1, -1):
            if self._entry_id(self._held[i]) == message_id:
                return i
        return None

    def _freeze_snapshot(self) -> None:
        """Before the message's id changes, the list's snapshot keeps the old id: copy it."""
        for i, entry in enumerate(self._held):
            if entry is _SNAPSHOT:
                self._held[i] = copy.deepcopy(self._render(entry))

    # -- the response's chunks -----------------------------------------------------------------

    def _start(self, chunk: Chunk) -> None:
        message_id = chunk.get("messageId")
        metadata = chunk.get("messageMetadata")
        if message_id is not None and message_id != self.message["id"]:
            self._freeze_snapshot()
        if message_id is not None:
            self.message["id"] = message_id
        self._merge_metadata(metadata)
        if message_id is not None or metadata is not None:
            self.write()

    def _metadata(self, chunk: Chunk) -> None:
        """``finish`` and ``message-metadata``: metadata merged into the message's."""
        reason = chunk.get("finishReason")
        if (
            chunk["type"] == "finish"
            and reason is not None
            and reason not in self.client.finish_reasons
        ):
            raise Refused(f"the finish reason {reason!r} is not in the ai {self.ai_sdk} schema")
        metadata = chunk.get("messageMetadata")
        self._merge_metadata(metadata)
        if metadata is not None:
            self.write()

    def _merge_metadata(self, metadata: Any) -> None:
        if metadata is None:
            return
        held = self.message.get("metadata")
        self.message["metadata"] = merge_objects(held, metadata) if held is not None else metadata

    def _error(self, chunk: Chunk) -> None:
        raise Refused(f"error chunk: {chunk.get('errorText')}")

    def _nothing(self, chunk: Chunk) -> None:
        """``abort``: the client passes it on and changes nothing."""


# What folds one chunk onto the fold's message: a kind's method, or one of the fold's own
# (unbound: the fold holds its table, so the table never holds the fold).
_Fold: TypeAlias = Callable[[MessageFold, Chunk], None]
_MESSAGE_FOLDS: Mapping[str, _Fold] = MappingProxyType(
    {
        "start": MessageFold._start,
        "finish": MessageFold._metadata,
        "message-metadata": MessageFold._metadata,
        "error": MessageFold._error,
        "abort": MessageFold._nothing,
    }
)


def merge_objects(base: Any, overrides: Any) -> Any:
    """``mergeObjects``: ``overrides`` deep-merged into ``base``, objects key by key (arrays and
    other values replace); as the client merges message metadata."""
    result = _spread(base)
    for key, value in _own_entries(overrides):
        if isinstance(base, dict):
            held = base.get(key)
        elif isinstance(base, list) and key.isdigit() and int(key) < len(base):
            held = base[int(key)]
        elif isinstance(base, list):
            held = None
        else:
            raise Refused("message metadata merged into a value that is not an object")
        if isinstance(value, dict) and isinstance(held, dict):
            result[key] = merge_objects(held, value)
        else:
            result[key] = value
    return result


def _spread(value: Any) -> dict[str, Any]:
    """``{...value}``."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list | str):
        return {str(i): item for i, item in enumerate(value)}
    return {}


def _own_entries(value: Any) -> list[tuple[str, Any]]:
    """The keys ``for (key in value)`` visits, with their values."""
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list | str):
        return [(str(i), item) for i, item in enumerate(value)]
    return []
