"""Exactly once, for tools that deduplicate, under kills and stalls (issue 39, docs/adr/0032).

Tried as a production team runs it: instances of a real uvicorn on a private PostgreSQL and a
private Redis (tests/support/faults/stores.py), a 2 s lease, and a payments backend shared by
every instance that deduplicates by the call's id and refuses a write whose fencing token (the
chat's lease generation) is below the chat's highest (tests/support/dedup_backend.py). The
agent (tests/support/agents/idempotent_payments.py) has ``pay``, declared idempotent by the
setting, ``refund``, declared by its marker, and ``wire``, not declared.

- Kills: rounds of chats whose approved payment is cut by a SIGKILL of their instance, before
  the backend's effect or after it, in the body; the other instance finishes each chat (the
  client's retry of the approval, or a resume), and a fresh instance replaces the dead one.
- Stalls: an instance stopped (SIGSTOP) past its lease in the body after the effect, or in the
  agent's own ``before_tool_callback`` (after the server's start mark); the other instance
  finishes the turn; then the stalled one goes on (SIGCONT) and the chat takes one more turn.
- Redis restarted empty between a kill and the takeover: the fencing token still grows.

The backend's ledger, not the server, says what happened: each test compares it with the
chat's record (``GET /chats/{chatId}``) and its session. Each scenario runs once per module
(a fixture gathers what it did, asserting nothing); the tests each check one property of it.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from adk_stream_protocol.protocol.message_fold import MessageFold
from tests import test_scale_out as scale_out
from tests.support import dedup_backend
from tests.support.agents.idempotent_payments import APP_NAME, BACKEND_ENV, FAULTS_ENV
from tests.support.faults.stores import PrivatePostgres, PrivateRedis
from tests.support.rig import (
    LiveServer,
    answer_approvals,
    assistant_message,
    chat_body,
    chunks_of,
    post_stream,
    run_server,
    sse_payloads,
    user_message,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.out_of_process  # uvicorn instances killed and stopped, private stores

AGENT = "tests.support.agents.idempotent_payments:app"
LEASE_TTL_SECONDS = 2.0
UNKNOWN = "whether it completed is unknown"
IDEMPOTENT = ("pay", "refund")
# Each round kills one instance with three chats cut in it, one per tool.
KILL_ROUNDS = 4
# A resume after a kill: the first may replay the dead instance's log to its error, the next
# finishes the turn (ADR 0032's amendment).
RESUMES = 4
TIMEOUT = 30.0


# -- the deployment ----------------------------------------------------------------------------


@dataclass
class Deployment:
    """What every instance shares: the stores, the backend, the planned faults."""

    env: dict[str, str]
    backend: Path
    faults: Path
    postgres: PrivatePostgres
    tmp: pytest.TempPathFactory

    def start(self) -> tuple[LiveServer, ExitStack]:
        """A new instance, and what stops it."""
        stack = ExitStack()
        server = stack.enter_context(run_server(self.tmp.mktemp("instance"), self.env))
        return server, stack

    def ledger(self) -> dedup_backend.Ledger:
        return dedup_backend.read(self.backend)


@pytest.fixture(scope="module")
def deployment(
    postgres: PrivatePostgres, redis_store: PrivateRedis, tmp_path_factory: pytest.TempPathFactory
) -> Deployment:
    backend, faults = tmp_path_factory.mktemp("backend"), tmp_path_factory.mktemp("faults")
    env = {
        "ADK_STREAM_SESSION_STORE": postgres.url,
        "ADK_STREAM_REDIS_URL": redis_store.url,
        "ADK_STREAM_RESUMABLE_STREAMS": "true",
        "ADK_STREAM_LEASE_TTL_SECONDS": str(LEASE_TTL_SECONDS),
        "ADK_STREAM_AGENT": AGENT,
        "ADK_STREAM_IDEMPOTENT_TOOLS": "pay",
        BACKEND_ENV: str(backend),
        FAULTS_ENV: str(faults),
    }
    return Deployment(env, backend, faults, postgres, tmp_path_factory)


# -- one chat -----------------------------------------------------------------------------------


@dataclass
class Chat:
    """One chat as DefaultChatTransport drives it: a payment asked, approved, then cut."""

    tool: str
    point: str
    id: str = field(default_factory=lambda: f"eo-{uuid.uuid4().hex[:12]}")
    messages: list[dict[str, Any]] = field(default_factory=list)
    call_id: str = ""
    # How the turn ended, as the instance that finished it answered.
    finished_status: int | None = None
    finished_chunks: list[dict[str, Any]] = field(default_factory=list)
    next_status: int | None = None  # the chat's next turn (stalls only)
    # Stalls: the call's part in the record once the stalled run had ended its response.
    woken_part: dict[str, Any] = field(default_factory=dict)
    # Read after the scenario: the call's part in GET /chats/{chatId}, its stored results.
    part: dict[str, Any] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def idempotent(self) -> bool:
        return self.tool in IDEMPOTENT

    def ask(self, server: LiveServer) -> None:
        self.messages.append(user_message(f"{self.tool} Bob 10", f"u-{uuid.uuid4().hex[:8]}"))
        asked = post_stream(server, chat_body(self.id, *self.messages))
        assert asked.status == 200, asked.body
        self.messages.append(assistant_message(asked))
        (request,) = asked.of_type("tool-approval-request")
        self.call_id = request["toolCallId"]

    def approval(self) -> dict[str, Any]:
        """The body useChat sends after addToolApprovalResponse, and again on a retry."""
        message = answer_approvals(copy.deepcopy(self.messages[-1]), True)
        return chat_body(self.id, *self.messages[:-1], message, messageId=message["id"])

    def plan(self, deployment: Deployment, action: str) -> None:
        (deployment.faults / self.id).write_text(f"{action}:{self.point}", encoding="utf-8")

    def wait_reached(self, deployment: Deployment) -> None:
        # The instance's process writes it; a file is all it can tell.
        reached = deployment.faults / f"{self.id}.reached"
        wait_until(reached.exists, f"{self.id} at {self.point}", within=TIMEOUT, every=0.01)

    def finished_by(self, response: httpx.Response) -> None:
        self.finished_status = response.status_code
        if response.status_code == 200:
            self.finished_chunks = chunks_of(sse_payloads(response.text))

    def outcome(self) -> dict[str, Any] | None:
        """The call's outcome in the response that finished the turn."""
        kinds = ("tool-output-available", "tool-output-error", "tool-output-denied")
        found = [
            c
            for c in self.finished_chunks
            if c["type"] in kinds and c.get("toolCallId") == self.call_id
        ]
        return found[-1] if found else None

    def held(self) -> list[dict[str, Any]]:
        """The messages the page holds once the response that finished the turn has ended:
        the approved message, continued by that response (as ``useChat`` folds it)."""
        body = self.approval()
        fold = MessageFold(body["messages"], message_id=body["messageId"])
        for chunk in self.finished_chunks:
            fold.apply(chunk)
        return fold.messages

    def recorded_part(self, server: LiveServer) -> dict[str, Any]:
        """The call's part in the chat's record (``GET /chats/{chatId}``)."""
        record = server.http.get(f"/chats/{self.id}")
        assert record.status_code == 200, record.text
        parts = [
            part
            for message in record.json()["messages"]
            for part in message["parts"]
            if part.get("toolCallId") == self.call_id
        ]
        return parts[-1] if parts else {}

    def read_back(self, server: LiveServer, deployment: Deployment) -> None:
        """The chat's record and the call's stored results, as the stores hold them now."""
        self.part = self.recorded_part(server)
        self.results = [
            dict(response.response or {})
            for event in scale_out.stored_events(deployment.postgres.url, self.id, APP_NAME)
            if event.author != "user"
            for response in event.get_function_responses()
            if response.id == self.call_id
            and response.id not in (event.actions.requested_tool_confirmations or {})
        ]

    def unknown_results(self) -> int:
        return sum(UNKNOWN in str(result.get("error", "")) for result in self.results)

    def stored_transaction(self) -> str | None:
        """The transaction in the call's last stored result: what the model is given."""
        last = self.results[-1] if self.results else {}
        transaction = last.get("transaction")
        return transaction if isinstance(transaction, str) else None

    def recorded_transaction(self) -> str | None:
        """The backend's transaction id as the chat's record shows it for the call."""
        if self.part.get("state") != "output-available":
            return None
        output = self.part.get("output")
        return output.get("transaction") if isinstance(output, dict) else None

    def describe(self) -> str:
        outcome = self.outcome() or {}
        return (
            f"{self.tool}@{self.point} chat={self.id} call={self.call_id} "
            f"finished={self.finished_status} {outcome.get('type')} "
            f"record={self.part.get('state')} "
            f"{self.part.get('output') or self.part.get('errorText')}"
            + (f" after-the-woken-run={self.woken_part.get('state')}" if self.woken_part else "")
        )


