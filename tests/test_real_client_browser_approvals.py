"""A browser tool that needs approval, with the real client, in the seed's pattern (issue 28;
docs/adr/0011-browser-tools.md): the page approves, then at once runs the tool itself and adds
its output, and the server answers once."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.real_client import (
    V6_CLIENTS,
    assistant_messages,
    client_job,
    start_jobs,
    text_of,
    tool_parts,
)
from tests.support.rig import LiveServer, ServerPool

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

LOCATION = {"latitude": 35.6762, "longitude": 139.6503, "accuracy": 20}
ANSWER = "You are at latitude 35.6762, longitude 139.6503."
REPEATS = 50
AT_ONCE = 5
# A frame over 64 KiB is read in a worker thread (foundation/limits.py): the run goes on
# meanwhile, so the server may have ended the approval's response before the result is read.
LARGE_PAD = 70_000


def _seed_page_with_frame(server: LiveServer, client: str, pad: int) -> dict[str, Any]:
    """The predecessor's page on our envelope: the approval, then the output as a
    ``tool_result`` frame right after it on the same socket, then ``addToolOutput``."""
    output = {**LOCATION, "pad": "x" * pad} if pad else LOCATION
    steps: list[dict[str, Any]] = [
        {"action": "send", "text": "Where am I?"},
        {"action": "approve", "approved": True, "output": output, "outputFrame": True},
    ]
    return client_job(server, client, steps, live=True, sendAutomaticallyWhen="seed")


@pytest.mark.parametrize("flow", ["on-tool-call", "add-output"])
def test_a_result_after_the_approval_is_applied_whatever_the_timing(
    servers: ServerPool, flow: str
) -> None:
    server = servers.get({"ADK_STREAM_BROWSER_APPROVAL_FLOW": flow})
    # Before the fix about 1 run in 4 with the large frame ended with the part reset to
    # input-available and the resend refused: the result had reached the run after the
    # approval's response closed, and the model's answer waited for a response that never came.
    jobs = [
        _seed_page_with_frame(server, V6_CLIENTS[i % 2], LARGE_PAD if i % 2 else 0)
        for i in range(REPEATS)
    ]
    failures: list[tuple[Any, ...]] = []
    for index, running in enumerate(start_jobs(jobs, AT_ONCE)):
        try:
            report = running.report()  # every response well formed, none refused
        except AssertionError as exc:
            failures.append((index, str(exc)[:300]))
            continue
        assistants = assistant_messages(report)
        refused = [c["frame"] for c in report["ws"]["controls"] if c["frame"]["type"] == "error"]
        last = assistants[-1] if assistants else {"parts": []}
        states = [p["state"] for p in tool_parts(last)]
        if (
            report["status"] != "ready"
            or len(assistants) != 1
            or ANSWER not in text_of(last)
            or states != ["output-available"]
            or len(report["requests"]) > 3
            or refused
        ):
            failures.append((index, report["status"], report["error"], states, refused))
    assert failures == [], f"{len(failures)} of {REPEATS} runs failed: {failures[:3]}"
