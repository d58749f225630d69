"""Stops in Redis (``DELETE /stream/{chatId}/stream`` and ``DELETE /chats/{chatId}``, from
any instance).

A stop is a signal on the chat's channel: every process sets its subscriptions' ``stopped``
(and first ``deleted``, for a stop that deletes the chat). It also leaves its id in the
chat's stop key for a minute (prefixed for a delete), which a subscription reads again when
this process's pub/sub connection came back: a stop published while it was down is not lost
(docs/adr/0034).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from redis.exceptions import RedisError

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.coordination.redis.signals import Client, RedisKeys, Signals
from adk_stream_protocol.foundation.outages import REDIS

logger = logging.getLogger(__name__)

# How long a stop's id stays in its chat's stop key: far longer than a pub/sub reconnect takes
# once Redis answers again.
STOP_KEY_MS = 60_000
# The prefix of a deleting stop's id in the stop key: a reconnect's check sees the delete too.
DELETED = "deleted:"
# A stop: its id in the chat's stop key, and the signal (the channel is an argument: no key).
_STOP = """
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('publish', ARGV[3], ARGV[4])
return 1
"""


class RedisStopSubscription:
    """Set by the chat's stop signal, or, after a pub/sub reconnect, by a stop id in the
    chat's stop key other than the one there when the subscription began."""

    def __init__(self, signals: Signals, channel: str, client: Client, key: str) -> None:
        self.stopped = asyncio.Event()
        self.deleted = asyncio.Event()
        self._signals = signals
        self._channel = channel
        self._client = client
        self._key = key
        self._known: bytes | str | None = None  # the stop id there before we listened
        self._checkable = False  # whether that was read

    async def start(self) -> None:
        self._signals.add(self._channel, self.on_stop)
        self._signals.on_reconnect(self.check)
        try:
            self._known = await self._client.get(self._key)
        except RedisError as exc:  # only a stop during a reconnect would be missed, as before
            self._signals.outages.down(REDIS, exc, "reading a chat's last stop")
        else:
            self._checkable = True

    async def on_stop(self, data: dict[str, Any]) -> None:
        if data.get("deleted") is True:
            self.deleted.set()  # first: whoever wakes on ``stopped`` sees it
        self.stopped.set()

    async def check(self) -> None:
        """After a reconnect: a stop sent while the pub/sub connection was down."""
        if not self._checkable or self.stopped.is_set():
            return
        latest = await self._client.get(self._key)
        if latest is not None and latest != self._known:
            logger.info("a stop sent during a pub/sub reconnect: %s", self._key)
            text = latest.decode() if isinstance(latest, bytes) else latest
            await self.on_stop({"deleted": text.startswith(DELETED)})

    async def close(self) -> None:
        self._signals.discard(self._channel, self.on_stop)
        self._signals.discard_reconnect(self.check)


class RedisStopSignals:
    """A stop is a signal: it reaches the subscriptions of every process, none later; the
    chat's stop key keeps it for those whose pub/sub connection was down."""

    def __init__(self, client: Client, keys: RedisKeys, signals: Signals) -> None:
        self._keys = keys
        self._signals = signals
        self._client = client
        self._stop = client.register_script(_STOP)

    async def subscribe(self, chat: ChatKey) -> RedisStopSubscription:
        subscription = RedisStopSubscription(
            self._signals, self._keys.signal("stop", chat), self._client, self._keys.stop(chat)
        )
        await subscription.start()
        return subscription

    async def stop(self, chat: ChatKey, *, deleted: bool = False) -> None:
        channel = self._keys.signal("stop", chat)
        data = {"deleted": True} if deleted else {}
        await self._signals.deliver(channel, data)
        stop_id = (DELETED if deleted else "") + uuid.uuid4().hex
        await self._stop(
            keys=[self._keys.stop(chat)],
            args=[stop_id, STOP_KEY_MS, channel, self._signals.message(data)],
        )
