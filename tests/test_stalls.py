"""A stalled instance (SIGSTOP, past its chat lease) that wakes after another instance took the
chat: it must not start the tool the other one runs (docs/adr/0032). Two real uvicorn
instances on PostgreSQL and Redis (tests/support/services.py), the agent of
tests/support/agents/crash.py.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx

from tests.support.rig import run_server, stream_result
from tests.support.waiting import wait_until
from tests.test_crashes import AGENT, Chat

LEASE_TTL_SECONDS = 2.0


def test_a_stalled_instance_does_not_start_a_tool_after_losing_its_chat(
    postgres_url: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    ledger, ready = tmp_path / "ledger.txt", tmp_path / "stalled"
    shared = {
        "ADK_STREAM_SESSION_STORE": postgres_url,
        "ADK_STREAM_REDIS_URL": redis_url,
        "ADK_STREAM_REDIS_KEY_PREFIX": f"{redis_prefix}.stalls",
        "ADK_STREAM_LEASE_TTL_SECONDS": str(LEASE_TTL_SECONDS),
        "ADK_STREAM_AGENT": AGENT,
        "CRASH_LEDGER": str(ledger),
    }
    chat = Chat(ledger)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        run_server(tmp_path / "a", {**shared, "STALL_READY": str(ready)}) as a,
        run_server(tmp_path / "b", shared) as b,
    ):
        assert a.process is not None
        chat.say(a, "Pay Bob 10")
        with httpx.stream("POST", f"{a.base_url}/stream", json=chat.approval(), timeout=30) as cut:
            # A's process writes it; a file is all it can tell.
            wait_until(ready.exists, "A at the tool", within=20, every=0.01)
            _wait_stopped(a.process.pid)  # A stops itself at the tool's start
            try:
                # B's retry waits for the chat (its busy timeout is longer than the lease's
                # TTL): it takes it once A's lease has lapsed.
                retry = stream_result(b.http.post("/stream", json=chat.approval()))
                assert retry.status == 200, retry.body
                assert retry.text() == "Paid Bob.", retry.body
                assert len(chat.payments()) == 1
            finally:
                os.kill(a.process.pid, signal.SIGCONT)
            cut.read()  # A's response ends, whatever it says
        assert len(chat.payments()) == 1  # A woke and did not pay again
        log = a.log()
        assert "tool not started: the run lost its chat" in log
        # Both refusals, the tool's start and the aborted run's seal refused as stale, are
        # handled: one WARNING line each and no ERROR, no traceback (docs/adr/0072).
        assert _lines(log, "tool not started: the run lost its chat") == 1
        assert _lines(log, "write refused as stale") >= 1
        assert _lines(log, " ERROR ") == 0, log
        assert "Traceback" not in log, log
        # B took the chat from a lease that lapsed: it fenced A off first (docs/adr/0034).
        assert "fenced after an unclean takeover" in b.log()


def _lines(log: str, text: str) -> int:
    return sum(text in line for line in log.splitlines())


def _wait_stopped(pid: int) -> None:
    """Until the process is stopped (SIGSTOP): the kernel's word for it is in /proc."""
    wait_until(
        lambda: Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "T",
        "A stopped at the tool's start",
        every=0.01,
    )
