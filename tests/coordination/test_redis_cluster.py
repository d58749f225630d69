"""Redis Cluster (docs/adr/0031): a chat's keys share a hash slot, so its scripts and
transactions run on a cluster; signals cross its nodes; a server on one answers and resumes.

The cluster is three real ``redis-server`` nodes this run starts (``redis_cluster_url`` in
tests/support/services.py; skipped with the reason where ``redis-server`` is absent, failed in CI).
The coordination's contract runs on it too, in ``test_coordination.py``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from binascii import crc_hqx
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio
import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.coordination.redis.chunk_logs import _CLOSE
from adk_stream_protocol.coordination.redis.coordination import (
    RedisCoordination,
    connect_redis_coordination,
)
from adk_stream_protocol.coordination.redis.signals import RedisKeys, listened
from tests.coordination.test_coordination import Listener, Reader, read_all
from tests.coordination.test_redis_coordination import waiting_for_the_chat
from tests.support.rig import (
    chat_body,
    post_stream,
    run_server,
    stream_result,
    streaming,
    user_message,
)

CHAT: ChatKey = ("user:1/ü*?[x]{tag}", "chat-{1}")  # braces, as a hash tag would have them
CHATS: list[ChatKey] = [CHAT, ("local-user", "chat-1"), ("a:b", "c"), ("a", "b:c"), ("", "x")]
LEASE_TTL = 0.5  # seconds
LOG_TTL = 1.0
BOUND = 5.0  # seconds: no passing test waits this long for anything

Connect = Callable[..., Awaitable[RedisCoordination]]


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex[:8]}:app"  # the cluster is this run's own


@pytest.fixture
def keys(prefix: str) -> RedisKeys:
    return RedisKeys(prefix)


@pytest_asyncio.fixture
async def connect(redis_cluster_url: str, prefix: str) -> AsyncIterator[Connect]:
    """Opens a connection to the cluster under the test's prefix (a "process")."""
    opened: list[RedisCoordination] = []

    async def open_one(lease_ttl: float = LEASE_TTL) -> RedisCoordination:
        connected = await connect_redis_coordination(
            redis_cluster_url,
            prefix=prefix,
            lease_ttl_seconds=lease_ttl,
            log_ttl_seconds=LOG_TTL,
            cluster=True,
        )
        opened.append(connected)
        return connected

    yield open_one
    for connected in opened:
        await connected.close()


@pytest_asyncio.fixture
async def store(redis_cluster_url: str) -> AsyncIterator[RedisCluster]:
    """A plain cluster client, to look at the keys."""
    client = RedisCluster.from_url(redis_cluster_url)
    await client.initialize()
    yield client
    await client.aclose()


def slot(name: str) -> int:
    return key_slot(name.encode())


# -- key names -----------------------------------------------------------------------------------


def test_every_key_and_channel_of_a_chat_is_in_the_slot_of_its_hash_tag(keys: RedisKeys) -> None:
    for chat in CHATS:
        names = [
            keys.lease(chat),
            keys.active(chat),
            keys.new_log(chat),
            keys.new_log(chat),
            keys.signal("stop", chat),
            keys.signal("freed", chat),
            keys.stop(chat),
            keys.answers(chat),
            keys.generation(chat),
            keys.clean(chat),
        ]
        tag = keys.lease(chat).split("{", 1)[1].split("}", 1)[0]
        assert tag, "a non-empty hash tag"
        assert {slot(name) for name in names} == {crc_hqx(tag.encode(), 0) % 16384}, names
    # Chats are spread over the slots, not all in one.
    assert len({slot(keys.lease(("user", f"chat-{i}"))) for i in range(64)}) > 48


def test_chats_are_still_named_apart(keys: RedisKeys) -> None:
    assert keys.lease(("a:b", "c")) != keys.lease(("a", "b:c"))
    assert keys.lease(("a}", "c")) != keys.lease(("a", "}c"))
    for chat in CHATS:
        assert keys.lease(chat).startswith(f"{keys.prefix}:"), "every name starts with the prefix"


