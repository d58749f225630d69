"""Benchmark 13's servers: ``server:app`` (ours) with a count of the CPU its session reads take.

Every ``get_session`` of every session service class (ADK's and any wrapper of ours that
subclasses ``BaseSessionService``) is timed, the outermost call only (a wrapper that calls the
service it wraps counts once), in process CPU seconds: the SQL, the decoding and the
validation of every stored event, in any thread of the process. ``GET /bench/history`` gives
the totals so far, and the process's CPU clock. ADK's server for the benchmark calls
``count_session_reads`` on its app too (``bench.longchats``).
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from google.adk.sessions import BaseSessionService


class SessionReads:
    """Totals of one process's session reads."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self._inside: contextvars.ContextVar[bool] = contextvars.ContextVar(
            "bench_session_read", default=False
        )

    def wrap(self, read: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(read)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            if self._inside.get():
                return await read(*args, **kwargs)
            token = self._inside.set(True)
            start = time.process_time()
            try:
                return await read(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - start
                self.calls += 1
                self._inside.reset(token)

        timed.__bench_timed__ = True  # type: ignore[attr-defined]
        return timed


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    sub: type
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


def count_session_reads(app: FastAPI) -> SessionReads:
    """Time every session service's ``get_session`` from now on; serve the totals."""
    reads = SessionReads()
    for cls in [BaseSessionService, *_subclasses(BaseSessionService)]:
        read = cls.__dict__.get("get_session")
        if read is not None and not getattr(read, "__bench_timed__", False):
            setattr(cls, "get_session", reads.wrap(read))  # noqa: B010 - every subclass

    async def history() -> dict[str, float]:
        # "cpu": the whole process's CPU clock, to the nanosecond (/proc's counts are in 10 ms
        # ticks, too coarse for a turn of 20 ms).
        return {"seconds": reads.seconds, "calls": reads.calls, "cpu": time.process_time()}

    app.add_api_route("/bench/history", history, methods=["GET"])
    # Ahead of a mount at "/" (our server's playground, when it is built), which takes the rest.
    app.router.routes.insert(0, app.router.routes.pop())
    return reads


def __getattr__(name: str) -> Any:
    """``bench.session_reads:app``: our server, built on first use (ADK's server imports this
    module for ``count_session_reads`` and must not build ours)."""
    if name != "app":
        raise AttributeError(name)
    from server import app as ours

    if not isinstance(ours, FastAPI):  # an agents folder's app: not what benchmark 13 runs
        raise TypeError("benchmark 13 serves one agent (ADK_STREAM_AGENT), not a folder")
    count_session_reads(ours)
    globals()["app"] = ours
    return ours
