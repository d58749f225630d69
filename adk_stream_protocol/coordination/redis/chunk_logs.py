"""Chunk logs of active responses in Redis Streams, so any process can resume a response.

Each response gets a stream of its own (``P:{C}:log:ID`` for the prefix ``P`` and the chat
``C``, one entry per framed event, then an end marker), and the chat's pointer
``P:{C}:active`` names the stream and the token of the lease it is written under
(``signals.py`` has the names). A new response only moves the pointer: followers of the old
stream still read it to its end. A stream outlives its end by the log TTL (followers still
reading it); one whose producer crashed goes after a day.

The log survives its producer, but a follower must not wait for an end that never comes: the
producer's chat lease lapses when it dies, so a follower that sees no new entry for a third of
the lease TTL checks the lease, and ends with an ``error`` event and ``[DONE]`` once it lapsed.

A resume that comes after the producer died is not such a follower: its log will never end,
and the chat's cut turn is for the resumer to finish. The pointer also names the producer's
presence channel (``signals.py``), which loses its listener the moment the process dies. A
resume that finds nobody there waits for the producer's lease to lapse (a timer on the lease's
own TTL: nothing signals a lapse) and then has no active response, so it can take the chat. A
lease renewed meanwhile is a live producer whose pub/sub connection was down: its log is
followed after all.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Sequence
from typing import Any, NamedTuple

from redis.exceptions import RedisError

from adk_stream_protocol.coordination.base import ChatKey, ChatLease
from adk_stream_protocol.coordination.redis.signals import (
    COMPARE_AND_DELETE,
    Client,
    RedisKeys,
    Signals,
    cancelled_meanwhile,
    listened,
)
from adk_stream_protocol.foundation.outages import REDIS
from adk_stream_protocol.protocol.chunks import ErrorChunk
from adk_stream_protocol.protocol.sse import DONE, format_event

logger = logging.getLogger(__name__)

SAFETY_TTL_SECONDS = 24 * 3600  # a log (or pointer) whose producer crashed goes eventually
READ_BATCH = 512  # entries per XREAD
MAX_BLOCK_SECONDS = 2.0  # one XREAD BLOCK at most
EVENT_FIELD = b"e"
END_FIELD = b"end"

PRODUCER_GONE_EVENT = format_event(
    ErrorChunk(
        error_text="the server answering this chat stopped before the response ended; "
        "send the message again"
    )
).encode()
# A follower whose Redis went away: the log it read may be gone with it.
LOG_LOST_EVENT = format_event(
    ErrorChunk(
        error_text="the chat service lost this response's log; "
        "reload the chat, or send the message again"
    )
).encode()
DONE_EVENT = DONE.encode()

# The end marker, the stream's expiry, and the pointer dropped if it still names the stream:
# in one step, so a pointer that exists always names a log that has not ended.
_CLOSE = """
redis.call('xadd', KEYS[1], '*', 'end', '1')
redis.call('pexpire', KEYS[1], ARGV[1])
if redis.call('get', KEYS[2]) == ARGV[2] then
    redis.call('del', KEYS[2])
