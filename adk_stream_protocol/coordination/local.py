"""In-process implementations of the coordination interfaces (``base.py``).

Each object belongs to one application (built by ``local_coordination()``); its state is
keyed by chat and dropped as soon as nobody holds, waits for or follows it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from adk_stream_protocol.coordination.base import (
    ChatKey,
    ChatLease,
    Coordination,
    Outcome,
    SignIn,
    Verdict,
    WaitingCall,
)
from adk_stream_protocol.protocol.tool_calls import BROWSER_TIMEOUT_RESULT

logger = logging.getLogger(__name__)


class _LocalLease:
    def __init__(self, leases: LocalChatLeases, chat: ChatKey) -> None:
        self._leases = leases
        self._chat = chat
        self._released = False
        self.token = uuid.uuid4().hex
        self.lost = asyncio.Event()  # never set: a lock of this process cannot lapse
        self.unclean = False  # nobody else can have held it: no fence needed
        self.generation = 0

    def held(self) -> bool:
        return not self._released

    async def release(self) -> None:
        if not self._released:
            self._released = True
            self._leases._release(self._chat)

    async def hold_for_results(self, ttl_seconds: float) -> None:
        if not self._released:  # no TTL: in one process the release always comes
            self._leases._results.add(self._chat)


class LocalChatLeases:
    """One lock per chat, created on demand and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[ChatKey, asyncio.Lock] = {}
        self._users: dict[ChatKey, int] = {}
        self._results: set[ChatKey] = set()  # held only for kept results

    async def acquire(self, chat: ChatKey, wait_seconds: float) -> _LocalLease:
        lock = self._locks.get(chat)
        if lock is None:
            # Nobody holds or waits for the chat, so a lock made now is taken without waiting:
            # no time limit (a task and a timer per request) is needed. Only a new lock is
            # sure to be free; an unlocked one may still have a woken waiter that has not run.
            lock = self._locks[chat] = asyncio.Lock()
            self._users[chat] = 1
            await lock.acquire()
            return _LocalLease(self, chat)
        self._users[chat] += 1
        try:
            await asyncio.wait_for(lock.acquire(), wait_seconds)
        except BaseException:
            self._forget(chat)
            raise
        return _LocalLease(self, chat)

    async def try_acquire(self, chat: ChatKey) -> _LocalLease | None:
        if chat in self._locks:
            return None  # held, or about to be handed to a waiter
        return await self.acquire(chat, wait_seconds=1)

    async def results_waiting(self, chat: ChatKey) -> bool:
        return chat in self._results

    def held(self) -> int:
        return len(self._locks)

    def _release(self, chat: ChatKey) -> None:
        self._results.discard(chat)
        self._locks[chat].release()
        self._forget(chat)

    def _forget(self, chat: ChatKey) -> None:
        self._users[chat] -= 1
        if self._users[chat] == 0:
            del self._users[chat]
            del self._locks[chat]


@dataclass
class _Waiter:
    call: WaitingCall
    answer: asyncio.Future[Any]


@dataclass
class _ChatCalls:
    listener: Callable[[WaitingCall], None] | None = None
    waiters: dict[str, _Waiter] = field(default_factory=dict)  # approval or call id -> waiter
    early: dict[str, dict[str, Any]] = field(default_factory=dict)  # results before the wait


