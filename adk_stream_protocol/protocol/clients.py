"""The AI SDK clients the server speaks to, and everything ai 6 and ai 7 do differently,
stated once (docs/adr/0059-part-kinds.md).

``AI6`` is the newest 6.x (6.0.326) as the fold follows it, sent only what the strict 6.0.25
accepts (docs/adr/0002); ``AI7`` is ai 7.x (docs/adr/0023). The converter, the message fold,
the rebuild of a message and the replay server read these fields; none of them compares
version numbers. The public ``ai_sdk: 6 | 7`` parameters name a client by its version, and
``client_for`` turns that into its table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from adk_stream_protocol.protocol.chunks import AiSdkVersion, FinishReason

# Every chunk type ai 6's schema has (`data-*` aside: every client accepts those).
_AI6_CHUNK_TYPES = frozenset(
    {
        "start",
        "finish",
        "start-step",
        "finish-step",
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-input-error",
        "tool-approval-request",
        "tool-output-available",
        "tool-output-error",
        "tool-output-denied",
        "source-url",
        "source-document",
        "file",
        "message-metadata",
        "error",
        "abort",
    }
)
_AI6_FINISH_REASONS: frozenset[FinishReason] = frozenset(
    {"stop", "length", "content-filter", "tool-calls", "error", "other"}
)


@dataclass(frozen=True, slots=True)
class AiSdkClient:
    """What one major version of the AI SDK client accepts and does, where they differ."""

    version: AiSdkVersion
    # The chunk types its schema accepts, `data-*` aside; it stops reading at any other.
    chunk_types: frozenset[str]
    finish_reasons: frozenset[FinishReason]
    # The finish reason of an answer the user stopped: ai 7's "interrupted" keeps it from
    # sending the answer again automatically.
    stopped_reason: FinishReason
    # `finish-step` forgets the open text and reasoning parts: a later delta for one throws.
    finish_step_closes_blocks: bool
    # `text-end` carries citations: the converter adds them from grounding, the fold keeps
    # them on the text part, a rebuilt text part sends them.
    text_end_citations: bool
    # A `tool-approval-request` may carry a confirmation's hint and payload (`reason`,
    # `approvalDescriptor`): the converter and a rebuild send them (6.0.25's strict schema
    # refuses any key beyond the ids).
    approval_request_details: bool
    # Its schema has a request's `reason` and `isAutomatic`: the fold keeps them on the
    # approval (`requestReason`, `isAutomatic`).
    approval_request_reason: bool
    # `tool-input-error` on a `tool-*` part keeps the input it could not run as `rawInput`
    # (not `input`).
    input_error_raw_input: bool
    # `fixJson` counts an array's first character as valid before it reads it as a value.
    fix_json_array_start_valid: bool

    def accepts(self, chunk_type: str) -> bool:
        """Whether its schema has this chunk type."""
        return chunk_type in self.chunk_types or chunk_type.startswith("data-")


AI6 = AiSdkClient(
    version=6,
    chunk_types=_AI6_CHUNK_TYPES,
    finish_reasons=_AI6_FINISH_REASONS,
    stopped_reason="other",
    finish_step_closes_blocks=True,
    text_end_citations=False,
    approval_request_details=False,
    approval_request_reason=False,
    input_error_raw_input=True,
    fix_json_array_start_valid=True,
)

AI7 = AiSdkClient(
    version=7,
    chunk_types=_AI6_CHUNK_TYPES
    | {"tool-approval-response", "reset-step", "custom", "reasoning-file", "steering-message"},
    finish_reasons=_AI6_FINISH_REASONS | {"interrupted"},
    stopped_reason="interrupted",
    finish_step_closes_blocks=False,
    text_end_citations=True,
    approval_request_details=True,
    approval_request_reason=True,
    input_error_raw_input=False,
    fix_json_array_start_valid=False,
)

CLIENTS: Mapping[AiSdkVersion, AiSdkClient] = MappingProxyType({6: AI6, 7: AI7})


def client_for(version: AiSdkVersion) -> AiSdkClient:
    """The client of an AI SDK major version (6 or 7)."""
    return CLIENTS[version]


def downgraded(chunk: Mapping[str, Any], client: AiSdkClient) -> dict[str, Any] | None:
    """A wire chunk made for ai 7 (a recording's), as ``client`` accepts it: without the
    fields it does not know; ``None`` for a chunk type it does not have."""
    kind = chunk.get("type")
    if not isinstance(kind, str) or not client.accepts(kind):
        return None
    if kind == "finish" and chunk.get("finishReason") not in (None, *client.finish_reasons):
        return {**chunk, "finishReason": client.stopped_reason}
    if kind == "text-end" and not client.text_end_citations:
        return {k: v for k, v in chunk.items() if k != "citations"}
    if kind == "tool-approval-request" and not client.approval_request_details:
        return {k: v for k, v in chunk.items() if k not in ("reason", "approvalDescriptor")}
    return dict(chunk)
