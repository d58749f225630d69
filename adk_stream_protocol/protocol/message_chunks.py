"""A UI message as the chunks that rebuild it: what a resumer of a continuation reads first.

A response that continues a message (after an approval or a browser tool's output) is folded
by its own client onto the message it holds. A client that resumes it after a reload starts
from an empty message instead (ai 7 and the newest 6.x reset at the replay's first ``start``),
so the continuation's chunk log carries the continued message, rebuilt, right after its
``start`` (docs/adr/0045-resuming-a-continuation.md). Only the resumer reads it there: the
client that asked gets the response as it is.

The chunks rebuild the parts in order, in their steps. A tool part is opened with
``tool-input-start`` and its input as one ``tool-input-delta``, never ``tool-input-available``
(unless it still waits for its input to be run): that chunk makes the client run a browser
tool (``onToolCall``), which has already run. So ai 7 and the newest 6.x keep the input's text
(``rawInput``) on a tool part that ends with no output (an error, a denial, a wait for an
approval). ai 6 has no chunk for an approval's answer (``tool-approval-response`` is ai 7's):
there the rebuilt part keeps the approval's id only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from adk_stream_protocol.protocol.chunks import (
    AiSdkVersion,
    BaseChunk,
    Citation,
    DataChunk,
    FileChunk,
    FinishStepChunk,
    MessageMetadataChunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    ReasoningStartChunk,
    SourceDocumentChunk,
    SourceUrlChunk,
    StartStepChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
    ToolApprovalRequestChunk,
    ToolApprovalResponseChunk,
    ToolInputAvailableChunk,
    ToolInputDeltaChunk,
    ToolInputStartChunk,
    ToolOutputAvailableChunk,
    ToolOutputDeniedChunk,
    ToolOutputErrorChunk,
)

Part = Mapping[str, Any]

# The ids of rebuilt text and reasoning blocks: closed at once, so they never meet the
# continuation's own ids; the prefix keeps them apart from a model's ids anyway.
_BLOCK_ID = "rebuilt-{}"


def message_chunks(message: Part, ai_sdk: AiSdkVersion = 6) -> list[BaseChunk]:
    """The chunks that rebuild ``message``'s parts and metadata on an empty message of the
    same id (the ``start`` that gives the id is the response's own)."""
    chunks: list[BaseChunk] = []
    if message.get("metadata") is not None:
        chunks.append(MessageMetadataChunk(message_metadata=message["metadata"]))
    in_step = False
    for index, part in enumerate(message.get("parts") or []):
        if part.get("type") == "step-start":
            # Each step closed as the response closed it: the continuation opens its own.
            if in_step:
                chunks.append(FinishStepChunk())
            in_step = True
        chunks.extend(_part_chunks(part, _BLOCK_ID.format(index), ai_sdk))
    if in_step:
        chunks.append(FinishStepChunk())
    return chunks


def _part_chunks(part: Part, block_id: str, ai_sdk: AiSdkVersion) -> list[BaseChunk]:
    kind = part.get("type")
    if not isinstance(kind, str):
        return []
    metadata = part.get("providerMetadata")
    # ai 7 and the newest 6.x keep a reasoning block's id on its part.
    block_id = part["id"] if isinstance(part.get("id"), str) else block_id
    if kind == "step-start":
        return [StartStepChunk()]
    if kind == "text":
        citations = part.get("citations") if ai_sdk >= 7 else None
        return [
            TextStartChunk(id=block_id, provider_metadata=metadata),
            TextDeltaChunk(id=block_id, delta=part.get("text", "")),
            TextEndChunk(
                id=block_id,
                provider_metadata=metadata,
                citations=[Citation.model_validate(c) for c in citations] if citations else None,
            ),
        ]
    if kind == "reasoning":
        return [
            ReasoningStartChunk(id=block_id, provider_metadata=metadata),
            ReasoningDeltaChunk(id=block_id, delta=part.get("text", "")),
            ReasoningEndChunk(id=block_id, provider_metadata=metadata),
        ]
    if kind == "source-url":
        return [
            SourceUrlChunk(
                source_id=part["sourceId"],
                url=part["url"],
                title=part.get("title"),
                provider_metadata=metadata,
            )
        ]
    if kind == "source-document":
        return [
            SourceDocumentChunk(
                source_id=part["sourceId"],
                media_type=part["mediaType"],
                title=part["title"],
                filename=part.get("filename"),
                provider_metadata=metadata,
            )
        ]
    if kind == "file":
        return [
            FileChunk(url=part["url"], media_type=part["mediaType"], provider_metadata=metadata)
        ]
    if kind.startswith("data-"):
        return [DataChunk(type=kind, data=part.get("data"), id=part.get("id"))]
    if kind.startswith("tool-") or kind == "dynamic-tool":
        return _tool_chunks(part, ai_sdk)
    return []  # a part no chunk makes: the client would not have it either


def _tool_chunks(part: Part, ai_sdk: AiSdkVersion) -> list[BaseChunk]:
    call_id: str = part["toolCallId"]
    dynamic = True if part.get("type") == "dynamic-tool" else None
    name = part["toolName"] if dynamic else str(part["type"]).removeprefix("tool-")
    state = part.get("state")
    executed = part.get("providerExecuted")
    if state == "input-available":
        # Still waiting for the browser: the client runs it, as it would have.
        return [
            ToolInputAvailableChunk(
                tool_call_id=call_id,
                tool_name=name,
                input=part.get("input"),
                provider_executed=executed,
                provider_metadata=part.get("callProviderMetadata"),
                dynamic=dynamic,
                title=part.get("title"),
            )
        ]
    chunks: list[BaseChunk] = [
        ToolInputStartChunk(
            tool_call_id=call_id,
            tool_name=name,
            provider_executed=executed,
            dynamic=dynamic,
            title=part.get("title"),
        )
    ]
    if "input" in part:
        text = json.dumps(part["input"], ensure_ascii=False, separators=(",", ":"))
        chunks.append(ToolInputDeltaChunk(tool_call_id=call_id, input_text_delta=text))
    approval = part.get("approval")
    if isinstance(approval, Mapping) and isinstance(approval.get("id"), str):
        chunks.append(
            ToolApprovalRequestChunk(
                approval_id=approval["id"],
                tool_call_id=call_id,
                reason=approval.get("requestReason") if ai_sdk >= 7 else None,
                approval_descriptor=approval.get("descriptor") if ai_sdk >= 7 else None,
            )
        )
        if ai_sdk >= 7 and isinstance(approval.get("approved"), bool):
            chunks.append(
                ToolApprovalResponseChunk(
                    approval_id=approval["id"],
                    approved=approval["approved"],
                    reason=approval.get("reason"),
                )
            )
    if state == "output-available":
        chunks.append(
            ToolOutputAvailableChunk(
                tool_call_id=call_id,
                output=part.get("output"),
                provider_executed=executed,
                dynamic=dynamic,
                preliminary=part.get("preliminary"),
            )
        )
    elif state == "output-error":
        chunks.append(
            ToolOutputErrorChunk(
                tool_call_id=call_id,
                error_text=part.get("errorText", ""),
                provider_executed=executed,
                dynamic=dynamic,
            )
        )
    elif state == "output-denied":
        chunks.append(ToolOutputDeniedChunk(tool_call_id=call_id))
    return chunks
