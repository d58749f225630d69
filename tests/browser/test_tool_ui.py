"""Tools that reach the page (docs/adr/0025), in the playground: a tool's progress (a data
part replaced in place), its transient notice (``onData``), the chart it saved (a file part
shown inline), and an answer's sources (links)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browser.playground import AI6, AI7, Playground

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("mode", [*AI7, AI6[0]], ids=str)
def test_progress_notice_chart_and_sources(playground: Playground) -> None:
    playground.send("Draw a chart")
    chart = playground.tool("draw_chart")
    playground.expect_tool_state(chart, "output-available")
    answer = playground.assistant()
    progress = answer.get_by_test_id("progress-part")
    expect(progress).to_have_count(1)  # four updates, one part
    expect(progress).to_have_text("done")
    expect(progress).to_have_attribute("data-step", "3")
    expect(playground.by_id("notice")).to_have_text("Saved temperatures.svg")
    image = answer.get_by_test_id("file-part")
    expect(image).to_have_attribute("data-media-type", "image/svg+xml")
    expect(image).to_have_js_property("complete", True)
    assert image.evaluate("img => img.naturalWidth") > 0, "the chart is drawn"
    expect(answer).to_contain_text("Here is your chart of 4 cities")
    playground.expect_ready()

    playground.send("Tell me about Tokyo, with sources")
    expect(playground.messages("assistant")).to_have_count(2)
    sources = playground.assistant().get_by_test_id("source-part")
    expect(sources).to_have_count(3)
    expect(sources.nth(0)).to_have_text("Tokyo")
    expect(sources.nth(0)).to_have_attribute("href", "https://example.org/tokyo")
    expect(sources.nth(1)).to_have_text("https://example.org/census")
    expect(sources.nth(2)).to_have_text("Demo weather table")
    expect(playground.assistant()).to_contain_text("Tokyo is the capital of Japan.")
    playground.expect_ready()
