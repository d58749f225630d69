"""``ResultOutbox`` (docs/adr/0035-kept-results.md): which appends it keeps, the later write,
giving up, and the hand-off of a result to the chat's holder when another has the chat
(docs/adr/0073). The store is ADK's in-memory one, made to fail as a stopped PostgreSQL does;
the stale-session refusal is SQLite's own."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from google.adk.errors import StaleSessionError
from google.adk.events import Event, EventActions
from google.adk.sessions import InMemorySessionService, Session
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from adk_stream_protocol.foundation.outages import Outages
from adk_stream_protocol.store.chat_index import InMemoryChatIndex
from adk_stream_protocol.store.chat_tables import create_chat_index
from adk_stream_protocol.store.result_outbox import ResultKept, ResultOutbox, kept_in
from adk_stream_protocol.store.sessions import FENCE_KEY, ChatSessions, create_session_service
from tests.support.waiting import until

APP, USER, CHAT = "app", "u", "c1"


class FlakyStore(InMemorySessionService):
    """Refuses connections while ``down``; ``refused`` counts the refusals."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.refused = 0

    def _check(self) -> None:
        if self.down:
            self.refused += 1
            raise ConnectionRefusedError(111, "Connect call failed")

    async def append_event(self, session: Session, event: Event) -> Event:
        self._check()
        return await super().append_event(session, event)

    async def get_session(self, **kwargs: Any) -> Session | None:
        self._check()
        return await super().get_session(**kwargs)


def result(call_id: str = "call-1", *, author: str = "payer", placeholder: bool = False) -> Event:
    actions = EventActions()
    if placeholder:
        actions.requested_tool_confirmations = {call_id: ToolConfirmation(hint="ok?")}
    part = types.Part(
        function_response=types.FunctionResponse(id=call_id, name="pay", response={"paid": 10})
    )
    return Event(
        author=author,
        invocation_id="inv-1",
        content=types.Content(role="user", parts=[part]),
        actions=actions,
    )


async def setup(retry_seconds: float = 5.0) -> tuple[FlakyStore, ResultOutbox, Session]:
    store = FlakyStore()
    outbox = ResultOutbox(store, Outages(), retry_seconds=retry_seconds)
    session = await outbox.create_session(app_name=APP, user_id=USER, session_id=CHAT)
    return store, outbox, session


async def stored(store: FlakyStore) -> list[Event]:
    session = await store.get_session(app_name=APP, user_id=USER, session_id=CHAT)
    assert session is not None
    return session.events


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "event", [result(placeholder=True), result(author="user"), Event(author="payer")]
)
async def test_only_a_real_tool_result_is_kept(event: Event) -> None:
    store, outbox, session = await setup()
    store.down = True
    with pytest.raises(ConnectionRefusedError):
        await outbox.append_event(session, event)
    assert not outbox.holds((USER, CHAT))


@pytest.mark.asyncio
async def test_a_kept_result_is_written_once_the_store_is_back() -> None:
    store, outbox, session = await setup()
    store.down = True
    event = result()
    with pytest.raises(ResultKept) as raised:
        await outbox.append_event(session, event)
    assert kept_in(raised.value) is raised.value
    assert isinstance(raised.value.__cause__, ConnectionRefusedError)
    assert outbox.holds((USER, CHAT))
    await until(lambda: store.refused >= 2, "the outbox tried again while the store is down")
    store.down = False
    await asyncio.wait_for(outbox.settled((USER, CHAT), asyncio.Event()), 5)
    assert not outbox.holds((USER, CHAT))
    assert [e.id for e in await stored(store)] == [event.id]


@pytest.mark.asyncio
async def test_a_result_the_store_did_not_take_in_time_is_given_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, outbox, session = await setup(retry_seconds=0.5)
    store.down = True
    with pytest.raises(ResultKept):
        await outbox.append_event(session, result())
    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(outbox.settled((USER, CHAT), asyncio.Event()), 5)
    (line,) = [r.getMessage() for r in caplog.records if "not saved" in r.getMessage()]
    assert f"chat={CHAT}" in line and "call=call-1" in line and "paid" not in line
    store.down = False
    assert await stored(store) == []


