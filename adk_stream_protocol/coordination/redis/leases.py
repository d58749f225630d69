"""Chat leases in Redis: a key per chat, taken with ``SET NX PX`` and renewed by a heartbeat.

Only the holder's token renews or deletes the key (Lua compare-and-act), so a holder whose
lease lapsed never touches the next holder's. A waiter sleeps until the chat's ``freed``
signal or until the key's TTL runs out (a holder that died sends no signal), never on a
fixed poll. Leases are not queued: when a chat is freed, whoever tries first gets it. A
waiter whose pub/sub connection broke and came back tries again at once, since a ``freed``
signal may have been lost meanwhile.

Each take counts the chat's generation, and each release records the generation it ends.
A take that finds the last generation unreleased follows a holder that lapsed (crashed or
stalled): the lease says ``unclean``, and the new holder fences the old one off in the
chat's session before it writes (docs/adr/0034). Generation 1 counts as clean: a chat's
first take, or the first after the keys expired or Redis lost its data, which cannot be told
apart.

A holder that only waits for its chat's kept tool results to be saved (docs/adr/0035) marks
the chat's ``results`` key with its token, for a TTL, and its release deletes the mark. Any
process then tells a request for the chat to try again, rather than that the chat is busy,
while the mark names the lease's current token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable
from typing import Any

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.coordination.redis.signals import (
    COMPARE_AND_DELETE,
    Client,
    RedisKeys,
    Signals,
    cancelled_meanwhile,
)
from adk_stream_protocol.foundation.outages import REDIS, Outages

logger = logging.getLogger(__name__)

# Takes the lease if it is free, or finds it already ours: a command sent again after its
# connection broke (the pool's retry) may have run the first time. On a take, counts the
# chat's generation. Returns {taken, pttl, generation, last released generation (0: none)};
# a holder's generation cannot move, since only a take moves it.
_TAKE = """
local taken = redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if taken then
    redis.call('incr', KEYS[2])
    redis.call('pexpire', KEYS[2], ARGV[3])
elseif redis.call('get', KEYS[1]) ~= ARGV[1] then
    return {0, redis.call('pttl', KEYS[1]), 0, 0}
end
local gen = tonumber(redis.call('get', KEYS[2]) or '0')
local clean = tonumber(redis.call('get', KEYS[3]) or '0')
return {1, redis.call('pttl', KEYS[1]), gen, clean}
"""
# Extends the lease only while it still holds our token.
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
# Deletes the lease only while it holds our token, with its mark of kept results, records
# our generation as released, and tells waiters it is free.
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1], KEYS[3])
    redis.call('set', KEYS[2], ARGV[4], 'PX', ARGV[5])
    redis.call('publish', ARGV[2], ARGV[3])
    return 1
end
return 0
"""
# Marks the holding with our token as one that only waits for kept results.
_HOLD_FOR_RESULTS = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('set', KEYS[2], ARGV[1], 'PX', ARGV[2]) and 1 or 0
end
return 0
"""
# Whether the chat's current holder is the one its mark of kept results names: a mark left
# by a holder that crashed or lapsed names a token no longer held.
_RESULTS_WAITING = """
local holder = redis.call('get', KEYS[1])
if holder and holder == redis.call('get', KEYS[2]) then
    return 1
