"""Which failures are a store's outage, and how an outage is logged (docs/adr/0030-outages.md).
The outages themselves, on real stores, are in tests/faults."""

from __future__ import annotations

import logging

import pytest
import redis.exceptions
from sqlalchemy import exc as sql

from adk_stream_protocol.foundation.outages import (
    REDIS,
    SESSION_POOL,
    SESSION_STORE,
    Outages,
    outage_of,
)


def raised_from(exc: BaseException, cause: BaseException) -> BaseException:
    try:
        raise exc from cause
    except BaseException as raised:
        return raised


@pytest.mark.parametrize(
    ("exc", "store"),
    [
        (redis.exceptions.ConnectionError("Connection closed by server."), REDIS),
        (redis.exceptions.BusyLoadingError("loading"), REDIS),
        (redis.exceptions.TimeoutError("Timeout reading from socket"), REDIS),
        (ConnectionRefusedError(111, "Connect call failed"), SESSION_STORE),
        (TimeoutError(), SESSION_STORE),
        (sql.OperationalError("SELECT 1", {}, Exception("gone")), SESSION_STORE),
        (sql.TimeoutError("QueuePool limit reached"), SESSION_POOL),
        (raised_from(RuntimeError("while planning"), ConnectionResetError()), SESSION_STORE),
        (ValueError("a bug"), None),
        (redis.exceptions.ResponseError("WRONGTYPE"), None),
    ],
)
def test_what_counts_as_an_outage(exc: BaseException, store: str | None) -> None:
    assert outage_of(exc) == store


def test_a_timeout_inside_a_run_is_no_outage() -> None:
    """A tool may time out on its own; only a store's own errors count there."""
    assert outage_of(TimeoutError(), timeouts=False) is None
    assert outage_of(redis.exceptions.TimeoutError(), timeouts=False) == REDIS


def test_one_warning_per_outage_then_an_info_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outages = Outages()
    with caplog.at_level(logging.DEBUG, logger="adk_stream_protocol.foundation.outages"):
        for _ in range(3):
            refusal = outages.refusal(redis.exceptions.ConnectionError("refused"), "a turn")
            assert refusal is not None and refusal.status == 503 and refusal.retry_after == 1
        outages.up(REDIS)
        outages.up(REDIS)  # no second INFO
    levels = [(r.levelname, r.getMessage().split(" (")[0]) for r in caplog.records]
    assert [level for level, _ in levels] == ["WARNING", "DEBUG", "DEBUG", "INFO"], levels
    assert caplog.records[0].exc_info is None, "no traceback for a handled outage"
    assert "back after" in caplog.records[-1].getMessage()
    assert outages.refusal(ValueError("a bug"), "a turn") is None
