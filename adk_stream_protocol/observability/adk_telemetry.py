"""ADK's telemetry switches, decided once for every run the server makes.

ADK asks a run's ``TelemetryConfig`` several questions per streamed partial: which semantic
conventions to follow, whether an experimental feature is on. A question left to the
environment costs a read of one of the config's private attributes per fallback, and pydantic
serves each such read by first raising and catching an ``AttributeError`` (about 3 µs). The
same answers, given as the config's own public fields, are read directly (docs/adr/0055).

Where no OpenTelemetry provider is set, ADK's spans, logs and metrics reach nobody, yet it
still builds their attributes for every partial. Such runs get the switches under which it
builds the least: the stable conventions, no message content (docs/adr/0055).
"""

from __future__ import annotations

import os

from google.adk.telemetry import ContentCapturingMode, TelemetryConfig
from opentelemetry import _logs, metrics, trace

# ADK's variable naming experimental telemetry features one by one (its constant is private).
EXPERIMENTAL_FEATURES_VARIABLE = "ADK_EXPERIMENTAL_TELEMETRY_FEATURES"

# The providers OpenTelemetry's API hands out while none is set, and its no-op ones: what
# they are given is dropped. OpenTelemetry has no public "is one set" question, so they are
# known by name; a provider of any other name (an SDK's, a vendor's) counts as observing.
_UNOBSERVING_PROVIDERS = frozenset(
    {
        ("opentelemetry.trace", "ProxyTracerProvider"),
        ("opentelemetry.trace", "NoOpTracerProvider"),
        ("opentelemetry.metrics._internal", "_ProxyMeterProvider"),
        ("opentelemetry.metrics", "NoOpMeterProvider"),
        ("opentelemetry._logs._internal", "ProxyLoggerProvider"),
        ("opentelemetry._logs._internal", "NoOpLoggerProvider"),
    }
)


def resolved_telemetry_config() -> TelemetryConfig:
    """A config that answers as ``TelemetryConfig()`` does in this environment, with the
    answers that can be set without changing any other one set explicitly.

    - The semantic conventions: always.
    - Experimental telemetry: when it is all on, or all off. A list of features stays with
      ADK, which reads it the same way either way.
    - Content capturing is left to the environment: setting it would also decide whether
      ADK's older spans carry content, which has a variable of its own.

    Where ``ADK_TELEMETRY_IGNORE_RUN_CONFIG`` is set, ADK ignores these fields and reads the
    environment, which gives the same answers again.
    """
    environment = TelemetryConfig()
    experimental: bool | None = None
    if environment.should_emit_experimental_telemetry:
        experimental = True
    elif not os.environ.get(EXPERIMENTAL_FEATURES_VARIABLE, "").strip(" ,"):
        experimental = False
    return TelemetryConfig(
        genai_semconv_stability_opt_in=(
            "experimental" if environment.should_use_experimental_genai_semconv else "stable"
        ),
        adk_experimental_telemetry_opt_in=experimental,
    )


def unobserved_telemetry_config(observed: TelemetryConfig) -> TelemetryConfig:
    """The switches for a run whose telemetry reaches nobody: those under which ADK builds
    the least per partial (measured: bench/PROFILE.md), experimental telemetry as
    ``observed`` has it."""
    return TelemetryConfig(
        genai_semconv_stability_opt_in="stable",
        capture_message_content=ContentCapturingMode.NO_CONTENT,
        adk_experimental_telemetry_opt_in=observed.adk_experimental_telemetry_opt_in,
    )


def observes(provider: object) -> bool:
    """Whether what a tracer, meter or logger ``provider`` is given reaches anybody."""
    return (type(provider).__module__, type(provider).__qualname__) not in _UNOBSERVING_PROVIDERS


def telemetry_observed() -> bool:
    """Whether a tracer, meter or logger provider is set: then ADK's telemetry is somebody's,
    and its runs get the environment's switches."""
    return (
        observes(trace.get_tracer_provider())
        or observes(metrics.get_meter_provider())
        or observes(_logs.get_logger_provider())
    )


class RunTelemetry:
    """Which of the two configs a run gets, asked when it starts: a provider may be set after
    the app (an instrumentation's start-up, a test)."""

    def __init__(self) -> None:
        self.observed = resolved_telemetry_config()
        self.unobserved = unobserved_telemetry_config(self.observed)

    def current(self) -> TelemetryConfig:
        return self.observed if telemetry_observed() else self.unobserved
