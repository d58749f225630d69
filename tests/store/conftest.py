"""What the store's tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from google.adk.sessions import BaseSessionService

from adk_stream_protocol.store.sessions import create_session_service


@pytest_asyncio.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.out_of_process)]
)
async def service(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[BaseSessionService]:
    """A session service on each store the server supports (PostgreSQL: the tests' own)."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    made = create_session_service(url)
    yield made
    close = getattr(made, "close", None)
    if close is not None:
        await close()
