"""The coordination interfaces (``coordination/base.py``) on Redis, for several processes or
instances serving one app (``ADK_STREAM_REDIS_URL``). Leases are in ``leases.py``, chunk
logs in ``chunk_logs.py``, stops in ``stops.py``, sign-ins under way in ``sign_ins.py``, key
names and the pub/sub signals in ``signals.py``; here are pending calls and the connection that
holds them all.

- Pending calls stay in this process: a tool waits in the process that runs it, and the chat's
  watcher (the connection serving the chat) is there too, since the chat's lease keeps both in
  one place. Only the answers travel: ``decide``, ``deliver``, ``cancel`` and the cancel part
  of ``unwatch`` apply here and are published, so that the process where the call waits
  resolves it, whichever process received the answer. Decisions and results are also kept in
  the chat's answers hash, read again after a reconnect; a cancel empties it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError, ResponseError

from adk_stream_protocol.coordination.base import (
    ChatKey,
    Coordination,
    Outcome,
    Verdict,
    WaitingCall,
)
from adk_stream_protocol.coordination.local import LocalPendingCalls
from adk_stream_protocol.coordination.redis.chunk_logs import RedisChunkLogs
from adk_stream_protocol.coordination.redis.leases import RedisChatLeases
from adk_stream_protocol.coordination.redis.sign_ins import RedisSignIns
from adk_stream_protocol.coordination.redis.signals import Client, RedisKeys, Signals
from adk_stream_protocol.coordination.redis.stops import RedisStopSignals
from adk_stream_protocol.foundation.outages import REDIS, Outages

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 10.0

# How long the answers given to a chat's waiting calls are kept after the last one: longer
# than an approval or a browser call waits.
ANSWERS_TTL_MS = 3_600_000

# An answer: kept in the chat's answers hash (a field per call), and published.
_ANSWER = """
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
redis.call('pexpire', KEYS[1], ARGV[3])
redis.call('publish', ARGV[4], ARGV[5])
return 1
"""
# A cancel ends every waiting call of the chat: the answers kept for them go too.
_CANCEL = """
redis.call('del', KEYS[1])
redis.call('publish', ARGV[1], ARGV[2])
return 1
"""


class RedisPendingCalls:
    """This process's waits (``LocalPendingCalls``); the answers are published to all."""

    def __init__(self, client: Client, keys: RedisKeys, signals: Signals) -> None:
        self._local = LocalPendingCalls()
        self._signals = signals
        self._keys = keys
        self._client = client
        self._answer = client.register_script(_ANSWER)
        self._cancel = client.register_script(_CANCEL)
        self._channel = keys.calls_channel
        signals.add(self._channel, self._apply)
        signals.on_reconnect(self.reread)

    def watch(self, chat: ChatKey, listener: Callable[[WaitingCall], None]) -> None:
        self._local.watch(chat, listener)

    async def unwatch(self, chat: ChatKey, result: dict[str, Any]) -> None:
        await self._local.unwatch(chat, result)
        await self._publish(chat, None, op="cancel", result=result)

    async def ask_approval(
        self, chat: ChatKey, call_id: str, tool_name: str, timeout_seconds: float
    ) -> Outcome:
        return await self._local.ask_approval(chat, call_id, tool_name, timeout_seconds)

    async def ask_confirmation(
        self, chat: ChatKey, call: WaitingCall, timeout_seconds: float
    ) -> Verdict:
        return await self._local.ask_confirmation(chat, call, timeout_seconds)

    async def decide(
        self, chat: ChatKey, approval_id: str, approved: bool, payload: Any = None
    ) -> None:
        await self._local.decide(chat, approval_id, approved, payload)
        # Kept as the decision alone when there is no payload, as before.
        value = approved if payload is None else {"approved": approved, "payload": payload}
        kept = (f"decide:{approval_id}", json.dumps(value))
        data = {"approval_id": approval_id, "approved": approved, "payload": payload}
        await self._publish(chat, kept, op="decide", **data)

    async def wait_result(
        self, chat: ChatKey, call_id: str, timeout_seconds: float, unwatched: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._local.wait_result(chat, call_id, timeout_seconds, unwatched)

    async def deliver(self, chat: ChatKey, call_id: str, result: dict[str, Any]) -> None:
        await self._local.deliver(chat, call_id, result)
        kept = (f"deliver:{call_id}", json.dumps(result))
        await self._publish(chat, kept, op="deliver", call_id=call_id, result=result)

    async def cancel(self, chat: ChatKey, result: dict[str, Any]) -> None:
        await self._local.cancel(chat, result)
        await self._publish(chat, None, op="cancel", result=result)

    async def waiting(self, chat: ChatKey) -> list[WaitingCall]:
        return await self._local.waiting(chat)

    async def _publish(self, chat: ChatKey, kept: tuple[str, str] | None, **data: Any) -> None:
        """To the other processes, and into the chat's answers hash (``kept``: field and
        value), or, for a cancel, out of it. This one's waits have the answer already; while
        Redis is unavailable the others miss it, and their waits time out as for a silent
        client."""
        message = self._signals.message({"user": chat[0], "chat": chat[1], **data})
        key = self._keys.answers(chat)
        try:
            if kept is None:
                await self._cancel(keys=[key], args=[self._channel, message])
            else:
                field, value = kept
                args: list[str | int] = [field, value, ANSWERS_TTL_MS, self._channel, message]
                await self._answer(keys=[key], args=args)
        except RedisError as exc:
            self._signals.outages.down(REDIS, exc, f"publishing an answer of chat={chat[1]}")

    async def reread(self) -> None:
        """After a pub/sub reconnect: the answers kept for this process's waiting calls."""
        for chat in self._local.waiting_chats():
            calls = await self._local.waiting(chat)
            if not calls:
                continue
            kept = await self._client.hgetall(self._keys.answers(chat))
            answers = {_text(k): json.loads(v) for k, v in kept.items()}
            for call in calls:
                if call.approval_id is not None:
                    decided = answers.get(f"decide:{call.approval_id}")
                    if isinstance(decided, dict):
                        approved, payload = decided.get("approved"), decided.get("payload")
                    else:
                        approved, payload = decided, None
                    if isinstance(approved, bool):
                        await self._local.decide(chat, call.approval_id, approved, payload)
                elif isinstance(result := answers.get(f"deliver:{call.call_id}"), dict):
                    await self._local.deliver(chat, call.call_id, result)

    async def _apply(self, data: dict[str, Any]) -> None:
        """Another process's answer, applied to the waits of this one."""
        chat: ChatKey = (str(data["user"]), str(data["chat"]))
        op = data.get("op")
        if op == "decide":
            approval_id, approved = str(data["approval_id"]), bool(data["approved"])
            await self._local.decide(chat, approval_id, approved, data.get("payload"))
        elif op == "deliver" and isinstance(data.get("result"), dict):
            await self._local.deliver(chat, str(data["call_id"]), data["result"])
        elif op == "cancel" and isinstance(data.get("result"), dict):
            await self._local.cancel(chat, data["result"])


class RedisCoordination:
    """One process's coordination in Redis: one client (pool), one pub/sub reader."""

    def __init__(
        self,
        client: Client,
        keys: RedisKeys,
        signals: Signals,
        *,
        reader: Client,
        lease_ttl_seconds: float,
        log_ttl_seconds: float,
    ) -> None:
        outages = signals.outages  # the application's record of stores that are down
        self.client = client
        self.reader = reader
        self._signals = signals
        self._leases = RedisChatLeases(client, keys, signals, lease_ttl_seconds, outages)
        self.coordination = Coordination(
            leases=self._leases,
            pending=RedisPendingCalls(client, keys, signals),
            stops=RedisStopSignals(client, keys, signals),
            chunk_logs=RedisChunkLogs(
                client,
                keys,
                signals,
                reader=reader,
                lease_ttl_seconds=lease_ttl_seconds,
                log_ttl_seconds=log_ttl_seconds,
            ),
            sign_ins=RedisSignIns(client, keys),
        )

    async def close(self) -> None:
        try:
            await self._leases.close()
            await self._signals.close()
        finally:
            await self.client.aclose()
            await self.reader.aclose()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _where(url: str) -> str:
    """Where the URL points, without its credentials."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    try:
        port = parts.port or 6379
    except ValueError:
        port = 6379
    return f"{parts.hostname or 'localhost'}:{port}"


def _redacted(text: str, url: str) -> str:
    parts = urlsplit(url)
    for secret in (parts.password, parts.username):
        if secret:
            text = text.replace(secret, "***")
    return text


COMMAND_CONNECTIONS = 32
READER_CONNECTIONS = 1000


def _reconnecting() -> Retry:
    """A command whose pooled connection turns out dead (Redis restarted, a proxy dropped
    it) is sent again on a new one, at once and then once more shortly after, so a restart
    costs no request. Only connection errors: a Redis that does not answer within the
    socket timeout is not asked again, or a frozen one would hold each request three times
    as long. Retried commands are safe to send twice (the lease is taken by a script that
    finds its own token)."""
    return Retry(
        ExponentialBackoff(cap=0.05, base=0.01), 2, supported_errors=(RedisConnectionError,)
    )


def _clients(url: str, cluster: bool) -> tuple[Client, Client]:
    """The command client and the followers' client.

    Short commands share a few connections: a burst of responses waits a moment for one
    instead of opening hundreds (each new connection costs a handshake). Resumers block one
    connection each while they wait for more of their log, so they have a pool of their own,
    larger than redis-py's default (100). `?max_connections=` in the URL sets both.

    redis-py's cluster client has no blocking pool (a node whose pool is full fails the
    command at once), so on a cluster both allow the readers' number per node."""
    if cluster:
        return (
            RedisCluster.from_url(url, max_connections=READER_CONNECTIONS),
            RedisCluster.from_url(url, max_connections=READER_CONNECTIONS),
        )
    client = redis.Redis.from_pool(
        redis.BlockingConnectionPool.from_url(
            url, max_connections=COMMAND_CONNECTIONS, retry=_reconnecting()
        )
    )
    return client, redis.from_url(url, max_connections=READER_CONNECTIONS, retry=_reconnecting())


