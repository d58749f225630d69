"""``store.rewinds``: after a rewind the stored state is the state before the rewound
invocation, on every store the server supports (docs/adr/0036)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors import StaleSessionError
from google.adk.events import Event, EventActions
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, Session

from adk_stream_protocol.store.rewinds import keys_left_none, remove_state_keys, rewind
from adk_stream_protocol.store.sessions import create_session_service

APP = "rewinds"


def runner_on(service: BaseSessionService) -> Runner:
    return Runner(app_name=APP, agent=LlmAgent(name="unused"), session_service=service)


async def add(
    service: BaseSessionService, session: Session, invocation: str, delta: dict[str, Any]
) -> None:
    event = Event(author="agent", invocation_id=invocation, actions=EventActions(state_delta=delta))
    await service.append_event(session, event)


async def new_session(service: BaseSessionService, chat: str) -> Session:
    # A user of its own per chat: user: state is shared by a user's chats in one store.
    return await service.create_session(app_name=APP, user_id=chat, session_id=chat)


async def stored(service: BaseSessionService, chat: str) -> Session:
    session = await service.get_session(app_name=APP, user_id=chat, session_id=chat)
    assert session is not None
    return session


@pytest.mark.asyncio
async def test_a_rewind_gives_back_the_state_before_the_invocation(
    service: BaseSessionService, request: pytest.FixtureRequest
) -> None:
    chat = f"chat-{request.node.callspec.id}"
    session = await new_session(service, chat)
    await add(service, session, "inv-1", {"calls": 1, "kept_none": None, "user:name": "Ann"})
    before = dict((await stored(service, chat)).state)
    await add(service, session, "inv-2", {"calls": 2, "cart": ["apple"], "kept_none": 3})
    await add(service, session, "inv-2", {"notes": {"a": 1}, "user:seen": True})

    await rewind(runner_on(service), service, await stored(service, chat), "inv-2")

    after = await stored(service, chat)
    # Added keys gone, changed keys back, a None the agent wrote still there; user: state is
    # not rewound (ADK keeps it: it is shared with the user's other chats).
    assert after.state == {**before, "user:seen": True}
    assert after.state["kept_none"] is None and "cart" not in after.state
    # The history is ADK's own: its rewind event last, nothing after it.
    assert after.events[-1].actions.rewind_before_invocation_id == "inv-2"
    assert len(after.events) == 4

    # A second rewind, past the first one's, starts from the state before inv-1.
    await add(service, after, "inv-3", {"cart": ["pear"]})
    await rewind(runner_on(service), service, await stored(service, chat), "inv-1")
    assert (await stored(service, chat)).state == {"user:name": "Ann", "user:seen": True}


@pytest.mark.asyncio
async def test_the_removal_is_refused_once_the_session_moved_on(
    service: BaseSessionService, request: pytest.FixtureRequest
) -> None:
    chat = f"moved-{request.node.callspec.id}"
    session = await new_session(service, chat)
    await add(service, session, "inv-1", {"cart": ["apple"]})
    await runner_on(service).rewind_async(
        user_id=chat, session_id=chat, rewind_before_invocation_id="inv-1"
    )
    read = await stored(service, chat)
    assert keys_left_none(read.events, read.state) == ["cart"]
    # Another writer (a fence, docs/adr/0034) appends after our read.
    await add(service, await stored(service, chat), "fence-2", {})
    with pytest.raises(StaleSessionError):
        await remove_state_keys(service, read, ["cart"])
    assert (await stored(service, chat)).state == {"cart": None}


@pytest.mark.asyncio
async def test_adk_alone_still_leaves_none_for_added_keys(tmp_path: Path) -> None:
    """The check that says when store/rewinds.py can go: once ADK's own rewind removes the
    keys the rewound events added, this fails. Then ``keys_left_none`` finds nothing, and
    the workaround, its ADR and this test can be removed (docs/adr/0036)."""
    service = create_session_service(f"sqlite:///{tmp_path / 'alone.db'}")
    session = await new_session(service, "alone")
    await add(service, session, "inv-1", {"cart": ["apple"]})
    await runner_on(service).rewind_async(
        user_id="alone", session_id="alone", rewind_before_invocation_id="inv-1"
    )
    assert (await stored(service, "alone")).state == {"cart": None}, (
        "ADK's rewind no longer leaves None: the workaround of docs/adr/0036 can go"
    )
