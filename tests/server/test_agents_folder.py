"""A folder of agents in ADK's layout as one server (`adk-stream-protocol serve DIR`): each
agent under `/apps/<name>/`, chosen per request, with its own store; one agent's folder at `/`.
The real app, the real ADK Runner, agents of a user's own on the offline model."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from adk_stream_protocol import Settings
from adk_stream_protocol.demo.replies import MISSING_TOOLS_TEXT
from adk_stream_protocol.foundation.security import PLAYGROUND_CSP
from adk_stream_protocol.server.agents_folder import create_server
from tests.support.rig import (
    PLAYGROUND_DIST,
    StreamResult,
    assert_valid_stream,
    chat_body,
    stream_result,
    user_message,
)

# Module names are global to the process (ADK's loader imports each agent by its folder's
# name), so this file's agents have names no other test uses.
WEATHER_AGENT = '''
from google.adk.agents import Agent


def get_weather(location: str) -> dict:
    """The weather at a place."""
    return {"location": location, "temperature": 21, "condition": "sunny"}


root_agent = Agent(name="folder_weather", model="offline-demo", tools=[get_weather])
'''
PLAIN_AGENT = """
from google.adk.agents import Agent

root_agent = Agent(name="folder_plain", model="offline-demo")
"""
APP_AGENT = """
from google.adk.agents import Agent
from google.adk.apps import App

app = App(name="folder_app", root_agent=Agent(name="inner", model="offline-demo"))
"""
BROKEN_AGENT = "raise RuntimeError('this agent does not import')\n"
DEMO_AGENT = """
from adk_stream_protocol.demo import build_demo_agent

