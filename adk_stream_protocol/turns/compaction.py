"""ADK's events compaction, made safe for the calls a page answers (docs/adr/0070).

An ``App`` with ``events_compaction_config`` has ADK summarize older invocations after a run
(a sliding window, or past a token threshold). ADK 2.13 can summarize a turn that still waits
for the page: its sliding window took a turn paused at an approval into the summary, and the
model, resumed with the approval, no longer saw the call (as google/adk-python #4740
reported; its trimming stops before the confirmation request but keeps the user's message and
the call). ``KeepPendingTurns`` wraps the app's summarizer: the range it is given ends before
its last turn unless that turn is over (the model answered, nothing waits for the page: an
approval, an input request, a browser tool), so a paused turn stays raw until it is answered;
a range of nothing else is not summarized.

Only what the model is sent changes: the session keeps every event, and the page's record of
the chat (``GET /chats/{chatId}``) is its own. ``run_live`` does not compact (ADK runs the
compactor after ``run_async`` invocations only).
"""

from __future__ import annotations

import logging

from google.adk.apps import App
from google.adk.apps.base_events_summarizer import BaseEventsSummarizer
from google.adk.apps.compaction import _ensure_compaction_summarizer
from google.adk.events import Event

from adk_stream_protocol.protocol.tool_calls import turn_calls
from adk_stream_protocol.store.history import current_turn, is_user_turn

logger = logging.getLogger(__name__)


class KeepPendingTurns(BaseEventsSummarizer):
    """The app's summarizer, never given the turn that still waits for the page."""

    def __init__(self, inner: BaseEventsSummarizer) -> None:
        self.inner = inner

    async def maybe_summarize_events(self, *, events: list[Event]) -> Event | None:
        kept = settled_prefix(events)
        if len(kept) < len(events):
            logger.debug(
                "compaction: %d events of a waiting turn left out", len(events) - len(kept)
            )
        if not kept:
            return None
        return await self.inner.maybe_summarize_events(events=kept)


def settled_prefix(events: list[Event]) -> list[Event]:
    """``events`` up to their last turn unless that turn is over: answered, with nothing
    waiting for the page. ADK's own trimming can end a range inside a paused turn (before its
    confirmation request), so a turn that does not end with the model's answer is left out
    whole."""
    turn = current_turn(events)
    if _over(turn):
        return list(events)
    start = len(events) - len(turn)
    if start == 0 and not (events and is_user_turn(events[0])):
        return []  # a range inside one unfinished turn
    return list(events[:start])


def _over(turn: list[Event]) -> bool:
    if not turn or turn_calls(turn).waiting_for_client():
        return False
    last = turn[-1]
    content = last.content
    return (
        last.author != "user"
        and not last.partial
        and content is not None
        and any(part.text and not part.thought for part in content.parts or [])
        and not last.get_function_calls()
    )


def guarded(app: App) -> App:
    """``app`` with its compaction's summarizer wrapped in ``KeepPendingTurns``; ADK's default
    summarizer (the root agent's model) made first, as ADK would make it."""
    config = app.events_compaction_config
    if config is None or isinstance(config.summarizer, KeepPendingTurns):
        return app
    config = config.model_copy()
    if config.summarizer is None and app.root_agent is not None:
        _ensure_compaction_summarizer(config=config, agent=app.root_agent)
    if config.summarizer is None:
        return app
    config.summarizer = KeepPendingTurns(config.summarizer)
    return app.model_copy(update={"events_compaction_config": config})
