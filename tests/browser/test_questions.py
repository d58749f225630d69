"""ADK 2's questions and a tool's sign-in in the playground (issue 37, point 9; ADR 0064 and
0066): a question (`tool-adk_request_input`) is a form built from its JSON schema, with its
message; an answer the server refuses shows its reason by the form, which asks again; the
right one resumes the agent once. A sign-in (`tool-adk_request_credential`) is a password
field for an API key, or a Sign in button that opens the provider's page.

Each test serves its agent (tests/support/agents/human_input.py) from this process with the
page of its mode, so the agent's ledger is the test's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Locator, Route, expect

from adk_stream_protocol import create_app
from adk_stream_protocol.turns.runners import AgentLike
from tests.browser.conftest import PLAYGROUND_DIST_V6, OpenPlayground
from tests.support.agents.human_input import (
    CALENDAR_AUTHORIZE_URL,
    CALENDAR_CLIENT_ID,
    CALENDAR_CLIENT_SECRET,
    COLOUR_QUESTION,
    DAYS_QUESTION,
    calendar_agent,
    clarifying_agent,
    forecast_agent,
    time_off_app,
)
from tests.support.agents.samples import Ledger
from tests.support.browser.playground import AI6, AI7, Mode, Playground
from tests.support.rig import (
    PLAYGROUND_DIST,
    LiveServer,
    app_settings,
    serve_app_in_thread,
)

pytestmark = pytest.mark.browser

Serve = Callable[[AgentLike, Mode], LiveServer]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Serves an agent built here, with the page of the mode's build."""
    with ExitStack() as stack:

        def start(agent: AgentLike, mode: Mode) -> LiveServer:
            page = PLAYGROUND_DIST_V6 if mode.page == "ai6" else PLAYGROUND_DIST
            app = create_app(agent, settings=app_settings(tmp_path, playground_dir=page))
            return stack.enter_context(serve_app_in_thread(app, tmp_path / "sessions.db"))

        yield start


def _question(playground: Playground) -> tuple[Locator, Locator]:
    """The question's card and its form, once it waits for the user."""
    card = playground.tool("adk_request_input")
    playground.expect_tool_state(card, "input-available")
    form = card.get_by_test_id("input-request")
    expect(form).to_be_visible()
    return card, form


# The ai 6 page on /live uses our transport, which runs the agent live: a workflow does not.
@pytest.mark.parametrize("mode", [*AI7, AI6[0]], ids=str)
def test_a_question_is_a_form_from_its_schema_that_refuses_a_wrong_answer_visibly_and_resumes_once(
    open_playground: OpenPlayground, serve: Serve, mode: Mode
) -> None:
    ledger = Ledger()
    playground = open_playground(mode, base_url=serve(time_off_app(ledger), mode).base_url)
    playground.send("I need some time off")
    card, form = _question(playground)
    expect(playground.assistant()).to_contain_text("Let us plan your time off.")
    expect(form.get_by_test_id("input-request-message")).to_have_text(DAYS_QUESTION)
    # The schema's one property, an integer: a number field named for it, marked required.
    days = form.locator('[data-testid="input-field"][data-field="days"]')
    expect(days).to_have_attribute("type", "number")
    expect(form).to_contain_text("days *")

    # The page reloads while the question waits: the chat read back asks it again.
    playground.reload()
    card, form = _question(playground)
    days = form.locator('[data-testid="input-field"][data-field="days"]')

    days.fill("0")  # below the schema's minimum: the server refuses it, the page says why
    form.get_by_test_id("input-request-submit").click()
    refused = card.get_by_test_id("answer-refused")
    expect(refused).to_contain_text("'minimum' (1) fails at days")
    playground.expect_tool_state(card, "input-available")
    expect(playground.by_id("error-box")).to_have_count(0)
    playground.expect_ready()
    assert ledger.lines == []

    form.locator('[data-testid="input-field"][data-field="days"]').fill("3")
    form.get_by_test_id("input-request-submit").click()
    playground.expect_tool_state(card, "output-available")
    expect(card.get_by_test_id("tool-output")).to_contain_text('"days": 3')
    expect(playground.assistant()).to_contain_text("Approved: 3 days off.")
    playground.expect_ready()
    assert ledger.lines == ["decide 3"]


REPLY = "A logo in the colour you chose, coming up."


