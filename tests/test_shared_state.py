"""Shared state and who answered (docs/adr/0044), through the real app and ADK Runner with
scripted models, on `POST /stream`, ai 7's socket on `/live` and `/live?chatId=`.

Shared state: the session state keys under `ui:` reach the page as one `data-state` part
(id `state`, all the shared keys), sent when a response changes them (a tool, a callback, the
request's own `state` field); keys outside the prefix are never sent nor accepted. Who
answered: with sub-agents, a `data-agent` part before the first part of each agent."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from pydantic import ValidationError

from adk_stream_protocol.demo.agent import build_demo_agent
from adk_stream_protocol.foundation.limits import RequestLimits
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.testing import (
    AgentClient,
    ChatResponse,
    ScriptedLlm,
    serve_agent,
    settings_for_tests,
)
from tests.support.agents.state import STOCK_KEY, build_state_agent
from tests.support.agents.transfer import root_agent as transfer_agent
from tests.support.rig import InProcessSocket, stored_state
from tests.support.table_chat import TRANSPORTS, TableChat

EVERY_TRANSPORT = pytest.mark.parametrize("transport", TRANSPORTS)
WELCOME = {"ui:welcome": True}  # what the state agent's callback writes on the chat's first run


@pytest.fixture
def serve(transport: str, tmp_path: Path) -> Iterator[Callable[..., tuple[TableChat, AgentClient]]]:
    """``serve(agent, **settings)``: a chat with the agent on the test's transport, and the
    app's client; the chats are stored in SQLite under ``tmp_path``."""
    with ExitStack() as stack:

        def start(agent: LlmAgent, **settings: Any) -> tuple[TableChat, AgentClient]:
            store = f"sqlite:///{tmp_path / 'sessions.db'}"
            app_settings = settings_for_tests(session_store=store, **settings)
            client = stack.enter_context(serve_agent(agent, app_settings))
            chat = TableChat(client.http, transport)
            stack.callback(chat.close)
            return chat, client

        yield start


def state_parts(response: ChatResponse) -> list[dict[str, Any]]:
    return response.of_type("data-state")


def message_state(message: dict[str, Any]) -> list[Any]:
    """The data of each `data-state` part of a message the page holds."""
    return [p["data"] for p in message["parts"] if p["type"] == "data-state"]


def recorded(chat: TableChat, part_type: str) -> list[dict[str, Any]]:
    """The parts of a type in the chat's last message, as `GET /chats/{chatId}` gives it."""
    response = chat.http.get(f"/chats/{chat.chat_id}")
    assert response.status_code == 200, response.text
    last = response.json()["messages"][-1]
    return [p for p in last["parts"] if p["type"] == part_type]


def shared_state_of(tmp_path: Path, chat_id: str) -> dict[str, Any]:
    return stored_state(SimpleNamespace(db_path=tmp_path / "sessions.db"), chat_id)  # type: ignore[arg-type]


# -- shared state: from the agent to the page --------------------------------------------------


@EVERY_TRANSPORT
def test_keys_under_the_prefix_reach_the_page_as_one_data_state_part(
    serve: Callable[..., tuple[TableChat, AgentClient]],
) -> None:
    chat, _ = serve(build_state_agent())
    added = chat.send("add a lamp")
    # The callback's write, then the tool's: each a `data-state` with every shared key.
    assert state_parts(added) == [
        {"type": "data-state", "id": "state", "data": WELCOME},
        {"type": "data-state", "id": "state", "data": {**WELCOME, "ui:cart": ["lamp"]}},
    ]
    assert STOCK_KEY not in added.body, "a key outside the prefix reached the page"
    # The tool's part comes after its result; the page's message holds one part, updated.
    types = added.types()
    assert types.index("tool-output-available") < len(types) - types[::-1].index("data-state")
    assert message_state(chat.messages[-1]) == [{**WELCOME, "ui:cart": ["lamp"]}]

    again = chat.send("add another")
    assert state_parts(again) == [
        {"type": "data-state", "id": "state", "data": {**WELCOME, "ui:cart": ["lamp", "lamp"]}}
    ]
    # A response that changes no shared key sends none.
    assert state_parts(chat.send("thanks")) == []


@EVERY_TRANSPORT
def test_an_agent_with_nothing_under_the_prefix_sends_no_state(
    serve: Callable[..., tuple[TableChat, AgentClient]],
) -> None:
    chat, _ = serve(transfer_agent)
    assert state_parts(chat.send("What's the weather?")) == []


@EVERY_TRANSPORT
def test_the_demo_agent_shares_its_wallet_after_a_payment(
    serve: Callable[..., tuple[TableChat, AgentClient]],
) -> None:
    chat, _ = serve(build_demo_agent("offline-demo"))
    asked = chat.send("Send 50 dollars to Hanako")
    assert state_parts(asked) == []  # nothing changed while the payment waits
    paid = chat.approve(True)
    assert state_parts(paid) == [
        {"type": "data-state", "id": "state", "data": {"ui:wallet": {"balance": 950.0}}}
    ]
    assert "demo:wallet_balance" not in paid.body  # the balance the agent trusts is its own
    assert message_state(chat.messages[-1]) == [{"ui:wallet": {"balance": 950.0}}]