@pytest.mark.asyncio
async def test_a_lapsed_lease_gives_the_result_up() -> None:
    store, outbox, session = await setup()
    store.down = True
    with pytest.raises(ResultKept):
        await outbox.append_event(session, result())
    lost = asyncio.Event()
    lost.set()
    await outbox.settled((USER, CHAT), lost)
    store.down = False
    # Its writer wakes for its next try, finds the lease lapsed and lets the chat go.
    await until(lambda: not outbox.holds((USER, CHAT)), "the outbox let the chat go")
    assert await stored(store) == []
    assert not outbox.holds((USER, CHAT))


@pytest.mark.asyncio
async def test_a_result_given_up_for_another_holder_is_handed_to_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, outbox, session = await setup()
    late = InMemoryChatIndex()
    outbox.hand_off_to(late)
    store.down = True
    with pytest.raises(ResultKept):
        await outbox.append_event(session, result())
    # The store comes back and another holder takes the chat: it fences this one off.
    store.down = False
    fresh = await store.get_session(app_name=APP, user_id=USER, session_id=CHAT)
    assert fresh is not None
    await store.append_event(fresh, Event(author=APP, custom_metadata={FENCE_KEY: 2}))
    with caplog.at_level(logging.WARNING):
        await until(lambda: not outbox.holds((USER, CHAT)), "the outbox let the chat go")
    # Not written to the session: handed to the holder, in the call's agent's name.
    assert [e for e in await stored(store) if e.content] == []
    (handed,) = await late.late_results(APP, USER, CHAT)
    assert (handed.call_id, handed.tool_name, handed.response) == ("call-1", "pay", {"paid": 10})
    assert (handed.author, handed.invocation_id) == ("payer", "inv-1")
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "late result handed to the chat's holder" in line
    assert f"chat={CHAT}" in line and "call=call-1" in line and "paid" not in line


@pytest.mark.asyncio
async def test_a_lapsed_lease_hands_the_result_to_the_next_holder() -> None:
    store, outbox, session = await setup()
    late = InMemoryChatIndex()
    outbox.hand_off_to(late)
    store.down = True
    with pytest.raises(ResultKept):
        await outbox.append_event(session, result())
    lost = asyncio.Event()
    lost.set()
    await outbox.settled((USER, CHAT), lost)
    store.down = False
    await until(lambda: not outbox.holds((USER, CHAT)), "the outbox let the chat go")
    assert [late.call_id for late in await late.late_results(APP, USER, CHAT)] == ["call-1"]


@pytest.mark.asyncio
async def test_a_result_refused_as_stale_is_handed_off_not_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    outbox = ResultOutbox(create_session_service(url), Outages())
    index = create_chat_index(url, outbox)
    await index.prepare()
    outbox.hand_off_to(index)
    sessions = ChatSessions(outbox, APP)
    stalled = await sessions.open(USER, CHAT)  # the run that will lose the chat
    await sessions.fence(USER, CHAT, 2)  # the next holder took it over
    with caplog.at_level(logging.WARNING), pytest.raises(StaleSessionError):
        await outbox.append_event(stalled, result())
    fresh = await sessions.open(USER, CHAT)
    assert [e for e in fresh.events if e.content] == []  # fencing holds
    (handed,) = await index.late_results(APP, USER, CHAT)
    assert (handed.call_id, handed.response, handed.author) == ("call-1", {"paid": 10}, "payer")
    (line,) = [r.getMessage() for r in caplog.records if "late result" in r.getMessage()]
    assert "handed to the chat's holder" in line and "call=call-1" in line
    # The same result handed off again (a retried write) keeps the first.
    await index.keep_late_result(APP, USER, CHAT, handed)
    assert len(await index.late_results(APP, USER, CHAT)) == 1
    await index.drop_late_result(APP, USER, CHAT, "call-1")
    assert await index.late_results(APP, USER, CHAT) == []
    await index.close()


@pytest.mark.asyncio
async def test_a_hand_off_the_store_cannot_take_is_logged_as_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    outbox = ResultOutbox(create_session_service(url), Outages())
    index = create_chat_index(url, outbox)  # its table never made: every write fails
    outbox.hand_off_to(index)
    sessions = ChatSessions(outbox, APP)
    stalled = await sessions.open(USER, CHAT)
    await sessions.fence(USER, CHAT, 2)
    with caplog.at_level(logging.WARNING), pytest.raises(StaleSessionError):
        await outbox.append_event(stalled, result())
    (line,) = [r.getMessage() for r in caplog.records if "late result" in r.getMessage()]
    assert "late result lost" in line and f"chat={CHAT}" in line and "call=call-1" in line
    assert "paid" not in line
    await index.close()
