from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import LiveServer, run_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The real app under uvicorn: real ADK runner, offline demo model, SQLite store."""
    with run_server(tmp_path_factory.mktemp("server")) as live:
        yield live


@pytest.fixture(scope="session")
def debug_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The same app with error details shown to the client (ADK_STREAM_ERROR_DETAIL)."""
    with run_server(tmp_path_factory.mktemp("debug"), {"ADK_STREAM_ERROR_DETAIL": "true"}) as live:
        yield live
