"""Names of one server's Redis keys and channels, and its one pub/sub connection.

Shared by the Redis seams (``coordination.py``, ``leases.py``,
``chunk_logs.py``): a follower checks the lease of the log's producer, so all must name
a chat's lease alike. Every name starts with the prefix, so servers sharing one Redis never
meet. A chat is its user id, ``:``, and its chat id: the user id is percent-quoted (it may hold
any character, ``:`` included), so the first ``:`` ends it and two chats never share a name.

The chat stands in braces, a hash tag: on a Redis Cluster only what is between the first
``{`` and the next ``}`` picks a key's slot, so all the keys of one chat are in one slot,
and a script or transaction on several of them runs (docs/adr/0031). Quoting keeps braces
out of the chat; the prefix has none. No script or transaction takes keys of two chats, or
a key that is not a chat's.

Signals (a lease freed, a stop, an answer to a waiting call) go over pub/sub: one connection
per process, subscribed to ``{prefix}:signal:*``, and one reader task handing each message to
this process's handlers of its channel. A process applies its own signals at once and skips
their echo (each message names its origin). The same connection also subscribes to the
process's presence channel, where nothing is published: while anyone listens there, the
process lives (a resume asks, before it follows a log the process wrote).

Pub/sub keeps nothing: a process whose pub/sub connection is down misses what is published
meanwhile (redis-py reconnects and subscribes again). So each signal also leaves something
in a key (docs/adr/0034): a stop a per-chat key, an answer a per-chat hash, a freed lease
the lease key's absence. The reader sees a reconnect as a second confirmation of its
subscription and then runs the reconnect hooks, which read those keys again: a stop
subscription its stop key, a lease waiter its lease, the pending calls their answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import redis.asyncio as redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.foundation.outages import REDIS, Outages

logger = logging.getLogger(__name__)

# After the pub/sub connection failed, before reading again: short, so that signals flow
# again soon after Redis is back (each try while it is down is one refused connection).
READER_RETRY_SECONDS = 0.1

# Deletes KEYS[1] only if it still holds ARGV[1] (a lease token, a log pointer): whoever
# lost the key to another writer never removes the other's.
COMPARE_AND_DELETE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""

Handler = Callable[[dict[str, Any]], Awaitable[None]]
# Called after the pub/sub connection came back: reads again what may have been missed.
ReconnectHook = Callable[[], Awaitable[None]]
# One Redis, or a Redis Cluster (``ADK_STREAM_REDIS_CLUSTER``).
Client = redis.Redis | RedisCluster


def cancelled_meanwhile() -> bool:
    """Whether this task was cancelled during a Redis call that carried on regardless.

    redis-py sends each command under ``asyncio.wait_for`` (when a socket timeout is set, as
    redis-py 8 does by default), and Python 3.11's ``wait_for`` drops a cancellation that
    arrives as the send completes. A loop that waits checks this after its calls, or it would
    wait on for nobody.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


_GLOB = re.compile(r"([\\*?\[\]])")


class RedisKeys:
    """``P:{C}:lease``, ``P:{C}:active``, ``P:{C}:log:ID``, ``P:{C}:results`` and the channels
    ``P:signal:KIND:{C}`` and ``P:signal:calls``, for the prefix ``P`` and the chat ``C``;
    ``P:sign-in:STATE``, a sign-in under way; and the channel ``P:process:ORIGIN``, a process's
    presence."""

    def __init__(self, prefix: str) -> None:
        if "{" in prefix or "}" in prefix:  # it would move the hash tag off the chat
            raise ValueError(f"a Redis key prefix has no braces: {prefix!r}")
        self.prefix = prefix
        self.signal_pattern = _GLOB.sub(r"\\\1", prefix) + ":signal:*"  # for PSUBSCRIBE
        self.calls_channel = f"{prefix}:signal:calls"

    @staticmethod
    def chat(chat: ChatKey) -> str:
        """The chat as a hash tag: ``{quoted user id:quoted chat id}``."""
        user_id, chat_id = chat
        # Chat ids are validated upstream; quoting keeps a stray one from forging a name
        # (or closing the hash tag early: braces are quoted too).
        return "{" + f"{quote(user_id, safe='')}:{quote(chat_id, safe=':')}" + "}"

    def lease(self, chat: ChatKey) -> str:
        return f"{self.prefix}:{self.chat(chat)}:lease"

    def active(self, chat: ChatKey) -> str:
        """The pointer to the chat's active response log."""
        return f"{self.prefix}:{self.chat(chat)}:active"

    def new_log(self, chat: ChatKey) -> str:
        """A fresh stream for one response of the chat."""
        return f"{self.prefix}:{self.chat(chat)}:log:{uuid.uuid4().hex}"

    def stop(self, chat: ChatKey) -> str:
        """The id of the chat's latest stop, for a short while."""
        return f"{self.prefix}:{self.chat(chat)}:stop"

    def answers(self, chat: ChatKey) -> str:
        """The answers given to the chat's waiting calls, for a while."""
        return f"{self.prefix}:{self.chat(chat)}:answers"

    def results(self, chat: ChatKey) -> str:
        """The lease token of a holder that only waits for kept results."""
        return f"{self.prefix}:{self.chat(chat)}:results"

    def generation(self, chat: ChatKey) -> str:
        """How many times the chat's lease was taken."""
        return f"{self.prefix}:{self.chat(chat)}:gen"

    def clean(self, chat: ChatKey) -> str:
        """The generation whose holder released the chat's lease last."""
        return f"{self.prefix}:{self.chat(chat)}:clean"

    def signal(self, kind: str, chat: ChatKey) -> str:
        return f"{self.prefix}:signal:{kind}:{self.chat(chat)}"

    def presence(self, origin: str) -> str:
        """The channel only the process ``origin`` subscribes to, on its pub/sub connection,
        while it runs. Nothing is published there: whether anyone listens says whether the
        process still has that connection (a killed process's closes at once)."""
        return f"{self.prefix}:process:{origin}"

    def sign_in(self, state: str) -> str:
        """A sign-in under way: no chat's key, named by its state (quoted, so that it cannot
        make a hash tag or another name)."""
        return f"{self.prefix}:sign-in:{quote(state, safe='')}"


