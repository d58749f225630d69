"""Targets shared by the whole run (tests/support/rig.py says what a target is).

- ``app``: the app with the default settings, in this process (most endpoint tests);
- ``server``: ``server:app`` under uvicorn in a subprocess, as deployed: the one server for
  what crosses the wire with the default settings (the real AI SDK clients, the scenario
  catalogue, the browser, raw sockets, smoke tests);
- ``servers``: uvicorn servers with other settings (``servers.get(env)``), one per set of
  settings, each served from a thread of this process and shared by every test that asks
  for the same settings; ``audio_server`` is the one with spoken answers on /live;
- ``catalogue_runs``: the real client's runs of the scenario catalogue, each made once.

Each test is ``fast`` or ``out_of_process``, and a fast one that starts a process fails
(tests/support/tiers.py, registered here).
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import tiers
from tests.support.services import (  # noqa: F401 - fixtures of the tests that need PostgreSQL or Redis
    new_postgres_database,
    postgres_url,
    redis_cluster_url,
    redis_prefix,
    redis_run_prefix,
    redis_url,
)

# Imported where used: under pytest-xdist the controller loads this file too, and runs no test.
if TYPE_CHECKING:
    from tests.support.catalogue import CatalogueRuns
    from tests.support.rig import InProcessApp, LiveServer, ServerPool, Target

# Apps in this process leave the collector as it is. At start an app collects all the process
# holds, then freezes it (adk_stream_protocol/server/collector.py): in a test process, pytest's,
# the fuzzers' and every earlier test's objects, about 0.3 s of CPU an app, which was most of the
# fast tier's CPU. tests/server/test_collector.py tests the setting itself; servers in
# subprocesses (rig.run_server) keep the default, as deployed.
os.environ.setdefault("ADK_STREAM_GC_FREEZE", "false")


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the test process holds once its tests are collected (ADK, pydantic, pytest's
    items) is frozen once, as a server freezes its start-up: a full collection during a test
    then walks only what the tests made, and a test that times its stream (a keep-alive after
    0.1 s of silence) is not held up by one that walks the whole process."""
    gc.collect()
    gc.freeze()


AUDIO = {"ADK_STREAM_LIVE_MODALITY": "AUDIO"}

# Under pytest-xdist (`scripts/test` runs three workers, `--dist loadgroup`): tests that must share
# one worker, by node id prefix. The browser tests share one Chromium; the scenario catalogue
# starts all its jobs when its first case runs. A module-scoped fixture is made once per worker
# that runs one of the module's tests: the package's build and install (about 100 s) and the
# scale-out pair of server processes are made once. (xdist's own `xdist_group` marker does not
# work on pytest 9: it renames items through an attribute pytest 9 no longer reads.)
XDIST_GROUPS = {
    "tests/browser/": "browser",
    # The catalogue's chats in the real client, made once (``catalogue_runs``) for the
    # scenarios' expectations and the message fold's check.
    "tests/test_scenarios.py": "scenarios",
    "tests/protocol/test_message_fold.py": "scenarios",
    # Each scenario (kills, stalls, a Redis restart) runs once for the checks made on it, on
    # stores of its own: beside the other fault tests, not after them.
    "tests/faults/test_exactly_once.py": "exactly-once",
    # One private PostgreSQL and Redis, which the tests stop and restart (tests/faults/).
    "tests/faults/": "faults",
    # Module-scoped servers or builds, made once rather than on each worker.
    "tests/test_package.py": "package",
    "tests/test_scale_out.py": "scale-out",
}


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

    class PrefixGroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            for prefix, group in XDIST_GROUPS.items():
                if nodeid.startswith(prefix):
                    return group
            scope: str = super()._split_scope(nodeid)
            return scope

    return PrefixGroupScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    # A plugin rather than this file's hooks: a conftest's hooks do not see the set-up of
    # session-scoped fixtures (their node is the session, outside tests/).
    config.pluginmanager.register(tiers.TierPlugin(), "tiers")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _unique_node_ids(items)


def _unique_node_ids(items: list[pytest.Item]) -> None:
    """Give schemathesis' items their operation in their node id. On pytest 9 the items it
    makes, one per API operation (`test_no_operation_answers_5xx[POST /stream]`), all have the
    test's own id, and pytest-xdist, which schedules by id, would run only the first."""
    counts = Counter(item.nodeid for item in items)
    for item in items:
        if counts[item.nodeid] > 1 and item.name.endswith("]") and "[" in item.name:
            operation = item.name[item.name.index("[") + 1 : -1]
            item._id = item._id.with_params(operation)
    duplicates = [node_id for node_id, n in Counter(i.nodeid for i in items).items() if n > 1]
    assert not duplicates, f"tests with the same node id: {duplicates}"


@pytest.fixture(scope="session")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    """The app with the default settings in this process: real ADK runner, offline demo
    model, SQLite store."""
    from tests.support.rig import in_process_app

    with in_process_app(tmp_path_factory.mktemp("app")) as target:
        yield target


@pytest.fixture(scope="session")
@tiers.out_of_process_fixture
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The real app under uvicorn: real ADK runner, offline demo model, SQLite store."""
    from tests.support.rig import run_server

    with run_server(tmp_path_factory.mktemp("server")) as live:
        yield live


@pytest.fixture(scope="session")
def servers(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ServerPool]:
    from tests.support.rig import ServerPool

    pool = ServerPool(tmp_path_factory, request)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
@tiers.out_of_process_fixture
def catalogue_runs(servers: ServerPool) -> CatalogueRuns:
    """The real client's runs of the scenario catalogue (Node), each made once in this process
    and read by every test that checks one (tests/support/catalogue.py)."""
    from tests.support.catalogue import CatalogueRuns

    return CatalogueRuns(servers)


@pytest.fixture(scope="session")
def audio_server(servers: ServerPool) -> LiveServer:
    """Spoken answers on /live (transcript text plus PCM audio)."""
    return servers.get(AUDIO)


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Target:
    """``app`` or ``server``, named by an indirect parameter: a test that runs on both."""
    chosen: Target = request.getfixturevalue(request.param)
    return chosen
