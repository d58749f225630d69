"""Tools that reach the page (docs/adr/0025): data parts a tool sends while it runs, Gemini's
grounding as source parts, saved artifacts as file parts and their download route. The demo
agent and the real app, with ADK's Runner and the offline model."""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Iterator
from typing import Any, cast

import pytest
from fastapi import Request
from google.adk.artifacts import InMemoryArtifactService
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import ToolContext
from google.genai import types

from adk_stream_protocol.demo import OFFLINE_MODEL_NAME, build_demo_agent
from adk_stream_protocol.demo.reports import CHART_FILENAME
from adk_stream_protocol.plugins.tool_ui import send_data
from adk_stream_protocol.protocol.chunks import (
    DataChunk,
    FileChunk,
    TextDeltaChunk,
    ToolInputStartChunk,
)
from adk_stream_protocol.turns.deferral import Deferral
from tests.support.ai7_socket import V7Socket
from tests.support.rig import (
    InProcessApp,
    LiveSocket,
    StreamResult,
    assert_valid_stream,
    chat_body,
    in_process_app,
    post_stream,
    user_message,
)


def new_chat() -> str:
    return f"ui-{uuid.uuid4().hex[:12]}"


def assert_chart_turn(result: StreamResult) -> None:
    """The chart tool's parts, in order: its call, its progress (one id, replaced in place),
    the transient notice, its output, then the file of the artifact it saved."""
    types_ = result.types()
    start = types_.index("tool-input-available")
    end = types_.index("tool-output-available")
    progress = result.of_type("data-progress")
    assert [c["data"]["label"] for c in progress] == [
        "reading temperatures",
        "drawing bars",
        "saving the chart",
        "done",
    ]
    call_id = result.of_type("tool-input-available")[0]["toolCallId"]
    assert {c["id"] for c in progress} == {f"chart-{call_id}"}
    assert all("transient" not in c for c in progress)
    (notice,) = result.of_type("data-notice")
    assert notice["transient"] is True and notice["data"] == {"text": f"Saved {CHART_FILENAME}"}
    inside = [i for i, t in enumerate(types_) if t.startswith("data-")]
    assert inside and all(start < i < end for i in inside), types_
    (file,) = result.of_type("file")
    assert types_.index("file") > end
    assert file["mediaType"] == "image/svg+xml"
    assert file["url"].startswith("data:image/svg+xml;base64,")
    svg = base64.b64decode(file["url"].partition(",")[2])
    assert svg.startswith(b"<svg") and b"Tokyo" in svg
    assert "Here is your chart of 4 cities" in result.text()


def test_chart_on_stream(app: InProcessApp) -> None:
    result = post_stream(app, chat_body(new_chat(), user_message("Draw a chart", "u-1")))
    assert_chart_turn(result)


def test_chart_on_an_ai7_socket(app: InProcessApp) -> None:
    socket = V7Socket(app)
    try:
        reply = socket.reply(socket.send(new_chat(), user_message("Draw a chart", "u-1")))
    finally:
        socket.close()
    result = reply.stream()
    assert_valid_stream(result, ai_sdk=7)
    assert_chart_turn(result)


def test_chart_on_live(app: InProcessApp) -> None:
    with LiveSocket(app, new_chat()) as socket:
        result = socket.message(user_message("Draw a chart", "u-1"))
    assert_valid_stream(result)
    assert_chart_turn(result)


SOURCE_PARTS = [
    {
        "type": "source-url",
        "url": "https://example.org/tokyo",
        "title": "Tokyo",
    },
    {"type": "source-url", "url": "https://example.org/census"},
    {
        "type": "source-document",
        "mediaType": "text/csv",
        "title": "Demo weather table",
        "filename": "weather-table.csv",
    },
]


def without_ids(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in c.items() if k != "sourceId"} for c in chunks]


def test_grounding_becomes_source_parts_for_every_client(app: InProcessApp) -> None:
    message = user_message("Tell me about Tokyo, with sources", "u-1")
    plain = post_stream(app, chat_body(new_chat(), message))
    sources = [c for c in plain.chunks if c["type"].startswith("source-")]
    assert without_ids(sources) == SOURCE_PARTS  # each source once
    assert len({c["sourceId"] for c in sources}) == 3
    assert plain.types().index("source-url") > plain.types().index("text-end")
    # ai 7 gets its citations as before, naming the same sources by the same ids.
    seven = post_stream(app, chat_body(new_chat(), message, aiSdk=7), ai_sdk=7)
    assert [c for c in seven.chunks if c["type"].startswith("source-")] == sources
    citations = seven.of_type("text-end")[0]["citations"]
    ids = {c["sourceId"]: c["url"] for c in sources if "url" in c}
    assert {c["source"]["id"] for c in citations} <= set(ids)
    assert all(ids[c["source"]["id"]] == c["source"]["url"] for c in citations)


def test_grounding_on_live(app: InProcessApp) -> None:
    with LiveSocket(app, new_chat()) as socket:
        result = socket.message(user_message("Tell me about Tokyo, with sources", "u-1"))
    assert_valid_stream(result)
    assert without_ids([c for c in result.chunks if c["type"].startswith("source-")]) == (
        SOURCE_PARTS
    )


