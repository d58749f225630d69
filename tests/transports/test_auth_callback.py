"""``GET /auth/callback`` (docs/adr/0065): the route an OAuth2 provider sends the user back to
after a tool's sign-in, when ``ADK_STREAM_AUTH_CALLBACK_URL`` is set. What it refuses (a state
it never gave, one used or another user's, a redirect without a code), what it does with the
provider's refusal, that it is off without the setting, and that its state lives where the
chat's coordination does. Through the real app and ADK Runner, against a real OAuth2 provider
(``tests/support/oauth_provider.py``); the happy path on each transport is in
``tests/test_table_sign_in.py``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import redis
from fastapi import Request

from adk_stream_protocol.foundation.security import QueryRedaction
from adk_stream_protocol.testing import AgentClient, serve_agent, settings_for_tests
from adk_stream_protocol.transports.auth_callback import NO_CODE, NOT_VALID, OFF, OTHER_USER
from tests.support.agents.human_input import forecast_agent
from tests.support.agents.samples import Ledger
from tests.support.agents.sign_in import WAITING, profile_agent
from tests.support.oauth_provider import PEOPLE, Provider, SigningInBrowser, serve_provider
from tests.support.sign_ins import CALLBACK_URL, auth_uri, sign_in_request
from tests.support.table_chat import TableChat

USER_HEADER = "x-user"


async def header_identity(request: Request) -> str:
    """Who asks, as an authenticating proxy in front of the server would say."""
    return request.headers.get(USER_HEADER, "nobody")


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[Provider]:
    with serve_provider([CALLBACK_URL], tmp_path) as served:
        yield served


@pytest.fixture
def browser() -> Iterator[SigningInBrowser]:
    tab = SigningInBrowser()
    yield tab
    tab.close()


@pytest.fixture
def server(provider: Provider, ledger: Ledger) -> Iterator[AgentClient]:
    settings = settings_for_tests(auth_callback_url=CALLBACK_URL)
    agent = profile_agent(provider, ledger, None)
    with serve_agent(agent, settings, identity=header_identity) as client:
        client.http.headers[USER_HEADER] = "alice"
        yield client


@pytest.fixture
def chat(server: AgentClient) -> Iterator[TableChat]:
    table_chat = TableChat(server.http, "stream")
    yield table_chat
    table_chat.close()


def _with_state(url: str, state: str) -> str:
    parts = urlsplit(url)
    query = [(k, state if k == "state" else v) for k, v in parse_qsl(parts.query)]
    return parts._replace(query=urlencode(query)).geturl()


def _after_the_answer(chat: TableChat) -> list[dict[str, Any]]:
    """The chat's last message once the continuation the callback began has ended (the
    page's resume reads to its end, or finds it ended), as its record holds it."""
    chat.resume()
    chat.reload()
    return list(chat.messages[-1]["parts"])


def test_a_callback_with_a_state_the_server_never_gave_is_refused_and_resumes_nothing(
    chat: TableChat, provider: Provider, browser: SigningInBrowser, ledger: Ledger
) -> None:
    part = sign_in_request(chat.send("who am i?"))
    back = browser.sign_in(auth_uri(part), "alice")
    forged = chat.http.get(_with_state(back, "a-state-of-my-own"))
    assert forged.status_code == 400
    assert "<h1>Sign-in not completed</h1>" in forged.text and "used already" in forged.text
    assert ledger.lines == [] and provider.exchanged == []

    assert chat.http.get(back).status_code == 200  # the real redirect still signs in
    assert any(p.get("output") == PEOPLE["alice"] for p in _after_the_answer(chat))
    assert ledger.lines == ["profile of alice"]


def test_a_state_is_taken_once_so_a_second_redirect_changes_nothing(
    chat: TableChat, provider: Provider, browser: SigningInBrowser, ledger: Ledger
) -> None:
    part = sign_in_request(chat.send("who am i?"))
    back = browser.sign_in(auth_uri(part), "alice")
    assert chat.http.get(back).status_code == 200
    _after_the_answer(chat)
    again = chat.http.get(back)
    assert again.status_code == 400 and NOT_VALID.split(":")[0] in again.text
    assert ledger.lines == ["profile of alice"] and len(provider.exchanged) == 1


def test_a_callback_in_another_users_tab_is_refused_and_uses_the_state_up(
    chat: TableChat, provider: Provider, browser: SigningInBrowser, ledger: Ledger
) -> None:
    part = sign_in_request(chat.send("who am i?"))
    back = browser.sign_in(auth_uri(part), "bob")  # alice's chat, opened in mallory's tab
    refused = chat.http.get(back, headers={USER_HEADER: "mallory"})
    assert refused.status_code == 403 and OTHER_USER.split(",")[0] in refused.text
    assert chat.http.get(back).status_code == 400  # one use, even a refused one
    assert ledger.lines == [] and provider.exchanged == []


