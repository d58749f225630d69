"""Values read out of ADK events, made into what the UI message stream carries: finish
reasons, JSON-safe tool arguments and results, tool errors, audio formats, citations.
"""

from __future__ import annotations

import hashlib
from typing import Any

from google.genai import types
from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from adk_stream_protocol.protocol.chunks import Citation, CitationSource, FinishReason

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


def tool_error_text(response: Any) -> str | None:
    """The error text of an error-shaped tool result, or None for a normal result.

    Rule (docs/adr/0003): a dict whose ``error`` key holds a non-empty value is a failure.
    ADK itself reports tool failures this way (``{"error": "..."}``).
    """
    if isinstance(response, dict):
        error = response.get("error")
        if error:
            return error if isinstance(error, str) else str(json_safe(error))
    return None


def is_audio(part: types.Part) -> bool:
    blob = part.inline_data
    return blob is not None and (blob.mime_type or "").startswith("audio/")


def pcm_rate(mime: str) -> int:
    for param in mime.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key == "rate" and value.isdigit():
            return int(value)
    return 24000  # Gemini's output rate, when the mime type does not say


def citations_of(grounding: types.GroundingMetadata, text: str) -> list[Citation]:
    """Gemini's grounding of a text as citations: one per (supported stretch, source).

    Gemini counts a stretch's offsets in bytes of the whole answer; the client counts
    characters of one text part, so the stretch is found by its own text. Sources without a
    URI (nothing to link to) are left out; with no stretches, each source cites the text."""
    sources = [_citation_source(chunk) for chunk in grounding.grounding_chunks or []]
    citations: list[Citation] = []
    for support in grounding.grounding_supports or []:
        cited = support.segment.text if support.segment else None
        start = text.find(cited) if cited else -1
        span = (start, start + len(cited)) if cited and start >= 0 else (None, None)
        for index in support.grounding_chunk_indices or []:
            source = sources[index] if 0 <= index < len(sources) else None
            if source is not None:
                citations.append(
                    Citation(
                        source=source, start_index=span[0], end_index=span[1], cited_text=cited
                    )
                )
    if not citations:
        citations = [Citation(source=source) for source in sources if source is not None]
    return citations


def _citation_source(chunk: types.GroundingChunk) -> CitationSource | None:
    place = chunk.web or chunk.retrieved_context
    if place is None or not place.uri:
        return None
    return CitationSource(id=source_id(place.uri), url=place.uri, title=place.title or None)


def source_id(key: str) -> str:
    """Stable per URI (or document name), so a source keeps its id across the parts and the
    responses of a chat, in citations and in source parts alike."""
    return "src_" + hashlib.sha256(key.encode()).hexdigest()[:12]
