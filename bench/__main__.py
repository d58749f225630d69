"""``python -m bench``: run every benchmark; write the results table, results.json and the site's
performance page with its charts (bench/publish.py; see bench/README.md)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

from bench import (
    ai7socket,
    approvals,
    browser,
    chats,
    concurrency,
    converter,
    endtoend,
    hardening,
    longchats,
    observed,
    scaleout,
    soak,
    startup,
)
from bench.core import SIZES, Figure, Size, machine, raise_open_file_limit, table
from bench.publish import Run, add_path_arguments, paths_from, publish
from bench.servers import serve

BENCHMARKS = (
    "converter",
    "endtoend",
    "concurrency",
    "approvals",
    "startup",
    "hardening",
    "scaleout",
    "ai7socket",
    "observed",
    "soak",
    "chats",
    "browser",
    "longchats",
)
# The load benchmarks (size.load_runs runs, each on fresh servers), as RESULTS.md names them.
LOAD = {"concurrency": "3", "hardening": "6a", "scaleout": "7a"}


def run(
    size: Size, only: tuple[str, ...] = BENCHMARKS, longchat_rounds: int | None = None
) -> list[Figure]:
    raise_open_file_limit()
    figures: list[Figure] = []

    def step(name: str, work: Callable[[], list[Figure]]) -> None:
        if name not in only:
            return
        print(f"{name} ...", flush=True)
        start = time.perf_counter()
        figures.extend(work())
        print(f"{name} done in {time.perf_counter() - start:.0f} s", flush=True)

    step("converter", lambda: converter.run(size))
    if "endtoend" in only or "approvals" in only:
        # Benchmark 4 compares with /run_sse, whose (non-live) model streams with no pause: the
        # live model streams with none either (bench/agent.py), or /live would carry its pace.
        with serve("ours", approvals.UNPACED) as ours, serve("adk") as adk:
            step("endtoend", lambda: endtoend.run(size, ours, adk))
            step("approvals", lambda: approvals.run(size, ours, adk))
    step("concurrency", lambda: concurrency.run(size))
    step("startup", lambda: startup.run(size))
    step("hardening", lambda: hardening.run(size))
    step("scaleout", lambda: scaleout.run(size))
    if "ai7socket" in only:
        with serve("ours", approvals.UNPACED) as ours:
            step("ai7socket", lambda: ai7socket.run(size, ours))
    step("observed", lambda: observed.run(size))
    step("soak", lambda: soak.run(size))
    step("chats", lambda: chats.run(size))
    step("browser", lambda: browser.run(size))
    step("longchats", lambda: longchats.run(size, longchat_rounds))
    return figures


def repeats(size: Size, only: tuple[str, ...], longchat_rounds: int | None) -> str:
    """Over what the run's medians are taken, in words."""
    said = []
    if set(only) - {*LOAD, "soak", "longchats"}:
        said.append(f"{size.runs} run(s)")
    load = [number for name, number in LOAD.items() if name in only]
    if load:
        said.append(f"{size.load_runs} run(s) of benchmark {', '.join(load)} (fresh servers each)")
    if "soak" in only:
        said.append("one run of the soak")
    if "longchats" in only:
        rounds = longchats.rounds_of(size, longchat_rounds)
        said.append(f"{rounds} round(s) of benchmark 13 per store and length")
    return "; ".join(said)


def command(args: argparse.Namespace) -> str:
    """The command line that made the run, as RESULTS.md shows it."""
    words = ["python -m bench", f"--size {args.size}"]
    if tuple(args.only) != BENCHMARKS:
        words.append("--only " + " ".join(args.only))
    if args.load_runs:
        words.append(f"--load-runs {args.load_runs}")
    if args.longchat_rounds:
        words.append(f"--longchat-rounds {args.longchat_rounds}")
    if os.environ.get("BENCH_COMPACTION") == "1" and "longchats" in args.only:
        words.insert(0, "BENCH_COMPACTION=1")
    return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Run the benchmarks; write RESULTS.md, results.json and the site's "
        "performance page with its charts."
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="moderate")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS))
    add_path_arguments(parser)
    parser.add_argument(
        "--load-runs",
        type=int,
        help="runs of the load benchmarks (concurrency, hardening, scale-out) instead of the "
        "size's own: more runs, a steadier median on a noisy machine",
    )
    parser.add_argument(
        "--longchat-rounds",
        type=int,
        help="rounds of benchmark 13 (long chats) per store and length; 9 at `moderate`",
    )
    args = parser.parse_args()
    size = SIZES[args.size]
    if args.load_runs:
        size = dataclasses.replace(size, load_runs=args.load_runs)
    start = time.perf_counter()
    figures = run(size, tuple(args.only), args.longchat_rounds)
    minutes = (time.perf_counter() - start) / 60
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rounds = repeats(size, tuple(args.only), args.longchat_rounds)
    paths = paths_from(args)
    publish(Run(command(args), when, minutes, rounds, machine(), figures), paths)
    print(table(figures))
    print(f"\nwritten to {paths.results}, {paths.json}, {paths.page} and {paths.charts}/")


if __name__ == "__main__":
    main()
