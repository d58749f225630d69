"""The scenario catalogue (scenarios/catalogue/*.json) and the real client's runs of it.

A scenario is data: the user's steps, the client's settings, the transports and clients it
runs on, optional server settings, and the expected outcome (scenarios/README.md). ``runs``
says which runs a scenario names; ``CatalogueRuns`` makes each run once in a test process and
hands the same run to every test that reads it: tests/test_scenarios.py checks its
expectations, tests/protocol/test_message_fold.py folds its responses. A run is a chat of the
real AI SDK client in Node against a server of this process; making it twice would prove
nothing the first did not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.support.real_client import CLIENTS, OURS, STOCK, V7, RunningJob, client_job, start_jobs
from tests.support.rig import ServerPool

CATALOGUE = Path(__file__).resolve().parents[2] / "scenarios" / "catalogue"
TRANSPORTS = ("stream", "live")
# Client 7 on live: ai 7's own WebSocketChatTransport, and/or ours.
V7_LIVE = (STOCK, OURS)
KEYS = {"name", "description", "transports", "clients", "v7Live", "server", "job", "expect"}

# (transport, client, WebSocket transport) of one run of a scenario.
Run = tuple[str, str, str | None]


def load_scenarios() -> list[dict[str, Any]]:
    scenarios = []
    for path in sorted(CATALOGUE.glob("*.json")):
        scenario = json.loads(path.read_text(encoding="utf-8"))
        scenario.setdefault("name", path.stem)
        unknown = set(scenario) - KEYS
        assert not unknown, f"{path.name}: unknown keys {unknown}"
        clients = scenario.get("clients", CLIENTS)
        if isinstance(clients, dict):  # by transport
            assert set(clients) <= set(TRANSPORTS), f"{path.name}: clients {clients}"
            lists = [("clients", listed, tuple(CLIENTS)) for listed in clients.values()]
        else:
            lists = [("clients", clients, tuple(CLIENTS))]
        lists += [
            ("transports", scenario.get("transports", TRANSPORTS), TRANSPORTS),
            ("v7Live", scenario.get("v7Live", V7_LIVE), V7_LIVE),
        ]
        for key, listed, allowed in lists:
            assert listed and set(listed) <= set(allowed), f"{path.name}: {key} {listed}"
        scenarios.append(scenario)
    return scenarios


def clients_on(scenario: dict[str, Any], transport: str) -> list[str]:
    """The clients a scenario runs on a transport: ``clients`` is a list for every transport,
    or an object naming some transports' lists (the others: every client)."""
    clients = scenario.get("clients", CLIENTS)
    return list(clients.get(transport, CLIENTS) if isinstance(clients, dict) else clients)


def runs(scenario: dict[str, Any]) -> Iterator[Run]:
    """(transport, client, WebSocket transport) of every run of a scenario."""
    for transport in scenario.get("transports", TRANSPORTS):
        for client in clients_on(scenario, transport):
            if transport == "stream":
                yield transport, client, None
            elif client == V7:
                for ws in scenario.get("v7Live", [STOCK]):
                    yield transport, client, ws
            else:
                yield transport, client, OURS


class CatalogueRuns:
    """The runs of scenarios made so far in this process, by scenario name and run; each is
    started on the first ask (tests/conftest.py's ``catalogue_runs``, one per test process)."""

    def __init__(self, servers: ServerPool) -> None:
        self._servers = servers
        self._runs: dict[tuple[str, Run], RunningJob] = {}

    def start(self, wanted: Sequence[tuple[dict[str, Any], Run]], at_once: int) -> list[RunningJob]:
        """The runs wanted, in order: those not made yet started now, ``at_once`` at a time,
        each on the server its scenario's settings name."""
        new: dict[tuple[str, Run], dict[str, Any]] = {}
        for scenario, run in wanted:
            key = (scenario["name"], run)
            if key not in self._runs and key not in new:
                new[key] = self._job(scenario, run)
        started = start_jobs(list(new.values()), at_once) if new else []
        self._runs.update(zip(new, started, strict=True))
        return [self._runs[(scenario["name"], run)] for scenario, run in wanted]

    def _job(self, scenario: dict[str, Any], run: Run) -> dict[str, Any]:
        transport, client, ws = run
        server = self._servers.get(scenario.get("server", {}))
        options = {k: v for k, v in scenario["job"].items() if k != "steps"}
        steps = scenario["job"]["steps"]
        return client_job(server, client, steps, live=transport == "live", ws=ws, **options)
