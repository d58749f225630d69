"""Real-browser tests: Playwright drives Debian's Chromium against the real server, which serves
the built playground at `/` (docs/adr/0016-browser-tests.md).

Fixtures: one headless Chromium for all the browser tests; the TEXT server is the run's `server`
(`server:app` serves the built playground, on ai 7, by default), the AUDIO server the run's
`audio_server` (tests/conftest.py), and the V6 server one that serves the ai 6 build of the
page (`playground/dist-v6`); per test the playground open on a new chat, on a `Mode` (the page's
build and transport: tests/support/browser/playground.py). When a test fails, a screenshot of each
of its pages goes to `test-artifacts/browser/`.

The browser is scoped to this package (the whole run of the browser tests, then released), not
to the pytest session: Playwright's sync API keeps an asyncio loop marked as running on the main
thread while it is started, and the other tests call `asyncio.run()`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Error,
    Page,
    Playwright,
    WebSocket,
    expect,
    sync_playwright,
)

from tests.support.browser.playground import AI7, Mode, Playground, SocketLog
from tests.support.rig import PLAYGROUND_DIST, ROOT, LiveServer, ServerPool
from tests.support.tiers import out_of_process_fixture

# The ai 6 build of the playground (`npm run build:v6` in playground/).
PLAYGROUND_DIST_V6 = ROOT / "playground" / "dist-v6"

ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # The microphone: permission granted without a prompt, a fake device that beeps.
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
]
# The offline model answers in well under a second; this leaves room for a slow CI machine.
TIMEOUT_MS = 15_000

expect.set_options(timeout=TIMEOUT_MS)

# The pages a test opened (for the screenshot on failure) and what their consoles said.
_PAGES = pytest.StashKey[list[Page]]()
_CONSOLE = pytest.StashKey[list[str]]()
_FAILED = pytest.StashKey[bool]()


@pytest.fixture(scope="package")
@out_of_process_fixture
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
@out_of_process_fixture
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: install Debian's `chromium` (scripts/test does"
            " when it runs as root) or set CHROMIUM=/path/to/chromium;"
            " `scripts/test -m 'not browser'` runs the other tests.",
            pytrace=False,
        )
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # screenshots of an earlier run
    # Never `playwright install`: the browser is the system's.
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


def _check_playground_built(dist: Path = PLAYGROUND_DIST) -> None:
    if not (dist / "index.html").is_file():
        pytest.fail(
            f"{dist} has no build: run scripts/test (it builds the playground) or"
            " `npm ci && npm run build && npm run build:v6` in playground/ (after `npm ci` in"
            " client/).",
            pytrace=False,
        )


@pytest.fixture(scope="package")
def text_server(server: LiveServer) -> LiveServer:
    """The real app serving the playground on ai 7 (its default `ADK_STREAM_PLAYGROUND_DIR`);
    /live answers in text."""
    _check_playground_built()
    return server


@pytest.fixture(scope="package")
def v6_server(servers: ServerPool) -> LiveServer:
    """The same app (default settings otherwise) serving the ai 6 build of the playground."""
    _check_playground_built(PLAYGROUND_DIST_V6)
    return servers.get({"ADK_STREAM_PLAYGROUND_DIR": str(PLAYGROUND_DIST_V6)})


@pytest.fixture(scope="package")
def browser_audio_server(audio_server: LiveServer) -> LiveServer:
    """The same with spoken answers on /live (transcript text plus PCM audio)."""
    _check_playground_built()
    return audio_server


OpenPlayground = Callable[..., Playground]

# For tests that watch an answer arrive event by event through `slow_network`: each partial of
# the model an event of its own. The default coalescing window (ADR 0048) merges the demo
# model's quick partials into two events, too few to stop or switch chats in the middle.
EACH_PARTIAL = {"ADK_STREAM_DELTA_COALESCING_MS": "0"}


def server_for(servers: ServerPool, mode: Mode, env: Mapping[str, str]) -> LiveServer:
    """A server with these settings serving the mode's build of the page."""
    settings = dict(env)
    if mode.page == "ai6":
        settings["ADK_STREAM_PLAYGROUND_DIR"] = str(PLAYGROUND_DIST_V6)
    return servers.get(settings)


class SharedPage:
    """One page in a browser context with no options, reused by the tests that need nothing
    else: each opens the playground in it afresh (a new document and chat). A new context and
    page cost about a second of CPU; navigating an open page, a quarter of that. After a test
    that failed, the next one gets a new context."""

    def __init__(self, browser: Browser) -> None:
        self._browser = browser
        self._context: BrowserContext | None = None
        self._page: Page | None = None

    def get(self) -> Page:
        if self._page is None or self._page.is_closed():
            self.discard()
            self._context = self._browser.new_context()
            self._context.set_default_timeout(TIMEOUT_MS)
            self._page = self._context.new_page()
        return self._page

    def discard(self) -> None:
        if self._context is not None:
            self._context.close()
        self._context = self._page = None


