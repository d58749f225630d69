"""What every benchmark shares: sizes, figures over several runs, the machine, the table."""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Size:
    """How much each benchmark does. Every count is bounded; nothing runs open-ended."""

    name: str
    runs: int  # runs per benchmark; each run measures ours and its comparison
    load_runs: int  # runs of the concurrency benchmark (each starts fresh servers)
    converter_rounds: int  # model calls (think, text, tool call, result) in the event stream
    converter_repeats: int  # passes over the stream per run (the run's figure is the best)
    answer_words: int  # the long answer of the end-to-end benchmark
    words_per_partial: int
    latency_requests: int  # sequential requests per run for time to first text / total
    rps_requests: dict[int, int]  # concurrency -> requests per run
    streams: int  # concurrent /stream requests
    stream_words: int  # their (paced) answer
    stream_pace: float  # seconds between partials, so that the streams stay open together
    sockets: int  # open /live sockets
    turns_per_socket: int
    turn_window: float  # seconds within which each socket starts its next turn
    approvals: int  # approvals per run and transport
    startups: int  # server starts per run and server
    shed_cap: int  # the cap on concurrent responses in the load-shedding benchmark
    lag_chars: int  # characters of the large messages timed for event-loop lag
    soak_conversations: int  # conversations of the soak (one run, two instances)
    chats: int  # one user's chats, for reading them back (benchmark 11)
    chat_messages: int  # messages of each of them
    chat_reads: int  # reads of each kind per run


SIZES = {
    "tiny": Size(
        name="tiny",
        runs=1,
        load_runs=1,
        converter_rounds=3,
        converter_repeats=1,
        answer_words=200,
        words_per_partial=10,
        latency_requests=1,
        rps_requests={1: 2, 10: 10, 100: 20},
        streams=10,
        stream_words=20,
        stream_pace=0.01,
        sockets=5,
        turns_per_socket=2,
        turn_window=0.2,
        approvals=1,
        startups=1,
        shed_cap=5,
        lag_chars=20_000,
        soak_conversations=20,
        chats=60,
        chat_messages=4,
        chat_reads=3,
    ),
    "moderate": Size(
        name="moderate",
        runs=5,
        load_runs=3,
        converter_rounds=200,
        converter_repeats=3,
        answer_words=2000,
        words_per_partial=10,
        latency_requests=10,
        rps_requests={1: 10, 10: 30, 100: 100},
        streams=500,
        stream_words=200,
        stream_pace=0.05,
        sockets=500,
        turns_per_socket=3,
        turn_window=4.0,
        approvals=20,
        startups=1,
        shed_cap=100,  # the default
        lag_chars=200_000,  # the default max_message_chars
        soak_conversations=5000,  # issue 23's soak
        chats=10_000,  # issue 25's scale
        chat_messages=20,
        chat_reads=50,
    ),
}


# -- figures ------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


Better = Literal["lower", "higher"]


@dataclass
class Figure:
    """One metric of one benchmark: a value per run for us and for the comparison.

    ``ratio`` is ours / comparison in the metric's own unit, run by run (both measured in the
    same run, on the same machine state). ``goal`` bounds the median ratio, in the direction
    ``better`` says: a time goal of 1.10 means "at most 10% slower", a throughput goal of
    0.91 means "at most 10% fewer per second"."""

    benchmark: str
    metric: str
    unit: str
    better: Better
    comparison: str = ""
    goal: float | None = None
    note: str = ""
    limit: float | None = None  # an absolute bound on ours, in every run (e.g. 0 errors)
    why: str = ""  # the known cause, shown when the goal is missed
    margin: float | None = None  # a bound on ours − theirs, in every run (0: back to baseline)
    na: str = ""  # why the figure cannot be measured on this version (no values; verdict n/a)
    median_limit: float | None = None  # an absolute bound on ours' median over the runs
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)

    def add(self, ours: float, theirs: float | None = None) -> None:
        self.ours.append(ours)
        if theirs is not None:
            self.theirs.append(theirs)

    def ratios(self) -> list[float]:
        return [o / t for o, t in zip(self.ours, self.theirs, strict=True) if t]

    def verdict(self) -> str:
        if self.na:
            return f"n/a: {self.na}"
        if self.margin is not None:
            worst = max((o - t for o, t in zip(self.ours, self.theirs, strict=True)), default=0.0)
            return "met" if worst <= self.margin else f"**missed: {worst:+g} in the worst run**"
        if self.median_limit is not None and self.ours:
            median = statistics.median(self.ours)
            return "met" if median <= self.median_limit else f"**missed: {median:.3g}**"
        if self.limit is not None:
            worst = max(self.ours, default=0.0)
            return "met" if worst <= self.limit else f"**missed: {worst:g} in the worst run**"
        if self.goal is None or not self.ratios():
            return ""
        ratio = statistics.median(self.ratios())
        met = ratio <= self.goal if self.better == "lower" else ratio >= self.goal
        if met:
            return "met"
        miss = ratio / self.goal - 1 if self.better == "lower" else 1 - ratio / self.goal
        return f"**missed by {miss:.0%}**" + (f": {self.why}" if self.why else "")


