"""The benchmark suite (bench/) at its tiny size, so that it cannot rot: every benchmark runs
against the real servers and yields figures, and the results table is written. No timing is
asserted: these are seconds-long runs on a shared machine.

One test per benchmark module (endtoend and approvals together: they share their two servers),
so that pytest-xdist spreads them over its workers. Their servers are what they cost: each
uvicorn process starts ADK, 3-5 s of CPU. `-m "not bench"` leaves them out.

What a run writes besides the table (bench/publish.py: results.json, the charts and the
performance page) is tested here too, from given figures, in a temporary folder: in
milliseconds, with no server."""

from __future__ import annotations

import asyncio
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench import charts, instructions, layer, longchats, publish
from bench.__main__ import BENCHMARKS as MODULES
from bench.__main__ import run
from bench.core import SIZES, Figure, machine
from bench.publish import Paths, Run

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

    paths = _paths(tmp_path)
    publish.publish(
        Run("python -m bench --size tiny", "now", 0.1, "1 run", machine(), figures), paths
    )
    text = paths.results.read_text(encoding="utf-8")
    assert "| cores |" in text and "| Python |" in text
    for benchmark in GROUPS[only]:
        assert f"| {benchmark} |" in text
    (saved,) = publish.load_runs(paths.json)
    assert [(f.benchmark, f.metric, f.ours) for f in saved.figures] == [
        (f.benchmark, f.metric, f.ours) for f in figures
    ]
    drawn = {p.name for p in paths.charts.glob("*.svg")}
    page = paths.page.read_text(encoding="utf-8")
    for name in drawn:
        ET.parse(paths.charts / name)  # well-formed
        assert f"(assets/bench/{name})" in page
    expected: dict[tuple[str, ...], set[str]] = {
        ("concurrency",): {"cpu-per-answer.svg"},
        ("longchats",): {"longchats-cpu.svg", "longchats-history.svg", "longchats-written.svg"},
    }
    assert drawn == expected.get(only, set())


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


# -- what a run writes besides the table: no server, milliseconds ---------------------------------

SVG = "{http://www.w3.org/2000/svg}"


def _paths(root: Path) -> Paths:
    return Paths(
        json=root / "bench" / "results.json",
        results=root / "bench" / "RESULTS.md",
        page=root / "docs" / "performance.md",
        charts=root / "docs" / "assets" / "bench",
    )


def _figure(
    benchmark: str, metric: str, ours: list[float], theirs: list[float], than: str = "/run_sse"
) -> Figure:
    figure = Figure(benchmark, metric, "ms", "lower", f"ADK {than}")
    for o, t in zip(ours, theirs, strict=True):
        figure.add(o, t)
    return figure


def _long_chats() -> list[Figure]:
    """Benchmark 13 at two lengths on both stores: ours grows by 10 ms a turn, ADK's by 30."""
    figures = []
    for store, base in (("SQLite", 20.0), ("PostgreSQL", 30.0)):
        for length in (1, 500):
            ours, adk = base + length / 50, base + 3 * length / 50
            bench = f"13 long chats {store}"
            at = f"{length} prior"
            figures += [
                _figure(bench, f"{at}: server CPU per turn", [ours, ours + 2], [adk, adk + 4]),
                _figure(bench, f"{at}: history loading (session reads' CPU)", [1, 2], [3, 4]),
                _figure(bench, f"{at}: bytes written per turn (WAL)", [300, 320], [160, 170]),
                _figure(
                    bench,
                    f"{at}: recipe body {{id, message}}: server CPU per turn",
                    [ours - 1],
                    [adk],
                ),
            ]
    return figures


def _cpu_per_answer() -> list[Figure]:
    return [
        _figure("3 concurrency /stream", "server CPU per answer", [9.5, 9.7, 10.1], [14, 15, 15.2]),
        _figure(
            "3 concurrency /live",
            "server CPU per answer",
            [3.8, 3.9, 4.4],
            [4.0, 4.1, 4.3],
            "/run_live",
        ),
    ]


def _series(svg: str) -> dict[str, list[tuple[float, float]]]:
    """Each series' points as drawn: (the value it carries, its height on the page)."""
    root = ET.fromstring(svg)  # raises on a malformed document
    assert root.tag == f"{SVG}svg" and root.find(f"{SVG}title") is not None
    found: dict[str, list[tuple[float, float]]] = {}
    for group in root.iter(f"{SVG}g"):
        if group.get("class") != "series":
            continue
        marks = [m for m in group if m.get("data-value") is not None]
        found[group.get("data-name", "")] = [
            (float(m.get("data-value", "")), float(m.get("cy") or m.get("y") or "nan"))
            for m in marks
        ]
    return found


def test_a_line_chart_draws_each_series_with_its_points() -> None:
    series = [
        charts.Series("ours", (charts.Point(1, 20, 18, 22), charts.Point(500, 40, 35, 44)), 0),
        charts.Series("theirs", (charts.Point(1, 20, 19, 21), charts.Point(500, 120, 110, 130)), 1),
    ]
    svg = charts.line_chart(charts.Axes("A title", "x", "y"), series, (100.0, "goal"))

    drawn = _series(svg)
    assert list(drawn) == ["ours", "theirs"]
    assert [v for v, _ in drawn["ours"]] == [20, 40]
    heights = sorted((y, v) for points in drawn.values() for v, y in points)
    assert [v for _, v in heights] == sorted((v for _, v in heights), reverse=True)  # higher up
    assert "A title" in svg and "goal" in svg