def test_a_sign_in_refused_at_the_provider_ends_the_request_with_its_error_and_goes_on(
    chat: TableChat, provider: Provider, browser: SigningInBrowser, ledger: Ledger
) -> None:
    part = sign_in_request(chat.send("who am i?"))
    back = browser.sign_in(auth_uri(part), "alice", allow=False)
    assert dict(parse_qsl(urlsplit(back).query))["error"] == "access_denied"
    tab = chat.http.get(back)
    assert tab.status_code == 200 and "Sign-in refused (access_denied)" in tab.text
    parts = _after_the_answer(chat)
    (ended,) = [p for p in parts if p.get("toolCallId") == part["toolCallId"]]
    assert ended["state"] == "output-error" and "access_denied" in ended["errorText"]
    # ADK runs the tool again, without a credential: it says so, and the model goes on.
    (profile,) = [p for p in parts if p["type"] == "tool-get_profile"]
    assert profile["output"] == WAITING
    assert parts[-1]["type"] == "text"
    assert ledger.lines == [] and provider.exchanged == []


def test_a_callback_without_a_state_or_without_a_code_is_refused(
    chat: TableChat, browser: SigningInBrowser, ledger: Ledger
) -> None:
    part = sign_in_request(chat.send("who am i?"))
    back = browser.sign_in(auth_uri(part), "alice")
    code = dict(parse_qsl(urlsplit(back).query))["code"]
    assert chat.http.get(f"/auth/callback?code={code}").status_code == 400
    state = dict(parse_qsl(urlsplit(auth_uri(part)).query))["state"]
    no_code = chat.http.get(f"/auth/callback?state={state}")
    assert no_code.status_code == 400 and NO_CODE in no_code.text
    assert ledger.lines == []


def test_the_callback_route_is_off_and_requests_are_untouched_without_a_callback_url(
    provider: Provider, ledger: Ledger
) -> None:
    agent = profile_agent(provider, ledger, CALLBACK_URL)
    with serve_agent(agent, settings_for_tests()) as client:
        off = client.http.get("/auth/callback?state=s&code=c")
        assert off.status_code == 404 and "ADK_STREAM_AUTH_CALLBACK_URL" in off.text
        assert OFF.split(" (")[0] in off.text
        chat = TableChat(client.http, "stream")
        part = sign_in_request(chat.send("who am i?"))
        oauth2 = part["input"]["authConfig"]["exchangedAuthCredential"]["oauth2"]
        assert oauth2["state"] == dict(parse_qsl(urlsplit(oauth2["authUri"]).query))["state"]
        assert "redirectUri" in oauth2 and oauth2["redirectUri"] == CALLBACK_URL  # the agent's


def test_with_a_callback_url_an_api_key_request_is_still_the_pages_to_answer(
    ledger: Ledger,
) -> None:
    settings = settings_for_tests(auth_callback_url=CALLBACK_URL)
    with serve_agent(forecast_agent(ledger), settings) as client:
        chat = TableChat(client.http, "stream")
        part = sign_in_request(chat.send("what is the weather?"))
        config = part["input"]["authConfig"]
        assert "exchangedAuthCredential" not in config or "oauth2" not in str(config)
        answer = {**config, "exchangedAuthCredential": {"authType": "apiKey", "apiKey": "k-1"}}
        assert chat.tool_output(part["toolCallId"], answer).text == "It is sunny in Oslo."


def test_the_providers_code_and_state_are_redacted_in_uvicorns_request_line() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/auth/callback?code=c0de&state=st4te", "1.1", 200),
        None,
    )
    QueryRedaction().filter(record)
    assert record.getMessage().endswith(
        '"GET /auth/callback?code=[redacted]&state=[redacted] HTTP/1.1" 200'
    )


def test_a_sign_in_through_the_callback_is_bound_in_redis_with_the_chats_coordination(
    provider: Provider,
    browser: SigningInBrowser,
    ledger: Ledger,
    redis_url: str,
    redis_prefix: str,
) -> None:
    settings = settings_for_tests(
        auth_callback_url=CALLBACK_URL, redis_url=redis_url, redis_key_prefix=redis_prefix
    )
    agent = profile_agent(provider, ledger, None)
    store = redis.Redis.from_url(redis_url)
    try:
        with serve_agent(agent, settings, identity=header_identity) as client:
            client.http.headers[USER_HEADER] = "alice"
            chat = TableChat(client.http, "stream")
            part = sign_in_request(chat.send("who am i?"))
            (key,) = store.keys(f"{redis_prefix}:*:sign-in:*")
            assert 0 < int(store.pttl(key)) <= 600_000
            assert chat.http.get(browser.sign_in(auth_uri(part), "alice")).status_code == 200
            assert store.exists(key) == 0
            assert any(p.get("output") == PEOPLE["alice"] for p in _after_the_answer(chat))
    finally:
        store.close()
    assert ledger.lines == ["profile of alice"]
