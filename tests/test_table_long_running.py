"""The behaviour table's long-running rows (docs/agent/features.md): a
``LongRunningFunctionTool`` whose final result a backend delivers later (``POST
/chats/{chatId}/calls/{callId}/result``, ADR 0040), and one the browser runs (its function
returns nothing; ADR 0038). Each test runs on ``POST /stream``, ai 7's socket on ``/live`` and
``/live?chatId=``, through the real app and ADK Runner with a scripted model
(tests/support/agents/samples.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from adk_stream_protocol.testing import AgentClient, serve_agent, settings_for_tests
from tests.support.agents.samples import Ledger, support_agent
from tests.support.table_chat import TRANSPORTS, TableChat

TOKEN = "backend-secret"
EVERY_TRANSPORT = pytest.mark.parametrize("transport", TRANSPORTS)
PENDING = {"status": "pending", "ticket": "T-screen"}


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def release() -> threading.Event:
    """Set: the model answers a backend's result at once (a test that resumes clears it)."""
    event = threading.Event()
    event.set()
    return event


@pytest.fixture
def server(ledger: Ledger, release: threading.Event) -> Iterator[AgentClient]:
    settings = settings_for_tests(
        approval_timeout_seconds=20, call_result_token=TOKEN, chat_busy_timeout_seconds=1
    )
    with serve_agent(support_agent(ledger, release), settings) as client:
        yield client


@pytest.fixture
def desk(server: AgentClient, transport: str) -> Iterator[TableChat]:
    chat = TableChat(server.http, transport)
    yield chat
    chat.close()


def _deliver(chat: TableChat, call_id: str, output: object) -> int:
    response = chat.http.post(
        f"/chats/{chat.chat_id}/calls/{call_id}/result",
        json={"output": output},
        headers={"authorization": f"Bearer {TOKEN}"},
    )
    return response.status_code


# -- completed by a backend --------------------------------------------------------------------


@EVERY_TRANSPORT
def test_a_long_running_call_runs_at_once_and_shows_its_pending_result(
    desk: TableChat, ledger: Ledger
) -> None:
    filed = desk.send("my screen is broken")
    (output,) = filed.of_type("tool-output-available")
    assert output["output"] == PENDING
    assert filed.text == "A person will look at it."
    assert filed.of_type("finish")[-1]["finishReason"] != "tool-calls"
    assert ledger.lines == ["escalated screen"]


@pytest.mark.parametrize("transport", ["stream", "ai7"])
def test_a_backends_final_result_continues_the_call_and_the_page_resumes_it(
    desk: TableChat, ledger: Ledger, release: threading.Event
) -> None:
    filed = desk.send("my screen is broken")
    assert filed.message is not None
    (output,) = filed.of_type("tool-output-available")
    release.clear()  # the continuation waits for the page's resume
    assert _deliver(desk, output["toolCallId"], {"status": "fixed"}) == 202
    resumed = desk.resume(started=release.set)
    # The page's message that holds the call goes on: rebuilt first for a page that resumes
    # from an empty message (docs/adr/0045), then the result on its part, then the answer.
    assert resumed[0] == {"type": "start", "messageId": filed.message["id"]}
    results = [c for c in resumed if c["type"].startswith("tool-output")]
    assert results == [
        {
            "type": "tool-output-available",
            "toolCallId": output["toolCallId"],
            "output": output["output"],
        },
        {
            "type": "tool-output-available",
            "toolCallId": output["toolCallId"],
            "output": {"status": "fixed"},
        },
    ]
    assert "".join(c["delta"] for c in resumed if c["type"] == "text-delta") == (
        "A person will look at it.The ticket is fixed."
    )
    assert desk.send("how is my ticket").text == "Your ticket is fixed."
    assert ledger.lines == ["escalated screen"], "the function ran once"


@pytest.mark.parametrize("transport", ["live"])
def test_on_the_live_connection_a_backends_result_waits_for_the_socket_to_close(
    desk: TableChat, ledger: Ledger
) -> None:
    filed = desk.send("my screen is broken")
    (output,) = filed.of_type("tool-output-available")
    # The open socket holds the chat (its live model runs only while it is open): busy.
    assert _deliver(desk, output["toolCallId"], {"status": "fixed"}) == 409
    desk.close()
    # Closed, the result continues the call, in an answer the page did not see: sent as the
    # page stands, its chat is not the server's (docs/adr/0069). Read back, it goes on.
    assert _deliver(desk, output["toolCallId"], {"status": "fixed"}) == 202
    assert "reload the chat (GET /chats/{chatId})" in desk.refused_send("how is my ticket")
    desk.reload()
    assert desk.send("how is my ticket").text == "Your ticket is fixed."
    assert ledger.lines == ["escalated screen"], "the function ran once"


# -- run by the browser ------------------------------------------------------------------------


@EVERY_TRANSPORT
def test_a_long_running_function_that_returns_nothing_is_the_browsers_to_answer(
    desk: TableChat, ledger: Ledger
) -> None:
    asked = desk.send("scan this")
    assert asked.types()[-3:] == ["tool-input-available", "finish-step", "finish"]
    assert asked.of_type("finish")[0]["finishReason"] == "tool-calls"
    assert not asked.of_type("tool-output-available")
    assert ledger.lines == ["scan asked"], "the function ran, once, before the page's turn"

    (call,) = asked.tool_calls
    done = desk.tool_output(call["toolCallId"], {"code": "4006381333931"})
    assert done.text == "Thanks, I have the code."
    (part,) = [p for p in desk.messages[-1]["parts"] if p.get("toolCallId") == call["toolCallId"]]
    assert part["state"] == "output-available"
    assert ledger.lines == ["scan asked"], "the page's result does not run it again"
