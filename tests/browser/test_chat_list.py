"""The chat list beside the conversation, and chats the page reads back from the server
(`GET /chats`, `GET /chats/{chatId}`): the URL names the open chat, a reload restores it (with
a waiting approval that can still be answered, an answer still streaming), switching chats
while one streams keeps each its own, rename and delete."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Locator, expect

from tests.browser.conftest import EACH_PARTIAL, PLAYGROUND_DIST_V6, OpenPlayground, server_for
from tests.support.browser.playground import AI6, AI7, AI7_VOICE, Mode, Playground
from tests.support.browser.slow_network import slow_network
from tests.support.rig import LiveServer, ServerPool, chat_body, post_stream, user_message

pytestmark = pytest.mark.browser

HINT = (
    "I am the offline demo model; try asking about the weather, a payment, your location or music."
)
# Long enough that, a quarter of a second an event, its answer streams for many seconds.
LONG_MESSAGE = "Please answer slowly: " + " ".join(f"word{i}" for i in range(120))
LONG_ANSWER = f'You said: "{LONG_MESSAGE}". {HINT}'
TOKYO_STATION = {"latitude": 35.6812, "longitude": 139.7671}


def sent(amount: int, recipient: str, balance: int) -> re.Pattern[str]:
    return re.compile(
        rf"Sent {amount} USD to {recipient} \(transaction txn_[0-9a-f]{{12}}\)\."
        rf" Wallet balance: {balance}\."
    )


def stored(server: LiveServer, chat_id: str) -> dict[str, Any]:
    response = server.http.get(f"/chats/{chat_id}")
    assert response.status_code == 200, response.text
    chat: dict[str, Any] = response.json()
    return chat


def texts(message: dict[str, Any]) -> str:
    return "".join(part["text"] for part in message["parts"] if part["type"] == "text")


def answered(playground: Playground, text: str) -> None:
    playground.send(text)
    expect(playground.assistant().get_by_test_id("text-part")).to_have_text(
        f'You said: "{text}". {HINT}'
    )
    playground.expect_ready()


@pytest.mark.parametrize("mode", [*AI7, *AI6], ids=str)
def test_a_waiting_approval_survives_a_reload(
    playground: Playground, page_server: LiveServer
) -> None:
    """On every transport, our /live too: there the socket the reload closes hands the
    approval over to the chat's session (ADR 0047), and the new socket answers it."""
    playground.send("Send 50 dollars to Hanako")
    payment = playground.tool("process_payment")
    playground.expect_tool_state(payment, "approval-requested")
    playground.expect_ready()
    chat_id = playground.chat_id
    entry = playground.chat_item(chat_id)
    expect(entry).to_have_attribute("data-waiting", "approval")
    expect(entry.get_by_test_id("chat-waiting-marker")).to_have_text("needs approval")
    expect(entry.get_by_test_id("chat-title")).to_have_text("Send 50 dollars to Hanako")

    playground.reload()
    expect(playground.messages("user")).to_have_count(1)
    expect(playground.messages("user").first).to_contain_text("Send 50 dollars to Hanako")
    payment = playground.tool("process_payment")
    playground.expect_tool_state(payment, "approval-requested")
    expect(payment.get_by_test_id("tool-input")).to_have_text(
        '{ "amount": 50, "recipient": "Hanako", "currency": "USD" }'
    )
    playground.expect_ready()

    payment.get_by_test_id("approve-button").click()
    playground.expect_tool_state(payment, "output-available")
    expect(playground.assistant()).to_contain_text(sent(50, "Hanako", 950))
    expect(playground.messages("assistant")).to_have_count(1)  # the same message went on
    playground.expect_ready()
    expect(entry).to_have_attribute("data-waiting", "")

    # The tool ran once: one call, one payment (the wallet had 1000), in the server's record
    # as on the page.
    chat = stored(page_server, chat_id)
    assert chat["waiting"] is None
    (user, assistant) = chat["messages"]
    assert texts(user) == "Send 50 dollars to Hanako"
    calls = [part for part in assistant["parts"] if part["type"] == "tool-process_payment"]
    assert [call["state"] for call in calls] == ["output-available"], calls
    assert texts(assistant).count("Sent 50 USD") == 1, texts(assistant)
    assert sent(50, "Hanako", 950).search(texts(assistant))


