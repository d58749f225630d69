"""Payments that wait for the user's Approve / Deny, on /stream and /live of the ai 7 page (and
an approval on the ai 6 page)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser.playground import AI6, AI7, Playground

pytestmark = pytest.mark.browser


def sent(amount: int, recipient: str, balance: int) -> re.Pattern[str]:
    return re.compile(
        rf"Sent {amount} USD to {recipient} \(transaction txn_[0-9a-f]{{12}}\)\."
        rf" Wallet balance: {balance}\."
    )


@pytest.mark.parametrize("mode", [*AI7, *AI6], ids=str)
def test_approve_a_payment(playground: Playground) -> None:
    playground.send("Send 50 dollars to Hanako")
    payment = playground.tool("process_payment")
    playground.expect_tool_state(payment, "approval-requested")
    expect(payment.get_by_test_id("tool-input")).to_have_text(
        '{ "amount": 50, "recipient": "Hanako", "currency": "USD" }'
    )
    expect(payment.get_by_test_id("approval")).to_contain_text("Allow this call?")
    playground.expect_ready()  # the answer waits for the user

    payment.get_by_test_id("approve-button").click()
    playground.expect_tool_state(payment, "output-available")
    expect(payment.get_by_test_id("approval")).to_be_hidden()
    expect(payment.get_by_test_id("tool-output")).to_contain_text('"success": true')
    expect(playground.assistant()).to_contain_text(sent(50, "Hanako", 950))
    expect(playground.messages("assistant")).to_have_count(1)  # the same message went on
    playground.expect_ready()


def test_deny_a_payment(playground: Playground) -> None:
    playground.send("Send 50 dollars to Hanako")
    payment = playground.tool("process_payment")
    playground.expect_tool_state(payment, "approval-requested")

    payment.get_by_test_id("deny-button").click()
    playground.expect_tool_state(payment, "output-denied")
    expect(payment.get_by_test_id("tool-denied")).to_contain_text("denied")
    expect(payment.get_by_test_id("tool-output")).to_have_count(0)
    expect(playground.assistant()).to_contain_text(
        "The payment of 50 USD to Hanako was not done because you rejected it."
    )
    expect(playground.assistant()).not_to_contain_text("Sent 50")
    playground.expect_ready()


def test_two_payments_in_one_message(playground: Playground) -> None:
    playground.send("Pay Alice 10 and Bob 20")
    expect(playground.tool("process_payment")).to_have_count(2)
    alice = playground.tool("process_payment", has_text="Alice")
    bob = playground.tool("process_payment", has_text="Bob")
    playground.expect_tool_state(alice, "approval-requested")
    playground.expect_tool_state(bob, "approval-requested")

    alice.get_by_test_id("approve-button").click()
    # Nothing goes back until both are answered.
    playground.expect_tool_state(alice, "approval-responded")
    playground.expect_tool_state(bob, "approval-requested")
    playground.expect_ready()

    bob.get_by_test_id("deny-button").click()
    playground.expect_tool_state(alice, "output-available")
    playground.expect_tool_state(bob, "output-denied")
    answer = playground.assistant()
    expect(answer).to_contain_text(sent(10, "Alice", 990))
    expect(answer).to_contain_text(
        "The payment of 20 USD to Bob was not done because you rejected it."
    )
    playground.expect_ready()


def test_one_payment_then_the_next(playground: Playground) -> None:
    playground.send("Pay Alice 10, then pay Bob 20")
    payments = playground.tool("process_payment")
    expect(payments).to_have_count(1)  # Bob's comes only after Alice's is done
    alice = playground.tool("process_payment", has_text="Alice")
    playground.expect_tool_state(alice, "approval-requested")
    alice.get_by_test_id("approve-button").click()

    expect(payments).to_have_count(2)
    bob = playground.tool("process_payment", has_text="Bob")
    playground.expect_tool_state(bob, "approval-requested")
    playground.expect_ready()
    bob.get_by_test_id("approve-button").click()

    playground.expect_tool_state(alice, "output-available")
    playground.expect_tool_state(bob, "output-available")
    answer = playground.assistant()
    expect(answer).to_contain_text("Now paying Bob 20 USD.")
    expect(answer).to_contain_text(sent(10, "Alice", 990))
    expect(answer).to_contain_text(sent(20, "Bob", 970))
    expect(playground.messages("assistant")).to_have_count(1)
    playground.expect_ready()
