"""Benchmark 12: what the page pays to render an answer, with delta coalescing off and on.

The stock playground (``playground/dist``, ai 7, ``POST /stream``) in Debian's Chromium, driven
by Playwright, asks the benchmark model for the long answer (benchmark 2's words and partials),
unpaced and paced (partials 10 ms apart, as a real model streams them). The same server runs
twice: ``ADK_STREAM_DELTA_COALESCING_MS=0`` (the comparison) and the window measured
(``WINDOW_MS``). For each answer:

- main-thread time: CDP ``Performance.getMetrics`` ``TaskDuration``, from the click on Send to
  the whole answer on screen;
- DOM commits: ``MutationObserver`` callbacks on the page in that time (one per task that
  changed the DOM: React commits once per chunk it reads, or per batch of them);
- time to the whole answer rendered: from the click to the observer seeing the answer's whole
  text in the message;
- the server's CPU for the answer (``/proc``), beside them.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from playwright.sync_api import Browser, Page, sync_playwright

from bench.agent import long_answer, long_prompt
from bench.core import Figure, Size
from bench.servers import Server, serve

BENCHMARK = "12 browser"
# The window measured (the default); `BENCH_COALESCING_MS` tries another.
WINDOW_MS = int(os.environ.get("BENCH_COALESCING_MS", "100"))
PACE_SECONDS = 0.01
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
TIMEOUT_MS = 120_000

# Counts the page's DOM-changing tasks and notes when the answer's whole text is on screen.
_OBSERVE = """
(length) => {
  const state = { commits: 0, done: null, start: null };
  window.__bench = state;
  const answerLength = () => {
    const messages = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    const last = messages[messages.length - 1];
    if (!last) return 0;
    let total = 0;
    for (const part of last.querySelectorAll('[data-testid="text-part"]')) {
      total += part.textContent.length;
    }
    return total;
  };
  new MutationObserver(() => {
    if (state.start === null || state.done !== null) return;
    state.commits += 1;
    if (answerLength() >= length) state.done = performance.now();
  }).observe(document.body, { childList: true, subtree: true, characterData: true });
}
"""
_SEND = """
() => {
  window.__bench.start = performance.now();
  document.querySelector('[data-testid="send-button"]').click();
}
"""


@dataclass(frozen=True)
class Rendering:
    main_thread_ms: float
    commits: int
    whole_answer_ms: float
    server_cpu_ms: float


def render(browser: Browser, server: Server, size: Size, pace: float) -> Rendering:
    """One answer in a fresh page: what it cost the page and the server."""
    answer = long_answer(size.answer_words)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{server.base_url}/")
        page.get_by_test_id("chat-status").filter(has_text="ready").wait_for()
        page.get_by_test_id("message-input").fill(
            long_prompt(size.answer_words, size.words_per_partial, pace)
        )
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.evaluate(_OBSERVE, len(answer))
        before = _task_seconds(cdp.send("Performance.getMetrics"))
        cpu = server.cpu_seconds()
        page.evaluate(_SEND)
        page.wait_for_function("() => window.__bench.done !== null", polling=100)
        after = _task_seconds(cdp.send("Performance.getMetrics"))
        state = page.evaluate("() => window.__bench")
        _wait_ready(page)
        return Rendering(
            main_thread_ms=(after - before) * 1000,
            commits=int(state["commits"]),
            whole_answer_ms=float(state["done"]) - float(state["start"]),
            server_cpu_ms=(server.cpu_seconds() - cpu) * 1000,
        )
    finally:
        context.close()


def _task_seconds(metrics: dict[str, Any]) -> float:
    return float(next(m["value"] for m in metrics["metrics"] if m["name"] == "TaskDuration"))


def _wait_ready(page: Page) -> None:
    page.get_by_test_id("chat-status").filter(has_text="ready").wait_for()


@contextmanager
def servers() -> Iterator[tuple[Server, Server]]:
    """The server with the window, and the same server with coalescing off."""
    with (
        serve("ours", {"ADK_STREAM_DELTA_COALESCING_MS": str(WINDOW_MS)}) as on,
        serve("ours", {"ADK_STREAM_DELTA_COALESCING_MS": "0"}) as off,
    ):
        yield on, off


def run(size: Size) -> list[Figure]:
    comparison = "coalescing off"
    words = f"{size.answer_words:,} words, {size.words_per_partial} per partial"
    figures: dict[tuple[str, str], Figure] = {}
    for case, note in (("unpaced", "partials at once"), ("paced", "partials 10 ms apart")):
        window = f"{WINDOW_MS} ms window; {words}, {note}"
        # Paced: the goal of issue 27 (3x less main-thread time); unpaced: no worse.
        goal = 1 / 3 if case == "paced" else 1.0
        figures[case, "main"] = Figure(
            BENCHMARK, f"page main-thread time, {case}", "ms", "lower", comparison, goal, window
        )
        figures[case, "commits"] = Figure(
            BENCHMARK, f"DOM commits, {case}", "", "lower", comparison
        )
        figures[case, "whole"] = Figure(
            BENCHMARK,
            f"time to the whole answer on screen, {case}",
            "ms",
            "lower",
            comparison,
            margin=WINDOW_MS,
        )
        figures[case, "cpu"] = Figure(
            BENCHMARK, f"server CPU per answer, {case}", "ms", "lower", comparison
        )
    with servers() as (on, off), sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for server in (on, off):  # a first answer warms each server and the browser
                render(browser, server, size, 0.0)
            for r in range(size.runs):
                for case, pace in (("unpaced", 0.0), ("paced", PACE_SECONDS)):
                    # Alternate who goes first, so a slow moment falls on both.
                    order = (on, off) if r % 2 == 0 else (off, on)
                    got = {s.base_url: render(browser, s, size, pace) for s in order}
                    mine, theirs = got[on.base_url], got[off.base_url]
                    figures[case, "main"].add(mine.main_thread_ms, theirs.main_thread_ms)
                    figures[case, "commits"].add(mine.commits, theirs.commits)
                    figures[case, "whole"].add(mine.whole_answer_ms, theirs.whole_answer_ms)
                    figures[case, "cpu"].add(mine.server_cpu_ms, theirs.server_cpu_ms)
                    print(f"  run {r + 1} {case}: on {mine}, off {theirs}", flush=True)
        finally:
            browser.close()
    return list(figures.values())


def main() -> None:  # `python -m bench.browser`: this benchmark alone, printed
    from bench.core import SIZES, table

    start = time.perf_counter()
    print(table(run(SIZES[os.environ.get("BENCH_SIZE", "moderate")])))
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
