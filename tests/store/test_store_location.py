"""Where chats live by default: a SQLite file per app, `.adk-stream/<app name>.db`, in the
working directory (docs/adr/0024-store-per-app.md). Two apps in one folder keep their chats
apart; an explicit store is used as it is; a folder with the old shared file keeps it."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from adk_stream_protocol.foundation.settings import DEFAULT_SESSION_STORE, Settings
from adk_stream_protocol.server.agents import app_name_of
from adk_stream_protocol.testing import AgentClient, serve_agent, settings_for_tests

STORE = Path(".adk-stream")


@pytest.fixture(autouse=True)
def in_a_fresh_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default store is relative to the working directory: each test runs in its own."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def default_settings(**fields: str) -> Settings:
    """The test settings with the default store (not `memory://`)."""
    return settings_for_tests(**{"session_store": DEFAULT_SESSION_STORE, **fields})


def agent(name: str) -> LlmAgent:
    return LlmAgent(name=name, model="offline-demo")


def stored_chats(path: Path) -> set[tuple[str, str]]:
    """(app name, chat id) of every session in a SQLite store."""
    import sqlite3

    with sqlite3.connect(path) as db:
        return set(db.execute("SELECT app_name, id FROM sessions"))


def chat_twice(client: AgentClient) -> None:
    for text in ("hello", "weather in Tokyo"):
        answer = client.send(text, chat="c1")
        assert answer.status == 200 and answer.errors == [], (answer.status, answer.body)


def test_two_apps_in_one_folder_keep_their_chats_apart() -> None:
    """The same chat id in two apps: before, both wrote one `sessions.db` under one app name,
    and the second app's first message got a 409 (that message id was already answered)."""
    with serve_agent(agent("shop"), default_settings()) as shop:
        chat_twice(shop)
    with serve_agent(agent("support"), default_settings()) as support:
        chat_twice(support)
    assert sorted(p.name for p in STORE.iterdir()) == ["shop.db", "support.db"]
    assert stored_chats(STORE / "shop.db") == {("adk_stream_protocol", "c1")}
    assert stored_chats(STORE / "support.db") == {("adk_stream_protocol", "c1")}


def test_the_store_is_named_after_an_app_or_the_app_name_setting() -> None:
    with serve_agent(App(name="billing", root_agent=agent("a")), default_settings()) as client:
        chat_twice(client)
    with serve_agent(agent("b"), default_settings(app_name="crm")) as client:
        chat_twice(client)
    assert stored_chats(STORE / "billing.db") == {("billing", "c1")}
    assert stored_chats(STORE / "crm.db") == {("crm", "c1")}


def test_the_demo_agent_has_the_default_app_name() -> None:
    from starlette.testclient import TestClient

    from adk_stream_protocol import create_app

    app = create_app(settings=default_settings(model="offline-demo"))
    with TestClient(app, base_url="http://localhost") as http:
        chat_twice(AgentClient(http))
    assert stored_chats(STORE / "adk_stream_protocol.db") == {("adk_stream_protocol", "c1")}


def test_an_explicit_store_is_used_as_it_is(tmp_path: Path) -> None:
    with serve_agent(agent("shop"), default_settings(session_store="sqlite:///chats.db")) as client:
        chat_twice(client)
    assert (tmp_path / "chats.db").is_file() and not STORE.exists()
    templated = default_settings(session_store="sqlite:///data/{app}-chats.db")
    with serve_agent(agent("shop"), templated) as client:
        chat_twice(client)
    assert stored_chats(tmp_path / "data" / "shop-chats.db") == {("adk_stream_protocol", "c1")}


def test_a_folder_with_the_old_shared_store_keeps_it(caplog: pytest.LogCaptureFixture) -> None:
    """Chats of an earlier version stay reachable: an app without a file of its own keeps
    reading `.adk-stream/sessions.db`, and the log says how to move."""
    legacy = STORE / "sessions.db"
    STORE.mkdir()
    service = SqliteSessionService(str(legacy))
    asyncio.run(
        service.create_session(app_name="adk_stream_protocol", user_id="u", session_id="old")
    )
    with serve_agent(agent("shop"), default_settings()) as client:
        chat_twice(client)
    assert stored_chats(legacy) == {("adk_stream_protocol", "old"), ("adk_stream_protocol", "c1")}
    assert not (STORE / "shop.db").exists()
    (warning,) = [r for r in caplog.records if "used to share" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "ADK_STREAM_SESSION_STORE=sqlite:///.adk-stream/sessions.db" in warning.getMessage()
    assert str(STORE / "shop.db") in warning.getMessage()


def test_an_app_that_has_its_own_file_ignores_the_old_one() -> None:
    STORE.mkdir()
    asyncio.run(
        SqliteSessionService(str(STORE / "sessions.db")).create_session(
            app_name="adk_stream_protocol", user_id="u", session_id="old"
        )
    )
    (STORE / "sessions.db").rename(STORE / "shop.db")  # as docs/operating/settings.md says
    asyncio.run(
        SqliteSessionService(str(STORE / "sessions.db")).create_session(
            app_name="adk_stream_protocol", user_id="u", session_id="other"
        )
    )
    with serve_agent(agent("shop"), default_settings()) as client:
        chat_twice(client)
    assert stored_chats(STORE / "shop.db") == {
        ("adk_stream_protocol", "old"),
        ("adk_stream_protocol", "c1"),
    }
    assert stored_chats(STORE / "sessions.db") == {("adk_stream_protocol", "other")}


def test_an_agent_name_that_is_no_app_name_falls_back() -> None:
    """Agent names are Python identifiers, app names (and so file names) are narrower."""
    settings = settings_for_tests()
    assert app_name_of(settings, agent("helper")) == "helper"
    assert app_name_of(settings, agent("_private")) == "adk_stream_protocol"
    assert app_name_of(settings, agent("アシスタント")) == "adk_stream_protocol"
    assert app_name_of(settings_for_tests(app_name="crm"), agent("helper")) == "crm"
    assert app_name_of(settings, App(name="billing", root_agent=agent("a"))) == "billing"


def test_two_apps_sharing_a_redis_keep_their_keys_apart(redis_url: str, redis_prefix: str) -> None:
    """Keys carry the name the app's chats are stored under, an App's own name included, so
    two apps on one Redis (and one key prefix) never share a chat's lease or chunk log."""
    import redis

    shared = {"redis_url": redis_url, "redis_key_prefix": redis_prefix}
    for name in ("travel_app", "food_app"):
        app = App(name=name, root_agent=agent("helper"))
        with serve_agent(app, settings_for_tests(**shared)) as chat:
            # Open the chat's lease, and keep its answer's chunk log, while we look.
            answer = chat.send("Hello", chat="same-id")
            assert answer.status == 200 and answer.errors == []
    client = redis.Redis.from_url(redis_url)
    try:
        keys = [key.decode() for key in client.scan_iter(match=f"{redis_prefix}:*", count=1000)]
    finally:
        client.close()
    assert keys, "the turns left their chunk logs"
    assert {key.removeprefix(f"{redis_prefix}:").split(":")[0] for key in keys} == {
        "travel_app",
        "food_app",
    }
