"""What the model reported over one response: its finish reason, token usage and version.

The AI SDK totals usage over a message's steps, so usage is summed over the response's model
calls; it reaches the client as the ``finish`` chunk's message metadata.
"""

from __future__ import annotations

from google.adk.events import Event
from google.genai import types
from pydantic import JsonValue

from adk_stream_protocol.protocol.chunks import FinishReason
from adk_stream_protocol.protocol.event_values import map_finish_reason


class ResponseUsage:
    """The finish reason, usage and model version of one response's final events."""

    def __init__(self) -> None:
        self.finish_reason: FinishReason | None = None
        self._usage: dict[str, int] = {}
        self._model_version: str | None = None

    def observe(self, event: Event) -> None:
        """Any event: it may name the model's version."""
        if event.model_version:
            self._model_version = event.model_version

    def record_final(self, event: Event) -> None:
        """A non-partial event: its finish reason and usage count."""
        reason = map_finish_reason(event.finish_reason)
        if reason is not None:
            self.finish_reason = reason
        if event.usage_metadata is not None:
            self._add(event.usage_metadata)

    def metadata(self) -> JsonValue:
        """The ``finish`` chunk's message metadata, or None when there is nothing to say."""
        metadata: dict[str, JsonValue] = {}
        if self._usage:
            metadata["usage"] = dict(self._usage)
        if self._model_version:
            metadata["modelVersion"] = self._model_version
        return metadata or None

    def _add(self, usage: types.GenerateContentResponseUsageMetadata) -> None:
        output_tokens = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
        figures = {
            "inputTokens": usage.prompt_token_count or 0,
            "outputTokens": output_tokens,
            "totalTokens": usage.total_token_count
            or (usage.prompt_token_count or 0) + output_tokens,
        }
        if usage.thoughts_token_count:
            figures["reasoningTokens"] = usage.thoughts_token_count
        if usage.cached_content_token_count:
            figures["cachedInputTokens"] = usage.cached_content_token_count
        for key, value in figures.items():
            self._usage[key] = self._usage.get(key, 0) + value
