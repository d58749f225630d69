"""File parts: ``file``, and ai 7's ``reasoning-file``.

- From ADK: inline data becomes a ``file`` part with a ``data:`` URL, except raw PCM audio,
  which is not a playable file and goes out as a transient ``data-pcm`` part the page plays
  (``inline_data_chunk``); a file the model names by URI is a ``file`` part with that URL.
- The fold: the part as the chunk came (its provider metadata only when it has some); the
  rebuild: the ``file`` chunk again (no chunk of ours makes a ``reasoning-file``).
- The request: ``FileUIPart`` (a user's file goes to the model as inline data, ``file_part``)
  and ``ReasoningFileUIPart`` (shown only). Files must be ``data:`` URLs: the server never
  fetches a URL the client names, nor a provider's copy named by ``providerReference`` (no
  server-side request forgery, no surprise latency).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Mapping
from typing import Any, Literal

from google.genai import types

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk, FileChunk
from adk_stream_protocol.protocol.clients import AiSdkClient
from adk_stream_protocol.protocol.parts.base import (
    Chunk,
    Fold,
    FoldTarget,
    PartKind,
    UIPart,
    given,
    pushed,
)

logger = logging.getLogger(__name__)


# -- from ADK ----------------------------------------------------------------------------------


def inline_data_chunk(blob: types.Blob) -> BaseChunk:
    mime = blob.mime_type or "application/octet-stream"
    encoded = base64.b64encode(blob.data or b"").decode("ascii")
    if mime.startswith("audio/pcm"):
        # Raw PCM is not a playable file: the client consumes it as transient data.
        return DataChunk(
            type="data-pcm",
            data={"data": encoded, "mediaType": mime, "sampleRate": pcm_rate(mime)},
            transient=True,
        )
    return FileChunk(url=f"data:{mime};base64,{encoded}", media_type=mime)


def file_data_chunk(file_data: types.FileData) -> FileChunk:
    """A file the model names by URI (it has one: the converter checks)."""
    assert file_data.file_uri is not None
    media_type = file_data.mime_type or "application/octet-stream"
    return FileChunk(url=file_data.file_uri, media_type=media_type)


def is_audio(part: types.Part) -> bool:
    blob = part.inline_data
    return blob is not None and (blob.mime_type or "").startswith("audio/")


def pcm_rate(mime: str) -> int:
    for param in mime.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key == "rate" and value.isdigit():
            return int(value)
    return 24000  # Gemini's output rate, when the mime type does not say


# -- the fold and the rebuild ------------------------------------------------------------------


class FileUIPart(UIPart):
    type: Literal["file"]
    # ai 7 also allows a bare top-level type ("image") or a wildcard ("image/*").
    media_type: str
    # Still required in ai 7, even beside a provider reference (then it is often "").
    url: str
    filename: str | None = None
    # ai 7: provider name -> id of a file uploaded to that provider (never fetched here).
    provider_reference: dict[str, str] | None = None


class ReasoningFileUIPart(UIPart):
    """ai 7: a file the model produced while reasoning."""

    type: Literal["reasoning-file"]
    media_type: str
    url: str


def _fold_file(target: FoldTarget, chunk: Chunk) -> None:
    """A ``file`` or ``reasoning-file`` chunk: the part as it came, its provider metadata only
    when it has some."""
    part = pushed(chunk, ("mediaType", "url"))
    if given(chunk.get("providerMetadata")):
        part["providerMetadata"] = chunk["providerMetadata"]
    target.message["parts"].append(part)
    target.write()


class Files(PartKind):
    """``file`` parts."""

    part_types = ("file",)
    request_parts = (("file", FileUIPart),)

    def folds(self) -> dict[str, Fold]:
        return {"file": self._file}

    def _file(self, target: FoldTarget, chunk: Chunk) -> None:
        _fold_file(target, chunk)

    @classmethod
    def rebuild(
        cls, part: Mapping[str, Any], client: AiSdkClient, block_id: str
    ) -> list[BaseChunk]:
        metadata = part.get("providerMetadata")
        file = FileChunk(url=part["url"], media_type=part["mediaType"], provider_metadata=metadata)
        return [file]

    @classmethod
    def model_input(cls, part: UIPart) -> tuple[list[types.Part], list[str]]:
        assert isinstance(part, FileUIPart)
        return [file_part(part)], []


class ReasoningFiles(PartKind):
    """ai 7's ``reasoning-file`` parts: folded as files are; shown only, and never rebuilt (no
    chunk of ours makes one)."""

    part_types = ("reasoning-file",)
    request_parts = (("reasoning-file", ReasoningFileUIPart),)

    def folds(self) -> dict[str, Fold]:
        return {"reasoning-file": self._file}

    def _file(self, target: FoldTarget, chunk: Chunk) -> None:
        _fold_file(target, chunk)


# -- a user's file as the model's input ---------------------------------------------------------

# What Gemini accepts as inline input; anything else is refused with a readable reason.
_ACCEPTED_MEDIA_PREFIXES = ("image/", "audio/", "video/", "text/")
_ACCEPTED_MEDIA_TYPES = frozenset({"application/pdf", "application/json"})

_DATA_URL = re.compile(
    r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^,;]+)*?)(?P<b64>;base64)?,(?P<data>.*)$",
    re.S,
)


# The formats a bare top-level type ("image", or "image/*") is narrowed to, by the first bytes,
# per top-level type and in the order ai 7's own `detectMediaType` (provider-utils) tries them.
_SIGNATURES: dict[str, tuple[tuple[str, re.Pattern[bytes]], ...]] = {
    top: tuple((mime, re.compile(pattern, re.S)) for mime, pattern in table)
    for top, table in {
        "image": (
            ("image/gif", rb"GIF8[79]a"),
            ("image/png", rb"\x89PNG"),
            ("image/jpeg", rb"\xff\xd8"),
            ("image/webp", rb"RIFF.{4}WEBP"),
            ("image/bmp", rb"BM.{4}\x00{4}"),
            ("image/tiff", rb"II\x2a\x00|MM\x00\x2a"),
            ("image/avif", rb"\x00{3}.ftypavif"),
            ("image/heic", rb"\x00{3}.ftypheic"),
        ),
        "application": (("application/pdf", rb"%PDF"),),
        "audio": (
            ("audio/aac", rb"\xff[\xf0\xf1\xf8\xf9]"),
            ("audio/mpeg", rb"\xff[\xfb\xfa\xf3\xf2\xe3\xe2]"),
            ("audio/wav", rb"RIFF.{4}WAVE"),
            ("audio/ogg", rb"OggS"),
            ("audio/flac", rb"fLaC"),
            ("audio/aac", rb"\x40\x15\x00\x00"),
            ("audio/webm", rb"\x1a\x45\xdf\xa3"),
            ("audio/mp4", rb"\x00{3}.ftyp"),
        ),
        "video": (
            ("video/mp4", rb"\x00{3}.ftyp"),
            ("video/webm", rb"\x1a\x45\xdf\xa3"),
            ("video/x-msvideo", rb"RIFF"),
        ),
    }.items()
}
_TOP_LEVEL_TYPES = frozenset({"image", "audio", "video", "text", "application"})
# An ID3v2 tag in front of MP3 audio is skipped up to this size, as ai 7 does.
_MAX_ID3_TAG_BYTES = 128 * 1024


def media_type_accepted(media_type: str) -> bool:
    media_type = media_type.split(";")[0].strip().lower()
    return media_type.startswith(_ACCEPTED_MEDIA_PREFIXES) or media_type in _ACCEPTED_MEDIA_TYPES


def read_data_url(url: str) -> tuple[str | None, bytes]:
    """A data: URL's own media type (None if its header names none) and its bytes."""
    match = _DATA_URL.match(url)
    if match is None:
        raise RequestError(422, "file parts must carry their content as a data: URL")
    mime, data = match.group("mime"), match.group("data")
    if not match.group("b64"):
        from urllib.parse import unquote_to_bytes

        return mime, unquote_to_bytes(data)
    try:
        return mime, base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RequestError(422, "a file part's data: URL is not valid base64") from exc


