"""The behaviour table's graph ``Workflow`` rows (docs/agent/features.md; issue 37, point 1): what a
workflow addresses to the user reaches the page as text, once and in order; a node's output (a
``JoinNode``'s aggregate, a pydantic summary) as a ``data-node-output`` part and the route a node
chose as ``data-route``, both kept in the chat's record; the node at work as transient ``data-node``
parts; and each part named by the node that answered (``data-agent``). Through the real app and ADK
Runner with a planner shaped like ADK's workflow samples (tests/support/agents/workflows.py), on
``POST /stream`` and ai 7's socket: ADK 2.13 cannot run a workflow live (the live refusal is in
tests/test_table_human_input.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from google.adk.events import Event

from adk_stream_protocol.foundation.identity import LOCAL_USER
from adk_stream_protocol.protocol.parts.node_outputs import NODE_OUTPUT_PART
from adk_stream_protocol.protocol.parts.routes import ROUTE_PART
from adk_stream_protocol.protocol.parts.workflow_nodes import NODE_PART
from adk_stream_protocol.protocol.step_authors import AGENT_PART
from adk_stream_protocol.testing import AgentClient, ChatResponse, serve_agent, settings_for_tests
from tests.support.agents.samples import Ledger
from tests.support.agents.workflows import ADVICE, FLIGHT, HOTEL, TOTAL, trip_planner
from tests.support.table_chat import TableChat

# ADK 2.13 cannot run a workflow live (issue 37, point 1): /stream and ai 7's socket run it.
RUN_ASYNC = pytest.mark.parametrize("transport", ["stream", "ai7"])
WITHIN_BUDGET = "Plan a trip to Oslo under 1000"
OVER_BUDGET = "Plan a trip to Oslo under 500"
PATH = "trip_planner@1/{}@1"


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture(params=[False, True], ids=["app", "resumable-app"])
def planner(request: pytest.FixtureRequest, ledger: Ledger) -> Iterator[AgentClient]:
    """The planner in an ``App``, and in a resumable one (whose workflow also emits ADK's
    checkpoints): the page gets the same parts from both."""
    app = trip_planner(ledger, resumable=request.param)
    with serve_agent(app, settings_for_tests()) as client:
        yield client


@pytest.fixture
def chat(planner: AgentClient, transport: str) -> Iterator[TableChat]:
    table_chat = TableChat(planner.http, transport)
    yield table_chat
    table_chat.close()


def _parts(response: ChatResponse, part_type: str) -> list[dict[str, Any]]:
    assert response.message is not None
    return [p for p in response.message["parts"] if p["type"] == part_type]


def _output_of(response: ChatResponse, node: str) -> dict[str, Any]:
    (part,) = [p for p in _parts(response, NODE_OUTPUT_PART) if p["data"]["name"] == node]
    return dict(part)


def _stored_events(chat: TableChat) -> list[Event]:
    return chat.http.portal.call(_session_events, chat.http.app, chat.chat_id)  # type: ignore[union-attr]


async def _session_events(app: Any, chat_id: str) -> list[Event]:
    session = await app.state.bridge.runners.sessions.open(LOCAL_USER, chat_id)
    return list(session.events)


def _said(events: list[Event]) -> list[tuple[str, str]]:
    """What the workflow said to the user, as its session holds it: (node, text), in order."""
    return [
        (event.node_info.name or event.author, part.text)
        for event in events
        if event.author != "user" and event.content is not None and not event.partial
        for part in event.content.parts or ()
        if part.text and not part.thought and not part.function_response
    ]


def _answered(message: dict[str, Any]) -> list[tuple[str, str]]:
    """(the name of the last ``data-agent`` before it, what it is) for each part the page
    shows: a text's words, an output's or a route's node."""
    agent, shown = "", []
    for part in message["parts"]:
        if part["type"] == AGENT_PART:
            agent = part["data"]["name"]
        elif part["type"] == "text":
            shown.append((agent, part["text"]))
        elif part["type"] in (NODE_OUTPUT_PART, ROUTE_PART):
            shown.append((agent, f"{part['type']} of {part['data']['name']}"))
    return shown


# -- the failures issue 37 lists: what a workflow made never reached the page -----------------


@RUN_ASYNC
def test_a_fan_outs_aggregate_reaches_the_page_as_the_join_nodes_output(
    chat: TableChat,
) -> None:
    answer = chat.send(WITHIN_BUDGET)
    gathered = _output_of(answer, "gather")
    assert gathered == {
        "type": NODE_OUTPUT_PART,
        "id": PATH.format("gather"),
        "data": {
            "name": "gather",
            "path": PATH.format("gather"),
            "output": {
                "flights": {**FLIGHT, "destination": "Oslo"},
                "hotels": {**HOTEL, "budget": 1000},
            },
            "final": False,
        },
    }
    # Each branch's own output came before the join's, in the same message.
    names = [p["data"]["name"] for p in _parts(answer, NODE_OUTPUT_PART)]
    assert names.index("gather") > max(names.index("flights"), names.index("hotels"))


