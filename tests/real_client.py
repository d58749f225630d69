"""Run the real AI SDK chat client (scenarios/chat-client.mjs) from Python tests.

The Node script drives `AbstractChat` + `DefaultChatTransport` from the real `ai`
package against a running server and reports the wire traffic and the final
chat state. The packages are installed by the test command (`npm ci` in
scenarios/); a missing install is an error, not a skip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

from tests.support import LiveServer

SCENARIOS_DIR = Path(__file__).resolve().parent.parent / "scenarios"
CHAT_CLIENT = SCENARIOS_DIR / "chat-client.mjs"
REQUIRED_PACKAGES = ("ai", "ai-6.0.25")
# The two clients every flow is checked with: the newest 6.x and the strict 6.0.25.
CLIENTS = ["latest", "6.0.25"]


def _check_installed() -> str:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on PATH; the real-client checks need Node 20+")
    missing = [
        name
        for name in REQUIRED_PACKAGES
        if not (SCENARIOS_DIR / "node_modules" / name / "package.json").is_file()
    ]
    if missing:
        raise RuntimeError(
            f"scenarios/node_modules is missing {', '.join(missing)}; "
            f"run `npm ci` in {SCENARIOS_DIR}"
        )
    return node


def run_real_client(job: dict[str, Any], *, timeout: float = 90.0) -> dict[str, Any]:
    """Run scenarios/chat-client.mjs with `job` on stdin and return its report."""
    node = _check_installed()
    try:
        completed = subprocess.run(
            [node, str(CHAT_CLIENT)],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            cwd=SCENARIOS_DIR,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        # The partial output of a timed-out run may be bytes even with text=True.
        stderr = (
            exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        )
        raise RuntimeError(
            f"chat-client.mjs did not finish within {timeout} s\nstderr:\n{stderr or ''}"
        ) from exc
    if completed.returncode != 0:
        raise RuntimeError(
            f"chat-client.mjs exited with {completed.returncode}\nstderr:\n{completed.stderr}"
        )
    try:
        report: dict[str, Any] = json.loads(completed.stdout)
    except json.JSONDecodeError as exc:
        raise RuntimeError(
            f"chat-client.mjs printed no JSON report: {exc}\n"
            f"stdout:\n{completed.stdout}\nstderr:\n{completed.stderr}"
        ) from exc
    return report


def chunk_types(request_report: dict[str, Any]) -> list[str]:
    """Return the `type` of every chunk of one request report, in order."""
    return [
        str(chunk.get("type")) if isinstance(chunk, dict) else repr(chunk)
        for chunk in request_report["chunks"]
    ]


# -- what tests assert on a report ------------------------------------------------------------


def drive(
    server: LiveServer,
    client: str,
    steps: list[dict[str, Any]],
    *,
    live: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """Run one job through the real client: over POST /stream, or with ``live`` over WS /live
    through the shipped WebSocket transport. Every response must be well formed."""
    api = (
        server.base_url.replace("http://", "ws://") + "/live"
        if live
        else f"{server.base_url}/stream"
    )
    job = {
        "api": api,
        "transport": "ws" if live else "http",
        "client": client,
        "chatId": f"rc-{uuid.uuid4().hex[:12]}",
        "steps": steps,
        **options,
    }
    report = run_real_client(job)
    assert not report["timeout"], report
    assert not report["loop"], "the client kept resubmitting"
    for request in report["requests"]:
        if live:
            assert not request["refused"], request
            assert request["frameProblems"] == [], request["frameProblems"]
            assert request["endsWithDone"] or request["stopped"], request
        else:
            assert request["status"] == 200, request
            assert request["endsWithDone"] and request["endsWithBlankLine"]
        assert request["strictViolations"] == [], request["strictViolations"]
        assert request["latestViolations"] == [], request["latestViolations"]
    return report


def assistant_messages(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in report["messages"] if m["role"] == "assistant"]


def text_of(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


def tool_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"].startswith("tool-")]


def ready(report: dict[str, Any]) -> dict[str, Any]:
    """The chat ended without error, with exactly one assistant message: return it."""
    assert report["status"] == "ready", report["error"]
    (assistant,) = assistant_messages(report)
    for part in assistant["parts"]:
        if part["type"] in ("text", "reasoning"):
            assert part["state"] == "done", part
    return assistant
