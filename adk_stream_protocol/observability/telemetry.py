"""What a response tells the operator: an OpenTelemetry span and, when they are on, the
Prometheus metrics (docs/adr/0027).

A turn makes one ``ResponseObserver`` per response (``Telemetry.response``); the ``Response``
tells it the moments that matter (the first chunk of the answer, approval requests and
decisions, an error, the end), and it turns each into span attributes and metric updates.
Only ``opentelemetry-api`` is used: with no SDK configured the spans are non-recording and
cost next to nothing. The spans carry a hash of the chat id, never the id, and no user text.

The run of ``/stream`` (and of an ai 7 socket's request) starts while the response's span is
the current one, so ADK's own spans (``invocation``, ``call_llm``, ``execute_tool``) are its
descendants. A ``/live`` run serves every response of its socket, so its ADK spans nest under
the run's span (``adk_stream.live``), and each response's span is a child of that one.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

from google.adk.events import Event
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode

from adk_stream_protocol.observability.metrics import Metrics
from adk_stream_protocol.protocol.chunks import (
    BaseChunk,
    FinishChunk,
    ToolApprovalRequestChunk,
    Transport,
)

logger = logging.getLogger(__name__)

# What became of an approval (``coordination.Outcome`` on /live).
ApprovalOutcome = Literal["approved", "denied", "timeout", "cancelled"]

TRACER_NAME = "adk_stream_protocol"
RESPONSE_SPAN = "adk_stream.response"
LIVE_SPAN = "adk_stream.live"
# Hex digits of SHA-256 kept: enough to tell chats apart, and to find one's traces from its id.
_HASH_DIGITS = 16


def chat_id_hash(chat_id: str) -> str:
    return hashlib.sha256(chat_id.encode()).hexdigest()[:_HASH_DIGITS]


def error_code(event: Event) -> str:
    """The kind of an ADK error event: its error code."""
    return str(getattr(event.error_code, "name", event.error_code))


class Telemetry:
    """One application's tracer and, when ``ADK_STREAM_METRICS`` is on, its metrics."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.metrics = metrics
        # A proxy of the global provider: one configured after start-up is used too.
        self._tracer = trace.get_tracer(TRACER_NAME)

    def response(
        self,
        chat_id: str,
        transport: Transport,
        *,
        ai_sdk: int,
        continuation: bool,
        parent: Context | None = None,
    ) -> ResponseObserver:
        span = self._tracer.start_span(
            RESPONSE_SPAN,
            context=parent,
            attributes={
                "adk_stream.chat_id_hash": chat_id_hash(chat_id),
                "adk_stream.transport": transport,
                "adk_stream.ai_sdk": ai_sdk,
                "adk_stream.continuation": continuation,
            },
        )
        return ResponseObserver(span, transport, self.metrics)

    def live_run(self, chat_id: str) -> LiveRunTrace:
        """The span of a socket's ``run_live``, from its start to the socket's close."""
        span = self._tracer.start_span(
            LIVE_SPAN,
            attributes={"adk_stream.chat_id_hash": chat_id_hash(chat_id)},
        )
        return LiveRunTrace(span)

    def approval_outcome(self, transport: Transport, outcome: ApprovalOutcome) -> None:
        """What the /live gate made of an approval. The tool's span (ADK's, current while
        the gate runs) gets it as an event."""
        trace.get_current_span().add_event("adk_stream.approval", {"outcome": outcome})
        if self.metrics is not None:
            self.metrics.approvals.labels(transport, outcome).inc()

    def refused(self, transport: Transport, status: int) -> None:
        """A request refused before its response began (no span: nothing ran)."""
        if self.metrics is not None:
            self.metrics.refused.labels(transport, str(status)).inc()

    def exposition(self) -> tuple[bytes, str]:
        assert self.metrics is not None, "/metrics is served only when metrics are on"
        return self.metrics.exposition()


