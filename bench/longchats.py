"""Benchmark 13: long chats (issue 38; docs/adr/0071-long-chat-benchmark.md).

For each store (SQLite, PostgreSQL) and each length N of prior turns, ``rounds`` times: a chat
of N prior turns of the issue's shape (``bench/chat_shape.py``), then the next turn, measured
on our server and on ADK's own (``POST /run_sse``, same agent, same kind of store), back to
back:

- server CPU of the turn (the process's user + system time, read from ``/proc``), and wall
  time from sending the request to the end of the response;
- bytes written for the turn: on SQLite ``write_bytes`` less ``cancelled_write_bytes`` of
  ``/proc/<pid>/io`` (what the server sent to the disk and did not delete before it got there:
  every thread counts) and the growth of the database's files; on
  PostgreSQL the WAL it caused (``pg_current_wal_insert_lsn``, on a private instance whose WAL
  is only the benchmark's) and the growth of the database;
- the request's bytes: stock ``useChat`` posts the whole chat, ADK's client the new message;
  our server also with the persistence recipe's body ``{id, message}`` when it accepts it;
- the CPU of the turn's session reads (``bench/session_reads.py``): "history loading".

Each "next turn" runs on a chat of its own, so every round sees exactly N prior turns. The
measured figures are taken once the server has gone quiet after the response (its CPU time
stops moving), so work a turn leaves behind it is counted in that turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import chat_shape
from bench.chat_shape import CHAT_AGENT, Postgres, Store, StoreKind
from bench.clients import client, stream_post
from bench.core import Figure, Size
from bench.servers import Server, serve

# Ours at 500 prior turns, before issue 38's work (main at 7b4589c, 2026-12-06): the CPU of a
# turn's session reads. The goal is a tenth of it.
HISTORY_BEFORE_MS = {"SQLite": 176.0, "PostgreSQL": 247.0}
HISTORY_GOAL_LENGTH = 500
STORE_NAMES: dict[StoreKind, str] = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
# 500 prior turns are 1,000 messages; stock useChat posts them and the new one
# (before ADR 0069 the message count was limited too, at 1,000).
OUR_SETTINGS = {
    "ADK_STREAM_AGENT": "bench.chat_shape:root_agent",
    "ADK_STREAM_MAX_PARTS_PER_MESSAGE": "100000",
}
SETTLE_SECONDS = 0.15  # the server is quiet once its CPU time stays put this long

_ADK_APP_PY = """\
from google.adk.cli.fast_api import get_fast_api_app

from bench.session_reads import count_session_reads

app = get_fast_api_app(
    agents_dir={agents!r},
    web=False,
    session_service_uri={store!r},
    artifact_service_uri="memory://",
    memory_service_uri="memory://",
    auto_create_session=True,
)
count_session_reads(app)
"""
_AGENT_PY = """\
from bench.chat_shape import chat_agent

root_agent = chat_agent()
"""
_COMPACTED_AGENT_PY = """\
from bench.chat_shape import compacted_app