def approve_until_killed(server: LiveServer, chat: Chat) -> None:
    """The approval reaches an instance that is killed while answering it: the body is cut."""
    with contextlib.suppress(httpx.HTTPError):
        response = server.http.post("/stream", json=chat.approval(), timeout=TIMEOUT)
        assert "[DONE]" not in response.text, response.text  # a whole answer: no kill landed


def resumed_until_finished(server: LiveServer, chat: Chat) -> httpx.Response:
    """``GET /stream/{chatId}/stream`` as a reloaded page resumes, again while what it gets is
    the dead instance's log (its error) rather than the turn's end."""
    response = server.http.get(f"/stream/{chat.id}/stream", timeout=TIMEOUT)
    for _ in range(RESUMES - 1):
        if response.status_code == 200:
            kinds = [c["type"] for c in chunks_of(sse_payloads(response.text))]
            if "finish" in kinds and any(k.startswith("tool-output") for k in kinds):
                break
        response = server.http.get(f"/stream/{chat.id}/stream", timeout=TIMEOUT)
    return response


def wait_stopped(pid: int) -> None:
    """Until the process is stopped (SIGSTOP): the kernel's word for it is in /proc."""
    wait_until(
        lambda: Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "T",
        f"process {pid} stopped",
        every=0.01,
    )


