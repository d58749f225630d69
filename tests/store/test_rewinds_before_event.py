"""``store.rewinds``: a rewind to before one event, also in the middle of an invocation
(a ``/live`` socket's turns share one), on every store the server supports (docs/adr/0046)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import pytest_asyncio
from google.adk.agents import LlmAgent
from google.adk.artifacts import InMemoryArtifactService
from google.adk.events import Event, EventActions
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, Session
from google.genai import types

from adk_stream_protocol.store.history import (
    CARRIED_STAMPS_KEY,
    USER_MESSAGE_ID_KEY,
    carry_stamps,
    find_user_turn,
    live_events,
)
from adk_stream_protocol.store.rewinds import rewind_before_event
from adk_stream_protocol.store.sessions import FENCE_KEY

APP = "event-rewinds"


class Chat:
    """One session, with helpers that append the events a run would."""

    def __init__(self, service: BaseSessionService, chat: str) -> None:
        self.service = service
        self.chat = chat
        self.artifacts = InMemoryArtifactService()
        self.runner = Runner(
            app_name=APP,
            agent=LlmAgent(name="unused"),
            session_service=service,
            artifact_service=self.artifacts,
        )

    async def stored(self) -> Session:
        session = await self.service.get_session(
            app_name=APP, user_id=self.chat, session_id=self.chat
        )
        assert session is not None
        return session

    async def add(
        self,
        invocation: str,
        *,
        text: str | None = None,
        metadata: dict[str, Any] | None = None,
        **actions: Any,
    ) -> Event:
        """An agent's event (or the user's message, with ``text``) in ``invocation``."""
        event = Event(
            author="user" if text is not None else "agent",
            invocation_id=invocation,
            content=types.Content(role="user", parts=[types.Part(text=text)]) if text else None,
            custom_metadata={USER_MESSAGE_ID_KEY: text} if text else metadata,
            actions=EventActions(**actions),
        )
        return await self.service.append_event(await self.stored(), event)

    async def save(self, filename: str, data: bytes) -> int:
        return await self.artifacts.save_artifact(
            app_name=APP,
            user_id=self.chat,
            session_id=self.chat,
            filename=filename,
            artifact=types.Part.from_bytes(data=data, mime_type="text/plain"),
        )

    async def load(self, filename: str) -> bytes | None:
        part = await self.artifacts.load_artifact(
            app_name=APP, user_id=self.chat, session_id=self.chat, filename=filename
        )
        return part.inline_data.data if part is not None and part.inline_data else None

    async def rewind_before(self, event: Event) -> None:
        await rewind_before_event(
            self.runner, self.service, await self.stored(), event.id, artifacts=self.artifacts
        )

    async def user_texts(self) -> list[str]:
        events = live_events((await self.stored()).events)
        return [
            "".join(p.text or "" for p in e.content.parts or [])
            for e in events
            if e.author == "user" and e.content is not None
        ]


@pytest_asyncio.fixture
async def chat(service: BaseSessionService, request: pytest.FixtureRequest) -> Chat:
    name = f"{request.node.originalname}-{request.node.callspec.id}-{uuid.uuid4().hex[:8]}"
    # A user of its own per chat: user: state is shared by a user's chats in one store.
    await service.create_session(app_name=APP, user_id=name, session_id=name)
    return Chat(service, name)


@pytest.mark.asyncio
async def test_a_rewind_inside_an_invocation_keeps_what_came_before_the_event(chat: Chat) -> None:
    await chat.add("stream-1", text="first", state_delta={"wallet": 1000})
    # One live run: state written as it starts, then two messages and their turns.
    await chat.add("live-1", state_delta={"turns": 1})
    await chat.add("live-1", text="second", state_delta={"wallet": 950, "cart": ["tea"]})
    await chat.add("live-1", artifact_delta={"note.txt": await chat.save("note.txt", b"v0")})
    await chat.add("live-1", state_delta={"seen": True})
    await chat.add("fence-2", metadata={FENCE_KEY: 2})  # a take-over: not copied
    third = await chat.add("live-1", text="third", state_delta={"wallet": 900, "cart": None})
    await chat.add("live-1", artifact_delta={"note.txt": await chat.save("note.txt", b"v1")})
    await chat.add("live-1", state_delta={"late": 1})
    before = dict((await chat.stored()).state)

    await chat.rewind_before(third)

    after = await chat.stored()
    assert await chat.user_texts() == ["first", "second"]
    # The state and the artifact are those from just before the third message.
    assert after.state == {"wallet": 950, "cart": ["tea"], "turns": 1, "seen": True}
    assert before["wallet"] == 900 and "late" in before
    assert await chat.load("note.txt") == b"v0"
    # The events before it are copies: new ids, the same invocation, in their order.
    kept = live_events(after.events)
    assert [e.invocation_id for e in kept] == ["stream-1"] + ["live-1"] * 4
    assert not any(FENCE_KEY in (e.custom_metadata or {}) for e in kept)
    original = {e.id for e in before_events(after)}
    assert all(e.id not in original for e in kept[1:])
    second = find_user_turn(kept, "second")
    assert second is not None and second.id not in original

    # A rewind to one of the copies: what came before it in the run stays, once more.
    await chat.rewind_before(second)
    assert await chat.user_texts() == ["first"]
    assert (await chat.stored()).state == {"wallet": 1000, "turns": 1}


def before_events(session: Session) -> list[Event]:
    """The events up to the first rewind event."""
    events = session.events
    cut = next(i for i, e in enumerate(events) if e.actions.rewind_before_invocation_id)
    return events[:cut]


@pytest.mark.asyncio
async def test_a_rewind_to_the_first_event_of_an_invocation_is_adks_own(chat: Chat) -> None:
    await chat.add("inv-1", text="first", state_delta={"a": 1})
    second = await chat.add("inv-2", text="second", state_delta={"a": 2, "b": 1})
    await chat.rewind_before(second)
    after = await chat.stored()
    assert await chat.user_texts() == ["first"]
    assert after.state == {"a": 1}
    # Nothing appended after ADK's rewind event.
    assert after.events[-1].actions.rewind_before_invocation_id == "inv-2"


def test_stamps_carried_in_a_state_delta_move_to_the_events_metadata() -> None:
    event = Event(
        author="user",
        invocation_id="live-1",
        custom_metadata={"kept": 1},
        actions=EventActions(state_delta={CARRIED_STAMPS_KEY: {USER_MESSAGE_ID_KEY: "u1"}, "x": 2}),
    )
    carry_stamps(event)
    assert event.custom_metadata == {"kept": 1, USER_MESSAGE_ID_KEY: "u1"}
    assert event.actions.state_delta == {"x": 2}
