"""A tool's result that the store could not take is kept and saved when the store is back
(docs/adr/0035-kept-results.md): a real server on a private PostgreSQL and Redis, whose
PostgreSQL stops after an approved payment did its work and before its result was stored.

The approval's response ends with an ``error`` and ``[DONE]``; the result is stored within
seconds of PostgreSQL's return; the client's retry of the approval then shows the payment's
real output and the model's answer, not outcome unknown; and the money moved once.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.adk.events import Event

from adk_stream_protocol.foundation.outages import RESULTS_WAITING_MESSAGE
from tests import test_scale_out as scale_out
from tests.faults.conftest import server_env
from tests.support.faults.checks import OUTAGE_WARNING, LogWindow, assert_ends, errors_of
from tests.support.faults.stores import PrivatePostgres, PrivateRedis
from tests.support.rig import LiveServer, run_server, sse_payloads, stream_result
from tests.support.waiting import wait_until
from tests.test_crashes import Chat, tool_outcomes

APP_NAME = "crashes"  # tests/support/agents/crash.py
DOWN_SECONDS = 2.0
SAVED_WITHIN_SECONDS = 8.0


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ledger") / "ledger.txt"


@pytest.fixture(scope="module")
def ready(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ready") / "paid"


def payments_env(
    postgres: PrivatePostgres, redis_store: PrivateRedis, ledger: Path, ready: Path
) -> dict[str, str]:
    return {
        **server_env(postgres, redis_store),
        "ADK_STREAM_AGENT": "tests.support.agents.crash:app",
        "CRASH_LEDGER": str(ledger),
        "RESULT_READY": str(ready),
        "RESULT_WAIT": "1",
        "ADK_STREAM_RESULT_RETRY_SECONDS": "30",
        # Not the faults' 1 s: a server's first turn (cold imports, the first connections) on a
        # busy 2-core CI machine once stalled past it and lost its lease before the approval
        # was asked. These tests lapse no lease; they stop the session store.
        "ADK_STREAM_LEASE_TTL_SECONDS": "5",
    }


@pytest.fixture(scope="module")
def payments_settings(
    postgres: PrivatePostgres, redis_store: PrivateRedis, ledger: Path, ready: Path
) -> dict[str, str]:
    return payments_env(postgres, redis_store, ledger, ready)


@pytest.fixture(scope="module")
def payments(
    payments_settings: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    with run_server(tmp_path_factory.mktemp("kept"), payments_settings) as live:
        yield live


@pytest.fixture(scope="module")
def other_payments(
    payments_settings: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A second instance of the same app, on the same stores."""
    with run_server(tmp_path_factory.mktemp("kept-other"), payments_settings) as live:
        yield live


def retried_until_answered(server: LiveServer, chat: Chat, refusals: tuple[int, ...]) -> Any:
    """The approval sent again, as a client retries it while it is refused (``refusals``),
    until it is answered: the payment's kept result, shown."""
    sent: list[httpx.Response] = []

    def answered() -> bool:
        sent[:] = [server.http.post("/stream", json=chat.approval())]
        return sent[0].status_code not in refusals

    wait_until(answered, lambda: sent[0].text[:300], every=0.2)
    finished = stream_result(sent[0])
    assert finished.status == 200, finished.body
    (outcome,) = tool_outcomes(finished)
    assert outcome["type"] == "tool-output-available", outcome
    assert outcome["output"] == {"paid": 10, "to": "Bob"}
    return finished


def stored_events(postgres: PrivatePostgres, chat_id: str) -> list[Event]:
    return scale_out.stored_events(postgres.url, chat_id, app_name=APP_NAME)


def stored_results(postgres: PrivatePostgres, chat_id: str) -> list[dict[str, Any]]:
    """The payment's stored results (not ADK's "needs approval" stand-in)."""
    return [
        dict(fr.response or {})
        for event in stored_events(postgres, chat_id)
        if event.author != "user"
        for fr in event.get_function_responses()
        if fr.name == "pay" and fr.id not in (event.actions.requested_tool_confirmations or {})
    ]


def saved_within(
    postgres: PrivatePostgres, chat_id: str, window: LogWindow
) -> list[dict[str, Any]]:
    """The payment's results, once the server saved them (in the store: read until there)."""
    return wait_until(
        lambda: stored_results(postgres, chat_id),
        lambda: window.text()[-4000:],
        within=SAVED_WITHIN_SECONDS,
        every=0.2,
    )


