"""ADK's telemetry switches, decided once for every run the server makes.

ADK asks a run's ``TelemetryConfig`` several questions per streamed partial: which semantic
conventions to follow, whether an experimental feature is on. A question left to the
environment costs a read of one of the config's private attributes per fallback, and pydantic
serves each such read by first raising and catching an ``AttributeError`` (about 3 µs). The
same answers, given as the config's own public fields, are read directly (docs/adr/0055).
"""

from __future__ import annotations

import os

from google.adk.telemetry import TelemetryConfig

# ADK's variable naming experimental telemetry features one by one (its constant is private).
EXPERIMENTAL_FEATURES_VARIABLE = "ADK_EXPERIMENTAL_TELEMETRY_FEATURES"


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
