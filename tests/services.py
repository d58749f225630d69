"""PostgreSQL and Redis for the tests of what uses them (scale-out, docs/deployment.md).

Each test run gets a database of its own (created here, dropped at the end; a test that must
start from an empty one makes more with ``new_postgres_database``) and Redis keys under a
prefix of its own (deleted at the end). Where a service cannot be reached, its tests
skip and say why; with ``ADK_STREAM_TEST_REQUIRE_SERVICES=1`` (``.ci/run`` sets it) they fail
instead, so CI never passes by skipping them.

- ``ADK_STREAM_TEST_POSTGRES``: an administrator's URL of the server to create the database
  on (default ``postgresql://postgres@127.0.0.1:5432/postgres``);
- ``ADK_STREAM_TEST_REDIS``: the Redis to use (default ``redis://127.0.0.1:6379/0``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import uuid
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

REQUIRE_SERVICES_ENV = "ADK_STREAM_TEST_REQUIRE_SERVICES"
POSTGRES_ENV = "ADK_STREAM_TEST_POSTGRES"
REDIS_ENV = "ADK_STREAM_TEST_REDIS"
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


def services_required() -> bool:
    return os.environ.get(REQUIRE_SERVICES_ENV, "") in ("1", "true", "yes")


def unavailable(reason: str) -> NoReturn:
    """Skip with the reason, or fail where the services must be there."""
    if services_required():
        pytest.fail(f"{reason}; {REQUIRE_SERVICES_ENV} says it must be there", pytrace=False)
    pytest.skip(reason)


def _with_database(url: str, database: str, *, driver: str | None = None) -> str:
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[0] + (f"+{driver}" if driver else "")
    return urlunsplit((scheme, parts.netloc, f"/{database}", "", ""))


async def _admin(url: str, statement: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    connection = await asyncpg.connect(_with_database(url, urlsplit(url).path.lstrip("/")))
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


def _run(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run an administrator's statement from a test, async (in a thread of its own) or not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coroutine)
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coroutine).result()


def _create_database() -> tuple[str, str]:
    """A new empty database: (the administrator's URL, its name). Skips or fails (see above)
    when PostgreSQL cannot be reached."""
    admin = os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES)
    database = f"adk_stream_test_{uuid.uuid4().hex[:12]}"
    try:
        _run(asyncio.wait_for(_admin(admin, f'CREATE DATABASE "{database}"'), 10))
    except ImportError:
        unavailable("asyncpg is not installed (the `postgres` extra)")
    except (OSError, TimeoutError, Exception) as exc:  # asyncpg's errors are not OSErrors
        unavailable(f"PostgreSQL is not reachable at {urlsplit(admin).netloc}: {exc}")
    return admin, database


def _drop_database(admin: str, database: str) -> None:
    _run(_admin(admin, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """``postgresql+asyncpg://…`` of a fresh database, dropped after the run."""
    admin, database = _create_database()
    try:
        yield _with_database(admin, database, driver="asyncpg")
    finally:
        _drop_database(admin, database)


@pytest.fixture
def new_postgres_database() -> Iterator[Callable[[], str]]:
    """A maker of brand-new, empty databases (``postgresql+asyncpg://…``), all dropped after
    the test: for what must start from nothing, such as creating ADK's tables."""
    made: list[tuple[str, str]] = []

    def make() -> str:
        admin, database = _create_database()
        made.append((admin, database))
        return _with_database(admin, database, driver="asyncpg")

    try:
        yield make
    finally:
        for admin, database in made:
            _drop_database(admin, database)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A reachable Redis (its URL)."""
    url = os.environ.get(REDIS_ENV, DEFAULT_REDIS)
    try:
        import redis
    except ImportError:
        unavailable("redis-py is not installed (the `redis` extra)")
    client = redis.Redis.from_url(url, socket_connect_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        unavailable(f"Redis is not reachable at {urlsplit(url).netloc}: {exc}")
    finally:
        client.close()
    return url


@pytest.fixture(scope="session")
def redis_run_prefix(redis_url: str) -> Iterator[str]:
    """This run's key prefix; its keys are deleted after the run."""
    import redis

    prefix = f"adk-stream-test-{uuid.uuid4().hex[:12]}"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.delete(key)
    finally:
        client.close()


@pytest.fixture
def redis_prefix(redis_run_prefix: str) -> str:
    """A key prefix of this test's own, under the run's."""
    return f"{redis_run_prefix}.{uuid.uuid4().hex[:8]}"
