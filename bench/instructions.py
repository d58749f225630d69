"""Instructions per answer, counted by callgrind: a measure that a busy machine does not move.

On a shared 2-core machine one run's CPU time can differ from the next by a third, so a change
of a few percent in our layer cannot be seen in benchmark 3's CPU figures without many runs.
Valgrind's callgrind counts the instructions executed instead, which repeat within 0.3 %.
It cannot see the kernel's work (socket writes) nor the cost of cache misses, so it measures
the Python work only, and the timings of a run under it are about fifty times slower.

Each way runs in a child process under ``valgrind --tool=callgrind --instr-atstart=no``. The
child warms up (two rounds), turns counting on (``callgrind_control -i on``), answers
``answers`` of benchmark 3's questions at once, and turns counting off before it shuts down.
The ways:

- **runner**: the app's own ADK runner, driven directly (as in bench/layer.py);
- **app**: the whole app, ``POST /stream`` handed to it as a bare ASGI call (no HTTP client,
  no socket), read to its ``[DONE]``;
- **adk**: ADK's own server (``get_fast_api_app``, as benchmark 3 runs it), ``POST /run_sse``
  handed to it the same way: the ratio app / adk is benchmark 3's CPU ratio without the
  kernel's share and the machine's noise.

``python -m bench.profile instructions`` (Debian's ``valgrind`` package).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from bench.core import ROOT

WAYS = ("runner", "app", "adk")


def count(way: str, answers: int = 100) -> int:
    """Instructions executed while ``answers`` answers are made at once, one way."""
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as tmp:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={Path(tmp) / 'callgrind.out'}",
            sys.executable,
            "-m",
            "bench.instructions",
            way,
            str(answers),
        ]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run of {way} failed:\n{done.stdout}\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def summary(answers: int = 100) -> str:
    per = {way: count(way, answers) / answers for way in WAYS}
    layer = per["app"] - per["runner"]
    return (
        f"instructions per answer ({answers} at once): runner {per['runner'] / 1e6:.2f} M, "
        f"app {per['app'] / 1e6:.2f} M; our layer {layer / 1e6:.2f} M, "
        f"{layer / per['runner']:.1%} of the runner's; ADK's server {per['adk'] / 1e6:.2f} M, "
        f"ours / ADK's {per['app'] / per['adk']:.3f}"
    )


async def answer_at_once(way: str, answers: int, counting: Callable[[str], None]) -> None:
    """Two warm-up rounds, then ``answers`` answers at once one ``way``, with
    ``counting("on")`` before them and ``counting("off")`` after."""
    from google.genai import types

    from adk_stream_protocol import Settings, create_app
    from bench.agent import long_prompt, root_agent
    from bench.clients import _END, chat_body, new_chat, run_sse_body, user_message
    from bench.layer import answer_through_runner

    logging.disable(logging.INFO)
    # Benchmark 3's servers and answer: sessions in memory, no cap, 200 words 50 ms apart.
    prompt = long_prompt(200, 10, 0.05)
    if way == "adk":
        app = _adk_app()
    else:
        settings = Settings(session_store="memory://", max_concurrent_responses=0)
        app = create_app(root_agent, settings=settings)
    async with app.router.lifespan_context(app):
        message = types.Content(role="user", parts=[types.Part(text=prompt)])

        async def through_runner() -> None:
            await answer_through_runner(app.state.bridge, message)

        async def through_app() -> None:
            await _post(app, "/stream", chat_body(new_chat(), user_message(prompt)), _END["ours"])

        async def through_adk() -> None:
            body = run_sse_body(new_chat(), [{"text": prompt}])
            await _post(app, "/run_sse", body, _END["adk"])

        one = {"runner": through_runner, "app": through_app, "adk": through_adk}[way]
        for _ in range(2):
            await asyncio.gather(*(one() for _ in range(answers)))
        counting("on")
        await asyncio.gather(*(one() for _ in range(answers)))
        counting("off")


def _adk_app() -> Any:
    """ADK's own server as benchmark 3 runs it (bench/servers.py's ``adk_app``)."""
    import importlib

    from bench.servers import write_adk_app

    folder = write_adk_app(Path(tempfile.mkdtemp(prefix="bench-adk-app-")))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    sys.path.insert(0, str(folder))
    return importlib.import_module("adk_app").app


async def _post(app: Any, path: str, payload: dict[str, Any], end: bytes) -> None:
    """``POST path`` handed to ``app`` as a bare ASGI call, its body read to the end."""
    body = json.dumps(payload).encode()
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    ended = asyncio.Event()
    asked = False
    tail = b""  # what was written last, enough to hold a marker split over two writes
    found = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": body, "more_body": False}
        await ended.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal tail, found
        if message["type"] == "http.response.body":
            window = tail + (message.get("body") or b"")
            found = found or end in window
            tail = window[-len(end) :]
            if not message.get("more_body", False):
                ended.set()

    await app(scope, receive, send)
    if not found:
        raise RuntimeError(f"the answer to {path} did not end: {tail!r}")


def _counting(state: str) -> None:
    subprocess.run(
        ["callgrind_control", "-i", state, str(os.getpid())], capture_output=True, check=True
    )


if __name__ == "__main__":
    asyncio.run(answer_at_once(sys.argv[1], int(sys.argv[2]), _counting))
