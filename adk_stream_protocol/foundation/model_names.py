"""The offline model's name: the one place it is spelled."""

from __future__ import annotations

# Every model name with this prefix is the offline model ("offline-demo", "offline-fast").
OFFLINE_MODEL_PREFIX = "offline-"
OFFLINE_MODEL_NAME = f"{OFFLINE_MODEL_PREFIX}demo"
# How ADK's registry matches the names (the prefix holds no regex metacharacters).
OFFLINE_MODEL_PATTERN = f"{OFFLINE_MODEL_PREFIX}.*"


def is_offline_model(model: str) -> bool:
    """Whether a model name names the offline model."""
    return model.startswith(OFFLINE_MODEL_PREFIX)