@pytest.mark.parametrize("mode", [*AI7, *AI6], ids=str)
def test_an_approval_waits_while_another_chat_is_open(playground: Playground) -> None:
    playground.send("Send 50 dollars to Hanako")
    playground.expect_tool_state(playground.tool("process_payment"), "approval-requested")
    playground.expect_ready()
    waiting = playground.chat_id

    playground.by_id("new-chat-button").click()
    answered(playground, "Hello there")
    other = playground.chat_id

    playground.open_chat(waiting)
    payment = playground.tool("process_payment")
    playground.expect_tool_state(payment, "approval-requested")
    payment.get_by_test_id("approve-button").click()
    playground.expect_tool_state(payment, "output-available")
    expect(playground.assistant()).to_contain_text(sent(50, "Hanako", 950))
    playground.expect_ready()

    playground.open_chat(other)
    expect(playground.messages("assistant")).to_have_count(1)
    expect(playground.by_id("messages")).not_to_contain_text("Hanako")


@pytest.mark.parametrize("mode", AI7, ids=str)
def test_the_url_names_the_open_chat(open_playground: OpenPlayground, mode: Mode) -> None:
    playground = open_playground(mode)
    answered(playground, "Hello there")
    first = playground.chat_id
    playground.expect_chat(first)  # the URL says it, with the transport

    playground.by_id("new-chat-button").click()
    expect(playground.by_id("empty-hint")).to_be_visible()
    second = playground.chat_id
    assert second != first
    playground.expect_chat(second)
    answered(playground, "Second chat")

    # Back: the first chat, read from the server.
    playground.page.go_back()
    playground.expect_chat(first)
    expect(playground.messages("assistant")).to_have_count(1)
    expect(playground.assistant()).to_contain_text('You said: "Hello there".')
    expect(playground.chat_item(first)).to_have_attribute("aria-current", "page")

    # A page opened on its URL (a bookmark, another tab) shows it, and the chat goes on.
    again = open_playground(mode, chat=first)
    expect(again.messages("user")).to_have_count(1)
    expect(again.assistant().get_by_test_id("text-part")).to_have_text(
        f'You said: "Hello there". {HINT}'
    )
    answered(again, "And again")
    expect(again.messages("assistant")).to_have_count(2)
    again.reload()
    expect(again.messages("user")).to_have_count(2)
    expect(again.assistant()).to_contain_text('You said: "And again".')

    # Both chats are listed, the newest activity first.
    ids = again.page.locator('[data-testid="chat-item"]').evaluate_all(
        "items => items.map(item => item.dataset.chatId)"
    )
    assert ids.index(first) < ids.index(second), ids


