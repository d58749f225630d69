"""Chatting in the playground: text, images, Stop, errors (on /stream and /live of the ai 7 page,
some on our transport and on the ai 6 page too)."""

from __future__ import annotations

import re
import struct
import time
import zlib

import pytest
from playwright.sync_api import FilePayload, expect

from tests.browser.conftest import EACH_PARTIAL, OpenPlayground, server_for
from tests.support.browser.playground import AI6, AI7, AI7_VOICE, Mode, Playground
from tests.support.browser.slow_network import slow_network
from tests.support.rig import ServerPool

pytestmark = pytest.mark.browser

HINT = (
    "I am the offline demo model; try asking about the weather, a payment, your location or music."
)
REDACTED_ERROR = re.compile(r"^The agent could not complete the answer\. \(ref [0-9a-f]{12}\)$")


@pytest.mark.parametrize("mode", [*AI7, *AI6], ids=str)
def test_plain_chat(playground: Playground) -> None:
    playground.send("Hello there")
    expect(playground.messages("user")).to_have_count(1)
    expect(playground.messages("user").first).to_contain_text("Hello there")
    expect(playground.by_id("empty-hint")).to_be_hidden()
    expect(playground.assistant().get_by_test_id("text-part")).to_have_text(
        f'You said: "Hello there". {HINT}'
    )
    expect(playground.assistant().get_by_test_id("message-usage")).to_have_text(
        re.compile(r"^[1-9]\d* tokens$")
    )
    playground.expect_ready()
    expect(playground.by_id("stop-button")).to_be_hidden()

    # The same chat goes on, now with a server tool.
    playground.send("What's the weather in Tokyo?")
    expect(playground.messages("assistant")).to_have_count(2)
    weather = playground.tool("get_weather")
    playground.expect_tool_state(weather, "output-available")
    expect(weather.get_by_test_id("tool-input")).to_have_text('{ "location": "Tokyo" }')
    expect(playground.assistant()).to_contain_text("It is 18°C and cloudy in Tokyo.")
    playground.expect_ready()


def _png(width: int = 2, height: int = 2) -> bytes:
    """A small red RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_image_upload(playground: Playground) -> None:
    png = _png()
    image: FilePayload = {"name": "red.png", "mimeType": "image/png", "buffer": png}
    playground.by_id("attach-input").set_input_files(files=[image])
    expect(playground.by_id("attachment-list")).to_have_text("1 image attached: red.png")
    playground.send("What is in this picture?")

    user = playground.messages("user").first
    expect(user.get_by_test_id("file-part")).to_have_attribute("data-media-type", "image/png")
    expect(user).to_contain_text("What is in this picture?")
    expect(playground.by_id("attachment-list")).to_be_hidden()
    expect(playground.assistant()).to_contain_text(
        f"I received 1 image (image/png, {len(png)} bytes)."
    )
    playground.expect_ready()


# Long enough that its echo streams in many small pieces.
LONG_MESSAGE = "Please answer slowly: " + " ".join(f"word{i}" for i in range(40))
LONG_ANSWER = f'You said: "{LONG_MESSAGE}". {HINT}'


@pytest.mark.parametrize("mode", [*AI7, AI7_VOICE], ids=str)
def test_stop_in_the_middle_of_an_answer(
    open_playground: OpenPlayground, servers: ServerPool, mode: Mode
) -> None:
    # The page goes through a slow network: each event of an answer arrives 0.25 s after the
    # one before, so the whole answer takes several seconds to show.
    server = server_for(servers, mode, EACH_PARTIAL)
    with slow_network(server.base_url, pace=0.25) as network:
        playground = open_playground(mode, base_url=network.base_url)
        playground.send(LONG_MESSAGE)
        expect(playground.assistant().get_by_test_id("text-part")).to_contain_text("You said:")
        expect(playground.status).to_have_text("streaming")
        playground.by_id("stop-button").click()
        network.pace = 0  # the rest of the stopped answer may come at once: the page drops it

        playground.expect_ready()
        expect(playground.by_id("stop-button")).to_be_hidden()
        # On /stream the page also tells the server (DELETE), since a dropped connection
        # alone does not stop a resumable response; on /live the transport says it (ai 7's
        # an `abort` frame, ours an `interrupt` frame).
        if mode.transport == "stream":
            deadline = time.monotonic() + 10
            while not network.stops and time.monotonic() < deadline:
                playground.page.wait_for_timeout(50)
        assert len(network.stops) == (1 if mode.transport == "stream" else 0), network.stops
        cut = playground.answer_text()
        assert cut.startswith("You said:")
        assert LONG_ANSWER.startswith(cut), cut
        assert len(cut) < len(LONG_ANSWER), "the answer was not cut"

        playground.send("Still there?")
        expect(playground.messages("assistant")).to_have_count(2)
        expect(playground.assistant()).to_contain_text(f'You said: "Still there?". {HINT}')
        playground.expect_ready()
        assert playground.answer_text(0) == cut, "the stopped answer went on growing"


@pytest.mark.parametrize("mode", [*AI7, AI7_VOICE], ids=str)
def test_error_and_retry(playground: Playground) -> None:
    playground.send("fail")
    message = playground.by_id("error-message")
    expect(playground.by_id("error-box")).to_be_visible()
    # Redacted: a sentence and a reference, never the model's internal detail.
    expect(message).to_have_text(REDACTED_ERROR)
    expect(playground.status).to_have_text("error")
    first = message.inner_text()

    playground.by_id("retry-button").click()
    expect(message).not_to_have_text(first)
    # Retry asks again (on our transport the socket's live run starts again on the rewound
    # session, docs/adr/0046); the model fails again, under a new reference.
    expect(message).to_have_text(REDACTED_ERROR)
    expect(playground.status).to_have_text("error")
    expect(playground.messages("user")).to_have_count(1)

    # A new message clears the error and is answered.
    playground.send("Hello again")
    expect(playground.assistant()).to_contain_text('You said: "Hello again".')
    expect(playground.by_id("error-box")).to_be_hidden()
    playground.expect_ready()


@pytest.mark.parametrize("mode", [*AI7, AI7_VOICE], ids=str)
def test_error_in_a_long_chat_is_scrolled_into_view(playground: Playground) -> None:
    """An error at the end of a chat longer than the window shows whole on screen, not below
    the fold: it appears after the page scrolled to the last message."""
    # Long messages fill more than the window in a few turns (the demo model echoes each).
    for turn in range(1, 4):
        playground.send(f"Turn {turn}: " + "a long line of words " * 60)
        expect(playground.messages("assistant")).to_have_count(turn)
        playground.expect_ready()
    messages = playground.by_id("messages")
    assert messages.evaluate("box => box.scrollHeight > 2 * box.clientHeight"), "not long"

    playground.send("fail")
    expect(playground.status).to_have_text("error")
    # All of it: a sliver of its top border at the bottom edge does not count.
    expect(playground.by_id("error-box")).to_be_in_viewport(ratio=1)
