"""Compaction's ``data-compaction`` part (docs/adr/0070) through the real AI SDK client: ai
6.0.25 (the strict chunk schema) and ai 7, on ``POST /stream`` and on ai 7's chat socket
(``run_async``; ``run_live`` does not compact). ``checked`` holds every response to the
client's schemas; the part reaches ``useChat``'s ``onData`` as transient, lands in no message,
and the chat's record (``GET /chats/{chatId}``) holds the messages the client holds."""

from __future__ import annotations

import pytest

from adk_stream_protocol.protocol.parts.compactions import COMPACTION_PART
from tests.support.real_client import V7, assistant_messages, checked, client_job, run_real_client
from tests.support.rig import ServerPool

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

COMPACTING_APP = {"ADK_STREAM_AGENT": "tests.support.agents.compaction:sliding_app"}
RUNS = [("6.0.25", False), (V7, False), (V7, True)]
RUN_IDS = ["6.0.25-stream", "7-stream", "7-socket"]


@pytest.mark.parametrize(("client", "live"), RUNS, ids=RUN_IDS)
def test_the_client_hears_of_a_compaction_and_keeps_every_message(
    servers: ServerPool, client: str, live: bool
) -> None:
    server = servers.get(COMPACTING_APP)
    steps = [{"action": "send", "text": f"weather {n}"} for n in range(3)]
    job = client_job(server, client, steps, live=live)
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report["error"]
    heard = [p for p in report["onData"] if p["type"] == COMPACTION_PART]
    assert len(heard) == 1  # after the second turn (every 2 invocations, overlapping 1)
    assert heard[0]["transient"] is True
    assert len(assistant_messages(report)) == 3
    assert all(p["type"] != COMPACTION_PART for m in report["messages"] for p in m["parts"])
    record = server.http.get(f"/chats/{job['chatId']}").json()
    assert record["messages"] == report["messages"]
