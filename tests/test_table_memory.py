"""The behaviour table's rows for ADK's memory tools (docs/agent/features.md): ``load_memory`` and
``preload_memory`` find what an earlier chat of the same user said, once the agent's own callback
has added that chat to the app's memory service (``ADK_STREAM_MEMORY_STORE``, in memory by default;
docs/adr/0063). Each test runs on ``POST /stream``, ai 7's socket on ``/live`` and
``/live?chatId=``, through the real app and ADK Runner with scripted models
(tests/support/agents/recall.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from google.adk.agents import LlmAgent

from adk_stream_protocol.testing import ChatResponse, serve_agent, settings_for_tests
from tests.support.agents.recall import ASKED, TOLD, loading_agent, preloading_agent
from tests.support.table_chat import TRANSPORTS, TableChat

EVERY_TRANSPORT = pytest.mark.parametrize("transport", TRANSPORTS)


@pytest.fixture
def two_chats(transport: str) -> Iterator[Callable[[LlmAgent], tuple[TableChat, TableChat]]]:
    """``two_chats(agent)``: two chats of one user with the agent, served for the test, on
    the test's transport."""
    with ExitStack() as stack:

        def start(agent: LlmAgent) -> tuple[TableChat, TableChat]:
            http = stack.enter_context(serve_agent(agent, settings_for_tests())).http
            chats = TableChat(http, transport), TableChat(http, transport)
            for chat in chats:
                stack.callback(chat.close)
            return chats

        yield start


def _told_in_an_earlier_chat(earlier: TableChat) -> None:
    """The user says something in one chat, then leaves it: the page reloads. On
    ``/live?chatId=`` the socket's run is one ADK invocation for the socket's life, so the
    agent's ``after_agent_callback`` (which adds the chat to memory) runs when it closes."""
    assert earlier.send(TOLD).errors == []
    earlier.reload()  # returns once the server has let the chat go


def _memories(response: ChatResponse) -> list[str]:
    """The texts of the memories ``load_memory`` returned."""
    (output,) = [c["output"] for c in response.of_type("tool-output-available")]
    return [
        part["text"]
        for memory in output["result"]["memories"]
        for part in memory["content"]["parts"]
        if part.get("text")
    ]


@EVERY_TRANSPORT
def test_load_memory_finds_what_an_earlier_chat_of_the_same_user_said(
    two_chats: Callable[[LlmAgent], tuple[TableChat, TableChat]],
) -> None:
    earlier, later = two_chats(loading_agent())
    _told_in_an_earlier_chat(earlier)
    recalled = later.send(ASKED)
    assert recalled.errors == [], recalled.chunks
    assert [c["toolName"] for c in recalled.tool_calls] == ["load_memory"]
    assert _memories(recalled) == [TOLD]
    assert recalled.text == "Teal, you said."


@pytest.mark.parametrize("transport", ["stream", "ai7"])
def test_preload_memory_gives_the_model_what_an_earlier_chat_said(
    two_chats: Callable[[LlmAgent], tuple[TableChat, TableChat]],
) -> None:
    earlier, later = two_chats(preloading_agent())
    _told_in_an_earlier_chat(earlier)
    recalled = later.send(ASKED)
    assert recalled.errors == [], recalled.chunks
    assert recalled.tool_calls == [], "preload_memory is never called by the model"
    assert recalled.text.startswith("I recall: ")
    assert f"user: {TOLD}" in recalled.text


@pytest.mark.parametrize("transport", ["live"])
def test_on_the_live_connection_preload_memory_gives_the_model_nothing(
    two_chats: Callable[[LlmAgent], tuple[TableChat, TableChat]],
) -> None:
    """ADK's live flow builds the model's request once, as the socket connects, before any
    user message: ``preload_memory`` has nothing to search with, and adds nothing."""
    earlier, later = two_chats(preloading_agent())
    _told_in_an_earlier_chat(earlier)
    recalled = later.send(ASKED)
    assert recalled.errors == [], recalled.chunks
    assert recalled.text == "Noted."