app = compacted_app()
"""


def lengths_of(size: Size) -> tuple[int, ...]:
    return (1, 3) if size.name == "tiny" else (1, 50, 200, 500)


def stores_of(size: Size) -> tuple[StoreKind, ...]:
    return ("sqlite",) if size.name == "tiny" else ("sqlite", "postgres")


@dataclass
class Turn:
    """One measured turn."""

    cpu: float  # seconds of server CPU
    wall: float  # seconds
    written: float  # bytes written (SQLite: write_bytes; PostgreSQL: WAL)
    grown: float  # bytes the store grew by
    request: float  # bytes of the request body
    history: float  # seconds of CPU in session reads
    ok: bool


@dataclass
class Side:
    """One server and the store it keeps its chats in."""

    server: Server
    store: Store
    postgres: Postgres | None
    database: str = ""
    template: chat_shape.Template | None = None
    recipe: bool | None = None  # whether our server takes the recipe's body (None: not tried)
    turns: dict[str, list[Turn]] = field(default_factory=dict)

    def written(self) -> int:
        if self.postgres is not None:
            return self.postgres.wal_lsn()
        # What reached the storage layer: written less what was truncated or deleted before
        # it got there (SQLite's rollback journal and its sorter's temporary files).
        fields = Path(f"/proc/{self.server.pid}/io").read_text().split()
        written = int(fields[fields.index("write_bytes:") + 1])
        return written - int(fields[fields.index("cancelled_write_bytes:") + 1])

    def size(self) -> int:
        if self.postgres is not None:
            return self.postgres.database_bytes(self.database)
        return self.store.disk_bytes()


def _reads(server: Server) -> tuple[float, float]:
    """The server's session reads' CPU so far, and its process CPU clock (both seconds)."""
    totals = httpx.get(f"{server.base_url}/bench/history", timeout=30).json()
    return float(totals["seconds"]), float(totals["cpu"])


def _settle(server: Server) -> None:
    """Wait until the server's CPU time stops moving (at most 5 s)."""
    deadline = time.monotonic() + 5
    last = server.cpu_seconds()
    while time.monotonic() < deadline:
        time.sleep(SETTLE_SECONDS)
        now = server.cpu_seconds()
        if now == last:
            return
        last = now


async def _post(server: Server, path: str, body: dict[str, Any]) -> tuple[bool, float]:
    marker = b'"type":"text-delta"' if server.kind == "ours" else b'"text":'
    async with client() as http:
        answer = await stream_post(http, server, path, body, marker)
    return answer.ok, answer.total


def measure(side: Side, path: str, body: dict[str, Any]) -> Turn:
    """The next turn: ``body`` posted to ``path``, and what it cost the server."""
    server = side.server
    _settle(server)
    (history, cpu), written, size = _reads(server), side.written(), side.size()
    ok, wall = asyncio.run(_post(server, path, body))
    _settle(server)
    history_after, cpu_after = _reads(server)
    return Turn(
        cpu=cpu_after - cpu,
        wall=wall,
        written=side.written() - written,
        grown=side.size() - size,
        request=len(json.dumps(body).encode()),
        history=history_after - history,
        ok=ok,
    )


async def _chat_messages(server: Server, chat_id: str) -> list[dict[str, Any]]:
    async with client() as http:
        response = await http.get(f"{server.base_url}/chats/{chat_id}")
        response.raise_for_status()
        messages: list[dict[str, Any]] = response.json()["messages"]
        return messages


def prepare(side: Side) -> None:
    """The template turn, through the real server."""
    chat_id = "template"
    asked = chat_shape.question("template")
    if side.server.kind == "ours":
        message = chat_shape.user_message("template")
        ok, _ = asyncio.run(
            _post(side.server, "/stream", chat_shape.stock_body(chat_id, [message]))
        )
        messages = asyncio.run(_chat_messages(side.server, chat_id))
    else:
        body = chat_shape.run_sse_body(chat_id, "template")
        ok, _ = asyncio.run(_post(side.server, "/run_sse", body))
        messages = []
    if not ok:
        raise RuntimeError(f"{side.server.kind}: the template turn failed")
    _settle(side.server)
    side.template = asyncio.run(chat_shape.read_template(side.store, chat_id, asked, messages))


