"""Targets shared by the whole run (tests/support.py says what a target is).

- ``app``: the app with the default settings, in this process (most endpoint tests);
- ``server``: ``server:app`` under uvicorn in a subprocess, as deployed: the one server for
  what crosses the wire with the default settings (the real AI SDK clients, the scenario
  catalogue, the browser, raw sockets, smoke tests);
- ``servers``: uvicorn servers with other settings (``servers.get(env)``), one per set of
  settings, each served from a thread of this process and shared by every test that asks
  for the same settings; ``audio_server`` is the one with spoken answers on /live.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import (
    InProcessApp,
    LiveServer,
    ServerPool,
    Target,
    in_process_app,
    run_server,
)

AUDIO = {"ADK_STREAM_LIVE_MODALITY": "AUDIO"}

# Under pytest-xdist (`scripts/test` runs two workers, `--dist loadgroup`): tests that must share
# one worker. The browser tests share one Chromium; the scenario catalogue starts all its jobs
# at once; the benchmark smoke test, a minute of one core, gets a worker to itself meanwhile.
XDIST_GROUPS = {
    "tests/browser/": "browser",
    "tests/test_scenarios.py": "scenarios",
    "tests/test_bench_smoke.py": "bench",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for prefix, group in XDIST_GROUPS.items():
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    """The app with the default settings in this process: real ADK runner, offline demo
    model, SQLite store."""
    with in_process_app(tmp_path_factory.mktemp("app")) as target:
        yield target


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The real app under uvicorn: real ADK runner, offline demo model, SQLite store."""
    with run_server(tmp_path_factory.mktemp("server")) as live:
        yield live


@pytest.fixture(scope="session")
def servers(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory, request)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def audio_server(servers: ServerPool) -> LiveServer:
    """Spoken answers on /live (transcript text plus PCM audio)."""
    return servers.get(AUDIO)


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Target:
    """``app`` or ``server``, named by an indirect parameter: a test that runs on both."""
    chosen: Target = request.getfixturevalue(request.param)
    return chosen
