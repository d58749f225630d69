"""The benchmark suite (bench/) at its tiny size, so that it cannot rot: every benchmark runs
against the real servers and yields figures, and the results table is written. No timing is
asserted: these are seconds-long runs on a shared machine."""

from __future__ import annotations

import math
from pathlib import Path

from bench.__main__ import report, run
from bench.core import SIZES

BENCHMARKS = (
    "1 converter",
    "2 end-to-end",
    "3 concurrency /stream",
    "3 concurrency /live",
    "4 approval",
    "5 start-up",
    "6 load shedding /stream",
    "6 event-loop lag /stream",
    "7 scale-out: 2 workers",
    "7 scale-out: store",
    "7 scale-out: two instances",
    "8 ai 7 socket",
    "9 traces, metrics, recording",
)
# These start fresh servers every run: size.load_runs runs, not size.runs.
LOAD_BENCHMARKS = ("3 ", "6 load shedding", "7 scale-out: 2 workers")


def test_every_benchmark_yields_figures_and_the_table(tmp_path: Path) -> None:
    size = SIZES["tiny"]
    figures = run(size)

    assert {f.benchmark for f in figures} == set(BENCHMARKS)
    for figure in figures:
        runs = size.load_runs if figure.benchmark.startswith(LOAD_BENCHMARKS) else size.runs
        assert len(figure.ours) == runs, figure
        assert len(figure.theirs) == runs, figure
        assert all(math.isfinite(v) and v >= 0 for v in figure.ours + figure.theirs), figure

    results = tmp_path / "RESULTS.md"
    results.write_text(report(size, figures, seconds=1.0), encoding="utf-8")
    text = results.read_text(encoding="utf-8")
    assert "| cores |" in text and "| Python |" in text
    for benchmark in BENCHMARKS:
        assert f"| {benchmark} |" in text