end
return 0
"""
# How long a chat's generation and its last release are kept after its last take or release.
# A chat idle for longer starts again at generation 1, read as clean.
GENERATION_TTL_MS = 7 * 24 * 3600 * 1000


class RedisLease:
    """A lease key holding ``token``, renewed every third of its TTL until released."""

    def __init__(
        self,
        leases: RedisChatLeases,
        chat: ChatKey,
        token: str,
        *,
        taken_at: float,
        generation: int = 0,
        released: int = 0,
    ) -> None:
        self.token = token
        self.lost = asyncio.Event()
        self.generation = generation
        # The generation before ours was never released (generation 1 counts as clean).
        self.unclean = generation > 1 and released != generation - 1
        self._leases = leases
        self._chat = chat
        self._releasing: asyncio.Task[None] | None = None
        # Until when the store surely keeps the key: counted from before the command that
        # set or renewed it was sent, on the monotonic clock, which runs on while the process
        # is stopped.
        self._valid_until = taken_at + leases.ttl_seconds
        self.heartbeat = asyncio.create_task(self._renew(), name=f"lease:{chat[1]}")

    def held(self) -> bool:
        if self.lost.is_set() or self._releasing is not None:
            return False
        return asyncio.get_running_loop().time() < self._valid_until

    async def release(self) -> None:
        if self._releasing is None:
            self.heartbeat.cancel()
            self._leases.forget(self)
            self._releasing = self._leases.spawn(
                self._leases.delete(self._chat, self.token, self.generation)
            )
        # Shielded: a caller cancelled meanwhile must not leave the chat held for a TTL.
        await asyncio.shield(self._releasing)

    async def hold_for_results(self, ttl_seconds: float) -> None:
        if not self.held():
            return
        try:
            await self._leases.hold_for_results(self._chat, self.token, ttl_seconds)
        except Exception as exc:
            self._leases.outages.down(REDIS, exc, f"marking kept results of chat={self._chat[1]}")

    async def _renew(self) -> None:
        leases = self._leases
        loop = asyncio.get_running_loop()
        renewed = loop.time()
        while True:
            await asyncio.sleep(leases.ttl_seconds / 3)
            attempt = loop.time()
            try:
                held = await leases.renew_script(
                    keys=[leases.keys.lease(self._chat)], args=[self.token, leases.ttl_ms]
                )
            except Exception as exc:
                if cancelled_meanwhile():
                    return  # released meanwhile
                if loop.time() - renewed < leases.ttl_seconds:
                    leases.outages.down(REDIS, exc, f"renewing the lease of chat={self._chat[1]}")
                    continue
                held = 0  # unrenewed for a whole TTL: it may have lapsed
            if cancelled_meanwhile():
                return  # released meanwhile
            if not held:
                logger.warning(
                    "chat=%s lease lost: it lapsed or another holder took it", self._chat[1]
                )
                self.lost.set()
                leases.forget(self)
                return
            renewed = attempt
            self._valid_until = attempt + leases.ttl_seconds


class RedisChatLeases:
    def __init__(
        self,
        client: Client,
        keys: RedisKeys,
        signals: Signals,
        ttl_seconds: float,
        outages: Outages | None = None,
    ) -> None:
        self.keys = keys
        self.outages = outages or Outages()
        self.ttl_seconds = ttl_seconds
        self.ttl_ms = max(1, round(ttl_seconds * 1000))
        self.renew_script = client.register_script(_RENEW)
        self._client = client
        self._signals = signals
        self._release = client.register_script(_RELEASE)
        self._take_script = client.register_script(_TAKE)
        self._compare_and_delete = client.register_script(COMPARE_AND_DELETE)
        self._hold_for_results = client.register_script(_HOLD_FOR_RESULTS)
        self._results_waiting = client.register_script(_RESULTS_WAITING)
        self._held: set[RedisLease] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def acquire(self, chat: ChatKey, wait_seconds: float) -> RedisLease:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        freed = asyncio.Event()

        async def on_freed(_: dict[str, Any]) -> None:
            freed.set()

        async def on_reconnect() -> None:  # a freed signal may have been lost: try again
            freed.set()

        channel = self.keys.signal("freed", chat)
        self._signals.add(channel, on_freed)  # before the first try: no signal is missed
        self._signals.on_reconnect(on_reconnect)
        try:
            while True:
                freed.clear()
                lease, ttl_ms = await self._take(chat)
                if lease is not None:
                    return lease
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError(f"chat {chat[1]} is still held")
                # A holder that died sends no signal: its key lapses after ttl_ms (-1: a key
                # set without a TTL, which only a release frees).
                bound = remaining if ttl_ms == -1 else min(remaining, (max(ttl_ms, 0) + 1) / 1000)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(freed.wait(), bound)
        finally:
            self._signals.discard(channel, on_freed)
            self._signals.discard_reconnect(on_reconnect)

    async def try_acquire(self, chat: ChatKey) -> RedisLease | None:
        lease, _ = await self._take(chat)
        return lease

    async def results_waiting(self, chat: ChatKey) -> bool:
        keys = [self.keys.lease(chat), self.keys.results(chat)]
        return bool(await self._results_waiting(keys=keys))

    async def hold_for_results(self, chat: ChatKey, token: str, ttl_seconds: float) -> None:
        keys = [self.keys.lease(chat), self.keys.results(chat)]
        await self._hold_for_results(keys=keys, args=[token, max(1, round(ttl_seconds * 1000))])

    async def close(self) -> None:
        """Stop the heartbeats and finish the releases under way. A lease still held is left
        to lapse (its run may still be ending) and counts as lost from now on."""
        for lease in list(self._held):
            lease.heartbeat.cancel()
            lease.lost.set()
        await asyncio.gather(
            *self._tasks, *(lease.heartbeat for lease in self._held), return_exceptions=True
        )
        self._held.clear()

    def spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        async def run() -> None:
            await work

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def forget(self, lease: RedisLease) -> None:
        self._held.discard(lease)

    async def delete(self, chat: ChatKey, token: str, generation: int) -> None:
        """Release: the key goes if it is still ours, and waiters everywhere hear it."""
        channel = self.keys.signal("freed", chat)
        message = self._signals.message({})
        try:
            deleted = await self._release(
                keys=[self.keys.lease(chat), self.keys.clean(chat), self.keys.results(chat)],
                args=[token, channel, message, generation, GENERATION_TTL_MS],
            )
        except Exception as exc:
            self.outages.down(REDIS, exc, f"releasing the lease of chat={chat[1]} (it lapses)")
            return
        if deleted:
            await self._signals.deliver(channel, {})

    async def _take(self, chat: ChatKey) -> tuple[RedisLease | None, int]:
        """One try: the lease, or None and the holder's remaining TTL in ms."""
        key = self.keys.lease(chat)
        token = uuid.uuid4().hex
        sent_at = asyncio.get_running_loop().time()
        keys = [key, self.keys.generation(chat), self.keys.clean(chat)]
        try:
            taken, ttl_ms, generation, released = await self._take_script(
                keys=keys, args=[token, self.ttl_ms, GENERATION_TTL_MS]
            )
        except BaseException:
            # The SET may have run: never leave a lease nobody renews or releases.
            self.spawn(self._forsake(key, token))
            raise
        if cancelled_meanwhile():
            self.spawn(self._forsake(key, token))
            raise asyncio.CancelledError
        self.outages.up(REDIS)
        if not taken:
            return None, int(ttl_ms)
        lease = RedisLease(
            self, chat, token, taken_at=sent_at, generation=int(generation), released=int(released)
        )
        if lease.unclean:
            logger.info(
                "chat=%s taken over from a holder that did not release it (generation %s)",
                chat[1],
                generation,
            )
        self._held.add(lease)
        return lease, int(ttl_ms)

    async def _forsake(self, key: str, token: str) -> None:
        with contextlib.suppress(Exception):
            await self._compare_and_delete(keys=[key], args=[token])