@RUN_ASYNC
def test_a_routers_decision_reaches_the_page_as_the_route_it_took(chat: TableChat) -> None:
    within = chat.send(WITHIN_BUDGET)
    assert _parts(within, ROUTE_PART) == [
        {
            "type": ROUTE_PART,
            "id": PATH.format("decide"),
            "data": {"name": "decide", "path": PATH.format("decide"), "route": "within_budget"},
        }
    ]
    over = chat.send(OVER_BUDGET)
    # The route the node chose, as ADK gives it; no edge has it, so DEFAULT_ROUTE's ran.
    ((route,),) = [[p["data"]["route"] for p in _parts(over, ROUTE_PART)]]
    assert route == "over_budget"
    assert _parts(over, "text")[-1]["text"] == ADVICE


@RUN_ASYNC
def test_a_nodes_pydantic_summary_reaches_the_page_as_the_workflows_final_output(
    chat: TableChat, ledger: Ledger
) -> None:
    answer = chat.send(WITHIN_BUDGET)
    summary = _output_of(answer, "book")
    assert summary["data"]["output"] == {
        "destination": "Oslo",
        "airline": FLIGHT["airline"],
        "hotel": HOTEL["hotel"],
        "total": TOTAL,
    }
    assert summary["data"]["final"] is True
    assert [p["data"]["name"] for p in _parts(answer, NODE_OUTPUT_PART) if p["data"]["final"]] == [
        "book"
    ]
    assert ledger.lines == [f"book Oslo {TOTAL}"]
    assert answer.of_type("finish")[-1]["finishReason"] == "stop"


# -- text, the node at work, who answered ---------------------------------------------------


@RUN_ASYNC
@pytest.mark.parametrize("ask", [WITHIN_BUDGET, OVER_BUDGET], ids=["book", "advise"])
def test_every_message_a_workflow_addresses_to_the_user_is_text_once_and_in_order(
    chat: TableChat, ask: str
) -> None:
    answer = chat.send(ask)
    said = _said(_stored_events(chat))
    assert len(said) == (3 if ask == WITHIN_BUDGET else 4)
    assert [p["text"] for p in _parts(answer, "text")] == [text for _, text in said]


@RUN_ASYNC
def test_an_llm_agent_nodes_text_that_is_its_output_is_shown_once(chat: TableChat) -> None:
    answer = chat.send(OVER_BUDGET)
    # ADK's message_as_output: the advisor's text is its output; the page shows it as text.
    assert [p["text"] for p in _parts(answer, "text")].count(ADVICE) == 1
    assert "advisor" not in [p["data"]["name"] for p in _parts(answer, NODE_OUTPUT_PART)]
    assert "book" not in [p["data"]["name"] for p in _parts(answer, NODE_OUTPUT_PART)]


@RUN_ASYNC
def test_the_page_can_tell_which_node_is_at_work_from_transient_node_parts(
    chat: TableChat,
) -> None:
    answer = chat.send(WITHIN_BUDGET)
    announced = answer.of_type(NODE_PART)
    assert all(c["transient"] is True for c in announced)
    names = list(dict.fromkeys(c["data"]["name"] for c in announced))
    assert names[0] == "intake" and names[-3:] == ["gather", "decide", "book"]
    assert sorted(names[1:3]) == ["flights", "hotels"]
    assert all(c["data"]["path"] == PATH.format(c["data"]["name"]) for c in announced)
    assert _parts(answer, NODE_PART) == []  # progress only: never in the message


@RUN_ASYNC
@pytest.mark.parametrize("ask", [WITHIN_BUDGET, OVER_BUDGET], ids=["book", "advise"])
def test_each_part_of_a_workflows_answer_is_named_by_the_node_that_answered(
    chat: TableChat, ask: str
) -> None:
    answer = chat.send(ask)
    assert answer.message is not None
    shown = _answered(answer.message)
    assert [entry for entry in shown if not entry[1].startswith("data-")] == _said(
        _stored_events(chat)
    )
    for agent, what in shown:
        if what.startswith("data-"):
            assert what.endswith(f" of {agent}"), (agent, what)


# -- the chat's record ------------------------------------------------------------------------


@RUN_ASYNC
def test_a_workflows_outputs_and_route_stay_in_the_chat_record_after_a_reload(
    chat: TableChat,
) -> None:
    answer = chat.send(WITHIN_BUDGET)
    assert answer.message is not None
    chat.reload()
    assert chat.messages[-1]["parts"] == answer.message["parts"]
    kept = {p["type"] for p in chat.messages[-1]["parts"]}
    assert {NODE_OUTPUT_PART, ROUTE_PART, AGENT_PART} <= kept and NODE_PART not in kept

    # The chat read back goes on: the next answer has parts of its own.
    again = chat.send(OVER_BUDGET)
    assert _parts(again, "text")[-1]["text"] == ADVICE
    assert [p["data"]["route"] for p in _parts(again, ROUTE_PART)] == ["over_budget"]
    assert chat.messages[1]["parts"] == answer.message["parts"]
