"""The shared stores a server uses, chosen by its settings (docs/deployment.md).

- Sessions: SQLite (the embedded default), memory, or PostgreSQL (``store/sessions.py``).
- Coordination: in this process (the default), or Redis (``coordination/redis/``).

A store whose client library is missing stops the server at start-up with the extra to
install, rather than failing on the first request.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from adk_stream_protocol.coordination.base import Coordination
from adk_stream_protocol.coordination.local import local_coordination
from adk_stream_protocol.foundation.outages import Outages
from adk_stream_protocol.foundation.settings import Settings


class MissingExtraError(RuntimeError):
    """A setting names a store whose client is not installed."""

    def __init__(self, setting: str, extra: str, modules: list[str]) -> None:
        # The package is not on PyPI yet: extras install from a checkout (docs/getting-started.md).
        super().__init__(
            f"{setting} needs {', '.join(modules)}, which the {extra!r} extra installs: "
            f"pip install '/path/to/adk-stream-protocol[{extra}]' (your checkout's path), "
            f"or pip install -e '.[{extra}]' in the checkout"
        )
        self.extra = extra


def _missing(*modules: str) -> list[str]:
    return [name for name in modules if importlib.util.find_spec(name) is None]


def uses_postgres(settings: Settings) -> bool:
    return settings.session_store.startswith(("postgresql", "postgres://"))


def check_extras(settings: Settings) -> None:
    """Raise ``MissingExtraError`` when a configured store's client is not installed."""
    if uses_postgres(settings) and (missing := _missing("sqlalchemy", "asyncpg", "greenlet")):
        raise MissingExtraError("ADK_STREAM_SESSION_STORE", "postgres", missing)
    if settings.redis_url is not None and (missing := _missing("redis")):
        raise MissingExtraError("ADK_STREAM_REDIS_URL", "redis", missing)
    if settings.metrics and (missing := _missing("prometheus_client")):
        raise MissingExtraError("ADK_STREAM_METRICS", "metrics", missing)


@asynccontextmanager
async def open_coordination(
    settings: Settings, app_name: str, outages: Outages | None = None
) -> AsyncIterator[Coordination]:
    """The coordination the settings ask for, open for the application's life. In Redis its
    keys carry ``app_name``, the name the app's chats are stored under: two apps that share
    a Redis keep their chats' leases and logs apart, as their stores keep the chats."""
    if settings.redis_url is None:
        yield local_coordination()
        return
    from adk_stream_protocol.coordination.redis.coordination import connect_redis_coordination

    redis_coordination = await connect_redis_coordination(
        settings.redis_url,
        cluster=settings.redis_cluster,
        prefix=f"{settings.redis_key_prefix}:{app_name}",
        lease_ttl_seconds=settings.lease_ttl_seconds,
        log_ttl_seconds=settings.chunk_log_ttl_seconds,
        outages=outages,
    )
    try:
        yield redis_coordination.coordination
    finally:
        await redis_coordination.close()
