"""WS /live through the real AI SDK client (ai 6.0.25, the newest 6.x and 7.x): with our
WebSocket ChatTransport (client/, one socket per chat, our envelope) for every client, and with
ai 7's own WebSocketChatTransport (one socket, requestId frames) for ai 7. The same flows as
/stream."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents.leave import LEDGER_ENV, ledger_lines
from tests.support.real_client import (
    CLIENTS,
    OURS,
    STOCK,
    V7,
    assistant_messages,
    checked,
    client_job,
    drive,
    rejected_chunk_types,
    run_real_client,
    text_of,
    tool_parts,
)
from tests.support.rig import LiveServer, ServerPool, chat_body, streaming, user_message

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

TEST_AGENT = {"ADK_STREAM_AGENT": "tests.support.agents.tools:root_agent"}
RESUMABLE_TEST_AGENT = {**TEST_AGENT, "ADK_STREAM_RESUMABLE_STREAMS": "true"}

LOCATION = {"latitude": 35.6762, "longitude": 139.6503, "accuracy": 20}


def states(message: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["type"].removeprefix("tool-"), p["state"]) for p in tool_parts(message)]


def assistants(report: dict[str, Any]) -> list[dict[str, Any]]:
    assert report["status"] == "ready", report["error"]
    return [m for m in report["messages"] if m["role"] == "assistant"]


@pytest.mark.parametrize("client", CLIENTS)
def test_text_turns_on_one_socket(server: LiveServer, client: str) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Hello there"},
            {"action": "send", "text": "Think step by step: and again?"},
        ],
        live=True,
    )
    first, second = assistants(report)
    assert first["id"] != second["id"], "a fresh start.messageId per turn"
    assert text_of(first).count("Hello there") == 1
    assert "Hello there" not in text_of(second), "nothing carries into the next turn"
    assert [p["type"] for p in second["parts"]].count("reasoning") == 1
    (connection,) = report["ws"]["connections"]  # one socket for the whole chat
    if report["transport"] == "ws-stock":
        assert connection["url"].endswith("/live"), "ai 7's transport: no query string"
        first_request, second_request = report["requests"]
        assert first_request["requestId"] != second_request["requestId"]
        for request in report["requests"]:
            assert request["frameTypes"] == ["chunk"] * len(request["chunks"]) + ["end"]
            assert request["sequences"] == list(range(len(request["chunks"])))
        assert first_request["request"]["body"]["id"] == second_request["request"]["body"]["id"]


@pytest.mark.parametrize("client", CLIENTS)
def test_voice_turn(audio_server: LiveServer, client: str) -> None:
    # Voice is our envelope's (audio frames): our transport, under every client.
    report = drive(
        audio_server,
        client,
        [{"action": "audio", "chunks": 15, "sampleRate": 16000, "withMessage": True}],
        live=True,
        ws=OURS,
    )
    (assistant,) = assistants(report)
    chunks = report["requests"][0]["chunks"]
    heard = [c for c in chunks if c["type"] == "data-transcript"]
    assert heard and heard[-1]["data"] == {
        "role": "user", "text": "What's the weather in Tokyo?", "final": True,
    }  # fmt: skip
    pcm = [c for c in chunks if c["type"] == "data-pcm"]
    assert pcm and all(c["transient"] is True for c in pcm)
    assert pcm[0]["data"]["sampleRate"] == 24000
    assert "18°C" in text_of(assistant), "the spoken answer's words are the assistant's text"
    assert not [p for p in assistant["parts"] if p["type"] == "data-pcm"], "audio is not stored"
    transcript_parts = [p for p in assistant["parts"] if p["type"] == "data-transcript"]
    assert len(transcript_parts) == 1, "one transcript part, updated in place"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_chat_from_stream_continues_on_live(server: LiveServer, client: str) -> None:
    chat_id = f"moving-{client}-{uuid.uuid4().hex[:8]}"
    drive(server, client, [{"action": "send", "text": "Hello from stream"}], chatId=chat_id)
    report = drive(
        server,
        client,
        [{"action": "send", "text": "What did I say first?"}],
        live=True,
        chatId=chat_id,
    )
    (assistant,) = assistants(report)
    assert 'Your first message was: "Hello from stream"' in text_of(assistant)


@pytest.mark.parametrize(("ws", "v7_only"), [(STOCK, ["tool-approval-response"]), (OURS, [])])
def test_only_the_ai7_socket_gets_ai7_chunks(
    server: LiveServer, ws: str, v7_only: list[str]
) -> None:
    """ai 7 under both WebSocket transports: the stock one's frames say the client is ai 7, so
    the approval's continuation starts with the decision the server acted on; our envelope
    keeps to what every 6.x client accepts."""
    report = drive(
        server,
        V7,
        [
            {"action": "send", "text": "Send 50 dollars to Hanako"},
            {"action": "approve", "approved": True},
        ],
        live=True,
        ws=ws,
        sendAutomaticallyWhen="approvals",
    )
    assert rejected_chunk_types(report, "6.0.25") == rejected_chunk_types(report, "6") == v7_only
    (assistant,) = assistants(report)
    assert states(assistant) == [("process_payment", "output-available")]
    assert "Sent 50 USD to Hanako" in text_of(assistant)


def test_the_stock_transports_stop_aborts_the_running_request(servers: ServerPool) -> None:
    """ai 7's stop() on its own transport: an `abort` frame for the open request, which stops
    the run on the server (nothing more arrives for it), and the chat goes on."""
    job = client_job(
        servers.get(TEST_AGENT),
        V7,
        [
            {"action": "stop", "afterChunks": 2},
            {"action": "send", "text": "slow 3"},
            {"action": "send", "text": "transfer 50"},
        ],
        live=True,
    )
    assert job["transport"] == "ws-stock"
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report["error"]
    stopped, after = report["requests"]
    assert stopped["stopped"] and stopped["aborted"], stopped
    assert stopped["sent"] == [{"type": "abort", "requestId": stopped["requestId"]}]
    assert stopped["ended"] is None, "the request was still running when the client aborted"
    assert stopped["framesAfterAbort"] == 0, stopped["frames"][stopped["deliveredChunks"] :]
    assert report["finishes"][0]["isAbort"]
    assert after["ended"] == "end" and not after["aborted"]
    first, second = assistant_messages(report)
    assert [p["type"] for p in first["parts"]] == ["step-start"], "cut after start-step"
    assert states(second) == [("transfer", "output-available")]
    assert "Tool said {'transferred': 50.0}." in text_of(second)


def test_the_stock_transport_resumes_a_response_whose_page_left(servers: ServerPool) -> None:
    """useChat({ resume: true }) with ai 7's own transport: a `resume` frame gets the chat's
    running response from its start (`start`, numbered chunks, `end`), and the socket then
    serves the chat; a chat with nothing running answers `no-active`."""
    server = servers.get(RESUMABLE_TEST_AGENT)
    chat = f"v7-resume-{uuid.uuid4().hex[:8]}"
    with streaming(server, chat_body(chat, user_message("slow 2", "u1"))) as reading:
        start = reading.first_event()  # then the page reloads
    steps = [{"action": "resume"}, {"action": "send", "text": "transfer 50"}]
    job = client_job(server, V7, steps, live=True, chatId=chat)
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report["error"]
    resumed, sent = report["requests"]
    assert (resumed["kind"], sent["kind"]) == ("resume", "send")
    assert resumed["frameTypes"][0] == "start" and resumed["ended"] == "end"
    assert resumed["chunks"][0] == start, "replayed from the response's start"
    assert resumed["sequences"] == list(range(len(resumed["chunks"])))
    first, second = assistant_messages(report)
    assert first["id"] == start["messageId"]
    assert states(first) == [("slow_tool", "output-available")]
    assert states(second) == [("transfer", "output-available")]

    fresh = client_job(server, V7, [{"action": "resume"}], live=True)
    report = checked(fresh, run_real_client(fresh))
    (nothing,) = report["requests"]
    assert nothing["frameTypes"] == ["no-active"] and report["messages"] == []


# -- what ai 7 adds, through the real clients (docs/adr/0023) ---------------------------------


@pytest.mark.parametrize(
    ("client", "live", "body"),
    [(V7, True, None), (V7, False, {"aiSdk": 7}), (V7, False, None), ("6", False, None),
     ("6.0.25", False, None)],
)  # fmt: skip
def test_grounding_reaches_ai7_as_citations_and_no_ai6_client(
    servers: ServerPool, client: str, live: bool, body: dict[str, Any] | None
) -> None:
    """The test agent's "cite" answer carries Gemini grounding. ai 7 (its socket, or /stream
    with `aiSdk: 7`) gets it as the text part's citations; every other client gets the same
    text without them (`checked` holds each 6.x chunk to both 6.x schemas)."""
    options: dict[str, Any] = {"body": body} if body else {}
    report = drive(
        servers.get(TEST_AGENT), client, [{"action": "send", "text": "cite"}], live=live, **options
    )
    (assistant,) = assistants(report)
    (text,) = [p for p in assistant["parts"] if p["type"] == "text"]
    assert text["text"] == "Tokyo is the capital of Japan. It has about 14 million people."
    if client == V7 and (live or body):
        cited = [(c["source"]["url"], c["citedText"]) for c in text["citations"]]
        assert cited == [
            ("https://example.org/tokyo", "Tokyo is the capital of Japan."),
            ("https://example.org/tokyo", "It has about 14 million people."),
            ("https://example.org/census", "It has about 14 million people."),
        ]
        for citation in text["citations"]:
            start, end = citation["startIndex"], citation["endIndex"]
            assert text["text"][start:end] == citation["citedText"]
    else:
        assert "citations" not in text


@pytest.mark.parametrize(
    ("client", "live", "reason"),
    [(V7, True, "interrupted"), ("6", False, "other"), ("6.0.25", False, "other")],
)
def test_an_answer_stopped_on_the_server_is_interrupted_for_ai7_only(
    servers: ServerPool, client: str, live: bool, reason: str
) -> None:
    """Another tab stops the answer (DELETE) while the client reads it: ai 7 on its socket
    sees a stopped answer ("interrupted", which its useChat never resends); ai 6 sees the
    `abort` and "other"."""
    report = drive(
        servers.get(TEST_AGENT),
        client,
        [{"action": "send", "text": "slow 30", "stopOnServerAfterMs": 1000}],
        live=live,
        timeoutMs=20_000,
    )
    assert report["serverStops"] == [204]
    (request,) = report["requests"]
    types = [c["type"] for c in request["chunks"]]
    assert "abort" in types and "error" not in types, types
    assert request["chunks"][-1]["finishReason"] == reason
    assert report["finishReasons"] == [reason]


LEAVE_AGENT = {"ADK_STREAM_AGENT": "tests.support.agents.leave:root_agent"}


@pytest.mark.parametrize("client", ["6.0.25", V7])
def test_an_in_tool_confirmation_reaches_the_client_on_the_chat_socket(
    servers: ServerPool, client: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool that asks from its body (`request_confirmation`) on `/live?chatId=` (ADR 0038):
    the strict 6.0.25 schema and ai 7 take the request, the stock helper sends the approval,
    and the call runs once, approved."""
    ledger = tmp_path / "ledger"
    monkeypatch.setenv(LEDGER_ENV, str(ledger))
    report = drive(
        servers.get(LEAVE_AGENT),
        client,
        [
            {"action": "send", "text": "5 days off please"},
            {"action": "approve", "approved": True},
        ],
        live=True,
        ws=OURS,
        sendAutomaticallyWhen="approvals",
    )
    asking = report["requests"][0]["chunks"]
    assert [c["type"] for c in asking if c["type"].startswith("tool-")] == [
        "tool-input-start",
        "tool-input-available",
        "tool-approval-request",
    ]
    (assistant,) = assistants(report)
    assert states(assistant) == [("request_time_off", "output-available")]
    assert "Your time off request is settled." in text_of(assistant)
    assert [line.split()[1:] for line in ledger_lines(str(ledger))] == [["booked", "5"]]


TRANSFER_AGENT = {"ADK_STREAM_AGENT": "tests.support.agents.transfer:root_agent"}


@pytest.mark.parametrize(("client", "live"), [("6.0.25", True), ("6.0.25", False), (V7, True)])
def test_a_transfer_keeps_every_call_of_the_chat_apart(
    servers: ServerPool, client: str, live: bool
) -> None:
    """Two scripted agents, a tool call on each side of `transfer_to_agent`: the client holds
    three tool parts with three ids (issue 24: on `/live` the sub-agent's call reused the
    root's first id, and ai 6 merged the two into one part)."""
    report = drive(
        servers.get(TRANSFER_AGENT),
        client,
        [{"action": "send", "text": "What's the weather?"}],
        live=live,
    )
    (assistant,) = assistants(report)
    parts = tool_parts(assistant)
    assert [p["type"] for p in parts] == ["tool-lookup", "tool-transfer_to_agent", "tool-lookup"]
    assert len({p["toolCallId"] for p in parts}) == 3
    assert [p["input"] for p in parts if p["type"] == "tool-lookup"] == [
        {"city": "Rome"},
        {"city": "Oslo"},
    ]
    assert text_of(assistant) == "Sunny in Oslo too."
