"""What a run loads of a compacted chat (``history_window``; docs/adr/0070): from the last
compaction's start on, with ADK's ``GetSessionConfig``; nothing is bounded before a
compaction. Read from a real chat: the real app and runner, ADK's compaction and a turn paused
at an approval (tests/support/agents/compaction.py), on SQLite."""

from __future__ import annotations

import time
from pathlib import Path

from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event, EventActions
from google.adk.events.event_actions import EventCompaction
from google.adk.plugins import BasePlugin
from google.genai import types

from adk_stream_protocol.foundation.identity import LOCAL_USER
from adk_stream_protocol.protocol.tool_calls import turn_calls
from adk_stream_protocol.store.history import current_turn
from adk_stream_protocol.store.history_window import window_of
from adk_stream_protocol.testing import serve_agent, settings_for_tests
from adk_stream_protocol.turns.bridge import bridge_of
from tests.support.agents.compaction import compacting_app
from tests.support.agents.samples import Ledger
from tests.support.table_chat import TableChat


def _text(event: Event) -> str:
    parts = event.content.parts if event.content is not None else None
    return "".join(p.text or "" for p in parts or [])


class LoadedEvents(BasePlugin):
    """How many events each run's session was loaded with, as ADK's runner loaded it."""

    def __init__(self) -> None:
        super().__init__(name="loaded_events")
        self.counts: list[int] = []

    async def before_run_callback(
        self, *, invocation_context: InvocationContext
    ) -> types.Content | None:
        self.counts.append(len(invocation_context.session.events))
        return None


def _compaction(start: float, end: float) -> Event:
    summary = types.Content(role="model", parts=[types.Part(text="summary")])
    return Event(
        author="user",
        invocation_id=Event.new_id(),
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=start, end_timestamp=end, compacted_content=summary
            )
        ),
        timestamp=end + 0.5,
    )


def test_a_compaction_of_the_whole_chat_is_loaded_from_its_end() -> None:
    """The first compaction of a long chat covers all of it: the run loads the summary and
    what follows it, not the range it replaced (benchmark 13's compacted chat)."""
    events = [
        Event(author="user", invocation_id=f"e-{n}", timestamp=1000.0 + n) for n in range(100)
    ]
    events.append(_compaction(1000.0, 1098.0))
    events.append(Event(author="user", invocation_id="e-new", timestamp=1100.0))
    window = window_of(events)
    assert window is not None and window.after_timestamp == 1098.0
    # A later summary whose range holds the first one's event: from that event on.
    events.append(_compaction(1097.0, 1100.0))
    window = window_of(events)
    assert window is not None and window.after_timestamp == 1098.5


def test_a_chat_never_compacted_is_loaded_whole() -> None:
    events = [
        Event(
            author="user",
            invocation_id=f"e-{n}",
            content=types.Content(role="user", parts=[types.Part(text=f"hello {n}")]),
            timestamp=time.time() + n,
        )
        for n in range(5)
    ]
    assert window_of(events) is None
    assert window_of([]) is None


def test_a_run_loads_from_the_last_compactions_start_with_the_turn_that_waits(
    tmp_path: Path,
) -> None:
    settings = settings_for_tests(session_store=f"sqlite:///{tmp_path / 'sessions.db'}")
    with serve_agent(compacting_app("sliding", Ledger()), settings) as client:
        chat = TableChat(client.http, "stream")
        for n in range(3):
            chat.send(f"weather {n}")
        chat.send("pay Hanako")  # paused at its approval; a compaction ran after it
        bridge = bridge_of(client.http.app.state)  # type: ignore[attr-defined]
        app_name = bridge.sessions.app_name
        cached = bridge.session_cache.cached_events(app_name, LOCAL_USER, chat.chat_id)
        assert cached is not None
        compactions = [e for e in cached if e.actions.compaction is not None]
        assert len(compactions) == 2
        first, latest = (c.actions.compaction for c in compactions)
        assert first is not None and latest is not None
        # The first summary's event is inside the latest one's range (the window's overlap):
        # the window starts at it, so both summaries are loaded.
        assert latest.start_timestamp <= compactions[0].timestamp <= latest.end_timestamp
        window = window_of(cached)
        assert window is not None and window.num_recent_events is None
        assert window.after_timestamp == compactions[0].timestamp
        # The run's configuration carries it.
        run_config = bridge.runners.run_config({}, (LOCAL_USER, chat.chat_id))
        assert run_config.get_session_config == window

        async def loaded() -> list[Event]:
            session = await bridge.outbox.get_session(
                app_name=app_name, user_id=LOCAL_USER, session_id=chat.chat_id, config=window
            )
            assert session is not None
            return list(session.events)

        assert client.http.portal is not None
        events = client.http.portal.call(loaded)
        texts = [_text(e) for e in events]
        assert "weather 0" not in texts and "pay Hanako" in texts
        assert len(events) < len(cached)
        # Both summaries' events, and the call that waits for the page.
        assert sum(e.actions.compaction is not None for e in events) == 2
        assert turn_calls(current_turn(events)).waiting_for_client()
        # And the turn goes on from there.
        assert chat.approve(True).text == "Sent."
        chat.close()


def test_the_runner_loads_a_compacted_chat_from_its_window(tmp_path: Path) -> None:
    """ADK's runner, given the window, loads fewer events turn after turn than the chat holds."""
    loaded = LoadedEvents()
    app = compacting_app("sliding", Ledger())
    app = app.model_copy(update={"plugins": [loaded]})
    settings = settings_for_tests(session_store=f"sqlite:///{tmp_path / 'sessions.db'}")
    with serve_agent(app, settings) as client:
        chat = TableChat(client.http, "stream")
        for n in range(12):
            chat.send(f"weather {n}")
        bridge = bridge_of(client.http.app.state)  # type: ignore[attr-defined]
        cached = bridge.session_cache.cached_events(
            bridge.sessions.app_name, LOCAL_USER, chat.chat_id
        )
        assert cached is not None
        chat.close()
    # Whole before the first compaction (after the second turn; the run's own user message is
    # in it), bounded after it: the later runs load the same few events while the chat grows.
    assert loaded.counts[:2] == [1, 3]
    assert max(loaded.counts[4:]) < 12
    assert len(cached) > 2 * 12
    assert loaded.counts[-2:] == loaded.counts[-4:-2]
