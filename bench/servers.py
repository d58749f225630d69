"""The two servers under test, each a uvicorn subprocess on loopback.

- **ours**: ``server:app`` serving ``bench.agent:root_agent`` (``POST /stream``, ``WS /live``);
- **adk**: ADK's own ``get_fast_api_app(...)`` (``POST /run_sse``, ``WS /run_live``) over an
  agents directory whose ``bench_agent/agent.py`` registers the same model and exposes the same
  agent.

Both keep sessions in memory, so the session store costs neither of them anything and the
difference between them is the server itself.

Why not ``tests.support.rig.run_server``: it hands uvicorn a socket with ``--fd``, which uvicorn
wraps as an AF_UNIX socket, so asyncio never sets ``TCP_NODELAY`` on its connections. Streamed
responses then stall on Nagle's algorithm and the client's delayed ACK (40 ms on Linux), which
is more than the overhead being measured. ``uvicorn --host --port`` (what ``server.py`` does)
sets it. The environment is the one ``run_server`` gives (offline model, no Google keys).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from bench.agent import AGENT_NAME
from bench.core import ROOT
from tests.support.rig import _GOOGLE_VARIABLES, stop_process

Kind = Literal["ours", "adk"]

OUR_ENV = {
    "ADK_STREAM_AGENT": "bench.agent:root_agent",
    "ADK_STREAM_SESSION_STORE": "memory://",
    "ADK_STREAM_APPROVAL_TIMEOUT_SECONDS": "120",
}
OUR_APP = "server:app"
ADK_APP = "adk_app:app"

_AGENT_PY = '''\
"""The benchmark agent for ADK's own server: registers the model, exposes root_agent."""

from bench.agent import bench_agent, register_bench_model

register_bench_model()
root_agent = bench_agent()
'''

_ADK_APP_PY = """\
import gc
import os

from google.adk.cli.fast_api import get_fast_api_app

app = get_fast_api_app(
    agents_dir={agents!r},
    web=False,
    session_service_uri="memory://",
    artifact_service_uri="memory://",
    memory_service_uri="memory://",
    auto_create_session=True,
)
# BENCH_ADK_TUNED_GC: ADK's server given our collector settings (docs/adr/0051), to show
# what they are worth to it; ADK's server as shipped is the comparison otherwise.
if os.environ.get("BENCH_ADK_TUNED_GC"):
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
"""


@dataclass(frozen=True)
class Server:
    kind: Kind
    base_url: str
    pid: int

    @property
    def ws_url(self) -> str:
        return self.base_url.replace("http://", "ws://")

    def metrics_text(self) -> str:
        """``GET /metrics`` (a server with ``ADK_STREAM_METRICS=true``)."""
        return httpx.get(f"{self.base_url}/metrics", timeout=10).text

    def cpu_seconds(self) -> float:
        """User plus system CPU time the server process has used so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kib(self) -> int:
        """Resident memory of the server process (``VmRSS``)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError(f"no VmRSS for process {self.pid}")


def write_adk_app(workdir: Path) -> Path:
    """An agents directory with ``bench_agent/agent.py`` and the module ``adk_app`` that builds
    ADK's FastAPI app over it. Returns the folder to put on ``PYTHONPATH``."""
    agent_dir = workdir / "agents" / AGENT_NAME
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "__init__.py").write_text("from . import agent\n")
    (agent_dir / "agent.py").write_text(_AGENT_PY)
    (workdir / "adk_app.py").write_text(_ADK_APP_PY.format(agents=str(workdir / "agents")))
    return workdir


def server_env(kind: Kind, workdir: Path, app: str | None = None) -> tuple[str, dict[str, str]]:
    """The uvicorn app (``app``: another module serving that kind's app) and the
    environment of one kind of server."""
    if kind == "ours":
        return app or OUR_APP, dict(OUR_ENV)
    path = write_adk_app(workdir)
    return app or ADK_APP, {"PYTHONPATH": os.pathsep.join([str(ROOT), str(path)])}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def spawn(
    kind: Kind,
    workdir: Path,
    port: int,
    settings: Mapping[str, str] | None = None,
    workers: int = 1,
    app: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start a server of this kind on ``port`` (``workers`` uvicorn processes); its log goes
    to ``workdir/server.log``."""
    app, extra = server_env(kind, workdir, app)
    env = {k: v for k, v in os.environ.items() if k not in _GOOGLE_VARIABLES}
    env.update({"ADK_STREAM_MODEL": "offline-demo", "PYTHONPATH": str(ROOT), **extra})
    env.update(settings or {})
    command = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port)]
    if workers > 1:
        command += ["--workers", str(workers)]
    with (workdir / "server.log").open("wb") as log:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


@contextmanager
def serve(
    kind: Kind,
    settings: Mapping[str, str] | None = None,
    workers: int = 1,
    app: str | None = None,
) -> Iterator[Server]:
    """A fresh server of this kind (``settings``: extra environment), healthy on entry,
    stopped on exit. With several ``workers``, ``pid`` is uvicorn's supervisor."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as tmp:
        port = free_port()
        process = spawn(kind, Path(tmp), port, settings, workers, app)
        try:
            server = Server(kind, f"http://127.0.0.1:{port}", process.pid)
            deadline = time.monotonic() + 60
            log_path = Path(tmp) / "server.log"
            # Every worker up, not only the first to answer /health.
            with probe() as http:
                while not healthy(server.base_url, http) or _started(log_path) < workers:
                    if process.poll() is not None or time.monotonic() > deadline:
                        log = (Path(tmp) / "server.log").read_text(errors="replace")
                        raise RuntimeError(f"{kind} server did not start:\n{log}")
                    time.sleep(0.05)
            yield server
        finally:
            stop_process(process)


def _started(log_path: Path) -> int:
    """How many uvicorn processes have finished starting (their lifespan ran)."""
    return log_path.read_text(errors="replace").count("Application startup complete")


def probe() -> httpx.Client:
    """A client to poll ``/health`` with while a server starts. One for all the polls: every
    new client (and so every ``httpx.get``) loads the CA bundle, about 50 ms of CPU, which a
    poll every few milliseconds would spend over and over, on the cores the server starts on."""
    return httpx.Client(timeout=1)


def healthy(base_url: str, http: httpx.Client) -> bool:
    try:
        return http.get(f"{base_url}/health").status_code == 200
    except httpx.TransportError:
        return False