class LiveRunTrace:
    def __init__(self, span: Span) -> None:
        self._span = span
        self.context = trace.set_span_in_context(span)

    @contextmanager
    def current(self) -> Iterator[None]:
        with _current(self.context):
            yield

    def end(self) -> None:
        self._span.end()


class ResponseObserver:
    """The span and metrics of one response; ``end`` once (later calls do nothing)."""

    def __init__(self, span: Span, transport: Transport, metrics: Metrics | None) -> None:
        self.span = span
        self._transport = transport
        self._metrics = metrics
        self._started = time.perf_counter()
        self._answered = False
        self._first_chunk = False
        self._requested = 0
        self._decided = {"approved": 0, "denied": 0}
        self._error: str | None = None
        self._finish_reason: str | None = None
        self._ended = False
        if metrics is not None:
            metrics.active.labels(transport).inc()

    @classmethod
    def inert(cls) -> ResponseObserver:
        """Observes nothing: for a ``Response`` made without one."""
        return cls(trace.INVALID_SPAN, "stream", None)

    @contextmanager
    def current(self) -> Iterator[None]:
        """The response's span as the current one (tasks started inside inherit it)."""
        with _current(trace.set_span_in_context(self.span)):
            yield

    def answered(self, *, delivered: bool) -> None:
        """The run produced chunks of the answer; delivered, or held back (deferral)."""
        self._answered = True
        if delivered:
            self.delivered()

    def delivered(self) -> None:
        """Chunks went to the client: the first of the answer's sets the time to it."""
        if self._first_chunk or not self._answered or self._ended:
            return
        self._first_chunk = True
        seconds = time.perf_counter() - self._started
        self.span.set_attribute("adk_stream.time_to_first_chunk_ms", round(seconds * 1000, 3))
        self.span.add_event("adk_stream.first_chunk")
        if self._metrics is not None:
            self._metrics.first_chunk.labels(self._transport).observe(seconds)

    def chunks(self, chunks: Sequence[BaseChunk]) -> None:
        """What a response's chunks say: approval requests, and its finish reason."""
        for chunk in chunks:
            if isinstance(chunk, ToolApprovalRequestChunk):
                self._requested += 1
                self.span.add_event("adk_stream.approval_requested")
                if self._metrics is not None:
                    self._metrics.approval_requests.labels(self._transport).inc()
            elif isinstance(chunk, FinishChunk):
                self._finish_reason = chunk.finish_reason

    def approval_decided(self, approved: bool) -> None:
        """A decision the client's continuation carries. On /live the gate counts the
        outcomes (``Telemetry.approval_outcome``): there a late answer may find a timeout."""
        outcome = "approved" if approved else "denied"
        self._decided[outcome] += 1
        self.span.add_event("adk_stream.approval", {"outcome": outcome})
        if self._metrics is not None and self._transport != "live":
            self._metrics.approvals.labels(self._transport, outcome).inc()

    def error(self, kind: str) -> None:
        """The response reports an error: an ADK error code or an exception's class. Only
        the kind goes in the span: messages can hold what the error chunk redacts."""
        if self._error is None:
            self._error = kind

    def end(self) -> None:
        if self._ended:
            return
        self._ended = True
        reason = self._finish_reason or "unfinished"
        span = self.span
        span.set_attribute("adk_stream.finish_reason", reason)
        span.set_attribute("adk_stream.approvals.requested", self._requested)
        span.set_attribute("adk_stream.approvals.approved", self._decided["approved"])
        span.set_attribute("adk_stream.approvals.denied", self._decided["denied"])
        if self._error is not None:
            span.set_attribute("adk_stream.error_kind", self._error)
            span.set_status(Status(StatusCode.ERROR, self._error))
        span.end()
        metrics = self._metrics
        if metrics is not None:
            metrics.active.labels(self._transport).dec()
            metrics.responses.labels(self._transport, reason).inc()
            if self._error is not None:
                metrics.errors.labels(self._transport, self._error).inc()


@contextmanager
def _current(context: Context) -> Iterator[None]:
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)
