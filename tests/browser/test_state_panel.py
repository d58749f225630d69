"""The shared-state panel beside the conversation (ADR 0044, playground/README.md): the open
chat's `data-state` shown key by key, updated in place while a response streams, read back
with the chat (a reload, another chat), and a value the user edits sent with the next message
as the request's `state`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import Locator, expect

from tests.browser.conftest import OpenPlayground
from tests.support.browser.playground import AI6, AI7, Mode, Playground
from tests.support.browser.slow_network import slow_network
from tests.support.rig import LiveServer

pytestmark = pytest.mark.browser


def entry(playground: Playground, key: str) -> Locator:
    return playground.page.locator(f'[data-testid="state-entry"][data-key="{key}"]')


def expect_wallet(playground: Playground, balance: int) -> None:
    """The panel shows the wallet, readable (`balance 950`), and nothing else."""
    wallet = entry(playground, "ui:wallet")
    # The entry's `data-value` is the value as the page holds it (JSON.stringify's form).
    held = json.dumps({"balance": balance}, separators=(",", ":"))
    expect(wallet).to_have_attribute("data-value", held)
    field = wallet.locator('[data-testid="state-field"][data-field="balance"]')
    expect(field).to_have_text(f"balance{balance}")
    expect(wallet.get_by_test_id("state-key")).to_have_text("ui:wallet")
    expect(playground.by_id("state-entry")).to_have_count(1)
    expect(playground.by_id("state-empty")).to_have_count(0)


def pay(playground: Playground, text: str) -> Locator:
    """Ask for a payment and wait for its approval request; the payment's card."""
    playground.send(text)
    payment = playground.tool("process_payment").last
    playground.expect_tool_state(payment, "approval-requested")
    playground.expect_ready()
    return payment


def approve(playground: Playground, payment: Locator) -> None:
    payment.get_by_test_id("approve-button").click()
    playground.expect_tool_state(payment, "output-available")
    playground.expect_ready()


def stored_state(server: LiveServer, chat_id: str) -> dict[str, Any] | None:
    """The data of the last `data-state` part in the server's record of the chat."""
    response = server.http.get(f"/chats/{chat_id}")
    assert response.status_code == 200, response.text
    found = None
    for message in response.json()["messages"]:
        for part in message["parts"]:
            if part["type"] == "data-state":
                found = part["data"]
    return found


@pytest.mark.parametrize("mode", [*AI7, AI6[0]], ids=str)
def test_the_wallet_after_a_payment_updated_in_place_and_restored(
    open_playground: OpenPlayground, page_server: LiveServer, mode: Mode
) -> None:
    with slow_network(page_server.base_url, pace=0) as network:
        playground = open_playground(mode, base_url=network.base_url)
        panel = playground.by_id("state-panel")
        expect(panel.get_by_test_id("state-empty")).to_be_visible()
        payment = pay(playground, "Send 50 dollars to Hanako")
        expect(panel.get_by_test_id("state-empty")).to_be_visible()  # nothing paid yet

        # The balance shows as soon as its part arrives, while the answer still streams.
        network.pace = 0.4
        payment.get_by_test_id("approve-button").click()
        expect_wallet(playground, 950)
        expect(playground.status).to_have_text("streaming")
        network.pace = 0
        playground.expect_tool_state(payment, "output-available")
        playground.expect_ready()

        # The next payment's answer updates the same entry: one key, its new value.
        shown = entry(playground, "ui:wallet").element_handle()
        approve(playground, pay(playground, "Pay Bob 20"))
        expect_wallet(playground, 930)
        assert shown.evaluate("node => node.isConnected"), "the entry was replaced"
        chat_id = playground.chat_id
        assert stored_state(page_server, chat_id) == {"ui:wallet": {"balance": 930}}

        # A reload reads it back with the chat's messages.
        playground.reload()
        expect(playground.messages("assistant")).to_have_count(2)
        expect_wallet(playground, 930)


@pytest.mark.parametrize("mode", AI7, ids=str)
def test_each_chat_shows_its_own_state(playground: Playground) -> None:
    approve(playground, pay(playground, "Send 50 dollars to Hanako"))
    expect_wallet(playground, 950)
    first = playground.chat_id

    playground.by_id("new-chat-button").click()
    expect(playground.by_id("empty-hint")).to_be_visible()
    expect(playground.by_id("state-empty")).to_be_visible()
    expect(playground.by_id("state-entry")).to_have_count(0)
    approve(playground, pay(playground, "Pay Alice 200"))
    expect_wallet(playground, 800)
    second = playground.chat_id

    playground.open_chat(first)
    expect_wallet(playground, 950)
    playground.open_chat(second)
    expect_wallet(playground, 800)

    # A chat whose agent shares nothing shows the empty note.
    playground.by_id("new-chat-button").click()
    playground.send("Hello there")
    expect(playground.assistant().get_by_test_id("text-part")).to_contain_text("You said:")
    playground.expect_ready()
    expect(playground.by_id("state-empty")).to_be_visible()


@pytest.mark.parametrize("mode", [AI7[0], AI6[1]], ids=str)
def test_an_edited_value_goes_with_the_next_message(
    playground: Playground, page_server: LiveServer
) -> None:
    approve(playground, pay(playground, "Send 50 dollars to Hanako"))
    expect_wallet(playground, 950)
    wallet = entry(playground, "ui:wallet")

    wallet.get_by_test_id("state-edit-button").click()
    editor = wallet.get_by_test_id("state-edit-input")
    expect(editor).to_have_value('{\n  "balance": 950\n}')
    editor.fill("{balance: 5")
    wallet.get_by_test_id("state-edit-save").click()
    expect(wallet.get_by_test_id("state-edit-error")).to_contain_text("Not JSON")
    editor.fill('{"balance": 5}')
    wallet.get_by_test_id("state-edit-save").click()
    expect(wallet).to_have_attribute("data-pending", "true")
    expect(playground.by_id("state-pending")).to_contain_text("sent with your next message")

    # Sent with the next message: the server stores it and sends it back.
    playground.send("Hello there")
    expect(playground.assistant().get_by_test_id("text-part")).to_contain_text("You said:")
    playground.expect_ready()
    expect_wallet(playground, 5)
    expect(wallet).to_have_attribute("data-pending", "false")
    expect(playground.by_id("state-pending")).to_have_count(0)
    assert stored_state(page_server, playground.chat_id) == {"ui:wallet": {"balance": 5}}

    # The demo agent never trusts a `ui:` key: the next payment shows its own balance.
    approve(playground, pay(playground, "Pay Bob 20"))
    expect_wallet(playground, 930)
