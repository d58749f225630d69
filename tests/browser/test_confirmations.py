"""A tool that asks from its body, with a hint and a payload (ADR 0041): the page shows the hint,
lets the user edit the payload as JSON, and the tool gets the edited payload
(tests/support/agents/leave.py, on the ai 7 page over /stream and ai 7's socket, and the ai 6
page)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PLAYGROUND_DIST_V6, OpenPlayground
from tests.support.agents.leave import LEDGER_ENV, ledger_lines
from tests.support.browser.playground import AI6, AI7, Mode
from tests.support.rig import ServerPool

pytestmark = pytest.mark.browser

LEAVE_AGENT = {"ADK_STREAM_AGENT": "tests.support.agents.leave:root_agent"}


@pytest.mark.parametrize("mode", [*AI7, AI6[0]], ids=str)
def test_the_user_reads_the_hint_and_edits_the_payload(
    open_playground: OpenPlayground,
    servers: ServerPool,
    mode: Mode,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = str(tmp_path / "ledger")
    monkeypatch.setenv(LEDGER_ENV, ledger)
    env = (
        LEAVE_AGENT
        if mode.page == "ai7"
        else {
            **LEAVE_AGENT,
            "ADK_STREAM_PLAYGROUND_DIR": str(PLAYGROUND_DIST_V6),
        }
    )
    playground = open_playground(mode, base_url=servers.get(env).base_url)
    playground.send("5 days off please")
    leave = playground.tool("request_time_off")
    playground.expect_tool_state(leave, "approval-requested")
    expect(leave.get_by_test_id("approval-hint")).to_have_text("Approve 5 days off?")
    payload = leave.get_by_test_id("approval-payload")
    expect(payload).to_have_value('{\n  "approved_days": 5\n}')

    payload.fill("[3]")  # not an object: the page says so and sends nothing
    leave.get_by_test_id("approve-button").click()
    expect(leave.get_by_test_id("approval-payload-error")).to_contain_text("a JSON object")
    playground.expect_tool_state(leave, "approval-requested")

    payload.fill('{"approved_days": 3}')
    leave.get_by_test_id("approve-button").click()
    playground.expect_tool_state(leave, "output-available")
    expect(leave.get_by_test_id("tool-output")).to_contain_text('"approved_days": 3')
    expect(playground.assistant()).to_contain_text("Your time off request is settled.")
    playground.expect_ready()
    assert [line.split()[1:] for line in ledger_lines(ledger)] == [["booked", "3"]]
