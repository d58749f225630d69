"""How much of a chat's history a run loads, once ADK's compaction has summarized some of it
(docs/adr/0070).

ADK's runner reads a session whole unless ``RunConfig.get_session_config`` bounds it, even
when compaction has summarized most of it; and everything it loads is walked again for each
model call. ``window_of`` bounds it by the last compaction (``GetSessionConfig(
after_timestamp=...)``): from the end of the range it summarized, so the run loads that
summary's event, the raw events after the range, and every call still waiting for the page (a
compaction never covers one: ``turns.compaction``). When the summary before it was made inside
that range (ADK's sliding window with an overlap), the window starts at that earlier summary's
event instead, so the model keeps both summaries, as it does with the whole history. Older
summaries are no longer sent: the model sees the latest ones and what followed them. No
compaction yet: no bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.events import Event
from google.adk.sessions.base_session_service import GetSessionConfig

# How far back from the end a compaction is looked for; a chat whose last compaction is
# further back than this (compaction off, or failing) is loaded whole.
SEARCH_EVENTS = 2000


def latest_compaction(events: Sequence[Event], before: int | None = None) -> int | None:
    """The index of the chat's last compaction event (before index ``before``) among the last
    ``SEARCH_EVENTS`` events, if any."""
    end = len(events) if before is None else before
    for index in range(end - 1, max(-1, len(events) - 1 - SEARCH_EVENTS), -1):
        actions = events[index].actions
        if actions is not None and actions.compaction is not None:
            return index
    return None


def window_of(events: Sequence[Event]) -> GetSessionConfig | None:
    """What a run of the chat whose history is ``events`` loads: from its last compaction's
    end on (from the summary before it, when that one sits inside its range); None (all of
    it) before any compaction."""
    index = latest_compaction(events)
    if index is None:
        return None
    compaction = events[index].actions.compaction
    assert compaction is not None
    after = compaction.end_timestamp
    previous = latest_compaction(events, before=index)
    if previous is not None and events[previous].timestamp >= compaction.start_timestamp:
        after = min(after, events[previous].timestamp)
    return GetSessionConfig(after_timestamp=after)
