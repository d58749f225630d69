"""Tools the browser runs (`get_location`, `change_bgm`), on /stream and /live of the ai 7 page
(and of the ai 6 page)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import OpenPlayground
from tests.support.browser.playground import AI6, AI7, Mode, Playground

pytestmark = pytest.mark.browser

TOKYO_STATION = {"latitude": 35.6812, "longitude": 139.7671}


@pytest.mark.parametrize("mode", [*AI7, *AI6], ids=str)
def test_location_granted(open_playground: OpenPlayground, mode: Mode) -> None:
    playground = open_playground(mode, geolocation=TOKYO_STATION, permissions=["geolocation"])
    playground.send("Where am I?")
    location = playground.tool("get_location")
    playground.expect_tool_state(location, "approval-requested")
    playground.expect_ready()

    location.get_by_test_id("approve-button").click()
    playground.expect_tool_state(location, "output-available")
    output = location.get_by_test_id("tool-output")
    expect(output).to_contain_text('"latitude": 35.6812')
    expect(output).to_contain_text('"longitude": 139.7671')
    expect(playground.assistant()).to_contain_text(
        "You are at latitude 35.6812, longitude 139.7671."
    )
    playground.expect_ready()


def test_location_refused_by_the_browser(open_playground: OpenPlayground, mode: Mode) -> None:
    # The user approves the call, but the browser has no permission to tell the position.
    playground = open_playground(mode, geolocation=TOKYO_STATION, permissions=[])
    playground.send("Where am I?")
    location = playground.tool("get_location")
    playground.expect_tool_state(location, "approval-requested")

    location.get_by_test_id("approve-button").click()
    playground.expect_tool_state(location, "output-error")
    expect(location.get_by_test_id("tool-error")).to_have_text("Error: User denied Geolocation")
    expect(playground.assistant()).to_contain_text(
        "The location request was not done (User denied Geolocation)."
    )
    expect(playground.assistant()).not_to_contain_text("latitude 35.6812")
    playground.expect_ready()


def test_location_denied_by_the_user(open_playground: OpenPlayground, mode: Mode) -> None:
    # The browser would tell; the user says no.
    playground = open_playground(mode, geolocation=TOKYO_STATION, permissions=["geolocation"])
    playground.send("Where am I?")
    location = playground.tool("get_location")
    playground.expect_tool_state(location, "approval-requested")

    location.get_by_test_id("deny-button").click()
    playground.expect_tool_state(location, "output-denied")
    expect(location.get_by_test_id("tool-denied")).to_contain_text("denied")
    expect(location.get_by_test_id("tool-output")).to_have_count(0)
    expect(playground.assistant()).to_contain_text(
        "The location request was not done because you rejected it."
    )
    playground.expect_ready()


@pytest.mark.parametrize("mode", [*AI7, *AI6], ids=str)
def test_change_bgm(playground: Playground) -> None:
    music = playground.by_id("bgm-status")
    expect(music).to_have_text("music: off")
    playground.send("Play music, track 2")

    bgm = playground.tool("change_bgm")
    playground.expect_tool_state(bgm, "output-available")
    expect(bgm.get_by_test_id("tool-input")).to_have_text('{ "track": 2 }')
    expect(bgm.get_by_test_id("tool-output")).to_have_text('{ "success": true, "track": 2 }')
    expect(music).to_contain_text("music: track 2 (392 Hz)")
    expect(music).to_have_attribute("data-track", "2")
    expect(playground.assistant()).to_contain_text("Now playing BGM track 2.")
    playground.expect_ready()

    playground.by_id("bgm-stop").click()
    expect(music).to_have_text("music: off")