@pytest.mark.parametrize("mode", [*AI7, *AI6], ids=str)
def test_switching_chats_while_one_streams(
    open_playground: OpenPlayground, servers: ServerPool, mode: Mode
) -> None:
    page_server = server_for(servers, mode, EACH_PARTIAL)
    with slow_network(page_server.base_url, pace=0.15) as network:
        playground = open_playground(mode, base_url=network.base_url)
        playground.send(LONG_MESSAGE)
        expect(playground.assistant().get_by_test_id("text-part")).to_contain_text("You said:")
        expect(playground.status).to_have_text("streaming")
        first = playground.chat_id

        # Another chat while the first one streams: empty, and answered on its own.
        playground.by_id("new-chat-button").click()
        expect(playground.by_id("empty-hint")).to_be_visible()
        second = playground.chat_id
        assert second != first
        expect(playground.chat_item(first)).to_have_attribute("data-active", "true")
        expect(playground.chat_item(first).get_by_test_id("chat-active-marker")).to_be_visible()
        answered(playground, "Hello there")
        expect(playground.messages("user")).to_have_count(1)
        expect(playground.messages("assistant")).to_have_count(1)
        expect(playground.by_id("messages")).not_to_contain_text("word1")

        # Back to the first: its answer, still coming in, then whole.
        playground.open_chat(first)
        expect(playground.messages("user")).to_have_count(1)
        expect(playground.messages("user").first).to_contain_text(LONG_MESSAGE)
        expect(playground.messages("assistant")).to_have_count(1)
        expect(playground.assistant().get_by_test_id("text-part")).to_contain_text("You said:")
        network.pace = 0
        expect(playground.assistant().get_by_test_id("text-part")).to_have_text(LONG_ANSWER)
        playground.expect_ready()
        expect(playground.by_id("messages")).not_to_contain_text("Hello there")
        expect(playground.chat_item(first)).to_have_attribute("data-active", "false")

        # The second, as the server keeps it.
        playground.open_chat(second)
        expect(playground.messages("user")).to_have_count(1)
        expect(playground.assistant().get_by_test_id("text-part")).to_have_text(
            f'You said: "Hello there". {HINT}'
        )
        expect(playground.by_id("messages")).not_to_contain_text("word1")

    # The server's records agree: each chat its own question and answer.
    first_chat, second_chat = stored(page_server, first), stored(page_server, second)
    assert [texts(m) for m in first_chat["messages"]] == [LONG_MESSAGE, LONG_ANSWER]
    assert [texts(m) for m in second_chat["messages"]] == [
        "Hello there",
        f'You said: "Hello there". {HINT}',
    ]


@pytest.fixture
def resumable_server(servers: ServerPool, mode: Mode) -> LiveServer:
    """A server whose answers go on when their client leaves, to be resumed: the mode's page."""
    return server_for(servers, mode, {"ADK_STREAM_RESUMABLE_STREAMS": "true", **EACH_PARTIAL})


@pytest.mark.parametrize("mode", [*AI7, AI7_VOICE], ids=str)
def test_a_reload_while_an_answer_streams_resumes_it(
    open_playground: OpenPlayground, resumable_server: LiveServer, mode: Mode
) -> None:
    with slow_network(resumable_server.base_url, pace=0.15) as network:
        playground = open_playground(mode, base_url=network.base_url)
        playground.send(LONG_MESSAGE)
        expect(playground.assistant().get_by_test_id("text-part")).to_contain_text("You said:")
        chat_id = playground.chat_id

        playground.reload()
        # The question from the server's record, the answer resumed onto it.
        expect(playground.messages("user")).to_have_count(1)
        expect(playground.messages("user").first).to_contain_text(LONG_MESSAGE)
        expect(playground.assistant().get_by_test_id("text-part")).to_contain_text("You said:")
        network.pace = 0
        expect(playground.assistant().get_by_test_id("text-part")).to_have_text(LONG_ANSWER)
        expect(playground.messages("assistant")).to_have_count(1)
        playground.expect_ready()

        answered(playground, "Still there?")
        expect(playground.messages("assistant")).to_have_count(2)

    chat = stored(resumable_server, chat_id)
    assert [texts(m) for m in chat["messages"]] == [
        LONG_MESSAGE,
        LONG_ANSWER,
        "Still there?",
        f'You said: "Still there?". {HINT}',
    ]


CONTINUATION_AGENT = "tests.support.agents.continuation:root_agent"


def approve_and_wait_until_sent(playground: Playground, tool: Locator) -> None:
    """Click Approve, and wait until the page has sent the approval: a reload before that
    would cancel a request that never left the page (not what these tests are about)."""
    if playground.mode.transport == "stream":
        with playground.page.expect_request(
            lambda r: r.method == "POST" and urlsplit(r.url).path.endswith("/stream")
        ):
            tool.get_by_test_id("approve-button").click()
        return
    tool.get_by_test_id("approve-button").click()
    deadline = time.monotonic() + 10
    while not any("approval-responded" in f for s in playground.sockets for f in s.sent):
        assert time.monotonic() < deadline, "the approval never left the page"
        playground.page.wait_for_timeout(20)


