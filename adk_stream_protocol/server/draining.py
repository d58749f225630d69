"""SIGTERM under uvicorn: drain first, then let uvicorn shut down (docs/adr/0033).

uvicorn closes its listening socket as soon as it sees a signal, then waits for the open
responses, however long they take. A rolling restart needs the opposite: keep answering
(``/health`` says draining, new work gets 503 + ``Retry-After``) while the open responses
finish, then end the rest cleanly, and only then shut down.

So at start-up, when uvicorn serves the app from its main thread, ``ShutdownSignals`` takes
its place as the handler of SIGTERM and SIGINT. A signal runs the drains (``Drain.run``: the
whole grace for SIGTERM, none for SIGINT) and then hands the signal to uvicorn. A second
signal goes to uvicorn at once. Several apps in one process (a folder of agents) drain
together under the first one's handler. Anywhere else (another server, a thread) nothing
changes.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

logger = logging.getLogger(__name__)

DrainFunction = Callable[[float], Awaitable[None]]
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class ShutdownSignals:
    """The process's SIGTERM/SIGINT handler while apps that drain run under uvicorn."""

    def __init__(self, server_exit: Callable[[int, FrameType | None], Any]) -> None:
        self._server_exit = server_exit  # uvicorn's Server.handle_exit
        self._previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
        self._loop = asyncio.get_running_loop()
        self._drains: list[tuple[DrainFunction, float]] = []
        self._signalled = False

    @classmethod
    def install(cls, drain: DrainFunction, grace: float) -> ShutdownSignals | None:
        """Drain on SIGTERM before uvicorn shuts down; None where uvicorn's handler is not
        there to wrap."""
        if threading.current_thread() is not threading.main_thread():
            return None
        handler = signal.getsignal(signal.SIGTERM)
        owner = getattr(handler, "__self__", None)
        if isinstance(owner, ShutdownSignals):
            owner._drains.append((drain, grace))
            return owner
        if owner is None or not hasattr(owner, "should_exit") or not callable(handler):
            return None
        signals = cls(handler)
        signals._drains.append((drain, grace))
        for sig in _SIGNALS:
            signal.signal(sig, signals._on_signal)
        return signals

    def remove(self, drain: DrainFunction) -> None:
        self._drains = [(d, grace) for d, grace in self._drains if d != drain]
        if not self._drains and not self._signalled:
            for sig, previous in self._previous.items():
                if signal.getsignal(sig) == self._on_signal:
                    signal.signal(sig, previous)

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        if self._signalled:  # a second signal: uvicorn's own handling, now
            self._server_exit(sig, frame)
            return
        self._signalled = True
        self._loop.call_soon_threadsafe(self._start, sig)

    def _start(self, sig: int) -> None:
        self._task = self._loop.create_task(self._drain_then_exit(sig), name="drain")

    async def _drain_then_exit(self, sig: int) -> None:
        name = signal.Signals(sig).name
        logger.info("%s: draining before shutdown", name)
        try:
            await asyncio.gather(
                *(drain(grace if sig == signal.SIGTERM else 0.0) for drain, grace in self._drains),
                return_exceptions=True,
            )
        finally:
            self._server_exit(sig, None)
