"""A store that is down is an outage to report, not a failure of ours (docs/adr/0030-outages.md).

``outage_of`` tells whether an exception means PostgreSQL (the session store) or Redis cannot
be reached now: refused, reset, stale, starting up, frozen past a timeout. Such a request gets
503 with ``Retry-After``, a socket an ``error`` or a close with a reason, an open body an
``error`` chunk and its end.

``Outages`` keeps the log readable while a store is down: one WARNING per store when the
outage starts, DEBUG for each further failure, one INFO when it is back. The drivers are
optional extras, so their exception classes are imported where they are looked at.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from adk_stream_protocol.foundation.errors import RequestError

logger = logging.getLogger(__name__)

REDIS = "redis"
SESSION_STORE = "session store"
# All of the session store's pooled connections stayed busy for the pool's timeout: no
# outage of the server, but the same answer (503), under its own name in the log.
SESSION_POOL = "session store pool"

# A store that comes back is usable at once (the pools reconnect), so clients retry soon.
RETRY_AFTER_SECONDS = 1
UNAVAILABLE_MESSAGE = "the chat service is unavailable right now; try again shortly"
BUSY_MESSAGE = "the chat store is busy; try again shortly"
# What an open response's `error` chunk says when a store went away under it.
INTERRUPTED_MESSAGE = "the chat service became unavailable during this answer; send it again"
# The same, when a tool had run and its result is kept to be saved.
RESULT_KEPT_MESSAGE = (
    "the chat service became unavailable after a tool ran; its result will be saved when the "
    "service is back. Send it again in a moment"
)
# A request to a chat whose kept results wait for the store (503 with Retry-After).
RESULTS_WAITING_MESSAGE = (
    "this chat's last tool results wait to be saved until the chat service is back; try again "
    "shortly"
)

# SQLSTATEs that mean the server is away or refusing connections: the connection class (08),
# admin/crash shutdown and "starting up" (57P01-57P03), too many connections (53300).
_UNAVAILABLE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then its causes and contexts (each once)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def outage_of(exc: BaseException, *, timeouts: bool = True) -> str | None:
    """``REDIS`` or ``SESSION_STORE`` when the exception means that store is unreachable now;
    None for anything else. ``timeouts``: whether a bare ``TimeoutError`` counts (a
    PostgreSQL that does not answer within its connect or command timeout). Inside an agent's
    run it does not: a tool may time out on its own."""
    for link in _chain(exc):
        store = _store_of(link, timeouts=timeouts)
        if store is not None:
            return store
    return None


def _store_of(exc: BaseException, *, timeouts: bool) -> str | None:
    if _is_redis_outage(exc):
        return REDIS
    if _is_pool_timeout(exc):
        return SESSION_POOL
    if _is_database_outage(exc):
        return SESSION_STORE
    # asyncpg's connect raises the socket's own errors (refused, reset) and TimeoutError.
    if isinstance(exc, ConnectionError) or (timeouts and isinstance(exc, TimeoutError)):
        return SESSION_STORE
    return None


def _is_redis_outage(exc: BaseException) -> bool:
    try:
        from redis import exceptions as redis
    except ImportError:  # pragma: no cover - depends on the installed extras
        return False
    # ConnectionError covers BusyLoadingError (a Redis loading its data after a restart).
    return isinstance(exc, redis.ConnectionError | redis.TimeoutError | redis.ReadOnlyError)


def _is_pool_timeout(exc: BaseException) -> bool:
    try:
        from sqlalchemy import exc as sql
    except ImportError:  # pragma: no cover - depends on the installed extras
        return False
    return isinstance(exc, sql.TimeoutError)


def _is_database_outage(exc: BaseException) -> bool:
    try:
        from sqlalchemy import exc as sql
    except ImportError:  # pragma: no cover - depends on the installed extras
        return False
    if isinstance(exc, sql.OperationalError | sql.InterfaceError):
        return True
    if isinstance(exc, sql.DBAPIError) and exc.connection_invalidated:
        return True  # a pooled connection that the server closed (08003)
    sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None) or getattr(
        exc, "sqlstate", None
    )
    if isinstance(sqlstate, str) and (
        sqlstate.startswith("08") or sqlstate in _UNAVAILABLE_SQLSTATES
    ):
        return True
    try:
        import asyncpg  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - depends on the installed extras
        return False
    return isinstance(
        exc,
        asyncpg.PostgresConnectionError
        | asyncpg.CannotConnectNowError
        | asyncpg.TooManyConnectionsError
        | asyncpg.ConnectionDoesNotExistError,
    )


class _Down:
    def __init__(self) -> None:
        self.since = time.monotonic()
        self.failures = 1


class Outages:
    """Which stores are down in this process, for one WARNING per outage and an INFO at its
    end. Owned by the application (``Bridge``) and given to what talks to the stores."""

    def __init__(self) -> None:
        self._down: dict[str, _Down] = {}

    def down(self, store: str, exc: BaseException, where: str) -> None:
        """A failure that a store's outage explains. Logged without a traceback: the
        exception's type and text say which outage it is."""
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        state = self._down.get(store)
        if state is not None:
            state.failures += 1
            logger.debug("%s still unavailable at %s (%s)", store, where, reason)
            return
        self._down[store] = _Down()
        logger.warning(
            "%s unavailable (%s) at %s; answering 503 until it is back", store, reason, where
        )

    def up(self, *stores: str) -> None:
        """The store answered: if it was down, the outage is over."""
        if not self._down:
            return  # the usual case: nothing to look at
        for store in stores:
            state = self._down.pop(store, None)
            if state is not None:
                logger.info(
                    "%s back after %.1f s; %d failures meanwhile",
                    store,
                    time.monotonic() - state.since,
                    state.failures,
                )

    def is_down(self, store: str) -> bool:
        return store in self._down

    def interrupted(self, exc: BaseException, where: str) -> str | None:
        """The ``error`` text for a response that a store's outage stopped (logged here);
        None when the exception is no outage. A bare ``TimeoutError`` is none here: a run's
        tools may time out on their own."""
        store = outage_of(exc, timeouts=False)
        if store is None:
            return None
        self.down(store, exc, where)
        return INTERRUPTED_MESSAGE

    def refusal(self, exc: BaseException, where: str) -> RequestError | None:
        """The 503 for a request that an outage stopped (logged here), or None when the
        exception is no outage."""
        store = outage_of(exc)
        if store is None:
            return None
        self.down(store, exc, where)
        message = BUSY_MESSAGE if store == SESSION_POOL else UNAVAILABLE_MESSAGE
        return RequestError(503, message, retry_after=RETRY_AFTER_SECONDS)