@pytest.mark.parametrize("mode", [*AI7, AI6[0]], ids=str)
def test_a_reload_while_the_answer_to_an_approval_streams_resumes_it(
    open_playground: OpenPlayground, servers: ServerPool, mode: Mode
) -> None:
    """The answer after an approval continues the approval's message; the page reloads while
    it is written (its agent's next tool takes two seconds). The page opens the chat without
    that message and resumes the answer, whose replay rebuilds it (docs/adr/0045): the page
    ends with the message once, as the server's record has it."""
    env = {"ADK_STREAM_RESUMABLE_STREAMS": "true", "ADK_STREAM_AGENT": CONTINUATION_AGENT}
    if mode.page == "ai6":
        env["ADK_STREAM_PLAYGROUND_DIR"] = str(PLAYGROUND_DIST_V6)
    server = servers.get(env)
    playground = open_playground(mode, base_url=server.base_url)
    playground.send("pay 50")
    payment = playground.tool("pay")
    playground.expect_tool_state(payment, "approval-requested")
    playground.expect_ready()
    chat_id = playground.chat_id
    approve_and_wait_until_sent(playground, payment)
    expect(playground.status).not_to_have_text("ready")  # the answer is being written

    playground.reload()
    expect(playground.assistant()).to_contain_text("All done.")
    playground.expect_ready()
    expect(playground.messages("assistant")).to_have_count(1)
    playground.expect_tool_state(playground.tool("pay"), "output-available")
    playground.expect_tool_state(playground.tool("slow_tool"), "output-available")
    assert playground.answer_text() == "I will pay.Paid, now checking.All done."

    (_, assistant) = stored(server, chat_id)["messages"]
    assert texts(assistant) == playground.answer_text()
    assert [p["type"] for p in assistant["parts"]].count("step-start") == 3


@pytest.mark.parametrize("mode", [*AI7, *AI6], ids=str)
def test_delete_a_chat(playground: Playground, page_server: LiveServer) -> None:
    answered(playground, "A chat to delete later")
    kept_open = playground.chat_id
    playground.by_id("new-chat-button").click()
    answered(playground, "A chat to delete now")
    other = playground.chat_id

    # Another chat than the open one: asked first, cancelled, then deleted.
    entry = playground.chat_item(kept_open)
    entry.get_by_test_id("chat-delete-button").click()
    expect(entry.get_by_test_id("chat-delete-confirmation")).to_contain_text("Delete this chat?")
    entry.get_by_test_id("chat-delete-cancel").click()
    expect(entry.get_by_test_id("chat-delete-confirmation")).to_be_hidden()
    entry.get_by_test_id("chat-delete-button").click()
    entry.get_by_test_id("chat-delete-confirm").click()
    expect(entry).to_have_count(0)
    assert page_server.http.get(f"/chats/{kept_open}").status_code == 404
    playground.expect_chat(other)
    expect(playground.messages("assistant")).to_have_count(1)

    # The open one (on our transport its socket is still open: the page closes it first).
    entry = playground.chat_item(other)
    entry.get_by_test_id("chat-delete-button").click()
    entry.get_by_test_id("chat-delete-confirm").click()
    expect(entry).to_have_count(0)
    expect(playground.by_id("empty-hint")).to_be_visible()
    assert playground.chat_id not in (kept_open, other)
    assert page_server.http.get(f"/chats/{other}").status_code == 404
    listed = page_server.http.get("/chats", params={"limit": 200}).json()["chats"]
    assert {kept_open, other}.isdisjoint(chat["id"] for chat in listed)

    # Reloaded, the page does not bring it back.
    playground.page.reload()
    expect(playground.chat_item(other)).to_have_count(0)


