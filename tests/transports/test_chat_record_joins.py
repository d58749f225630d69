"""A request joined to the chat's record on the real app (docs/adr/0069): the recipe's
``{ id, message }`` and ``messages: [last]`` continue a chat the server holds, the record
stays whole, and a page whose chat is not the server's gets a 409 (an ``error`` on ai 7's
socket) saying how to recover, with nothing of the chat changed. The flows with the real
clients are in tests/test_real_client_chat_record.py; the rule's table in
tests/turns/test_chat_joins.py."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.ai7_socket import V7Socket
from tests.support.rig import (
    InProcessApp,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    stored_events,
    user_message,
)

RECOVER = "reload the chat (GET /chats/{chatId}) and send again"


def new_chat() -> str:
    return f"join-{uuid.uuid4().hex[:12]}"


def two_turns(app: InProcessApp) -> tuple[str, list[dict[str, Any]]]:
    """A chat of two answered questions, the second sent as the recipe sends it."""
    chat = new_chat()
    first = user_message("hello", "u-1")
    answer = assistant_message(post_stream(app, chat_body(chat, first)))
    second = user_message("hello again", "u-2")
    recipe = {"id": chat, "message": second, "trigger": "submit-message"}
    answer_2 = assistant_message(post_stream(app, recipe))
    return chat, [first, answer, second, answer_2]


def record_of(app: InProcessApp, chat: str) -> list[dict[str, Any]]:
    response = app.http.get(f"/chats/{chat}")
    assert response.status_code == 200, response.text
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


def test_the_recipes_body_continues_the_chat_and_the_record_stays_whole(
    app: InProcessApp,
) -> None:
    chat, page = two_turns(app)
    held = record_of(app, chat)
    assert [(m["id"], m["role"]) for m in held] == [(m["id"], m["role"]) for m in page]
    assert [m["parts"][-1]["text"] for m in held if m["role"] == "user"] == [
        "hello",
        "hello again",
    ]
    # messages: [last] does the same.
    third = user_message("and again", "u-3")
    post_stream(app, chat_body(chat, third))
    assert [m["id"] for m in record_of(app, chat)][:5] == [
        "u-1",
        page[1]["id"],
        "u-2",
        page[3]["id"],
        "u-3",
    ]
    assert app.http.get("/chats").json()["chats"][0]["title"] == "hello"


@pytest.mark.parametrize(
    ("sent", "says"),
    [
        # another tab added u-2 and its answer: this page has only the first turn
        (lambda page: [page[0], page[1], user_message("stale", "u-9")], "this page does not show"),
        (lambda page: [page[1], user_message("stale", "u-9")], "this page does not show"),
        # the page's chat is another one
        (lambda page: [page[0], {**page[1], "id": "a-x"}, user_message("x", "u-9")], "differs"),
        # a message the server does not hold, continued
        (lambda page: [{**page[3], "id": "a-x"}], "not in this chat's record"),
    ],
    ids=["whole stale", "last two stale", "another chat", "unknown continued"],
)
def test_a_page_whose_chat_is_not_the_servers_gets_409_and_nothing_changes(
    app: InProcessApp, sent: Any, says: str
) -> None:
    chat, page = two_turns(app)
    held, events = record_of(app, chat), len(stored_events(app, chat))
    response = app.http.post("/stream", json=chat_body(chat, *sent(page)))
    assert response.status_code == 409, response.text
    assert says in response.json()["detail"] and RECOVER in response.json()["detail"]
    assert record_of(app, chat) == held
    assert len(stored_events(app, chat)) == events
    # The page reloads the chat and sends again: answered.
    again = post_stream(app, chat_body(chat, *held, user_message("after a reload", "u-9")))
    assert again.status == 200
    assert [m["id"] for m in record_of(app, chat)][:5] == [m["id"] for m in held] + ["u-9"]


def test_a_regeneration_or_an_edit_of_a_message_the_server_does_not_hold_is_409(
    app: InProcessApp,
) -> None:
    chat, page = two_turns(app)
    regenerate = chat_body(chat, user_message("x", "u-x"), trigger="regenerate-message")
    edit = chat_body(chat, user_message("x", "u-x"), messageId="u-x")
    for body in (regenerate, edit):
        response = app.http.post("/stream", json=body)
        assert response.status_code == 409, response.text
        assert "'u-x'" in response.json()["detail"]
    # The message the server holds: regenerated, in the recipe's form.
    recipe = {"id": chat, "message": page[2], "trigger": "regenerate-message"}
    assert post_stream(app, recipe).status == 200
    held = record_of(app, chat)
    assert [m["id"] for m in held][:3] == ["u-1", page[1]["id"], "u-2"] and len(held) == 4
    assert held[3]["id"] != page[3]["id"]


def test_a_stale_page_on_ai7s_socket_gets_an_error_saying_how_to_recover(
    app: InProcessApp,
) -> None:
    chat, page = two_turns(app)
    held = record_of(app, chat)
    socket = V7Socket(app)
    try:
        stale = socket.reply(socket.send(chat, page[0], page[1], user_message("stale", "u-9")))
        assert stale.last == "error" and stale.chunks == []
        assert RECOVER in stale.frames[-1]["errorText"]
        assert record_of(app, chat) == held
        # messages: [last], as prepareSendMessagesRequest sends it: answered.
        fine = socket.reply(socket.send(chat, user_message("from the socket", "u-9")))
        assert fine.last == "end"
    finally:
        socket.close()
    assert [m["id"] for m in record_of(app, chat)][4] == "u-9"


def test_the_removed_message_limit_is_ignored_with_a_warning_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ADK_STREAM_MAX_MESSAGES_PER_REQUEST", "3")
    with caplog.at_level(logging.WARNING), in_process_app(tmp_path) as started:
        chat = new_chat()
        many = [user_message(f"m{n}", f"u-{n}") for n in range(5)]
        assert post_stream(started, chat_body(chat, *many)).status == 200
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "ADK_STREAM_MAX_MESSAGES_PER_REQUEST is no longer read" in w
        and "ADK_STREAM_MAX_ADDED_BYTES" in w
        for w in warnings
    ), warnings