# -- what the cluster itself accepts -------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_cluster_runs_a_script_on_two_keys_of_one_chat(
    store: RedisCluster, keys: RedisKeys
) -> None:
    """The end of a log (its end marker, its expiry, the chat's pointer dropped) is one script
    on two keys. Sent straight to the node holding the log, so that the server's own slot
    check answers, not redis-py's: keys of two slots get ``CROSSSLOT``."""
    stream, pointer = keys.new_log(CHAT), keys.active(CHAT)
    await store.xadd(stream, {"e": "1"})
    await store.set(pointer, "mine")
    node = store.get_node_from_key(stream)
    ended = await store.execute_command(
        "EVAL", _CLOSE, 2, stream, pointer, 1000, "mine", target_nodes=node
    )
    assert ended == 1
    assert await store.exists(pointer) == 0
    assert 0 < await store.pttl(stream) <= 1000


# -- several processes on the cluster ------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_signal_published_on_any_node_reaches_a_process(
    connect: Connect, store: RedisCluster, keys: RedisKeys
) -> None:
    """Each process listens on one node; a PUBLISH on any node reaches it."""
    process = await connect()
    for index, node in enumerate(store.get_primaries()):
        chat = (CHAT[0], f"chat-{index}")
        subscription = await process.coordination.stops.subscribe(chat)
        plain = redis.Redis(host=node.host, port=int(node.port))
        try:
            message = json.dumps({"origin": "another-process"})
            await plain.publish(keys.signal("stop", chat), message)
        finally:
            await plain.aclose()
        await asyncio.wait_for(subscription.stopped.wait(), BOUND)
        await subscription.close()


@pytest.mark.asyncio
async def test_a_lease_released_in_one_process_goes_at_once_to_a_waiter_in_another(
    connect: Connect, store: RedisCluster, keys: RedisKeys
) -> None:
    first, second = await connect(lease_ttl=30), await connect(lease_ttl=30)
    lease = await first.coordination.leases.acquire(CHAT, BOUND)
    assert await store.get(keys.lease(CHAT)) == lease.token.encode()
    assert await second.coordination.leases.try_acquire(CHAT) is None
    waiter = asyncio.create_task(second.coordination.leases.acquire(CHAT, BOUND))
    await waiting_for_the_chat(second, CHAT)
    assert not waiter.done()
    loop = asyncio.get_running_loop()
    released = loop.time()
    await lease.release()
    taken = await asyncio.wait_for(waiter, BOUND)
    assert loop.time() - released < 1.0  # the freed signal, not the 30 s TTL
    await taken.release()
    assert await store.exists(keys.lease(CHAT)) == 0


@pytest.mark.asyncio
async def test_stops_and_answers_cross_processes_on_the_cluster(connect: Connect) -> None:
    running, answering = await connect(), await connect()
    stopped = await running.coordination.stops.subscribe(CHAT)
    await answering.coordination.stops.stop(CHAT)
    await asyncio.wait_for(stopped.stopped.wait(), BOUND)
    await stopped.close()

    listener = Listener()
    running.coordination.pending.watch(CHAT, listener)
    pending = running.coordination.pending
    approval = asyncio.create_task(pending.ask_approval(CHAT, "call-pay", "pay", BOUND))
    call = await listener.next()
    assert call.approval_id is not None
    await answering.coordination.pending.decide(CHAT, call.approval_id, True)
    assert await asyncio.wait_for(approval, BOUND) == "approved"
    await pending.unwatch(CHAT, {})


