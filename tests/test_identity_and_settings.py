"""The identity dependency, CORS and session-store settings, on the real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from adk_stream_protocol.sessions import create_session_service
from adk_stream_protocol.settings import Settings
from tests.support import LiveServer, chat_body, post_stream, run_server, user_message


@pytest.fixture(scope="module")
def identity_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {"ADK_STREAM_CORS_ORIGINS": "http://localhost:3000, http://app.test"}
    with run_server(
        tmp_path_factory.mktemp("identity"), env, app="tests.apps:header_identity_app"
    ) as live:
        yield live


def test_chats_belong_to_the_user_the_identity_dependency_names(
    identity_server: LiveServer,
) -> None:
    body = chat_body("shared-chat-id", user_message("hello", "u1"))
    alice = post_stream(identity_server.base_url, body, headers={"x-test-user": "alice"})
    assert alice.status == 200
    # The same chat id and message id from another user is another chat, not a repeat.
    bob = post_stream(identity_server.base_url, body, headers={"x-test-user": "bob"})
    assert bob.status == 200
    again = httpx.post(
        f"{identity_server.base_url}/stream",
        json=body,
        headers={"x-test-user": "alice"},
        timeout=30,
    )
    assert again.status_code == 409


def test_a_request_the_identity_dependency_refuses_gets_4xx(identity_server: LiveServer) -> None:
    body = chat_body("c1", user_message("hello", "u1"))
    response = httpx.post(f"{identity_server.base_url}/stream", json=body, timeout=30)
    assert response.status_code == 422  # the required header is missing


def test_cors_allows_the_configured_origins(identity_server: LiveServer) -> None:
    preflight = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
    }
    allowed = httpx.options(
        f"{identity_server.base_url}/stream",
        headers={"origin": "http://app.test", **preflight},
        timeout=10,
    )
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://app.test"
    refused = httpx.options(
        f"{identity_server.base_url}/stream",
        headers={"origin": "http://evil.test", **preflight},
        timeout=10,
    )
    assert "access-control-allow-origin" not in refused.headers


def test_session_store_urls(tmp_path: Path) -> None:
    assert isinstance(create_session_service("memory://"), InMemorySessionService)
    sqlite = create_session_service(f"sqlite:///{tmp_path}/nested/dir/chats.db")
    assert isinstance(sqlite, SqliteSessionService)


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADK_STREAM_CORS_ORIGINS", "http://a.test,http://b.test")
    monkeypatch.setenv("ADK_STREAM_MODEL", "auto")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    settings = Settings()
    assert settings.cors_origins == ["http://a.test", "http://b.test"]
    assert settings.resolved_model() == "offline-demo"
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key-not-real")
    assert Settings().resolved_model() == "gemini-2.5-flash"
