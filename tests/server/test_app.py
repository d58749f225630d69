"""`create_app` as a user starts it: what its start-up log says, and what it answers for paths
of a folder of agents, which a server of one agent does not have."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from google.adk.agents import LlmAgent
from starlette.websockets import WebSocketDisconnect

from adk_stream_protocol import Settings, create_app


def one_agent(tmp_path: Path) -> TestClient:
    """An agent of a user's own, with a page at `/` (whose mount answered a POST with 405)."""
    page = tmp_path / "page"
    page.mkdir()
    (page / "index.html").write_text("<!doctype html><title>page</title>", encoding="utf-8")
    settings = Settings(session_store=f"sqlite:///{tmp_path}/{{app}}.db", playground_dir=page)
    app = create_app(LlmAgent(name="helper", model="offline-demo"), settings=settings)
    return TestClient(app, base_url="http://localhost")


ONE_AGENT_ONLY = "no agent named 'nobody': this server runs one agent, 'helper', at / "


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_a_folder_path_on_a_one_agent_server_is_a_readable_404(tmp_path: Path, method: str) -> None:
    with one_agent(tmp_path) as client:
        response = client.request(method, "/apps/nobody/stream", json={})
        assert client.get("/").status_code == 200  # the page is still there
    assert response.status_code == 404
    assert response.json()["detail"] == ONE_AGENT_ONLY + "(POST /stream, WS /live)"


def test_a_folder_socket_on_a_one_agent_server_is_closed_4404(tmp_path: Path) -> None:
    with (
        one_agent(tmp_path) as client,
        pytest.raises(WebSocketDisconnect) as closed,
        client.websocket_connect("ws://localhost/apps/nobody/live") as socket,
    ):
        socket.receive_json()
    assert closed.value.code == 4404


def test_the_start_up_log_names_each_thing_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with one_agent(tmp_path):
        pass
    (ready,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ready:")]
    # The agent, its store (named as the app: the agent's name), and ADK's name for the
    # chats' app: each under its own key, none of them called "app".
    assert ready == (
        f"ready: agent=helper store=sqlite:///{tmp_path}/helper.db "
        "adk_app_name=adk_stream_protocol "
        "coordination=local resumable=False"
    )


def test_each_plugin_is_announced_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with one_agent(tmp_path):
        pass
    registered = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Plugin")]
    # Each runner registers ours as one chain (docs/adr/0053); each is announced once.
    assert sorted(registered) == [
        "Plugin 'adk_stream_protocol' registered.",
        "Plugin 'adk_stream_protocol_live' registered.",
    ]
