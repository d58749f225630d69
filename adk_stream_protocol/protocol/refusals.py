"""Refusals the server makes on purpose and answers itself: they log one WARNING where they
are made, never an ERROR or a traceback (docs/adr/0072).

Two checks refuse a run that no longer holds its chat: the tool-start check of
``plugins/tool_starts.py`` (``ToolNotStarted``, a ``Refusal``) and ADK's stale-session check on
an append (``StaleSessionError``), which the fence of ``store/sessions.py`` sets off. The
place that makes each refusal logs its WARNING, naming the chat; everything that sees the
exception afterwards (ADK's loggers, our "agent error" line) knows it by its class and stays
quiet. ADK wraps a callback's exception in its own ``RuntimeError``, so the exception's causes
are looked at too. Any other exception keeps its ERROR and traceback.
"""

from __future__ import annotations

import logging

from google.adk.errors import StaleSessionError

from adk_stream_protocol.foundation.errors import log_error

logger = logging.getLogger(__name__)


class Refusal(RuntimeError):
    """A run stopped on purpose, logged once at WARNING where it was stopped."""


def refusal_in(exc: BaseException | None) -> BaseException | None:
    """The refusal ``exc`` is, or was caused by; None for any other failure."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, (Refusal, StaleSessionError)):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def log_failure(reference: str, exc: BaseException) -> None:
    """A run's failure under its error's reference: a refusal at DEBUG, one line (its WARNING
    was logged where it was made); anything else as ``log_error`` logs it, with its traceback."""
    refusal = refusal_in(exc)
    if refusal is None:
        log_error(reference, type(exc).__name__, str(exc), exc)
    else:
        logger.debug("refused run ref=%s code=%s", reference, type(refusal).__name__)
