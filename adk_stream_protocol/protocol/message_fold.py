"""The messages ``useChat`` holds when a response ends: the response's chunks folded onto the
messages the client held when it sent the request.

A port of the AI SDK client: ``processUIMessageStream`` (how each chunk changes the response
message) and ``AbstractChat``'s request (which message the response continues, and when the
chat's list takes the message: only on a ``write``, a pushed message is the live object, a
replaced one a snapshot). ``ai_sdk=6`` is the newest 6.x (6.0.326), ``ai_sdk=7`` ai 7.x; they
differ in a step's end, ai 7's own chunks and a few tool fields (docs/adr/0042-chat-messages.md).
The client stops reading at an ``error`` chunk, or at a chunk it cannot apply (a delta for no
open part, a result for no call, a type it does not know); so does the fold (``refused``).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from adk_stream_protocol.protocol.chunks import AiSdkVersion
from adk_stream_protocol.protocol.message_parts import (
    ABSENT,
    AI7_ONLY_CHUNKS,
    Refused,
    chunk_id,
    data_part,
    given,
    merge_objects,
    put,
    step_parts,
)
from adk_stream_protocol.protocol.tool_parts import ToolParts

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
        self._open_texts: dict[str, Message] = {}
        self._open_reasoning: dict[str, Message] = {}
        self._tools = ToolParts(self.message, ai_sdk)
        self.refused: str | None = None  # why the client stopped reading, if it did

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
            handler = _HANDLERS.get(kind)
            if handler is None and kind.startswith("data-"):
                handler = MessageFold._data
            if handler is None or (self.ai_sdk < 7 and kind in AI7_ONLY_CHUNKS):
                raise Refused(f"a chunk of type {kind!r} is not in the ai {self.ai_sdk} schema")
            handler(self, chunk)
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

    def _write(self) -> None:
        target = self._last_index(self.message["id"])
        if target is None and self._uses_earlier:
            target = self._last_index(self._original_id)
        if target is None:
            self._held.append(_LIVE)
        else:
            self._held[target] = _SNAPSHOT
        self._unwritten = 0

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

    def _start(self, chunk: Mapping[str, Any]) -> None:
        message_id = chunk.get("messageId")
        metadata = chunk.get("messageMetadata")
        if message_id is not None and message_id != self.message["id"]:
            self._freeze_snapshot()
        if message_id is not None:
            self.message["id"] = message_id
        self._merge_metadata(metadata)
        if message_id is not None or metadata is not None:
            self._write()

    def _metadata(self, chunk: Mapping[str, Any]) -> None:
        """``finish`` and ``message-metadata``: metadata merged into the message's."""
        reason = chunk.get("finishReason")
        if chunk["type"] == "finish" and self.ai_sdk < 7 and reason == "interrupted":
            raise Refused("the finish reason 'interrupted' is not in the ai 6 schema")
        metadata = chunk.get("messageMetadata")
        self._merge_metadata(metadata)
        if metadata is not None:
            self._write()

    def _merge_metadata(self, metadata: Any) -> None:
        if metadata is None:
            return
        held = self.message.get("metadata")
        self.message["metadata"] = merge_objects(held, metadata) if held is not None else metadata

    def _start_step(self, chunk: Mapping[str, Any]) -> None:
        self.message["parts"].append({"type": "step-start"})
        self._unwritten += 1  # the client pushes it without a write

    def _finish_step(self, chunk: Mapping[str, Any]) -> None:
        if self.ai_sdk < 7:  # ai 7 leaves open parts to their own end chunks
            self._open_texts, self._open_reasoning = {}, {}

    def _reset_step(self, chunk: Mapping[str, Any]) -> None:
        removed = len(step_parts(self.message))
        self._open_texts, self._open_reasoning = {}, {}
        self._tools.partial_calls.clear()
        if removed:
            del self.message["parts"][-removed:]
            self._write()

    def _error(self, chunk: Mapping[str, Any]) -> None:
        raise Refused(f"error chunk: {chunk.get('errorText')}")

    def _nothing(self, chunk: Mapping[str, Any]) -> None:
        """``abort``: the client passes it on and changes nothing."""

    def _block_start(self, chunk: Mapping[str, Any]) -> None:
        """``text-start`` / ``reasoning-start``: a streaming part, open under the chunk's id."""
        if chunk["type"] == "text-start":
            part: Message = {"type": "text", "text": ""}
        else:
            part = {"type": "reasoning", "id": chunk_id(chunk, "id"), "text": ""}
        put(part, "providerMetadata", chunk.get("providerMetadata", ABSENT))
        part["state"] = "streaming"
        self._open(chunk)[chunk_id(chunk, "id")] = part
        self.message["parts"].append(part)
        self._write()

    def _block_delta(self, chunk: Mapping[str, Any]) -> None:
        part = self._open_part(chunk)
        part["text"] += chunk.get("delta", "")
        self._keep_metadata(part, chunk)
        self._write()

    def _block_end(self, chunk: Mapping[str, Any]) -> None:
        part = self._open_part(chunk)
        part["state"] = "done"
        if chunk["type"] == "text-end" and self.ai_sdk >= 7 and given(chunk.get("citations")):
            part["citations"] = chunk["citations"]
        self._keep_metadata(part, chunk)
        del self._open(chunk)[chunk_id(chunk, "id")]
        self._write()

    def _open(self, chunk: Mapping[str, Any]) -> dict[str, Message]:
        return self._open_texts if chunk["type"].startswith("text") else self._open_reasoning

    def _open_part(self, chunk: Mapping[str, Any]) -> Message:
        part = self._open(chunk).get(chunk_id(chunk, "id"))
        if part is None:
            raise Refused(f"{chunk['type']} for no open part {chunk.get('id')!r}")
        return part

    @staticmethod
    def _keep_metadata(part: Message, chunk: Mapping[str, Any]) -> None:
        metadata = chunk.get("providerMetadata")
        if given(metadata):
            part["providerMetadata"] = metadata

    def _pushed(self, chunk: Mapping[str, Any]) -> None:
        """Parts added as they come: files, sources, ai 7's custom and steering parts."""
        kind = chunk["type"]
        keys = _PUSHED_KEYS[kind]
        part: Message = {"type": kind}
        for key in keys:
            put(part, key, chunk.get(key, ABSENT))
        if kind in ("file", "reasoning-file") and given(chunk.get("providerMetadata")):
            part["providerMetadata"] = chunk["providerMetadata"]
        self.message["parts"].append(part)
        self._write()

    def _data(self, chunk: Mapping[str, Any]) -> None:
        if data_part(self.message, chunk):
            self._write()

    def _tool(self, chunk: Mapping[str, Any]) -> None:
        self._tools.apply(chunk)
        self._write()


