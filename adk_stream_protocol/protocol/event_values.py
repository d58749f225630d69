"""Values read out of ADK events, made into what the UI message stream carries: finish
reasons, and JSON-safe values (tool arguments and results, state). What is one part kind's
own (a tool's error, an audio format, a citation) is in that kind's module (``parts/``).
"""

from __future__ import annotations

from typing import Any

from google.genai import types
from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from adk_stream_protocol.protocol.chunks import FinishReason

_FINISH_REASONS: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content-filter",
    "RECITATION": "content-filter",
    "LANGUAGE": "content-filter",
    "BLOCKLIST": "content-filter",
    "PROHIBITED_CONTENT": "content-filter",
    "SPII": "content-filter",
    "IMAGE_SAFETY": "content-filter",
    "IMAGE_PROHIBITED_CONTENT": "content-filter",
    "IMAGE_RECITATION": "content-filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
}


def map_finish_reason(reason: types.FinishReason | str | None) -> FinishReason | None:
    """Map an ADK/genai finish reason; anything unknown becomes ``other``, never passed on."""
    if reason is None:
        return None
    name = reason.name if isinstance(reason, types.FinishReason) else str(reason)
    if name == "FINISH_REASON_UNSPECIFIED":
        return None
    return _FINISH_REASONS.get(name, "other")


def json_safe(value: Any) -> JsonValue:
    """Tool arguments and results may hold bytes, dates or objects: make them JSON values."""
    safe: JsonValue = to_jsonable_python(value, fallback=str, bytes_mode="base64")
    return safe
