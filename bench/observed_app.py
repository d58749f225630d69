"""``server:app`` with everything of issue 15 that watches a response switched on, for
benchmark 9: an OpenTelemetry SDK that makes, batches and drops every span (the cost of a
real exporter's network is the exporter's, not ours), Prometheus metrics
(``ADK_STREAM_METRICS``) and recording (``ADK_STREAM_RECORD_DIR``, set by the benchmark)."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class DroppingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(DroppingExporter()))
trace.set_tracer_provider(provider)

from server import app  # noqa: E402 - after the provider, as a user's entry module does it

__all__ = ["app"]
