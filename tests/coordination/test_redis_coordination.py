"""What only the Redis coordination does: several processes, crashed holders, keys that expire.

Each test opens two (or more) ``RedisCoordination`` connections on one prefix, standing for
the processes of one server; a holder that dies is a real subprocess killed with SIGKILL. The
contract both implementations share is in ``test_coordination.py``. Leases live for half a
second here, so a dead holder is noticed quickly; every wait has a bound, so a broken
implementation fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis

from adk_stream_protocol.coordination.base import ChatKey, SignIn
from adk_stream_protocol.coordination.redis.chunk_logs import PRODUCER_GONE_EVENT
from adk_stream_protocol.coordination.redis.coordination import (
    RedisCoordination,
    connect_redis_coordination,
)
from adk_stream_protocol.coordination.redis.signals import RedisKeys, listened
from tests.coordination.test_coordination import Listener, Reader, read_all
from tests.support.waiting import until, until_awaited

ROOT = Path(__file__).resolve().parents[2]
CHAT: ChatKey = ("user:1/ü*?[x]", "chat-1")  # a user id with every kind of character
LEASE_TTL = 0.5  # seconds
LOG_TTL = 1.0
BOUND = 5.0  # seconds: no passing test waits this long for anything
DONE_EVENT = b"data: [DONE]\n\n"

Connect = Callable[..., Awaitable[RedisCoordination]]


async def within(seconds: float, work: Awaitable[Any]) -> Any:
    return await asyncio.wait_for(work, seconds)


async def waiting_for_the_chat(process: RedisCoordination, chat: ChatKey = CHAT) -> None:
    """Until a lease waiter of ``process`` listens for the chat's ``freed`` signal, as it does
    when it starts, before its first try (the process's handlers are all that show it)."""
    channel = process._leases.keys.signal("freed", chat)
    await until(lambda: channel in process._signals._handlers, "a waiter listening")


async def pointer_of(store: redis.Redis, keys: RedisKeys) -> dict[str, Any]:
    """The chat's log pointer as its producer wrote it."""
    pointer = await store.get(keys.active(CHAT))
    assert pointer is not None, "the chat has a log"
    return dict(json.loads(pointer))


class Holder:
    """A process of its own holding the chat's lease (and, if asked, writing a log), until it
    is killed."""

    SCRIPT = """
import asyncio, sys
from adk_stream_protocol.coordination.redis.coordination import connect_redis_coordination

async def main():
    url, prefix, user_id, chat_id, ttl, write_log = sys.argv[1:]
    connected = await connect_redis_coordination(
        url, prefix=prefix, lease_ttl_seconds=float(ttl), log_ttl_seconds=1.0
    )
    chat = (user_id, chat_id)
    lease = await connected.coordination.leases.acquire(chat, 5)
    if write_log == "yes":
        log = await connected.coordination.chunk_logs.open(chat, lease)
        await log.append([b"data: 1\\n\\n", b"data: 2\\n\\n"])
    print(lease.token, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""

    def __init__(self, process: asyncio.subprocess.Process, token: str) -> None:
        self.process = process
        self.token = token

    @classmethod
    async def start(
        cls, url: str, prefix: str, *, write_log: bool = False, lease_ttl: float = LEASE_TTL
    ) -> Holder:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            cls.SCRIPT,
            url,
            prefix,
            *CHAT,
            str(lease_ttl),
            "yes" if write_log else "no",
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        try:
            line = await within(30, process.stdout.readline())  # 30: a cold interpreter
        except BaseException:
            process.kill()
            await process.wait()
            raise
        assert line, "the holder process ended before it held the lease"
        return cls(process, line.decode().strip())

    async def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()


# -- connecting ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_unreachable_redis_is_named_without_its_credentials() -> None:
    with pytest.raises(RuntimeError) as raised:
        await connect_redis_coordination(
            "redis://someone:s3cret-pw@127.0.0.1:1/0",
            prefix="p",
            lease_ttl_seconds=1,
            log_ttl_seconds=1,
        )
    message = str(raised.value)
    assert "127.0.0.1:1" in message
    assert "s3cret-pw" not in message
    assert "someone" not in message


def test_chats_are_named_apart_whatever_their_user_ids_hold(keys: RedisKeys) -> None:
    assert keys.lease(("a:b", "c")) != keys.lease(("a", "b:c"))
    assert keys.lease(CHAT) == f"{keys.prefix}:{{user%3A1%2F%C3%BC%2A%3F%5Bx%5D:chat-1}}:lease"
    assert keys.signal("stop", CHAT).startswith(f"{keys.prefix}:signal:")
    assert keys.new_log(CHAT) != keys.new_log(CHAT)


# -- leases --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_waiter_in_another_process_gets_the_chat_the_moment_it_is_released(
    connect: Connect, store: redis.Redis, keys: RedisKeys
) -> None:
    # A long TTL: only the freed signal can hand the chat over this fast.
    first, second = await connect(lease_ttl=30), await connect(lease_ttl=30)
    lease = await first.coordination.leases.acquire(CHAT, BOUND)
    assert await store.get(keys.lease(CHAT)) == lease.token.encode()
    assert await second.coordination.leases.try_acquire(CHAT) is None
    with pytest.raises(TimeoutError):
        await second.coordination.leases.acquire(CHAT, 0.05)
    waiter = asyncio.create_task(second.coordination.leases.acquire(CHAT, BOUND))
    await waiting_for_the_chat(second)
    assert not waiter.done()
    loop = asyncio.get_running_loop()
    released = loop.time()
    await lease.release()
    taken = await within(BOUND, waiter)
    assert loop.time() - released < 1.0  # far below the 30 s the key had left
    assert await store.get(keys.lease(CHAT)) == taken.token.encode()
    assert await first.coordination.leases.try_acquire(CHAT) is None
    await taken.release()
    assert await store.exists(keys.lease(CHAT)) == 0


@pytest.mark.asyncio
async def test_a_cancelled_waiter_leaves_nothing_behind(
    connect: Connect, store: redis.Redis, keys: RedisKeys
) -> None:
    first, second = await connect(), await connect()
    lease = await first.coordination.leases.acquire(CHAT, BOUND)
    waiter = asyncio.create_task(second.coordination.leases.acquire(CHAT, BOUND))
    await waiting_for_the_chat(second)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await lease.release()
    assert await store.exists(keys.lease(CHAT)) == 0  # the cancelled waiter took nothing


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["deleted", "overwritten"])
async def test_a_holder_whose_key_is_gone_is_told_and_never_touches_the_next_one(
    connect: Connect, store: redis.Redis, keys: RedisKeys, how: str
) -> None:
    first, second = await connect(), await connect()
    lease = await first.coordination.leases.acquire(CHAT, BOUND)
    if how == "deleted":
        await store.delete(keys.lease(CHAT))
    else:
        await store.set(keys.lease(CHAT), "someone-else", px=round(LEASE_TTL * 1000))
    await within(LEASE_TTL, lease.lost.wait())  # noticed at the next renewal (a third)
    if how == "overwritten":
        await store.delete(keys.lease(CHAT))
    successor = await second.coordination.leases.acquire(CHAT, BOUND)
    await lease.release()  # the lapsed holder's release leaves the successor's key alone
    assert await store.get(keys.lease(CHAT)) == successor.token.encode()
    with pytest.raises(TimeoutError):  # past its TTL, the successor's lease is renewed, not lost
        await asyncio.wait_for(successor.lost.wait(), LEASE_TTL * 1.2)
    assert await store.get(keys.lease(CHAT)) == successor.token.encode()
    await successor.release()


@pytest.mark.asyncio
async def test_a_sign_in_bound_in_one_process_is_taken_once_in_another_and_expires_in_redis(
    connect: Connect, store: redis.Redis, keys: RedisKeys
) -> None:
    first, second = await connect(), await connect()
    sign_in = SignIn(chat=CHAT, call_id="call-1", answer={"credentialKey": "k"})
    await first.coordination.sign_ins.bind("state:{1}", sign_in, 60)
    assert 0 < await store.pttl(keys.sign_in("state:{1}")) <= 60_000  # Redis lets it expire
    assert await second.coordination.sign_ins.take("state:{1}") == sign_in
    assert await first.coordination.sign_ins.take("state:{1}") is None
    assert await store.exists(keys.sign_in("state:{1}")) == 0


@pytest.mark.asyncio
async def test_a_mark_of_kept_results_counts_only_while_its_holder_holds_the_chat(
    connect: Connect, store: redis.Redis, keys: RedisKeys
) -> None:
    """Another process reads the mark; a holder that lapsed without its release leaves a mark
    that names a token no longer held, which says nothing about the next holder."""
    first, second = await connect(), await connect()
    lease = await first.coordination.leases.acquire(CHAT, BOUND)
    await lease.hold_for_results(60)
    assert await second.coordination.leases.results_waiting(CHAT)
    assert 0 < await store.pttl(keys.results(CHAT)) <= 60_000
    await store.delete(keys.lease(CHAT))  # lapsed: a crash, or a stall past its TTL
    successor = await second.coordination.leases.acquire(CHAT, BOUND)
    assert not await first.coordination.leases.results_waiting(CHAT)
    await within(BOUND, lease.lost.wait())
    await lease.release()  # the lapsed holder's release touches neither key
    assert await store.exists(keys.results(CHAT)) == 1
    await successor.release()  # a release removes what is left of a mark
    assert await store.exists(keys.results(CHAT)) == 0
    again = await first.coordination.leases.acquire(CHAT, BOUND)
    await again.hold_for_results(60)
    await again.release()  # the release takes the mark with it
    assert await store.exists(keys.results(CHAT)) == 0


# -- stop signals --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_stop_reaches_the_chats_subscribers_in_every_process(connect: Connect) -> None:
    first, second = await connect(), await connect()
    there = await first.coordination.stops.subscribe(CHAT)
    closed = await first.coordination.stops.subscribe(CHAT)
    other_chat = await first.coordination.stops.subscribe((CHAT[0], "chat-2"))
    here = await second.coordination.stops.subscribe(CHAT)
    await closed.close()
    await second.coordination.stops.stop(CHAT)
    assert here.stopped.is_set()  # at once in the process that stopped
    await within(BOUND, there.stopped.wait())
    # Signals of one publisher arrive in order: once a later one is in, the earlier was too.
    marker = await first.coordination.stops.subscribe((CHAT[0], "chat-3"))
    await second.coordination.stops.stop((CHAT[0], "chat-3"))
    await within(BOUND, marker.stopped.wait())
    assert not closed.stopped.is_set()
    assert not other_chat.stopped.is_set()
    assert not there.deleted.is_set()
    there.stopped.clear()
    await second.coordination.stops.stop(CHAT, deleted=True)  # the chat's delete
    assert here.deleted.is_set()
    await within(BOUND, there.stopped.wait())
    assert there.deleted.is_set()  # set before ``stopped``
    for subscription in (there, other_chat, here, marker):
        await subscription.close()


# -- pending calls -------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("approved", "outcome"), [(True, "approved"), (False, "denied")])
async def test_a_decision_in_one_process_resolves_the_approval_waiting_in_another(
    connect: Connect, approved: bool, outcome: str
) -> None:
    running, answering = await connect(), await connect()
    listener = Listener()
    running.coordination.pending.watch(CHAT, listener)
    task = asyncio.create_task(
        running.coordination.pending.ask_approval(CHAT, "call-pay", "process_payment", BOUND)
    )
    call = await listener.next()
    assert call.approval_id is not None
    assert await answering.coordination.pending.waiting(CHAT) == []  # waits are per process
    await answering.coordination.pending.decide(CHAT, call.approval_id, approved)
    assert await within(BOUND, task) == outcome
    await running.coordination.pending.unwatch(CHAT, {})


@pytest.mark.asyncio
async def test_results_and_cancels_from_another_process_reach_the_waiting_calls(
    connect: Connect,
) -> None:
    running, answering = await connect(), await connect()
    listener = Listener()
    running.coordination.pending.watch(CHAT, listener)
    pending = running.coordination.pending
    browser = asyncio.create_task(pending.wait_result(CHAT, "call-loc", BOUND, unwatched={}))
    await listener.next()
    await answering.coordination.pending.deliver(CHAT, "call-loc", {"lat": 35.6})
    assert await within(BOUND, browser) == {"lat": 35.6}

    approval = asyncio.create_task(pending.ask_approval(CHAT, "call-pay", "pay", BOUND))
    await listener.next()
    camera = asyncio.create_task(pending.wait_result(CHAT, "call-cam", BOUND, unwatched={}))
    await listener.next()
    await answering.coordination.pending.cancel(CHAT, {"error": "stopped"})
    assert await within(BOUND, approval) == "cancelled"
    assert await within(BOUND, camera) == {"error": "stopped"}

    camera = asyncio.create_task(pending.wait_result(CHAT, "call-cam", BOUND, unwatched={}))
    await listener.next()
    await answering.coordination.pending.unwatch(CHAT, {"error": "left"})
    assert await within(BOUND, camera) == {"error": "left"}
    await pending.unwatch(CHAT, {})


# -- chunk logs ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_log_written_in_one_process_is_followed_in_another(
    connect: Connect, store: redis.Redis, keys: RedisKeys
) -> None:
    producer, follower = await connect(), await connect()
    lease = await producer.coordination.leases.acquire(CHAT, BOUND)
    log = await producer.coordination.chunk_logs.open(CHAT, lease)
    await log.append([b"start", b"text-1"])
    (stream,) = [key async for key in store.scan_iter(match=f"{keys.prefix}:*:log:*")]
    assert 0 < await store.ttl(stream) <= 24 * 3600  # a crashed producer's log goes too
    events = await follower.coordination.chunk_logs.follow(CHAT)
    assert events is not None
    reader = Reader(events)
    assert await reader.until(2) == [b"start", b"text-1"]  # replayed
    late = await follower.coordination.chunk_logs.follow(CHAT)
    assert late is not None  # attached before the close, it reads to the end too
    await log.append([b"text-2"])
    assert await reader.until(3) == [b"start", b"text-1", b"text-2"]  # live
    await log.append([DONE_EVENT])
    await log.close()
    expected = [b"start", b"text-1", b"text-2", DONE_EVENT]
    assert await within(BOUND, reader.task) == expected
    assert await within(BOUND, read_all(late)) == expected
    assert await follower.coordination.chunk_logs.follow(CHAT) is None
    assert await store.exists(keys.active(CHAT)) == 0
    assert 0 < await store.pttl(stream) <= LOG_TTL * 1000  # kept a little for late readers
    await lease.release()


@pytest.mark.asyncio
async def test_a_follower_ends_with_an_error_once_the_producers_lease_is_gone(
    connect: Connect, store: redis.Redis, keys: RedisKeys
) -> None:
    producer, follower = await connect(), await connect()
    lease = await producer.coordination.leases.acquire(CHAT, BOUND)
    log = await producer.coordination.chunk_logs.open(CHAT, lease)
    await log.append([b"start"])
    events = await follower.coordination.chunk_logs.follow(CHAT)
    assert events is not None
    reader = Reader(events)
    await reader.until(1)
    await store.delete(keys.lease(CHAT))  # as if the producer's lease had lapsed
    received = await within(LEASE_TTL * 2, reader.task)
    assert received == [b"start", PRODUCER_GONE_EVENT, DONE_EVENT]
    assert b'"type":"error"' in PRODUCER_GONE_EVENT
    assert b"send the message again" in PRODUCER_GONE_EVENT
    assert await follower.coordination.chunk_logs.follow(CHAT) is None  # the pointer went
    assert await store.exists(keys.active(CHAT)) == 0
    await lease.release()


@pytest.mark.asyncio
async def test_a_log_whose_producer_lost_its_lease_is_not_an_active_response(
    connect: Connect, store: redis.Redis, keys: RedisKeys
) -> None:
    """A crashed producer leaves its pointer behind: a list of chats must not show the chat
    as answering for the day the pointer lasts."""
    producer, other = await connect(), await connect()
    lease = await producer.coordination.leases.acquire(CHAT, BOUND)
    log = await producer.coordination.chunk_logs.open(CHAT, lease)
    await log.append([b"start"])
    assert await other.coordination.chunk_logs.with_active_response([CHAT]) == {CHAT}
    await store.delete(keys.lease(CHAT))  # as if the producer's lease had lapsed
    assert await other.coordination.chunk_logs.with_active_response([CHAT]) == set()
    assert await store.exists(keys.active(CHAT)) == 1  # only looked at, not dropped
    await other.coordination.chunk_logs.discard(CHAT)
    assert await store.exists(keys.active(CHAT)) == 0
    await lease.release()


@pytest.mark.asyncio
async def test_a_killed_holder_lapses_and_its_log_ends_with_an_error_then_is_forgotten(
    connect: Connect, store: redis.Redis, keys: RedisKeys, redis_url: str, redis_prefix: str
) -> None:
    other = await connect()
    holder = await Holder.start(redis_url, redis_prefix, write_log=True)
    try:
        assert await store.get(keys.lease(CHAT)) == holder.token.encode()
        assert await other.coordination.leases.try_acquire(CHAT) is None
        events = await other.coordination.chunk_logs.follow(CHAT)
        assert events is not None
        reader = Reader(events)
        assert await reader.until(2) == [b"data: 1\n\n", b"data: 2\n\n"]
    finally:
        await holder.kill()
    loop = asyncio.get_running_loop()
    killed = loop.time()
    # Its lease lapses (no signal says so: the waiter wakes when the key's TTL runs out)...
    lease = await other.coordination.leases.acquire(CHAT, BOUND)
    assert loop.time() - killed < LEASE_TTL + 0.3
    assert lease.token != holder.token
    # ...its follower gets an error and [DONE] instead of waiting for ever...
    received = await within(BOUND, reader.task)
    assert received[2:] == [PRODUCER_GONE_EVENT, DONE_EVENT]
    assert loop.time() - killed < LEASE_TTL * 4 / 3 + 0.3  # the lapse, then a third at most
    # ...and its stale pointer goes at the first look.
    assert await store.exists(keys.active(CHAT)) == 1
    assert await other.coordination.chunk_logs.follow(CHAT) is None
    assert await store.exists(keys.active(CHAT)) == 0
    await lease.release()


@pytest.mark.asyncio
async def test_a_resume_after_its_producer_was_killed_is_no_follower_and_gets_the_chat(
    connect: Connect, store: redis.Redis, keys: RedisKeys, redis_url: str, redis_prefix: str
) -> None:
    """A process killed mid-response leaves its log, never ended, and its lease until that
    lapses. A resume that comes after it died does not follow that log (it would end in an
    ``error``): it waits out the lease, has no active response, and the chat is free for it
    to finish the cut turn (docs/adr/0032)."""
    other = await connect()
    holder = await Holder.start(redis_url, redis_prefix, write_log=True, lease_ttl=3.0)
    presence = (await pointer_of(store, keys))["presence"]
    try:
        assert await listened(store, presence)
    finally:
        await holder.kill()

    async def closed() -> bool:
        return not await listened(store, presence)

    await until_awaited(closed, "the killed process's connection closed")
    assert await store.get(keys.lease(CHAT)) == holder.token.encode()  # not lapsed yet
    assert await within(BOUND, other.coordination.chunk_logs.follow(CHAT)) is None
    assert await store.exists(keys.active(CHAT)) == 0
    lease = await other.coordination.leases.try_acquire(CHAT)
    assert lease is not None and lease.unclean  # taken after a holder that never released
    await lease.release()


@pytest.mark.asyncio
async def test_a_live_producers_log_is_followed_without_waiting_for_its_lease(
    connect: Connect,
) -> None:
    """Its process listens on its presence channel: a resume follows at once, long before
    the lease (30 s here) could lapse."""
    producer, follower = await connect(lease_ttl=30), await connect(lease_ttl=30)
    lease = await producer.coordination.leases.acquire(CHAT, BOUND)
    log = await producer.coordination.chunk_logs.open(CHAT, lease)
    await log.append([b"start"])
    events = await within(BOUND, follower.coordination.chunk_logs.follow(CHAT))
    assert events is not None
    reader = Reader(events)
    assert await reader.until(1) == [b"start"]
    await log.close()
    assert await within(BOUND, reader.task) == [b"start"]
    await lease.release()


@pytest.mark.asyncio
async def test_a_producer_unheard_on_its_presence_channel_but_renewing_its_lease_is_followed(
    connect: Connect, store: redis.Redis, keys: RedisKeys
) -> None:
    """A live process whose pub/sub connection is down for a moment is not heard on its
    presence channel: the lease it keeps renewing past the resume's wait says it lives, and
    the resume follows its log after all."""
    producer, follower = await connect(), await connect()
    lease = await producer.coordination.leases.acquire(CHAT, BOUND)
    log = await producer.coordination.chunk_logs.open(CHAT, lease)
    await log.append([b"start"])
    pointer = await pointer_of(store, keys)
    pointer["presence"] = keys.presence("a-process-that-does-not-listen")
    await store.set(keys.active(CHAT), json.dumps(pointer))
    events = await within(BOUND, follower.coordination.chunk_logs.follow(CHAT))
    assert events is not None
    reader = Reader(events)
    assert await reader.until(1) == [b"start"]
    await log.append([b"more"])
    await log.close()
    assert await within(BOUND, reader.task) == [b"start", b"more"]
    await lease.release()
    await store.delete(keys.active(CHAT))  # the log's close only drops its own pointer


@pytest.mark.asyncio
async def test_cancelling_a_follower_in_its_blocking_read_keeps_the_pool_sound(
    connect: Connect, redis_url: str
) -> None:
    producer = await connect()
    # Two connections: the pub/sub one and one for commands. A connection leaked by a
    # cancelled read would leave none, and the next command would fail.
    small = f"{redis_url}{'&' if '?' in redis_url else '?'}max_connections=2"
    follower = await connect(url=small)
    lease = await producer.coordination.leases.acquire(CHAT, BOUND)
    log = await producer.coordination.chunk_logs.open(CHAT, lease)
    await log.append([b"a"])
    for _ in range(3):
        events = await follower.coordination.chunk_logs.follow(CHAT)
        assert events is not None
        reader = Reader(events)
        await reader.until(1)  # it now waits in XREAD BLOCK
        reader.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader.task
        assert isinstance(events, AsyncGenerator)
        await events.aclose()
        assert await within(BOUND, follower.client.ping())
    events = await follower.coordination.chunk_logs.follow(CHAT)
    assert events is not None
    await log.append([b"b"])
    await log.close()
    assert await within(BOUND, read_all(events)) == [b"a", b"b"]
    await lease.release()