def next_turn(
    side: Side, length: int, label: str, recipe: bool = False, last_served: bool = False
) -> Turn | None:
    """A chat of ``length`` prior turns, then its next turn measured. ``None``: our server
    refused the recipe's body (then it is not tried again). ADK's chats are all copies, but
    with ``last_served`` (compaction: the N-th turn compacts, not the measured one)."""
    assert side.template is not None
    chat_id = f"chat-{length}-{label}"
    server = side.server
    if server.kind == "adk":
        count = length - 1 if last_served else length
        asyncio.run(chat_shape.write_copies(side.store, side.template, chat_id, count))
        if last_served:
            body = chat_shape.run_sse_body(chat_id, f"{label} last")
            if not asyncio.run(_post(server, "/run_sse", body))[0]:
                raise RuntimeError(f"adk: turn {length} of {chat_id} failed")
        return measure(side, "/run_sse", chat_shape.run_sse_body(chat_id, f"{label} next"))
    if recipe and side.recipe is False:
        return None
    # Ours: N-1 copies, then the N-th turn through the server with the whole chat, so that the
    # server writes the chat's record as it does.
    copied = asyncio.run(chat_shape.write_copies(side.store, side.template, chat_id, length - 1))
    last = chat_shape.user_message(f"{label} last")
    ok, _ = asyncio.run(_post(server, "/stream", chat_shape.stock_body(chat_id, [*copied, last])))
    if not ok:
        raise RuntimeError(f"ours: turn {length} of {chat_id} failed")
    page = asyncio.run(_chat_messages(server, chat_id))
    if len(page) != 2 * length:
        raise RuntimeError(f"ours: {chat_id} holds {len(page)} messages, not {2 * length}")
    new = chat_shape.user_message(f"{label} next")
    if not recipe:
        return measure(side, "/stream", chat_shape.stock_body(chat_id, [*page, new]))
    turn = measure(side, "/stream", chat_shape.recipe_body(chat_id, new))
    side.recipe = turn.ok
    return turn if turn.ok else None


@contextlib.contextmanager
def _sides(
    kind: StoreKind, folder: Path, postgres: Postgres | None, compaction: bool = False
) -> Iterator[tuple[Side, Side]]:
    """Our server and ADK's, each on a store of its own of this kind (with ``compaction``,
    serving the App that compacts)."""
    stores: dict[str, tuple[Store, str]] = {}
    tag = f"{kind}-compacted" if compaction else kind
    for who in ("ours", "adk"):
        if postgres is None:
            path = folder / f"{who}-{tag}.db"
            stores[who] = (Store("sqlite", f"sqlite:///{path}", path), "")
        else:
            name = f"longchats_{who}"
            stores[who] = (Store("postgres", postgres.new_database(name)), name)
    agents = folder / f"agents-{tag}" / CHAT_AGENT
    agents.mkdir(parents=True)
    (agents / "__init__.py").write_text("from . import agent\n")
    (agents / "agent.py").write_text(_COMPACTED_AGENT_PY if compaction else _AGENT_PY)
    app_dir = folder / f"adk-{tag}"
    app_dir.mkdir()
    (app_dir / "longchats_adk_app.py").write_text(
        _ADK_APP_PY.format(agents=str(agents.parent), store=stores["adk"][0].url)
    )
    from bench.core import ROOT

    ours_settings = {**OUR_SETTINGS, "ADK_STREAM_SESSION_STORE": stores["ours"][0].url}
    if compaction:
        ours_settings["ADK_STREAM_AGENT"] = "bench.chat_shape:compacted"
    adk_settings = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(app_dir)])}
    with (
        serve("ours", ours_settings, app="bench.session_reads:app") as ours,
        serve("adk", adk_settings, app="longchats_adk_app:app") as adk,
    ):
        yield (
            Side(ours, stores["ours"][0], postgres, stores["ours"][1]),
            Side(adk, stores["adk"][0], postgres, stores["adk"][1]),
        )


def measure_store(kind: StoreKind, lengths: tuple[int, ...], rounds: int) -> dict[str, Any]:
    """Every length's rounds on one kind of store: turns by (who, length)."""
    results: dict[tuple[str, int], list[Turn]] = {}
    with chat_shape.temp_folder() as folder, contextlib.ExitStack() as stack:
        postgres = (
            stack.enter_context(chat_shape.private_postgres()) if kind == "postgres" else None
        )
        ours, adk = stack.enter_context(_sides(kind, folder, postgres))
        prepare(ours)
        prepare(adk)
        for length in lengths:
            for r in range(rounds):
                for who, side, recipe in (
                    ("ours", ours, False),
                    ("recipe", ours, True),
                    ("adk", adk, False),
                ):
                    turn = next_turn(side, length, f"{who}{r}", recipe)
                    if turn is not None:
                        results.setdefault((who, length), []).append(turn)
                got = {
                    who: results.get((who, length), [None])[-1] for who in ("ours", "recipe", "adk")
                }
                print(
                    f"  {STORE_NAMES[kind]} {length} prior turns, round {r + 1}: "
                    + ", ".join(
                        f"{who} {t.cpu * 1000:.0f} ms CPU {t.written / 1024:.0f} KB written"
                        for who, t in got.items()
                        if t is not None
                    ),
                    flush=True,
                )
    return {"turns": results}


