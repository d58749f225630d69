"""Resuming an answer that continues a message (after an approval or a browser tool's output)
with the real clients (ai 6.0.25, the newest 6.x, ai 7 over /stream and its own socket), the
page reloaded while the answer is being written (docs/adr/0045).

The client that asked leaves after the answer's first chunk; the page reads the chat back
(`GET /chats/{chatId}`) and resumes as the recipe of docs/frontend/chats.md does. The message it
ends with must be the one the client that asked would have had (its request's messages with every
chunk it was sent folded on by the same real client: the response's recording), and the chat's
record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.real_client import V7, checked, client_job, run_real_client
from tests.support.rig import LiveServer, ServerPool, chat_body, streaming
from tests.support.waiting import wait_until

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

AGENT = "tests.support.agents.continuation:root_agent"
LOCATION = {"latitude": 35.6762, "longitude": 139.6503}

# (client, over ai 7's socket): the socket is ai 7's.
RUNS = [("6.0.25", False), ("6", False), (V7, False), (V7, True)]


@pytest.fixture(scope="module")
def record_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("continuation-recordings")


@pytest.fixture
def server(servers: ServerPool, record_dir: Path) -> LiveServer:
    return servers.get(
        {
            "ADK_STREAM_AGENT": AGENT,
            "ADK_STREAM_RESUMABLE_STREAMS": "true",
            "ADK_STREAM_RECORD_DIR": str(record_dir),
        }
    )


def _waiting_chat(server: LiveServer, client: str, text: str) -> dict[str, Any]:
    """The real client's chat after ``text``: its answer waits for an approval or the
    browser (nothing answers it)."""
    job = client_job(server, client, [{"action": "send", "text": text}])
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report["error"]
    return {"chatId": job["chatId"], "messages": report["messages"]}


def _answered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as the page sends them once the user answered the waiting part: the
    approval granted, or the browser tool's output."""
    *earlier, last = json.loads(json.dumps(messages))
    for part in last["parts"]:
        if part.get("state") == "approval-requested":
            part.update(state="approval-responded", approval={**part["approval"], "approved": True})
        elif part.get("state") == "input-available":
            part.update(state="output-available", output=LOCATION)
    return [*earlier, last]


def _recording(record_dir: Path, chat_id: str, message_id: str) -> dict[str, Any]:
    """The continuation's recording: its request and the chunks its client was sent."""

    def written() -> dict[str, Any] | None:
        for path in sorted(record_dir.glob(f"*_{chat_id}_*.jsonl")):
            lines = [json.loads(line) for line in path.read_text().splitlines()]
            request = lines[0]
            if request.get("messageId") == message_id and lines[-1]["kind"] == "end":
                chunks = [line["chunk"] for line in lines if line["kind"] == "chunk"]
                return {"request": request, "chunks": chunks}
        return None

    # The server process writes the file off its event loop once the response ended.
    return wait_until(written, f"a recording of the continuation of chat {chat_id}", every=0.05)


@pytest.mark.parametrize(("client", "socket"), RUNS)
@pytest.mark.parametrize("text", ["pay 50", "locate me"])
def test_a_reloaded_page_resumes_a_continuation_to_the_message_it_would_have_had(
    server: LiveServer, record_dir: Path, client: str, socket: bool, text: str
) -> None:
    _resumed_as_without_a_reload(server, record_dir, client, socket, text)


@pytest.mark.parametrize(("client", "socket"), [("6", False), (V7, True)])
def test_on_postgresql_and_redis_too(
    servers: ServerPool,
    tmp_path_factory: pytest.TempPathFactory,
    postgres_url: str,
    redis_url: str,
    redis_run_prefix: str,
    client: str,
    socket: bool,
) -> None:
    """The chunk log on Redis Streams, the chat's record on PostgreSQL."""
    record_dir = tmp_path_factory.mktemp("continuation-recordings-shared")
    server = servers.get(
        {
            "ADK_STREAM_AGENT": AGENT,
            "ADK_STREAM_RESUMABLE_STREAMS": "true",
            "ADK_STREAM_RECORD_DIR": str(record_dir),
            "ADK_STREAM_SESSION_STORE": postgres_url,
            "ADK_STREAM_REDIS_URL": redis_url,
            "ADK_STREAM_REDIS_KEY_PREFIX": f"{redis_run_prefix}.resume-continuation",
        }
    )
    _resumed_as_without_a_reload(server, record_dir, client, socket, "pay 50")


def _resumed_as_without_a_reload(
    server: LiveServer, record_dir: Path, client: str, socket: bool, text: str
) -> None:
    waiting = _waiting_chat(server, client, text)
    chat_id = waiting["chatId"]
    messages = _answered(waiting["messages"])
    continued = messages[-1]
    body = chat_body(chat_id, *messages, messageId=continued["id"])
    if client == V7:
        body["aiSdk"] = 7
    with streaming(server, body) as reading:
        start = reading.first_event()  # then the page reloads
    assert start == {"type": "start", "messageId": continued["id"]}

    steps: list[dict[str, Any]] = [{"action": "reload", "resume": True}, {"action": "resume"}]
    job = client_job(server, client, steps, live=socket, chatId=chat_id)
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report["error"]
    assert report["reloads"][0]["status"] == 200
    resumed_messages = report["messages"]

    # What the client that asked had at the end: its request's messages with its chunks.
    recorded = _recording(record_dir, chat_id, continued["id"])
    sent = recorded["chunks"]
    fold = {
        "client": client,
        "messages": recorded["request"]["request"]["messages"],
        "chunks": sent,
        "messageId": continued["id"],
    }
    without_reload = run_real_client({"fold": fold})
    assert without_reload["error"] is None, without_reload
    record = server.http.get(f"/chats/{chat_id}").json()

    expected = json.loads(json.dumps(without_reload["messages"]))
    if client != V7:
        # ai 6 has no chunk for an approval's answer: the rebuilt approval keeps its id only.
        for message in expected:
            for part in message["parts"]:
                if isinstance(part.get("approval"), dict):
                    part["approval"] = {"id": part["approval"]["id"]}
    assert resumed_messages == expected
    assert record["messages"] == without_reload["messages"]
    # Three steps, each once: the client that asked got no rebuilt message on top of its own.
    for held in (resumed_messages, without_reload["messages"]):
        assert [p["type"] for p in held[-1]["parts"]].count("step-start") == 3
