"""A process's copy of the chats' histories, so a turn reads only what is new (docs/adr/0070).

ADK's persistent stores read and validate every stored event of a chat on each
``get_session``; a turn read the history twice (to plan, then in the runner), so a long chat's
turn grew with the chat. ``SessionCache`` wraps the app's session service and keeps, per chat,
the events this process has seen, bounded by ``ADK_STREAM_SESSION_CACHE_MB`` (least recently
used first out).

Every read still asks the store whether the chat moved: a read without events (ADK's
``GetSessionConfig(num_recent_events=0)``: the session's row and its state, never a stale
state) gives the session's revision. The same revision: the cached events are the history.
A newer one (another instance wrote): only the events since the last cached one are read,
and they must continue the cached ones (the overlap read again holds the last cached event);
anything else (a rewrite, a chat deleted and made again) reads the whole history.

So a turn's planner and its runner share one read of the history: each asks only for the
session's row (its revision and state: state shared by a user's chats may move under another
chat's lease), and both get the events this process already holds. A writer that lost its
lease is still refused: ADK's stale-session check runs on every append against the caller's
own Session object, which this cache never touches.

Our own appends keep the entry current when it was at the caller's revision; otherwise the
entry is dropped. Deletes drop it; rewinds and fences drop it (``forget``).
"""

from __future__ import annotations

import contextvars
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, InMemorySessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig

from adk_stream_protocol.store.wrapped_sessions import WrappedSessions

logger = logging.getLogger(__name__)

# (app, user, session id)
ChatId = tuple[str, str, str]
# What the store says a session's revision is: its update time, and ADK's exact storage
# marker where the store keeps one (DatabaseSessionService; None on SQLite).
Revision = tuple[float, str | None]

# The incremental read starts this long before the last cached event, so that events of
# another instance whose clock runs a little behind are not missed; the overlap is matched by
# id and must end with the cached events' last.
OVERLAP_SECONDS = 2.0
_EVENTS_NONE = GetSessionConfig(num_recent_events=0)


@dataclass
class _Entry:
    events: list[Event]
    revision: Revision
    sizes: list[int]
    size: int = 0


@dataclass
class CacheCounts:
    """What the cache did, for tests and the bench: reads asked of the store by kind."""

    revision_reads: int = 0  # the read without events
    incremental_reads: int = 0
    full_reads: int = 0
    evictions: int = 0


# The compaction events a run stored, for its response to tell the page (``watch_compactions``).
_COMPACTIONS: contextvars.ContextVar[list[Event] | None] = contextvars.ContextVar(
    "session_cache_compactions", default=None
)


def watch_compactions() -> list[Event]:
    """A list that collects each compaction event stored from now on in this context (the
    run's task, and tasks it starts): ADK's runner stores them after the run's last event
    without yielding them."""
    seen: list[Event] = []
    _COMPACTIONS.set(seen)
    return seen


def revision_of(session: Session) -> Revision:
    return (session.last_update_time, session._storage_update_marker)


