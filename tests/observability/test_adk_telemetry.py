"""The telemetry switches every run gets answer as ADK's own reading of the environment does
(``observability/adk_telemetry.py``, docs/adr/0055)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
from google.adk.telemetry import TelemetryConfig
from google.adk.telemetry import context as adk_telemetry_context

from adk_stream_protocol.observability.adk_telemetry import resolved_telemetry_config
from tests.support import in_process_app

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


def test_every_run_of_the_app_gets_the_resolved_config(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    environment.setenv("ADK_EXPERIMENTAL_TELEMETRY", "1")
    expected = resolved_telemetry_config()
    assert expected.adk_experimental_telemetry_opt_in is True
    with in_process_app(tmp_path) as served:
        bridge = served.app.state.bridge
        assert bridge.run_config({"stamp": 1}).telemetry == expected
        assert bridge.live_run_config().telemetry == expected
