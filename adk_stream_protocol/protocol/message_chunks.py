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
there the rebuilt part keeps the approval's id only. Each part is rebuilt by its kind
(``parts/``); this module puts them in their steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adk_stream_protocol.protocol.chunks import (
    AiSdkVersion,
    BaseChunk,
    FinishStepChunk,
    MessageMetadataChunk,
)
from adk_stream_protocol.protocol.clients import client_for
from adk_stream_protocol.protocol.parts.kinds import kind_of

# The ids of rebuilt text and reasoning blocks: closed at once, so they never meet the
# continuation's own ids; the prefix keeps them apart from a model's ids anyway.
_BLOCK_ID = "rebuilt-{}"


def message_chunks(message: Mapping[str, Any], ai_sdk: AiSdkVersion = 6) -> list[BaseChunk]:
    """The chunks that rebuild ``message``'s parts and metadata on an empty message of the
    same id (the ``start`` that gives the id is the response's own)."""
    client = client_for(ai_sdk)
    chunks: list[BaseChunk] = []
    if message.get("metadata") is not None:
        chunks.append(MessageMetadataChunk(message_metadata=message["metadata"]))
    in_step = False
    for index, part in enumerate(message.get("parts") or []):
        part_type = part.get("type")
        if part_type == "step-start":
            # Each step closed as the response closed it: the continuation opens its own.
            if in_step:
                chunks.append(FinishStepChunk())
            in_step = True
        kind = kind_of(part_type) if isinstance(part_type, str) else None
        if kind is not None:  # a part of no kind: the client would not have it either
            chunks.extend(kind.rebuild(part, client, _BLOCK_ID.format(index)))
    if in_step:
        chunks.append(FinishStepChunk())
    return chunks
