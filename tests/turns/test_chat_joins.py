"""Joining a request to the chat's record (turns/chat_joins.py, docs/adr/0069): a table of what
a page sends against what the server holds, and what the completed chat is, or why it is
refused."""

from __future__ import annotations

from typing import Any

import pytest

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.limits import RequestLimits
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.ui_messages import ChatRequest, parse_chat_request
from adk_stream_protocol.store.chat_index import ChatOutline, message_digest, message_json
from adk_stream_protocol.turns.chat_joins import OutlineJoin, join_chat, join_outline

LIMITS = RequestLimits.from_settings(Settings())
MAX_ADDED = 1 << 20


def message(message_id: str, text: str = "") -> dict[str, Any]:
    """``u…`` a user message, ``a…`` an assistant's (ids say the role)."""
    role = "user" if message_id.startswith("u") else "assistant"
    return {
        "id": message_id,
        "role": role,
        "parts": [{"type": "text", "text": text or f"text of {message_id}"}],
    }


def chat(*ids: str) -> list[dict[str, Any]]:
    return [message(i) for i in ids]


def request(
    *ids: str,
    trigger: str = "submit-message",
    message_id: str | None = None,
    changed: str = "",
) -> ChatRequest:
    """A request sending the messages ``ids`` (the last one's text ``changed`` when given:
    the page's answers, an edit)."""
    messages = chat(*ids)
    if changed:
        messages[-1] = message(ids[-1], changed)
    body: dict[str, Any] = {"id": "c1", "messages": messages, "trigger": trigger}
    if message_id is not None:
        body["messageId"] = message_id
    return parse_chat_request(body, LIMITS)


def completed_ids(held: list[dict[str, Any]] | None, sent: ChatRequest) -> list[str]:
    earlier = join_chat(held, sent, max_added_bytes=MAX_ADDED)
    return [m["id"] for m in sent.completed(earlier).chat_messages]


RECORD = chat("u1", "a1", "u2", "a2")

# (what the page sends, the completed chat's ids)
JOINED = [
    # the whole chat, as stock useChat sends it
    ("whole: a new message", request("u1", "a1", "u2", "a2", "u3"), "u1 a1 u2 a2 u3"),
    ("whole: answers to the last", request("u1", "a1", "u2", "a2", changed="ok"), "u1 a1 u2 a2"),
    (
        "whole: regenerate the last answer",
        request("u1", "a1", "u2", trigger="regenerate-message"),
        "u1 a1 u2",
    ),
    (
        "whole: regenerate an earlier answer",
        request("u1", trigger="regenerate-message", message_id="a1"),
        "u1",
    ),
    ("whole: edit an earlier message", request("u1", message_id="u1", changed="new"), "u1"),
    ("whole: re-send the last", request("u1", "a1", "u2", "a2"), "u1 a1 u2 a2"),
    # the page holds a response the record missed (its end never written)
    ("whole: more than the record", request("u1", "a1", "u2", "a2", "u3", "a3", "u4"), None),
    # the last message(s) only: recipe, sendOnlyLastMessages
    ("last: a new message", request("u3"), "u1 a1 u2 a2 u3"),
    ("last two: answer, new message", request("a2", "u3"), "u1 a1 u2 a2 u3"),
    ("last: answers to the last", request("a2", changed="approved"), "u1 a1 u2 a2"),
    ("last: regenerate", request("u2", trigger="regenerate-message"), "u1 a1 u2"),
    ("last: edit", request("u2", message_id="u2", changed="edited"), "u1 a1 u2"),
]


@pytest.mark.parametrize(
    ("sent", "expected"), [(s, e) for _, s, e in JOINED], ids=[n for n, _, _ in JOINED]
)
def test_a_request_that_fits_the_record_is_completed_from_it(
    sent: ChatRequest, expected: str | None
) -> None:
    sent_ids = [m.id for m in sent.messages]
    assert completed_ids(RECORD, sent) == (expected.split() if expected else sent_ids)


