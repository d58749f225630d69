"""What every fault test checks: statuses, ends of bodies, and the server's log."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.support.rig import LiveServer, sse_payloads
from tests.support.waiting import wait_until

# The statuses a client may see during an outage: an answer, nothing to resume, a busy chat,
# or "try again" (with Retry-After). Never a 500.
ANSWERS = (200, 204, 409)
BACK_WITHIN_SECONDS = 1.0
# The fixed words of the one WARNING an outage logs (foundation/outages.py).
OUTAGE_WARNING = re.compile(r" WARNING .*unavailable")


def assert_unavailable(response: httpx.Response) -> None:
    """503 with Retry-After and a JSON reason."""
    assert response.status_code == 503, (response.status_code, response.text[:300])
    assert int(response.headers["retry-after"]) >= 1
    assert "try again" in response.json()["detail"]


def assert_answered_or_unavailable(response: httpx.Response) -> None:
    if response.status_code == 503:
        assert_unavailable(response)
    else:
        assert response.status_code in ANSWERS, (response.status_code, response.text[:300])
        if response.status_code == 200:
            assert_ends(sse_payloads(response.text))


def assert_ends(payloads: list[str]) -> None:
    """A body ends with ``[DONE]``, after ``finish``, ``abort`` or an ``error``."""
    assert payloads and payloads[-1] == "[DONE]", payloads[-3:]
    chunks = [json.loads(p) for p in payloads[:-1]]
    kinds = {c["type"] for c in chunks}
    assert kinds & {"finish", "error", "abort"}, [c["type"] for c in chunks]


def errors_of(payloads: list[str]) -> list[dict[str, Any]]:
    return [c for p in payloads if p != "[DONE]" and (c := json.loads(p))["type"] == "error"]


def back_within(call: Callable[[], httpx.Response], seconds: float = BACK_WITHIN_SECONDS) -> float:
    """How long until ``call`` is answered 200 again (called at once, then every 50 ms);
    fails after ``seconds``."""
    started = time.monotonic()
    last: list[httpx.Response] = []

    def answered() -> bool:
        last[:] = [call()]
        return last[0].status_code == 200

    wait_until(
        answered,
        lambda: f"still {last[0].status_code} after the store came back: {last[0].text[:200]}",
        within=seconds,
        every=0.05,
    )
    return time.monotonic() - started


class LogWindow:
    """The server's log from now on: what a test's outage wrote."""

    def __init__(self, server: LiveServer) -> None:
        self._server = server
        self._start = len(server.log())

    def text(self) -> str:
        return self._server.log()[self._start :]

    def assert_handled(self, outages: int = 1) -> None:
        """No ERROR and no traceback; one WARNING per outage, and an INFO when it ended."""
        text = self.text()
        assert "Traceback" not in text, text[-3000:]
        assert not re.search(r"\bERROR\b", text), text[-3000:]
        warnings = [line for line in text.splitlines() if OUTAGE_WARNING.search(line)]
        assert len(warnings) == outages, "\n".join(warnings) or text[-3000:]
        assert re.search(r" INFO .* back after ", text), text[-3000:]


def wait_log(window: LogWindow, pattern: str, timeout: float = 5.0) -> None:
    # Another process's log: read again until the line is there.
    wait_until(
        lambda: re.search(pattern, window.text()),
        lambda: f"{pattern!r} in the log:\n{window.text()[-2000:]}",
        within=timeout,
        every=0.05,
    )
