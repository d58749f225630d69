"""A store whose client library is missing stops the server at start-up, naming the extra to
install (``backends.check_extras``); with the default stores nothing optional is needed.

Each case starts the real ``server:app`` under uvicorn in a Python where the clients cannot be
imported (``sys.modules[name] = None`` makes ``import name`` fail, as if not installed).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from adk_stream_protocol.server.backends import MissingExtraError
from tests.support.rig import ROOT, stop_process
from tests.support.waiting import wait_until

OPTIONAL_CLIENTS = ("asyncpg", "sqlalchemy", "greenlet", "redis", "prometheus_client")


def start_without(
    modules: tuple[str, ...], env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    """``server:app`` under uvicorn on a free port, unable to import ``modules``."""
    blocked = "".join(f"sys.modules[{name!r}] = None; " for name in modules)
    code = f"import sys; {blocked}import uvicorn; uvicorn.run('server:app', port=0)"
    full_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ADK_STREAM_")},
        "ADK_STREAM_MODEL": "offline-demo",
        "PYTHONPATH": str(ROOT),
        **env,
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, env=full_env, stdout=out, stderr=out
        )


def refused_start(modules: tuple[str, ...], env: dict[str, str], log: Path) -> str:
    """What the server said when it refused to start."""
    process = start_without(modules, env, log)
    try:
        process.wait(timeout=60)
    finally:
        stop_process(process)
    output = log.read_text(errors="replace")
    assert process.returncode != 0, output
    assert "Application startup failed" in output, output
    return output


def assert_names_the_extra(output: str, extra: str) -> None:
    """The message names the extra and installs it from a checkout: the package is not on
    PyPI, so `pip install 'adk-stream-protocol[...]'` would not find it."""
    assert f"the {extra!r} extra" in output
    assert f"pip install '/path/to/adk-stream-protocol[{extra}]'" in output
    assert f"pip install -e '.[{extra}]'" in output
    assert "pip install 'adk-stream-protocol[" not in output


def test_the_message_installs_the_extra_from_a_checkout() -> None:
    error = MissingExtraError("ADK_STREAM_REDIS_URL", "redis", ["redis"])
    assert str(error).startswith("ADK_STREAM_REDIS_URL needs redis, ")
    assert_names_the_extra(str(error), "redis")


@pytest.mark.out_of_process  # a Python process without the optional clients
def test_postgres_store_without_its_driver_names_the_postgres_extra(tmp_path: Path) -> None:
    store = "postgresql+asyncpg://app@127.0.0.1:1/chats"  # never reached
    output = refused_start(
        ("asyncpg",), {"ADK_STREAM_SESSION_STORE": store}, tmp_path / "server.log"
    )
    assert "MissingExtraError" in output
    assert "ADK_STREAM_SESSION_STORE needs asyncpg" in output
    assert_names_the_extra(output, "postgres")


@pytest.mark.out_of_process  # a Python process without the optional clients
def test_libpq_postgres_url_without_its_driver_names_the_postgres_extra(tmp_path: Path) -> None:
    store = "postgres://app@127.0.0.1:1/chats"
    output = refused_start(
        ("sqlalchemy",), {"ADK_STREAM_SESSION_STORE": store}, tmp_path / "server.log"
    )
    assert "ADK_STREAM_SESSION_STORE needs sqlalchemy" in output
    assert_names_the_extra(output, "postgres")


@pytest.mark.out_of_process  # a Python process without the optional clients
def test_redis_coordination_without_its_client_names_the_redis_extra(tmp_path: Path) -> None:
    env = {
        "ADK_STREAM_SESSION_STORE": f"sqlite:///{tmp_path / 'sessions.db'}",
        "ADK_STREAM_REDIS_URL": "redis://127.0.0.1:1/0",  # never reached
    }
    output = refused_start(("redis",), env, tmp_path / "server.log")
    assert "ADK_STREAM_REDIS_URL needs redis" in output
    assert_names_the_extra(output, "redis")


@pytest.mark.out_of_process  # a Python process without the optional clients
def test_metrics_without_their_client_name_the_metrics_extra(tmp_path: Path) -> None:
    env = {
        "ADK_STREAM_SESSION_STORE": f"sqlite:///{tmp_path / 'sessions.db'}",
        "ADK_STREAM_METRICS": "true",
    }
    output = refused_start(("prometheus_client",), env, tmp_path / "server.log")
    assert "ADK_STREAM_METRICS needs prometheus_client" in output
    assert_names_the_extra(output, "metrics")


@pytest.mark.out_of_process  # a Python process without the optional clients
def test_the_default_stores_need_no_extra(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    env = {"ADK_STREAM_SESSION_STORE": f"sqlite:///{tmp_path / 'sessions.db'}"}
    process = start_without(OPTIONAL_CLIENTS, env, log)
    try:

        def running() -> re.Match[str] | None:
            output = log.read_text(errors="replace")
            assert process.poll() is None, output
            return re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", output)

        # The port the process chose is in its log, which it writes when it is ready.
        found = wait_until(running, lambda: log.read_text(errors="replace"), within=60, every=0.05)
        port = int(found.group(1))
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json() == {"status": "ok"}
    finally:
        stop_process(process)
    assert "MissingExtraError" not in log.read_text(errors="replace")