class LocalPendingCalls:
    """Waiting calls as futures in this process, resolved by decisions, results, timeouts
    and cancellation alike, so an answer can never arrive "too early" and be lost."""

    def __init__(self) -> None:
        self._chats: dict[ChatKey, _ChatCalls] = {}

    def watch(self, chat: ChatKey, listener: Callable[[WaitingCall], None]) -> None:
        self._chats.setdefault(chat, _ChatCalls()).listener = listener

    async def unwatch(self, chat: ChatKey, result: dict[str, Any]) -> None:
        await self.cancel(chat, result)
        calls = self._chats.get(chat)
        if calls is not None:
            calls.listener = None
            self._drop_if_idle(chat)

    async def ask_approval(
        self, chat: ChatKey, call_id: str, tool_name: str, timeout_seconds: float
    ) -> Outcome:
        verdict = await self.ask_confirmation(
            chat, WaitingCall(call_id, tool_name), timeout_seconds
        )
        return verdict.outcome

    async def ask_confirmation(
        self, chat: ChatKey, call: WaitingCall, timeout_seconds: float
    ) -> Verdict:
        if call.approval_id is None:  # the asker may have named it already (stored first)
            call = replace(call, approval_id=f"apr_{uuid.uuid4().hex}")
        timeout, cancelled = Verdict("timeout"), Verdict("cancelled")
        verdict: Verdict = await self._wait(chat, call, timeout_seconds, timeout, cancelled)
        if verdict.outcome == "timeout":
            logger.info("approval %s for %s timed out", call.approval_id, call.tool_name)
        return verdict

    async def decide(
        self, chat: ChatKey, approval_id: str, approved: bool, payload: Any = None
    ) -> None:
        self._resolve(chat, approval_id, Verdict("approved" if approved else "denied", payload))

    async def wait_result(
        self, chat: ChatKey, call_id: str, timeout_seconds: float, unwatched: dict[str, Any]
    ) -> dict[str, Any]:
        calls = self._chats.get(chat)
        if calls is not None and call_id in calls.early:
            return calls.early.pop(call_id)
        result: dict[str, Any] = await self._wait(
            chat, WaitingCall(call_id, ""), timeout_seconds, dict(BROWSER_TIMEOUT_RESULT), unwatched
        )
        return result

    async def deliver(self, chat: ChatKey, call_id: str, result: dict[str, Any]) -> None:
        calls = self._chats.get(chat)
        if calls is None:
            return
        waiter = calls.waiters.get(call_id)
        if waiter is None:
            calls.early[call_id] = result
        elif not waiter.answer.done():
            waiter.answer.set_result(result)

    async def cancel(self, chat: ChatKey, result: dict[str, Any]) -> None:
        calls = self._chats.get(chat)
        if calls is None:
            return
        calls.early.clear()
        for waiter in calls.waiters.values():
            if not waiter.answer.done():
                approval = waiter.call.approval_id is not None
                waiter.answer.set_result(Verdict("cancelled") if approval else result)

    async def waiting(self, chat: ChatKey) -> list[WaitingCall]:
        calls = self._chats.get(chat)
        return [w.call for w in calls.waiters.values()] if calls is not None else []

    def waiting_chats(self) -> list[ChatKey]:
        """The chats with a call waiting in this process."""
        return [chat for chat, calls in self._chats.items() if calls.waiters]

    async def _wait(
        self,
        chat: ChatKey,
        call: WaitingCall,
        timeout_seconds: float,
        on_timeout: Any,
        unwatched: Any,
    ) -> Any:
        calls = self._chats.get(chat)
        if calls is None or calls.listener is None:
            return unwatched  # nobody can answer
        key = call.approval_id or call.call_id
        waiter = _Waiter(call, asyncio.get_running_loop().create_future())
        calls.waiters[key] = waiter
        try:
            calls.listener(call)
            return await asyncio.wait_for(asyncio.shield(waiter.answer), timeout_seconds)
        except TimeoutError:
            return on_timeout
        finally:
            del calls.waiters[key]
            self._drop_if_idle(chat)

    def _resolve(self, chat: ChatKey, key: str, value: Any) -> None:
        calls = self._chats.get(chat)
        waiter = calls.waiters.get(key) if calls is not None else None
        if waiter is not None and not waiter.answer.done():
            waiter.answer.set_result(value)

    def _drop_if_idle(self, chat: ChatKey) -> None:
        calls = self._chats.get(chat)
        if calls is not None and calls.listener is None and not calls.waiters:
            del self._chats[chat]


class _LocalSubscription:
    def __init__(self, signals: LocalStopSignals, chat: ChatKey) -> None:
        self.stopped = asyncio.Event()
        self.deleted = asyncio.Event()
        self._signals = signals
        self._chat = chat

    async def close(self) -> None:
        self._signals._unsubscribe(self._chat, self)


