"""The Redis "processes" the coordination tests open (each a connection to the test's key
prefix), a plain client to look at their keys, and the key names."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import redis.asyncio as redis

from adk_stream_protocol.coordination.redis.coordination import (
    RedisCoordination,
    connect_redis_coordination,
)
from adk_stream_protocol.coordination.redis.signals import RedisKeys
from tests.coordination.test_redis_coordination import LEASE_TTL, LOG_TTL, Connect


@pytest_asyncio.fixture
async def connect(redis_url: str, redis_prefix: str) -> AsyncIterator[Connect]:
    """Opens a connection to the test's prefix (a "process"); all are closed at the end."""
    opened: list[RedisCoordination] = []

    async def open_one(lease_ttl: float = LEASE_TTL, url: str = redis_url) -> RedisCoordination:
        connected = await connect_redis_coordination(
            url, prefix=redis_prefix, lease_ttl_seconds=lease_ttl, log_ttl_seconds=LOG_TTL
        )
        opened.append(connected)
        return connected

    yield open_one
    for connected in opened:
        await connected.close()


@pytest_asyncio.fixture
async def store(redis_url: str) -> AsyncIterator[redis.Redis]:
    """A plain client, to look at the keys (and break them)."""
    client = redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def keys(redis_prefix: str) -> RedisKeys:
    return RedisKeys(redis_prefix)
