"""The benchmark suite (bench/) at its tiny size, so that it cannot rot: every benchmark runs
against the real servers and yields figures, and the results table is written. No timing is
asserted: these are seconds-long runs on a shared machine.

One test per benchmark module (endtoend and approvals together: they share their two servers),
so that pytest-xdist spreads them over its workers. Their servers are what they cost: each
uvicorn process starts ADK, 3-5 s of CPU. `-m "not bench"` leaves them out."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from bench import instructions, layer, longchats
from bench.__main__ import BENCHMARKS as MODULES
from bench.__main__ import report, run
from bench.core import SIZES, Figure

# The modules run together (``python -m bench --only ...``) -> the benchmarks they yield.
GROUPS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("converter",): ("1 converter",),
    ("endtoend", "approvals"): ("2 end-to-end", "4 approval"),
    ("concurrency",): ("3 concurrency /stream", "3 concurrency /live"),
    ("startup",): ("5 start-up",),
    ("hardening",): ("6 load shedding /stream", "6 event-loop lag /stream"),
    ("scaleout",): (
        "7 scale-out: 2 workers",
        "7 scale-out: store",
        "7 scale-out: two instances",
    ),
    ("ai7socket",): ("8 ai 7 socket",),
    ("observed",): ("9 traces, metrics, recording",),
    ("soak",): ("10 soak",),
    ("chats",): ("11 chats",),
    ("browser",): ("12 browser",),
    ("longchats",): ("13 long chats SQLite", "13 long chats compaction"),
}
# These start fresh servers every run: size.load_runs runs, not size.runs.
LOAD_BENCHMARKS = ("3 ", "6 load shedding", "7 scale-out: 2 workers")


@pytest.fixture(autouse=True)
def as_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmarks' servers with their own collector settings, not those tests/conftest.py
    gives the apps of the test process."""
    monkeypatch.delenv("ADK_STREAM_GC_FREEZE", raising=False)


def test_every_benchmark_is_smoke_tested() -> None:
    assert sorted(m for only in GROUPS for m in only) == sorted(MODULES)


@pytest.mark.out_of_process  # the benchmarks' servers: uvicorn processes
@pytest.mark.bench
@pytest.mark.parametrize("only", list(GROUPS), ids="+".join)
def test_the_benchmarks_yield_figures_and_a_table(only: tuple[str, ...], tmp_path: Path) -> None:
    size = SIZES["tiny"]
    figures = run(size, only)

    assert {f.benchmark for f in figures} == set(GROUPS[only])
    for figure in figures:
        if figure.na:  # not measurable on this version: no values, and it says why
            assert not figure.ours and not figure.theirs and figure.verdict().startswith("n/a")
            continue
        runs = size.load_runs if figure.benchmark.startswith(LOAD_BENCHMARKS) else size.runs
        assert len(figure.ours) == runs, figure
        assert len(figure.theirs) == runs, figure
        assert all(math.isfinite(v) and v >= 0 for v in figure.ours + figure.theirs), figure

    if only == ("longchats",):
        _long_chats_are_sane(figures)

    results = tmp_path / "RESULTS.md"
    results.write_text(report(size, figures, seconds=1.0), encoding="utf-8")
    text = results.read_text(encoding="utf-8")
    assert "| cores |" in text and "| Python |" in text
    for benchmark in GROUPS[only]:
        assert f"| {benchmark} |" in text


def _long_chats_are_sane(figures: list[Figure]) -> None:
    """Benchmark 13's figures say what a turn did: both servers used CPU, read the session
    and wrote to the disk; stock useChat's body grows with the chat and ADK's does not."""
    by_metric = {f.metric: f for f in figures}
    for length in (1, 3):
        for metric in ("server CPU per turn", "history loading (session reads' CPU)"):
            figure = by_metric[f"{length} prior: {metric}"]
            assert min(figure.ours + figure.theirs) > 0, figure
        written = by_metric[f"{length} prior: bytes written per turn (the server's writes to disk)"]
        assert min(written.ours + written.theirs) > 0, written
    body = "request body (stock useChat)"
    one, three = by_metric[f"1 prior: {body}"], by_metric[f"3 prior: {body}"]
    assert min(three.ours) > 2 * max(one.ours), (one, three)  # two more turns of messages
    assert three.theirs == one.theirs  # ADK's client sends the new message only


@pytest.mark.out_of_process  # the benchmarks' servers and a private PostgreSQL
@pytest.mark.bench
def test_long_chats_on_postgresql_count_the_wal_of_each_turn() -> None:
    """Benchmark 13 on its private PostgreSQL (``python -m bench`` runs it at ``moderate``
    only): every turn on both servers writes WAL and reads its session."""
    lengths = (1, 3)
    turns = longchats.measure_store("postgres", lengths, 1)["turns"]
    figures = longchats.figures_of("postgres", turns, lengths)

    for who in ("ours", "adk"):
        for length in lengths:
            (turn,) = turns[(who, length)]
            assert turn.ok and turn.written > 0 and turn.history > 0, (who, length, turn)
    assert {f.benchmark for f in figures} == {"13 long chats PostgreSQL"}


@pytest.mark.out_of_process  # the benchmarks' servers: uvicorn processes
@pytest.mark.bench
def test_long_chats_with_compaction_compact_and_yield_a_ratio() -> None:
    """Benchmark 13's compaction figure, which ``python -m bench`` measures only on a version
    that bounds a turn's reads by a compaction: both servers' chats get compacted (a chat of
    12 turns, a window of 10), and each yields its ratio."""
    figure, made = longchats.measure_compaction(longchats.compaction_lengths(SIZES["tiny"]), 1)

    assert made["ours"] >= 1 and made["adk"] >= 1, made
    assert len(figure.ours) == len(figure.theirs) == 1
    assert all(math.isfinite(v) and v > 0 for v in figure.ours + figure.theirs), figure


@pytest.mark.out_of_process  # the benchmarks' servers: uvicorn processes
@pytest.mark.bench
def test_the_layer_split_measures_both_ways_to_the_same_answers() -> None:
    """``python -m bench.profile layer``: the runner alone and the whole app, every round."""
    cost = layer.measure(rounds=2, answers=2, words=20, pace=0.0, warm_up=1)

    assert len(cost.runner) == len(cost.app) == 2
    assert all(math.isfinite(v) and v > 0 for v in cost.runner + cost.app)
    assert "app / runner" in cost.summary()


@pytest.mark.out_of_process  # the benchmarks' servers: uvicorn processes
@pytest.mark.bench
@pytest.mark.parametrize("way", instructions.WAYS)
def test_each_way_of_the_instruction_count_reaches_its_answers_end(way: str) -> None:
    """``python -m bench.profile instructions`` without valgrind: each way (our runner, our
    app, ADK's server) answers, and counts only around its measured answers."""
    states: list[str] = []
    asyncio.run(instructions.answer_at_once(way, 2, states.append))  # raises if one did not end
    assert states == ["on", "off"]