@pytest.fixture(scope="package")
def shared_page(browser: Browser) -> Iterator[SharedPage]:
    shared = SharedPage(browser)
    yield shared
    shared.discard()


@pytest.fixture
def open_playground(
    request: pytest.FixtureRequest,
    browser: Browser,
    shared_page: SharedPage,
    text_server: LiveServer,
) -> Iterator[OpenPlayground]:
    """Opens the playground on a fresh chat: `open_playground(mode, base_url=..., chat=...,
    **context_options)`. `base_url` defaults to the server of the mode's page (`text_server`
    for ai 7, `v6_server` for ai 6). `chat` opens that chat instead (`?chat=`, as a reload
    does). `flow` opens it with `?flow=` (the page's browser approval flow, ADR 0011).
    With context options (permissions, geolocation) in a new browser context of its
    own; without, in the shared page."""
    contexts = []
    pages = request.node.stash.setdefault(_PAGES, [])
    console = request.node.stash.setdefault(_CONSOLE, [])
    listened: list[tuple[Page, Callable[[WebSocket], None]]] = []

    def on_console(message: ConsoleMessage) -> None:
        console.append(f"[{message.type}] {message.text}")

    def on_page_error(error: Error) -> None:
        console.append(f"[pageerror] {error}")

    def open_(
        mode: Mode,
        base_url: str | None = None,
        chat: str | None = None,
        flow: str | None = None,
        **options: Any,
    ) -> Playground:
        if options or pages:
            context = browser.new_context(**options)
            contexts.append(context)
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
        else:
            page = shared_page.get()
        pages.append(page)
        page.on("console", on_console)
        page.on("pageerror", on_page_error)
        sockets: list[SocketLog] = []

        def on_websocket(socket: WebSocket) -> None:
            sockets.append(SocketLog.follow(socket))

        page.on("websocket", on_websocket)
        listened.append((page, on_websocket))
        query = urlencode(
            {
                **({} if mode.transport == "stream" else {"transport": mode.transport}),
                **({"chat": chat} if chat else {}),
                **({"flow": flow} if flow else {}),  # the page's browser approval flow
            }
        )
        page.goto(f"{base_url or page_server_of(request, mode).base_url}/{query and '?'}{query}")
        playground = Playground(page, mode, sockets)
        if chat:
            playground.expect_chat(chat)
        else:
            playground.expect_fresh_chat()
        return playground

    yield open_
    for page, on_websocket in listened:
        page.remove_listener("console", on_console)
        page.remove_listener("pageerror", on_page_error)
        page.remove_listener("websocket", on_websocket)
    for context in contexts:
        context.close()
    if request.node.stash.get(_FAILED, False):
        shared_page.discard()  # whatever state the failure left it in stays with it
    # The page's Content-Security-Policy (docs/adr/0019) must not block anything it does.
    blocked = [line for line in console if "Content Security Policy" in line]
    assert not blocked, "\n".join(blocked)


def page_server_of(request: pytest.FixtureRequest, mode: Mode) -> LiveServer:
    """The server that serves the mode's build of the page."""
    name = "text_server" if mode.page == "ai7" else "v6_server"
    server: LiveServer = request.getfixturevalue(name)
    return server


@pytest.fixture(params=AI7, ids=str)
def mode(request: pytest.FixtureRequest) -> Mode:
    """The page and transport a test runs on: by default the ai 7 page on /stream and on
    /live; a test that runs on others says so with `@pytest.mark.parametrize("mode", ...)`."""
    chosen: Mode = request.param
    return chosen


@pytest.fixture
def page_server(request: pytest.FixtureRequest, mode: Mode) -> LiveServer:
    """The server of the test's page."""
    return page_server_of(request, mode)


@pytest.fixture
def playground(open_playground: OpenPlayground, mode: Mode) -> Playground:
    """The playground on a fresh chat in `mode` (the test runs once per mode)."""
    return open_playground(mode)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
    if report.failed and report.when in ("setup", "call"):
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid.removeprefix("tests/browser/"))
        pages: list[Page] = item.stash.get(_PAGES, [])
        console: list[str] = item.stash.get(_CONSOLE, [])
        for index, page in enumerate(pages):
            path = ARTIFACTS / f"{name.strip('_')}{f'-{index}' if index else ''}.png"
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(path), full_page=True)
                report.sections.append(("screenshot", str(path)))
            except Exception as error:  # a crashed page must not hide the test's failure
                report.sections.append(("screenshot", f"failed: {error}"))
        if console:
            report.sections.append(("browser console", "\n".join(console)))
    return report
