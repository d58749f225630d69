"""Traces and metrics (docs/adr/0027), on the real app: real ADK runners, the offline models,
real endpoints in this process.

Spans: an SDK ``TracerProvider`` with an in-memory exporter is made the global one, once per
test process (OpenTelemetry allows one; ADK's spans go to the global provider too). It
records only while a test holds the ``spans`` fixture. Metrics: ``/metrics`` is scraped after
real turns and its figures read with ``prometheus_client``'s parser.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from tests.support.ai7_socket import V7Socket
from tests.support.doc_pages import section
from tests.support.rig import (
    InProcessApp,
    LiveSocket,
    StreamResult,
    answer_approvals,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    user_message,
)
from tests.transports.test_live_endpoint import LiveChat

AGENT = (
    "tests.support.agents.tools:root_agent"  # "transfer 500" asks for approval, "explode" raises
)
PAYMENT = "Send 50 dollars to Hanako"


# Told of each span that ends while a test records (what ``finished`` waits on).
SPAN_ENDED = threading.Condition()


class _Recording(SimpleSpanProcessor):
    """Exports only while a test records, so the rest of the process keeps nothing."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        super().__init__(exporter)
        self.on = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            super().on_end(span)
            with SPAN_ENDED:
                SPAN_ENDED.notify_all()


