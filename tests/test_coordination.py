"""The in-process coordination (``local_coordination.py``): chat leases, pending calls, stop
signals and chunk logs. Nothing here sleeps to wait: the tests await the operations, and
only the timeout tests use a tiny timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adk_stream_protocol.coordination import ChatKey, Coordination, Outcome, WaitingCall
from adk_stream_protocol.local_coordination import (
    LocalChatLeases,
    LocalChunkLogs,
    LocalPendingCalls,
    LocalStopSignals,
    local_coordination,
)
from adk_stream_protocol.tool_calls import BROWSER_TIMEOUT_RESULT

CHAT: ChatKey = ("user-1", "chat-1")
OTHER: ChatKey = ("user-1", "chat-2")
TINY = 0.01  # seconds: only for testing a timeout
LONG = 5.0  # seconds: never reached by a passing test
GONE = {"error": "the user left"}


class _Holder:
    """The lease a log is written under; in process it only needs to exist."""

    token = "holder"
    lost = asyncio.Event()

    async def release(self) -> None:
        return None


HOLDER = _Holder()


# -- chat leases ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_second_acquire_times_out_while_the_chat_is_held() -> None:
    leases = LocalChatLeases()
    lease = await leases.acquire(CHAT, LONG)
    with pytest.raises(TimeoutError):
        await leases.acquire(CHAT, TINY)
    assert leases.held() == 1
    other = await leases.acquire(OTHER, TINY)  # other chats are not blocked
    assert leases.held() == 2
    await other.release()
    await lease.release()
    assert leases.held() == 0


@pytest.mark.asyncio
async def test_waiting_acquire_gets_the_chat_when_it_is_released() -> None:
    leases = LocalChatLeases()
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
    assert leases.held() == 0


@pytest.mark.asyncio
async def test_try_acquire_returns_none_while_held() -> None:
    leases = LocalChatLeases()
    lease = await leases.try_acquire(CHAT)
    assert lease is not None
    assert await leases.try_acquire(CHAT) is None
    await lease.release()
    assert leases.held() == 0
    again = await leases.try_acquire(CHAT)
    assert again is not None
    await again.release()


@pytest.mark.asyncio
async def test_try_acquire_does_not_queue_behind_a_waiter() -> None:
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
async def test_double_release_does_not_free_the_next_holder() -> None:
    leases = LocalChatLeases()
    first = await leases.acquire(CHAT, LONG)
    await first.release()
    second = await leases.acquire(CHAT, TINY)
    await first.release()  # harmless: the chat stays with the second holder
    assert await leases.try_acquire(CHAT) is None
    assert leases.held() == 1
    await second.release()
    await second.release()
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
        await self._arrived.wait()
        self._arrived.clear()
        return self.calls[-1]


def watched() -> tuple[LocalPendingCalls, Listener]:
    pending = LocalPendingCalls()
    listener = Listener()
    pending.watch(CHAT, listener)
    return pending, listener


@pytest.mark.asyncio
async def test_unwatched_chat_cancels_approvals_and_answers_browser_calls_at_once() -> None:
    pending = LocalPendingCalls()
    assert await pending.ask_approval(CHAT, "call-pay", "process_payment", LONG) == "cancelled"
    assert await pending.wait_result(CHAT, "call-loc", LONG, unwatched=GONE) == GONE
    assert await pending.waiting(CHAT) == []


@pytest.mark.asyncio
@pytest.mark.parametrize(("approved", "outcome"), [(True, "approved"), (False, "denied")])
async def test_decision_resolves_the_approval(approved: bool, outcome: Outcome) -> None:
    pending, listener = watched()
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
async def test_delivered_result_answers_the_browser_call() -> None:
    pending, listener = watched()
    task = asyncio.create_task(pending.wait_result(CHAT, "call-loc", LONG, unwatched=GONE))
    assert await listener.next() == WaitingCall("call-loc", "")
    await pending.deliver(CHAT, "call-loc", {"lat": 35.6})
    assert await task == {"lat": 35.6}


@pytest.mark.asyncio
async def test_unanswered_calls_time_out() -> None:
    pending, listener = watched()
    assert await pending.ask_approval(CHAT, "call-pay", "process_payment", TINY) == "timeout"
    result = await pending.wait_result(CHAT, "call-loc", TINY, unwatched=GONE)
    assert result == dict(BROWSER_TIMEOUT_RESULT)
    assert [c.call_id for c in listener.calls] == ["call-pay", "call-loc"]
    assert await pending.waiting(CHAT) == []


@pytest.mark.asyncio
async def test_result_delivered_before_the_wait_is_used() -> None:
    pending, listener = watched()
    await pending.deliver(CHAT, "call-loc", {"lat": 35.6})
    assert await pending.wait_result(CHAT, "call-loc", LONG, unwatched=GONE) == {"lat": 35.6}
    assert listener.calls == []  # it never had to wait
    # Used once: a second wait for the same call waits again.
    assert await pending.wait_result(CHAT, "call-loc", TINY, unwatched=GONE) == dict(
        BROWSER_TIMEOUT_RESULT
    )


@pytest.mark.asyncio
async def test_waiting_lists_approvals_and_browser_calls() -> None:
    pending, listener = watched()
    approval = asyncio.create_task(pending.ask_approval(CHAT, "call-pay", "process_payment", LONG))
    asked = await listener.next()
    browser = asyncio.create_task(pending.wait_result(CHAT, "call-loc", LONG, unwatched=GONE))
    await listener.next()
    assert await pending.waiting(CHAT) == [asked, WaitingCall("call-loc", "")]
    assert await pending.waiting(OTHER) == []
    await pending.cancel(CHAT, GONE)
    await asyncio.gather(approval, browser)


@pytest.mark.asyncio
async def test_cancel_ends_every_wait_and_drops_early_results() -> None:
    pending, listener = watched()
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
async def test_unwatch_cancels_waits_and_forgets_the_chat() -> None:
    pending, listener = watched()
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
async def test_unwatch_with_nothing_waiting_forgets_the_chat() -> None:
    pending, listener = watched()
    await pending.unwatch(CHAT, GONE)
    await pending.deliver(CHAT, "call-cam", {"photo": "late"})  # nobody serves the chat
    pending.watch(CHAT, listener)
    assert await pending.wait_result(CHAT, "call-cam", TINY, unwatched=GONE) == dict(
        BROWSER_TIMEOUT_RESULT
    )


# -- stop signals --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_stop_reaches_the_chats_subscribers_only() -> None:
    stops = LocalStopSignals()
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
async def test_closed_subscription_hears_no_stop() -> None:
    stops = LocalStopSignals()
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
            await self._got.wait()
        return self.received


@pytest.mark.asyncio
async def test_follow_without_an_active_response_is_none() -> None:
    logs = LocalChunkLogs()
    assert await logs.follow(CHAT) is None
    log = await logs.open(OTHER, HOLDER)
    assert await logs.follow(CHAT) is None
    await log.close()


@pytest.mark.asyncio
async def test_follow_replays_from_the_start_then_follows_live() -> None:
    logs = LocalChunkLogs()
    log = await logs.open(CHAT, HOLDER)
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
async def test_follower_attached_before_close_reads_to_the_end() -> None:
    logs = LocalChunkLogs()
    log = await logs.open(CHAT, HOLDER)
    await log.append([b"a"])
    events = await logs.follow(CHAT)
    assert events is not None
    await log.append([b"b", b"c"])
    await log.close()
    assert logs.active() == 0
    assert await logs.follow(CHAT) is None  # dropped at close
    assert await read_all(events) == [b"a", b"b", b"c"]


@pytest.mark.asyncio
async def test_two_followers_both_get_everything() -> None:
    logs = LocalChunkLogs()
    log = await logs.open(CHAT, HOLDER)
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
async def test_a_new_log_replaces_an_ended_one() -> None:
    logs = LocalChunkLogs()
    old = await logs.open(CHAT, HOLDER)
    await old.append([b"old"])
    await old.close()
    new = await logs.open(CHAT, HOLDER)
    await new.append([b"new"])
    assert logs.active() == 1
    events = await logs.follow(CHAT)
    assert events is not None
    await new.close()
    assert await read_all(events) == [b"new"]
    assert logs.active() == 0


@pytest.mark.asyncio
async def test_closing_a_replaced_log_keeps_the_new_one() -> None:
    logs = LocalChunkLogs()
    old = await logs.open(CHAT, HOLDER)
    new = await logs.open(CHAT, HOLDER)
    await new.append([b"new"])
    await old.close()
    assert logs.active() == 1
    events = await logs.follow(CHAT)
    assert events is not None
    await new.close()
    assert await read_all(events) == [b"new"]


def test_local_coordination_builds_one_of_each() -> None:
    coordination = local_coordination()
    assert isinstance(coordination, Coordination)
    assert isinstance(coordination.leases, LocalChatLeases)
    assert isinstance(coordination.pending, LocalPendingCalls)
    assert isinstance(coordination.stops, LocalStopSignals)
    assert isinstance(coordination.chunk_logs, LocalChunkLogs)
