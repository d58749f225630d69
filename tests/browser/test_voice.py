"""The microphone on /live (our transport, the ai 7 page's voice mode): Chromium's fake capture
device (a beep) is the user's voice."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import OpenPlayground
from tests.support.browser.playground import AI7_VOICE
from tests.support.rig import LiveServer

pytestmark = pytest.mark.browser


def test_talk_and_hear_the_answer(
    open_playground: OpenPlayground, browser_audio_server: LiveServer
) -> None:
    playground = open_playground(AI7_VOICE, base_url=browser_audio_server.base_url)
    mic = playground.by_id("mic-button")
    mic_status = playground.by_id("mic-status")
    pcm = playground.by_id("pcm-status")
    expect(mic).to_have_text("Talk")
    expect(mic).to_have_attribute("data-recording", "false")
    expect(mic_status).to_have_text("idle")
    expect(pcm).to_have_attribute("data-chunks", "0")

    mic.click()
    expect(mic).to_have_text("Stop talking")
    expect(mic).to_have_attribute("data-recording", "true")
    expect(mic_status).to_have_text(re.compile(r"^recording \(\d+ frames sent\)$"))
    # The user speaks for about two seconds (the offline model "hears" a weather question
    # in anything of a second or more).
    playground.page.wait_for_timeout(2_000)
    mic.click()

    expect(mic).to_have_text("Talk")
    expect(mic_status).to_have_text(re.compile(r"^sent \d+ frames$"))
    frames = int(mic_status.get_attribute("data-frames") or 0)
    assert frames >= 15, f"{frames} frames of 100 ms for two seconds of speech"

    expect(playground.messages("user").get_by_test_id("voice-part")).to_have_text("(voice message)")
    transcript = playground.by_id("transcript")
    expect(transcript).to_have_text("You said: What's the weather in Tokyo?")
    expect(transcript).to_have_attribute("data-final", "true")
    weather = playground.tool("get_weather")
    playground.expect_tool_state(weather, "output-available")
    expect(playground.assistant()).to_contain_text("It is 18°C and cloudy in Tokyo.")
    playground.expect_ready()

    # The spoken answer: PCM chunks at 24 kHz, played through a running AudioContext.
    expect(pcm).to_have_text(re.compile(r"^voice audio: [1-9]\d* chunks, \d+\.\d s at 24000 Hz$"))
    expect(pcm).not_to_have_attribute("data-chunks", "0")
    expect(pcm).to_have_attribute("data-audio", "running")