def _ms(turns: list[Turn], attr: str) -> list[float]:
    return [getattr(t, attr) * 1000 for t in turns]


def _kb(turns: list[Turn], attr: str) -> list[float]:
    return [getattr(t, attr) / 1024 for t in turns]


def figures_of(
    kind: StoreKind, turns: dict[tuple[str, int], list[Turn]], lengths: tuple[int, ...]
) -> list[Figure]:
    name = STORE_NAMES[kind]
    bench = f"13 long chats {name}"
    adk = "ADK /run_sse"
    figures: list[Figure] = []
    written = "the server's writes to disk" if kind == "sqlite" else "WAL"
    for length in lengths:
        ours, theirs = turns[("ours", length)], turns[("adk", length)]
        recipe = turns.get(("recipe", length), [])
        at = f"{length} prior"
        rows = [
            Figure(bench, f"{at}: server CPU per turn", "ms", "lower", adk),
            Figure(bench, f"{at}: wall per turn", "ms", "lower", adk),
            Figure(
                bench, f"{at}: bytes written per turn ({written})", "KB", "lower", adk, goal=2.0
            ),
            Figure(bench, f"{at}: store growth per turn", "KB", "lower", adk),
            Figure(bench, f"{at}: request body (stock useChat)", "KB", "lower", adk),
            Figure(bench, f"{at}: history loading (session reads' CPU)", "ms", "lower", adk),
        ]
        pairs = [
            (_ms(ours, "cpu"), _ms(theirs, "cpu")),
            (_ms(ours, "wall"), _ms(theirs, "wall")),
            (_kb(ours, "written"), _kb(theirs, "written")),
            (_kb(ours, "grown"), _kb(theirs, "grown")),
            (_kb(ours, "request"), _kb(theirs, "request")),
            (_ms(ours, "history"), _ms(theirs, "history")),
        ]
        for figure, (mine, other) in zip(rows, pairs, strict=True):
            for o, t in zip(mine, other, strict=True):
                figure.add(o, t)
        if length == HISTORY_GOAL_LENGTH and HISTORY_BEFORE_MS[name]:
            rows[5].median_limit = HISTORY_BEFORE_MS[name] / 10
            rows[5].note = f"goal: a tenth of {HISTORY_BEFORE_MS[name]:.0f} ms (before)"
        if not all(t.ok for t in ours + theirs):
            rows[0].note = "some turns failed"
        figures.extend(rows)
        recipe_cpu = Figure(
            bench, f"{at}: recipe body {{id, message}}: server CPU per turn", "ms", "lower", adk
        )
        recipe_bytes = Figure(
            bench, f"{at}: recipe body {{id, message}}: request body", "KB", "lower", adk
        )
        if recipe:
            for by_recipe, by_adk in zip(recipe, theirs, strict=False):
                recipe_cpu.add(by_recipe.cpu * 1000, by_adk.cpu * 1000)
                recipe_bytes.add(by_recipe.request / 1024, by_adk.request / 1024)
        else:
            recipe_cpu.na = recipe_bytes.na = "the server refuses the recipe's body"
        figures += [recipe_cpu, recipe_bytes]
    first, last = lengths[0], lengths[-1]
    growth = Figure(
        bench,
        f"server CPU of a turn at {last} / at {first} prior",
        "x",
        "lower",
        "ADK's own",
        note=f"each round's turn at {last} over the median turn at {first}",
    )
    for our_turn, adk_turn in zip(turns[("ours", last)], turns[("adk", last)], strict=True):
        growth.add(
            our_turn.cpu / _median_cpu(turns[("ours", first)]),
            adk_turn.cpu / _median_cpu(turns[("adk", first)]),
        )
    figures.append(growth)
    return figures


