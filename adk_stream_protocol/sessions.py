"""Chats and ADK sessions (docs/adr/0004-chat-sessions.md).

A chat is identified by the authenticated user and the client's chat id; it maps to exactly
one ADK session whose id is the chat id. Runs on one chat are serialised by the chat lease
(``coordination.ChatLeases``): ADK's persistent stores reject concurrent writers, and two
answers interleaving in one history make no sense.
"""

from __future__ import annotations

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


class ChatSessions:
    """Maps (user, chat id) to an ADK session."""

    def __init__(self, service: BaseSessionService, app_name: str) -> None:
        self.service = service
        self.app_name = app_name

    async def prepare(self) -> None:
        """Get the store ready before the first request (see issue: PostgreSQL tables)."""
        return None

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