# -- kills --------------------------------------------------------------------------------------


@dataclass
class Scenario:
    chats: list[Chat]
    ledger: dedup_backend.Ledger

    def of(self, *tools: str) -> list[Chat]:
        return [chat for chat in self.chats if chat.tool in tools]


def kill_round(
    deployment: Deployment,
    victim: LiveServer,
    survivor: LiveServer,
    chats: list[Chat],
    resume: bool,
) -> None:
    """Chats cut at once by one SIGKILL of their instance, then finished on the survivor."""
    for chat in chats:
        chat.ask(victim)
        chat.plan(deployment, "kill")
    assert victim.process is not None
    with ThreadPoolExecutor(len(chats)) as pool:
        cut = [pool.submit(approve_until_killed, victim, chat) for chat in chats]
        for chat in chats:
            chat.wait_reached(deployment)
        os.kill(victim.process.pid, signal.SIGKILL)
        victim.process.wait(timeout=10)
        for each in cut:
            each.result()

    def finish(chat: Chat) -> None:
        # The survivor waits for the dead instance's lease to lapse, then takes the chat.
        if resume:
            chat.finished_by(resumed_until_finished(survivor, chat))
        else:
            chat.finished_by(survivor.http.post("/stream", json=chat.approval(), timeout=TIMEOUT))

    with ThreadPoolExecutor(len(chats)) as pool:
        list(pool.map(finish, chats))


@pytest.fixture(scope="module")
def kills(deployment: Deployment) -> Iterator[Scenario]:
    """``KILL_ROUNDS`` kills, each of an instance with three approved payments in their
    bodies (before or after the backend's effect); a fresh instance replaces each dead one
    while the survivor finishes the cut chats, and becomes the next round's survivor."""
    chats: list[Chat] = []
    with ExitStack() as stack, ThreadPoolExecutor(1) as starter:
        instances = []
        for _ in range(2):
            server, its_stack = deployment.start()
            stack.push(its_stack)
            instances.append(server)
        victim, survivor = instances
        for round_ in range(KILL_ROUNDS):
            first, second = ("before-effect", "after-effect")[:: 1 if round_ % 2 else -1]
            cut = [Chat("pay", first), Chat("refund", second), Chat("wire", second)]
            chats += cut
            fresh: Future[tuple[LiveServer, ExitStack]] = starter.submit(deployment.start)
            try:
                kill_round(deployment, victim, survivor, cut, resume=round_ % 2 == 1)
            finally:
                server, its_stack = fresh.result()
                stack.push(its_stack)
            victim, survivor = survivor, server
        for chat in chats:
            chat.read_back(victim, deployment)
        yield Scenario(chats, deployment.ledger())


