"""The scenario catalogue (scenarios/catalogue/*.json), run through the real AI SDK client.

Each scenario is data: the user's steps, the client's settings, the transports and clients it
runs on, optional server settings, and the expected outcome. Adding a scenario is adding a file;
the expectation language is documented in scenarios/README.md and checked here.

A scenario runs on every transport and client it names (default: all): on `stream` with each
client's DefaultChatTransport, on `live` with our WebSocket transport for 6.x clients and, for
client 7, with the WebSocket transports its `v7Live` names (default: ai 7's stock one).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from adk_stream_protocol.protocol.message_fold import MessageFold
from adk_stream_protocol.protocol.tool_calls import DISCONNECTED_RESULT
from tests.support.catalogue import CatalogueRuns, load_scenarios, runs
from tests.support.real_client import V7, RunningJob, job_transport, text_of

pytestmark = pytest.mark.out_of_process  # the real AI SDK clients (Node) against uvicorn


def cases() -> Iterator[Any]:
    for scenario in load_scenarios():
        for transport, client, ws in runs(scenario):
            # e.g. plain-text-stream-6.0.25, plain-text-live-6, plain-text-live-7-stock
            suffix = f"-{ws}" if client == V7 and ws else ""
            yield pytest.param(
                scenario,
                transport,
                client,
                ws,
                id=f"{scenario['name']}-{transport}-{client}{suffix}",
            )


# Scenarios run this many at a time: each spends most of its time waiting for its next step.
AT_ONCE = 6


@pytest.fixture(scope="module")
def reports(catalogue_runs: CatalogueRuns, request: pytest.FixtureRequest) -> dict[str, RunningJob]:
    """The run of every case this run selected, all started when the first case runs
    (AT_ONCE at a time), by case id; a run the message fold made already is not made again."""
    selected = {
        item.callspec.id
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_scenario"
    }
    chosen = [case for case in cases() if case.id in selected]
    wanted = [(case.values[0], case.values[1:]) for case in chosen]
    started = catalogue_runs.start(wanted, AT_ONCE)
    return dict(zip([case.id for case in chosen], started, strict=True))


@pytest.mark.parametrize(("scenario", "transport", "client", "ws"), list(cases()))
def test_scenario(
    reports: dict[str, RunningJob],
    request: pytest.FixtureRequest,
    scenario: dict[str, Any],
    transport: str,
    client: str,
    ws: str | None,
) -> None:
    job = reports[request.node.callspec.id]
    assert job.job["transport"] == job_transport(client, live=transport == "live", ws=ws)
    assert job.job["client"] == client
    report = job.report()
    check(report, scenario["expect"])
    assert_read_back(job.job, report)


def assert_read_back(job: dict[str, Any], report: dict[str, Any]) -> None:
    """``GET /chats/{chatId}`` gives back exactly the messages the client holds (ADR 0042).
    ai 6.0.25 is the one client whose reasoning parts have no ``id``: the server cannot tell
    it from a newer 6.x, whose parts keep it."""
    base = re.sub(r"^ws", "http", job["api"]).rsplit("/", 1)[0]
    chat = httpx.get(f"{base}/chats/{job['chatId']}", headers=job.get("headers"), timeout=30)
    assert chat.status_code == 200, chat.text
    stored = chat.json()["messages"]
    if job["client"] == "6.0.25":
        for part in (p for m in stored for p in m["parts"] if p["type"] == "reasoning"):
            part.pop("id", None)
    held = report["messages"]
    if job["transport"] == "ws":
        held = ended_as_the_socket_left(held, ai_sdk=7 if job["client"] == V7 else 6)
    assert stored == held


def ended_as_the_socket_left(messages: list[dict[str, Any]], ai_sdk: int) -> list[dict[str, Any]]:
    """On our envelope the browser calls still waiting when the job's socket closes end with
    it: they get "the user left". The chat read back shows each ended as a page would have
    read its ``tool-output-error``, with the text the model got (ADR 0042, 0046). An approval
    is handed over to the session and still waits (ADR 0047)."""
    if not messages or messages[-1]["role"] != "assistant":
        return messages
    ended = {
        part["toolCallId"]: ENDED_WITH_THE_SOCKET[part["state"]]
        for part in messages[-1]["parts"]
        if part["type"].startswith("tool-") and part.get("state") in ENDED_WITH_THE_SOCKET
    }
    if not ended:
        return messages
    fold = MessageFold(messages, ai_sdk=7 if ai_sdk == 7 else 6)
    return fold.apply_all(
        [
            {"type": "tool-output-error", "toolCallId": call, "errorText": text}
            for call, text in ended.items()
        ]
    )


# What a part waiting for the page ends with when its socket leaves.
ENDED_WITH_THE_SOCKET = {"input-available": DISCONNECTED_RESULT["error"]}


# -- the expectation language ----------------------------------------------------------------


def check(report: dict[str, Any], expect: dict[str, Any]) -> None:
    status = expect.get("status", "ready")
    assert report["status"] == status, report["error"]
    if "error" in expect:
        assert re.search(expect["error"], report["error"] or ""), report["error"]
    if "requests" in expect:
        assert len(report["requests"]) == expect["requests"], len(report["requests"])
    if "atMostRequests" in expect:
        assert len(report["requests"]) <= expect["atMostRequests"], len(report["requests"])
    messages = report["messages"]
    if "roles" in expect:
        assert [m["role"] for m in messages] == expect["roles"]
    assistants = [m for m in messages if m["role"] == "assistant"]
    if "assistants" in expect:
        assert len(assistants) == len(expect["assistants"]), [m["parts"] for m in assistants]
        for message, wanted in zip(assistants, expect["assistants"], strict=True):
            check_message(message, wanted)
    for wanted in expect.get("responses", []):
        check_response(report["requests"][wanted["index"]], wanted)
    if "onData" in expect:  # [type, transient] of each part onData got, in order
        got = [[part["type"], part["transient"]] for part in report["onData"]]
        assert got == expect["onData"], got


def check_message(message: dict[str, Any], wanted: dict[str, Any]) -> None:
    parts = message["parts"]
    tools = [p for p in parts if p["type"].startswith("tool-")]
    if "tools" in wanted:
        got = [[p["type"].removeprefix("tool-"), p["state"]] for p in tools]
        assert got == wanted["tools"], got
    for name, subset in wanted.get("outputs", []):
        output = next(p["output"] for p in tools if p["type"] == f"tool-{name}" and "output" in p)
        assert {k: output.get(k) for k in subset} == subset, output
    for name, piece in wanted.get("errors", []):  # in the errorText of a tool's output-error
        texts = [p.get("errorText", "") for p in tools if p["type"] == f"tool-{name}"]
        assert any(piece in text for text in texts), texts
    text = text_of(message)
    position = 0
    for piece in wanted.get("text", []):  # in this order
        found = text.find(piece, position)
        assert found >= 0, f"{piece!r} not in {text!r} (after position {position})"
        position = found + len(piece)
    for piece in wanted.get("notText", []):
        assert piece not in text, text
    if "partTypes" in wanted:
        assert [p["type"] for p in parts] == wanted["partTypes"]
    for part_type, count in wanted.get("partCounts", {}).items():
        assert sum(p["type"] == part_type for p in parts) == count, [p["type"] for p in parts]
    if not wanted.get("stopped"):  # a stopped answer keeps its last part streaming
        for part in parts:
            if part["type"] in ("text", "reasoning"):
                assert part["state"] == "done", part


def check_response(request: dict[str, Any], wanted: dict[str, Any]) -> None:
    types = [c["type"] for c in request["chunks"]]
    for forbidden in wanted.get("noChunkTypes", []):
        assert forbidden not in types, types
    for required in wanted.get("chunkTypes", []):
        assert required in types, types
    if "body" in wanted:
        body = request["request"]["body"]
        assert {k: body.get(k) for k in wanted["body"]} == wanted["body"], body
