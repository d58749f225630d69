"""A chat that moves between agents (`transfer_to_agent`), scripted: each agent's own model
answers after the transfer, and every call of the chat has an id of its own, on `POST /stream`
and on `/live?chatId=` (issue 24: the live connection restarted at `function-call-1`)."""

from __future__ import annotations

from typing import Any

import pytest

from adk_stream_protocol.testing import serve_agent
from tests.support.agents.transfer import root_agent


def tool_call_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [
        part["toolCallId"]
        for message in messages
        if message["role"] == "assistant"
        for part in message["parts"]
        if part["type"].startswith("tool-")
    ]


@pytest.mark.parametrize("live", [False, True], ids=["stream", "live"])
def test_call_ids_are_unique_across_agents_and_turns(live: bool) -> None:
    with serve_agent(root_agent) as chat:
        first = chat.send("What's the weather?", chat="c-transfer", live=live)
        second = chat.send("And the weather tomorrow?", chat="c-transfer", live=live)
        messages = chat.messages("c-transfer")
    assert first.errors == [] and second.errors == []
    assert [c["toolName"] for c in first.tool_calls] == ["lookup", "transfer_to_agent", "lookup"]
    # The sub-agent answers the same user message with its own script.
    assert first.text == "Sunny in Oslo too."
    # The next message goes to the agent that answered last, the sub-agent.
    assert [c["toolName"] for c in second.tool_calls] == ["lookup"]
    ids = tool_call_ids(messages)
    assert len(ids) == 4 and len(set(ids)) == 4, ids
