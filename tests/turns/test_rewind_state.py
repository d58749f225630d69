"""Regenerate and an edited user message rewind the chat, and its state with it (docs/adr/0036).

ADK's ``Runner.rewind_async`` sets a key the rewound events added to ``None`` instead of
removing it; agents that test ``if key not in state`` then fail on the next run. Through the
real app, with an agent shaped like the real samples (a cart tool and a rate-limit callback),
on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.tools.tool_context import ToolContext

from adk_stream_protocol.server.app import create_app
from adk_stream_protocol.store.sessions import create_session_service
from adk_stream_protocol.testing import ScriptedLlm, call
from adk_stream_protocol.turns.bridge import bridge_of
from tests.support.rig import (
    InProcessApp,
    StreamResult,
    app_settings,
    assistant_message,
    chat_body,
    post_stream,
    user_message,
)


def add_to_cart(item: str, tool_context: ToolContext) -> dict[str, Any]:
    """Put an item in the cart, as the samples' shopping tools do."""
    if "cart" not in tool_context.state:
        tool_context.state["cart"] = []
    cart = tool_context.state["cart"]
    cart.append(item)  # AttributeError on None: the key is there, its value is not a list
    tool_context.state["cart"] = cart
    return {"cart": list(cart)}


def count_model_calls(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
    """A rate limiter's counter, as the samples keep it: TypeError on None."""
    state = callback_context.state
    state["calls"] = state.get("calls", 0) + 1


def shop_agent() -> LlmAgent:
    model = ScriptedLlm(
        script={
            "hello": ["Hello."],
            "apple": [call("add_to_cart", item="apple"), "Added an apple."],
            "pear": [call("add_to_cart", item="pear"), "Added a pear."],
        }
    )
    return LlmAgent(
        name="shop",
        model=model,
        tools=[add_to_cart],
        before_model_callback=count_model_calls,
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.out_of_process)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def shop(tmp_path: Path, store_url: str) -> Iterator[InProcessApp]:
    app = create_app(shop_agent(), settings=app_settings(tmp_path, session_store=store_url))
    with TestClient(app, base_url="http://localhost") as client:
        yield InProcessApp(app, tmp_path / "sessions.db", client)


def stored_state(target: InProcessApp, store_url: str, chat_id: str) -> dict[str, Any]:
    """The chat's session state, read from the store by a service of its own."""
    app_name = bridge_of(target.app.state).sessions.app_name

    async def read() -> dict[str, Any]:
        service = create_session_service(store_url)
        try:
            session = await service.get_session(
                app_name=app_name, user_id="local-user", session_id=chat_id
            )
            assert session is not None
            return dict(session.state)
        finally:
            close = getattr(service, "close", None)
            if close is not None:
                await close()

    return asyncio.run(read())


def assert_answered(result: StreamResult, text: str) -> None:
    errors = [c for c in result.chunks if c["type"] == "error"]
    assert result.status == 200 and not errors, errors
    assert text in result.text()


def test_regenerating_the_first_answer_starts_from_an_empty_state(
    shop: InProcessApp, store_url: str, request: pytest.FixtureRequest
) -> None:
    chat_id = f"regenerate-{request.node.callspec.id}"
    first = post_stream(shop, chat_body(chat_id, user_message("an apple, please", "u1")))
    assert_answered(first, "Added an apple.")
    answered = stored_state(shop, store_url, chat_id)
    assert answered == {"cart": ["apple"], "calls": 2}

    again = post_stream(
        shop,
        {
            "id": chat_id,
            "messages": [user_message("an apple, please", "u1")],
            "trigger": "regenerate-message",
        },
    )
    assert_answered(again, "Added an apple.")
    # The same answer from the same state: not a cart of None, nor a count from None.
    assert stored_state(shop, store_url, chat_id) == answered


def test_editing_a_message_gives_back_the_state_before_it(
    shop: InProcessApp, store_url: str, request: pytest.FixtureRequest
) -> None:
    chat_id = f"edit-{request.node.callspec.id}"
    hello = post_stream(shop, chat_body(chat_id, user_message("hello", "u1")))
    assert_answered(hello, "Hello.")
    before = stored_state(shop, store_url, chat_id)
    assert before == {"calls": 1}

    history = [user_message("hello", "u1"), assistant_message(hello)]
    apple = post_stream(shop, chat_body(chat_id, *history, user_message("an apple", "u2")))
    assert_answered(apple, "Added an apple.")
    assert stored_state(shop, store_url, chat_id) == {"calls": 3, "cart": ["apple"]}

    edited = post_stream(
        shop, chat_body(chat_id, *history, user_message("a pear", "u2"), messageId="u2")
    )
    assert_answered(edited, "Added a pear.")
    # The cart the apple made is gone, not None, and the count went back to 1 first.
    assert stored_state(shop, store_url, chat_id) == {"calls": 3, "cart": ["pear"]}

    again = post_stream(
        shop,
        {
            "id": chat_id,
            "messages": [*history, user_message("a pear", "u2")],
            "trigger": "regenerate-message",
        },
    )
    assert_answered(again, "Added a pear.")
    assert stored_state(shop, store_url, chat_id) == {"calls": 3, "cart": ["pear"]}
