"""``/chats`` (transports/chat_routes.py, docs/adr/0043): the real app in this process on
SQLite, the identity taken from a test header. Until the turns record chats, the tests write the
index themselves (``bridge.chats.record_messages``) and read it back through the routes; a
delete is tried on a chat the real runner made through ``POST /stream``, and on a response still
running (real uvicorn, the tests' slow tool); one held by a /live socket in
test_chat_live_deletes.py. Two instances on PostgreSQL and Redis are in test_scale_out.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from google.genai import types

from adk_stream_protocol.store.chat_index import ChatIndex
from adk_stream_protocol.store.chat_tables import SqlChatIndex, SqliteDatabase
from adk_stream_protocol.turns.bridge import Bridge
from tests.support.apps import user_from_header
from tests.support.rig import (
    InProcessApp,
    chat_body,
    chunks_of,
    in_process_app,
    post_stream,
    serve_in_thread,
    streaming,
    user_message,
)

ALICE = {"x-test-user": "alice"}
BOB = {"x-test-user": "bob"}
APP_NAME = "adk_stream_protocol"
FIELDS = {"id", "title", "createdAt", "updatedAt", "active", "waiting"}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    workdir = tmp_path_factory.mktemp("chats")
    with in_process_app(
        workdir, identity=user_from_header, artifact_store=f"file://{workdir / 'artifacts'}"
    ) as target:
        yield target


def bridge_of(app: InProcessApp) -> Bridge:
    bridge: Bridge = app.app.state.bridge
    return bridge


def on_app_loop(app: InProcessApp, work: Any, *args: Any) -> Any:
    """Run a coroutine function of the app's on its event loop (its stores' connections are
    bound to it)."""
    assert app.http.portal is not None
    return app.http.portal.call(work, *args)


def record(app: InProcessApp, user: str, chat_id: str, messages: list[dict[str, Any]]) -> None:
    chats = bridge_of(app).chats
    assert on_app_loop(app, chats.record_messages, APP_NAME, user, chat_id, messages)


def new_chat(name: str) -> str:
    import uuid

    return f"{name}-{uuid.uuid4().hex[:8]}"


def asked(text: str) -> list[dict[str, Any]]:
    return [user_message(text, "u1")]


def waiting_for_approval(text: str) -> list[dict[str, Any]]:
    part = {
        "type": "tool-pay",
        "toolCallId": "c1",
        "state": "approval-requested",
        "input": {"amount": 150},
        "approval": {"id": "apr-1"},
    }
    return [*asked(text), {"id": "a1", "role": "assistant", "parts": [part]}]


# -- GET /chats ---------------------------------------------------------------------------------


def test_the_list_is_the_callers_chats_newest_first(app: InProcessApp) -> None:
    user = {"x-test-user": new_chat("lister")}
    older, newer = new_chat("older"), new_chat("newer")
    record(app, user["x-test-user"], older, asked("  Plan   a trip\nto Kyoto "))
    record(app, user["x-test-user"], newer, waiting_for_approval("Pay 150"))
    record(app, "someone-else", new_chat("theirs"), asked("not yours"))

    response = app.http.get("/chats", headers=user)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"chats", "nextCursor"} and body["nextCursor"] is None
    assert [c["id"] for c in body["chats"]] == [newer, older]
    first, second = body["chats"]
    assert set(first) == FIELDS
    assert (first["title"], first["waiting"], first["active"]) == ("Pay 150", "approval", False)
    assert (second["title"], second["waiting"]) == ("Plan a trip to Kyoto", None)
    for stamp in (first["createdAt"], first["updatedAt"]):
        assert stamp.endswith("Z")  # ISO 8601, UTC
        assert datetime.fromisoformat(stamp).utcoffset() is not None
    assert app.http.get("/chats", headers={"x-test-user": new_chat("nobody")}).json() == {
        "chats": [],
        "nextCursor": None,
    }


def test_the_list_pages_by_its_cursor(app: InProcessApp) -> None:
    user = new_chat("pager")
    made = [new_chat(f"page{n}") for n in range(7)]
    for chat_id in made:
        record(app, user, chat_id, asked(chat_id))
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = app.http.get("/chats", params=params, headers={"x-test-user": user}).json()
        assert len(page["chats"]) <= 3
        seen.extend(c["id"] for c in page["chats"])
        if (cursor := page["nextCursor"]) is None:
            break
    assert seen == made[::-1]
    default = app.http.get("/chats", headers={"x-test-user": user}).json()
    assert len(default["chats"]) == 7  # 50 unless asked


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("limit=0", "greater than or equal to 1"),
        ("limit=201", "less than or equal to 200"),
        ("limit=many", "valid integer"),
        ("cursor=", "at least 1 character"),
        ("cursor=" + "a" * 257, "at most 256 characters"),
        ("cursor=not-a-cursor", "not a cursor of this list"),
        ("cursor=MTIzLmJhZCBpZA", "not a cursor of this list"),  # "123.bad id"
    ],
)
def test_a_bad_page_request_is_refused_readably(app: InProcessApp, query: str, says: str) -> None:
    response = app.http.get(f"/chats?{query}", headers=ALICE)
    assert response.status_code == 422
    assert says in str(response.json()["detail"])


# -- GET /chats/{chatId} ------------------------------------------------------------------------


def test_one_chat_comes_with_its_messages_to_its_user_only(app: InProcessApp) -> None:
    chat_id = new_chat("one")
    messages = waiting_for_approval("Pay 150")
    record(app, "alice", chat_id, messages)
    response = app.http.get(f"/chats/{chat_id}", headers=ALICE)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == FIELDS | {"messages"}
    assert body["messages"] == messages
    assert (body["id"], body["title"], body["waiting"]) == (chat_id, "Pay 150", "approval")
    for headers, path in ((BOB, chat_id), (ALICE, "never-seen"), (ALICE, "bad%20id")):
        missing = app.http.get(f"/chats/{path}", headers=headers)
        assert missing.status_code == 404
        assert missing.json() == {"detail": "no such chat"}


# -- PATCH /chats/{chatId} ----------------------------------------------------------------------


def test_a_rename_is_answered_with_the_chat_and_kept_by_later_records(app: InProcessApp) -> None:
    chat_id = new_chat("rename")
    record(app, "alice", chat_id, asked("what the first message said"))
    response = app.http.patch(f"/chats/{chat_id}", json={"title": "  My \n trip  "}, headers=ALICE)
    assert response.status_code == 200
    assert set(response.json()) == FIELDS
    assert response.json()["title"] == "My trip"
    record(app, "alice", chat_id, asked("an edited first message"))
    assert app.http.get(f"/chats/{chat_id}", headers=ALICE).json()["title"] == "My trip"
    other = app.http.patch(f"/chats/{chat_id}", json={"title": "Mine now"}, headers=BOB)
    assert other.status_code == 404
    assert app.http.get(f"/chats/{chat_id}", headers=ALICE).json()["title"] == "My trip"
    assert app.http.patch("/chats/nope", json={"title": "x"}, headers=ALICE).status_code == 404


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"title": ""}, "the title is empty"),
        ({"title": " \n\t "}, "the title is empty"),
        ({"title": "x" * 201}, "longer than 200"),
        ({"title": "bell\u0007"}, "control characters"),
        ({"title": 5}, "valid string"),
        ({"title": "ok", "pinned": True}, "pinned: Extra inputs are not permitted"),
        ({}, "title: Field required"),
        (["title"], "send a JSON object"),
    ],
)
def test_a_bad_title_is_refused_readably(app: InProcessApp, body: Any, says: str) -> None:
    chat_id = new_chat("bad-title")
    record(app, "alice", chat_id, asked("kept"))
    response = app.http.patch(f"/chats/{chat_id}", json=body, headers=ALICE)
    assert response.status_code == 422
    assert says in response.json()["detail"]
    assert app.http.get(f"/chats/{chat_id}", headers=ALICE).json()["title"] == "kept"


def test_a_title_that_is_not_json_is_refused(app: InProcessApp) -> None:
    response = app.http.patch(
        "/chats/any", content=b"title=x", headers={**ALICE, "content-type": "text/plain"}
    )
    assert response.status_code == 415
    exactly = "x" * 200
    chat_id = new_chat("longest")
    record(app, "alice", chat_id, asked("q"))
    fits = app.http.patch(f"/chats/{chat_id}", json={"title": exactly}, headers=ALICE)
    assert fits.status_code == 200 and fits.json()["title"] == exactly


def test_other_methods_name_the_ones_the_chat_takes(app: InProcessApp) -> None:
    for method in ("POST", "PUT"):
        response = app.http.request(method, "/chats/any", headers=ALICE)
        assert response.status_code == 405
        assert response.headers["allow"] == "GET, PATCH, DELETE"


# -- DELETE /chats/{chatId} ---------------------------------------------------------------------


def test_deleting_a_real_chat_removes_its_session_artifacts_and_row(app: InProcessApp) -> None:
    bridge = bridge_of(app)
    chat_id = new_chat("chart")
    drawn = post_stream(app, chat_body(chat_id, user_message("draw a chart", "u1")), headers=ALICE)
    assert drawn.status == 200 and drawn.of_type("file")
    record(app, "alice", chat_id, asked("draw a chart"))
    artifacts = bridge.artifact_service
    scope: dict[str, Any] = {"app_name": APP_NAME, "user_id": "alice"}
    shared = types.Part.from_bytes(data=b"every chat's", mime_type="text/plain")

    async def save_shared() -> None:  # a user-scoped artifact, which no chat deletion touches
        await artifacts.save_artifact(
            **scope, session_id=chat_id, filename="user:notes.txt", artifact=shared
        )

    async def keys() -> list[str]:
        return await artifacts.list_artifact_keys(**scope, session_id=chat_id)

    async def session() -> Any:
        return await bridge.sessions.service.get_session(
            app_name=APP_NAME, user_id="alice", session_id=chat_id
        )

    on_app_loop(app, save_shared)
    assert on_app_loop(app, keys) == ["temperatures.svg", "user:notes.txt"]
    assert on_app_loop(app, session) is not None

    assert app.http.delete(f"/chats/{chat_id}", headers=BOB).status_code == 404  # not Bob's
    assert on_app_loop(app, session) is not None
    response = app.http.delete(f"/chats/{chat_id}", headers=ALICE)
    assert response.status_code == 204 and response.content == b""
    assert on_app_loop(app, session) is None
    assert on_app_loop(app, keys) == ["user:notes.txt"]
    assert app.http.get(f"/chats/{chat_id}", headers=ALICE).status_code == 404
    assert chat_id not in [c["id"] for c in app.http.get("/chats", headers=ALICE).json()["chats"]]
    assert app.http.delete(f"/chats/{chat_id}", headers=ALICE).status_code == 404
    # The id is free again: a new first message starts a new chat.
    again = post_stream(app, chat_body(chat_id, user_message("hello", "u1")), headers=ALICE)
    assert again.status == 200 and again.text()


def test_a_chat_with_a_session_only_can_be_deleted(app: InProcessApp) -> None:
    """A chat from before the index was kept (or not recorded yet) still exists to its user."""
    chat_id = new_chat("unlisted")
    assert (
        post_stream(app, chat_body(chat_id, user_message("hi", "u1")), headers=ALICE).status == 200
    )
    # The response recorded it: take its row away, as if the index had come after it.
    assert on_app_loop(app, bridge_of(app).chats.delete, APP_NAME, "alice", chat_id)
    assert app.http.get(f"/chats/{chat_id}", headers=ALICE).status_code == 404  # not listed
    assert app.http.delete(f"/chats/{chat_id}", headers=BOB).status_code == 404
    assert app.http.delete(f"/chats/{chat_id}", headers=ALICE).status_code == 204
    assert app.http.delete(f"/chats/{chat_id}", headers=ALICE).status_code == 404
    assert app.http.delete("/chats/bad%20id", headers=ALICE).status_code == 404


def test_an_active_response_is_shown_and_a_delete_stops_it_first(tmp_path: Path) -> None:
    """Real uvicorn, the tests' slow tool: the list says the chat is answering; the delete
    stops the answer, waits for it to end, then removes the chat."""
    chat_id = new_chat("running")
    with serve_in_thread(
        tmp_path, identity=user_from_header, agent="tests.support.agents.tools:slow_live_agent"
    ) as server:
        index = SqlChatIndex(SqliteDatabase(server.db_path))  # another connection to its file
        with streaming(server, chat_body(chat_id, user_message("slow 20", "u1")), ALICE) as reading:
            assert reading.first_event()["type"] == "start"
            asyncio.run(_record(index, "alice", chat_id, asked("slow 20")))
            listed = server.http.get("/chats", headers=ALICE).json()["chats"]
            assert [(c["id"], c["active"]) for c in listed] == [(chat_id, True)]
            assert server.http.get(f"/chats/{chat_id}", headers=ALICE).json()["active"] is True
            deleted = server.http.delete(f"/chats/{chat_id}", headers=ALICE)
            rest = reading.rest()
        assert deleted.status_code == 204
        assert rest[-1] == "[DONE]"
        assert not [c for c in chunks_of(rest) if c["type"] == "tool-output-available"]
        assert server.http.get("/chats", headers=ALICE).json()["chats"] == []
        assert server.http.get(f"/stream/{chat_id}/stream", headers=ALICE).status_code == 204


async def _record(
    index: ChatIndex, user: str, chat_id: str, messages: list[dict[str, Any]]
) -> None:
    try:
        assert await index.record_messages(APP_NAME, user, chat_id, messages)
    finally:
        await index.close()


def test_chats_of_an_in_memory_store_are_listed_too(tmp_path: Path) -> None:
    with in_process_app(tmp_path, session_store="memory://") as app:
        record(app, "local-user", "mem-1", asked("in memory"))
        listed = app.http.get("/chats").json()["chats"]
        assert [(c["id"], c["title"]) for c in listed] == [("mem-1", "in memory")]
        assert app.http.delete("/chats/mem-1").status_code == 204
        assert app.http.get("/chats").json()["chats"] == []


def test_every_route_has_its_schemas_in_the_openapi_document() -> None:
    from adk_stream_protocol.foundation.settings import Settings
    from adk_stream_protocol.server.app import create_app

    document = create_app(settings=Settings(api_docs=True, playground_dir=None)).openapi()
    paths, schemas = document["paths"], document["components"]["schemas"]
    ok = "application/json"
    assert paths["/chats"]["get"]["responses"]["200"]["content"][ok]["schema"] == {
        "$ref": "#/components/schemas/ChatList"
    }
    one = paths["/chats/{chat_id}"]
    assert one["get"]["responses"]["200"]["content"][ok]["schema"]["$ref"].endswith(
        "/ChatWithMessages"
    )
    assert one["patch"]["responses"]["200"]["content"][ok]["schema"]["$ref"].endswith(
        "/ChatListing"
    )
    rename = one["patch"]["requestBody"]["content"][ok]["schema"]
    assert rename["required"] == ["title"] and rename["additionalProperties"] is False
    assert "204" in one["delete"]["responses"] and "404" in one["delete"]["responses"]
    assert set(schemas["ChatListing"]["properties"]) == FIELDS
    assert set(schemas["ChatWithMessages"]["properties"]) == FIELDS | {"messages"}
    assert set(schemas["ChatList"]["properties"]) == {"chats", "nextCursor"}
    # Each refusal with its body, `{"detail": "why"}`; for FastAPI's own 422 of a query value,
    # a list of errors.
    refusals = {
        ("/chats", "get"): {"422", "503"},
        ("/chats/{chat_id}", "get"): {"404", "503"},
        ("/chats/{chat_id}", "patch"): {"404", "408", "413", "415", "422", "503"},
        ("/chats/{chat_id}", "delete"): {"404", "409", "503"},
    }
    for (path, method), statuses in refusals.items():
        for status in statuses:
            body = paths[path][method]["responses"][status]["content"][ok]["schema"]
            assert body["required"] == ["detail"], (path, method, status)
            detail = body["properties"]["detail"]
            shapes = [shape["type"] for shape in detail.get("anyOf", [detail])]
            listed = (path, status) == ("/chats", "422")
            assert shapes == (["string", "array"] if listed else ["string"]), shapes
