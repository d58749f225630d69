"""``Drain.run`` (docs/adr/0033) waits on its items' signals, never on a clock: it ends as
soon as nothing registered is busy, and at the grace at the latest."""

from __future__ import annotations

import asyncio
import contextlib
import time

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.turns.drain import Drain


class Item:
    def __init__(self, drain: Drain, order: int, *, busy: bool) -> None:
        self._drain = drain
        self.order = order
        self.busy = busy
        self.ended_at: float | None = None
        self.ended = asyncio.Event()

    def done(self) -> None:
        self.busy = False
        self._drain.changed()

    async def end_for_restart(self) -> None:
        self.ended_at = time.monotonic()
        self.ended.set()


def test_the_drain_ends_when_the_last_busy_item_says_so() -> None:
    async def scenario() -> tuple[float, Item, Item]:
        drain = Drain()
        answering = Item(drain, 2, busy=True)
        producer = Item(drain, 0, busy=True)
        drain.add(answering)
        drain.add(producer)
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, answering.done)
        loop.call_later(0.1, drain.discard, producer)  # a producer leaves when it ends
        started = time.monotonic()
        await drain.run(grace=30)
        return time.monotonic() - started, answering, producer

    took, answering, producer = asyncio.run(scenario())
    assert took < 1, "ended when nothing was busy, not at the grace"
    assert answering.ended_at is not None  # still registered: closed at the end
    assert producer.ended_at is None  # it had left


def test_the_grace_bounds_the_wait_and_what_is_left_ends_in_order() -> None:
    async def scenario() -> tuple[float, list[Item]]:
        drain = Drain()
        items = [Item(drain, 2, busy=False), Item(drain, 1, busy=True), Item(drain, 0, busy=True)]
        for item in items:
            drain.add(item)
        started = time.monotonic()
        await drain.run(grace=0.2)
        return time.monotonic() - started, items

    took, (socket, follower, producer) = asyncio.run(scenario())
    assert 0.2 <= took < 1
    assert producer.ended_at is not None and follower.ended_at is not None
    assert socket.ended_at is not None
    assert producer.ended_at <= follower.ended_at <= socket.ended_at


def test_a_request_being_planned_holds_the_drain_until_its_turn_has_begun() -> None:
    """The race a rolling restart under load found: a request past the draining check whose
    turn began after the drain had looked, and was cut when the process exited."""

    async def scenario() -> tuple[Item, bool]:
        drain = Drain()
        planned = asyncio.Event()
        turn = Item(drain, 0, busy=True)

        admitted = asyncio.Event()

        async def request() -> None:
            with drain.admission():
                admitted.set()
                await planned.wait()  # the plan's awaits: the lease, the session
                drain.add(turn)  # the turn begins

        asyncio.get_running_loop().call_later(0.1, planned.set)
        asyncio.get_running_loop().call_later(0.2, drain.discard, turn)  # its run ends
        running = asyncio.create_task(request())
        await admitted.wait()  # admitted before the signal
        await drain.run(grace=30)
        await running
        return turn, drain.draining

    turn, draining = asyncio.run(scenario())
    assert draining and turn.ended_at is None, "the turn ran to its end within the grace"


def test_a_request_after_the_signal_is_refused_and_a_late_turn_is_ended_at_once() -> None:
    async def scenario() -> tuple[int, Item]:
        drain = Drain()
        await drain.run(grace=0)
        try:
            with drain.admission():
                pass
        except RequestError as exc:
            status = exc.status
        late = Item(drain, 0, busy=True)  # a plan that outlived the grace
        drain.add(late)
        with contextlib.suppress(TimeoutError):  # the assertion below says what was late
            await asyncio.wait_for(late.ended.wait(), 0.01)
        return status, late

    status, late = asyncio.run(scenario())
    assert status == 503
    assert late.ended_at is not None
