"""Turning what the client sent into ADK content.

User messages become a ``types.Content`` with text and inline-data parts; the text and files
of a steering message join them (docs/adr/0022). Files must be ``data:`` URLs: the server never
fetches a URL the client names, nor a provider's copy named by ``providerReference`` (no
server-side request forgery, no surprise latency). Parts the model has no use for (reasoning,
sources, data, ai 7's ``custom`` and ``reasoning-file``…) are left out on purpose.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Iterable
from typing import Any

from google.genai import types

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.ui_messages import (
    AnyToolUIPart,
    CustomUIPart,
    DataUIPart,
    FileUIPart,
    ReasoningFileUIPart,
    ReasoningUIPart,
    SourceDocumentUIPart,
    SourceUrlUIPart,
    SteeringMessageUIPart,
    StepStartUIPart,
    TextUIPart,
    UIMessage,
)

logger = logging.getLogger(__name__)

_DISPLAY_ONLY = (
    ReasoningUIPart
    | StepStartUIPart
    | SourceUrlUIPart
    | SourceDocumentUIPart
    | DataUIPart
    | CustomUIPart
    | ReasoningFileUIPart
)

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


def steering_input(steering: Iterable[SteeringMessageUIPart]) -> list[types.Part]:
    """The text and files of steering messages, in order: what the user added to a turn."""
    parts: list[types.Part] = []
    for message in steering:
        for part in message.parts:
            if isinstance(part, TextUIPart):
                if part.text:
                    parts.append(types.Part(text=part.text))
            else:
                parts.append(file_part(part))
    return parts


def user_content(message: UIMessage) -> types.Content:
    """The ADK content of a user message: its text and files, and those of its steering
    messages, in order."""
    if message.role != "user":
        raise RequestError(422, f"message {message.id!r} must be a user message")
    parts: list[types.Part] = []
    left_out: list[str] = []
    for part in message.parts:
        if isinstance(part, TextUIPart):
            if part.text:
                parts.append(types.Part(text=part.text))
            if part.citations:
                left_out.append("text citations")
        elif isinstance(part, FileUIPart):
            parts.append(file_part(part))
        elif isinstance(part, SteeringMessageUIPart):
            parts.extend(steering_input([part]))
        elif isinstance(part, _DISPLAY_ONLY):
            left_out.append(part.type)  # display-only: nothing for the model
        else:
            raise RequestError(422, f"a user message cannot contain a {part.type!r} part")
    if left_out:
        # Part types only: never the user's content.
        logger.debug("message %s: left out of the model's input: %s", message.id, left_out)
    if not parts:
        raise RequestError(422, f"message {message.id!r} has no text or file to send")
    return types.Content(role="user", parts=parts)


def browser_result(part: AnyToolUIPart) -> dict[str, Any]:
    """The result a browser-executed tool returned, as ADK's function response: its output
    (wrapped when it is not an object), or ``{"error": …}`` for ``output-error``."""
    if part.state == "output-error":
        return {"error": part.error_text or "The tool failed in the browser."}
    if isinstance(part.output, dict):
        return dict(part.output)
    return {"result": part.output}


def is_voice_turn(message: UIMessage) -> bool:
    """A user message with nothing to say in text: on ``/live`` the words come as audio."""
    return bool(message.parts) and all(
        isinstance(p, DataUIPart | StepStartUIPart) for p in message.parts
    )
