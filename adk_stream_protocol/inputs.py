"""Turning what the client sent into ADK content.

User messages become a ``types.Content`` with text and inline-data parts. Files must be
``data:`` URLs: the server never fetches a URL the client names (no server-side request
forgery, no surprise latency).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from google.genai import types

from adk_stream_protocol.errors import RequestError
from adk_stream_protocol.ui_messages import (
    AnyToolUIPart,
    DataUIPart,
    FileUIPart,
    ReasoningUIPart,
    SourceDocumentUIPart,
    SourceUrlUIPart,
    StepStartUIPart,
    TextUIPart,
    UIMessage,
)

# What Gemini accepts as inline input; anything else is refused with a readable reason.
_ACCEPTED_MEDIA_PREFIXES = ("image/", "audio/", "video/", "text/")
_ACCEPTED_MEDIA_TYPES = frozenset({"application/pdf", "application/json"})

_DATA_URL = re.compile(
    r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^,;]+)*?)(?P<b64>;base64)?,(?P<data>.*)$",
    re.S,
)


def media_type_accepted(media_type: str) -> bool:
    media_type = media_type.split(";")[0].strip().lower()
    return media_type.startswith(_ACCEPTED_MEDIA_PREFIXES) or media_type in _ACCEPTED_MEDIA_TYPES


def decode_data_url(url: str) -> bytes:
    match = _DATA_URL.match(url)
    if match is None:
        raise RequestError(422, "file parts must carry their content as a data: URL")
    data = match.group("data")
    if not match.group("b64"):
        from urllib.parse import unquote_to_bytes

        return unquote_to_bytes(data)
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RequestError(422, "a file part's data: URL is not valid base64") from exc


def file_part(part: FileUIPart) -> types.Part:
    if not media_type_accepted(part.media_type):
        raise RequestError(
            422,
            f"file type {part.media_type!r} is not accepted; send images, audio, video, "
            "text or PDF",
        )
    data = decode_data_url(part.url)
    return types.Part(inline_data=types.Blob(mime_type=part.media_type, data=data))


def user_content(message: UIMessage) -> types.Content:
    """The ADK content of a user message: its text and files, in order."""
    if message.role != "user":
        raise RequestError(422, f"message {message.id!r} must be a user message")
    parts: list[types.Part] = []
    for part in message.parts:
        if isinstance(part, TextUIPart):
            if part.text:
                parts.append(types.Part(text=part.text))
        elif isinstance(part, FileUIPart):
            parts.append(file_part(part))
        elif isinstance(
            part,
            ReasoningUIPart | StepStartUIPart | SourceUrlUIPart | SourceDocumentUIPart | DataUIPart,
        ):
            continue  # display-only parts: nothing for the model
        else:
            raise RequestError(422, f"a user message cannot contain a {part.type!r} part")
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
