"""A tool's start mark (docs/adr/0032) is written whole even when a stop cancels the run in
the middle of writing it: the run's session object stays current, so ADK's seal of the
aborted run is stored, not refused as stale (a stop that ended in an `error`, seen under load
on both `/live` transports). The real SQLite session service."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from google.adk.errors import StaleSessionError
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from adk_stream_protocol.plugins.tool_starts import append_whole

# When the stop comes, in seconds after the append began: from before the write to well after
# it (an append takes a few milliseconds, more on a busy machine), in steps finer than the
# store's own awaits (its commit runs in a thread).
CANCEL_POINTS = [i * 0.0001 for i in range(100)]


async def _stop_while_appending(
    service: BaseSessionService, session: Session, append: object, after: float
) -> None:
    assert callable(append)
    writing = asyncio.ensure_future(append(service, session, Event(author="agent")))
    await asyncio.sleep(after)
    writing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await writing
    # The aborted run's seal, on the same session object, as ADK appends it.
    await service.append_event(session, Event(author="agent", error_code="INVOCATION_ABORTED"))


async def _stale_seals(tmp_path: Path, append: object) -> list[float]:
    service = SqliteSessionService(str(tmp_path / "chats.db"))
    # On a busy machine an append takes longer: points across three of its durations too.
    timed = await service.create_session(app_name="app", user_id="u")
    await service.append_event(timed, Event(author="agent"))  # the connection is warm
    started = time.perf_counter()
    await service.append_event(timed, Event(author="agent"))
    took = time.perf_counter() - started
    stale: list[float] = []
    for after in [*CANCEL_POINTS, *(took * i / 10 for i in range(30))]:
        session = await service.create_session(app_name="app", user_id="u")
        try:
            await _stop_while_appending(service, session, append, after)
        except StaleSessionError:
            stale.append(after)
    return stale


async def _plain_append(service: BaseSessionService, session: Session, event: Event) -> None:
    await service.append_event(session, event)


def test_a_plain_append_cut_by_a_stop_leaves_the_session_stale(tmp_path: Path) -> None:
    """The failure the mark's writing guards against, with ADK's append alone."""
    assert asyncio.run(_stale_seals(tmp_path, _plain_append)), "no cancel point hit the write"


def test_the_start_mark_is_written_whole_whatever_the_stop_cuts(tmp_path: Path) -> None:
    assert asyncio.run(_stale_seals(tmp_path, append_whole)) == []