def approve_while_postgres_stops(
    server: LiveServer, chat: Chat, postgres: PrivatePostgres, ready: Path
) -> tuple[httpx.Response, float]:
    """The approval's response, the payment having run and PostgreSQL stopped before its
    result was stored; and when PostgreSQL stopped."""
    ready.unlink(missing_ok=True)
    answer: dict[str, httpx.Response] = {}

    def approve() -> None:
        answer["approval"] = server.http.post("/stream", json=chat.approval(), timeout=30)

    approving = threading.Thread(target=approve)
    approving.start()
    # The server process writes it; a file is all it can tell.
    wait_until(ready.exists, "the payment ran", within=15)
    # The payment is done; its result is returned in about a second: stop the store first.
    postgres.stop("fast")
    stopped = time.monotonic()
    approving.join(timeout=20)
    return answer["approval"], stopped


def test_a_result_the_store_missed_is_saved_when_it_is_back(
    payments: LiveServer, postgres: PrivatePostgres, ledger: Path, ready: Path
) -> None:
    chat = Chat(ledger)
    chat.say(payments, "Pay Bob 10")
    window = LogWindow(payments)
    response, stopped = approve_while_postgres_stops(payments, chat, postgres, ready)
    assert response.status_code == 200, response.text[:300]
    payloads = sse_payloads(response.text)
    assert_ends(payloads)
    (error,) = errors_of(payloads)
    assert "result will be saved" in error["errorText"], error
    # While the result waits for the store, the chat answers "try again", not busy or 500.
    retry = payments.http.post("/stream", json=chat.approval())
    assert retry.status_code == 503, retry.text[:300]
    assert int(retry.headers["retry-after"]) >= 1

    # The store stays down DOWN_SECONDS: the outage is what is tested.
    time.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - stopped)))
    postgres.start()
    results = saved_within(postgres, chat.id, window)
    assert results == [{"paid": 10, "to": "Bob"}]

    finished = retried_until_answered(payments, chat, (503,))
    assert finished.text() == "Paid Bob."
    assert len(chat.payments()) == 1

    log = window.text()
    assert "Traceback" not in log, log[-3000:]
    assert not re.search(r"\bERROR\b", log), log[-3000:]
    assert re.search(r"kept result saved chat=\S+ call=", log), log[-3000:]
    warnings = [line for line in log.splitlines() if OUTAGE_WARNING.search(line)]
    assert len(warnings) == 1, "\n".join(warnings)


def test_another_instance_also_answers_503_while_results_wait(
    payments: LiveServer,
    other_payments: LiveServer,
    postgres: PrivatePostgres,
    ledger: Path,
    ready: Path,
) -> None:
    """The other instance sees only the chat's lease held; the holder's mark tells it that
    the store's return ends the wait, so it answers 503 too, not the busy 409."""
    chat = Chat(ledger)
    chat.say(payments, "Pay Bob 10")
    paid_before = len(chat.payments())
    window, other_window = LogWindow(payments), LogWindow(other_payments)
    response, stopped = approve_while_postgres_stops(payments, chat, postgres, ready)
    assert response.status_code == 200, response.text[:300]
    (error,) = errors_of(sse_payloads(response.text))
    assert "result will be saved" in error["errorText"], error
    for server in (other_payments, payments):
        retry = server.http.post("/stream", json=chat.approval())
        assert retry.status_code == 503, (server.base_url, retry.status_code, retry.text[:300])
        assert int(retry.headers["retry-after"]) >= 1
        assert retry.json()["detail"] == RESULTS_WAITING_MESSAGE

    # The store stays down DOWN_SECONDS: the outage is what is tested.
    time.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - stopped)))
    postgres.start()
    saved_within(postgres, chat.id, window)
    # The holder lets the chat go once the result is saved: the other instance finishes it.
    retried_until_answered(other_payments, chat, (409, 503))
    assert len(chat.payments()) == paid_before + 1

    for log in (window.text(), other_window.text()):
        assert "Traceback" not in log, log[-3000:]
        assert not re.search(r"\bERROR\b", log), log[-3000:]
