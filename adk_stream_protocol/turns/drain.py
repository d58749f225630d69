"""Draining for a rolling restart (docs/adr/0033).

The ``Bridge`` holds one ``Drain``. What a restart must end registers with it while it lasts:
a request turn (``/stream``, an ai 7 socket's ``send``), a follower of a chunk log, a socket.
When the server is told to stop (``server/draining.py``), ``Drain.run``:

1. marks the server draining: ``/health`` answers 503 and new work is refused with 503 and
   ``Retry-After`` (``refuse_if_draining``), so a load balancer sends it elsewhere;
2. waits, up to the grace, until nothing that registered is busy (responses finish). It waits
   on an event, not a clock: an item is busy until it leaves (``discard``) or says it is no
   longer busy (``changed``);
3. ends what is left, producers before followers before sockets: a turn waits (bounded) for a
   tool that has started, then stops its run and ends its response with an ``error`` that says
   to send again, then ``finish`` and ``[DONE]``; its chunk log ends the same way, so a resume
   on another instance ends cleanly, and its lease is released for the next instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Iterator
from typing import Protocol

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.chunks import ErrorChunk
from adk_stream_protocol.protocol.sse import DONE, encode_event

logger = logging.getLogger(__name__)

# What a response that the restart ends says, and what a refused request is told.
RESTART_TEXT = "The server is restarting; send the message again."
REFUSAL_TEXT = "the server is restarting; try again shortly"
RETRY_AFTER_SECONDS = 1
# After the grace, how long a run's started tool may still take before the run ends anyway.
TOOL_WAIT_SECONDS = 10.0
# How long an ended item may take to wind down (its run's last writes, a socket's close).
END_WAIT_SECONDS = 5.0


class Drainable(Protocol):
    """Something a restart ends: ``order`` 0 producers, 1 followers, 2 sockets."""

    @property
    def order(self) -> int: ...

    @property
    def busy(self) -> bool:
        """Still answering: the drain waits for it, up to the grace. An item that stops being
        busy while it stays registered calls ``Drain.changed``."""
        ...

    async def end_for_restart(self) -> None: ...


class Drain:
    def __init__(self) -> None:
        self.draining = False
        self._over = False  # what was open has been ended: the process is about to exit
        self._items: set[Drainable] = set()
        self._changed = asyncio.Event()  # set when an item left or stopped being busy
        self._late: set[asyncio.Task[None]] = set()

    def add(self, item: Drainable) -> None:
        self._items.add(item)
        if self._over:  # came after the end (a plan that outlived the grace): end it now
            task = asyncio.get_running_loop().create_task(_end(item))
            self._late.add(task)
            task.add_done_callback(self._late.discard)

    @contextlib.contextmanager
    def admission(self) -> Iterator[None]:
        """A request on its way to a turn: refused while the server drains, else waited for
        like an open response, so that a turn whose plan began before the signal registers
        (``add``) before the drain looks away, not after it."""
        self.refuse_if_draining()
        admitted = _Admission()
        self.add(admitted)
        try:
            yield
        finally:
            self.discard(admitted)

    def discard(self, item: Drainable) -> None:
        self._items.discard(item)
        self._changed.set()

    def changed(self) -> None:
        """An item that stays registered is no longer busy: the drain looks again."""
        self._changed.set()

    def refusal(self) -> RequestError:
        """What new work is told while the server drains: 503 with ``Retry-After``."""
        return RequestError(503, REFUSAL_TEXT, retry_after=RETRY_AFTER_SECONDS)

    def refuse_if_draining(self) -> None:
        if self.draining:
            raise self.refusal()

    async def run(self, grace: float) -> None:
        """Stop taking work, let what is open finish within ``grace`` seconds, end the rest."""
        self.draining = True
        started = time.monotonic()
        busy = sum(1 for item in self._items if item.busy)
        logger.info("draining: %d responses open, grace %.0f s", busy, grace)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                while any(item.busy for item in self._items):
                    self._changed.clear()
                    await self._changed.wait()
        left = [item for item in self._items if item.busy]
        self._over = True
        for order in (0, 1, 2):
            items = [item for item in self._items if item.order == order]
            await asyncio.gather(*(_end(item) for item in items))
        logger.info(
            "drained in %.1f s: %d responses ended for the restart",
            time.monotonic() - started,
            len(left),
        )

    async def follow(self, events: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
        """A chunk log's events, ended with the restart's ``error`` and ``[DONE]`` when the
        drain ends it first (the response goes on elsewhere: resume it there)."""
        follower = _Follower()
        self.add(follower)
        ended = asyncio.ensure_future(follower.ended.wait())
        try:
            while True:
                following = asyncio.ensure_future(anext(events))
                await asyncio.wait({following, ended}, return_when=asyncio.FIRST_COMPLETED)
                if not following.done():
                    following.cancel()
                    with contextlib.suppress(BaseException):
                        await following
                    yield restart_error_event()
                    yield DONE.encode()
                    return
                try:
                    yield following.result()
                except StopAsyncIteration:
                    return
        finally:
            ended.cancel()
            self.discard(follower)
            await events.aclose()


def restart_error_event() -> bytes:
    return encode_event(ErrorChunk(error_text=RESTART_TEXT))


async def _end(item: Drainable) -> None:
    try:
        await item.end_for_restart()
    except Exception:
        logger.exception("ending %r for the restart failed", item)


class _Admission:
    """A request being planned: nothing to end; its turn, once begun, is ended on its own."""

    order = 0
    busy = True

    async def end_for_restart(self) -> None:
        return None


class _Follower:
    order = 1
    busy = True

    def __init__(self) -> None:
        self.ended = asyncio.Event()

    async def end_for_restart(self) -> None:
        self.ended.set()
