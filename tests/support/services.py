"""PostgreSQL and Redis for the tests of what uses them (scale-out, docs/deployment.md).

Each test run gets a database of its own (created here, dropped at the end; a test that must
start from an empty one makes more with ``new_postgres_database``) and Redis keys under a
prefix of its own (deleted at the end). Where a service cannot be reached, its tests
skip and say why; with ``ADK_STREAM_TEST_REQUIRE_SERVICES=1`` (``.ci/run`` sets it) they fail
instead, so CI never passes by skipping them.

- ``ADK_STREAM_TEST_POSTGRES``: an administrator's URL of the server to create the database
  on (default ``postgresql://postgres@127.0.0.1:5432/postgres``);
- ``ADK_STREAM_TEST_REDIS``: the Redis to use (default ``redis://127.0.0.1:6379/0``).

A Redis Cluster is not configured but made: ``redis_cluster_url`` starts three nodes of the
machine's ``redis-server`` on free loopback ports in a temporary directory, joins them with
``redis-cli --cluster create``, and stops them (by their process ids) after the run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.support.tiers import out_of_process_fixture
from tests.support.waiting import wait_until

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
@out_of_process_fixture
def postgres_url() -> Iterator[str]:
    """``postgresql+asyncpg://…`` of a fresh database, dropped after the run."""
    admin, database = _create_database()
    try:
        yield _with_database(admin, database, driver="asyncpg")
    finally:
        _drop_database(admin, database)


@pytest.fixture
@out_of_process_fixture
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
@out_of_process_fixture
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
    prefix = f"adk-stream-test-{uuid.uuid4().hex[:12]}"
    yield prefix
    delete_redis_keys(redis_url, prefix)


def delete_redis_keys(url: str, prefix: str) -> None:
    """Delete the keys under ``prefix``: a test's own, never the machine's others."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.delete(key)
    finally:
        client.close()


@pytest.fixture
def redis_prefix(redis_run_prefix: str) -> str:
    """A key prefix of this test's own, under the run's."""
    return f"{redis_run_prefix}.{uuid.uuid4().hex[:8]}"


CLUSTER_NODES = 3
CLUSTER_START_SECONDS = 30.0


def _free_loopback_ports(count: int) -> list[int]:
    """Ports free on the loopback at this moment (all held open until all are chosen, so
    they differ)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        ports = [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()
    assert 6379 not in ports, "never the machine's own Redis"
    return ports


def _wait_for(
    what: str, check: Callable[[], bool], nodes: list[subprocess.Popen[bytes]], logs: list[Path]
) -> None:
    def tails() -> str:
        found = (log.read_text(errors="replace")[-2000:] for log in logs if log.exists())
        return f"test cluster: {what}\n" + "\n".join(found)

    def checked() -> bool:
        if any(node.poll() is not None for node in nodes):
            raise RuntimeError(tails())
        return check()

    # A node's port and its cluster state: redis-server tells no one but who asks.
    wait_until(checked, tails, within=CLUSTER_START_SECONDS, every=0.1)


def _cluster_ok(port: int) -> bool:
    import redis

    client = redis.Redis(port=port, host="127.0.0.1", socket_connect_timeout=1)
    try:
        info = client.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]
    except redis.RedisError:
        return False
    finally:
        client.close()
    if isinstance(info, dict):  # redis-py parses the reply into a mapping
        return str(info.get("cluster_state")) == "ok"
    return "cluster_state:ok" in (info.decode() if isinstance(info, bytes) else str(info))


def _answers(port: int) -> bool:
    import redis

    client = redis.Redis(port=port, host="127.0.0.1", socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


@pytest.fixture(scope="session")
@out_of_process_fixture
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``redis://127.0.0.1:PORT/0`` of one node of a three-node Redis Cluster of this run's own
    (no replicas, nothing saved), made from the machine's ``redis-server`` (7.0 or later:
    ``--cluster-port``)."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        unavailable("redis-server or redis-cli is missing (Debian: apt-get install redis-server)")
    try:
        import redis  # noqa: F401
    except ImportError:
        unavailable("redis-py is not installed (the `redis` extra)")
    directory = tmp_path_factory.mktemp("redis-cluster")
    # Each node has a second port for the cluster bus (by default its own plus 10000, which
    # must stay under 65536: ephemeral ports do not), so both are chosen here.
    ports = _free_loopback_ports(2 * CLUSTER_NODES)
    ports, bus_ports = ports[:CLUSTER_NODES], ports[CLUSTER_NODES:]
    logs = [directory / f"redis-{port}.log" for port in ports]
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        for port, bus_port, log in zip(ports, bus_ports, logs, strict=True):
            nodes.append(
                subprocess.Popen(
                    [
                        server,
                        "--port", str(port),
                        "--cluster-port", str(bus_port),
                        "--bind", "127.0.0.1",
                        "--dir", str(directory),
                        "--cluster-enabled", "yes",
                        "--cluster-config-file", str(directory / f"nodes-{port}.conf"),
                        "--save", "",
                        "--appendonly", "no",
                        "--logfile", str(log),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )  # fmt: skip
        for port in ports:
            _wait_for(
                f"node {port} does not answer", functools.partial(_answers, port), nodes, logs
            )
        addresses = [f"127.0.0.1:{port}" for port in ports]
        created = subprocess.run(
            [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            timeout=CLUSTER_START_SECONDS,
            check=False,
        )
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout!r}")
        for port in ports:
            _wait_for(
                f"node {port}: no cluster_state:ok",
                functools.partial(_cluster_ok, port),
                nodes,
                logs,
            )
        yield f"redis://127.0.0.1:{ports[0]}/0"
    finally:
        for node in nodes:
            node.terminate()
        for node in nodes:
            try:
                node.wait(10)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait()
