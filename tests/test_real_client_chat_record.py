"""Long chats with the real clients (docs/adr/0069): a page that sends only the chat's last
message (the AI SDK's persistence recipe, `{ id, message }`, as docs/frontend/chats.md shows it; or
`messages: [last]`: `prepareSendMessagesRequest`, our transport's `sendOnlyLastMessages`), and
stock useChat sending a long chat whole.

The server completes a chat sent in part from its record: every flow of a chat works as with
the whole chat sent (approvals, browser tools, regenerate, edit, stop, a reload), and the
record stays whole: `GET /chats/{chatId}` gives the chat the page holds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.real_client import V7, checked, client_job, run_real_client, text_of
from tests.support.rig import LiveServer, ServerPool, chat_body, streaming
from tests.support.waiting import wait_until

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

# Answers after an approval that take a while (tests/test_real_client_resume.py's).
CONTINUATION_AGENT = "tests.support.agents.continuation:root_agent"

# A chat's life: a question, an approval, a browser tool, a regeneration, an edit, a stopped
# answer, a reload (the page reads the chat back) and a question after it.
LIFE: list[dict[str, Any]] = [
    {"action": "send", "text": "hello"},
    {"action": "send", "text": "Send 50 dollars to Hanako"},
    {"action": "approve", "approved": True},
    {"action": "send", "text": "Play music, track 2"},
    {"action": "regenerate"},
    {"action": "send", "text": "hello, edited", "messageIndex": -2},
    {"action": "stop", "afterChunks": 2},
    {"action": "send", "text": "hello once more"},
    {"action": "reload"},
    {"action": "send", "text": "hello after the reload"},
]
USER_TEXTS = [
    "hello",
    "Send 50 dollars to Hanako",
    "hello, edited",
    "hello once more",
    "hello after the reload",
]

# (client, transport, mode): POST /stream with the recipe's body or `messages: [last]`; ai 7's
# chat socket; our /live transport.
RUNS = [
    ("6.0.25", "http", "recipe"),
    ("6.0.25", "http", "messages"),
    ("6", "http", "recipe"),
    (V7, "http", "recipe"),
    (V7, "http", "messages"),
    (V7, "ws-stock", "messages"),
    ("6", "ws", "messages"),
]


def _job(server: LiveServer, client: str, transport: str, **options: Any) -> dict[str, Any]:
    live = transport != "http"
    ws = {"ws-stock": "stock", "ws": "ours"}.get(transport)
    return client_job(server, client, [], live=live, ws=ws, **options)


@pytest.mark.parametrize(("client", "transport", "mode"), RUNS)
def test_a_page_sending_only_the_last_message_keeps_the_whole_chat(
    server: LiveServer, client: str, transport: str, mode: str
) -> None:
    job = _job(
        server,
        client,
        transport,
        lastMessageOnly=mode,
        sendAutomaticallyWhen="both",
        toolOutputs={"change_bgm": {"output": {"success": True, "track": 2}}},
        maxRequests=16,
    )
    job["steps"] = LIFE
    report = checked(job, run_real_client(job, timeout=120))
    assert report["status"] == "ready", report["error"]
    # Each request carried one message, in the form the mode sends.
    for request in report["requests"]:
        body = request["request"]["body"]
        sent = [body["message"]] if mode == "recipe" else body["messages"]
        assert len(sent) == 1, body
    page = report["messages"]
    users = [text_of(m) for m in page if m["role"] == "user"]
    assert users == USER_TEXTS
    assert [m["role"] for m in page] == ["user", "assistant"] * len(USER_TEXTS)
    # The record is the whole chat the page holds (the stopped answer as the server sent it).
    record = server.http.get(f"/chats/{job['chatId']}").json()
    assert [(m["id"], m["role"]) for m in record["messages"]] == [
        (m["id"], m["role"]) for m in page
    ]
    stopped = 7  # the answer to "hello once more"'s predecessor: cut by the stop
    for at, (held, shown) in enumerate(zip(record["messages"], page, strict=True)):
        if at != stopped:
            assert held == shown, at
    assert record["title"] == "hello"


def _long_chat(count: int) -> list[dict[str, Any]]:
    """``count`` messages, a user's and an assistant's in turn, as a chat of weeks holds them:
    a question, then an answer with a tool call and its output."""
    messages: list[dict[str, Any]] = []
    for n in range(count):
        if n % 2 == 0:
            parts: list[dict[str, Any]] = [{"type": "text", "text": f"question {n} " + "q" * 180}]
            messages.append({"id": f"u-{n}", "role": "user", "parts": parts})
            continue
        call = {
            "type": "tool-get_weather",
            "toolCallId": f"call-{n}",
            "state": "output-available",
            "input": {"location": "Tokyo"},
            "output": {"report": "r" * 1000},
        }
        answer = {"type": "text", "text": "answer " + "word " * 150, "state": "done"}
        parts = [{"type": "step-start"}, call, {"type": "step-start"}, answer]
        messages.append({"id": f"a-{n}", "role": "assistant", "parts": parts})
    return messages


@pytest.mark.parametrize("client", ["6.0.25", V7])
def test_stock_use_chat_sends_a_chat_of_two_thousand_messages_whole(
    server: LiveServer, client: str
) -> None:
    """No limit counts messages: the whole chat the server already holds adds only the new
    message to the record. The record is written through the server: one request that brings
    1,999 messages (a chat moved from elsewhere), within ADK_STREAM_MAX_ADDED_BYTES."""
    job = _job(server, client, "http")
    job["steps"] = [{"action": "send", "text": "and one more"}]
    chat_id = job["chatId"]
    earlier = _long_chat(1_999)
    brought = server.http.post("/stream", json=chat_body(chat_id, *earlier), timeout=60)
    assert brought.status_code == 200, brought.text
    record = server.http.get(f"/chats/{chat_id}").json()
    assert len(record["messages"]) == 2_000

    job["initialMessages"] = record["messages"]
    report = checked(job, run_real_client(job, timeout=120))
    assert report["status"] == "ready", report["error"]
    (request,) = report["requests"]
    assert len(request["request"]["body"]["messages"]) == 2_001
    assert request["status"] == 200
    held = server.http.get(f"/chats/{chat_id}").json()["messages"]
    assert held == report["messages"] and len(held) == 2_002


@pytest.mark.parametrize("client", ["6.0.25", V7])
def test_a_page_that_reloads_while_a_continuation_sent_alone_runs_resumes_it(
    servers: ServerPool, client: str
) -> None:
    """The answer to an approval, sent as the recipe sends it (the assistant message alone),
    is still being written when the page reloads: the page reads the chat back and resumes the
    answer onto it, as with the whole chat sent (tests/test_real_client_resume.py)."""
    server = servers.get(
        {"ADK_STREAM_AGENT": CONTINUATION_AGENT, "ADK_STREAM_RESUMABLE_STREAMS": "true"}
    )
    job = _job(server, client, "http", lastMessageOnly="recipe")
    job["steps"] = [{"action": "send", "text": "pay 50"}]
    asked = checked(job, run_real_client(job))
    assert asked["status"] == "ready", asked["error"]
    *_, waiting = json.loads(json.dumps(asked["messages"]))
    for part in waiting["parts"]:
        if part.get("state") == "approval-requested":
            approval = {**part["approval"], "approved": True}
            part.update(state="approval-responded", approval=approval)
    body = {
        "id": job["chatId"],
        "message": waiting,
        "trigger": "submit-message",
        "messageId": waiting["id"],
    }
    with streaming(server, body) as reading:
        start = reading.first_event()  # then the page reloads
    assert start == {"type": "start", "messageId": waiting["id"]}

    steps: list[dict[str, Any]] = [{"action": "reload", "resume": True}, {"action": "resume"}]
    resumed = _job(server, client, "http", lastMessageOnly="recipe", chatId=job["chatId"])
    resumed["steps"] = steps
    report = checked(resumed, run_real_client(resumed))
    assert report["status"] == "ready", report["error"]
    page = report["messages"]
    assert [m["role"] for m in page] == ["user", "assistant"]
    assert text_of(page[-1]).endswith("All done.")
    assert [p["type"] for p in page[-1]["parts"]].count("step-start") == 3
    record = wait_until(
        lambda: (r := server.http.get(f"/chats/{job['chatId']}").json())["active"] is False and r,
        "the answer's end in the record",
        every=0.05,
    )
    assert [m["id"] for m in record["messages"]] == [m["id"] for m in page]
    assert text_of(record["messages"][-1]) == text_of(page[-1])


@pytest.mark.parametrize(("client", "transport"), [("6.0.25", "http"), (V7, "ws-stock")])
def test_a_stale_tab_is_refused_and_goes_on_once_it_reads_the_chat_again(
    server: LiveServer, client: str, transport: str
) -> None:
    """Two tabs on one chat, sending it whole: the one that missed the other's turn is told to
    read the chat again, and nothing of the chat changes; read again, it goes on."""
    first = _job(server, client, transport)
    first["steps"] = [{"action": "send", "text": "hello"}]
    loaded = checked(first, run_real_client(first))["messages"]
    chat_id = first["chatId"]
    other = _job(server, client, transport, chatId=chat_id, initialMessages=loaded)
    other["steps"] = [{"action": "send", "text": "hello from the other tab"}]
    checked(other, run_real_client(other))
    held = server.http.get(f"/chats/{chat_id}").json()["messages"]

    stale = _job(server, client, transport, chatId=chat_id, initialMessages=loaded)
    stale["steps"] = [
        {"action": "send", "text": "hello from the stale tab"},
        {"action": "reload"},
        {"action": "send", "text": "hello once it read the chat"},
    ]
    report = checked(stale, run_real_client(stale), refusals=1)
    refusal, _answered = report["requests"]  # the refusal, then the answer after the reload
    said = refusal["rawBody"] if transport == "http" else json.dumps(refusal["frames"])
    assert "reload the chat (GET /chats/{chatId})" in said, refusal
    assert report["reloads"][0]["status"] == 200
    page = report["messages"]
    assert [text_of(m) for m in page if m["role"] == "user"] == [
        "hello",
        "hello from the other tab",
        "hello once it read the chat",
    ]
    record = server.http.get(f"/chats/{chat_id}").json()["messages"]
    assert record[:4] == held and record == page
