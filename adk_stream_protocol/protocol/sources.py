"""Gemini's grounding as ``source-url`` and ``source-document`` parts (docs/adr/0025).

Every client gets them (they are in the strict ai 6.0.25 set), once per source per response.
A source's id is the one ai 7's ``text-end.citations`` give it (``event_values``), so a
citation and its source part name the same source.
"""

from __future__ import annotations

import mimetypes

from google.genai import types

from adk_stream_protocol.protocol.chunks import BaseChunk, SourceDocumentChunk, SourceUrlChunk
from adk_stream_protocol.protocol.event_values import source_id


class ResponseSources:
    """The sources one response has sent, so each goes out once."""

    def __init__(self) -> None:
        self._sent: set[str] = set()

    def new_in(self, grounding: types.GroundingMetadata) -> list[BaseChunk]:
        out: list[BaseChunk] = []
        for chunk in grounding.grounding_chunks or []:
            source = _source(chunk)
            if source is not None and source.source_id not in self._sent:
                self._sent.add(source.source_id)
                out.append(source)
        return out


def _source(chunk: types.GroundingChunk) -> SourceUrlChunk | SourceDocumentChunk | None:
    place = chunk.web or chunk.maps
    if place is not None and place.uri:
        return SourceUrlChunk(source_id=source_id(place.uri), url=place.uri, title=place.title)
    document = chunk.retrieved_context
    if document is None:
        return None
    key = document.uri or document.document_name or document.title
    if not key:
        return None
    name = (document.document_name or document.uri or "").rstrip("/").rpartition("/")[2]
    media_type = mimetypes.guess_type(name)[0] if name else None
    return SourceDocumentChunk(
        source_id=source_id(key),
        media_type=media_type or "text/plain",
        title=document.title or name or key,
        filename=name or None,
    )