root_agent = build_demo_agent("offline-demo")
"""


def write_agent(folder: Path, name: str, source: str) -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text("from . import agent\n", encoding="utf-8")
    (folder / name / "agent.py").write_text(source, encoding="utf-8")


@pytest.fixture(scope="module")
def agents_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("agents")
    write_agent(folder, "folder_weather", WEATHER_AGENT)
    write_agent(folder, "folder_plain", PLAIN_AGENT)
    write_agent(folder, "folder_app", APP_AGENT)
    write_agent(folder, "folder_broken", BROKEN_AGENT)
    write_agent(folder, "folder_demo", DEMO_AGENT)
    (folder / "not_an_agent").mkdir()  # no agent.py, no __init__.py: not listed
    return folder


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stores")


@pytest.fixture(scope="module")
def server(agents_folder: Path, stores: Path) -> Iterator[TestClient]:
    settings = Settings(
        agents_dir=agents_folder,
        session_store=f"sqlite:///{stores}/{{app}}.db",
        playground_dir=PLAYGROUND_DIST,
        artifact_inline_max_bytes=0,  # every artifact as a download link
    )
    with TestClient(create_server(settings), base_url="http://localhost") as client:
        yield client


def ask(client: TestClient, path: str, chat_id: str, text: str) -> StreamResult:
    body = chat_body(chat_id, user_message(text, f"{chat_id}-u1"))
    result = stream_result(client.post(path, json=body))
    assert result.status == 200, result.body
    assert_valid_stream(result)
    return result


AGENTS = ["folder_app", "folder_broken", "folder_demo", "folder_plain", "folder_weather"]


def test_the_folder_lists_its_agents(server: TestClient) -> None:
    assert server.get("/apps").json() == {"apps": AGENTS}
    index = server.get("/")
    assert index.status_code == 200
    for name in AGENTS:
        assert f'href="apps/{name}/"' in index.text


def test_the_index_names_its_icon_and_stylesheet_under_the_page_policy(
    server: TestClient,
) -> None:
    """No `/favicon.ico` to ask for (an empty `data:` icon, which img-src allows), and the
    look from a stylesheet of the server's own: the policy allows no inline style."""
    index = server.get("/")
    assert "<link rel='icon' href='data:,'>" in index.text
    assert "<link rel='stylesheet' href='index.css'>" in index.text
    assert "<style" not in index.text and "style=" not in index.text
    assert index.headers["content-security-policy"] == PLAYGROUND_CSP
    assert "img-src 'self' data:" in PLAYGROUND_CSP and "style-src 'self';" in PLAYGROUND_CSP
    css = server.get("/index.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "font-family: system-ui" in css.text


def test_each_agent_answers_at_its_own_path(server: TestClient) -> None:
    weather = ask(server, "/apps/folder_weather/stream", "c1", "What's the weather in Tokyo?")
    calls = weather.of_type("tool-output-available")
    assert [c["output"]["temperature"] for c in calls] == [21]  # the agent's own tool ran
    assert "Tokyo" in weather.text()
    # The same request to an agent without that tool: the offline model says so in text.
    plain = ask(server, "/apps/folder_plain/stream", "c1", "What's the weather in Tokyo?")
    assert plain.of_type("tool-input-available") == []
    assert plain.text() == MISSING_TOOLS_TEXT.format(tools='get_weather(location="Tokyo")')


def test_each_agent_keeps_its_chats_in_its_own_store(server: TestClient, stores: Path) -> None:
    """The same chat id in two apps is two chats: no 409, each in its app's file."""
    ask(server, "/apps/folder_weather/stream", "same-id", "Hello")
    ask(server, "/apps/folder_plain/stream", "same-id", "Hello")
    for app in ("folder_weather", "folder_plain"):
        with sqlite3.connect(stores / f"{app}.db") as db:
            rows = db.execute("SELECT app_name FROM sessions WHERE id = 'same-id'").fetchall()
        assert rows == [(app,)]


def test_an_app_in_the_folder_is_served_under_its_folder_name(server: TestClient) -> None:
    result = ask(server, "/apps/folder_app/stream", "c-app", "What's the weather in Paris?")
    assert result.of_type("error") == []


def test_each_agent_has_its_page(server: TestClient) -> None:
    moved = server.get("/apps/folder_weather?transport=live", follow_redirects=False)
    assert moved.status_code == 307
    assert moved.headers["location"] == "/apps/folder_weather/?transport=live"
    page = server.get("/apps/folder_weather/")
    assert page.status_code == 200 and '<div id="root">' in page.text
    # The page's assets are relative to it (vite `base: './'`), so they load under the prefix.
    script = page.text.split('src="./', 1)[1].split('"', 1)[0]
    asset = server.get(f"/apps/folder_weather/{script}")
    assert asset.status_code == 200
    assert "javascript" in asset.headers["content-type"]


def test_an_agent_answers_on_its_ai7_socket(server: TestClient) -> None:
    with server.websocket_connect("ws://localhost/apps/folder_weather/live") as socket:
        message = user_message("What's the weather in Tokyo?", "s-u1")
        socket.send_json(
            {"type": "send", "requestId": "r1", "id": "c-sock", "trigger": "submit-message"}
            | {"messages": [message], "headers": {}, "body": {}}
        )
        frames: list[dict[str, Any]] = []
        while not frames or frames[-1]["type"] not in ("end", "error"):
            frames.append(socket.receive_json())
    chunks = [f["chunk"] for f in frames if f["type"] == "chunk"]
    assert frames[-1]["type"] == "end"
    assert [c["output"]["temperature"] for c in chunks if c["type"] == "tool-output-available"] == [
        21
    ]


def test_an_agents_download_links_are_under_its_path(server: TestClient) -> None:
    """A saved artifact's link names the agent's path, where its own route serves it."""
    result = ask(server, "/apps/folder_demo/stream", "c-chart", "Draw a chart")
    (file_chunk,) = result.of_type("file")
    assert file_chunk["url"].startswith("/apps/folder_demo/artifacts/c-chart/"), file_chunk
    download = server.get(file_chunk["url"])
    assert download.status_code == 200
    assert download.headers["content-type"].startswith(file_chunk["mediaType"])
    assert server.get(file_chunk["url"].replace("folder_demo", "folder_plain")).status_code == 404


def test_an_unknown_agent_gets_a_readable_404(server: TestClient) -> None:
    response = server.post("/apps/nobody/stream", json={})
    assert response.status_code == 404
    assert response.json()["detail"] == (
        "no agent named 'nobody' in this folder (agents: " + ", ".join(AGENTS) + ")"
    )
    with (
        pytest.raises(WebSocketDisconnect) as closed,
        server.websocket_connect("ws://localhost/apps/nobody/live") as socket,
    ):
        socket.receive_json()
    assert closed.value.code == 4404


def test_an_agent_that_fails_to_load_leaves_the_others_serving(server: TestClient) -> None:
    response = server.post("/apps/folder_broken/stream", json={})
    assert response.status_code == 500
    assert response.json()["detail"] == (
        "agent 'folder_broken' could not be started; the server's log says why"
    )
    ask(server, "/apps/folder_plain/stream", "after-broken", "Hello")


def test_one_agents_folder_is_served_at_the_root(tmp_path: Path) -> None:
    write_agent(tmp_path, "folder_single", WEATHER_AGENT.replace("folder_weather", "single"))
    settings = Settings(
        agents_dir=tmp_path / "folder_single",
        session_store=f"sqlite:///{tmp_path}/{{app}}.db",
        playground_dir=None,
    )
    with TestClient(create_server(settings), base_url="http://localhost") as client:
        result = ask(client, "/stream", "c1", "What's the weather in Tokyo?")
    assert [c["output"]["temperature"] for c in result.of_type("tool-output-available")] == [21]
    assert (tmp_path / "folder_single.db").is_file()  # the app is named as the folder


def test_each_agent_is_named_as_its_folder_whatever_the_app_name_setting(
    agents_folder: Path, tmp_path: Path
) -> None:
    """One ADK_STREAM_APP_NAME for every agent would put their chats in one store."""
    settings = Settings(
        agents_dir=agents_folder,
        app_name="one_name",
        session_store=f"sqlite:///{tmp_path}/{{app}}.db",
        playground_dir=None,
    )
    with TestClient(create_server(settings), base_url="http://localhost") as client:
        ask(client, "/apps/folder_weather/stream", "c1", "Hello")
        ask(client, "/apps/folder_plain/stream", "c1", "Hello")
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["folder_plain.db", "folder_weather.db"]


def test_a_folder_that_is_not_there_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a folder"):
        create_server(Settings(agents_dir=tmp_path / "missing"))
