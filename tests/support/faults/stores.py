"""A private PostgreSQL and a private Redis for fault tests: each on a free loopback port,
started, stopped, killed, frozen and thawed by PID (docs/adr/0030-outages.md).

Never the machine's own services (5432, 6379): a fault test stops what it starts, and only
that. PostgreSQL refuses to run as root, so as root it runs as ``nobody`` (``runuser``), in a
temporary directory of its own that holds its data and its socket (``-k``). Both keep nothing
on disk worth keeping: ``fsync=off``; Redis with no snapshot and no append-only file, so a
restarted Redis is an empty one.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from tests.support.services import unavailable
from tests.support.waiting import wait_until

START_TIMEOUT_SECONDS = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    return Path(found[-1]).parent if found else None


def _version(path: str) -> int:
    version = Path(path).parent.parent.name
    return int(version) if version.isdigit() else 0


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (PostgreSQL's backends and workers)."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so read after its closing paren.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            children.append(int(entry.name))
    return children


class PrivatePostgres:
    """``initdb`` once, then ``pg_ctl start``/``stop`` on the same port and data."""

    def __init__(self) -> None:
        bin_dir = _postgres_bin()
        if bin_dir is None:
            unavailable("PostgreSQL's server binaries are not installed (Debian: postgresql)")
        self._bin = bin_dir
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="pgfault-"))
        self._as_root = os.geteuid() == 0
        if self._as_root:
            shutil.chown(self.dir, "nobody", "nogroup")
        self.dir.chmod(0o700)
        self.data = self.dir / "data"
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self._bin / tool), *args]
        if self._as_root:
            command = ["runuser", "-u", "nobody", "--", *command]
        subprocess.run(
            command,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=START_TIMEOUT_SECONDS * 3,
            env={**os.environ, "LC_ALL": "C.UTF-8"},
        )

    def start(self, *, wait: bool = True) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        wait_flag = "-w" if wait else "-W"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.dir / "pg.log"), wait_flag,
            "-o", options, "start",
        )  # fmt: skip

    def stop(self, mode: str = "immediate") -> None:
        """``pg_ctl stop -m immediate`` (a crash, as seen from clients) or ``fast``."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def freeze(self) -> None:
        """SIGSTOP the postmaster and every backend: connections stay open, nothing answers."""
        pid = self.postmaster_pid()
        for each in [pid, *_children(pid)]:
            os.kill(each, signal.SIGSTOP)

    def thaw(self) -> None:
        pid = self.postmaster_pid()
        for each in [pid, *_children(pid)]:
            os.kill(each, signal.SIGCONT)

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.thaw()
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateRedis:
    """``redis-server`` on a port of its own, with nothing persisted."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            unavailable("redis-server is not installed (Debian: redis-server)")
        self._binary = binary
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="redisfault-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with (self.dir / "redis.log").open("ab") as log:
            # Its own session and a file for its output: an inherited pipe can block a runner.
            self.process = subprocess.Popen(
                [
                    self._binary, "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", str(self.dir),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        process = self.process

        def answers() -> bool:
            if process.poll() is not None:
                raise RuntimeError((self.dir / "redis.log").read_text())
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        # redis-server says it is ready to whoever asks, and to no one else.
        wait_until(answers, "redis-server answering PING", within=START_TIMEOUT_SECONDS)

    def kill(self) -> None:
        """SIGKILL: every connection drops, and whatever it held is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def freeze(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
