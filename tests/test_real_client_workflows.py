"""A graph ``Workflow``'s parts (``data-node``, ``data-node-output``, ``data-route``,
docs/adr/0067) through the real AI SDK client: ai 6.0.25 (the strict chunk schema) on
`POST /stream`, and ai 7 on `POST /stream` and its own socket on `/live` (``run_async``: our
`/live?chatId=` refuses a workflow). `checked` holds every response to the client's schemas;
these tests check that the outputs and the route land in the client's message as documented,
that the transient node parts reach only ``onData``, and that the chat's record
(`GET /chats/{chatId}`) holds the messages the client holds."""

from __future__ import annotations

import pytest

from adk_stream_protocol.protocol.parts.node_outputs import NODE_OUTPUT_PART
from adk_stream_protocol.protocol.parts.routes import ROUTE_PART
from adk_stream_protocol.protocol.parts.workflow_nodes import NODE_PART
from tests.support.agents.workflows import TOTAL
from tests.support.real_client import (
    V7,
    assistant_messages,
    checked,
    client_job,
    run_real_client,
)
from tests.support.rig import ServerPool

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

PLANNER = {"ADK_STREAM_AGENT": "tests.support.agents.workflows:served_planner"}
# (client, live): ai 6.0.25 on /stream; ai 7 on /stream and on its own socket.
RUNS = [("6.0.25", False), (V7, False), (V7, True)]
RUN_IDS = ["6.0.25-stream", "7-stream", "7-socket"]


@pytest.mark.parametrize(("client", "live"), RUNS, ids=RUN_IDS)
def test_a_workflows_outputs_and_route_land_in_the_clients_message_and_the_chats_record(
    servers: ServerPool, client: str, live: bool
) -> None:
    server = servers.get(PLANNER)
    steps = [{"action": "send", "text": "Plan a trip to Oslo under 1000"}]
    job = client_job(server, client, steps, live=live)
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report["error"]
    (assistant,) = assistant_messages(report)
    outputs = {p["id"]: p["data"] for p in assistant["parts"] if p["type"] == NODE_OUTPUT_PART}
    assert set(outputs) == {
        f"trip_planner@1/{node}@1"
        for node in ("intake", "flights", "hotels", "gather", "decide", "book")
    }
    assert set(outputs["trip_planner@1/gather@1"]["output"]) == {"flights", "hotels"}
    book = outputs["trip_planner@1/book@1"]
    assert book["final"] is True and book["output"]["total"] == TOTAL
    routes = [p["data"]["route"] for p in assistant["parts"] if p["type"] == ROUTE_PART]
    assert routes == ["within_budget"]
    # The node at work reached onData, transient, and no message.
    announced = [d for d in report["onData"] if d["type"] == NODE_PART]
    assert announced and all(d["transient"] for d in announced)
    assert not [p for p in assistant["parts"] if p["type"] == NODE_PART]
    record = server.http.get(f"/chats/{job['chatId']}").json()
    assert record["messages"] == report["messages"]
