"""What an error looks like to the browser, and to the server log.

The browser gets one short sentence and a reference; the log gets the whole error under the
same reference. With ``error_detail`` on (development), the browser gets the details too.
"""

from __future__ import annotations

import logging
import uuid

logger = logging.getLogger(__name__)

# ADK error codes that come from the model's finish reason: they describe the answer, not
# the server's internals, so they are shown even when details are hidden.
_BLOCKED_CODES = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "LANGUAGE",
    }
)


def new_error_reference() -> str:
    return uuid.uuid4().hex[:12]


def describe_error(code: str | None, message: str | None, *, detail: bool, reference: str) -> str:
    """Return the ``errorText`` for an error with this ADK code and message."""
    if detail:
        text = ": ".join(part for part in (code, message) if part) or "Unknown error"
        return f"{text} (ref {reference})"
    if code in _BLOCKED_CODES:
        summary = f"The model stopped because the answer was blocked ({code})."
    elif code == "MAX_TOKENS":
        summary = "The answer reached the model's length limit."
    else:
        summary = "The agent could not complete the answer."
    return f"{summary} (ref {reference})"


# ADK's code for a run stopped through its abort signal: the client left, nothing failed.
ABORTED_CODE = "INVOCATION_ABORTED"


def log_error(
    reference: str, code: str | None, message: str | None, exc: BaseException | None = None
) -> None:
    level = logging.INFO if code == ABORTED_CODE else logging.ERROR
    logger.log(
        level, "agent error ref=%s code=%s message=%s", reference, code, message, exc_info=exc
    )


class RequestError(Exception):
    """A request the server refuses, with the HTTP status and a message for the client."""

    def __init__(self, status: int, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after  # seconds, for a 503: sent as `Retry-After`