def test_a_bar_chart_draws_a_bar_per_series_and_group() -> None:
    groups, series = publish.cpu_per_answer([Run("c", "w", 1, "r", {}, _cpu_per_answer())])
    svg = charts.bar_chart(charts.Axes("CPU", "transport", "ms"), groups, series)

    drawn = _series(svg)
    assert groups == ["/stream (ADK: /run_sse)", "/live (ADK: /run_live)"]
    assert {name: [v for v, _ in points] for name, points in drawn.items()} == {
        "ours": [9.7, 3.9],
        "ADK's server": [15, 4.1],
    }


def test_the_charts_come_from_the_figures_given() -> None:
    runs = [Run("c", "w", 1, "r", {}, _long_chats() + _cpu_per_answer())]
    drawn = publish.draw_charts(runs)

    assert set(drawn) == publish.CHART_NAMES
    cpu = _series(drawn["longchats-cpu.svg"])
    assert set(cpu) == {
        f"{who}, {store}"
        for who in ("ours", "ADK's server", "ours, recipe body")
        for store in ("SQLite", "PostgreSQL")
    }
    assert [v for v, _ in cpu["ours, SQLite"]] == [21.02, 31]  # medians at 1 and 500
    assert [v for v, _ in cpu["ADK's server, PostgreSQL"]] == [32.06, 62]
    written = _series(drawn["longchats-written.svg"])
    assert set(written) == {"ours / ADK's, SQLite", "ours / ADK's, PostgreSQL"}
    assert all(1.8 < v < 1.9 for points in written.values() for v, _ in points)  # ratios
    assert publish.draw_charts([Run("c", "w", 1, "r", {}, _cpu_per_answer())]).keys() == {
        "cpu-per-answer.svg"
    }


def test_a_run_replaces_only_the_benchmarks_it_measured(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    publish.publish(Run("first", "d1", 1, "r", {}, _long_chats() + _cpu_per_answer()), paths)
    again = _cpu_per_answer()
    again[0].ours = [1.0, 1.0, 1.0]
    publish.publish(Run("second", "d2", 1, "r", {}, again), paths)

    second, first = publish.load_runs(paths.json)
    assert (second.command, second.numbers(), second.figures[0].ours) == ("second", [3], [1, 1, 1])
    assert (first.command, first.numbers()) == ("first", [13])
    text = paths.results.read_text(encoding="utf-8")
    assert text.index("## Benchmark 3") < text.index("## Benchmark 13")
    assert json.loads(paths.json.read_text(encoding="utf-8"))["format"] == publish.FORMAT


def test_results_md_keeps_its_history_and_the_figures_not_run_since(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    paths.results.parent.mkdir(parents=True)
    header = "| benchmark | metric | ours | comparison | theirs | ratio | goal | verdict |"
    paths.results.write_text(
        "# Benchmark results\n\nold top\n\n"
        f"{publish.CARRIED}\n\nFrom before.\n\n"
        f"### Benchmark 3: a run of 2026-11-28\n\n{header}\n| --- |\n"
        "| 3 concurrency /stream | server CPU per answer (ms) | 9 | ADK | 14 | 0.65 | ≤ 0.7 | met |"
        "\n\n"
        f"### Benchmark 5: a run of 2026-11-22\n\n{header}\n| --- |\n"
        "| 5 start-up | process start to first /health (s) | 1.5 | ADK | 1.9 | 0.8 | ≤ 1 | met |"
        "\n\n"
        f"{publish.HISTORY}\n\nKept as it is.\n\n### Issue 27\n\nold runs\n",
        encoding="utf-8",
    )
    paths.page.parent.mkdir(parents=True)
    notes = f"{publish.NOTES_HEADING}\n\nWritten by hand.\n\n### More\n\nKept.\n"
    paths.page.write_text(f"# Performance\n\nold figures\n\n{notes}", encoding="utf-8")
    publish.publish(Run("now", "2026-12-07", 1, "r", {}, _cpu_per_answer()), paths)

    text = paths.results.read_text(encoding="utf-8")
    assert "old top" not in text
    assert text.endswith(f"{publish.HISTORY}\n\nKept as it is.\n\n### Issue 27\n\nold runs\n")
    carried = text[text.index(publish.CARRIED) : text.index("## Reading the numbers")]
    assert "5 start-up" in carried and "2026-11-22" in carried
    assert "3 concurrency" not in carried and "2026-11-28" not in carried  # measured again
    page = paths.page.read_text(encoding="utf-8")
    assert "old figures" not in page and page.endswith(f"\n\n{notes}")
    assert "![Server CPU per answer, ours and ADK's](assets/bench/cpu-per-answer.svg)" in page
    assert (
        "| 5 start-up | process start to first /health (s) | ADK | 1.5 | 1.9 | 0.8 | ≤ 1 | met "
        "| 2026-11-22 |" in page
    )
    publish.render(paths)  # python -m bench.charts: the same from results.json
    assert paths.results.read_text(encoding="utf-8") == text
    assert paths.page.read_text(encoding="utf-8") == page


@pytest.mark.parametrize(
    ("top", "ticks"),
    [
        (1032, [0, 200, 400, 600, 800, 1000, 1200]),
        (17.5, [0, 5, 10, 15, 20]),
        (0.3, [0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3]),
        (0, [0, 1]),
    ],
)
def test_the_value_axis_ends_at_a_round_tick_over_the_highest(
    top: float, ticks: list[float]
) -> None:
    assert charts.nice_ticks(top) == ticks
