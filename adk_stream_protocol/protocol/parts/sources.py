"""Source parts: ``source-url`` and ``source-document``.

- From ADK: Gemini's grounding, for every client (they are in the strict ai 6.0.25 set), once
  per source per response (``ResponseSources``); and for ai 7 the citations of a text's end
  (``citations_of``, which ``text.py`` calls). A source's id is the same in both
  (``source_id``), so a citation and its source part name the same source.
- The fold: the part as the chunk came; the rebuild: the chunk again.
- The request: ``SourceUrlUIPart``, ``SourceDocumentUIPart``, shown only.
"""

from __future__ import annotations

import hashlib
import mimetypes
from collections.abc import Mapping
from typing import Any, Literal

from google.genai import types

from adk_stream_protocol.protocol.chunks import (
    BaseChunk,
    Citation,
    CitationSource,
    SourceDocumentChunk,
    SourceUrlChunk,
)
from adk_stream_protocol.protocol.clients import AiSdkClient
from adk_stream_protocol.protocol.parts.base import (
    Chunk,
    Fold,
    FoldTarget,
    PartKind,
    UIPart,
    pushed,
)


def source_id(key: str) -> str:
    """Stable per URI (or document name), so a source keeps its id across the parts and the
    responses of a chat, in citations and in source parts alike."""
    return "src_" + hashlib.sha256(key.encode()).hexdigest()[:12]


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


# -- the fold, the rebuild and the request --------------------------------------------------------


class SourceUrlUIPart(UIPart):
    type: Literal["source-url"]
    source_id: str
    url: str
    title: str | None = None


class SourceDocumentUIPart(UIPart):
    type: Literal["source-document"]
    source_id: str
    media_type: str
    title: str
    filename: str | None = None


_URL_KEYS = ("sourceId", "url", "title", "providerMetadata")
_DOCUMENT_KEYS = ("sourceId", "mediaType", "title", "filename", "providerMetadata")


class Sources(PartKind):
    """``source-url`` and ``source-document`` parts."""

    part_types = ("source-url", "source-document")
    request_parts = (
        ("source-url", SourceUrlUIPart),
        ("source-document", SourceDocumentUIPart),
    )

    def folds(self) -> dict[str, Fold]:
        return {"source-url": self._url, "source-document": self._document}

    def _url(self, target: FoldTarget, chunk: Chunk) -> None:
        target.message["parts"].append(pushed(chunk, _URL_KEYS))
        target.write()

    def _document(self, target: FoldTarget, chunk: Chunk) -> None:
        target.message["parts"].append(pushed(chunk, _DOCUMENT_KEYS))
        target.write()

    @classmethod
    def rebuild(
        cls, part: Mapping[str, Any], client: AiSdkClient, block_id: str
    ) -> list[BaseChunk]:
        metadata = part.get("providerMetadata")
        if part["type"] == "source-url":
            return [
                SourceUrlChunk(
                    source_id=part["sourceId"],
                    url=part["url"],
                    title=part.get("title"),
                    provider_metadata=metadata,
                )
            ]
        return [
            SourceDocumentChunk(
                source_id=part["sourceId"],
                media_type=part["mediaType"],
                title=part["title"],
                filename=part.get("filename"),
                provider_metadata=metadata,
            )
        ]