def test_a_chat_goes_on_after_tool_parts_come_back_in_its_history(app: InProcessApp) -> None:
    """The client sends every part back in later requests: data, file and source parts in
    assistant messages are read, not refused."""
    chat = new_chat()
    first = user_message("Draw a chart", "u-1")
    chart = post_stream(app, chat_body(chat, first))
    call = chart.of_type("tool-input-available")[0]
    assistant = {
        "id": chart.chunks[0]["messageId"],
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-draw_chart",
                "toolCallId": call["toolCallId"],
                "state": "output-available",
                "input": {},
                "output": chart.of_type("tool-output-available")[0]["output"],
            },
            {k: v for k, v in chart.of_type("data-progress")[-1].items()},
            {"type": "file", **{k: v for k, v in chart.of_type("file")[0].items() if k != "type"}},
            {"type": "source-url", "sourceId": "s1", "url": "https://example.org/tokyo"},
            {"type": "source-document", "sourceId": "s2", "mediaType": "text/csv", "title": "T"},
            {"type": "step-start"},
            {"type": "text", "text": chart.text(), "state": "done"},
        ],
    }
    later = post_stream(
        app, chat_body(chat, first, assistant, user_message("What did I say first?", "u-2"))
    )
    assert 'Your first message was: "Draw a chart"' in later.text()


# -- the download route --------------------------------------------------------------------------


async def header_user(request: Request) -> str:
    return request.headers.get("x-user", "alice")


@pytest.fixture(scope="module")
def download_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    """Every artifact goes by URL (none is small enough for a data: URL); the user is the
    ``x-user`` header."""
    with in_process_app(
        tmp_path_factory.mktemp("artifacts"), identity=header_user, artifact_inline_max_bytes=0
    ) as target:
        yield target


def test_a_large_artifact_is_a_download_only_its_user_gets(download_app: InProcessApp) -> None:
    chat = new_chat()
    result = post_stream(download_app, chat_body(chat, user_message("Draw a chart", "u-1")))
    (file,) = result.of_type("file")
    assert file == {
        "type": "file",
        "url": f"/artifacts/{chat}/{CHART_FILENAME}?version=0",
        "mediaType": "image/svg+xml",
    }
    got = download_app.http.get(file["url"])
    assert got.status_code == 200
    assert got.content.startswith(b"<svg")
    assert got.headers["content-type"].startswith("image/svg+xml")
    assert got.headers["content-disposition"].startswith("attachment")
    assert got.headers["content-security-policy"] == "sandbox"
    # Another user, another version, another chat: all the same 404.
    other = download_app.http.get(file["url"], headers={"x-user": "mallory"})
    assert other.status_code == 404
    assert download_app.http.get(file["url"].replace("=0", "=7")).status_code == 404
    assert download_app.http.get(f"/artifacts/{new_chat()}/{CHART_FILENAME}").status_code == 404
    assert download_app.http.get(f"/artifacts/{chat}/{CHART_FILENAME}").status_code == 200


# -- outside a served turn, and held-back responses ---------------------------------------------


@pytest.mark.asyncio
async def test_send_data_outside_a_served_turn_does_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``adk web`` or a plain Runner: no route, so the tool runs as if nothing was sent."""
    sessions = InMemorySessionService()
    runner = Runner(
        agent=build_demo_agent(OFFLINE_MODEL_NAME),
        app_name="plain",
        session_service=sessions,
        artifact_service=InMemoryArtifactService(),
    )
    await sessions.create_session(app_name="plain", user_id="u", session_id="s")
    message = types.Content(role="user", parts=[types.Part(text="Draw a chart")])
    with caplog.at_level(logging.DEBUG, logger="adk_stream_protocol.plugins.tool_ui"):
        events = [
            e async for e in runner.run_async(user_id="u", session_id="s", new_message=message)
        ]
    results = [r.response for e in events for r in e.get_function_responses()]
    assert results == [{"filename": CHART_FILENAME, "version": 0, "bars": 4}]
    assert "data-progress not sent: no served turn" in caplog.text


def test_a_paused_response_sends_what_tools_sent_and_holds_its_text() -> None:
    deferral = Deferral()
    text = TextDeltaChunk(id="t", delta="held")
    data = DataChunk(type="data-progress", data={"step": 1}, id="p")
    file = FileChunk(url="data:image/png;base64,AA==", media_type="image/png")
    call = ToolInputStartChunk(tool_call_id="c", tool_name="x")
    deferral.collect([text, call])
    deferral.collect([data, file], keep=True)
    now, later = deferral.settle(paused=True)
    assert now == [call, data, file]
    assert later == [text]


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["", "data progress", "x" * 65, "a/b"])
async def test_a_data_part_name_is_a_plain_word(name: str) -> None:
    # Refused before the context is looked at: a programming error, whoever runs the tool.
    with pytest.raises(ValueError, match="data part name"):
        await send_data(cast(ToolContext, None), name, {})
