"""The telemetry switches every run gets answer as ADK's own reading of the environment does
(``observability/adk_telemetry.py``, docs/adr/0055)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, get_args

import pytest
from google.adk.telemetry import TelemetryConfig
from google.adk.telemetry import context as adk_telemetry_context
from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from adk_stream_protocol.observability.adk_telemetry import observes, resolved_telemetry_config
from tests.support.rig import ROOT

VARIABLES = (
    "OTEL_SEMCONV_STABILITY_OPT_IN",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS",
    "ADK_EXPERIMENTAL_TELEMETRY",
    "ADK_EXPERIMENTAL_TELEMETRY_FEATURES",
    "ADK_TELEMETRY_IGNORE_RUN_CONFIG",
    "ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN",
)

ENVIRONMENTS = {
    "nothing set": {},
    "experimental semantic conventions": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "http,gen_ai_latest_experimental"
    },
    "the legacy schema": {"ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1"},
    "the legacy schema, experimental conventions": {
        "ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "otel_semconv_1_36",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    },
    "all experimental telemetry": {"ADK_EXPERIMENTAL_TELEMETRY": "true"},
    "some experimental features": {"ADK_EXPERIMENTAL_TELEMETRY_FEATURES": "mcp, skills"},
    "an empty feature list": {"ADK_EXPERIMENTAL_TELEMETRY_FEATURES": " , "},
    "content on spans": {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT",
        "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS": "false",
    },
    "content in events, legacy truthy": {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"
    },
    "the admin lock": {
        "ADK_TELEMETRY_IGNORE_RUN_CONFIG": "1",
        "ADK_EXPERIMENTAL_TELEMETRY_FEATURES": "workflow",
        "ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1",
    },
}

PROPERTIES = (
    "should_use_experimental_genai_semconv",
    "resolved_content_capturing_mode",
    "content_capturing_mode_value",
    "should_add_content_to_logs",
    "should_add_content_to_experimental_spans",
    "should_add_content_to_legacy_spans",
    "should_emit_experimental_telemetry",
)


def _answers(config: TelemetryConfig) -> dict[str, object]:
    answers: dict[str, object] = {name: getattr(config, name) for name in PROPERTIES}
    # Private in ADK, and the question it asks most often: each feature, one by one.
    feature_enabled = getattr(config, "_experimental_feature_enabled", None)
    assert feature_enabled is not None, "TelemetryConfig._experimental_feature_enabled is gone"
    for feature in get_args(adk_telemetry_context._ExperimentalFeature):
        answers[f"feature {feature}"] = feature_enabled(feature)
    return answers


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("variables", ENVIRONMENTS.values(), ids=ENVIRONMENTS.keys())
def test_the_resolved_config_answers_as_the_environment_does(
    environment: pytest.MonkeyPatch, variables: dict[str, str]
) -> None:
    for name, value in variables.items():
        environment.setenv(name, value)
    assert _answers(resolved_telemetry_config()) == _answers(TelemetryConfig())


def test_by_default_the_answers_asked_per_partial_are_fields(
    environment: pytest.MonkeyPatch,
) -> None:
    """What saves the fallbacks: both answers are the config's own fields."""
    config = resolved_telemetry_config()
    # Which conventions by default depends on ADK's release (2.13: experimental; 2.11: stable).
    environment_says = TelemetryConfig().should_use_experimental_genai_semconv
    expected = "experimental" if environment_says else "stable"
    assert config.genai_semconv_stability_opt_in == expected
    assert config.adk_experimental_telemetry_opt_in is False
    # Content capturing stays with the environment (it also decides the older spans).
    assert config.capture_message_content is None


def test_a_feature_list_stays_with_adk(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("ADK_EXPERIMENTAL_TELEMETRY_FEATURES", "mcp")
    config = resolved_telemetry_config()
    assert config.adk_experimental_telemetry_opt_in is None
    assert config.experimental_features_opt_in is None


# Run in a new interpreter: OpenTelemetry's global providers can be set once per process,
# and another test of this worker may have set one.
_RUNS_BEFORE_AND_AFTER_A_PROVIDER = """
import json, sys, tempfile
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.rig import chat_body, in_process_app, post_stream, user_message


def asked(served, chat):
    result = post_stream(served, chat_body(chat, user_message("hello", chat + "-u")))
    return result.status, any(c["type"] == "text-delta" for c in result.chunks)


with tempfile.TemporaryDirectory() as tmp, in_process_app(Path(tmp)) as served:
    runners = served.app.state.bridge.runners

    def configs():
        runs = [runners.run_config({"stamp": 1}).telemetry, runners.live_run_config().telemetry]
        return [config.model_dump(mode="json") for config in runs]

    unobserved = configs()
    answered_unobserved = asked(served, "unobserved")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    observed = configs()
    answered_observed = asked(served, "observed")
    spans = sorted({span.name.split()[0] for span in exporter.get_finished_spans()})
    expected = {
        "observed": runners.run_telemetry.observed.model_dump(mode="json"),
        "unobserved": runners.run_telemetry.unobserved.model_dump(mode="json"),
    }
json.dump(
    {
        "before": unobserved,
        "after": observed,
        "answered": [answered_unobserved, answered_observed],
        "spans": spans,
        "expected": expected,
    },
    sys.stdout,
)
"""


def _runs_before_and_after_a_provider(environment: dict[str, str]) -> dict[str, Any]:
    env = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    env.update(environment)
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", _RUNS_BEFORE_AND_AFTER_A_PROVIDER],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.out_of_process  # a Python of its own per run
def test_a_run_nothing_observes_gets_the_cheapest_switches_and_one_observed_the_resolved(
    environment: pytest.MonkeyPatch,
) -> None:
    """Before any provider is set, ADK's telemetry reaches nobody: runs get the stable
    conventions without content. Once a tracer provider is set, the next runs get what the
    environment says, and ADK's spans reach it (docs/adr/0055, amendment)."""
    found = _runs_before_and_after_a_provider({"ADK_EXPERIMENTAL_TELEMETRY": "1"})
    expected = found["expected"]
    assert expected["unobserved"] == {
        "genai_semconv_stability_opt_in": "stable",
        "capture_message_content": "NO_CONTENT",
        "adk_experimental_telemetry_opt_in": True,  # as the environment has it
        "experimental_features_opt_in": None,
    }
    environment.setenv("ADK_EXPERIMENTAL_TELEMETRY", "1")
    assert expected["observed"] == resolved_telemetry_config().model_dump(mode="json")
    assert expected["observed"]["adk_experimental_telemetry_opt_in"] is True
    assert found["before"] == [expected["unobserved"]] * 2  # a /stream run and a /live run
    assert found["after"] == [expected["observed"]] * 2
    assert found["answered"] == [[200, True], [200, True]]
    assert "invoke_agent" in found["spans"], found["spans"]


def test_a_set_provider_of_any_kind_counts_as_observing() -> None:
    """Only the API's stand-ins (the proxy before one is set, the no-op) observe nothing;
    an SDK's provider, or any other, does."""
    assert not observes(trace.ProxyTracerProvider())
    assert not observes(trace.NoOpTracerProvider())
    assert not observes(metrics.NoOpMeterProvider())
    assert not observes(_logs.NoOpLoggerProvider())
    assert observes(TracerProvider())
    assert observes(MeterProvider())

    class VendorTracerProvider(trace.ProxyTracerProvider):
        pass

    assert observes(VendorTracerProvider())