class SessionCache(WrappedSessions):
    """The app's session service, reading only the events a chat gained since last seen."""

    def __init__(self, inner: BaseSessionService, max_bytes: int) -> None:
        super().__init__(inner)
        self.max_bytes = max_bytes
        # An in-memory store hands out copies of what it holds already: nothing to save.
        self._enabled = max_bytes > 0 and not isinstance(inner, InMemorySessionService)
        self._entries: OrderedDict[ChatId, _Entry] = OrderedDict()
        self._bytes = 0
        self.counts = CacheCounts()

    # -- what the turn uses ---------------------------------------------------------------
    def forget(self, app_name: str, user_id: str, session_id: str) -> None:
        """Drop the chat's entry: the store was changed behind this cache (a rewind's state
        repair, a fence)."""
        self._drop((app_name, user_id, session_id))

    def cached_events(self, app_name: str, user_id: str, session_id: str) -> list[Event] | None:
        """The chat's history as last read or written here (no store read), if cached."""
        entry = self._entries.get((app_name, user_id, session_id))
        return entry.events if entry is not None else None

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    # -- BaseSessionService ---------------------------------------------------------------
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session = await self.inner.create_session(
            app_name=app_name, user_id=user_id, state=state, session_id=session_id
        )
        chat = (app_name, user_id, session.id)
        self._drop(chat)
        if self._enabled:  # a new chat's history is known: it has none
            self._entries[chat] = _Entry(events=[], revision=revision_of(session), sizes=[])
            self._add(chat, self._entries[chat], list(session.events))
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        if not self._enabled or (config is not None and config.num_recent_events == 0):
            # Off, or a read of the session without its history: the store's, as it is.
            return await self.inner.get_session(
                app_name=app_name, user_id=user_id, session_id=session_id, config=config
            )
        chat = (app_name, user_id, session_id)
        entry = self._entries.get(chat)
        head = await self.inner.get_session(
            app_name=app_name, user_id=user_id, session_id=session_id, config=_EVENTS_NONE
        )
        self.counts.revision_reads += 1
        if head is None:
            self._drop(chat)
            return None
        events = await self._events(chat, head, entry)
        if events is None:
            return None
        head.events = _window(events, config)
        return head

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        self._drop((app_name, user_id, session_id))
        await self.inner.delete_session(app_name=app_name, user_id=user_id, session_id=session_id)

    async def append_event(self, session: Session, event: Event) -> Event:
        try:
            return await self._append(session, event)
        except StaleSessionError:
            # The stale-session check's refusal (the fence's): its one line, no traceback;
            # ADK's loggers and ours know the exception and stay quiet.
            logger.warning(
                "write refused as stale: another holder wrote to the chat user=%s chat=%s "
                "author=%s invocation=%s",
                session.user_id,
                session.id,
                event.author,
                event.invocation_id,
            )
            raise

    async def _append(self, session: Session, event: Event) -> Event:
        if not self._enabled:
            return _noted(await self.inner.append_event(session, event))
        chat = (session.app_name, session.user_id, session.id)
        before = revision_of(session)
        try:
            stored = await self.inner.append_event(session, event)
        except BaseException:
            # Refused (stale, an outage): what the store holds is not known here.
            self._drop(chat)
            raise
        if stored.partial:
            return stored  # never stored
        _noted(stored)
        entry = self._entries.get(chat)
        if entry is None:
            return stored
        if entry.revision != before:
            self._drop(chat)  # the caller's session was not the one cached
            return stored
        entry.revision = revision_of(session)
        self._add(chat, entry, [stored])
        return stored

    # -- inside ---------------------------------------------------------------------------
    async def _events(
        self, chat: ChatId, head: Session, entry: _Entry | None
    ) -> list[Event] | None:
        """The chat's whole history at ``head``'s revision, read as little as can be."""
        revision = revision_of(head)
        if entry is not None and entry.revision == revision:
            self._entries.move_to_end(chat)
            return entry.events
        if entry is not None and entry.events:
            last = entry.events[-1]
            newer = await self.inner.get_session(
                app_name=chat[0],
                user_id=chat[1],
                session_id=chat[2],
                config=GetSessionConfig(after_timestamp=last.timestamp - OVERLAP_SECONDS),
            )
            self.counts.incremental_reads += 1
            if newer is None:
                self._drop(chat)
                return None
            added = _continuation(entry.events, newer.events)
            current = self._entries.get(chat) is entry  # not dropped or replaced meanwhile
            if current and added is not None and revision_of(newer) == revision:
                entry.revision = revision
                self._add(chat, entry, added)
                self._entries.move_to_end(chat)
                return entry.events
            # Not a continuation (rewritten, or written again meanwhile): read it whole.
        full = await self.inner.get_session(app_name=chat[0], user_id=chat[1], session_id=chat[2])
        self.counts.full_reads += 1
        self._drop(chat)
        if full is None:
            return None
        head.state = full.state
        head.last_update_time = full.last_update_time
        head._storage_update_marker = full._storage_update_marker
        fresh = _Entry(events=[], revision=revision_of(full), sizes=[])
        self._entries[chat] = fresh
        self._add(chat, fresh, full.events)
        return fresh.events

    def _add(self, chat: ChatId, entry: _Entry, events: list[Event]) -> None:
        sizes = [_size(e) for e in events]
        entry.events.extend(events)
        entry.sizes.extend(sizes)
        added = sum(sizes)
        entry.size += added
        self._bytes += added
        self._evict()

    def _drop(self, chat: ChatId) -> None:
        entry = self._entries.pop(chat, None)
        if entry is not None:
            self._bytes -= entry.size

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._entries:
            chat, entry = self._entries.popitem(last=False)
            self._bytes -= entry.size
            self.counts.evictions += 1
            logger.debug("session cache: chat=%s evicted (%d bytes)", chat[2], entry.size)


def _noted(event: Event) -> Event:
    seen = _COMPACTIONS.get()
    if seen is not None and not event.partial and event.actions.compaction is not None:
        seen.append(event)
    return event


def _continuation(cached: list[Event], read: list[Event]) -> list[Event] | None:
    """The events of ``read`` after the cached ones, if ``read`` (the store's events since a
    little before the last cached one) continues them: its known events are the cached
    list's tail, ending with its last; None otherwise."""
    if not read:
        return None
    last_id = cached[-1].id
    index = next((i for i, e in enumerate(read) if e.id == last_id), None)
    if index is None:
        return None
    known = read[: index + 1]
    tail = cached[-len(known) :]
    if [e.id for e in known] != [e.id for e in tail]:
        return None
    return list(read[index + 1 :])


def _window(events: list[Event], config: GetSessionConfig | None) -> list[Event]:
    """What a read with ``config`` returns of the history, as ADK's stores filter it."""
    if config is None:
        return list(events)
    chosen = events
    if config.after_timestamp:
        after = config.after_timestamp
        chosen = [e for e in chosen if e.timestamp >= after]
    if config.num_recent_events is not None:
        count = config.num_recent_events
        chosen = chosen[-count:] if count else []
    return list(chosen)


def _size(event: Event) -> int:
    """About what the event costs in memory: its JSON's length, with Python's overhead."""
    return 2 * len(event.model_dump_json(exclude_none=True))