_PUSHED_KEYS: dict[str, tuple[str, ...]] = {
    "file": ("mediaType", "url"),
    "reasoning-file": ("mediaType", "url"),
    "source-url": ("sourceId", "url", "title", "providerMetadata"),
    "source-document": ("sourceId", "mediaType", "title", "filename", "providerMetadata"),
    "custom": ("kind", "providerMetadata"),
    "steering-message": ("id", "parts"),
}

_Handler: TypeAlias = Callable[[MessageFold, Mapping[str, Any]], None]
_HANDLERS: dict[str, _Handler] = {
    "start": MessageFold._start,
    "finish": MessageFold._metadata,
    "message-metadata": MessageFold._metadata,
    "start-step": MessageFold._start_step,
    "finish-step": MessageFold._finish_step,
    "reset-step": MessageFold._reset_step,
    "error": MessageFold._error,
    "abort": MessageFold._nothing,
    **dict.fromkeys(("text-start", "reasoning-start"), MessageFold._block_start),
    **dict.fromkeys(("text-delta", "reasoning-delta"), MessageFold._block_delta),
    **dict.fromkeys(("text-end", "reasoning-end"), MessageFold._block_end),
    **dict.fromkeys(_PUSHED_KEYS, MessageFold._pushed),
    **dict.fromkeys(
        (
            "tool-input-start",
            "tool-input-delta",
            "tool-input-available",
            "tool-input-error",
            "tool-approval-request",
            "tool-approval-response",
            "tool-output-available",
            "tool-output-error",
            "tool-output-denied",
        ),
        MessageFold._tool,
    ),
}
