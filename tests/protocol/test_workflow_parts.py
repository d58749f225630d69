"""A graph ``Workflow``'s progress and results as data parts, read through the converter's hook
(docs/adr/0067): ``data-node`` (``parts/workflow_nodes.py``), ``data-node-output``
(``parts/node_outputs.py``) and ``data-route`` (``parts/routes.py``), fed ADK events shaped
as ADK 2.13's workflow runtime emits them: what each holds, where it goes, what gives none,
and how the client's message keeps them."""

from __future__ import annotations

import datetime
from typing import Any

from google.adk.events import Event
from google.adk.events.event import NodeInfo
from google.genai import types
from pydantic import BaseModel

from adk_stream_protocol.protocol.message_fold import MessageFold
from adk_stream_protocol.protocol.parts.node_outputs import NODE_OUTPUT_PART
from adk_stream_protocol.protocol.parts.routes import ROUTE_PART
from adk_stream_protocol.protocol.parts.workflow_nodes import NODE_PART
from tests.protocol.test_converter import run, types_of

WORKFLOW = "planner"


class Summary(BaseModel):
    title: str
    when: datetime.date


def node_event(node: str, *, run_id: int = 1, text: str | None = None, **fields: Any) -> Event:
    """An event of ``node`` of the workflow, as ADK emits it: authored by the workflow, its
    message (if any) under the user's role, the node's path in ``node_info``."""
    path = f"{WORKFLOW}@1/{node}@{run_id}"
    info = fields.pop("node_info", {})
    content = types.Content(role="user", parts=[types.Part(text=text)]) if text else None
    return Event(
        author=WORKFLOW,
        invocation_id="e-1",
        content=content,
        node_info=NodeInfo(path=path, **info),
        **fields,
    )


def of_type(chunks: list[dict[str, Any]], part_type: str) -> list[dict[str, Any]]:
    return [c for c in chunks if c["type"] == part_type]


def test_a_nodes_output_is_a_data_part_after_its_text_named_by_the_nodes_path() -> None:
    chunks = run(
        [
            node_event(
                "gather",
                text="Gathered.",
                output={"flights": {"price": 320}, "hotels": {"price": 540}},
                node_info={"output_for": [f"{WORKFLOW}@1/gather@1"]},
            )
        ]
    )
    assert types_of(chunks) == [
        "start", "start-step", "text-start", "text-delta", "text-end",
        NODE_PART, NODE_OUTPUT_PART, "finish-step", "finish",
    ]  # fmt: skip
    (output,) = of_type(chunks, NODE_OUTPUT_PART)
    assert output == {
        "type": NODE_OUTPUT_PART,
        "id": "planner@1/gather@1",
        "data": {
            "name": "gather",
            "path": "planner@1/gather@1",
            "output": {"flights": {"price": 320}, "hotels": {"price": 540}},
            "final": False,
        },
    }


def test_the_workflows_own_output_is_marked_final_and_a_model_is_sent_as_json() -> None:
    summary = Summary(title="Oslo", when=datetime.date(2026, 12, 6))
    info = {"output_for": [f"{WORKFLOW}@1/book@1", f"{WORKFLOW}@1"]}
    chunks = run([node_event("book", output=summary, node_info=info)])
    (output,) = of_type(chunks, NODE_OUTPUT_PART)
    assert output["data"]["output"] == {"title": "Oslo", "when": "2026-12-06"}
    assert output["data"]["final"] is True


def test_falsy_outputs_are_outputs_and_bytes_are_base64() -> None:
    chunks = run(
        [
            node_event("count", output=0),
            node_event("flag", output=False),
            node_event("blob", output=b"\x00\x01"),
        ]
    )
    assert [c["data"]["output"] for c in of_type(chunks, NODE_OUTPUT_PART)] == [0, False, "AAE="]


def test_an_output_that_is_the_nodes_text_is_shown_once_as_text() -> None:
    info = {"message_as_output": True, "output_for": [f"{WORKFLOW}@1/advisor@1"]}
    event = node_event("advisor", output="Try a hostel.", node_info=info)
    event.content = types.Content(role="model", parts=[types.Part(text="Try a hostel.")])
    chunks = run([event])
    assert of_type(chunks, NODE_OUTPUT_PART) == []
    assert [c["delta"] for c in chunks if c["type"] == "text-delta"] == ["Try a hostel."]


def test_a_route_is_a_data_part_after_the_nodes_output() -> None:
    chunks = run([node_event("decide", output={"total": 860}, route="within_budget")])
    assert types_of(chunks)[1:4] == [NODE_PART, NODE_OUTPUT_PART, ROUTE_PART]
    (route,) = of_type(chunks, ROUTE_PART)
    assert route == {
        "type": ROUTE_PART,
        "id": "planner@1/decide@1",
        "data": {"name": "decide", "path": "planner@1/decide@1", "route": "within_budget"},
    }


def test_a_route_keeps_adks_value_a_list_a_number_or_a_boolean() -> None:
    chunks = run(
        [
            node_event("fan", route=["a", "b"]),
            node_event("pick", route=2),
            node_event("check", route=False),
        ]
    )
    assert [c["data"]["route"] for c in of_type(chunks, ROUTE_PART)] == [["a", "b"], 2, False]


def test_each_node_at_work_is_announced_once_until_another_one_is() -> None:
    chunks = run(
        [
            node_event("flights", text="Found a flight."),
            node_event("flights", output={"price": 320}),
            node_event("hotels", text="Found a hotel."),
            node_event("flights", run_id=2, output={"price": 300}),
        ]
    )
    nodes = of_type(chunks, NODE_PART)
    assert [n["data"] for n in nodes] == [
        {"name": "flights", "path": "planner@1/flights@1"},
        {"name": "hotels", "path": "planner@1/hotels@1"},
        {"name": "flights", "path": "planner@1/flights@2"},
    ]
    assert all(n["transient"] is True and "id" not in n for n in nodes)


def test_a_root_agents_events_and_adks_checkpoints_give_no_workflow_part() -> None:
    root = Event(
        author="solo",
        content=types.Content(role="model", parts=[types.Part(text="Hi.")]),
        node_info=NodeInfo(path="solo@1"),
    )
    checkpoint = Event(author=WORKFLOW, node_info=NodeInfo(path=""))
    checkpoint.actions.agent_state = {"nodes": {"book": {"status": 3, "interrupts": []}}}
    unplaced = Event(author=WORKFLOW, output={"x": 1}, route="r")  # no node: nothing to name
    chunks = run([root, checkpoint, unplaced])
    assert types_of(chunks) == [
        "start", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish",
    ]  # fmt: skip


def test_a_partial_event_is_never_read() -> None:
    event = node_event("writer", text="Dra", output="Draft", route="done")
    event.partial = True
    chunks = run([event])
    assert not {NODE_PART, NODE_OUTPUT_PART, ROUTE_PART} & set(types_of(chunks))


def test_the_message_keeps_outputs_and_routes_and_drops_the_transient_node_parts() -> None:
    chunks = run(
        [
            node_event("decide", output={"total": 860}, route="over"),
            node_event("decide", output={"total": 860, "again": True}),  # a replayed output
        ]
    )
    message = MessageFold([]).apply_all(chunks)[-1]
    assert [(p["type"], p.get("id")) for p in message["parts"]] == [
        (NODE_OUTPUT_PART, "planner@1/decide@1"),
        (ROUTE_PART, "planner@1/decide@1"),
    ]
    assert message["parts"][0]["data"]["output"] == {"total": 860, "again": True}