# -- shared state: from the page to the agent --------------------------------------------------


@EVERY_TRANSPORT
def test_the_pages_state_is_stored_before_the_model_runs_and_sent_back(
    serve: Callable[..., tuple[TableChat, AgentClient]], tmp_path: Path
) -> None:
    chat, _ = serve(build_state_agent())
    chat.body = {"state": {"ui:theme": "dark"}}
    answer = chat.send("which theme?")
    # The tool the model called reads what the page sent with the same request.
    assert [c["output"] for c in answer.of_type("tool-output-available")] == [{"theme": "dark"}]
    # Sent as the response starts (on /live?chatId= with the welcome the run's callback may
    # have written as the socket opened).
    assert answer.types().index("data-state") == 1
    assert state_parts(answer)[0]["data"]["ui:theme"] == "dark"
    assert message_state(chat.messages[-1]) == [{"ui:theme": "dark", **WELCOME}]
    chat.close()  # /live?chatId= holds the chat while its socket is open
    assert shared_state_of(tmp_path, chat.chat_id)["ui:theme"] == "dark"

    # Sent again unchanged, it changes nothing: no part. `null` removes a key.
    chat.body = {"state": {"ui:theme": "dark"}}
    assert state_parts(chat.send("which theme now?")) == []
    chat.body = {"state": {"ui:theme": None}}
    cleared = chat.send("and now, which theme?")
    assert [c["output"] for c in cleared.of_type("tool-output-available")] == [{"theme": None}]
    assert [p["data"] for p in state_parts(cleared)] == [WELCOME]


@EVERY_TRANSPORT
def test_the_pages_state_rides_on_an_approval_and_the_continuation_updates_the_part(
    serve: Callable[..., tuple[TableChat, AgentClient]],
) -> None:
    chat, _ = serve(build_state_agent())
    chat.send("add a lamp")
    asked = chat.send("checkout")
    assert state_parts(asked) == []
    chat.body = {"state": {"ui:note": "a gift"}}
    done = chat.approve(True)
    # The checkout, approved, reads the note the approving request carried.
    (order,) = [c["output"] for c in done.of_type("tool-output-available")]
    assert order == {"items": ["lamp"], "note": "a gift"}
    final = {**WELCOME, "ui:cart": [], "ui:note": "a gift", "ui:orders": 1}
    assert [p["data"] for p in state_parts(done)] == [
        {**WELCOME, "ui:cart": ["lamp"], "ui:note": "a gift"},
        final,
    ]
    # One part in the continued message, as the client updates it in place; the chat's
    # record holds the same.
    assert message_state(chat.messages[-1]) == [final]
    assert recorded(chat, "data-state") == [{"type": "data-state", "id": "state", "data": final}]


@EVERY_TRANSPORT
def test_a_regenerate_or_an_edit_sends_the_state_its_rewind_gave_back(
    serve: Callable[..., tuple[TableChat, AgentClient]],
) -> None:
    chat, _ = serve(build_state_agent())
    chat.send("add a lamp")
    chat.send("add another")
    # Regenerate the last answer: the rewind takes the second lamp out, the run puts it back.
    again = chat.regenerate()
    assert [p["data"] for p in state_parts(again)] == [
        {**WELCOME, "ui:cart": ["lamp"]},
        {**WELCOME, "ui:cart": ["lamp", "lamp"]},
    ]
    # Edit the first message: back to before it (nothing shared), then its new answer. On
    # /live?chatId= the run starts again on the rewound chat, and its callback's welcome is
    # back before the response opens: the page gets the state once.
    edited = chat.edit(0, "thanks")
    sent = [p["data"] for p in state_parts(edited)]
    assert sent == ([WELCOME] if chat.transport == "live" else [{}, WELCOME])
    assert message_state(chat.messages[-1]) == [WELCOME]


# -- shared state: what the page may not write ---------------------------------------------------


def refusal(chat: TableChat, extra: dict[str, Any]) -> str:
    """Send "which theme?" with ``extra`` in the request's body, on the chat's transport, and
    return how it was refused: the status and detail of `/stream`, the `error` of a socket."""
    parts = [{"type": "text", "text": "which theme?"}]
    message = {"id": f"bad-{uuid.uuid4().hex[:6]}", "role": "user", "parts": parts}
    body = {"id": chat.chat_id, "messages": [*chat.messages, message], "trigger": "submit-message"}
    if chat.transport == "stream":
        response = chat.http.post("/stream", json=extra | body)
        return f"{response.status_code} {response.json()['detail']}"
    socket: InProcessSocket = chat._connect()
    if chat.transport == "ai7":
        request_id = uuid.uuid4().hex[:16]
        frame = {"type": "send", "requestId": request_id, "headers": {}, "body": extra}
        socket.send(json.dumps(frame | body))
        frame = json.loads(socket.recv(10))
        assert frame["type"] == "error" and frame["requestId"] == request_id, frame
        return str(frame["errorText"])
    socket.send(json.dumps({"type": "message", "version": "1", **extra, **body}))
    first = json.loads(socket.recv(10).removeprefix("data: "))
    assert socket.recv(10) == "data: [DONE]\n\n"
    assert first["type"] == "error", first
    return str(first["errorText"])


