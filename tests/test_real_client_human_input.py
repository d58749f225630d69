"""ADK 2's questions for the user through the real AI SDK clients (issue 37, point 2; ADR
0064): a graph workflow's ``RequestInput`` and ADK's ``request_input`` tool in an LLM agent,
answered with ``addToolOutput`` and the stock ``lastAssistantMessageIsCompleteWithToolCalls``
by ai 6.0.25 (strict), the newest 6.x and ai 7 on ``POST /stream``, by ai 7 on its own socket,
and (the LLM agent, which runs live) by our transport on ``/live?chatId=``.

Each chat asks, the user first answers outside the request's ``response_schema`` (the client
is told why and nothing resumes), then answers right: the chat ends ``ready``, the agent's
reply shows, the answer resumed the run once, and nothing was sent again by itself. The
agents (tests/support/agents/human_input.py) are served from this process, so the
workflow's ledger is read here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from google.adk.events import Event

from adk_stream_protocol import create_app
from adk_stream_protocol.turns.runners import AgentLike
from tests.support.agents.human_input import (
    COLOUR_QUESTION,
    DAYS_QUESTION,
    DAYS_SCHEMA,
    clarifying_agent,
    time_off_app,
)
from tests.support.agents.samples import Ledger
from tests.support.real_client import (
    OURS,
    STOCK,
    checked,
    client_job,
    ready,
    run_real_client,
    text_of,
    tool_parts,
)
from tests.support.rig import LiveServer, app_settings, serve_app_in_thread, stored_events

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

Serve = Callable[[AgentLike], LiveServer]
INPUT_TOOL = "adk_request_input"
REPLY = "A logo in the colour you chose, coming up."

# (client, WebSocket transport on /live or None for POST /stream)
RUN_ASYNC_CLIENTS = [("6.0.25", None), ("6", None), ("7", None), ("7", STOCK)]
# The LLM agent runs live too: our transport on /live?chatId=, with a 6.x and ai 7.
EVERY_CLIENT = [*RUN_ASYNC_CLIENTS, ("6.0.25", OURS), ("7", OURS)]


TRANSPORT_IDS = {None: "stream", STOCK: "ai7-socket", OURS: "live-chatId"}


def _client_id(run: tuple[str, str | None]) -> str:
    client, ws = run
    return f"ai{client}-{TRANSPORT_IDS[ws]}"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Serves an agent built here (so its ledger is this test's) under uvicorn in a thread."""
    with ExitStack() as stack:

        def start(agent: AgentLike) -> LiveServer:
            app = create_app(agent, settings=app_settings(tmp_path))
            return stack.enter_context(serve_app_in_thread(app, tmp_path / "sessions.db"))

        yield start


def _answer(output: Any) -> dict[str, Any]:
    """The user fills in the question's form: ``addToolOutput`` on its part."""
    return {"action": "toolOutput", "toolName": INPUT_TOOL, "output": output}


class Answered:
    """A chat the real client ran to its end: it asked, one answer was refused, one taken."""

    def __init__(
        self, server: LiveServer, run: tuple[str, str | None], steps: list[dict[str, Any]]
    ) -> None:
        client, ws = run
        job = client_job(
            server, client, steps, live=ws is not None, ws=ws, sendAutomaticallyWhen="tool-calls"
        )
        self.chat_id: str = job["chatId"]
        self.report = checked(job, run_real_client(job), refusals=1)
        self.assistant = ready(self.report)
        (self.part,) = tool_parts(self.assistant)
        assert self.part["type"] == f"tool-{INPUT_TOOL}"
        assert self.part["state"] == "output-available", self.part
        # The question, the refused answer, the accepted one: nothing was sent by itself.
        assert len(self.report["requests"]) == 3, self.report["requests"]
        assert self.report["finishReasons"][::2] == ["tool-calls", "stop"]

    @property
    def refusal(self) -> str:
        """What the client was told of the refused answer."""
        (error,) = self.report["errors"]
        assert f"input request '{self.part['toolCallId']}'" in error
        return str(error)


@pytest.mark.parametrize("run", RUN_ASYNC_CLIENTS, ids=_client_id)
def test_the_real_client_answers_a_workflows_input_request_after_a_reload_and_it_resumes_once(
    serve: Serve, run: tuple[str, str | None]
) -> None:
    ledger = Ledger()
    server = serve(time_off_app(ledger))
    steps = [
        {"action": "send", "text": "I need some time off"},
        # The page reloads while the question waits: GET /chats/{chatId} gives it back.
        {"action": "reload"},
        _answer({"days": 0}),  # outside the schema's minimum
        _answer({"days": 3}),
    ]
    chat = Answered(server, run, steps)
    assert chat.report["reloads"] == [{"afterRequest": 0, "status": 200}]
    # The rule the answer broke, not the value (it is the user's).
    assert "'minimum' (1) fails at days" in chat.refusal

    assert chat.part["input"]["message"] == DAYS_QUESTION
    assert chat.part["input"]["response_schema"] == DAYS_SCHEMA
    assert chat.part["output"] == {"days": 3}
    assert text_of(chat.assistant) == "Let us plan your time off.Approved: 3 days off."
    assert ledger.lines == ["decide 3"]  # the refused answer resumed nothing


@pytest.mark.parametrize("run", EVERY_CLIENT, ids=_client_id)
def test_the_real_client_answers_an_llm_agents_request_input_and_the_model_goes_on_once(
    serve: Serve, run: tuple[str, str | None]
) -> None:
    server = serve(clarifying_agent())
    live = run[1] == OURS
    steps = [
        {"action": "send", "text": "draw me a logo"},
        # On /live?chatId= a reload ends what the socket's run waited for (a browser call, and
        # so this question: the behaviour table says so); elsewhere the question waits.
        *([] if live else [{"action": "reload"}]),
        _answer("purple"),  # not one of the schema's colours
        _answer("green"),
    ]
    chat = Answered(server, run, steps)
    assert "'enum'" in chat.refusal and "purple" not in chat.refusal

    assert chat.part["input"]["message"] == COLOUR_QUESTION
    # On our /live the gate hands the result back as the session stores it: ADK's wrapping
    # of a value that is not an object (ADR 0064).
    assert chat.part["output"] == ({"result": "green"} if live else "green")
    assert text_of(chat.assistant) == REPLY
    events = stored_events(server, chat.chat_id)
    answers = [
        dict(r.response or {})
        for e in events
        for r in e.get_function_responses()
        if r.id == chat.part["toolCallId"]
    ]
    assert answers == [{"result": "green"}]
    assert sum(_text(e) == REPLY for e in events) == 1  # the model went on once


def _text(event: Event) -> str:
    return "".join(p.text or "" for p in (event.content.parts or [] if event.content else []))
