"""What the sign-in tests share (issue 37, docs/adr/0065): where the provider may send the
user back, the page's side of a sign-in, and the server's log as the tests read it."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from adk_stream_protocol.testing import ChatResponse

# Where the page itself takes the provider's redirect (the page's flow, as ADK expects).
PAGE_REDIRECT = "http://localhost:3000/signed-in"
# The server's own callback route, as the provider reaches it (the app's test host).
CALLBACK_URL = "http://localhost/auth/callback"


def sign_in_request(response: ChatResponse) -> dict[str, Any]:
    """The response's one ``tool-adk_request_credential`` part, waiting for the page."""
    assert response.message is not None
    (part,) = [p for p in response.message["parts"] if p["type"] == "tool-adk_request_credential"]
    assert part["state"] == "input-available", part
    assert response.of_type("finish")[-1]["finishReason"] == "tool-calls"
    return dict(part)


def auth_uri(part: dict[str, Any]) -> str:
    """The URL a sign-in request asks the page to open."""
    return str(part["input"]["authConfig"]["exchangedAuthCredential"]["oauth2"]["authUri"])


def page_answer(config: dict[str, Any], back: str) -> dict[str, Any]:
    """What the page answers once the provider sent the tab back to ``back``: the request's
    ``authConfig`` with the URL it came back to and where it was sent (ADK's answer)."""
    credential = config["exchangedAuthCredential"]
    oauth2 = {**credential["oauth2"], "authResponseUri": back, "redirectUri": PAGE_REDIRECT}
    return {**config, "exchangedAuthCredential": {**credential, "oauth2": oauth2}}


def server_log(caplog: pytest.LogCaptureFixture) -> str:
    """Everything the server logged, at every level, tracebacks included: the records of
    every thread but the test's own (the browser, the page) and the provider's."""
    here = threading.get_ident()
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(
        formatter.format(record)
        for record in caplog.records
        if record.thread != here and not (record.threadName or "").startswith("uvicorn-")
    )
