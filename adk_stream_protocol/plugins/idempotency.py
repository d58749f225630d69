"""What a tool may declare and read so that a call runs to completion exactly once
(docs/adr/0074).

A tool whose backend deduplicates by the call's id (``tool_context.function_call_id``) may be
run again under that id without a second effect. Declared so, a call whose outcome is unknown
(its start was recorded, its result was not: a crash, a lost lease, an outage) is run again
by whichever process finishes the turn, instead of being answered "outcome unknown". Declare
it by name (``ADK_STREAM_IDEMPOTENT_TOOLS``) or in code (``idempotent``).

``lease_generation`` is the fencing token of the chat's holder: it grows with every holder
that starts a tool, and outlives the coordination store (the chat index keeps the last one),
so a backend that keeps the highest it has seen per chat can refuse a write from a holder that
lost the chat (a stalled process that woke after another took over).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeVar

from google.adk.tools import BaseTool, ToolContext

# The attribute ``idempotent`` sets, on a tool or on the function a ``FunctionTool`` wraps.
IDEMPOTENT_ATTRIBUTE = "__adk_stream_idempotent__"
# The state key the tool reads its run's token under: a ``temp:`` key, set for the call only
# and never stored (the chat index keeps the tokens).
LEASE_GENERATION_KEY = "temp:adk_stream_lease_generation"

Declared = TypeVar("Declared")


def idempotent(tool: Declared) -> Declared:
    """Declare a tool (a function, or a ``BaseTool``) safe to run again under the same call id:
    its backend makes one effect per ``tool_context.function_call_id``. Returns it, so it can
    decorate a function or wrap one: ``FunctionTool(idempotent(pay))``."""
    setattr(tool, IDEMPOTENT_ATTRIBUTE, True)
    return tool


def declared_idempotent(tool: BaseTool, names: Collection[str]) -> bool:
    """Whether ``tool`` is declared idempotent, by ``names`` (the setting) or in code."""
    if tool.name in names or getattr(tool, IDEMPOTENT_ATTRIBUTE, False) is True:
        return True
    wrapped = getattr(tool, "func", None)  # FunctionTool and its kin
    return getattr(wrapped, IDEMPOTENT_ATTRIBUTE, False) is True


def lease_generation(tool_context: ToolContext) -> int:
    """The fencing token of the run that calls the tool: pass it to a backend beside the
    idempotency key, and let the backend refuse a token lower than the highest it saw for the
    chat. Readable from the tool's body on; ``LookupError`` outside a run of this server."""
    token = tool_context.state.get(LEASE_GENERATION_KEY)
    if not isinstance(token, int) or isinstance(token, bool):
        raise LookupError(
            "no lease generation: the tool does not run in a chat adk-stream-protocol holds"
        )
    return token