def _failures(chats: list[Chat], failed: Any) -> str:
    bad = [chat.describe() for chat in chats if failed(chat)]
    return f"{len(bad)} of {len(chats)}:\n" + "\n".join(bad)


def test_an_idempotent_call_cut_by_a_kill_ends_with_its_real_result(kills: Scenario) -> None:
    """0 unknown outcomes: the response that finishes the turn, the chat's record and the
    session all give the backend's transaction."""
    chats = kills.of(*IDEMPOTENT)
    ledger = kills.ledger

    def failed(chat: Chat) -> bool:
        effects = ledger.effects_of(chat.call_id)
        transaction = effects[0].transaction if effects else None
        outcome = chat.outcome() or {}
        return (
            chat.finished_status != 200
            or outcome.get("type") != "tool-output-available"
            or outcome.get("output", {}).get("transaction") != transaction
            or chat.recorded_transaction() != transaction
            or transaction is None
            or chat.unknown_results() > 0
            or chat.stored_transaction() != transaction
        )

    assert not any(failed(chat) for chat in chats), "not finished with the real result: " + (
        _failures(chats, failed)
    )


def test_no_key_has_two_effects_at_the_backend(kills: Scenario) -> None:
    keys = {chat.call_id for chat in kills.chats}
    doubled = [key for key in keys if len(kills.ledger.effects_of(key)) > 1]
    assert not doubled, f"{len(doubled)} keys with more than one effect: {doubled}"


def test_every_effect_of_an_idempotent_call_is_in_the_chats_record(kills: Scenario) -> None:
    by_key = {chat.call_id: chat for chat in kills.of(*IDEMPOTENT)}
    effects = [effect for effect in kills.ledger.effects if effect.key in by_key]
    missing = [e for e in effects if by_key[e.key].recorded_transaction() != e.transaction]
    assert not missing, f"{len(missing)} of {len(effects)} effects not in the record: " + (
        _failures([by_key[e.key] for e in missing], lambda chat: True)
    )


def test_a_call_not_declared_idempotent_still_ends_unknown_and_never_runs_twice(
    kills: Scenario,
) -> None:
    """``wire`` keeps today's behaviour: outcome unknown, whatever the point of the kill, and
    no run after it (the backend saw at most the killed run's request)."""
    chats = kills.of("wire")

    def failed(chat: Chat) -> bool:
        outcome = chat.outcome() or {}
        attempts = kills.ledger.attempts_of(chat.call_id)
        return (
            chat.finished_status != 200
            or outcome.get("type") != "tool-output-error"
            or UNKNOWN not in outcome.get("errorText", "")
            or chat.part.get("state") != "output-error"
            or UNKNOWN not in chat.part.get("errorText", "")
            or len(attempts) != (chat.point == "after-effect")
        )

    assert not any(failed(chat) for chat in chats), "not as today: " + _failures(chats, failed)


def test_the_run_that_finishes_a_cut_call_writes_with_a_higher_token(kills: Scenario) -> None:
    """The killed run reached the backend with its lease's generation; the survivor's run of
    the same call comes with a strictly greater one (issue 39 point 3)."""
    chats = [chat for chat in kills.of(*IDEMPOTENT) if chat.point == "after-effect"]

    def failed(chat: Chat) -> bool:
        tokens = [attempt.token for attempt in kills.ledger.attempts_of(chat.call_id)]
        return len(tokens) != 2 or not tokens[0] < tokens[1]

    def tokens_of(chat: Chat) -> str:
        attempts = kills.ledger.attempts_of(chat.call_id)
        return f"{chat.id}: {[(a.outcome, a.token) for a in attempts]}"

    bad = [tokens_of(chat) for chat in chats if failed(chat)]
    assert not bad, f"{len(bad)} of {len(chats)} without a greater token: {bad}"