end
return 1
"""

Entry = tuple[bytes, dict[bytes, bytes]]


def _entries(reply: Any) -> list[Entry]:
    """The entries of an XREAD reply on one stream (RESP2 list or RESP3 map)."""
    if not reply:
        return []
    streams = list(reply.values()) if isinstance(reply, dict) else [s[1] for s in reply]
    entries: list[Entry] = []
    for stream in streams:
        # RESP3 wraps a stream's entries in one more list.
        batch = stream[0] if stream and isinstance(stream[0], list) else stream
        entries.extend((entry_id, fields) for entry_id, fields in batch)
    return entries


class RedisResponseLog:
    """One response's stream, written by the process running it.

    Written behind: ``append`` hands the events to one writer task and returns, so the
    response reaches its own client without waiting for Redis, and events that pile up
    while a write is under way go together in the next round trip (under load, fewer and
    larger writes). ``close`` waits for everything to be written before the end marker."""

    def __init__(self, logs: RedisChunkLogs, chat: ChatKey, stream: str, pointer: str) -> None:
        self._logs = logs
        self._chat = chat
        self._stream = stream
        self._pointer = pointer  # the pointer's value while this log is the active one
        self._closed = False
        self._unwritten: list[bytes] = []
        self._more = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None

    async def append(self, events: Sequence[bytes]) -> None:
        if not events or self._closed:
            return
        self._unwritten.extend(events)
        self._more.set()
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name=f"chunk-log:{self._chat[1]}")

    async def _write(self) -> None:
        first = True
        while True:
            await self._more.wait()
            self._more.clear()
            while self._unwritten:
                batch, self._unwritten = self._unwritten, []
                try:
                    async with self._logs.client.pipeline(transaction=False) as pipe:
                        for event in batch:
                            pipe.xadd(self._stream, {EVENT_FIELD: event})
                        if first:
                            pipe.expire(self._stream, SAFETY_TTL_SECONDS)
                        await pipe.execute()
                    first = False
                    self._logs.outages.up(REDIS)
                except RedisError as exc:
                    # Resumers miss these events; the response's own client does not.
                    self._logs.outages.down(REDIS, exc, f"writing the log of chat={self._chat[1]}")
            if self._closed:
                return

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._more.set()
            await self._writer
        try:
            await self._logs.close_script(
                keys=[self._stream, self._logs.keys.active(self._chat)],
                args=[self._logs.log_ttl_ms, self._pointer],
            )
        except RedisError as exc:
            # Its followers end when they find the producer's lease gone; the response's own
            # client already has its end.
            self._logs.outages.down(REDIS, exc, f"ending the log of chat={self._chat[1]}")
            return
        logger.info("chat=%s response log ended", self._chat[1])


class _Target(NamedTuple):
    """What a chat's log pointer names: the stream, the token of the lease it is written
    under, and its producer's presence channel (None in a pointer written before there was
    one)."""

    stream: str
    holder: str
    presence: str | None


def _target(chat: ChatKey, pointer: bytes | str | None) -> _Target | None:
    if pointer is None:
        return None
    try:
        target = json.loads(pointer)
        presence = target.get("presence")
        return _Target(
            str(target["stream"]),
            str(target["holder"]),
            presence if isinstance(presence, str) else None,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        logger.warning("chat=%s has an unreadable log pointer; ignored", chat[1])
        return None


class RedisChunkLogs:
    def __init__(
        self,
        client: Client,
        keys: RedisKeys,
        signals: Signals,
        *,
        reader: Client | None = None,
        lease_ttl_seconds: float,
        log_ttl_seconds: float,
    ) -> None:
        self.client = client
        self.presence = signals.presence  # this process's, named in the pointers it writes
        self.outages = signals.outages
        # Followers block a connection each while they wait: their own pool, so they never
        # hold up the short commands of the responses being written.
        self.reader = reader or client
        self.keys = keys
        self.log_ttl_ms = max(1, round(log_ttl_seconds * 1000))
        # How long a follower waits for an entry before it checks the producer's lease; well
        # under the client's socket timeout (5 s unless the URL sets one), which would cut
        # a longer block short with an error.
        block_seconds = min(lease_ttl_seconds / 3, MAX_BLOCK_SECONDS)
        socket_timeout = client.get_connection_kwargs().get("socket_timeout")
        if socket_timeout:
            block_seconds = min(block_seconds, socket_timeout / 2)
        self._block_ms = max(1, round(block_seconds * 1000))
        self.close_script = client.register_script(_CLOSE)
        self._compare_and_delete = client.register_script(COMPARE_AND_DELETE)

    async def open(self, chat: ChatKey, holder: ChatLease) -> RedisResponseLog:
        stream = self.keys.new_log(chat)
        target = {"stream": stream, "holder": holder.token, "presence": self.presence}
        pointer = json.dumps(target)
        await self.client.set(self.keys.active(chat), pointer, ex=SAFETY_TTL_SECONDS)
        return RedisResponseLog(self, chat, stream, pointer)

    async def follow(self, chat: ChatKey) -> AsyncGenerator[bytes, None] | None:
        pointer_key = self.keys.active(chat)
        lease_key = self.keys.lease(chat)
        waited_for: bytes | str | None = None  # the pointer whose producer's lapse was waited for
        while True:
            pointer = await self.client.get(pointer_key)
            target = _target(chat, pointer)
            if pointer is None or target is None:
                return None
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.get(lease_key)
                pipe.pttl(lease_key)
                pipe.xrevrange(target.stream, count=1)
                holding, lease_ms, last = await pipe.execute()
            ended = bool(last) and END_FIELD in last[0][1]
            if not ended and holding != target.holder.encode():
                # Its producer is gone (its lease lapsed): nothing will end this log.
                await self._compare_and_delete(keys=[pointer_key], args=[pointer])
                logger.info("chat=%s dropped the log of a producer that is gone", chat[1])
                return None
            if (
                ended
                or pointer == waited_for  # its lease was renewed meanwhile: it lives
                or target.presence is None
                or await listened(self.client, target.presence)
            ):
                return self._read(chat, target.stream, lease_key, target.holder.encode())
            logger.info("chat=%s the log's producer is gone; its lease lapses first", chat[1])
            await asyncio.sleep((max(int(lease_ms), 0) + 1) / 1000)
            waited_for = pointer

    async def with_active_response(self, chats: Sequence[ChatKey]) -> set[ChatKey]:
        """A chat's pointer, and its lease held by the token the pointer names: two reads a
        chat in one round trip (a pointer whose producer is gone is not an active response)."""
        if not chats:
            return set()
        async with self.client.pipeline(transaction=False) as pipe:
            for chat in chats:
                pipe.get(self.keys.active(chat))
                pipe.get(self.keys.lease(chat))
            replies = await pipe.execute()
        active: set[ChatKey] = set()
        for index, chat in enumerate(chats):
            pointer, holding = replies[2 * index], replies[2 * index + 1]
            target = _target(chat, pointer) if pointer is not None else None
            if target is not None and holding == target.holder.encode():
                active.add(chat)
        return active

    async def discard(self, chat: ChatKey) -> None:
        pointer_key = self.keys.active(chat)
        pointer = await self.client.get(pointer_key)
        target = _target(chat, pointer)
        # The stream shares the chat's hash tag with its pointer: one command, one slot.
        await self.client.delete(pointer_key, *([target.stream] if target is not None else []))

    async def _read(
        self, chat: ChatKey, stream: str, lease_key: str, holder: bytes
    ) -> AsyncGenerator[bytes, None]:
        """From the first entry, then live (XREAD BLOCK) until the end marker. Cancelled in
        a blocked XREAD, redis-py drops that connection, so the pool stays sound. A Redis
        that goes away ends the body with an ``error`` and ``[DONE]``, never a cut."""
        ended = False  # its [DONE] is out: only the end marker was left to read
        try:
            async for event in self._entries_to_end(chat, stream, lease_key, holder):
                ended = event == DONE_EVENT
                yield event
        except RedisError as exc:
            self.outages.down(REDIS, exc, f"following the log of chat={chat[1]}")
            if not ended:
                yield LOG_LOST_EVENT
                yield DONE_EVENT

    async def _entries_to_end(
        self, chat: ChatKey, stream: str, lease_key: str, holder: bytes
    ) -> AsyncGenerator[bytes, None]:
        after = b"0-0"
        while True:
            entries = _entries(
                await self.reader.xread({stream: after}, count=READ_BATCH, block=self._block_ms)
            )
            if cancelled_meanwhile():
                raise asyncio.CancelledError
            if not entries:
                # Quiet for a while: the lease first, then the log, so an end written
                # before the lease was released is still read.
                async with self.client.pipeline(transaction=False) as pipe:
                    pipe.get(lease_key)
                    pipe.xread({stream: after}, count=READ_BATCH)
                    holding, reply = await pipe.execute()
                if cancelled_meanwhile():
                    raise asyncio.CancelledError
                entries = _entries(reply)
                if not entries and holding != holder:
                    logger.warning("chat=%s producer gone before its response ended", chat[1])
                    yield PRODUCER_GONE_EVENT
                    yield DONE_EVENT
                    return
            for entry_id, fields in entries:
                after = entry_id
                if END_FIELD in fields:
                    return
                yield fields[EVENT_FIELD]
