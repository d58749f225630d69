"""A tool declared idempotent runs to completion: a call whose outcome is unknown is run again
under its own id by the server that finishes the turn, and the page and the model get its real
result (docs/adr/0074). Its fencing token (``lease_generation``) grows with every holder.

Real uvicorn processes on one SQLite store, killed (SIGKILL) inside the payment by the agent
of tests/support/agents/crash.py; its ledger counts each time the body did its work, as a
backend that deduplicates by the call's id would see the attempts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.rig import LiveServer, LiveSocket, run_server, stream_result, user_message
from tests.support.services import delete_redis_keys
from tests.test_crashes import AGENT, Chat, approve_and_die, tool_outcomes

pytestmark = pytest.mark.out_of_process  # uvicorn processes that crash, and the next ones

PAID = {"paid": 10, "to": "Bob"}
# The two ways to declare the tool: the setting, and the marker in the agent's code.
DECLARATIONS = {
    "setting": {"ADK_STREAM_IDEMPOTENT_TOOLS": "refund, pay"},
    "code": {"IDEMPOTENT_IN_CODE": "1"},
}


class Servers:
    """Servers of one chat, one after the other, on one store and ledger."""

    def __init__(self, workdir: Path, declared: dict[str, str]) -> None:
        self.workdir = workdir
        self.ledger = workdir / "ledger.txt"
        self.tokens = workdir / "tokens.txt"
        self.declared = declared

    def start(self, crash_at: str | None = None) -> Any:
        env = {
            "ADK_STREAM_AGENT": AGENT,
            "CRASH_LEDGER": str(self.ledger),
            "TOKEN_LEDGER": str(self.tokens),
            **self.declared,
        }
        if crash_at:
            env["CRASH_AT"] = crash_at
        return run_server(self.workdir, env)

    def cut(self, crash_at: str) -> Chat:
        """A chat whose approved payment a server cut by dying at ``crash_at``."""
        chat = Chat(self.ledger)
        with self.start(crash_at=crash_at) as first:
            chat.say(first, "Pay Bob 10")
            approve_and_die(first, chat.approval())
        return chat

    def fencing_tokens(self) -> list[int]:
        lines = self.tokens.read_text().split() if self.tokens.exists() else []
        return [int(line.rpartition(":")[2]) for line in lines]


@pytest.fixture(params=sorted(DECLARATIONS))
def servers(tmp_path: Path, request: pytest.FixtureRequest) -> Servers:
    return Servers(tmp_path, DECLARATIONS[request.param])


@pytest.fixture(params=["in-body", "after-effect"])
def crashed(servers: Servers, request: pytest.FixtureRequest) -> Iterator[Chat]:
    """A chat whose approved payment was cut while its body ran (before or after its effect)."""
    yield servers.cut(request.param)


def recorded_outputs(server: LiveServer, chat: Chat) -> list[dict[str, Any]]:
    """The payment's tool parts in the chat's record, as a reload shows them."""
    record = server.http.get(f"/chats/{chat.id}")
    assert record.status_code == 200, record.text
    return [
        part
        for message in record.json()["messages"]
        for part in message["parts"]
        if part["type"] == "tool-pay"
    ]


def test_a_retried_approval_runs_the_cut_payment_again_and_shows_its_result(
    crashed: Chat, servers: Servers
) -> None:
    made_before = len(crashed.payments())  # 0: cut before the effect; 1: after it
    with servers.start() as second:
        retry = stream_result(second.http.post("/stream", json=crashed.approval()))
        assert retry.status == 200, retry.body
        (result,) = tool_outcomes(retry)
        assert result["type"] == "tool-output-available", result
        assert result["output"] == PAID
        assert retry.text() == "Paid Bob."
        # Once under its own id: a deduplicating backend saw one more attempt with the same key.
        assert crashed.payments() == [crashed.payments()[0]] * (made_before + 1)
        (part,) = recorded_outputs(second, crashed)
        assert part["state"] == "output-available" and part["output"] == PAID, part
        # The turn has ended: the same approval again is a true duplicate, and runs nothing.
        assert second.http.post("/stream", json=crashed.approval()).status_code == 409
    assert len(crashed.payments()) == made_before + 1


@pytest.mark.parametrize("servers", ["setting"], indirect=True)
def test_a_resume_runs_the_cut_payment_again_in_the_same_message(servers: Servers) -> None:
    chat = servers.cut("after-effect")
    with servers.start() as second:
        resumed = stream_result(second.http.get(f"/stream/{chat.id}/stream"))
        assert resumed.status == 200, resumed.body
        assert resumed.of_type("start")[0]["messageId"] == chat.messages[-1]["id"]
        (result,) = tool_outcomes(resumed)
        assert result == {**result, "type": "tool-output-available", "output": PAID}
        assert resumed.text() == "Paid Bob."
        assert second.http.get(f"/stream/{chat.id}/stream").status_code == 204


@pytest.mark.parametrize("servers", ["code"], indirect=True)
def test_a_live_socket_first_runs_the_cut_payment_again(servers: Servers) -> None:
    chat = servers.cut("after-effect")
    with servers.start() as second:
        live = LiveSocket(second, chat.id)
        try:
            chat.messages[-1] = chat.approval()["messages"][-1]
            chat.messages.append(user_message("Hello", f"u-{uuid.uuid4().hex[:8]}"))
            answer = live.message(*chat.messages)
        finally:
            live.ws.close()
        assert answer.text() == "Hello again."
    # The cut run's effect, and the run again's under the same key: finished unseen, before
    # the new message (its chunks belong to a message the page has closed).
    assert len(chat.payments()) == 2


def test_a_call_cut_again_while_it_ran_again_is_run_by_the_next_server(servers: Servers) -> None:
    chat = servers.cut("after-effect")
    with servers.start(crash_at="after-effect") as second:
        approve_and_die(second, chat.approval())  # the run again is cut too
    with servers.start() as third:
        retry = stream_result(third.http.post("/stream", json=chat.approval()))
        assert retry.status == 200, retry.body
        (result,) = tool_outcomes(retry)
        assert result["type"] == "tool-output-available" and result["output"] == PAID
    (call_id,) = set(chat.payments())  # three attempts, one key
    assert len(chat.payments()) == 3
    # Each holder's fencing token is above every token given before it, though every new
    # process starts its own count (no Redis): the session keeps the highest.
    tokens = servers.fencing_tokens()
    assert len(tokens) == 3 and tokens == sorted(set(tokens)), tokens
    assert call_id


def test_a_call_that_fails_when_run_again_ends_with_its_failure(tmp_path: Path) -> None:
    servers = Servers(tmp_path, DECLARATIONS["setting"])
    chat = servers.cut("after-effect")
    servers.declared = {**servers.declared, "PAY_RAISES": "1"}
    with servers.start() as second:
        retry = stream_result(second.http.post("/stream", json=chat.approval()))
        (result,) = tool_outcomes(retry)
        assert result["type"] == "tool-output-error"
        assert result["errorText"] == (
            "The tool failed when the server ran it again (RuntimeError)."
        )
        # It has a result now: nothing is run again, and the turn is over.
        assert second.http.post("/stream", json=chat.approval()).status_code == 409
        assert "a call run again failed" in second.log()
    assert len(chat.payments()) == 1


def test_a_tool_not_declared_keeps_the_unknown_outcome(tmp_path: Path) -> None:
    servers = Servers(tmp_path, {"ADK_STREAM_IDEMPOTENT_TOOLS": "refund"})
    chat = servers.cut("after-effect")
    with servers.start() as second:
        retry = stream_result(second.http.post("/stream", json=chat.approval()))
        (result,) = tool_outcomes(retry)
        assert result["type"] == "tool-output-error"
        assert "whether it completed is unknown" in result["errorText"]
    assert len(chat.payments()) == 1


def test_the_fencing_token_is_the_lease_generation_and_outlives_redis(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    """On Redis the token is the chat's lease generation, one more per holder; when Redis
    forgets the generation (a restart keeps nothing), the next token is still above the last."""
    servers = Servers(
        tmp_path,
        {"ADK_STREAM_REDIS_URL": redis_url, "ADK_STREAM_REDIS_KEY_PREFIX": redis_prefix},
    )
    chat = Chat(servers.ledger)
    with servers.start() as server:
        for _ in range(2):
            chat.say(server, "Pay Bob 10")
            paid = stream_result(server.http.post("/stream", json=chat.approval()))
            assert paid.text() == "Paid Bob.", paid.body
            chat.messages[-1] = chat.approval()["messages"][-1]
        first, second = servers.fencing_tokens()
        # Four takes of the chat: two messages and two approvals; the approvals ran the tool.
        assert (first, second) == (2, 4)
        delete_redis_keys(redis_url, redis_prefix)  # as a Redis restarted empty would
        chat.say(server, "Pay Bob 10")
        paid = stream_result(server.http.post("/stream", json=chat.approval()))
        assert paid.text() == "Paid Bob.", paid.body
    assert servers.fencing_tokens() == [2, 4, 5]
