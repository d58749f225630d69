"""The coordination interfaces' contract, run against both implementations: in process
(``coordination/local.py``) and in Redis (``coordination/redis/``, one connection: what it
does across processes is in ``test_redis_coordination.py``), on one Redis and on a Redis
Cluster of three nodes (``test_redis_cluster.py``). The local objects' own counters
are checked on the local implementation alone. Nothing here sleeps to wait: the tests await
the operations, and only the timeout tests use a tiny timeout."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from adk_stream_protocol.coordination.base import (
    ChatKey,
    ChatLease,
    ChatLeases,
    ChunkLogs,
    Coordination,
    Outcome,
    PendingCalls,
    SignIn,
    SignIns,
    StopSignals,
    WaitingCall,
)
from adk_stream_protocol.coordination.local import (
    LocalChatLeases,
    LocalChunkLogs,
    LocalPendingCalls,
    LocalSignIns,
    LocalStopSignals,
    local_coordination,
)
from adk_stream_protocol.protocol.tool_calls import BROWSER_TIMEOUT_RESULT

CHAT: ChatKey = ("user-1", "chat-1")
OTHER: ChatKey = ("user-1", "chat-2")
TINY = 0.01  # seconds: only for testing a timeout
LONG = 5.0  # seconds: never reached by a passing test
GONE = {"error": "the user left"}
LEASE_TTL = 1.0  # seconds, in Redis: renewed while held, so never reached by these tests
LOG_TTL = 5.0


@pytest.fixture(
    params=[
        "local",
        pytest.param("redis", marks=pytest.mark.out_of_process),
        pytest.param("redis-cluster", marks=pytest.mark.out_of_process),
    ]
)
def backend(request: pytest.FixtureRequest) -> tuple[str, str, bool] | None:
    """Where the coordination under test keeps its state: None for this process, or the
    Redis URL, the key prefix and whether it is a cluster (the test skips, or fails in CI,
    when Redis, or redis-server to start a cluster with, is absent)."""
    if request.param == "local":
        return None
    if request.param == "redis-cluster":  # this run's own cluster: nothing to clean up
        return request.getfixturevalue("redis_cluster_url"), f"test-{uuid.uuid4().hex[:8]}", True
    return request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix"), False


@pytest_asyncio.fixture
async def coordination(backend: tuple[str, str, bool] | None) -> AsyncIterator[Coordination]:
    if backend is None:
        yield local_coordination()
        return
    from adk_stream_protocol.coordination.redis.coordination import connect_redis_coordination

    url, prefix, cluster = backend
    connected = await connect_redis_coordination(
        url, prefix=prefix, lease_ttl_seconds=LEASE_TTL, log_ttl_seconds=LOG_TTL, cluster=cluster
    )
    try:
        yield connected.coordination
    finally:
        await connected.close()


@pytest.fixture
def leases(coordination: Coordination) -> ChatLeases:
    return coordination.leases


@pytest.fixture
def pending(coordination: Coordination) -> PendingCalls:
    return coordination.pending


@pytest.fixture
def stops(coordination: Coordination) -> StopSignals:
    return coordination.stops


@pytest.fixture
def logs(coordination: Coordination) -> ChunkLogs:
    return coordination.chunk_logs


# -- chat leases ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_second_acquire_times_out_while_the_chat_is_held(leases: ChatLeases) -> None:
    lease = await leases.acquire(CHAT, LONG)
    with pytest.raises(TimeoutError):
        await leases.acquire(CHAT, TINY)
    other = await leases.acquire(OTHER, TINY)  # other chats are not blocked
    assert lease.token != other.token
    await other.release()
    await lease.release()
    again = await leases.acquire(CHAT, TINY)
    await again.release()


@pytest.mark.asyncio
async def test_waiting_acquire_gets_the_chat_when_it_is_released(leases: ChatLeases) -> None:
    first = await leases.acquire(CHAT, LONG)
    started = asyncio.Event()

    async def second() -> Any:
        started.set()
        return await leases.acquire(CHAT, LONG)

    task = asyncio.create_task(second())
    await started.wait()
    assert not task.done()
    await first.release()
    lease = await task
    assert await leases.try_acquire(CHAT) is None  # the waiter holds it now
    await lease.release()


@pytest.mark.asyncio
async def test_try_acquire_returns_none_while_held(leases: ChatLeases) -> None:
    lease = await leases.try_acquire(CHAT)
    assert lease is not None
    assert await leases.try_acquire(CHAT) is None
    await lease.release()
    again = await leases.try_acquire(CHAT)
    assert again is not None
    await again.release()


@pytest.mark.asyncio
async def test_a_holder_waiting_for_kept_results_says_so_until_its_release(
    leases: ChatLeases,
) -> None:
    """docs/adr/0035: a request for such a chat is told to try again, not that it is busy."""
    lease = await leases.acquire(CHAT, LONG)
    other = await leases.acquire(OTHER, LONG)
    assert not await leases.results_waiting(CHAT)  # a turn that runs
    await lease.hold_for_results(LONG)
    assert await leases.results_waiting(CHAT)
    assert not await leases.results_waiting(OTHER)
    await lease.release()
    assert not await leases.results_waiting(CHAT)
    again = await leases.acquire(CHAT, TINY)  # the next holder runs a turn
    assert not await leases.results_waiting(CHAT)
    await again.release()
    await other.hold_for_results(LONG)
    await other.release()


@pytest.mark.asyncio
async def test_try_acquire_does_not_queue_behind_a_waiter() -> None:
    """In process, a released chat goes to its waiter first (Redis leases are not queued:
    whoever tries first after the release gets the chat)."""
    leases = LocalChatLeases()
    first = await leases.acquire(CHAT, LONG)
    started = asyncio.Event()

    async def second() -> Any:
        started.set()
        return await leases.acquire(CHAT, LONG)

    waiter = asyncio.create_task(second())
    await started.wait()
    # Awaiting another chat's lease lets the waiter queue on this chat's lock.
    other = await leases.acquire(OTHER, LONG)
    await other.release()
    await first.release()  # the chat now goes to the waiter, which has not run yet
    # Not free for a newcomer: None at once, not a wait behind the waiter (nor an error).
    assert await leases.try_acquire(CHAT) is None
    lease = await waiter
    await lease.release()
    assert leases.held() == 0


@pytest.mark.asyncio
async def test_double_release_does_not_free_the_next_holder(leases: ChatLeases) -> None:
    first = await leases.acquire(CHAT, LONG)
    await first.release()
    second = await leases.acquire(CHAT, TINY)
    await first.release()  # harmless: the chat stays with the second holder
    assert await leases.try_acquire(CHAT) is None
    assert not second.lost.is_set()
    await second.release()
    await second.release()
    third = await leases.try_acquire(CHAT)
    assert third is not None
    await third.release()


@pytest.mark.asyncio
async def test_local_leases_drop_what_nobody_holds_or_waits_for() -> None:
    leases = LocalChatLeases()
    lease = await leases.acquire(CHAT, LONG)
    with pytest.raises(TimeoutError):
        await leases.acquire(CHAT, TINY)
    assert leases.held() == 1  # the waiter that gave up is forgotten
    other = await leases.acquire(OTHER, TINY)
    assert leases.held() == 2
    await other.release()
    await lease.release()
    await lease.release()
    assert leases.held() == 0


@pytest.mark.asyncio
async def test_a_local_lease_of_a_free_chat_starts_no_task_and_a_busy_one_waits_in_one() -> None:
    """A free chat is taken at once (no ``wait_for``: its task and timer per request); only a
    chat that someone holds is waited for, within the time limit."""
    loop = asyncio.get_running_loop()
    started: list[str] = []

    def counting(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Future[Any]:
        started.append(getattr(coro, "__qualname__", "?"))
        return asyncio.Task(coro, loop=loop)

    leases = LocalChatLeases()
    loop.set_task_factory(counting)
    try:
        lease = await leases.acquire(CHAT, LONG)
        assert started == []
        with pytest.raises(TimeoutError):
            await leases.acquire(CHAT, TINY)
        assert started == ["Lock.acquire"]
    finally:
        loop.set_task_factory(None)
    await lease.release()
    assert leases.held() == 0


# -- pending calls -------------------------------------------------------------------------------


class Listener:
    """Records the calls that start to wait, and lets a test await the next one."""

    def __init__(self) -> None:
        self.calls: list[WaitingCall] = []
        self._arrived = asyncio.Event()

    def __call__(self, call: WaitingCall) -> None:
        self.calls.append(call)
        self._arrived.set()

    async def next(self) -> WaitingCall:
        await asyncio.wait_for(self._arrived.wait(), LONG)
        self._arrived.clear()
        return self.calls[-1]


def watched(pending: PendingCalls) -> tuple[PendingCalls, Listener]:
    listener = Listener()
    pending.watch(CHAT, listener)
    return pending, listener


@pytest.mark.asyncio
async def test_unwatched_chat_cancels_approvals_and_answers_browser_calls_at_once(
    pending: PendingCalls,
) -> None:
    assert await pending.ask_approval(CHAT, "call-pay", "process_payment", LONG) == "cancelled"
    assert await pending.wait_result(CHAT, "call-loc", LONG, unwatched=GONE) == GONE
    assert await pending.waiting(CHAT) == []


@pytest.mark.asyncio
@pytest.mark.parametrize(("approved", "outcome"), [(True, "approved"), (False, "denied")])
async def test_decision_resolves_the_approval(
    pending: PendingCalls, approved: bool, outcome: Outcome
) -> None:
    pending, listener = watched(pending)
    task = asyncio.create_task(pending.ask_approval(CHAT, "call-pay", "process_payment", LONG))
    call = await listener.next()
    assert call.call_id == "call-pay"
    assert call.tool_name == "process_payment"
    assert call.approval_id is not None
    assert await pending.waiting(CHAT) == [call]
    await pending.decide(OTHER, call.approval_id, not approved)  # another chat: no effect
    await pending.decide(CHAT, call.approval_id, approved)
    assert await task == outcome
    assert await pending.waiting(CHAT) == []


@pytest.mark.asyncio
async def test_delivered_result_answers_the_browser_call(pending: PendingCalls) -> None:
    pending, listener = watched(pending)
    task = asyncio.create_task(pending.wait_result(CHAT, "call-loc", LONG, unwatched=GONE))
    assert await listener.next() == WaitingCall("call-loc", "")
    await pending.deliver(CHAT, "call-loc", {"lat": 35.6})
    assert await task == {"lat": 35.6}


@pytest.mark.asyncio
async def test_unanswered_calls_time_out(pending: PendingCalls) -> None:
    pending, listener = watched(pending)
    assert await pending.ask_approval(CHAT, "call-pay", "process_payment", TINY) == "timeout"
    result = await pending.wait_result(CHAT, "call-loc", TINY, unwatched=GONE)
    assert result == dict(BROWSER_TIMEOUT_RESULT)
    assert [c.call_id for c in listener.calls] == ["call-pay", "call-loc"]
    assert await pending.waiting(CHAT) == []


@pytest.mark.asyncio
async def test_result_delivered_before_the_wait_is_used(pending: PendingCalls) -> None:
    pending, listener = watched(pending)
    await pending.deliver(CHAT, "call-loc", {"lat": 35.6})
    assert await pending.wait_result(CHAT, "call-loc", LONG, unwatched=GONE) == {"lat": 35.6}
    assert listener.calls == []  # it never had to wait
    # Used once: a second wait for the same call waits again.
    assert await pending.wait_result(CHAT, "call-loc", TINY, unwatched=GONE) == dict(
        BROWSER_TIMEOUT_RESULT
    )


@pytest.mark.asyncio
async def test_waiting_lists_approvals_and_browser_calls(pending: PendingCalls) -> None:
    pending, listener = watched(pending)
    approval = asyncio.create_task(pending.ask_approval(CHAT, "call-pay", "process_payment", LONG))
    asked = await listener.next()
    browser = asyncio.create_task(pending.wait_result(CHAT, "call-loc", LONG, unwatched=GONE))
    await listener.next()
    assert await pending.waiting(CHAT) == [asked, WaitingCall("call-loc", "")]
    assert await pending.waiting(OTHER) == []
    await pending.cancel(CHAT, GONE)
    await asyncio.gather(approval, browser)


@pytest.mark.asyncio
async def test_cancel_ends_every_wait_and_drops_early_results(pending: PendingCalls) -> None:
    pending, listener = watched(pending)
    approval = asyncio.create_task(pending.ask_approval(CHAT, "call-pay", "process_payment", LONG))
    await listener.next()
    browser = asyncio.create_task(pending.wait_result(CHAT, "call-loc", LONG, unwatched=GONE))
    await listener.next()
    await pending.deliver(CHAT, "call-cam", {"photo": "early"})
    stopped = {"error": "stopped"}
    await pending.cancel(CHAT, stopped)
    assert await approval == "cancelled"
    assert await browser == stopped
    # The early result was dropped; the chat is still watched, so this waits and times out.
    assert await pending.wait_result(CHAT, "call-cam", TINY, unwatched=GONE) == dict(
        BROWSER_TIMEOUT_RESULT
    )


@pytest.mark.asyncio
async def test_unwatch_cancels_waits_and_forgets_the_chat(pending: PendingCalls) -> None:
    pending, listener = watched(pending)
    browser = asyncio.create_task(pending.wait_result(CHAT, "call-loc", LONG, unwatched=GONE))
    await listener.next()
    await pending.unwatch(CHAT, GONE)
    assert await browser == GONE
    # Nobody watches: calls end at once, and a result for the chat is not kept.
    assert await pending.ask_approval(CHAT, "call-pay", "process_payment", LONG) == "cancelled"
    await pending.deliver(CHAT, "call-cam", {"photo": "late"})
    pending.watch(CHAT, listener)
    assert await pending.wait_result(CHAT, "call-cam", TINY, unwatched=GONE) == dict(
        BROWSER_TIMEOUT_RESULT
    )
    assert len(listener.calls) == 2  # call-loc, then call-cam: nothing while unwatched


@pytest.mark.asyncio
async def test_unwatch_with_nothing_waiting_forgets_the_chat(pending: PendingCalls) -> None:
    pending, listener = watched(pending)
    await pending.unwatch(CHAT, GONE)
    await pending.deliver(CHAT, "call-cam", {"photo": "late"})  # nobody serves the chat
    pending.watch(CHAT, listener)
    assert await pending.wait_result(CHAT, "call-cam", TINY, unwatched=GONE) == dict(
        BROWSER_TIMEOUT_RESULT
    )


# -- stop signals --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_stop_reaches_the_chats_subscribers_only(stops: StopSignals) -> None:
    first = await stops.subscribe(CHAT)
    second = await stops.subscribe(CHAT)
    other = await stops.subscribe(OTHER)
    await stops.stop(CHAT)
    assert first.stopped.is_set()
    assert second.stopped.is_set()
    assert not other.stopped.is_set()
    await first.close()
    await second.close()
    await other.close()


@pytest.mark.asyncio
async def test_a_deleting_stop_says_so_and_a_plain_stop_does_not(stops: StopSignals) -> None:
    """A chat's delete is a stop that also tells its holders to let the chat go."""
    subscription = await stops.subscribe(CHAT)
    await stops.stop(CHAT)
    assert subscription.stopped.is_set() and not subscription.deleted.is_set()
    subscription.stopped.clear()
    await stops.stop(CHAT, deleted=True)
    assert subscription.stopped.is_set() and subscription.deleted.is_set()
    await subscription.close()