# The LLM agent runs live too: the ai 6 page's /live is our /live?chatId= transport.
@pytest.mark.parametrize("mode", [AI7[0], AI6[1]], ids=str)
def test_a_question_with_a_list_of_answers_is_a_choice_and_the_agent_goes_on(
    open_playground: OpenPlayground, serve: Serve, mode: Mode
) -> None:
    server = serve(clarifying_agent(), mode)
    playground = open_playground(mode, base_url=server.base_url)
    playground.send("draw me a logo")
    card, form = _question(playground)
    expect(form.get_by_test_id("input-request-message")).to_have_text(COLOUR_QUESTION)
    # A bare enum schema: the whole answer is one choice, labelled with the question.
    choice = form.get_by_label(COLOUR_QUESTION)
    expect(choice).to_have_attribute("data-testid", "input-field")
    expect(choice.locator("option")).to_have_text(["choose…", "red", "green", "blue"])
    form.get_by_test_id("input-request-submit").click()  # nothing chosen: the page says so
    expect(form.get_by_test_id("input-request-problem")).to_have_text("Type an answer first.")

    choice.select_option("green")
    form.get_by_test_id("input-request-submit").click()
    playground.expect_tool_state(card, "output-available")
    expect(playground.assistant()).to_contain_text(REPLY)
    playground.expect_ready()
    # The server's record of the chat: the question answered, the agent's reply once.
    record = server.http.get(f"/chats/{playground.chat_id}").json()["messages"]
    parts = [p for m in record if m["role"] == "assistant" for p in m["parts"]]
    (asked,) = [p for p in parts if p["type"] == "tool-adk_request_input"]
    assert asked["state"] == "output-available"
    # On /live?chatId= the gate hands the result back as the session stores it (ADR 0064).
    assert asked["output"] == ({"result": "green"} if mode.ours else "green")
    assert [p["text"] for p in parts if p["type"] == "text"] == [REPLY]


API_KEY = "user-key-1234"


@pytest.mark.parametrize("mode", [*AI7, AI6[0]], ids=str)
def test_a_tool_sign_in_with_an_api_key_is_a_password_field_and_the_tool_runs_with_the_key(
    open_playground: OpenPlayground, serve: Serve, mode: Mode
) -> None:
    ledger = Ledger()
    playground = open_playground(mode, base_url=serve(forecast_agent(ledger), mode).base_url)
    playground.send("what is the weather?")
    card = playground.tool("adk_request_credential")
    playground.expect_tool_state(card, "input-available")
    key = card.get_by_test_id("credential-api-key")
    expect(key).to_have_attribute("type", "password")
    expect(card.get_by_test_id("credential-request")).to_contain_text("API key (X-Api-Key)")

    key.fill(API_KEY)
    card.get_by_test_id("credential-submit").click()
    playground.expect_tool_state(card, "output-available")
    expect(playground.assistant()).to_contain_text("It is sunny in Oslo.")
    playground.expect_ready()
    assert ledger.lines == [f"forecast Oslo with a key of {len(API_KEY)} characters"]


@pytest.mark.parametrize("mode", [AI7[0]], ids=str)
def test_a_tool_sign_in_with_oauth2_is_a_button_that_opens_the_providers_page(
    open_playground: OpenPlayground, serve: Serve, mode: Mode
) -> None:
    ledger = Ledger()
    # A context of its own: the provider's address is answered here, for this test only.
    playground = open_playground(
        mode, base_url=serve(calendar_agent(ledger), mode).base_url, locale="en-GB"
    )
    context = playground.page.context

    def provider(route: Route) -> None:
        route.fulfill(status=200, content_type="text/html", body="<title>Sign in</title>")

    context.route(f"{CALENDAR_AUTHORIZE_URL}*", provider)
    playground.send("what is on my calendar?")
    card = playground.tool("adk_request_credential")
    playground.expect_tool_state(card, "input-available")
    expect(card.get_by_test_id("tool-input")).not_to_contain_text(CALENDAR_CLIENT_SECRET)

    with context.expect_page() as opened:
        card.get_by_test_id("sign-in-button").click()
    tab = opened.value
    tab.wait_for_load_state()
    address = urlsplit(tab.url)
    assert f"{address.scheme}://{address.netloc}{address.path}" == CALENDAR_AUTHORIZE_URL
    query = parse_qs(address.query)
    assert query["client_id"] == [CALENDAR_CLIENT_ID]
    assert query["response_type"] == ["code"]
    assert query["state"], query  # ADK's own state, which the server's callback checks
    expect(card.get_by_test_id("sign-in-opened")).to_be_visible()
    # Signing in ends at the server (its callback), not on this page: the call still waits.
    playground.expect_tool_state(card, "input-available")
    assert ledger.lines == []
