"""Chats and ADK sessions (docs/adr/0004-chat-sessions.md).

A chat is identified by the authenticated user and the client's chat id; it maps to exactly
one ADK session whose id is the chat id. Runs on one chat are serialised: ADK's persistent
stores reject concurrent writers, and two answers interleaving in one history make no sense.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from google.adk.sessions import BaseSessionService, InMemorySessionService, Session

logger = logging.getLogger(__name__)


def create_session_service(url: str) -> BaseSessionService:
    """Build the session store a URL names: ``memory://``, ``sqlite:///file.db``, or a
    database URL for ADK's DatabaseSessionService."""
    if url in ("memory://", "memory:"):
        return InMemorySessionService()
    if url.startswith("sqlite:///"):
        from google.adk.sessions.sqlite_session_service import SqliteSessionService

        path = Path(url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteSessionService(str(path))
    try:
        from google.adk.sessions.database_session_service import DatabaseSessionService
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise RuntimeError(
            f"session store {url!r} needs `pip install google-adk[db]` and an async driver"
        ) from exc
    return DatabaseSessionService(url)


class ChatLease:
    """The right to run one chat, released exactly once (by whichever task finishes last)."""

    def __init__(self, locks: ChatLocks, key: tuple[str, str]) -> None:
        self._locks = locks
        self._key = key
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._locks._release(self._key)


class ChatLocks:
    """One lock per chat, created on demand and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._users: dict[tuple[str, str], int] = {}

    async def acquire(self, user_id: str, chat_id: str, wait_seconds: float) -> ChatLease:
        key = (user_id, chat_id)
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            await asyncio.wait_for(lock.acquire(), wait_seconds)
        except BaseException:
            self._forget(key)
            raise
        return ChatLease(self, key)

    async def try_acquire(self, user_id: str, chat_id: str) -> ChatLease | None:
        """The chat's lock if it is free right now, else None (no queueing behind others)."""
        existing = self._locks.get((user_id, chat_id))
        if existing is not None and existing.locked():
            return None
        return await self.acquire(user_id, chat_id, wait_seconds=1)

    def _release(self, key: tuple[str, str]) -> None:
        self._locks[key].release()
        self._forget(key)

    def _forget(self, key: tuple[str, str]) -> None:
        self._users[key] -= 1
        if self._users[key] == 0:
            del self._users[key]
            del self._locks[key]


class ChatSessions:
    """Maps (user, chat id) to an ADK session."""

    def __init__(self, service: BaseSessionService, app_name: str) -> None:
        self.service = service
        self.app_name = app_name

    async def open(self, user_id: str, chat_id: str) -> Session:
        session = await self.service.get_session(
            app_name=self.app_name, user_id=user_id, session_id=chat_id
        )
        if session is None:
            session = await self.service.create_session(
                app_name=self.app_name, user_id=user_id, session_id=chat_id
            )
            logger.info("chat created user=%s chat=%s", user_id, chat_id)
        return session