@pytest.mark.asyncio
async def test_closed_subscription_hears_no_stop(stops: StopSignals) -> None:
    closed = await stops.subscribe(CHAT)
    kept = await stops.subscribe(CHAT)
    await closed.close()
    await stops.stop(CHAT)
    assert not closed.stopped.is_set()
    assert kept.stopped.is_set()
    await kept.close()
    await kept.close()  # closing twice is harmless
    later = await stops.subscribe(CHAT)  # a stop is not remembered for later subscribers
    assert not later.stopped.is_set()
    await later.close()


# -- chunk logs ----------------------------------------------------------------------------------


async def read_all(events: AsyncIterator[bytes]) -> list[bytes]:
    return [event async for event in events]


class Reader:
    """Follows a log in a task of its own. After each event it announces, it has asked for
    the next one before the test resumes: a test that waits for it knows it is waiting on
    the log (or has finished)."""

    def __init__(self, events: AsyncIterator[bytes]) -> None:
        self.received: list[bytes] = []
        self._got = asyncio.Event()
        self.task = asyncio.create_task(self._run(events))

    async def _run(self, events: AsyncIterator[bytes]) -> list[bytes]:
        async for event in events:
            self.received.append(event)
            self._got.set()
        return self.received

    async def until(self, count: int) -> list[bytes]:
        while len(self.received) < count:
            self._got.clear()
            await asyncio.wait_for(self._got.wait(), LONG)
        return self.received