def _median_cpu(turns: list[Turn]) -> float:
    return statistics.median(t.cpu for t in turns) or 1e-6  # never 0: a ratio's denominator


def compaction_supported() -> bool:
    """Whether the package bounds a turn's session read by the last compaction (issue 38's
    point 5: ``store/history_window.py``), or ``BENCH_COMPACTION=1`` says to measure anyway."""
    if os.environ.get("BENCH_COMPACTION") == "1":
        return True
    return importlib.util.find_spec("adk_stream_protocol.store.history_window") is not None


def compaction_lengths(size: Size) -> tuple[int, int]:
    return (3, 12) if size.name == "tiny" else (10, 1000)


def measure_compaction(lengths: tuple[int, int], rounds: int) -> tuple[Figure, dict[str, int]]:
    """Our turn's CPU at the longer length over the shorter, the App compacting, on SQLite;
    ADK's own server with the same App beside it; and how many compaction events each
    server's store holds at the end. Ours posts the recipe's body when it takes
    it (stock useChat's whole chat would be parsed at every length), else stock's."""
    short, long = lengths
    turns: dict[tuple[str, int], list[Turn]] = {}
    with chat_shape.temp_folder() as folder, _sides("sqlite", folder, None, True) as (ours, adk):
        prepare(ours)
        prepare(adk)
        for length in lengths:
            for r in range(rounds):
                turn = next_turn(ours, length, f"c{r}", recipe=True)
                if turn is None:
                    turn = next_turn(ours, length, f"s{r}")
                assert turn is not None
                turns.setdefault(("ours", length), []).append(turn)
                other = next_turn(adk, length, f"c{r}", last_served=True)
                assert other is not None
                turns.setdefault(("adk", length), []).append(other)
                print(
                    f"  compaction {length} prior turns, round {r + 1}: ours "
                    f"{turn.cpu * 1000:.0f} ms CPU, adk {other.cpu * 1000:.0f} ms CPU",
                    flush=True,
                )
        made: dict[str, int] = {s.server.kind: chat_shape.compactions(s.store) for s in (ours, adk)}
    body = "the recipe's body" if ours.recipe else "stock useChat's body"
    figure = Figure(
        "13 long chats compaction",
        f"server CPU of a turn at {long:,} prior / at {short}, compaction on",
        "x",
        "lower",
        "ADK's own, same App",
        median_limit=2.0,
        note=f"SQLite; ours posts {body}; each round's turn at {long:,} over the median turn "
        f"at {short}; compaction events stored: ours {made['ours']}, ADK {made['adk']}",
    )
    for mine, other in zip(turns[("ours", long)], turns[("adk", long)], strict=True):
        figure.add(
            mine.cpu / _median_cpu(turns[("ours", short)]),
            other.cpu / _median_cpu(turns[("adk", short)]),
        )
    return figure, made


def rounds_of(size: Size, rounds: int | None = None) -> int:
    """Rounds per store and length: ``rounds`` if given, else the size's."""
    return rounds or (size.runs if size.name == "tiny" else 9)


def run(size: Size, rounds: int | None = None) -> list[Figure]:
    lengths = lengths_of(size)
    rounds = rounds_of(size, rounds)
    figures: list[Figure] = []
    for kind in stores_of(size):
        measured = measure_store(kind, lengths, rounds)
        figures += figures_of(kind, measured["turns"], lengths)
    if compaction_supported():
        figures.append(measure_compaction(compaction_lengths(size), rounds)[0])
    else:
        short, long = compaction_lengths(size)
        compaction = Figure(
            "13 long chats compaction",
            f"server CPU of a turn at {long:,} prior / at {short}, compaction on",
            "x",
            "lower",
            median_limit=2.0,
        )
        compaction.na = "this version does not bound a turn's session read by a compaction"
        figures.append(compaction)
    return figures
