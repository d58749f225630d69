"""Prometheus metrics of one application (``ADK_STREAM_METRICS=true``).

Each ``Metrics`` has its own ``CollectorRegistry``: several apps in one process (tests, two
agents) count apart, and nothing registers in ``prometheus_client``'s global registry.
``prometheus-client`` is the optional extra ``metrics``: it is imported when a ``Metrics`` is
made, which only happens when the setting is on (``backends.check_extras`` names the extra
at start-up when it is missing).

Every label has a small, closed set of values: transports, finish reasons, approval outcomes,
and error kinds (ADK error codes and exception class names). No chat id, user or text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge, Histogram

# Seconds. A local model answers in milliseconds, Gemini in a fraction of a second to seconds.
FIRST_CHUNK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The counters the responses of one application update, and their text exposition."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        registry = self.registry
        self.active: Gauge = Gauge(
            "adk_stream_active_responses",
            "Responses streaming now, by transport.",
            ["transport"],
            registry=registry,
        )
        self.first_chunk: Histogram = Histogram(
            "adk_stream_time_to_first_chunk_seconds",
            "From a response's start to the first chunk of the agent's answer delivered.",
            ["transport"],
            buckets=FIRST_CHUNK_BUCKETS,
            registry=registry,
        )
        self.responses: Counter = Counter(
            "adk_stream_responses",
            "Responses ended, by transport and finish reason (`unfinished`: never sent one).",
            ["transport", "finish_reason"],
            registry=registry,
        )
        self.errors: Counter = Counter(
            "adk_stream_errors",
            "Responses that ended with an error chunk, by transport and kind (ADK error "
            "code or exception class).",
            ["transport", "kind"],
            registry=registry,
        )
        self.approval_requests: Counter = Counter(
            "adk_stream_approval_requests",
            "Approval requests sent to the client, by transport.",
            ["transport"],
            registry=registry,
        )
        self.approvals: Counter = Counter(
            "adk_stream_approvals",
            "Approvals decided, by transport and outcome (approved, denied, timeout, cancelled).",
            ["transport", "outcome"],
            registry=registry,
        )

        self.refused: Counter = Counter(
            "adk_stream_refused_requests",
            "Requests refused before a response began, by transport and HTTP status (an ai 7 "
            "socket's error frame carries the same status): 409 busy, 413/422 bad input, 503 "
            "at the response limit...",
            ["transport", "status"],
            registry=registry,
        )

    def exposition(self) -> tuple[bytes, str]:
        """The registry in Prometheus' text format, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