@pytest_asyncio.fixture
async def holder(leases: ChatLeases) -> AsyncIterator[ChatLease]:
    """The chat's lease, which its logs are written under (Redis followers check it)."""
    lease = await leases.acquire(CHAT, LONG)
    yield lease
    await lease.release()


@pytest.mark.asyncio
async def test_follow_without_an_active_response_is_none(
    leases: ChatLeases, logs: ChunkLogs
) -> None:
    assert await logs.follow(CHAT) is None
    other_holder = await leases.acquire(OTHER, LONG)
    log = await logs.open(OTHER, other_holder)
    assert await logs.follow(CHAT) is None
    await log.close()
    await other_holder.release()


@pytest.mark.asyncio
async def test_follow_replays_from_the_start_then_follows_live(
    logs: ChunkLogs, holder: ChatLease
) -> None:
    log = await logs.open(CHAT, holder)
    await log.append([b"start", b"text-1"])
    events = await logs.follow(CHAT)
    assert events is not None
    reader = Reader(events)
    assert await reader.until(2) == [b"start", b"text-1"]
    assert not reader.task.done()  # caught up: it waits for more
    await log.append([b"text-2"])
    assert await reader.until(3) == [b"start", b"text-1", b"text-2"]
    await log.append([b"text-3", b"finish"])
    assert await reader.until(5) == [b"start", b"text-1", b"text-2", b"text-3", b"finish"]
    assert not reader.task.done()
    await log.close()
    assert await reader.task == [b"start", b"text-1", b"text-2", b"text-3", b"finish"]


