"""The message fold (``protocol/message_fold.py``) against the real AI SDK clients.

The real client's side is scenarios/fold-check.mjs: the package's own ``AbstractChat`` (ai
6.0.25, the newest 6.x, ai 7) holding the messages the request carried, its
``DefaultChatTransport`` reading the response's chunks, and the chat's messages once it has
read them. The fold must give the same JSON, and stop reading where the client does.

Two sources of responses:

- the server's own: every scenario of the catalogue (scenarios/catalogue), and a few of
  tests/support/agents/tools.py's answers (a stop from another tab, citations, a tool that raises),
  run by the real client (over ``/stream`` with ai 6 and 7, over ``/live`` with ai 6 on our
  transport and ai 7 on its own), each request folded from the messages it carried (as the stock
  helpers left them: approvals, browser outputs, edits) and the chunks the client read. The 6.x
  runs are also folded by 6.0.25, which differs in one place (``as_6_0_25``);
- hand-written ones (``tests/support/fold_cases.py``): orders and chunks the server never sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from adk_stream_protocol.protocol.message_fold import MessageFold
from adk_stream_protocol.protocol.partial_json import NO_VALUE, fix_json, parse_partial_json
from tests.support.catalogue import CatalogueRuns, Run, load_scenarios, runs
from tests.support.fold_cases import CASES, FoldCase
from tests.support.real_client import V7, run_real_clients

pytestmark = pytest.mark.out_of_process  # the real AI SDK clients and fold-check.mjs, in Node

NEW_ID = "new-message-id"  # the id fold-check.mjs's chat gives a new message


def folded(
    client: str,
    messages: list[dict[str, Any]],
    chunks: list[dict[str, Any]],
    trigger: str | None = "submit-message",
    message_id: str | None = None,
) -> MessageFold:
    fold = MessageFold(
        messages,
        ai_sdk=7 if client == V7 else 6,
        trigger="regenerate-message" if trigger == "regenerate-message" else "submit-message",
        message_id=message_id,
        new_message_id=NEW_ID,
    )
    for chunk in chunks:
        fold.apply(chunk)
    return fold


def fold_job(
    client: str,
    messages: list[dict[str, Any]],
    chunks: list[dict[str, Any]],
    trigger: str | None = "submit-message",
    message_id: str | None = None,
) -> dict[str, Any]:
    job = {"client": client, "messages": messages, "chunks": chunks, "trigger": trigger}
    return {"fold": job | ({"messageId": message_id} if message_id is not None else {})}


def assert_same(
    fold: MessageFold, held: dict[str, Any], where: str, client: str | None = None
) -> None:
    assert (as_6_0_25(fold.messages) if client == "6.0.25" else fold.messages) == held[
        "messages"
    ], where
    # The fold stops reading where the client ends in error.
    assert (fold.refused is not None) == (held["status"] == "error"), (where, fold.refused, held)


# -- hand-written responses -------------------------------------------------------------------


def synthetic() -> Iterator[Any]:
    for case in CASES:
        for client in case.clients:
            yield pytest.param(case, client, id=f"{case.name}-{client}")


@pytest.fixture(scope="module")
def held_after_cases() -> dict[tuple[str, str], dict[str, Any]]:
    """What each client holds after each case, all asked of Node at once."""
    keys = [(case.name, client) for case in CASES for client in case.clients]
    jobs = [
        fold_job(client, case.messages, case.chunks, case.trigger, case.message_id)
        for case in CASES
        for client in case.clients
    ]
    return dict(zip(keys, run_real_clients(jobs), strict=True))


@pytest.mark.parametrize(("case", "client"), list(synthetic()))
def test_hand_written_response(
    held_after_cases: dict[tuple[str, str], dict[str, Any]], case: FoldCase, client: str
) -> None:
    held = held_after_cases[(case.name, client)]
    fold = folded(client, case.messages, case.chunks, case.trigger, case.message_id)
    assert_same(fold, held, case.name)


def test_the_cases_cover_every_kind_of_end() -> None:
    """The hand-written cases include ones where a client stops reading and ones where it
    reads to the end, and a client's messages that differ between ai 6 and 7."""
    ends = {
        folded(client, c.messages, c.chunks).refused is None for c in CASES for client in c.clients
    }
    assert ends == {True, False}
    case = next(c for c in CASES if c.name.startswith("a delta after its step ended"))
    assert folded("6", case.messages, case.chunks).refused is not None
    assert folded("7", case.messages, case.chunks).refused is None


def test_the_fold_leaves_the_request_messages_alone() -> None:
    case = next(c for c in CASES if c.name == "a continued answer after an approval")
    before = repr(case.messages)
    fold = folded("6", case.messages, case.chunks, message_id="m1")
    assert repr(case.messages) == before
    assert fold.messages[-1]["parts"][1]["state"] == "output-available"


@pytest.mark.parametrize(
    ("text", "fixed"),
    [('{"a": [1, 2', '{"a": [1, 2]}'), ('{"a": tr', '{"a": true}'), ('{"a', "{}"), ("", "")],
)
def test_partial_json_is_closed(text: str, fixed: str) -> None:
    assert fix_json(text) == fixed


def test_partial_json_that_cannot_be_read() -> None:
    assert parse_partial_json("") is NO_VALUE
    assert parse_partial_json('{"__proto__": {}}') is NO_VALUE
    assert parse_partial_json("NaN") is NO_VALUE
    assert parse_partial_json("null") is None


