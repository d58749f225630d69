"""Reading the conversation a request carries: the latest user message, and the tool
results that answer the model's calls since then.

ADK strips its own `adk-` call ids before the request reaches a model, so calls
and their responses are paired by name and order instead of by id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.genai import types


@dataclass(frozen=True)
class ToolResult:
    """A function response paired with the call it answers."""

    name: str
    args: dict[str, Any]
    response: dict[str, Any]


# How ADK opens what it relays of another agent's turn, in a part of its own: "For context:"
# alone before ADK fenced the quote, its preamble since (google.adk.flows.llm_flows.context).
# tests/test_transfers.py fails if a sub-agent stops finding the user's message.
RELAYED_OPENINGS = (
    "For context:",
    "For context: below is a transcript of what another agent did",
)


def latest_user_message_index(contents: Sequence[types.Content]) -> int | None:
    """Where the latest user message is, if there is one.

    A user message is any user content that is not function responses (tool results
    and browser results also arrive with role "user") nor another agent's turn relayed.
    """
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        parts = content.parts or []
        if content.role != "user" or any(p.function_response for p in parts):
            continue
        if not is_relayed(content):
            return index
    return None


def is_relayed(content: types.Content) -> bool:
    """Whether a user content is ADK's account of another agent's turn: a first part that is
    ADK's opening, followed by the quote."""
    parts = content.parts or []
    if len(parts) < 2 or not parts[0].text:
        return False
    opening = parts[0].text
    return opening == RELAYED_OPENINGS[0] or opening.startswith(RELAYED_OPENINGS[1])


def text_of(content: types.Content | None) -> str:
    """The text of a content, without its thoughts."""
    if content is None:
        return ""
    return " ".join(p.text for p in content.parts or [] if p.text and not p.thought).strip()


def calls_of(content: types.Content) -> list[types.FunctionCall]:
    """The function calls of a content."""
    return [p.function_call for p in content.parts or [] if p.function_call]


def pair_results(later: Sequence[types.Content]) -> list[list[ToolResult]]:
    """Groups function responses by the model step whose calls they answer."""
    steps: list[list[ToolResult]] = []
    pending: dict[str | None, deque[types.FunctionCall]] = {}
    for content in later:
        if content.role == "model" and (calls := calls_of(content)):
            pending = {}
            for c in calls:
                pending.setdefault(c.name, deque()).append(c)
            steps.append([])
            continue
        for part in content.parts or []:
            response = part.function_response
            if response is None or not steps:
                continue
            # Ids are stripped before the request reaches the model, so take
            # the first pending call with the same name.
            same_name = pending.get(response.name)
            call = same_name.popleft() if same_name else None
            name = response.name or "unknown_tool"
            args = dict(call.args or {}) if call else {}
            steps[-1].append(ToolResult(name, args, _unwrap(response.response)))
    return steps


def _unwrap(response: dict[str, Any] | None) -> dict[str, Any]:
    # ADK wraps non-dict tool returns as {"result": value}; clients may too.
    if not response:
        return {}
    inner = response.get("result")
    if len(response) == 1 and isinstance(inner, dict):
        return inner
    return response