BAD_STATE: list[tuple[dict[str, Any], str, str]] = [
    ({"state": {"theme": "light"}}, "422", "may only change keys named ui:<name>, not 'theme'"),
    ({"state": {"ui:": 1}}, "422", "not 'ui:'"),
    ({"state": {"app:ui:theme": "light"}}, "422", "not 'app:ui:theme'"),
    ({"state": ["ui:theme"]}, "422", "state: Input should be a valid dictionary"),
    ({"state": {f"ui:k{n}": n for n in range(65)}}, "413", "changes 65 keys; the limit is 64"),
    ({"state": {"ui:big": "x" * 70_000}}, "413", "is 70013 bytes of JSON; the limit is 65536"),
]  # fmt: skip


@EVERY_TRANSPORT
def test_state_outside_the_prefix_or_the_limits_is_refused_and_the_chat_is_untouched(
    serve: Callable[..., tuple[TableChat, AgentClient]], tmp_path: Path
) -> None:
    chat, _ = serve(build_state_agent())
    chat.body = {"state": {"ui:theme": "dark"}}
    chat.send("add a lamp")
    for extra, status, reason in BAD_STATE:
        refused = refusal(chat, extra)
        assert reason in refused, (extra, refused)
        if chat.transport == "stream":
            assert refused.startswith(status), refused
    # The chat goes on as if the refused requests had never come: same state, same history.
    answer = chat.send("which theme?")
    assert [c["output"] for c in answer.of_type("tool-output-available")] == [{"theme": "dark"}]
    assert answer.errors == []
    chat.close()
    stored = shared_state_of(tmp_path, chat.chat_id)
    assert {k: v for k, v in stored.items() if k.startswith("ui:")} == {
        "ui:theme": "dark",
        **WELCOME,
        "ui:cart": ["lamp"],
    }
    assert "theme" not in stored and "app:ui:theme" not in stored


@EVERY_TRANSPORT
def test_an_empty_prefix_shares_nothing_and_refuses_state(
    serve: Callable[..., tuple[TableChat, AgentClient]],
) -> None:
    chat, _ = serve(build_state_agent(), shared_state_prefix="")
    added = chat.send("add a lamp")
    assert state_parts(added) == [] and added.errors == []
    refused = refusal(chat, {"state": {"ui:theme": "dark"}})
    assert "this server shares no state with the page" in refused, refused
    chat.body = {"state": {}}  # no change at all: answered
    assert chat.send("which theme?").errors == []


def test_the_prefix_is_a_setting_that_no_page_may_point_at_shared_or_unstored_keys() -> None:
    assert Settings(_env_file=None).shared_state_prefix == "ui:"
    for prefix in ("app:ui:", "temp:ui:"):
        with pytest.raises(ValidationError, match="cannot be shared with the page"):
            Settings(shared_state_prefix=prefix)
    limits = RequestLimits.from_settings(Settings(shared_state_prefix="page:", max_state_keys=2))
    assert (limits.state_prefix, limits.max_state_keys) == ("page:", 2)


# -- who answered ------------------------------------------------------------------------------


@EVERY_TRANSPORT
def test_each_agents_first_part_is_marked_with_its_name(
    serve: Callable[..., tuple[TableChat, AgentClient]],
) -> None:
    chat, _ = serve(transfer_agent)
    first = chat.send("What's the weather?")
    agents = [c for c in first.chunks if c["type"] == "data-agent"]
    assert agents == [
        {"type": "data-agent", "data": {"name": "front_desk"}},
        {"type": "data-agent", "data": {"name": "forecaster"}},
    ]
    # Each right after its step starts, before the agent's first part.
    for index, chunk in enumerate(first.chunks):
        if chunk["type"] == "data-agent":
            assert first.chunks[index - 1]["type"] == "start-step", first.types()
    parts = [p["type"] for p in chat.messages[-1]["parts"]]
    assert parts == [
        "step-start", "data-agent", "tool-lookup",
        "step-start", "tool-transfer_to_agent",
        "step-start", "data-agent", "tool-lookup",
        "step-start", "text",
    ]  # fmt: skip
    assert recorded(chat, "data-agent") == [
        {"type": "data-agent", "data": {"name": "front_desk"}},
        {"type": "data-agent", "data": {"name": "forecaster"}},
    ]
    # The next message goes to the agent that answered last: its response names it first.
    second = chat.send("And the weather tomorrow?")
    assert [c["data"] for c in second.of_type("data-agent")] == [{"name": "forecaster"}]


@EVERY_TRANSPORT
def test_an_app_of_one_agent_is_sent_no_authors(
    serve: Callable[..., tuple[TableChat, AgentClient]],
) -> None:
    chat, _ = serve(LlmAgent(name="solo", model=ScriptedLlm(script={"": ["Hi."]})))
    assert chat.send("hello").of_type("data-agent") == []
