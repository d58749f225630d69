"""ADK's own log records of what our code handles and reports itself (docs/adr/0030, 0034).

When a store goes away under a run, ADK logs the failure at its own level before the
exception reaches us: ``Root node ... failed.`` at ERROR with the whole traceback, for
instance, and our code then answers the request and logs the outage's one WARNING
(``foundation.outages.Outages``). After a fence, ADK's routing warns about the fence's author
on the chat's next run (``Event from an unknown agent``).

``AdkLogs`` is a filter that each app installs on ADK's loggers while it runs
(``installed``). It moves to DEBUG only:

- a record at WARNING or above whose exception (``exc_info``, or an exception among its
  arguments) is a store's outage as ``outage_of`` tells it, outside a run's tool timeouts;
- a record at WARNING or above whose exception is, or was caused by, one of the server's
  refusals as ``protocol.refusals.refusal_in`` tells it by class (a tool the fence stopped, a
  write refused as stale): where it was made, the refusal logged its own WARNING;
- ADK's warning about an event from an unknown agent whose author is the app's fence author.

Everything else passes as it is. A record moved to DEBUG is dropped unless its logger logs at
DEBUG, as it would have been if ADK had logged it there.

It also keeps the user's credentials out of ADK's records, at every level (docs/adr/0065):
ADK logs what resumes a run (``rehydrated resume_inputs`` at DEBUG), which for a sign-in is the
``AuthConfig`` the page or the callback answered with. A record whose text holds a value under
a credential's key (an API key, OAuth2's redirect URL, code and tokens, a client secret or PKCE
verifier, a password or token; as a dict, JSON or a model's repr, in either spelling), or a
``code=`` or ``state=`` in a URL's query, keeps its text with each such value replaced by
``[redacted]``.

A filter of a logger sees only that logger's own records, not its children's, so the filter
is added to each of ADK's loggers: those that exist when the app starts, and those of ADK's
modules that log a run's failures, made now if ADK has not imported them yet.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from adk_stream_protocol.foundation.outages import outage_of
from adk_stream_protocol.protocol.refusals import refusal_in

ADK_LOGGERS = "google_adk"
# ADK's modules that log a run's or a session's failures; some are imported only on first use.
_FAILURE_LOGGERS = tuple(
    f"{ADK_LOGGERS}.google.adk.{module}"
    for module in (
        "runners",
        "agents.base_agent",
        "agents.llm_agent",
        "agents._agent_router",
        "flows.llm_flows.tools._caller",
        "flows.llm_flows.tools._batch_executor",  # a live tool's failure on google-adk 2.11
        "flows.llm_flows.tools._live_caller",  # ... and from 2.12 on
        "flows.llm_flows.tools._error_handler",
        "live._live_llm_flow",
        "live._runner_utils",
        "plugins.plugin_manager",
        "sessions.database_session_service",
        "sessions._session_util",
        "utils._runner_utils",
        # ... and those that log what resumes a run, a sign-in's answer included.
        "workflow._node_runner",
        "workflow._node_runner_utils",  # the seal of an aborted run, refused as stale
        "models.gemini_llm_connection",
    )
)
# ADK's line for an event whose author is no agent of the tree (google.adk.agents._agent_router).
UNKNOWN_AGENT = "Event from an unknown agent: %s, event id: %s"

# A credential's value in a record's text: under one of its keys, quoted (a dict's or a
# model's repr, JSON), or in a URL's query (an OAuth2 redirect).
_CREDENTIAL_KEYS = (
    r"api_?key|auth_?response_?uri|auth_?code|access_?token|refresh_?token|id_?token"
    r"|client_?secret|code_?verifier|password|token"
)
_QUOTED_CREDENTIAL = re.compile(
    rf"""(\b(?:{_CREDENTIAL_KEYS})['"]?\s*[:=]\s*)(['"])(?:(?!\2).)*\2""", re.IGNORECASE
)
_QUERY_CREDENTIAL = re.compile(r"([?&](?:code|state)=)[^&'\"\s]+")
REDACTED = "[redacted]"


class AdkLogs(logging.Filter):
    """ADK's records of a store's outage, of the server's refusals and of the app's fences,
    at DEBUG.
    ``fence_author``: the author of the app's fence events (store/sessions.py)."""

    def __init__(self, fence_author: str | None = None) -> None:
        super().__init__()
        self._fence_author = fence_author

    def filter(self, record: logging.LogRecord) -> bool:
        _redact_credentials(record)
        if record.levelno < logging.WARNING or not (
            self._is_outage(record) or self._is_refusal(record) or self._is_fence(record)
        ):
            return True
        if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
            return False
        record.levelno = logging.DEBUG
        record.levelname = logging.getLevelName(logging.DEBUG)
        return True

    @staticmethod
    def _is_outage(record: logging.LogRecord) -> bool:
        # A bare TimeoutError in a run may be a tool's own: not an outage.
        return any(outage_of(error, timeouts=False) is not None for error in _errors_of(record))

    @staticmethod
    def _is_refusal(record: logging.LogRecord) -> bool:
        return any(refusal_in(error) is not None for error in _errors_of(record))

    def _is_fence(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return (
            self._fence_author is not None
            and record.msg == UNKNOWN_AGENT
            and args[:1] == (self._fence_author,)
        )


def _errors_of(record: logging.LogRecord) -> list[BaseException]:
    """The record's exception (``exc_info``) and those among its arguments."""
    errors = [record.exc_info[1]] if record.exc_info and record.exc_info[1] else []
    args = record.args if isinstance(record.args, tuple) else ()
    return errors + [arg for arg in args if isinstance(arg, BaseException)]


def _redact_credentials(record: logging.LogRecord) -> None:
    """The record's text with the credentials in it redacted (its arguments merged in)."""
    try:
        text = record.getMessage()
    except Exception:
        return  # a record that cannot be formatted is reported by logging itself
    redacted = _QUERY_CREDENTIAL.sub(
        rf"\g<1>{REDACTED}", _QUOTED_CREDENTIAL.sub(rf"\g<1>\g<2>{REDACTED}\g<2>", text)
    )
    if redacted != text:
        record.msg, record.args = redacted, None


def adk_loggers() -> list[logging.Logger]:
    """ADK's loggers: those that exist now and those of its failure-logging modules."""
    manager = logging.Logger.manager
    names = {
        name
        for name, each in list(manager.loggerDict.items())
        if isinstance(each, logging.Logger)
        and (name == ADK_LOGGERS or name.startswith(f"{ADK_LOGGERS}."))
    }
    names.update(_FAILURE_LOGGERS)
    return [logging.getLogger(name) for name in sorted(names)]


@contextmanager
def installed(records: AdkLogs) -> Iterator[AdkLogs]:
    """``records`` on ADK's loggers while the block runs (an app's life)."""
    loggers = adk_loggers()
    for each in loggers:
        each.addFilter(records)
    try:
        yield records
    finally:
        for each in loggers:
            each.removeFilter(records)
