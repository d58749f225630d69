"""The behaviour table's tool sign-in rows (docs/agent/features.md;
issue 37): a tool that signs the user in at a real OAuth2 provider (Authlib's authorization
server on a free loopback port, ``tests/support/oauth_provider.py``), through the real app and
ADK Runner with a scripted model (``tests/support/agents/sign_in.py``).

Two ways back from the provider: the page's own (ADK's: the provider sends the tab to the
page, which answers the ``tool-adk_request_credential`` part with the ``authConfig`` and the
URL it came back to), and the server's callback route (docs/adr/0065)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from adk_stream_protocol.protocol.credentials import REDACTED
from adk_stream_protocol.testing import AgentClient, ChatResponse, serve_agent, settings_for_tests
from tests.support.agents.human_input import FORECAST_KEY, forecast_agent
from tests.support.agents.samples import Ledger
from tests.support.agents.sign_in import SIGNED_IN_ANSWER, profile_agent, profile_workflow
from tests.support.oauth_provider import PEOPLE, Provider, SigningInBrowser, serve_provider
from tests.support.sign_ins import (
    CALLBACK_URL,
    PAGE_REDIRECT,
    page_answer,
    server_log,
    sign_in_request,
)
from tests.support.table_chat import TableChat

RUN_ASYNC = pytest.mark.parametrize("transport", ["stream", "ai7"])


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[Provider]:
    with serve_provider([PAGE_REDIRECT, CALLBACK_URL], tmp_path) as served:
        yield served


@pytest.fixture
def browser() -> Iterator[SigningInBrowser]:
    tab = SigningInBrowser()
    yield tab
    tab.close()


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    return tmp_path / "recordings"


@pytest.fixture
def page_flow(provider: Provider, ledger: Ledger, recordings: Path) -> Iterator[AgentClient]:
    agent = profile_agent(provider, ledger, PAGE_REDIRECT)
    with serve_agent(agent, settings_for_tests(record_dir=recordings)) as client:
        yield client


@pytest.fixture
def release() -> threading.Event:
    """Set: the tool goes on once it has its token (a test that resumes clears it)."""
    event = threading.Event()
    event.set()
    return event


@pytest.fixture
def callback_flow(
    provider: Provider, ledger: Ledger, recordings: Path, release: threading.Event
) -> Iterator[AgentClient]:
    agent = profile_agent(provider, ledger, None, release)
    settings = settings_for_tests(auth_callback_url=CALLBACK_URL, record_dir=recordings)
    with serve_agent(agent, settings) as client:
        yield client


@pytest.fixture
def greeter_page_flow(provider: Provider, ledger: Ledger) -> Iterator[AgentClient]:
    with serve_agent(profile_workflow(provider, ledger, PAGE_REDIRECT)) as client:
        yield client


@pytest.fixture
def greeter_callback_flow(provider: Provider, ledger: Ledger) -> Iterator[AgentClient]:
    settings = settings_for_tests(auth_callback_url=CALLBACK_URL)
    with serve_agent(profile_workflow(provider, ledger, None), settings) as client:
        yield client


@pytest.fixture
def forecaster(ledger: Ledger, recordings: Path) -> Iterator[AgentClient]:
    with serve_agent(forecast_agent(ledger), settings_for_tests(record_dir=recordings)) as client:
        yield client


@pytest.fixture
def chat(request: pytest.FixtureRequest, transport: str) -> Iterator[TableChat]:
    server: AgentClient = request.getfixturevalue(request.param)
    table_chat = TableChat(server.http, transport)
    yield table_chat
    table_chat.close()


def _sign_in_from_the_page(
    chat: TableChat, browser: SigningInBrowser, person: str = "alice"
) -> tuple[dict[str, Any], ChatResponse]:
    """The page's flow: the request, the tab at the provider, the page's answer."""
    part = sign_in_request(chat.send("who am i?"))
    config = part["input"]["authConfig"]
    back = browser.sign_in(config["exchangedAuthCredential"]["oauth2"]["authUri"], person)
    return part, chat.tool_output(part["toolCallId"], page_answer(config, back))


def _recorded(recordings: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(recordings.glob("*.jsonl")))


def _output_of(response: ChatResponse, part_type: str) -> Any:
    assert response.message is not None
    (part,) = [p for p in response.message["parts"] if p["type"] == part_type]
    assert part["state"] == "output-available", part
    return part["output"]


# -- OAuth2 from the page, as ADK expects ------------------------------------------------------


@RUN_ASYNC
@pytest.mark.parametrize("chat", ["page_flow"], indirect=True)
def test_an_oauth2_sign_in_completes_from_the_page_and_the_tool_uses_the_providers_token(
    chat: TableChat, provider: Provider, browser: SigningInBrowser, ledger: Ledger
) -> None:
    part = sign_in_request(chat.send("who am i?"))
    config = part["input"]["authConfig"]
    oauth2 = config["exchangedAuthCredential"]["oauth2"]
    assert "clientSecret" not in oauth2  # ADK keeps the agent's secret from the page
    assert "clientSecret" not in config["rawAuthCredential"]["oauth2"]
    auth_uri = oauth2["authUri"]
    assert auth_uri.startswith(provider.authorize_url)
    assert parse_qs(urlsplit(auth_uri).query)["redirect_uri"] == [PAGE_REDIRECT]

    back = browser.sign_in(auth_uri, "alice")  # the provider sends the tab back to the page
    assert back.startswith(f"{PAGE_REDIRECT}?code=")
    answer = {
        **config,
        "exchangedAuthCredential": {
            **config["exchangedAuthCredential"],
            "oauth2": {**oauth2, "authResponseUri": back, "redirectUri": PAGE_REDIRECT},
        },
    }
    answered = chat.tool_output(part["toolCallId"], answer)
    assert _output_of(answered, "tool-get_profile") == PEOPLE["alice"]
    assert answered.text == SIGNED_IN_ANSWER
    # ADK exchanged the code at the provider once, and the tool's token was the provider's.
    assert len(provider.exchanged) == 1 and len(provider.tokens) == 1
    assert provider.served == ["alice"]
    assert ledger.lines == ["profile of alice"]


# -- OAuth2 through the server's callback route --------------------------------------------------


@RUN_ASYNC
@pytest.mark.parametrize("chat", ["callback_flow"], indirect=True)
def test_an_oauth2_sign_in_comes_back_to_the_servers_callback_and_the_page_only_resumes(
    chat: TableChat,
    provider: Provider,
    browser: SigningInBrowser,
    ledger: Ledger,
    release: threading.Event,
) -> None:
    part = sign_in_request(chat.send("who am i?"))
    oauth2 = part["input"]["authConfig"]["exchangedAuthCredential"]["oauth2"]
    query = parse_qs(urlsplit(oauth2["authUri"]).query)
    assert query["redirect_uri"] == [CALLBACK_URL] and oauth2["redirectUri"] == CALLBACK_URL
    assert query["state"] == [oauth2["state"]]  # the server's own, bound to this call

    back = browser.sign_in(oauth2["authUri"], "bob")
    assert back.startswith(f"{CALLBACK_URL}?code=")
    release.clear()  # the answer waits for the page's resume
    tab = chat.http.get(back)  # the tab follows the provider's redirect to the server
    assert tab.status_code == 200, tab.text
    assert "<h1>Signed in</h1>" in tab.text and "close this tab" in tab.text
    assert tab.headers["cache-control"] == "no-store"

    resumed = chat.resume(started=release.set)  # all the page does
    outputs = {
        c["toolCallId"]: c["output"] for c in resumed if c["type"] == "tool-output-available"
    }
    answer = outputs[part["toolCallId"]]  # the request answered, its secrets not sent
    assert answer["exchangedAuthCredential"]["oauth2"]["authResponseUri"] == REDACTED
    assert PEOPLE["bob"] in outputs.values()
    assert "".join(c["delta"] for c in resumed if c["type"] == "text-delta").endswith(
        SIGNED_IN_ANSWER
    )
    assert provider.served == ["bob"] and len(provider.exchanged) == 1
    assert ledger.lines == ["profile of bob"]

    chat.reload()  # and the chat's record holds the answer, for a page that did not resume
    parts = chat.messages[-1]["parts"]
    profile = [p for p in parts if p["type"] == "tool-get_profile"][-1]
    assert profile["state"] == "output-available" and profile["output"] == PEOPLE["bob"]
    (kept,) = [p for p in parts if p.get("toolCallId") == part["toolCallId"]]
    assert kept["state"] == "output-available"
    for secret in provider.secrets():
        assert secret not in chat.http.get(f"/chats/{chat.chat_id}").text
        assert secret not in json.dumps(resumed)


# -- a graph Workflow's node that signs the user in ----------------------------------------------


@RUN_ASYNC
@pytest.mark.parametrize("chat", ["greeter_page_flow"], indirect=True)
def test_a_workflow_nodes_sign_in_completes_from_the_page_with_the_state_adk_made(
    chat: TableChat, provider: Provider, browser: SigningInBrowser, ledger: Ledger
) -> None:
    part = sign_in_request(chat.send("hello"))
    config = part["input"]["authConfig"]
    assert "codeVerifier" not in config["exchangedAuthCredential"]["oauth2"]
    back = browser.sign_in(config["exchangedAuthCredential"]["oauth2"]["authUri"], "alice")
    # A redirect with a state the request was not made with is not this sign-in's: refused
    # before ADK sees it (which would fail the run), and nothing resumes.
    forged = page_answer(config, back.replace("state=", "state=x"))
    refusal = chat.refused_tool_output(part["toolCallId"], forged)
    assert "does not carry the state of the request's authUri" in refusal
    assert provider.exchanged == [] and ledger.lines == []
    chat.withdraw_output(part["toolCallId"])
    answered = chat.tool_output(part["toolCallId"], page_answer(config, back))
    assert answered.text == "Hello, Alice Example."
    assert provider.served == ["alice"] and ledger.lines == ["profile of alice"]


@RUN_ASYNC
@pytest.mark.parametrize("chat", ["greeter_callback_flow"], indirect=True)
def test_a_workflow_nodes_sign_in_comes_back_to_the_servers_callback(
    chat: TableChat, provider: Provider, browser: SigningInBrowser, ledger: Ledger
) -> None:
    part = sign_in_request(chat.send("hello"))
    oauth2 = part["input"]["authConfig"]["exchangedAuthCredential"]["oauth2"]
    assert parse_qs(urlsplit(oauth2["authUri"]).query)["redirect_uri"] == [CALLBACK_URL]
    back = browser.sign_in(oauth2["authUri"], "bob")
    tab = chat.http.get(back)
    assert tab.status_code == 200 and "<h1>Signed in</h1>" in tab.text, tab.text
    chat.resume()
    chat.reload()
    assert chat.messages[-1]["parts"][-1] == {
        "type": "text",
        "text": "Hello, Bob Example.",
        "state": "done",
    }
    assert provider.served == ["bob"] and ledger.lines == ["profile of bob"]


# -- secrets stay where they were given ----------------------------------------------------------


@RUN_ASYNC
@pytest.mark.parametrize("chat", ["page_flow"], indirect=True)
def test_the_code_and_tokens_of_a_sign_in_reach_neither_the_page_nor_the_record_nor_the_logs(
    chat: TableChat,
    provider: Provider,
    browser: SigningInBrowser,
    recordings: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    part, answered = _sign_in_from_the_page(chat, browser)
    assert _output_of(answered, "tool-get_profile") == PEOPLE["alice"]
    secrets = provider.secrets()  # the client's secret, the code, the access token
    assert len(secrets) == 3

    chat.reload()
    (kept,) = [p for p in chat.messages[-1]["parts"] if p.get("toolCallId") == part["toolCallId"]]
    assert kept["state"] == "output-available"
    oauth2 = kept["output"]["exchangedAuthCredential"]["oauth2"]
    assert oauth2["authResponseUri"] == REDACTED and oauth2["redirectUri"] == PAGE_REDIRECT
    record = chat.http.get(f"/chats/{chat.chat_id}").text
    sent_back = answered.body
    log = server_log(caplog)
    # ADK logs what resumes the run, the page's answer: there, with the code redacted.
    assert "rehydrated resume_inputs" in log and f"'authResponseUri': '{REDACTED}'" in log
    for secret in secrets:
        assert secret not in record
        assert secret not in sent_back
        assert secret not in _recorded(recordings)
        assert secret not in log


@RUN_ASYNC
@pytest.mark.parametrize("chat", ["forecaster"], indirect=True)
def test_an_api_key_the_page_answers_with_reaches_neither_the_record_nor_the_logs(
    chat: TableChat, ledger: Ledger, recordings: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = "user-key-7f3a9c"
    part = sign_in_request(chat.send("what is the weather?"))
    config = part["input"]["authConfig"]
    assert config["credentialKey"] == FORECAST_KEY.credential_key
    answer = {**config, "exchangedAuthCredential": {"authType": "apiKey", "apiKey": key}}
    answered = chat.tool_output(part["toolCallId"], answer)
    assert answered.text == "It is sunny in Oslo."
    assert ledger.lines == [f"forecast Oslo with a key of {len(key)} characters"]

    chat.reload()
    (kept,) = [p for p in chat.messages[-1]["parts"] if p.get("toolCallId") == part["toolCallId"]]
    assert kept["output"]["exchangedAuthCredential"] == {"authType": "apiKey", "apiKey": REDACTED}
    assert kept["output"]["authScheme"] == config["authScheme"]
    assert key not in chat.http.get(f"/chats/{chat.chat_id}").text
    assert key not in answered.body
    assert key not in _recorded(recordings) and _recorded(recordings)
    log = server_log(caplog)
    assert key not in log and f"'apiKey': '{REDACTED}'" in log
