"""The page of an agent in a folder of agents (`adk-stream-protocol serve DIR`), at
`/apps/<name>/`: its assets load under the prefix and it talks to that agent's `/stream` and
`/live` beside it (docs/adr/0028-package-and-command.md); and the folder's index at `/`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Response, expect

from tests.browser.conftest import OpenPlayground
from tests.support.browser.playground import AI7, Mode
from tests.support.rig import LiveServer, run_server

pytestmark = pytest.mark.browser

NAME = "browser_folder_demo"
HINT = (
    "I am the offline demo model; try asking about the weather, a payment, your location or music."
)


@pytest.fixture(scope="module")
def folder_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """`server:app` with ADK_STREAM_AGENTS_DIR: a folder with one agent (the demo's) and an
    other folder beside it, so the server is a folder of agents, not one agent's folder."""
    workdir = tmp_path_factory.mktemp("folder")
    for name, source in (
        (
            NAME,
            "from adk_stream_protocol.demo import build_demo_agent\n"
            "root_agent = build_demo_agent('offline-demo')\n",
        ),
        (
            "browser_folder_other",
            "from google.adk.agents import Agent\n"
            "root_agent = Agent(name='other', model='offline-demo')\n",
        ),
    ):
        folder = workdir / "agents" / name
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("from . import agent\n", encoding="utf-8")
        (folder / "agent.py").write_text(source, encoding="utf-8")
    env = {
        "ADK_STREAM_AGENTS_DIR": str(workdir / "agents"),
        "ADK_STREAM_SESSION_STORE": f"sqlite:///{workdir}/{{app}}.db",
    }
    with run_server(workdir, env) as server:
        yield server


@pytest.mark.parametrize("mode", AI7, ids=str)
def test_the_page_of_an_agent_talks_to_that_agent(
    open_playground: OpenPlayground, folder_server: LiveServer, mode: Mode
) -> None:
    playground = open_playground(mode, base_url=f"{folder_server.base_url}/apps/{NAME}")
    host = urlsplit(folder_server.base_url).netloc
    expected = (
        f"POST /apps/{NAME}/stream"
        if mode.transport == "stream"
        else f"WS ws://{host}/apps/{NAME}/live"
    )
    expect(playground.by_id("endpoint")).to_have_text(expected)
    playground.send("Hello there")
    expect(playground.assistant().get_by_test_id("text-part")).to_have_text(
        f'You said: "Hello there". {HINT}'
    )
    playground.expect_ready()
    if mode.transport == "live":
        assert [urlsplit(s.url).path for s in playground.sockets] == [f"/apps/{NAME}/live"]
    else:
        assert f'"POST /apps/{NAME}/stream HTTP/1.1" 200' in folder_server.log()
    assert (Path(folder_server.db_path).parent / f"{NAME}.db").is_file()


def test_the_index_is_styled_and_asks_for_nothing_missing(
    browser: Browser, folder_server: LiveServer
) -> None:
    """Its stylesheet loads under the page policy, and the browser asks for no
    `/favicon.ico` (the page names an empty icon): every request it makes succeeds."""
    page = browser.new_page()
    responses: list[Response] = []
    page.on("response", lambda response: responses.append(response))
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    try:
        page.goto(f"{folder_server.base_url}/")
        expect(page.get_by_role("link", name=NAME)).to_be_visible()
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(500)  # a favicon is asked for after the load
        body = page.evaluate("getComputedStyle(document.body).backgroundColor")
    finally:
        page.close()
    asked = {urlsplit(r.url).path: r.status for r in responses}
    assert asked == {"/": 200, "/index.css": 200}, asked
    assert body == "rgb(255, 255, 255)", "the stylesheet applies"
    assert not [line for line in console if line.startswith("error")], console