# -- stalls -------------------------------------------------------------------------------------


def stall(deployment: Deployment, a: LiveServer, b: LiveServer, chat: Chat) -> None:
    """A stops itself at the chat's point; B finishes the turn once A's lease has lapsed; A
    goes on; then the chat's next turn, on B, which holds the chat."""
    chat.ask(a)
    chat.plan(deployment, "stop")
    assert a.process is not None
    with httpx.stream("POST", f"{a.base_url}/stream", json=chat.approval(), timeout=TIMEOUT) as cut:
        chat.wait_reached(deployment)
        wait_stopped(a.process.pid)
        try:
            # B's retry waits for the chat (its busy timeout is longer than the lease's TTL).
            chat.finished_by(b.http.post("/stream", json=chat.approval(), timeout=TIMEOUT))
        finally:
            os.kill(a.process.pid, signal.SIGCONT)
        with contextlib.suppress(httpx.HTTPError):
            cut.read()  # A's response ends, whatever it says
    chat.woken_part = chat.recorded_part(b)
    # The page that got B's answer says more: the holder's turn learns what A did late.
    hello = user_message("Hello", f"u-{uuid.uuid4().hex[:8]}")
    body = chat_body(chat.id, *chat.held(), hello)
    chat.next_status = b.http.post("/stream", json=body, timeout=TIMEOUT).status_code


@pytest.fixture(scope="module")
def stalls(deployment: Deployment) -> Iterator[Scenario]:
    chats = [
        Chat("pay", "after-effect"),
        Chat("pay", "callback"),
        Chat("refund", "callback"),
        Chat("wire", "callback"),
    ]
    with ExitStack() as stack:
        a, a_stack = deployment.start()
        stack.push(a_stack)
        b, b_stack = deployment.start()
        stack.push(b_stack)
        for chat in chats:
            stall(deployment, a, b, chat)
        for chat in chats:
            chat.read_back(b, deployment)
        yield Scenario(chats, deployment.ledger())


def test_an_idempotent_call_stalled_past_its_lease_ends_with_its_real_result(
    stalls: Scenario,
) -> None:
    chats = stalls.of(*IDEMPOTENT)
    ledger = stalls.ledger

    def failed(chat: Chat) -> bool:
        effects = ledger.effects_of(chat.call_id)
        outcome = chat.outcome() or {}
        return (
            len(effects) != 1
            or chat.finished_status != 200
            or outcome.get("type") != "tool-output-available"
            or outcome.get("output", {}).get("transaction") != effects[0].transaction
            or chat.recorded_transaction() != effects[0].transaction
            or chat.unknown_results() > 0
            or chat.stored_transaction() != effects[0].transaction
            or chat.next_status != 200
        )

    assert not any(failed(chat) for chat in chats), "not finished with the real result: " + (
        _failures(chats, failed)
    )


def test_a_run_woken_after_the_takeover_is_refused_by_the_backend(stalls: Scenario) -> None:
    """Stopped in the agent's own callback, after the start mark: the new holder ran the call
    with a greater token; the woken run's request comes with its own, lower, and the backend
    refuses it (issue 39 point 3)."""
    chats = [chat for chat in stalls.of(*IDEMPOTENT) if chat.point == "callback"]

    def failed(chat: Chat) -> bool:
        attempts = stalls.ledger.attempts_of(chat.call_id)
        return [a.outcome for a in attempts] != ["effect", "refused"] or not (
            attempts[1].token < attempts[0].token
        )

    def attempts_of(chat: Chat) -> str:
        attempts = stalls.ledger.attempts_of(chat.call_id)
        return f"{chat.id}: {[(a.outcome, a.token) for a in attempts]}"

    bad = [attempts_of(chat) for chat in chats if failed(chat)]
    assert not bad, f"{len(bad)} of {len(chats)} not refused: {bad}"


