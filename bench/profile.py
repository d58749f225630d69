"""Where the time goes: profiles of the hot paths.

``python -m bench.profile converter`` profiles benchmark 1's path in process (pyinstrument).
``python -m bench.profile stream|live`` puts our server under benchmark 3's kind of load and
samples it from outside with py-spy (no change to the server), then prints the functions
with the most samples, inclusive and self.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import concurrency, converter
from bench.core import SIZES, raise_open_file_limit
from bench.servers import serve


def profile_converter() -> None:
    from pyinstrument import Profiler

    events = converter.adk_events(200)
    profiler = Profiler(interval=0.0002)
    with profiler:
        for _ in range(20):
            converter.ours(events)
    print(profiler.output_text(unicode=True, color=False))


def profile_server(transport: str, seconds: int) -> None:
    raise_open_file_limit()
    size = SIZES["moderate"]
    with serve("ours") as server, tempfile.TemporaryDirectory() as tmp:
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
        summarise(raw)


def summarise(raw: Path, top: int = 30) -> None:
    """Collapsed stacks (``frame;frame;... count``, a frame is ``function (path:line)``) to
    the busiest packages and functions, inclusive and self."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    own_packages: collections.Counter[str] = collections.Counter()
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
    print(f"{total} samples (the server was busy for these)")
    for title, counter in (
        ("packages, inclusive", packages),
        ("packages, self", own_packages),
        ("functions, inclusive", inclusive),
        ("functions, self", own),
    ):
        print(f"\n{title}:")
        for name, n in counter.most_common(top):
            print(f"{n / total:6.1%}  {name}")


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
    parser.add_argument("what", choices=["converter", "stream", "live"])
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    if args.what == "converter":
        profile_converter()
    else:
        profile_server(args.what, args.seconds)


if __name__ == "__main__":
    main()
