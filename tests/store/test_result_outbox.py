"""``ResultOutbox`` (docs/adr/0035-kept-results.md): which appends it keeps, the later write,
giving up. The store is ADK's in-memory one, made to fail as a stopped PostgreSQL does."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from google.adk.events import Event, EventActions
from google.adk.sessions import InMemorySessionService, Session
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from adk_stream_protocol.foundation.outages import Outages
from adk_stream_protocol.store.result_outbox import ResultKept, ResultOutbox, kept_in
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