@pytest.mark.asyncio
async def test_follower_attached_before_close_reads_to_the_end(
    logs: ChunkLogs, holder: ChatLease
) -> None:
    log = await logs.open(CHAT, holder)
    await log.append([b"a"])
    events = await logs.follow(CHAT)
    assert events is not None
    await log.append([b"b", b"c"])
    await log.close()
    assert await logs.follow(CHAT) is None  # no active response once it ended
    assert await read_all(events) == [b"a", b"b", b"c"]


@pytest.mark.asyncio
async def test_two_followers_both_get_everything(logs: ChunkLogs, holder: ChatLease) -> None:
    log = await logs.open(CHAT, holder)
    await log.append([b"a"])
    first_events = await logs.follow(CHAT)
    second_events = await logs.follow(CHAT)
    assert first_events is not None
    assert second_events is not None
    first, second = Reader(first_events), Reader(second_events)
    await first.until(1)
    await second.until(1)  # both wait on the log now
    await log.append([b"b"])
    await first.until(2)  # the first one alone has caught up and waits again
    await log.append([b"c", b"d"])
    await log.close()
    assert await first.task == [b"a", b"b", b"c", b"d"]
    assert await second.task == [b"a", b"b", b"c", b"d"]


@pytest.mark.asyncio
async def test_a_new_log_replaces_an_ended_one(logs: ChunkLogs, holder: ChatLease) -> None:
    old = await logs.open(CHAT, holder)
    await old.append([b"old"])
    await old.close()
    new = await logs.open(CHAT, holder)
    await new.append([b"new"])
    events = await logs.follow(CHAT)
    assert events is not None
    await new.close()
    assert await read_all(events) == [b"new"]
    assert await logs.follow(CHAT) is None


