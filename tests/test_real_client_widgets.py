"""UI widgets (``data-ui-widget``, docs/adr/0062) through the real AI SDK client: ai 6.0.25
(the strict chunk schema) and ai 7, on `POST /stream` and on `/live` (our transport for 6.x,
ai 7's own socket for 7). `checked` holds every response to the client's schemas; these tests
check that the widgets land in the client's message as documented, and that the chat's record
(`GET /chats/{chatId}`) holds the messages the client holds."""

from __future__ import annotations

import pytest

from adk_stream_protocol.protocol.parts.ui_widgets import UI_WIDGET_PART
from tests.support.agents.widgets import chart_payload
from tests.support.real_client import (
    V7,
    assistant_messages,
    checked,
    client_job,
    run_real_client,
    tool_parts,
)
from tests.support.rig import ServerPool

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

WIDGETS_AGENT = {"ADK_STREAM_AGENT": "tests.support.agents.widgets:root_agent"}
# (client, live): ai 6.0.25 and ai 7, each on /stream and on /live.
RUNS = [("6.0.25", False), ("6.0.25", True), (V7, False), (V7, True)]
RUN_IDS = ["6.0.25-stream", "6.0.25-live", "7-stream", "7-live"]


@pytest.mark.parametrize(("client", "live"), RUNS, ids=RUN_IDS)
def test_a_tools_widgets_land_in_the_clients_message_and_in_the_chats_record(
    servers: ServerPool, client: str, live: bool
) -> None:
    server = servers.get(WIDGETS_AGENT)
    steps = [{"action": "send", "text": "compare Paris and Rome"}]
    job = client_job(server, client, steps, live=live)
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report["error"]
    (assistant,) = assistant_messages(report)
    paris, rome = tool_parts(assistant)
    assert [p for p in assistant["parts"] if p["type"] == UI_WIDGET_PART] == [
        {
            "type": UI_WIDGET_PART,
            "id": call["toolCallId"],
            "data": {"provider": "mcp", "payload": chart_payload(city)},
        }
        for call, city in ((paris, "Paris"), (rome, "Rome"))
    ]
    record = server.http.get(f"/chats/{job['chatId']}").json()
    assert record["messages"] == report["messages"]
