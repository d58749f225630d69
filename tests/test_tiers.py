"""The fast tier keeps its word (tests/support/tiers.py): a test that needs a server or a
service is not in it, and a fast test that starts a process anyway fails, saying why."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.rig import run_server
from tests.support.tiers import (
    GUARD,
    ProcessInFastTier,
    is_out_of_process,
    out_of_process_reason,
    process_fixtures,
)


@pytest.fixture
def guarded(request: pytest.FixtureRequest) -> str:
    """This test's node id, once it is sure the guard watches it (it is a fast test)."""
    assert request.node.get_closest_marker("fast"), "these tests are in the fast tier"
    assert GUARD.test == request.node.nodeid
    return str(request.node.nodeid)


def test_a_fast_test_cannot_start_a_subprocess(guarded: str) -> None:
    with pytest.raises(ProcessInFastTier, match="is in the fast tier, which starts no process"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with pytest.raises(ProcessInFastTier, match=r"os\.system"):
        os.system("true")
    # Refused even where the error is swallowed: the test's teardown fails it with what was
    # tried. Checked here, which also forgets it, so that this test passes.
    assert len(GUARD.attempts) == 2, GUARD.attempts
    with pytest.raises(pytest.fail.Exception, match=r"python.*os\.system"):
        GUARD.check(guarded)
    assert GUARD.attempts == []


def test_a_fast_test_cannot_start_an_asyncio_subprocess(guarded: str) -> None:
    async def start() -> None:
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")

    with pytest.raises(ProcessInFastTier, match=re.escape(guarded)):
        asyncio.run(start())
    with pytest.raises(pytest.fail.Exception, match=r"subprocess\.Popen"):
        GUARD.check(guarded)


def test_a_fast_test_cannot_start_a_server_from_the_fork_server(
    guarded: str, tmp_path: Path
) -> None:
    """``run_server`` forks its uvicorn from the test process's fork server, which may be
    running already (started by an out-of-process test on this worker): the fork is refused
    as a process of the test's own."""
    with pytest.raises(ProcessInFastTier, match="uvicorn"), run_server(tmp_path):
        pass  # pragma: no cover - refused before it serves
    with pytest.raises(pytest.fail.Exception, match=r"subprocess\.Popen"):
        GUARD.check(guarded)


def test_a_fast_test_cannot_ask_for_a_service_at_run_time(
    guarded: str, request: pytest.FixtureRequest
) -> None:
    # A fixture of the test's own scope, made here and now (a session's server may be made
    # already, by an out-of-process test on this worker).
    with pytest.raises(pytest.fail.Exception, match="the fixture new_postgres_database"):
        request.getfixturevalue("new_postgres_database")


@pytest.mark.parametrize(
    ("fixtures", "markers", "params", "reason"),
    [
        (set(), set(), {}, None),
        ({"server"}, set(), {}, "uses the fixture server"),
        ({"redis_url", "redis_prefix"}, set(), {}, "uses the fixture redis_prefix"),
        ({"browser", "playwright"}, {"browser"}, {}, "marked browser"),
        (set(), {"out_of_process"}, {}, "marked out_of_process"),
        (set(), set(), {"target": "app"}, None),
        (set(), set(), {"target": "server"}, "runs on the fixture server (target)"),
    ],
)
def test_what_puts_a_test_out_of_the_fast_tier(
    fixtures: set[str], markers: set[str], params: dict[str, object], reason: str | None
) -> None:
    assert out_of_process_reason(fixtures, markers, params) == reason


@pytest.mark.parametrize(
    ("name", "out"),
    [
        ("server", True),  # uvicorn in a subprocess
        ("postgres_url", True),
        ("new_postgres_database", True),
        ("redis_url", True),
        ("redis_cluster_url", True),
        ("app", False),  # the app in this process
        ("servers", False),  # uvicorn in a thread of this process
        ("audio_server", False),
        ("tmp_path", False),
    ],
)
def test_the_run_wide_fixtures_say_whether_they_are_out_of_process(
    request: pytest.FixtureRequest, name: str, out: bool
) -> None:
    (*_, in_effect) = request.session._fixturemanager.getfixturedefs(name, request.node) or ()
    assert is_out_of_process(in_effect) is out


def test_every_collected_test_that_uses_a_server_is_out_of_process(
    request: pytest.FixtureRequest,
) -> None:
    """Over the tests of this run: none that uses a server, a service or the browser is fast,
    and a module's own in-process fixture named ``server`` keeps its tests fast."""
    for item in request.session.items:
        if process_fixtures(item):
            assert not item.get_closest_marker("fast"), item.nodeid
            assert item.get_closest_marker("out_of_process"), item.nodeid
        assert bool(item.get_closest_marker("fast")) != bool(
            item.get_closest_marker("out_of_process")
        ), item.nodeid
        if item.nodeid.startswith("tests/transports/test_sse_response.py::"):
            assert item.get_closest_marker("fast"), f"its server is a thread: {item.nodeid}"
