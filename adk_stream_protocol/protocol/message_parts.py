"""What the message fold (``message_fold.py``) shares: JavaScript's ``undefined`` in JSON
terms, the current step, data parts and message metadata as the AI SDK client updates them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A key the client leaves undefined: absent from the JSON of the message (``None`` is null).
ABSENT: Any = object()

# Chunk types only ai 7's schema accepts: an ai 6 client stops reading at one.
AI7_ONLY_CHUNKS = frozenset(
    {"custom", "reasoning-file", "steering-message", "tool-approval-response", "reset-step"}
)


class Refused(Exception):
    """The client stops reading the response here (an ``error`` chunk, or one it cannot apply)."""


def chunk_id(chunk: Mapping[str, Any], key: str) -> str:
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


def step_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The parts of the current step: those after the last ``step-start``."""
    parts: list[dict[str, Any]] = message["parts"]
    for index in range(len(parts) - 1, -1, -1):
        if parts[index].get("type") == "step-start":
            return parts[index + 1 :]
    return list(parts)


def data_part(message: dict[str, Any], chunk: Mapping[str, Any]) -> bool:
    """A ``data-*`` chunk: transient ones reach only ``onData``; one with the type and id of
    a part already in the message replaces that part's data; any other is added, as sent.
    True when the message changed."""
    if chunk.get("transient"):
        return False
    if given(chunk.get("id")):
        for part in message["parts"]:
            if part.get("type") == chunk["type"] and part.get("id") == chunk["id"]:
                put(part, "data", chunk.get("data", ABSENT))
                return True
    message["parts"].append(dict(chunk))
    return True


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