def _pubsub(client: Client) -> PubSub:
    """A pub/sub connection. On a cluster, to one primary picked at random (the client knows
    them once it has sent a command): a cluster hands every PUBLISH to all its nodes, so one
    node hears every signal, and the processes of a deployment spread over the nodes."""
    if isinstance(client, RedisCluster):
        return client.pubsub(node=random.choice(client.get_primaries()))
    return client.pubsub()


async def listened(client: Client, channel: str) -> bool:
    """Whether any process subscribes to ``channel`` now (PUBSUB NUMSUB). A cluster counts a
    subscription on the node it was made on only: every primary is asked, and the counts add
    up. A Redis that does not let this user ask says yes: nothing is told apart then."""
    try:
        if isinstance(client, RedisCluster):
            counts = await client.pubsub_numsub(channel, target_nodes=RedisCluster.PRIMARIES)
        else:
            counts = await client.pubsub_numsub(channel)
    except ResponseError:
        return True
    return sum(int(count) for _, count in counts) > 0


class Signals:
    """This process's pub/sub connection and the handlers of each channel."""

    def __init__(self, client: Client, keys: RedisKeys, outages: Outages | None = None) -> None:
        self.outages = outages or Outages()
        self.origin = uuid.uuid4().hex  # this process, so it skips its own messages
        self.presence = keys.presence(self.origin)
        self._client = client
        self._keys = keys
        self._pubsub = _pubsub(client)
        self._handlers: dict[str, set[Handler]] = {}
        self._reconnect_hooks: set[ReconnectHook] = set()
        self._hook_runs: set[asyncio.Task[None]] = set()
        self._reader: asyncio.Task[None] | None = None
        self.subscriptions = 0  # confirmations of our subscription: more than one, reconnects

    async def start(self) -> None:
        await self._pubsub.psubscribe(self._keys.signal_pattern)
        # Its presence, which a reconnect subscribes again too.
        await self._pubsub.subscribe(self.presence)
        self._reader = asyncio.create_task(self._read(), name="redis-signals")

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        for run in list(self._hook_runs):
            run.cancel()
        await asyncio.gather(*self._hook_runs, return_exceptions=True)
        await self._pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]

    def add(self, channel: str, handler: Handler) -> None:
        self._handlers.setdefault(channel, set()).add(handler)

    def discard(self, channel: str, handler: Handler) -> None:
        handlers = self._handlers.get(channel)
        if handlers is not None:
            handlers.discard(handler)
            if not handlers:
                del self._handlers[channel]

    def on_reconnect(self, hook: ReconnectHook) -> None:
        """Call ``hook`` each time the pub/sub connection is back after a break, once it
        listens again: what was published meanwhile is lost, so the hook reads the state."""
        self._reconnect_hooks.add(hook)

    def discard_reconnect(self, hook: ReconnectHook) -> None:
        self._reconnect_hooks.discard(hook)

    def message(self, data: dict[str, Any]) -> str:
        return json.dumps({**data, "origin": self.origin})

    async def broadcast(self, channel: str, data: dict[str, Any]) -> None:
        """To the other processes (this one applies its own signals itself)."""
        await self._client.publish(channel, self.message(data))

    async def deliver(self, channel: str, data: dict[str, Any]) -> None:
        """To this process's handlers of the channel."""
        for handler in list(self._handlers.get(channel, ())):
            try:
                await handler(data)
            except Exception:
                logger.exception("signal handler failed on %s", channel)

    async def _read(self) -> None:
        while True:
            try:
                message = await self._pubsub.get_message(
                    ignore_subscribe_messages=False, timeout=None
                )
            except Exception as exc:  # redis-py reconnects and resubscribes on the next read
                self.outages.down(REDIS, exc, "reading signals (reading again shortly)")
                await asyncio.sleep(READER_RETRY_SECONDS)
                continue
            if message is None:
                continue
            if message.get("type") == "psubscribe":
                # The first confirms ``start``; any later one, a connection that broke and
                # subscribed again (redis-py does it as it reconnects, retrying the read).
                self.subscriptions += 1
                if self.subscriptions > 1:
                    self.outages.up(REDIS)
                    self._reconnected()
                continue
            if message.get("type") != "pmessage":
                continue
            try:
                data = json.loads(message["data"])
            except (ValueError, TypeError):
                continue
            if not isinstance(data, dict) or data.get("origin") == self.origin:
                continue
            channel = message["channel"]
            await self.deliver(channel.decode() if isinstance(channel, bytes) else channel, data)

    def _reconnected(self) -> None:
        logger.info("signals: pub/sub reconnected; reading the missed state again")
        for hook in list(self._reconnect_hooks):
            run = asyncio.create_task(self._run_hook(hook), name="redis-signals-reconnect")
            self._hook_runs.add(run)
            run.add_done_callback(self._hook_runs.discard)

    async def _run_hook(self, hook: ReconnectHook) -> None:
        try:
            await hook()
        except Exception as exc:
            self.outages.down(REDIS, exc, "reading state again after a pub/sub reconnect")
