"""Parallel branches (a ``ParallelAgent``'s sub-agents streaming at once) through the real AI
SDK clients: ai 6.0.25 (the strict chunk schema), ai 6 and ai 7 on ``POST /stream``, and ai 7
on its own socket. Their deltas interleave on the wire under their own ids; ``checked`` holds
every response to the client's schemas, and each branch's reply lands whole in a text part
of its own, named by the ``data-agent`` part before it; the chat's record holds the same."""

from __future__ import annotations

import pytest

from tests.support.agents.workflow_agents import BRANCH_REPLIES, SKIPPED_REPLY, SUMMARY_REPLY
from tests.support.real_client import V7, assistant_messages, checked, client_job, run_real_client
from tests.support.rig import ServerPool, text_authors

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

DESK = {"ADK_STREAM_AGENT": "tests.support.agents.workflow_agents:travel_desk_root"}
# (client, live): ai 6.0.25, ai 6 and ai 7 on /stream; ai 7 on its own socket (run_async).
RUNS = [("6.0.25", False), ("6", False), (V7, False), (V7, True)]
RUN_IDS = ["6.0.25-stream", "6-stream", "7-stream", "7-socket"]


@pytest.mark.parametrize(("client", "live"), RUNS, ids=RUN_IDS)
def test_each_branch_lands_in_a_text_part_of_its_own_in_the_clients_message(
    servers: ServerPool, client: str, live: bool
) -> None:
    server = servers.get(DESK)
    job = client_job(server, client, [{"action": "send", "text": "plan Lisbon"}], live=live)
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report["error"]
    (assistant,) = assistant_messages(report)
    said = {**BRANCH_REPLIES, "cars": SKIPPED_REPLY, "summary": SUMMARY_REPLY}
    assert text_authors(assistant["parts"]) == {text: name for name, text in said.items()}
    assert [p["text"] for p in assistant["parts"] if p["type"] == "text"][-1] == SUMMARY_REPLY
    record = server.http.get(f"/chats/{job['chatId']}").json()
    assert record["messages"] == report["messages"]
