"""``python -m bench``: run every benchmark and write the results table (see bench/README.md)."""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

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
from bench.core import ROOT, SIZES, Figure, Size, machine, raise_open_file_limit, table
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


def report(size: Size, figures: list[Figure], seconds: float) -> str:
    facts = "\n".join(f"| {k} | {v} |" for k, v in machine().items())
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""# Benchmark results

Written by `python -m bench --size {size.name}` on {when} in {seconds / 60:.1f} minutes.
How the figures are made, and what each comparison is: [README.md](README.md).

Every figure is the **median (min–max) over {size.runs} run(s)** ({size.load_runs} for the
concurrency and load-shedding benchmarks, which start fresh servers every run). In each run
ours and its comparison are measured back to back on the same machine, and **ratio** is ours /
theirs for that run (median and range of the per-run ratios): below 1 means ours takes less
time or memory; for per-second figures above 1 means ours does more. A goal bounds the median
ratio.

## Machine

| | |
| --- | --- |
{facts}

## Results

{table(figures)}

{NOTES}"""


NOTES = """## Reading the numbers

- **Converter vs the orjson floor** (goal ≤ 3x, missed): the floor only serialises ready-made
  dicts in Rust (about 0.15 µs a chunk) and never looks at an ADK event. Only reading of the
  events what the converter reads (the "only reading the ADK events" row, our own floor) already
  costs about 2.4x the orjson floor, and that reading followed by the orjson floor's writing, with
  nothing between (the "bare floor" row), 3.4–3.9x: no converter that reads the events ours reads
  and writes with orjson can come within 3x. On top of that ours decides steps and blocks and
  makes each chunk a pydantic object: the chunks of every streamed word (steps, text and reasoning
  blocks and deltas) are built without validation (0.45 µs) and written with orjson, the rest
  validated and written by pydantic-core (docs/adr/0050; earlier rounds in docs/adr/0018). Tests
  hold every chunk the converter emits to the catalogue and to pydantic's bytes. Closer would need
  chunks that are not pydantic objects, which the turns, recording and coalescing code consume.
- **End-to-end**: the benchmark model streams with no pause, so the figures are the servers' own
  cost, and most of it is ADK's: `Runner.run_async` with its per-event telemetry costs about
  0.3–0.5 ms per partial in either server. In a py-spy profile of our server under the `/stream`
  load, under 4% of the samples are self time in the bridge's own code (`adk_stream_protocol`
  2.2%, `sse_starlette` 1.3%, which ADR 0052 replaced); ADK and the pydantic models it builds take
  most of the rest.
- **500 concurrent `/stream`**: one server process on one core; every answer costs about 25 ms
  of CPU, nearly all of it ADK's, so 500 arrivals at once queue for seconds in both servers,
  and p50/p99 measure that queue (which server is ahead changes from run to run). The
  CPU-per-answer rows, ours against ADK's, show the bridge's own cost.
- **500 `/live` sockets**: ours starts each socket's ADK live run at its first message (the
  session must hold what the client sent first); ADK's `/run_live` starts it when the socket
  opens, which no figure here times. So the first turn of every socket carries the run's start
  on ours only (the "first turns" row), and later turns that land while other sockets start
  their runs queue behind that work. The start is ADK's own work (about 3.5 ms of CPU
  unloaded: first turn 11.5 ms, later turns 8 ms); our transport opens the socket when the
  first message is sent, so starting at connect would move that cost, not remove it
  (docs/adr/0018). CPU per turn and memory per socket are close to ADK's.
- **Approvals**: by default (docs/adr/0010) a continuation is held until its run ends, so the
  tool's result arrives together with the whole answer after it (on `/live` the offline live
  model paces its answer, about 35 ms); with `ADK_STREAM_STREAM_INTERMEDIATE_RESULTS=true` it
  streams as it comes. ADK's figure includes a new `run_async` (the approval is a new request).
  The hold-back is the price of the seed's client rule, which also forbids an earlier call's
  result in a response that stops at another approval; whether it stops is known only when
  the run ends, so the result cannot go early (docs/adr/0018).
- **Memory per open stream** is (peak RSS − RSS after warm-up) / streams, on a fresh server per
  run; it includes the ADK session, the run and the server's side of the connection.
- **Start-up**: ours imports less than ADK's `get_fast_api_app` (its CLI, web server and
  services), so both first `/health` and the first answer come sooner.
- **Load shedding** (benchmark 6): with the cap, the first 100 requests are served while the
  other 400 are refused at once, so the served ones no longer queue behind all 500 and a
  refused client hears back long before a queued one would see text. "At once" is not
  milliseconds at 500 simultaneous arrivals: asyncio runs the 500 handlers in step, so each
  503 leaves only after HTTP parsing, the middlewares and routing have run for nearly all of
  them (about 1.6 ms of CPU per refused request). Served answers per second stay about the
  same: the answers cost the same CPU either way.
- **Event-loop lag** (benchmark 6): the slowest `/health` while a message at the text limit
  is answered. The request body is read off the event loop (docs/adr/0019), and so is the
  demo model's reading of a message over 16,000 characters: its rules are linear in the
  length, but not free at 200,000 characters (60–170 ms).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the benchmarks and write the results table.")
    parser.add_argument("--size", choices=sorted(SIZES), default="moderate")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS))
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "RESULTS.md")
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
    text = report(size, figures, time.perf_counter() - start)
    args.output.write_text(text, encoding="utf-8")
    print(table(figures))
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
