"""The fault tests' stores and server: a private PostgreSQL and Redis
(``tests/support/faults/stores.py``) and one real uvicorn on them, shared by a module's tests.
Each test leaves both stores running."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.support.faults.stores import PrivatePostgres, PrivateRedis
from tests.support.rig import LiveServer, run_server
from tests.support.tiers import out_of_process_fixture


@pytest.fixture(scope="module")
@out_of_process_fixture
def postgres() -> Iterator[PrivatePostgres]:
    store = PrivatePostgres()
    try:
        store.start()
        yield store
    finally:
        store.close()


@pytest.fixture(scope="module")
@out_of_process_fixture
def redis_store() -> Iterator[PrivateRedis]:
    store = PrivateRedis()
    try:
        store.start()
        yield store
    finally:
        store.close()


def server_env(postgres: PrivatePostgres, redis_store: PrivateRedis) -> dict[str, str]:
    return {
        "ADK_STREAM_SESSION_STORE": postgres.url,
        "ADK_STREAM_REDIS_URL": redis_store.url,
        "ADK_STREAM_RESUMABLE_STREAMS": "true",
        "ADK_STREAM_LEASE_TTL_SECONDS": "1",
        # The tests' agent: a slow tool ("slow 2"), an approval above 100 ("transfer 150").
        "ADK_STREAM_AGENT": "tests.support.agents.tools:slow_live_agent",
        "ADK_STREAM_KEEP_ALIVE_SECONDS": "0.5",
    }


@pytest.fixture(scope="module")
@out_of_process_fixture
def server(
    postgres: PrivatePostgres,
    redis_store: PrivateRedis,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiveServer]:
    with run_server(tmp_path_factory.mktemp("faults"), server_env(postgres, redis_store)) as live:
        yield live


@pytest.fixture(autouse=True)
def stores_back_after_the_test(
    postgres: PrivatePostgres, redis_store: PrivateRedis
) -> Iterator[None]:
    """A test that failed half-way still leaves the next one running stores."""
    yield
    with contextlib.suppress(OSError, ValueError):
        postgres.thaw()
    if redis_store.process is not None and redis_store.process.poll() is None:
        redis_store.thaw()
    else:
        redis_store.start()
    if not (postgres.data / "postmaster.pid").exists():
        postgres.start()
