"""Where the time goes: profiles of the hot paths.

``python -m bench.profile converter`` profiles benchmark 1's path in process (pyinstrument).
``python -m bench.profile stream|live`` puts our server under benchmark 3's kind of load and
samples it from outside with py-spy (no change to the server), then prints the functions
with the most samples, inclusive and self; ``--server adk`` samples ADK's own server under
the same load instead. ``python -m bench.profile layer`` measures, in one process, what our
layer costs on top of ADK's run loop (bench/layer.py); ``python -m bench.profile instructions``
counts the same under callgrind (bench/instructions.py). Frames are grouped as issue 27 asks:
ours, ADK (and google-genai), Starlette/uvicorn (the ASGI stack), asyncio, pydantic, and the
rest.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import concurrency, converter, instructions, layer
from bench.core import SIZES, raise_open_file_limit
from bench.servers import Kind, serve

# Top-level packages (as py-spy names a frame's file) -> the group issue 27 reports.
GROUPS = {
    "adk_stream_protocol": "ours",
    "adk": "ADK",  # py-spy names google/adk's files adk/...
    "genai": "ADK",
    "click": "Starlette/uvicorn",
    "anyio": "Starlette/uvicorn",
    "google/adk": "ADK",
    "google/genai": "ADK",
    "starlette": "Starlette/uvicorn",
    "uvicorn": "Starlette/uvicorn",
    "fastapi": "Starlette/uvicorn",
    "sse_starlette": "Starlette/uvicorn",
    "h11": "Starlette/uvicorn",
    "httptools": "Starlette/uvicorn",
    "websockets": "Starlette/uvicorn",
    "asyncio": "asyncio",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic",
    "opentelemetry": "OpenTelemetry",
}


def profile_converter() -> None:
    from pyinstrument import Profiler

    events = converter.adk_events(200)
    profiler = Profiler(interval=0.0002)
    with profiler:
        for _ in range(20):
            converter.ours(events)
    print(profiler.output_text(unicode=True, color=False))


def profile_server(
    transport: str, seconds: int, kind: Kind = "ours", keep: Path | None = None
) -> None:
    raise_open_file_limit()
    size = SIZES["moderate"]
    # Benchmark 3's servers: ours without the cap on concurrent responses (all 500 served).
    with serve(kind, concurrency.NO_CAP) as server, tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "stacks.txt"
        spy = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("py-spy")),
                "record",
                "--pid",
                str(server.pid),
                "--format",
                "raw",
                "--output",
                str(raw),
                "--duration",
                str(seconds),
                "--rate",
                "200",
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
        )
        if transport == "stream":
            asyncio.run(concurrency.streams(size, server))
        else:
            asyncio.run(concurrency.sockets(size, server, seed=0))
        spy.wait()
        if keep is not None:  # the stacks themselves, to look into a frame's callers
            keep.write_text(raw.read_text())
        summarise(raw)


def summarise(raw: Path, top: int = 30) -> None:
    """Collapsed stacks (``frame;frame;... count``, a frame is ``function (path:line)``) to
    the busiest packages and functions, inclusive and self."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    own_packages: collections.Counter[str] = collections.Counter()
    own_groups: collections.Counter[str] = collections.Counter()
    own_frames: collections.Counter[tuple[str, str]] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [_frame(f) for f in stack.split(";") if f]
        if not frames:
            continue
        n = int(count)
        total += n
        for name in {name for name, _ in frames}:
            inclusive[name] += n
        for package in {package for _, package in frames}:
            packages[package] += n
        own[frames[-1][0]] += n
        own_packages[frames[-1][1]] += n
        own_groups[group(frames[-1][1])] += n
        own_frames[frames[-1][0], group(frames[-1][1])] += n
    print(f"{total} samples (the server was busy for these)")
    print("\nself time by group:")
    for name, n in own_groups.most_common():
        print(f"{n / total:6.1%}  {name}")
    print("\ntop 20 frames by self time:")
    for (name, where), n in own_frames.most_common(20):
        print(f"{n / total:6.1%}  {where:18}  {name}")
    for title, counter in (
        ("packages, inclusive", packages),
        ("packages, self", own_packages),
        ("functions, inclusive", inclusive),
        ("functions, self", own),
    ):
        print(f"\n{title}:")
        for name, n in counter.most_common(top):
            print(f"{n / total:6.1%}  {name}")


def group(package: str) -> str:
    """The issue's group of a frame's package: a stdlib module's frames are asyncio's when
    they are in asyncio, else "other"."""
    if package in GROUPS:
        return GROUPS[package]
    return "other" if package != "(stdlib or main)" else "stdlib"


def _frame(frame: str) -> tuple[str, str]:
    """``function (pkg/module.py:12)`` (py-spy shortens paths to their import path) to
    (``function module.py``, package); ``google/adk`` and ``google/genai`` are told apart."""
    function, _, where = frame.partition(" (")
    parts = Path(where.rsplit(":", 1)[0]).parts
    depth = 2 if parts[:1] == ("google",) else 1
    package = "/".join(parts[:depth]) if len(parts) > depth else "(stdlib or main)"
    return f"{function} {parts[-1] if parts else '?'}", package


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["converter", "stream", "live", "layer", "instructions"])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--server", choices=["ours", "adk"], default="ours")
    parser.add_argument("--keep", type=Path, help="write the collapsed stacks here too")
    parser.add_argument("--rounds", type=int, default=12, help="layer: alternating rounds")
    args = parser.parse_args()
    if args.what == "converter":
        profile_converter()
    elif args.what == "layer":
        print(layer.measure(rounds=args.rounds).summary())
    elif args.what == "instructions":
        print(instructions.summary())
    else:
        profile_server(args.what, args.seconds, args.server, args.keep)


if __name__ == "__main__":
    main()