@pytest.mark.asyncio
async def test_closing_a_replaced_log_keeps_the_new_one(logs: ChunkLogs, holder: ChatLease) -> None:
    old = await logs.open(CHAT, holder)
    new = await logs.open(CHAT, holder)
    await new.append([b"new"])
    await old.close()
    events = await logs.follow(CHAT)
    assert events is not None
    await new.close()
    assert await read_all(events) == [b"new"]


@pytest.mark.asyncio
async def test_followers_of_a_replaced_log_read_it_to_its_end(
    logs: ChunkLogs, holder: ChatLease
) -> None:
    old = await logs.open(CHAT, holder)
    await old.append([b"old-1"])
    old_events = await logs.follow(CHAT)
    assert old_events is not None
    reader = Reader(old_events)
    await reader.until(1)
    new = await logs.open(CHAT, holder)
    await new.append([b"new"])
    await old.append([b"old-2"])
    await old.close()
    assert await reader.task == [b"old-1", b"old-2"]
    new_events = await logs.follow(CHAT)
    assert new_events is not None
    await new.close()
    assert await read_all(new_events) == [b"new"]


@pytest.mark.asyncio
async def test_with_active_response_names_the_chats_whose_response_is_being_written(
    leases: ChatLeases, logs: ChunkLogs
) -> None:
    """For a list of chats (``GET /chats``): one question for all, no log read."""
    assert await logs.with_active_response([]) == set()
    assert await logs.with_active_response([CHAT, OTHER]) == set()
    lease = await leases.acquire(CHAT, LONG)
    log = await logs.open(CHAT, lease)
    await log.append([b"data: 1\n\n"])
    assert await logs.with_active_response([CHAT, OTHER]) == {CHAT}
    assert await logs.with_active_response([OTHER]) == set()
    await log.close()
    assert await logs.with_active_response([CHAT, OTHER]) == set()  # ended: nothing to resume
    await lease.release()


