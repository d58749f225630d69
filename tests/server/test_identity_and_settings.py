"""The identity dependency, CORS and session-store settings (the app in-process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.store.sessions import create_session_service
from tests.support.apps import user_from_header
from tests.support.rig import InProcessApp, chat_body, in_process_app, post_stream, user_message


@pytest.fixture(scope="module")
def identity_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    with in_process_app(
        tmp_path_factory.mktemp("identity"),
        identity=user_from_header,
        cors_origins="http://localhost:3000, http://app.test",  # as the environment gives it
    ) as target:
        yield target


def test_chats_belong_to_the_user_the_identity_dependency_names(
    identity_app: InProcessApp,
) -> None:
    body = chat_body("shared-chat-id", user_message("hello", "u1"))
    alice = post_stream(identity_app, body, headers={"x-test-user": "alice"})
    assert alice.status == 200
    # The same chat id and message id from another user is another chat, not a repeat.
    bob = post_stream(identity_app, body, headers={"x-test-user": "bob"})
    assert bob.status == 200
    again = identity_app.http.post("/stream", json=body, headers={"x-test-user": "alice"})
    assert again.status_code == 409


def test_a_request_the_identity_dependency_refuses_gets_4xx(identity_app: InProcessApp) -> None:
    body = chat_body("c1", user_message("hello", "u1"))
    response = identity_app.http.post("/stream", json=body)
    assert response.status_code == 422  # the required header is missing


def test_cors_allows_the_configured_origins(identity_app: InProcessApp) -> None:
    preflight = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
    }
    allowed = identity_app.http.options(
        "/stream", headers={"origin": "http://app.test", **preflight}
    )
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://app.test"
    refused = identity_app.http.options(
        "/stream", headers={"origin": "http://evil.test", **preflight}
    )
    assert "access-control-allow-origin" not in refused.headers


def test_cors_lets_a_page_of_another_origin_stop_a_response(identity_app: InProcessApp) -> None:
    preflight = identity_app.http.options(
        "/stream/c1/stream",
        headers={
            "origin": "http://app.test",
            "access-control-request-method": "DELETE",
            "access-control-request-headers": "x-test-user",
        },
    )
    assert preflight.status_code == 200
    assert "DELETE" in preflight.headers["access-control-allow-methods"]
    stopped = identity_app.http.delete(
        "/stream/c1/stream", headers={"origin": "http://app.test", "x-test-user": "alice"}
    )
    assert stopped.status_code == 204
    assert stopped.headers["access-control-allow-origin"] == "http://app.test"


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
