"""Who answered: the agent behind each part of a response, in an app with sub-agents
(docs/adr/0044).

A ``data-agent`` part, ``{"name": <agent>}``, comes before the first part of a response and
before the first part of every agent that takes over after it (a ``transfer_to_agent``, the
next agent of a workflow). The agent of any part is the name in the ``data-agent`` part last
before it in its message. No transient part, so it stays in the message; no id, so each one is
a part of its own. A page that does not look for it shows the same as without it: stock
``useChat`` renders no data part, and the helpers that read a step look at its tool parts only.
An app whose root agent has no sub-agents is sent none. In a graph ``Workflow`` each node
answers (``answered_by``): ADK authors a function node's events with the workflow's name, so
the node's own name (``node_info``) is the one given.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.events import Event

from adk_stream_protocol.protocol.chunks import (
    AbortChunk,
    BaseChunk,
    DataChunk,
    ErrorChunk,
    FinishStepChunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    StartStepChunk,
    TextDeltaChunk,
    TextEndChunk,
    ToolApprovalRequestChunk,
    ToolApprovalResponseChunk,
    ToolInputAvailableChunk,
    ToolInputDeltaChunk,
    ToolOutputAvailableChunk,
    ToolOutputDeniedChunk,
    ToolOutputErrorChunk,
)

AGENT_PART = "data-agent"

# What starts no part of its author's: what closes the previous agent's blocks or steps, or
# opens a step (the author's first part comes after these); what goes on with a part already
# made (a delta, a call's input made whole, its result or approval: a parallel branch's words
# and results come between another branch's); errors and aborts, no part of a message.
_NOT_A_PART = (
    TextEndChunk,
    ReasoningEndChunk,
    FinishStepChunk,
    StartStepChunk,
    TextDeltaChunk,
    ReasoningDeltaChunk,
    ToolInputDeltaChunk,
    ToolInputAvailableChunk,
    ToolOutputAvailableChunk,
    ToolOutputErrorChunk,
    ToolOutputDeniedChunk,
    ToolApprovalRequestChunk,
    ToolApprovalResponseChunk,
    ErrorChunk,
    AbortChunk,
)


class StepAuthors:
    """The authors of one response's parts: where a ``data-agent`` part goes."""

    def __init__(self) -> None:
        self._author: str | None = None

    def mark(self, author: str, chunks: Sequence[BaseChunk]) -> list[BaseChunk]:
        """An event's chunks, with a ``data-agent`` part before its first part when the
        event's author is not the author of the part before it."""
        if not author or author == "user" or author == self._author:
            return list(chunks)
        at = next((i for i, c in enumerate(chunks) if _a_part(c)), None)
        if at is None:
            return list(chunks)  # nothing of this author's own yet
        self._author = author
        marker = DataChunk(type=AGENT_PART, data={"name": author})
        return [*chunks[:at], marker, *chunks[at:]]


def _a_part(chunk: BaseChunk) -> bool:
    """Whether a chunk makes a part of the message (a transient data part does not)."""
    if isinstance(chunk, DataChunk):
        return not chunk.transient
    return not isinstance(chunk, _NOT_A_PART)


def answered_by(event: Event) -> str:
    """Who answered in ``event``: the node that emitted it (ADK 2 runs agents as nodes, so a
    sub-agent's node is the agent), or its author for an event of no node."""
    return event.node_info.name or event.author