@pytest.mark.asyncio
async def test_a_log_written_in_one_process_is_followed_in_another(
    connect: Connect, store: RedisCluster, keys: RedisKeys
) -> None:
    producer, follower = await connect(), await connect()
    lease = await producer.coordination.leases.acquire(CHAT, BOUND)
    log = await producer.coordination.chunk_logs.open(CHAT, lease)
    await log.append([b"start", b"text-1"])
    events = await follower.coordination.chunk_logs.follow(CHAT)
    assert events is not None
    reader = Reader(events)
    assert await reader.until(2) == [b"start", b"text-1"]
    await log.append([b"text-2"])
    await log.close()
    assert await asyncio.wait_for(reader.task, BOUND) == [b"start", b"text-1", b"text-2"]
    assert await follower.coordination.chunk_logs.follow(CHAT) is None
    assert await store.exists(keys.active(CHAT)) == 0
    again = await producer.coordination.chunk_logs.open(CHAT, lease)
    await again.close()
    events = await follower.coordination.chunk_logs.follow(CHAT)
    assert events is None or await asyncio.wait_for(read_all(events), BOUND) == []
    await lease.release()


@pytest.mark.asyncio
async def test_a_process_is_heard_on_its_presence_channel_whichever_node_it_listens_on(
    connect: Connect, store: RedisCluster, keys: RedisKeys
) -> None:
    """Each process subscribes on one node, picked at random; a subscription counts only on
    its node, so every primary is asked. A live producer's log is followed at once, long
    before its lease (30 s here) could lapse."""
    follower = await connect(lease_ttl=30)
    producers = [await connect(lease_ttl=30) for _ in store.get_primaries()]
    for process in producers:
        assert await listened(store, process._signals.presence)
    assert not await listened(store, keys.presence("a-process-that-does-not-listen"))
    for index, producer in enumerate(producers):
        chat = (CHAT[0], f"chat-{index}")
        lease = await producer.coordination.leases.acquire(chat, BOUND)
        log = await producer.coordination.chunk_logs.open(chat, lease)
        await log.append([b"start"])
        events = await asyncio.wait_for(follower.coordination.chunk_logs.follow(chat), BOUND)
        assert events is not None
        reader = Reader(events)
        assert await reader.until(1) == [b"start"]
        await log.close()
        assert await asyncio.wait_for(reader.task, BOUND) == [b"start"]
        await lease.release()


# -- a server on the cluster ---------------------------------------------------------------------


def test_a_server_on_the_cluster_answers_and_resumes(
    redis_cluster_url: str, tmp_path: Path
) -> None:
    env = {
        "ADK_STREAM_REDIS_URL": redis_cluster_url,
        "ADK_STREAM_REDIS_CLUSTER": "true",
        "ADK_STREAM_REDIS_KEY_PREFIX": f"test-{uuid.uuid4().hex[:8]}",
        "ADK_STREAM_RESUMABLE_STREAMS": "true",
        "ADK_STREAM_LEASE_TTL_SECONDS": "2",
        "ADK_STREAM_AGENT": "tests.support.agents.tools:slow_live_agent",
    }
    with run_server(tmp_path, env) as server:
        assert "coordination=redis-cluster" in server.log()
        answered = post_stream(server, chat_body("hello", user_message("hi", "u1")))
        assert answered.status == 200 and not answered.of_type("error"), answered.body
        with streaming(server, chat_body("slow", user_message("slow 1", "u1"))) as reading:
            start = reading.first_event()
            resumed = server.http.get("/stream/slow/stream")
            rest = reading.rest()
        assert resumed.status_code == 200
        result = stream_result(resumed)
        assert result.chunks[0] == start
        assert result.payloads[1:] == rest, "the same events, in the same order"
        assert server.http.get("/stream/slow/stream").status_code == 204, "ended"


# -- settings ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_node_of_a_cluster_without_the_cluster_setting_stops_the_start(
    redis_cluster_url: str,
) -> None:
    """Its chats would otherwise fail one by one with MOVED (all but a third of them)."""
    with pytest.raises(RuntimeError, match="ADK_STREAM_REDIS_CLUSTER=true"):
        await connect_redis_coordination(
            redis_cluster_url, prefix="p", lease_ttl_seconds=1, log_ttl_seconds=1
        )