# -- the server's own responses -----------------------------------------------------------------

# The runs of each scenario folded here: one per transport and client family (the 6.x runs'
# chunks are also folded by 6.0.25, which the server cannot tell from the newest 6.x).
FOLDED_RUNS = {("stream", "6"), ("stream", V7), ("live", "6"), ("live", V7)}
AT_ONCE = 6


# What the catalogue does not hold: tests/support/agents/tools.py's answers, on /stream (ai 6 and
# 7) and ai 7's socket. Another tab's stop (an `abort`, and for ai 7 the finish reason
# "interrupted"), a cited answer (ai 7's `citations`), a tool that raises, an approval by arguments.
TEST_AGENT = {"ADK_STREAM_AGENT": "tests.support.agents.tools:root_agent"}
EXTRA_SCENARIOS = [
    {"name": name, "server": TEST_AGENT, "clients": {"live": [V7]}, "job": job}
    for name, job in {
        "stopped-on-the-server": {
            "steps": [{"action": "send", "text": "slow 30", "stopOnServerAfterMs": 1000}],
            "timeoutMs": 20_000,
        },
        "cited-answer": {"steps": [{"action": "send", "text": "cite"}]},
        "tool-raises": {"steps": [{"action": "send", "text": "explode"}]},
        "transfer-approved": {
            "steps": [
                {"action": "send", "text": "transfer 50"},
                {"action": "approve", "approved": True},
            ],
            "sendAutomaticallyWhen": "approvals",
        },
    }.items()
]


def all_scenarios() -> list[dict[str, Any]]:
    return [*load_scenarios(), *EXTRA_SCENARIOS]


def scenario_runs() -> Iterator[tuple[dict[str, Any], Run]]:
    for scenario in all_scenarios():
        for run in runs(scenario):
            if run[:2] in FOLDED_RUNS:
                yield scenario, run


@pytest.fixture(scope="module")
def scenario_reports(
    catalogue_runs: CatalogueRuns,
) -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """Each scenario's jobs and reports (one per folded run), all run at once; the runs are
    those tests/test_scenarios.py checks (one process makes each once: the same group)."""
    selected = list(scenario_runs())
    reports: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for (scenario, _), job in zip(selected, catalogue_runs.start(selected, AT_ONCE), strict=True):
        reports.setdefault(scenario["name"], []).append((job.job, job.report()))
    return reports


def responses(report: dict[str, Any]) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each request that sent messages, and the chunks its client read (a stopped one, those
    before the stop)."""
    for request in report["requests"]:
        body = request["request"].get("body")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            continue  # a resume: it carries no messages
        yield body, request["chunks"][: request.get("deliveredChunks")]


def as_6_0_25(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The one difference of 6.0.25 on the server's responses: its reasoning parts have no
    ``id`` (the newest 6.x copies the chunk's)."""
    return [
        message
        | {
            "parts": [
                {k: v for k, v in part.items() if k != "id"}
                if part.get("type") == "reasoning"
                else part
                for part in message["parts"]
            ]
        }
        for message in messages
    ]


@pytest.mark.parametrize("name", [s["name"] for s in all_scenarios()])
def test_server_responses(
    scenario_reports: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]], name: str
) -> None:
    checks: list[tuple[str, str, MessageFold, dict[str, Any]]] = []
    for job, report in scenario_reports[name]:
        client = job["client"]
        for number, (body, chunks) in enumerate(responses(report)):
            args = (body["messages"], chunks, body.get("trigger"), body.get("messageId"))
            for folder in ["6.0.25", "6"] if client == "6" else [client]:
                where = f"{name} {job['transport']} {client} as {folder}, response {number}"
                checks.append((where, folder, folded(folder, *args), fold_job(folder, *args)))
    assert checks, f"{name}: no response to fold"
    held = run_real_clients([job for *_, job in checks])
    for (where, folder, fold, _), client_held in zip(checks, held, strict=True):
        assert_same(fold, client_held, where, folder)


# Every chunk type of protocol/chunks.py the server sends (not `tool-input-delta`,
# `tool-input-error` and `message-metadata`); `data-*` as one.
SERVER_CHUNK_TYPES = {
    "start", "finish", "start-step", "finish-step", "text-start", "text-delta", "text-end",
    "reasoning-start", "reasoning-delta", "reasoning-end", "tool-input-start",
    "tool-input-available", "tool-approval-request", "tool-approval-response",
    "tool-output-available", "tool-output-error", "tool-output-denied", "source-url",
    "source-document", "file", "data-*", "error", "abort",
}  # fmt: skip


def test_the_server_responses_hold_every_chunk_type(
    scenario_reports: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]],
) -> None:
    seen = {
        "data-*" if chunk["type"].startswith("data-") else chunk["type"]
        for pairs in scenario_reports.values()
        for _, report in pairs
        for _, chunks in responses(report)
        for chunk in chunks
    }
    assert seen >= SERVER_CHUNK_TYPES, SERVER_CHUNK_TYPES - seen
    cited = [
        chunk
        for pairs in scenario_reports.values()
        for _, report in pairs
        for _, chunks in responses(report)
        for chunk in chunks
        if chunk.get("citations")
    ]
    assert cited, "no text-end with citations (ai 7)"