# (what the page sends, words of the 409's reason)
REFUSED = [
    # a stale tab: another tab added u2 a2, this page holds u1 a1
    ("whole stale: a new message", request("u1", "a1", "u3"), "2 message(s) this page does not"),
    ("whole stale: answers", request("u1", "a1", changed="ok"), "2 message(s) after it"),
    ("last stale: answers", request("a1", changed="ok"), "2 message(s) after it"),
    ("last two stale", request("a1", "u3"), "message(s) this page does not show"),
    # ids that disagree before the last message
    ("whole: another chat", request("u1", "aX", "u3"), "differs from the server's at message 2"),
    # regenerate or edit a message the server does not hold
    (
        "regenerate unknown (whole)",
        request("u1", "a1", "uX", trigger="regenerate-message"),
        "'uX' to regenerate from is not message 3",
    ),
    ("regenerate unknown (last)", request("uX", trigger="regenerate-message"), "not in"),
    ("edit unknown (last)", request("uX", message_id="uX"), "'uX' to be edited is not in"),
    (
        "edit unknown (whole)",
        request("u1", "a1", "uX", message_id="uX"),
        "'uX' to edit is not message 3",
    ),
    (
        "regenerate past the record",
        request("u1", "a1", "u2", "a2", "u3", trigger="regenerate-message"),
        "'u3' to regenerate from is not in",
    ),
    # a partial send whose first message is unknown and not a new user message
    ("last: unknown assistant", request("aX", changed="ok"), "continues message 'aX'"),
    ("last: unknown continued", request("aX", message_id="aX"), "'aX' to be continued"),
]


@pytest.mark.parametrize(
    ("sent", "reason"), [(s, r) for _, s, r in REFUSED], ids=[n for n, _, _ in REFUSED]
)
def test_a_request_that_does_not_fit_the_record_is_refused_with_409(
    sent: ChatRequest, reason: str
) -> None:
    with pytest.raises(RequestError) as caught:
        join_chat(RECORD, sent, max_added_bytes=MAX_ADDED)
    assert caught.value.status == 409
    assert reason in caught.value.message
    assert "reload the chat (GET /chats/{chatId})" in caught.value.message


@pytest.mark.parametrize("held", [None, []])
def test_without_a_record_the_request_is_the_whole_chat(held: list[Any] | None) -> None:
    for sent in (request("u7"), request("a1", changed="ok"), request("u1", "a1", "u2")):
        assert completed_ids(held, sent) == [m.id for m in sent.messages]


def test_an_answer_stopped_before_the_page_saw_it_is_not_held_against_the_page() -> None:
    """The record holds the start of an answer the page stopped before its first chunk: an
    assistant message with no parts. The page's next message replaces it."""
    stopped = [*chat("u1", "a1", "u2"), {"id": "a2", "role": "assistant", "parts": []}]
    assert completed_ids(stopped, request("u1", "a1", "u2", "u3")) == ["u1", "a1", "u2", "u3"]
    assert completed_ids(stopped, request("u3")) == ["u1", "a1", "u2", "u3"]
    answered = [*chat("u1", "a1", "u2"), message("a2")]  # an answer with parts is held
    with pytest.raises(RequestError):
        join_chat(answered, request("u1", "a1", "u2", "u3"), max_added_bytes=MAX_ADDED)


def test_the_recipes_body_is_the_last_message() -> None:
    body = {"id": "c1", "message": message("u3"), "trigger": "submit-message"}
    sent = parse_chat_request(body, LIMITS)
    assert [m.id for m in sent.messages] == ["u3"]
    assert "message" not in sent.payload and sent.chat_messages == [message("u3")]
    assert completed_ids(RECORD, sent) == ["u1", "a1", "u2", "a2", "u3"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"id": "c1"}, "needs `messages` (or `message`)"),
        ({"id": "c1", "messages": [message("u1")], "message": message("u1")}, "not both"),
        ({"id": "c1", "messages": []}, "at least 1 item"),
        # Found by tests/test_fuzz.py: two messages of one id broke the record's join (500).
        ({"id": "c1", "messages": [message("u1"), message("u1")]}, "two messages have the id"),
    ],
)
def test_a_body_with_no_message_or_both_forms_is_refused_with_422(
    body: dict[str, Any], reason: str
) -> None:
    with pytest.raises(RequestError) as caught:
        parse_chat_request(body, LIMITS)
    assert caught.value.status == 422
    assert reason in caught.value.message


def test_a_message_id_that_names_no_last_message_is_refused_before_the_join() -> None:
    """422 as the request is read: it names no message of the record either."""
    for sent in (chat("u1", "u2"), chat("u1", "a1")):
        body = {"id": "c1", "messages": sent, "messageId": "u1"}
        with pytest.raises(RequestError) as caught:
            parse_chat_request(body, LIMITS)
        assert caught.value.status == 422
        assert "does not name the last message" in caught.value.message


