"""Signals that a process misses while its pub/sub connection is down, and leases taken over
from a holder that never released them (docs/adr/0034).

A reconnect is forced with ``CLIENT KILL`` on the process's own pub/sub connection, whose
next connect is held back by a gate until the test has sent its signal: the signal is then
surely published while nobody of that process listens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as redis

from adk_stream_protocol.coordination.redis.coordination import (
    RedisCoordination,
)
from adk_stream_protocol.coordination.redis.leases import RedisLease
from adk_stream_protocol.coordination.redis.signals import RedisKeys
from tests.coordination.test_coordination import Listener
from tests.coordination.test_redis_coordination import (
    BOUND,
    CHAT,
    Connect,
    waiting_for_the_chat,
    within,
)
from tests.support.waiting import until

# Seconds a test gives what must not happen (a signal reaching a process that was cut off, a
# hook acting on an old signal): an absence has no event to wait on.
NOTHING_SECONDS = 0.2


async def cut_off(store: redis.Redis, process: RedisCoordination) -> Callable[[], None]:
    """Kill the process's pub/sub connection and hold its reconnect until the returned
    function is called."""
    pubsub = process._signals._pubsub
    connection = pubsub.connection
    assert connection is not None
    port = connection._writer.get_extra_info("sockname")[1]  # type: ignore[union-attr, unused-ignore]
    gate = asyncio.Event()
    reconnect = connection.connect

    async def gated() -> None:
        await gate.wait()
        await reconnect()

    connection.connect = gated  # type: ignore[method-assign, unused-ignore]
    clients = await store.client_list(_type="pubsub")
    ours = [c["id"] for c in clients if c["addr"].rsplit(":", 1)[1] == str(port)]
    assert len(ours) == 1, clients
    await store.client_kill_filter(_id=ours[0])
    # The reader has seen its connection go, and now waits at the gate (redis-py has no event
    # for it).
    await until(lambda: not connection.is_connected, "the reader without its connection")
    return gate.set


async def reconnected(process: RedisCoordination, before: int) -> None:
    # A count of subscriptions, no event.
    await until(lambda: process._signals.subscriptions > before, "the reader subscribed again")


@pytest.mark.asyncio
async def test_a_stop_published_while_the_subscriber_reconnects_still_stops(
    connect: Connect, store: redis.Redis
) -> None:
    running, stopping = await connect(), await connect()
    subscription = await running.coordination.stops.subscribe(CHAT)
    other = await running.coordination.stops.subscribe((CHAT[0], "chat-2"))
    reopen = await cut_off(store, running)
    await stopping.coordination.stops.stop(CHAT)
    await asyncio.sleep(NOTHING_SECONDS)
    assert not subscription.stopped.is_set()  # nobody of that process listened
    reopen()
    await within(BOUND, subscription.stopped.wait())
    assert not other.stopped.is_set()
    assert not subscription.deleted.is_set()  # a plain stop
    await subscription.close()
    await other.close()


@pytest.mark.asyncio
async def test_a_delete_published_while_the_subscriber_reconnects_still_deletes(
    connect: Connect, store: redis.Redis
) -> None:
    """The stop key says that the stop was a delete: a /live socket closes on it too."""
    running, stopping = await connect(), await connect()
    subscription = await running.coordination.stops.subscribe(CHAT)
    reopen = await cut_off(store, running)
    await stopping.coordination.stops.stop(CHAT, deleted=True)
    await asyncio.sleep(NOTHING_SECONDS)
    assert not subscription.stopped.is_set()  # nobody of that process listened
    reopen()
    await within(BOUND, subscription.stopped.wait())
    assert subscription.deleted.is_set()
    await subscription.close()


@pytest.mark.asyncio
async def test_a_stop_from_before_the_subscription_does_not_stop_it_after_a_reconnect(
    connect: Connect, store: redis.Redis
) -> None:
    running, stopping = await connect(), await connect()
    await stopping.coordination.stops.stop(CHAT)  # an earlier response's stop
    await asyncio.sleep(NOTHING_SECONDS)  # its signal has come and gone
    subscription = await running.coordination.stops.subscribe(CHAT)
    before = running._signals.subscriptions
    reopen = await cut_off(store, running)
    reopen()
    await within(BOUND, reconnected(running, before))
    await asyncio.sleep(NOTHING_SECONDS)  # the hooks ran
    assert not subscription.stopped.is_set()
    await subscription.close()


@pytest.mark.asyncio
async def test_a_lease_waiter_whose_freed_signal_was_lost_tries_again_after_a_reconnect(
    connect: Connect, store: redis.Redis
) -> None:
    holding, waiting = await connect(lease_ttl=30.0), await connect(lease_ttl=30.0)
    lease = await holding.coordination.leases.acquire(CHAT, 1)
    # It would wait up to 4 * BOUND: the holder's key has 30 s left.
    waiter = asyncio.create_task(waiting.coordination.leases.acquire(CHAT, 4 * BOUND))
    await waiting_for_the_chat(waiting)
    reopen = await cut_off(store, waiting)
    await lease.release()  # its freed signal is lost
    await asyncio.sleep(NOTHING_SECONDS)
    assert not waiter.done()
    reopen()
    taken = await within(BOUND, waiter)  # long before the 30 s TTL
    assert not taken.unclean
    await taken.release()


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["decision", "result"])
async def test_an_answer_published_while_the_waiting_process_reconnects_still_reaches_it(
    connect: Connect, store: redis.Redis, kind: str
) -> None:
    running, answering = await connect(), await connect()
    listener = Listener()
    pending = running.coordination.pending
    pending.watch(CHAT, listener)
    wait: asyncio.Task[Any]
    if kind == "decision":
        wait = asyncio.create_task(pending.ask_approval(CHAT, "call-pay", "pay", BOUND))
    else:
        wait = asyncio.create_task(pending.wait_result(CHAT, "call-loc", BOUND, unwatched={}))
    call = await listener.next()
    reopen = await cut_off(store, running)
    if kind == "decision":
        assert call.approval_id is not None
        await answering.coordination.pending.decide(CHAT, call.approval_id, True)
    else:
        await answering.coordination.pending.deliver(CHAT, "call-loc", {"lat": 35.6})
    await asyncio.sleep(NOTHING_SECONDS)
    assert not wait.done()
    reopen()
    expected = "approved" if kind == "decision" else {"lat": 35.6}
    assert await within(BOUND, wait) == expected
    await pending.unwatch(CHAT, {})


# -- generations ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_lease_taken_after_one_that_lapsed_is_unclean(
    connect: Connect, store: redis.Redis, keys: RedisKeys
) -> None:
    stalled, other = await connect(lease_ttl=0.3), await connect(lease_ttl=0.3)
    first = await stalled.coordination.leases.acquire(CHAT, 1)
    assert (first.generation, first.unclean) == (1, False)  # a chat's first take is clean
    assert isinstance(first, RedisLease)
    first.heartbeat.cancel()  # stalled: no renewal, no release
    second = await other.coordination.leases.acquire(CHAT, BOUND)  # once the key lapsed
    assert (second.generation, second.unclean) == (2, True)
    await second.release()
    third = await stalled.coordination.leases.acquire(CHAT, 1)
    assert (third.generation, third.unclean) == (3, False)  # after a release: clean
    await third.release()
    assert await store.get(keys.clean(CHAT)) == b"3"
    assert await store.pttl(keys.generation(CHAT)) > 0
