"""A session service that wraps another: every call passes through to ``inner``.

Our layers over ADK's store (``ResultOutbox``, ``SessionCache``) each change a few calls;
they subclass this and override only those, so the pass-through is written once.
"""

from __future__ import annotations

from typing import Any

from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse


class WrappedSessions(BaseSessionService):
    """``inner``'s calls, unchanged."""

    def __init__(self, inner: BaseSessionService) -> None:
        self.inner = inner

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        return await self.inner.create_session(
            app_name=app_name, user_id=user_id, state=state, session_id=session_id
        )

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        return await self.inner.get_session(
            app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        return await self.inner.list_sessions(app_name=app_name, user_id=user_id)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await self.inner.delete_session(app_name=app_name, user_id=user_id, session_id=session_id)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self.inner.get_user_state(app_name=app_name, user_id=user_id)

    async def flush(self) -> None:
        await self.inner.flush()

    async def append_event(self, session: Session, event: Event) -> Event:
        return await self.inner.append_event(session, event)