@pytest.fixture(scope="session")
def recorder() -> tuple[_Recording, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    processor = _Recording(exporter)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "another test set the global provider first"
    return processor, exporter


@pytest.fixture
def spans(recorder: tuple[_Recording, InMemorySpanExporter]) -> Iterator[InMemorySpanExporter]:
    processor, exporter = recorder
    exporter.clear()
    processor.on = True
    yield exporter
    processor.on = False
    exporter.clear()


def new_chat() -> str:
    return f"obs-{uuid.uuid4().hex[:12]}"


def hashed(chat_id: str) -> str:
    return hashlib.sha256(chat_id.encode()).hexdigest()[:16]


def finished(exporter: InMemorySpanExporter, count: int, name: str) -> list[ReadableSpan]:
    """The spans so far, once ``count`` spans named ``name`` have ended (a run's last spans
    can end just after its response's last chunk was read), or after 10 s."""
    with SPAN_ENDED:
        SPAN_ENDED.wait_for(
            lambda: sum(s.name == name for s in exporter.get_finished_spans()) >= count, 10
        )
    return list(exporter.get_finished_spans())


def ours(found: list[ReadableSpan], chat_id: str, name: str = "adk_stream.response") -> list[Any]:
    return [
        s
        for s in sorted(found, key=lambda s: s.start_time or 0)
        if s.name == name and (s.attributes or {}).get("adk_stream.chat_id_hash") == hashed(chat_id)
    ]


def descendants(found: list[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    by_parent: dict[int, list[ReadableSpan]] = {}
    for span in found:
        if span.parent is not None:
            by_parent.setdefault(span.parent.span_id, []).append(span)
    out: list[ReadableSpan] = []
    todo = [root]
    while todo:
        children = by_parent.get(todo.pop().context.span_id, [])
        out.extend(children)
        todo.extend(children)
    return out


def assert_private(found: list[ReadableSpan], *secrets: str) -> None:
    """No attribute or event of our spans holds the chat id or the user's words."""
    for span in found:
        if not span.name.startswith("adk_stream."):
            continue
        values = [*(span.attributes or {}).values()]
        values += [v for event in span.events for v in (event.attributes or {}).values()]
        for value in values:
            assert not any(secret in str(value) for secret in secrets), (span.name, value)


# -- spans ------------------------------------------------------------------------------------


def test_a_stream_response_is_one_span_over_adks_spans(
    app: InProcessApp, spans: InMemorySpanExporter
) -> None:
    chat_id = new_chat()
    result = post_stream(app, chat_body(chat_id, user_message("Hello there, robot", "u1")))
    assert result.of_type("finish")[0]["finishReason"] == "stop"
    found = finished(spans, 1, "adk_stream.response")
    (response,) = ours(found, chat_id)
    attributes = dict(response.attributes)
    first_chunk_ms = attributes.pop("adk_stream.time_to_first_chunk_ms")
    assert 0 < first_chunk_ms < 60_000
    assert attributes == {
        "adk_stream.chat_id_hash": hashed(chat_id),
        "adk_stream.transport": "stream",
        "adk_stream.ai_sdk": 6,
        "adk_stream.continuation": False,
        "adk_stream.finish_reason": "stop",
        "adk_stream.approvals.requested": 0,
        "adk_stream.approvals.approved": 0,
        "adk_stream.approvals.denied": 0,
    }
    assert [e.name for e in response.events] == ["adk_stream.first_chunk"]
    names = [s.name for s in descendants(found, response)]
    assert any(n.startswith("invoke_agent") for n in names), names
    assert any(n.startswith("generate_content") for n in names), names
    assert_private(found, chat_id, "Hello there")


def test_approvals_and_the_tool_run_are_on_the_responses_spans(
    app: InProcessApp, spans: InMemorySpanExporter
) -> None:
    chat_id = new_chat()
    first = post_stream(app, chat_body(chat_id, user_message(PAYMENT, "u1")))
    message = answer_approvals(assistant_message(first), True)
    body = chat_body(chat_id, user_message(PAYMENT, "u1"), message, messageId=message["id"])
    second = post_stream(app, body)
    assert "Sent 50 USD to Hanako" in second.text()
    asking, continuing = ours(finished(spans, 2, "adk_stream.response"), chat_id)
    assert asking.attributes["adk_stream.finish_reason"] == "tool-calls"
    assert asking.attributes["adk_stream.approvals.requested"] == 1
    assert "adk_stream.approval_requested" in [e.name for e in asking.events]
    assert continuing.attributes["adk_stream.continuation"] is True
    assert continuing.attributes["adk_stream.approvals.approved"] == 1
    assert continuing.attributes["adk_stream.finish_reason"] == "stop"
    (decision,) = [e for e in continuing.events if e.name == "adk_stream.approval"]
    assert decision.attributes == {"outcome": "approved"}
    found = list(spans.get_finished_spans())
    tools = [s.name for s in descendants(found, continuing) if s.name.startswith("execute_tool")]
    assert tools, "the approved payment runs under the continuation's span"
    assert_private(found, chat_id, PAYMENT)


def test_an_ai7_socket_request_is_a_span_of_its_own(
    app: InProcessApp, spans: InMemorySpanExporter
) -> None:
    chat_id = new_chat()
    socket = V7Socket(app)
    try:
        reply = socket.reply(socket.send(chat_id, user_message("Hello there", "u1")))
    finally:
        socket.close()
    assert reply.last == "end"
    (response,) = ours(finished(spans, 1, "adk_stream.response"), chat_id)
    assert response.attributes["adk_stream.transport"] == "ai7-socket"
    assert response.attributes["adk_stream.ai_sdk"] == 7
    found = list(spans.get_finished_spans())
    assert any(s.name.startswith("invoke_agent") for s in descendants(found, response))


def test_live_responses_and_adks_spans_share_the_runs_span(
    app: InProcessApp, spans: InMemorySpanExporter
) -> None:
    live = LiveSocket(app, new_chat())
    try:
        chat = LiveChat(live)
        chat.say(PAYMENT)
        chat.answer(True)
    finally:
        live.close()
    found = finished(spans, 1, "adk_stream.live")
    (run,) = ours(found, live.chat_id, "adk_stream.live")
    below = descendants(found, run)
    asking, continuing = ours(below, live.chat_id)
    assert asking.parent.span_id == continuing.parent.span_id == run.context.span_id
    assert asking.attributes["adk_stream.transport"] == "live"
    assert asking.attributes["adk_stream.approvals.requested"] == 1
    assert continuing.attributes["adk_stream.approvals.approved"] == 1
    (tool,) = [s for s in below if s.name.startswith("execute_tool")]
    assert [e.attributes for e in tool.events if e.name == "adk_stream.approval"] == [
        {"outcome": "approved"}
    ]
    assert any(s.name.startswith("invoke_agent") for s in below)
    assert_private(found, live.chat_id, PAYMENT)


# -- metrics ----------------------------------------------------------------------------------


def scrape(target: InProcessApp) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = target.http.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def figure(
    scraped: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return scraped.get((name, frozenset(labels.items())), 0.0)


def say(target: InProcessApp, chat_id: str, text: str) -> StreamResult:
    return post_stream(target, chat_body(chat_id, user_message(text, "u1")))


def decide(target: InProcessApp, chat_id: str, text: str, approved: bool) -> StreamResult:
    first = say(target, chat_id, text)
    assert first.of_type("tool-approval-request"), first.types()
    message = answer_approvals(assistant_message(first), approved)
    body = chat_body(chat_id, user_message(text, "u1"), message, messageId=message["id"])
    return post_stream(target, body)


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    with in_process_app(tmp_path_factory.mktemp("metered"), agent=AGENT, metrics=True) as target:
        yield target


def test_metrics_count_stream_responses_approvals_and_errors(metered: InProcessApp) -> None:
    assert say(metered, new_chat(), "hello").of_type("finish")[0]["finishReason"] == "stop"
    assert "transferred" in decide(metered, new_chat(), "transfer 500", True).text()
    assert decide(metered, new_chat(), "transfer 300", False).of_type("tool-output-denied")
    assert say(metered, new_chat(), "explode").of_type("error")
    scraped = scrape(metered)
    stream = {"transport": "stream"}
    assert figure(scraped, "adk_stream_responses_total", finish_reason="stop", **stream) == 3
    assert figure(scraped, "adk_stream_responses_total", finish_reason="tool-calls", **stream) == 2
    assert figure(scraped, "adk_stream_responses_total", finish_reason="error", **stream) == 1
    assert figure(scraped, "adk_stream_approval_requests_total", **stream) == 2
    assert figure(scraped, "adk_stream_approvals_total", outcome="approved", **stream) == 1
    assert figure(scraped, "adk_stream_approvals_total", outcome="denied", **stream) == 1
    errors = {k: v for k, v in scraped.items() if k[0] == "adk_stream_errors_total"}
    assert list(errors.values()) == [1], errors
    ((_, labels),) = errors
    assert dict(labels)["transport"] == "stream" and dict(labels)["kind"] == "RuntimeError"
    assert figure(scraped, "adk_stream_active_responses", **stream) == 0
    # Every response had some of the agent's answer to deliver.
    assert figure(scraped, "adk_stream_time_to_first_chunk_seconds_count", **stream) == 6
    assert figure(scraped, "adk_stream_time_to_first_chunk_seconds_sum", **stream) > 0


def test_metrics_count_live_and_ai7_socket_responses(tmp_path: Any) -> None:
    with in_process_app(tmp_path, metrics=True) as target:
        live = LiveSocket(target, new_chat())
        try:
            chat = LiveChat(live)
            chat.say(PAYMENT)
            chat.answer(True)
            chat.say(PAYMENT)
            chat.answer(False)
        finally:
            live.close()
        socket = V7Socket(target)
        try:
            assert socket.reply(socket.send(new_chat(), user_message("Hello", "u1"))).last == "end"
        finally:
            socket.close()
        scraped = scrape(target)
    live_ = {"transport": "live"}
    assert figure(scraped, "adk_stream_responses_total", finish_reason="tool-calls", **live_) == 2
    assert figure(scraped, "adk_stream_responses_total", finish_reason="stop", **live_) == 2
    assert figure(scraped, "adk_stream_approval_requests_total", **live_) == 2
    assert figure(scraped, "adk_stream_approvals_total", outcome="approved", **live_) == 1
    assert figure(scraped, "adk_stream_approvals_total", outcome="denied", **live_) == 1
    assert figure(scraped, "adk_stream_active_responses", **live_) == 0
    socket_ = {"transport": "ai7-socket"}
    assert figure(scraped, "adk_stream_responses_total", finish_reason="stop", **socket_) == 1
    assert figure(scraped, "adk_stream_time_to_first_chunk_seconds_count", **socket_) == 1


def test_an_approval_that_times_out_is_counted_as_such(tmp_path: Any) -> None:
    with in_process_app(tmp_path, metrics=True, approval_timeout_seconds=0.1) as target:
        live = LiveSocket(target, new_chat())
        try:
            chat = LiveChat(live)
            chat.say(PAYMENT)
            time.sleep(0.6)  # six times the timeout: its lapse is what is counted
            late = chat.answer(True)
        finally:
            live.close()
        assert late.of_type("tool-output-error")
        scraped = scrape(target)
    live_ = {"transport": "live"}
    assert figure(scraped, "adk_stream_approvals_total", outcome="timeout", **live_) == 1
    assert figure(scraped, "adk_stream_approvals_total", outcome="approved", **live_) == 0


def test_refused_requests_are_counted_by_status(tmp_path: Any) -> None:
    """Requests refused before a response began: no response, but what an operator watches
    for (bad input, busy chats, load shed at the response limit)."""
    agent = "tests.support.agents.tools:root_agent"  # its `slow N` holds a response open
    with in_process_app(tmp_path, metrics=True, max_concurrent_responses=1, agent=agent) as target:
        assert target.http.post("/stream", json={"id": "c1", "messages": []}).status_code == 422
        plain = {"content-type": "text/plain"}
        assert target.http.post("/stream", content=b"x", headers=plain).status_code == 415
        slow = chat_body(new_chat(), user_message("slow 1", "u1"))
        with target.http.stream("POST", "/stream", json=slow) as held:
            lines = held.iter_lines()
            assert next(lines).startswith("data: ")  # the run holds the only slot
            assert say_status(target, new_chat(), "hi") == 503
            list(lines)
        live = LiveSocket(target, new_chat())
        try:  # a message of another chat than the socket's
            assert live.message(user_message("hi", "u1"), id="other").of_type("error")
        finally:
            live.close()
        socket = V7Socket(target)
        try:
            socket.frame(
                {"type": "send", "requestId": "r-bad", "id": "c2", "trigger": "nonsense"}
                | {"messages": [], "headers": {}, "body": {}}
            )
            assert socket.reply("r-bad").last == "error"
        finally:
            socket.close()
        scraped = scrape(target)
    refused = {
        (dict(labels)["transport"], dict(labels)["status"]): value
        for (name, labels), value in scraped.items()
        if name == "adk_stream_refused_requests_total"
    }
    assert refused == {
        ("stream", "422"): 1,
        ("stream", "415"): 1,
        ("stream", "503"): 1,
        ("ai7-socket", "422"): 1,
        ("live", "422"): 1,
    }


def say_status(target: InProcessApp, chat_id: str, text: str) -> int:
    body = chat_body(chat_id, user_message(text, "u1"))
    status: int = target.http.post("/stream", json=body).status_code
    return status


def test_metrics_are_off_by_default(app: InProcessApp) -> None:
    assert app.http.get("/metrics").status_code == 404


@pytest.mark.out_of_process  # the page's snippet in a Python of its own
def test_the_readmes_tracing_setup_runs() -> None:
    """The snippet of the page "Traces and metrics" (docs/operating/observability.md), run as
    written in a Python of its own (it sets the global provider)."""
    match = re.search(r"```python\n(.*?)```", section("Traces and metrics"), re.DOTALL)
    assert match, "the section has a Python example"
    check = "\nassert type(trace.get_tracer_provider()).__name__ == 'TracerProvider'\n"
    done = subprocess.run(
        [sys.executable, "-c", match[1] + check], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
