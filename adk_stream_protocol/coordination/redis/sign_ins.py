"""Sign-ins under way (``SignIns``) in Redis, so that the provider's redirect may reach any
instance: one key per state, ``P:sign-in:STATE``, holding the sign-in as JSON, set with its
time to live and taken with ``GETDEL``, which Redis runs at once: of two redirects with one
state, one gets the sign-in and the other nothing.

The key is no chat's (the state names it), so it carries no hash tag; nothing takes it
together with another key, which a Redis Cluster allows on any node.
"""

from __future__ import annotations

import json
from typing import Any

from adk_stream_protocol.coordination.base import SignIn
from adk_stream_protocol.coordination.redis.signals import Client, RedisKeys


class RedisSignIns:
    """Redis's errors reach the caller, which answers them as a store's outage."""

    def __init__(self, client: Client, keys: RedisKeys) -> None:
        self._client = client
        self._keys = keys

    async def bind(self, state: str, sign_in: SignIn, ttl_seconds: float) -> None:
        user_id, chat_id = sign_in.chat
        value = {
            "user": user_id,
            "chat": chat_id,
            "call": sign_in.call_id,
            "answer": sign_in.answer,
        }
        ttl_ms = max(1, round(ttl_seconds * 1000))
        await self._client.set(self._keys.sign_in(state), json.dumps(value), px=ttl_ms, nx=True)

    async def take(self, state: str) -> SignIn | None:
        raw = await self._client.getdel(self._keys.sign_in(state))
        if raw is None:
            return None
        value: dict[str, Any] = json.loads(raw)
        return SignIn(
            chat=(str(value["user"]), str(value["chat"])),
            call_id=str(value["call"]),
            answer=dict(value["answer"]),
        )