class _ClusterNodeError(RuntimeError):
    """A single-Redis client pointed at a node of a cluster."""


async def _not_a_cluster_node(client: Client, url: str) -> None:
    """Refuse a node of a cluster without ``ADK_STREAM_REDIS_CLUSTER``: that node holds a
    third of the slots or so, and the other chats would fail with MOVED."""
    try:
        info = await client.info("cluster")
    except ResponseError:  # INFO not allowed to this user: nothing to tell
        return
    if info.get("cluster_enabled"):
        raise _ClusterNodeError(
            f"{_where(url)} is a node of a Redis Cluster: set ADK_STREAM_REDIS_CLUSTER=true"
        )


async def connect_redis_coordination(
    url: str,
    *,
    prefix: str,
    lease_ttl_seconds: float,
    log_ttl_seconds: float,
    cluster: bool = False,
    outages: Outages | None = None,
) -> RedisCoordination:
    """Connect (PING first, so a wrong URL stops the server at start-up) and subscribe.
    With ``cluster``, ``url`` names one node of a Redis Cluster. ``outages``: the application's
    record of stores that are down (one WARNING each)."""
    outages = outages or Outages()
    try:
        client, reader = _clients(url, cluster)
    except (ValueError, RedisClusterException) as exc:
        kind = "Redis Cluster" if cluster else "Redis"
        raise RuntimeError(f"not a {kind} URL: {_redacted(str(exc), url)}") from None
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            await client.ping()
            if not cluster:
                await _not_a_cluster_node(client, url)
            keys = RedisKeys(prefix)
            signals = Signals(client, keys, outages)
            await signals.start()
    except (RedisError, RedisClusterException, OSError, TimeoutError) as exc:
        await client.aclose()
        await reader.aclose()
        reason = _redacted(str(exc), url) or type(exc).__name__
        raise RuntimeError(f"Redis is not reachable at {_where(url)}: {reason}") from None
    except _ClusterNodeError:
        await client.aclose()
        await reader.aclose()
        raise
    logger.info("coordination in Redis at %s under %s", _where(url), prefix)
    return RedisCoordination(
        client,
        keys,
        signals,
        reader=reader,
        lease_ttl_seconds=lease_ttl_seconds,
        log_ttl_seconds=log_ttl_seconds,
    )
