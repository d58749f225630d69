"""How much of a chat's history a run loads, once ADK's compaction has summarized some of it
(docs/adr/0070).

ADK's runner reads a session whole unless ``RunConfig.get_session_config`` bounds it, even
when compaction has summarized most of it; and everything it loads is walked again for each
model call. ``window_of`` bounds it from the last compaction: the events from that
compaction's start on (``GetSessionConfig(after_timestamp=...)``), which hold its summary
event, the raw events it did not cover, and every call still waiting for the page (a
compaction never covers one: ``turns.compaction``). An earlier summary whose event falls
before the window is no longer sent: the model sees the latest summaries and what followed
them. No compaction yet: no bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.events import Event
from google.adk.sessions.base_session_service import GetSessionConfig

# How far back from the end a compaction is looked for; a chat whose last compaction is
# further back than this (compaction off, or failing) is loaded whole.
SEARCH_EVENTS = 2000


def latest_compaction(events: Sequence[Event]) -> Event | None:
    """The chat's last compaction event among its last ``SEARCH_EVENTS``, if any."""
    for index in range(len(events) - 1, max(-1, len(events) - 1 - SEARCH_EVENTS), -1):
        event = events[index]
        if event.actions is not None and event.actions.compaction is not None:
            return event
    return None


def window_of(events: Sequence[Event]) -> GetSessionConfig | None:
    """What a run of the chat whose history is ``events`` loads: from its last compaction's
    start on; None (all of it) before any compaction."""
    compaction = latest_compaction(events)
    if compaction is None or compaction.actions.compaction is None:
        return None
    return GetSessionConfig(after_timestamp=compaction.actions.compaction.start_timestamp)