def sniff_media_type(top_level: str, data: bytes) -> str | None:
    """The format of ``data`` among the known ones of a top-level type, by its first bytes."""
    if top_level == "audio" and data[:3] == b"ID3" and len(data) > 10:
        size = (data[6] & 0x7F) << 21 | (data[7] & 0x7F) << 14 | (data[8] & 0x7F) << 7
        size |= data[9] & 0x7F
        if size <= _MAX_ID3_TAG_BYTES:
            data = data[10 + size :]
    for mime, signature in _SIGNATURES.get(top_level, ()):
        if signature.match(data):
            return mime
    return None


_NOT_ACCEPTED = "is not accepted; send images, audio, video, text or PDF"
_EXAMPLE_TYPES = {
    "image": "image/png",
    "audio": "audio/wav",
    "video": "video/mp4",
    "text": "text/plain",
    "application": "application/pdf",
}


def file_part(part: FileUIPart) -> types.Part:
    """A file as inline data, with a full media type (ADK and Gemini need one)."""
    if not part.url.startswith("data:") and part.provider_reference:
        providers = ", ".join(sorted(part.provider_reference))
        raise RequestError(
            422,
            f"a file part names only a copy uploaded to {providers} (providerReference); this "
            "server never fetches files, so send its bytes as a data: URL",
        )
    top, _, subtype = part.media_type.split(";")[0].strip().lower().partition("/")
    full = bool(subtype) and subtype != "*"
    accepted = media_type_accepted(part.media_type) if full else top in _TOP_LEVEL_TYPES
    if not accepted:
        raise RequestError(422, f"file type {part.media_type!r} {_NOT_ACCEPTED}")
    header_type, data = read_data_url(part.url)
    if part.provider_reference:
        logger.debug("file part: providerReference ignored, its data: URL used")
    if full:
        return types.Part(inline_data=types.Blob(mime_type=part.media_type, data=data))
    # ai 7: only the top-level type ("image"); the data: URL's header or the bytes name the rest.
    header_top, _, header_sub = (header_type or "").lower().partition("/")
    if header_top == top and header_sub and header_sub != "*":
        mime = header_type
    else:
        mime = sniff_media_type(top, data)
    if mime is None:
        raise RequestError(
            422,
            f"file type {part.media_type!r} names no subtype and the type of its data cannot "
            f"be told (its data: URL names none, and the bytes are no known {top} format); "
            f"send the full type, such as {_EXAMPLE_TYPES[top]!r}",
        )
    if not media_type_accepted(mime):
        raise RequestError(422, f"file type {mime!r} {_NOT_ACCEPTED}")
    return types.Part(inline_data=types.Blob(mime_type=mime, data=data))