@pytest.mark.asyncio
async def test_a_discarded_log_cannot_be_resumed(leases: ChatLeases, logs: ChunkLogs) -> None:
    """A deleted chat's log (``DELETE /chats/{chatId}``) goes with it."""
    lease = await leases.acquire(CHAT, LONG)
    log = await logs.open(CHAT, lease)
    await log.append([b"data: 1\n\n"])
    await logs.discard(CHAT)
    assert await logs.follow(CHAT) is None
    assert await logs.with_active_response([CHAT]) == set()
    await logs.discard(OTHER)  # a chat with no log: nothing to do
    await log.close()  # its producer's end after the discard brings nothing back
    assert await logs.follow(CHAT) is None
    await lease.release()


@pytest.mark.asyncio
async def test_local_logs_are_dropped_when_their_response_ends() -> None:
    logs = LocalChunkLogs()
    lease = await LocalChatLeases().acquire(CHAT, LONG)
    old = await logs.open(CHAT, lease)
    new = await logs.open(CHAT, lease)
    assert logs.active() == 1
    await old.close()
    assert logs.active() == 1  # the replaced log's end leaves the new one
    await new.close()
    assert logs.active() == 0
    await lease.release()


# -- sign-ins under way ----------------------------------------------------------------------------

SIGN_IN = SignIn(chat=CHAT, call_id="call-1", answer={"authScheme": {"type": "oauth2"}})


@pytest.fixture
def sign_ins(coordination: Coordination) -> SignIns:
    return coordination.sign_ins


@pytest.mark.asyncio
async def test_a_sign_in_is_taken_once_under_its_state(sign_ins: SignIns) -> None:
    await sign_ins.bind("state-1", SIGN_IN, LONG)
    await sign_ins.bind("state-2", SignIn(OTHER, "call-2", {}), LONG)
    assert await sign_ins.take("state-1") == SIGN_IN
    assert await sign_ins.take("state-1") is None  # used
    assert await sign_ins.take("state-3") is None  # never bound
    assert await sign_ins.take("state-2") == SignIn(OTHER, "call-2", {})


@pytest.mark.asyncio
async def test_a_local_sign_in_expires_after_its_time_to_live_and_is_dropped() -> None:
    now = [100.0]
    sign_ins = LocalSignIns(clock=lambda: now[0])
    await sign_ins.bind("old", SIGN_IN, 10)
    await sign_ins.bind("young", SIGN_IN, 10)
    now[0] = 110.0
    assert await sign_ins.take("old") is None  # expired: not given, and gone
    now[0] = 105.0
    await sign_ins.bind("new", SIGN_IN, 10)  # drops nothing unexpired
    assert sign_ins.bound() == 2
    now[0] = 112.0
    await sign_ins.bind("newer", SIGN_IN, 10)  # the expired ones go as new ones come
    assert sign_ins.bound() == 2
    assert await sign_ins.take("new") == SIGN_IN
    assert await sign_ins.take("young") is None


def test_local_coordination_builds_one_of_each() -> None:
    coordination = local_coordination()
    assert isinstance(coordination, Coordination)
    assert isinstance(coordination.leases, LocalChatLeases)
    assert isinstance(coordination.pending, LocalPendingCalls)
    assert isinstance(coordination.stops, LocalStopSignals)
    assert isinstance(coordination.chunk_logs, LocalChunkLogs)
    assert isinstance(coordination.sign_ins, LocalSignIns)
