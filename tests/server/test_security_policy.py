"""Host check, API docs, response headers (docs/adr/0019): on the real server where the default
settings matter, in-process where a test needs other settings."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from adk_stream_protocol import create_app
from adk_stream_protocol.foundation.security import PLAYGROUND_CSP
from adk_stream_protocol.foundation.settings import Settings
from tests.support.rig import LiveServer, chat_body, user_message

# -- 6. DNS rebinding -----------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.nip.io"])
def test_a_foreign_host_header_is_refused(server: LiveServer, host: str) -> None:
    response = httpx.get(f"{server.base_url}/health", headers={"host": host}, timeout=10)
    assert response.status_code == 400
    assert response.text == "Invalid host header"
    body = chat_body("rebind-1", user_message("hi", "u-1"))
    stream = httpx.post(f"{server.base_url}/stream", json=body, headers={"host": host}, timeout=10)
    assert stream.status_code == 400


def test_a_foreign_host_header_is_refused_on_the_socket(server: LiveServer) -> None:
    url = server.base_url.replace("http://", "ws://") + "/live?chatId=rebind-2"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, additional_headers={"Host": "evil.example"}, open_timeout=10)
    assert refused.value.response.status_code == 400


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "app.localhost"])
def test_local_names_are_trusted_by_default(server: LiveServer, host: str) -> None:
    port = server.base_url.rsplit(":", 1)[1]
    response = httpx.get(f"{server.base_url}/health", headers={"host": f"{host}:{port}"})
    assert response.status_code == 200


def test_trusted_hosts_is_a_setting() -> None:
    app = create_app(settings=Settings(trusted_hosts=["chat.example.com"], playground_dir=None))
    client = TestClient(app, base_url="http://chat.example.com")
    assert client.get("/health").status_code == 200
    assert client.get("/health", headers={"host": "localhost"}).status_code == 400
    assert Settings(trusted_hosts="a.test, *.b.test").trusted_hosts == ["a.test", "*.b.test"]


# -- 7. API docs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/openapi.json"])
def test_api_docs_are_off_by_default(server: LiveServer, path: str) -> None:
    assert httpx.get(f"{server.base_url}{path}", timeout=10).status_code == 404


def test_api_docs_are_served_when_turned_on() -> None:
    client = TestClient(
        create_app(settings=Settings(api_docs=True, playground_dir=None)),
        base_url="http://localhost",
    )
    schema = client.get("/openapi.json").json()
    body = schema["paths"]["/stream"]["post"]["requestBody"]["content"]["application/json"]
    # The whole chat in `messages`, or the recipe's last `message` (docs/adr/0069).
    assert body["schema"]["required"] == ["id"]
    assert {"messages", "message"} <= set(body["schema"]["properties"])
    docs = client.get("/docs")
    assert docs.status_code == 200
    # The docs page loads Swagger UI from a CDN: the page policy would break it.
    assert "content-security-policy" not in docs.headers
    assert docs.headers["x-content-type-options"] == "nosniff"


# -- 9. headers -----------------------------------------------------------------------------------


def test_every_response_says_nosniff(server: LiveServer) -> None:
    assert httpx.get(f"{server.base_url}/health").headers["x-content-type-options"] == "nosniff"
    stream = httpx.post(
        f"{server.base_url}/stream", json=chat_body("hdr-1", user_message("hi", "u-1"))
    )
    assert stream.status_code == 200
    assert stream.headers["x-content-type-options"] == "nosniff"
    refused = httpx.post(f"{server.base_url}/stream", content=b"x")
    assert refused.status_code == 415
    assert refused.headers["x-content-type-options"] == "nosniff"


def test_the_playground_page_may_load_and_be_framed_only_by_its_own_origin(
    tmp_path: Path,
) -> None:
    (tmp_path / "index.html").write_text("<!doctype html><title>page</title>")
    (tmp_path / "app.js").write_text("console.log(1)")
    client = TestClient(
        create_app(settings=Settings(playground_dir=tmp_path)), base_url="http://localhost"
    )
    for path in ("/", "/app.js"):
        response = client.get(path)
        assert response.status_code == 200
        assert response.headers["content-security-policy"] == PLAYGROUND_CSP
        assert response.headers["referrer-policy"] == "same-origin"
        assert response.headers["x-content-type-options"] == "nosniff"
    policy = dict(d.strip().split(" ", 1) for d in PLAYGROUND_CSP.split(";"))
    assert policy["default-src"] == "'self'"
    assert policy["frame-ancestors"] == "'self'"
    assert policy["script-src"] == "'self'"  # no inline script, nothing from elsewhere


def test_query_credentials_stay_out_of_the_server_log(server: LiveServer) -> None:
    """A token in the query string (a WebSocket handshake cannot carry headers) is not written
    by uvicorn's request lines, on HTTP or on the socket; our own parameters still are."""
    secret = "s3cret-" + "7f3a9c"
    with connect(f"{server.base_url.replace('http', 'ws')}/live?chatId=c-redact&token={secret}"):
        pass
    server.http.get(f"/health?access_token={secret}&resume=1")
    log = server.log()
    assert secret not in log
    assert '"WebSocket /live?chatId=c-redact&token=[redacted]" [accepted]' in log
    assert '"GET /health?access_token=[redacted]&resume=1 HTTP/1.1" 200' in log