def test_a_late_result_of_a_call_not_declared_idempotent_is_recorded(stalls: Scenario) -> None:
    """``wire``, stopped in the agent's callback: the new holder ends it unknown and does not
    run it; the woken run then moves the money. The chat's record learns the transaction, and
    the call's last stored result is it (issue 39 point 2)."""
    (chat,) = stalls.of("wire")
    effects = stalls.ledger.effects_of(chat.call_id)
    assert len(effects) == 1, effects  # the woken run's, the only one
    assert chat.recorded_transaction() == effects[0].transaction, chat.describe()
    assert chat.stored_transaction() == effects[0].transaction, chat.results


def test_every_effect_of_an_idempotent_call_stalled_is_in_the_chats_record(
    stalls: Scenario,
) -> None:
    by_key = {chat.call_id: chat for chat in stalls.of(*IDEMPOTENT)}
    effects = [effect for effect in stalls.ledger.effects if effect.key in by_key]
    assert {effect.key for effect in effects} == set(by_key)
    assert all(len(stalls.ledger.effects_of(key)) == 1 for key in by_key)
    missing = [e for e in effects if by_key[e.key].recorded_transaction() != e.transaction]
    assert not missing, f"{len(missing)} of {len(effects)} effects not in the record: " + (
        _failures([by_key[e.key] for e in missing], lambda chat: True)
    )


def test_a_run_woken_after_the_takeover_leaves_the_holders_record_as_it_was(
    stalls: Scenario,
) -> None:
    """The woken run's writes to the session are refused as stale; its response's end must
    not write the chat's record either, over the message the new holder finished (a page that
    reloads would find the call still approved and waiting, and the answer gone)."""

    def failed(chat: Chat) -> bool:
        outcome = chat.outcome() or {}
        wanted: str = outcome.get("type", "").removeprefix("tool-")
        return wanted != chat.woken_part.get("state")

    chats = stalls.chats
    assert not any(failed(chat) for chat in chats), "record written by the stale run: " + (
        _failures(chats, failed)
    )


# -- Redis restarted, empty ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def after_redis_restart(deployment: Deployment, redis_store: PrivateRedis) -> Iterator[Scenario]:
    """A payment cut by a kill after the backend's effect; then Redis restarts empty (the
    chat's lease and its generation counter gone) before the other instance finishes it."""
    chat = Chat("pay", "after-effect")
    with ExitStack() as stack:
        a, a_stack = deployment.start()
        stack.push(a_stack)
        b, b_stack = deployment.start()
        stack.push(b_stack)
        chat.ask(a)
        chat.plan(deployment, "kill")
        assert a.process is not None
        with ThreadPoolExecutor(1) as pool:
            cut = pool.submit(approve_until_killed, a, chat)
            chat.wait_reached(deployment)
            os.kill(a.process.pid, signal.SIGKILL)
            a.process.wait(timeout=10)
            cut.result()
        redis_store.kill()
        redis_store.start()
        sent: list[httpx.Response] = []

        def answered() -> bool:
            # Right after Redis is back the first request may still meet the outage (503).
            sent[:] = [b.http.post("/stream", json=chat.approval(), timeout=TIMEOUT)]
            return sent[0].status_code != 503

        wait_until(answered, lambda: sent[0].text[:300], within=TIMEOUT, every=0.2)
        chat.finished_by(sent[0])
        chat.read_back(b, deployment)
        yield Scenario([chat], deployment.ledger())


def test_after_redis_restarts_empty_the_new_holder_still_writes_with_a_higher_token(
    after_redis_restart: Scenario,
) -> None:
    """The lease generation is durable: the holder after an empty Redis comes with a token
    above the one the killed holder wrote with, so the backend takes its run of the call
    (the same key: the same transaction) and the call ends with its real result."""
    (chat,) = after_redis_restart.chats
    attempts = after_redis_restart.ledger.attempts_of(chat.call_id)
    assert [(a.outcome, a.transaction) for a in attempts][1:] == [
        ("repeat", attempts[0].transaction)
    ], (chat.describe(), attempts)
    assert attempts[0].token < attempts[1].token, attempts
    assert chat.recorded_transaction() == attempts[0].transaction, chat.describe()
    assert chat.stored_transaction() == attempts[0].transaction, chat.results
    assert chat.unknown_results() == 0, chat.results
