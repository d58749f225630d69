"""Uvicorn server processes forked from one Python that has imported the package already.

A new ``python -m uvicorn server:app`` spends about a second of CPU importing ADK, FastAPI and
the package before it serves, and the tests start some fifty of them (``rig.run_server``: the
run's ``server``, crashes, restarts, scale-out pairs, fault stores). A *fork server* imports
them once (``PRELOADED``: modules only, which read no setting at import), then forks one child
per server: the child takes its environment, working directory, output and listening socket,
and runs uvicorn's own command line (``uvicorn.main``) as ``python -m uvicorn`` would. It is
a process of its own (its pid for signals, its exit status), served on the wire, as before;
what it no longer pays is the import.

What the fork server cannot give stays a fresh process: ``--workers`` (uvicorn starts those
by ``multiprocessing``'s spawn, a new Python each), and any process a test starts by hand.

The client side (``fork_uvicorn``, ``ServerForks``) is used by ``rig.run_server``; the fork
server is this module run with ``python -m``, one per test process, started on first use and
ended with it. Messages are JSON on a ``SOCK_SEQPACKET`` socket pair, file descriptors beside
them (``SCM_RIGHTS``). Per server, a socket pair of its own carries the child's pid, then its
exit status once the fork server has reaped it.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

# Imported by the fork server before it forks: what every server imports at start-up and
# while it starts its app (the stores' drivers, ADK's flows), none of which reads the
# environment at import. Not ``server``, which builds the app from the settings.
PRELOADED = (
    "adk_stream_protocol",
    "adk_stream_protocol.demo",
    "uvicorn.main",
    "aiosqlite",
    "google.adk.flows.llm_flows.tools",
    "google.adk.sessions.database_session_service",
    "google.adk.sessions.sqlite_session_service",
    "google.adk.telemetry.tracing",
)
MESSAGE = 1 << 16
# Seconds: the fork server's imports, on a loaded machine.
READY_TIMEOUT = 120.0


class ForkServerGone(RuntimeError):
    """The fork server ended: the servers it forked can no longer be told apart from others."""


class ForkedProcess:
    """One server the fork server forked: what ``subprocess.Popen`` offers for it (``pid``,
    ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``, ``returncode``)."""

    def __init__(self, channel: socket.socket, args: Sequence[str]) -> None:
        self.args = list(args)
        self.returncode: int | None = None
        self._channel = channel
        self._lock = threading.Lock()
        channel.settimeout(READY_TIMEOUT)
        started = json.loads(channel.recv(MESSAGE) or b"{}")
        if "pid" not in started:
            raise ForkServerGone(f"no pid for {self.args}: {started}")
        self.pid: int = started["pid"]

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._read(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        # As Popen: no signal to a process known to have ended (its pid may be another's).
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read(self, timeout: float | None) -> None:
        """The exit status, if it comes within ``timeout`` (0: only if it is there)."""
        with self._lock:
            if self.returncode is not None:
                return
            self._channel.settimeout(timeout)
            try:
                message = self._channel.recv(MESSAGE)
            except (TimeoutError, BlockingIOError):
                return
            if not message:
                raise ForkServerGone(f"the fork server ended before {self.pid} did")
            self.returncode = int(json.loads(message)["exit"])
            self._channel.close()


class ServerForks:
    """The client of one fork server (started here, ended by ``close``, by its pid)."""

    def __init__(self, cwd: Path, env: Mapping[str, str]) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="server-forks-")
        self._log_path = Path(self._folder.name) / "fork-server.log"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control = ours
        self._lock = threading.Lock()
        with self._log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())],
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(theirs.fileno(),),
            )
        theirs.close()
        ours.settimeout(READY_TIMEOUT)
        try:
            ready = ours.recv(MESSAGE)
        except TimeoutError:
            ready = b""
        if ready != b"ready":
            self.close()
            raise ForkServerGone(f"the fork server did not start:\n{self.log()}")

    def spawn(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        stdout: IO[bytes],
        listening: socket.socket,
    ) -> ForkedProcess:
        """``python -m uvicorn ARGS`` in a child of the fork server, with this environment and
        working directory, its output to ``stdout`` and ``listening`` at the same fd number
        (``--fd``, as ``Popen(pass_fds=...)`` would)."""
        command = [sys.executable, "-m", "uvicorn", *args]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        request = {"args": list(args), "env": dict(env), "cwd": str(cwd), "fd": listening.fileno()}
        fds = [theirs.fileno(), listening.fileno(), stdout.fileno()]
        try:
            with self._lock:
                socket.send_fds(self._control, [json.dumps(request).encode()], fds)
        except OSError as error:
            ours.close()
            raise ForkServerGone(f"the fork server is gone ({error}):\n{self.log()}") from None
        finally:
            theirs.close()
        try:
            return ForkedProcess(ours, command)
        except (ForkServerGone, TimeoutError):
            ours.close()
            raise ForkServerGone(f"no server forked for {list(args)}:\n{self.log()}") from None

    def alive(self) -> bool:
        return self._process.poll() is None

    def log(self) -> str:
        return self._log_path.read_text(errors="replace")[-3000:]

    def close(self) -> None:
        """End the fork server (the servers it forked are each stopped by their own test)."""
        self._control.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._folder.cleanup()


_forks: ServerForks | None = None
_forks_lock = threading.Lock()


def fork_uvicorn(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stdout: IO[bytes],
    listening: socket.socket,
    fork_env: Mapping[str, str],
) -> ForkedProcess:
    """``ServerForks.spawn`` on this test process's fork server, started on first use (and
    again if it has ended) in ``cwd`` with ``fork_env`` (``PYTHONPATH`` included:
    ``sys.path`` is made when a Python starts), ended when the process exits."""
    # A process is started, and says so as Popen does: the fast tier's guard
    # (tests/support/tiers.py) refuses it in a test that must start none, whether the fork
    # server runs already or not.
    command = [sys.executable, "-m", "uvicorn", *args]
    sys.audit("subprocess.Popen", sys.executable, command, str(cwd), env)
    global _forks
    with _forks_lock:
        if _forks is None or not _forks.alive():
            _forks = ServerForks(cwd, fork_env)
            atexit.register(_forks.close)
        forks = _forks
    return forks.spawn(args, env=env, cwd=cwd, stdout=stdout, listening=listening)


# -- the fork server (``python -m tests.support.forked_servers FD``) ---------------------------


def _serve(control: socket.socket) -> None:
    for name in PRELOADED:
        importlib.import_module(name)
    # A fork copies the calling thread only: the imports must have left no other.
    assert threading.active_count() == 1, threading.enumerate()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    control.sendall(b"ready")
    while True:
        for key, _ in selector.select():
            if key.fileobj is control:
                message, fds, _, _ = socket.recv_fds(control, MESSAGE, 3)
                if not message:  # the test process closed its end: done
                    return
                channel = socket.socket(fileno=fds[0])
                pid = os.fork()
                if pid == 0:
                    _run_child(json.loads(message), fds[1], fds[2])
                channel.sendall(json.dumps({"pid": pid}).encode())
                children[pid] = channel
                os.close(fds[1])
                os.close(fds[2])
            else:
                os.read(wake_read, 512)
                _reap(children)


def _reap(children: dict[int, socket.socket]) -> None:
    """Tell each child's owner the exit status of each child that has ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        channel = children.pop(pid, None)
        if channel is not None:
            with contextlib.suppress(OSError):  # its owner may have gone
                channel.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
            channel.close()


def _run_child(request: dict[str, Any], listening: int, output: int) -> None:
    """In the forked child: become ``python -m uvicorn ARGS`` as Popen would have started it;
    never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        target = int(request["fd"])
        if listening != target:
            os.dup2(listening, target)
        # Nothing else of the fork server's stays open: its sockets, pipes and the others'.
        os.closerange(3, target)
        os.closerange(target + 1, os.sysconf("SC_OPEN_MAX"))
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(request["env"])
        args = [str(arg) for arg in request["args"]]
        sys.argv = ["uvicorn", *args]
        from uvicorn.main import main

        try:
            main(args, prog_name="python -m uvicorn")
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # the child ends whatever its output does
                stream.flush()
        os._exit(code)


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])))
