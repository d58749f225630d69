"""The seed's page pattern for a browser tool that needs approval (issue 28, ADR 0011): with
`ADK_STREAM_BROWSER_APPROVAL_FLOW=add-output` and the page's `?flow=add-output`, the page runs
`get_location` as the user approves it and adds its output; the server does not hand the call
back, and the model answers once, on /stream and /live of the ai 7 page and of the ai 6 page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PLAYGROUND_DIST_V6, OpenPlayground
from tests.support.browser.playground import AI6, AI7, Mode
from tests.support.rig import PLAYGROUND_DIST, ServerPool

pytestmark = pytest.mark.browser

TOKYO_STATION = {"latitude": 35.6812, "longitude": 139.7671}
ADD_OUTPUT = {"ADK_STREAM_BROWSER_APPROVAL_FLOW": "add-output"}


@pytest.mark.parametrize("mode", [*AI7, *AI6], ids=str)
def test_location_run_as_the_user_approves(
    open_playground: OpenPlayground, servers: ServerPool, mode: Mode
) -> None:
    dist = PLAYGROUND_DIST if mode.page == "ai7" else PLAYGROUND_DIST_V6
    server = servers.get({**ADD_OUTPUT, "ADK_STREAM_PLAYGROUND_DIR": str(dist)})
    playground = open_playground(
        mode,
        base_url=server.base_url,
        flow="add-output",
        geolocation=TOKYO_STATION,
        permissions=["geolocation"],
    )
    playground.send("Where am I?")
    location = playground.tool("get_location")
    playground.expect_tool_state(location, "approval-requested")
    playground.expect_ready()

    location.get_by_test_id("approve-button").click()
    playground.expect_tool_state(location, "output-available")
    expect(location.get_by_test_id("tool-output")).to_contain_text('"latitude": 35.6812')
    expect(playground.assistant()).to_contain_text(
        "You are at latitude 35.6812, longitude 139.7671."
    )
    playground.expect_ready()
    # One answer, and the part kept the page's output: the server never handed it back.
    playground.expect_tool_state(location, "output-available")
    expect(playground.page.get_by_test_id("error-box")).to_have_count(0)
