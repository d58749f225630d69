"""ADK's records of an outage we answer, and of our fences, go to DEBUG; nothing else does
(``observability/adk_logs.py``, docs/adr/0030)."""

from __future__ import annotations

import logging

import pytest
from google.adk.errors import StaleSessionError
from sqlalchemy.exc import OperationalError

from adk_stream_protocol.observability.adk_logs import UNKNOWN_AGENT, AdkLogs, installed
from adk_stream_protocol.plugins.tool_starts import ToolNotStarted

RUNNER = "google_adk.google.adk.runners"
ROUTER = "google_adk.google.adk.agents._agent_router"
PLUGINS = "google_adk.google.adk.plugins.plugin_manager"
NODE_RUNNER = "google_adk.google.adk.workflow._node_runner"
SEAL = "google_adk.google.adk.workflow._node_runner_utils"


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def _outage() -> BaseException:
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed")
        except ConnectionRefusedError as refused:
            raise OperationalError("SELECT 1", {}, refused) from refused
    except OperationalError as exc:
        return exc


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO)
    return caplog


def test_an_outage_that_adk_logs_is_dropped_at_info(records: pytest.LogCaptureFixture) -> None:
    runner = logging.getLogger(RUNNER)
    with installed(AdkLogs()):
        runner.error("Root node %s failed.", "agent", exc_info=_outage())
        runner.error("Error closing toolset %s: %s", "T", ConnectionResetError("reset"))
        runner.error("Root node %s failed.", "agent", exc_info=_raised(ValueError("a bug")))
        runner.error("Root node %s failed.", "agent", exc_info=_raised(TimeoutError()))
    # A bug, and a bare TimeoutError (a tool's own, inside a run), stay at ERROR.
    assert [(r.levelname, _error_of(r)) for r in records.records] == [
        ("ERROR", "ValueError"),
        ("ERROR", "TimeoutError"),
    ]


def _wrapped(exc: Exception) -> BaseException:
    """``exc`` as ADK's plugin manager raises a plugin's exception: a RuntimeError from it."""
    try:
        try:
            raise exc
        except Exception as raised:
            raise RuntimeError(
                f"Error in plugin 'p' during 'before_tool_callback': {raised}"
            ) from raised
    except RuntimeError as wrapped:
        return wrapped


def test_a_refusal_that_adk_logs_is_dropped_at_info(records: pytest.LogCaptureFixture) -> None:
    """A tool the fence stopped and a write refused as stale are the server's own refusals,
    logged once where they are made (docs/adr/0072): ADK's records of them go, known by the
    exception's class; a tool's own failure, wrapped the same way, keeps its ERROR."""
    plugins, node = logging.getLogger(PLUGINS), logging.getLogger(NODE_RUNNER)
    seal = logging.getLogger(SEAL)
    with installed(AdkLogs()):
        plugins.error("Error in plugin", exc_info=_raised(ToolNotStarted("no longer held")))
        node.exception("Node failed", exc_info=_wrapped(ToolNotStarted("no longer held")))
        seal.error("Failed to seal %s.", "e-1", exc_info=_raised(StaleSessionError("stale")))
        node.error("Node failed", exc_info=_wrapped(ValueError("a tool's bug")))
        node.error("Node failed", exc_info=_raised(RuntimeError("no longer held")))
    assert [(r.levelname, _error_of(r)) for r in records.records] == [
        ("ERROR", "RuntimeError"),
        ("ERROR", "RuntimeError"),
    ]


def _error_of(record: logging.LogRecord) -> str:
    assert record.exc_info is not None and record.exc_info[1] is not None
    return type(record.exc_info[1]).__name__


def test_an_outage_is_kept_at_debug_when_debug_is_on(records: pytest.LogCaptureFixture) -> None:
    records.set_level(logging.DEBUG, logger=RUNNER)
    with installed(AdkLogs()):
        logging.getLogger(RUNNER).error("Root node %s failed.", "agent", exc_info=_outage())
    (record,) = records.records
    assert (record.levelno, record.levelname) == (logging.DEBUG, "DEBUG")


def test_only_the_fences_author_is_no_unknown_agent(records: pytest.LogCaptureFixture) -> None:
    router = logging.getLogger(ROUTER)
    with installed(AdkLogs(fence_author="my_app")):
        router.warning(UNKNOWN_AGENT, "my_app", "e1")
        router.warning(UNKNOWN_AGENT, "someone_else", "e2")
    assert [r.getMessage() for r in records.records] == [
        "Event from an unknown agent: someone_else, event id: e2"
    ]


def test_the_filter_leaves_with_the_app(records: pytest.LogCaptureFixture) -> None:
    later = "google_adk.google.adk.live._live_llm_flow"  # imported by ADK on first use
    with installed(AdkLogs()) as filtered:
        assert filtered in logging.getLogger(later).filters
        assert filtered in logging.getLogger(RUNNER).filters
    # Not by what reaches the log: another app of this process (the suite's in-process app)
    # may have its own filter on these loggers while it runs.
    assert filtered not in logging.getLogger(later).filters
    assert filtered not in logging.getLogger(RUNNER).filters