@pytest.mark.parametrize("mode", AI7, ids=str)
def test_rename_a_chat(playground: Playground, page_server: LiveServer) -> None:
    answered(playground, "Hello there")
    chat_id = playground.chat_id
    entry = playground.chat_item(chat_id)
    expect(entry.get_by_test_id("chat-title")).to_have_text("Hello there")

    entry.get_by_test_id("chat-rename-button").click()
    title = entry.get_by_test_id("chat-rename-input")
    expect(title).to_have_value("Hello there")
    title.fill("  Greetings,   from the test ")
    title.press("Enter")
    expect(entry.get_by_test_id("chat-title")).to_have_text("Greetings, from the test")
    assert stored(page_server, chat_id)["title"] == "Greetings, from the test"

    # Escape leaves it as it was.
    entry.get_by_test_id("chat-rename-button").click()
    entry.get_by_test_id("chat-rename-input").fill("Not this")
    entry.get_by_test_id("chat-rename-input").press("Escape")
    expect(entry.get_by_test_id("chat-title")).to_have_text("Greetings, from the test")

    # The title stays through the chat's next answer and a reload.
    answered(playground, "One more")
    playground.reload()
    expect(entry.get_by_test_id("chat-title")).to_have_text("Greetings, from the test")
    assert stored(page_server, chat_id)["title"] == "Greetings, from the test"


@pytest.mark.parametrize("mode", AI7[:1], ids=str)
def test_more_chats_than_a_page(playground: Playground, page_server: LiveServer) -> None:
    # More chats than the list's first page (30), made on the server as another tab would.
    made = [f"more-{uuid.uuid4().hex[:12]}" for _ in range(32)]
    for index, chat_id in enumerate(made):
        body = chat_body(chat_id, user_message(f"Chat number {index}", f"u-{index}"))
        assert post_stream(page_server, body).status == 200
    playground.page.reload()
    newest = playground.chat_item(made[-1])
    expect(newest.get_by_test_id("chat-title")).to_have_text("Chat number 31")
    expect(playground.chat_item(made[0])).to_have_count(0)  # on a later page

    more = playground.by_id("chats-more-button")
    while playground.chat_item(made[0]).count() == 0:
        expect(more).to_be_visible()
        shown = playground.page.get_by_test_id("chat-item").count()
        more.click()
        expect(playground.page.get_by_test_id("chat-item")).not_to_have_count(shown)
    playground.open_chat(made[0])
    expect(playground.messages("user").first).to_contain_text("Chat number 0")


# Not on our transport: there a browser call still waiting when its socket closes gets the
# result "the user left" (docs/live-protocol.md), so none waits for a page that comes back.
@pytest.mark.parametrize("mode", [*AI7, AI6[0]], ids=str)
def test_a_browser_call_waiting_runs_when_the_chat_opens(
    open_playground: OpenPlayground, page_server: LiveServer, mode: Mode
) -> None:
    # Another page asked and approved; the browser's part was still to do when it closed.
    chat_id = f"browser-{uuid.uuid4().hex[:12]}"
    asked = post_stream(page_server, chat_body(chat_id, user_message("Where am I?", "u-1")))
    assert "tool-approval-request" in asked.types()
    user, assistant = stored(page_server, chat_id)["messages"]
    for part in assistant["parts"]:
        if part.get("state") == "approval-requested":
            part.update(state="approval-responded", approval={**part["approval"], "approved": True})
    body = chat_body(chat_id, user, assistant, messageId=assistant["id"])
    handed = post_stream(page_server, body)
    assert [c["toolName"] for c in handed.of_type("tool-input-available")] == ["get_location"]
    assert stored(page_server, chat_id)["waiting"] == "browser"

    playground = open_playground(
        mode, chat=chat_id, geolocation=TOKYO_STATION, permissions=["geolocation"]
    )
    location = playground.tool("get_location")
    playground.expect_tool_state(location, "output-available")
    expect(location.get_by_test_id("tool-output")).to_contain_text('"latitude": 35.6812')
    expect(playground.assistant()).to_contain_text(
        "You are at latitude 35.6812, longitude 139.7671."
    )
    playground.expect_ready()
    assert stored(page_server, chat_id)["waiting"] is None