def spread(values: Sequence[float], digits: int = 3) -> str:
    """``median (min–max)``, with a few significant digits."""
    if not values:
        return "–"
    med = statistics.median(values)
    if len(values) == 1:
        return _num(med, digits)
    return f"{_num(med, digits)} ({_num(min(values), digits)}–{_num(max(values), digits)})"


def _num(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def goal_text(figure: Figure) -> str:
    if figure.margin is not None:
        return f"ours − theirs ≤ {figure.margin:g}"
    if figure.median_limit is not None:
        return f"ours ≤ {figure.median_limit:g} (median)"
    if figure.limit is not None:
        return f"ours ≤ {figure.limit:g}"
    if figure.goal is None:
        return ""
    return f"{'≤' if figure.better == 'lower' else '≥'} {figure.goal:.3g}"


def benchmark_number(benchmark: str) -> int:
    """The benchmark's number ("10 soak" -> 10), which orders the table."""
    head = benchmark.split(" ", 1)[0]
    return int(head) if head.isdigit() else 0


def figure_to_json(figure: Figure) -> dict[str, object]:
    return dataclasses.asdict(figure)


def figure_from_json(data: dict[str, Any]) -> Figure:
    names = {f.name for f in dataclasses.fields(Figure)}
    return Figure(**{k: v for k, v in data.items() if k in names})


def table(figures: Sequence[Figure]) -> str:
    lines = [
        "| benchmark | metric | ours | comparison | theirs | ratio ours/theirs | goal | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in sorted(
        figures, key=lambda f: benchmark_number(f.benchmark)
    ):  # stable: keeps each one's order
        metric = f"{f.metric} ({f.unit})" if f.unit else f.metric
        if f.note:
            metric += f" <br>*{f.note}*"
        lines.append(
            f"| {f.benchmark} | {metric} | {spread(f.ours)} | {f.comparison} | "
            f"{spread(f.theirs)} | {spread(f.ratios())} | {goal_text(f)} | {f.verdict()} |"
        )
    return "\n".join(lines)


# -- the machine --------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = "unknown"
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kib = int(meminfo.read_text().split()[1])
        memory = f"{kib / 2**20:.1f} GiB"
    packages = [
        "google-adk",
        "fastapi",
        "starlette",
        "uvicorn",
        "pydantic",
        "pydantic-core",
        "httpx",
        "websockets",
        "orjson",
        "pydantic-ai-slim",
    ]
    return {
        "cores": str(os.cpu_count()),
        "CPU": cpu,
        "memory": memory,
        "OS": f"{platform.system()} {platform.release()}",
        "Python": sys.version.split()[0],
        "commit": _git("rev-parse", "--short", "HEAD") + (" (+ local changes)" if _dirty() else ""),
        "packages": ", ".join(f"{p} {_version(p)}" for p in packages),
    }


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _dirty() -> bool:
    return bool(_git("status", "--porcelain", "--", "adk_stream_protocol", "server.py"))


def raise_open_file_limit(wanted: int = 8192) -> None:
    """Thousands of sockets on both ends of loopback need more than the usual 1024 files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
