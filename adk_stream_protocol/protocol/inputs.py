"""What the client sends, as the model's input (ADK content): a user message's parts, the
steering messages a continuation carries, a browser tool's result.

Each part's kind says what it gives (``PartKind.model_input``): text, files as inline data
(``parts/files.py``: ``data:`` URLs only, never fetched), the text and files of a steering
message. Parts the model has no use for (reasoning, sources, data, ai 7's ``custom`` and
``reasoning-file``…) are left out on purpose; a tool part has no place in a user's message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from google.genai import types

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.parts.data import DataUIPart
from adk_stream_protocol.protocol.parts.kinds import kind_of_part
from adk_stream_protocol.protocol.parts.steering import Steering, SteeringMessageUIPart
from adk_stream_protocol.protocol.parts.steps import StepStartUIPart
from adk_stream_protocol.protocol.parts.tools import AnyToolUIPart
from adk_stream_protocol.protocol.ui_messages import UIMessage

logger = logging.getLogger(__name__)


def user_content(message: UIMessage) -> types.Content:
    """The ADK content of a user message: its text and files, and those of its steering
    messages, in order."""
    if message.role != "user":
        raise RequestError(422, f"message {message.id!r} must be a user message")
    parts: list[types.Part] = []
    left_out: list[str] = []
    for part in message.parts:
        given, left = kind_of_part(part).model_input(part)
        parts.extend(given)
        left_out.extend(left)
    if left_out:
        # Part types only: never the user's content.
        logger.debug("message %s: left out of the model's input: %s", message.id, left_out)
    if not parts:
        raise RequestError(422, f"message {message.id!r} has no text or file to send")
    return types.Content(role="user", parts=parts)


def steering_input(steering: Iterable[SteeringMessageUIPart]) -> list[types.Part]:
    """The text and files of steering messages, in order: what the user added to a turn."""
    return [given for part in steering for given in Steering.model_input(part)[0]]


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