def test_what_a_request_adds_is_bounded_not_what_it_sends() -> None:
    long = chat(*[f"{'u' if i % 2 == 0 else 'a'}{i}" for i in range(2_000)])
    whole = parse_chat_request({"id": "c1", "messages": [*long, message("u-new")]}, LIMITS)
    added = len('{"id":"u-new","role":"user","parts":[{"type":"text","text":"text of u-new"}]}')
    assert join_chat(long, whole, max_added_bytes=added) == []  # the whole chat: fits
    with pytest.raises(RequestError) as caught:
        join_chat(long, whole, max_added_bytes=added - 1)
    assert caught.value.status == 413
    assert f"adds more than {added - 1} bytes" in caught.value.message
    # A message the record holds, changed by the page (its answers), counts as added.
    answered = request("a2", changed="x" * 100)
    with pytest.raises(RequestError):
        join_chat(RECORD, answered, max_added_bytes=100)
    assert join_chat(RECORD, answered, max_added_bytes=200) == RECORD[:3]


# -- the join on the record's outline (ids, digests, last message) -----------------------------


def outline_of(messages: list[dict[str, Any]]) -> ChatOutline:
    return ChatOutline(
        [m["id"] for m in messages],
        [message_digest(message_json(m)) for m in messages],
        messages[-1] if messages else None,
    )


def leading_same(held: list[dict[str, Any]], completed: list[Any]) -> int:
    same = 0
    while same < min(len(held), len(completed)) and held[same] == completed[same]:
        same += 1
    return same


# A sent message that differs from one of the record's before its last: the outline cannot
# say what it adds, the stored messages do.
NEEDS_MESSAGES = {"whole: edit an earlier message", "last: edit"}


@pytest.mark.parametrize(
    ("name", "sent"), [(n, s) for n, s, _ in JOINED], ids=[n for n, _, _ in JOINED]
)
def test_the_join_on_the_outline_is_the_join_on_the_messages(name: str, sent: ChatRequest) -> None:
    joined = join_outline(outline_of(RECORD), sent, max_added_bytes=MAX_ADDED)
    if name in NEEDS_MESSAGES:
        assert joined is None
        return
    assert joined is not None
    earlier = join_chat(RECORD, sent, max_added_bytes=MAX_ADDED)
    assert RECORD[: joined.start] == earlier
    completed = sent.completed(earlier).chat_messages
    assert joined.since == leading_same(RECORD, completed)


@pytest.mark.parametrize(
    ("sent", "reason"), [(s, r) for _, s, r in REFUSED], ids=[n for n, _, _ in REFUSED]
)
def test_the_join_on_the_outline_refuses_what_the_join_refuses(
    sent: ChatRequest, reason: str
) -> None:
    with pytest.raises(RequestError) as caught:
        join_outline(outline_of(RECORD), sent, max_added_bytes=MAX_ADDED)
    assert caught.value.status == 409
    assert reason in caught.value.message


def test_the_join_on_the_outline_without_a_record_or_with_an_answer_the_page_never_saw() -> None:
    for held in (None, outline_of([])):
        joined = join_outline(held, request("u7"), max_added_bytes=MAX_ADDED)
        assert joined == OutlineJoin(0, 0)
    stopped = outline_of([*chat("u1", "a1", "u2"), {"id": "a2", "role": "assistant", "parts": []}])
    assert join_outline(stopped, request("u3"), max_added_bytes=MAX_ADDED) == OutlineJoin(3, 3)
    whole = request("u1", "a1", "u2", "u3")
    assert join_outline(stopped, whole, max_added_bytes=MAX_ADDED) == OutlineJoin(0, 3)


def test_the_join_on_the_outline_bounds_what_a_request_adds() -> None:
    long = chat(*[f"{'u' if i % 2 == 0 else 'a'}{i}" for i in range(2_000)])
    whole = parse_chat_request({"id": "c1", "messages": [*long, message("u-new")]}, LIMITS)
    added = len('{"id":"u-new","role":"user","parts":[{"type":"text","text":"text of u-new"}]}')
    outline = outline_of(long)
    assert join_outline(outline, whole, max_added_bytes=added) == OutlineJoin(0, 2_000)
    with pytest.raises(RequestError) as caught:
        join_outline(outline, whole, max_added_bytes=added - 1)
    assert caught.value.status == 413
    recipe = parse_chat_request({"id": "c1", "message": message("u-new")}, LIMITS)
    assert join_outline(outline, recipe, max_added_bytes=added) == OutlineJoin(2_000, 2_000)
    # The page's answers to the record's last message count as added (held against it whole).
    answered = request("a2", changed="x" * 100)
    with pytest.raises(RequestError):
        join_outline(outline_of(RECORD), answered, max_added_bytes=100)
    assert join_outline(outline_of(RECORD), answered, max_added_bytes=200) == OutlineJoin(3, 3)
    resent = request("a2")  # the record's last as it holds it: adds nothing
    assert join_outline(outline_of(RECORD), resent, max_added_bytes=0) == OutlineJoin(3, 4)