class LocalStopSignals:
    def __init__(self) -> None:
        self._subscribers: dict[ChatKey, set[_LocalSubscription]] = {}

    async def subscribe(self, chat: ChatKey) -> _LocalSubscription:
        subscription = _LocalSubscription(self, chat)
        self._subscribers.setdefault(chat, set()).add(subscription)
        return subscription

    async def stop(self, chat: ChatKey, *, deleted: bool = False) -> None:
        for subscription in self._subscribers.get(chat, ()):
            if deleted:
                subscription.deleted.set()
            subscription.stopped.set()

    def _unsubscribe(self, chat: ChatKey, subscription: _LocalSubscription) -> None:
        subscribers = self._subscribers.get(chat)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self._subscribers[chat]


class _LocalResponseLog:
    """One active response's events; followers wait on ``_changed``."""

    def __init__(self, logs: LocalChunkLogs, chat: ChatKey) -> None:
        self._logs = logs
        self._chat = chat
        self.events: list[bytes] = []
        self.ended = False
        self._changed = asyncio.Event()

    async def append(self, events: Sequence[bytes]) -> None:
        self.append_now(events)

    def append_now(self, events: Sequence[bytes]) -> None:
        self.events.extend(events)
        self._changed.set()

    async def close(self) -> None:
        self.ended = True
        self._changed.set()
        self._logs._ended(self._chat, self)

    async def follow(self) -> AsyncGenerator[bytes, None]:
        sent = 0
        while True:
            while sent < len(self.events):
                sent += 1
                yield self.events[sent - 1]
            if self.ended:
                return
            self._changed.clear()
            await self._changed.wait()


class LocalChunkLogs:
    """Active responses' logs in memory; a log is dropped when its response ends (resuming
    only concerns active responses). Followers already attached read it to the end."""

    def __init__(self) -> None:
        self._active: dict[ChatKey, _LocalResponseLog] = {}

    async def open(self, chat: ChatKey, holder: ChatLease) -> _LocalResponseLog:
        log = _LocalResponseLog(self, chat)
        self._active[chat] = log
        return log

    async def follow(self, chat: ChatKey) -> AsyncGenerator[bytes, None] | None:
        log = self._active.get(chat)
        return log.follow() if log is not None else None

    async def with_active_response(self, chats: Sequence[ChatKey]) -> set[ChatKey]:
        return {chat for chat in chats if chat in self._active}

    async def discard(self, chat: ChatKey) -> None:
        log = self._active.get(chat)
        if log is not None:
            await log.close()  # its followers, if any, get the end

    def active(self) -> int:
        return len(self._active)

    def _ended(self, chat: ChatKey, log: _LocalResponseLog) -> None:
        if self._active.get(chat) is log:
            del self._active[chat]


class LocalSignIns:
    """Sign-ins under way, each kept until it is taken or its time is up (``clock``: seconds,
    monotonic). Expired ones are dropped as new ones come: with one time to live for all, the
    oldest are first in line."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._bound: dict[str, tuple[float, SignIn]] = {}

    async def bind(self, state: str, sign_in: SignIn, ttl_seconds: float) -> None:
        now = self._clock()
        while self._bound:
            oldest = next(iter(self._bound))
            if self._bound[oldest][0] > now:
                break
            del self._bound[oldest]
        self._bound[state] = (now + ttl_seconds, sign_in)

    async def take(self, state: str) -> SignIn | None:
        bound = self._bound.pop(state, None)
        if bound is None or bound[0] <= self._clock():
            return None
        return bound[1]

    def bound(self) -> int:
        """How many are kept (expired ones not dropped yet included)."""
        return len(self._bound)


def local_coordination() -> Coordination:
    """In-process coordination: right for one process, the embedded default."""
    return Coordination(
        leases=LocalChatLeases(),
        pending=LocalPendingCalls(),
        stops=LocalStopSignals(),
        chunk_logs=LocalChunkLogs(),
        sign_ins=LocalSignIns(),
    )
