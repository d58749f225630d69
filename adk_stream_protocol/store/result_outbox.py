"""A tool's result that the store could not take is kept, and written when the store is back
(docs/adr/0035-kept-results.md).

ADK stores a tool's result only after the body returns. If the session store goes away in
between, the append fails, the run ends, and the result would live only in this process's
memory: the chat's next holder would find a start without a result and record the call as
*outcome unknown* (docs/adr/0032), although the tool did its work and we hold what it said.

``ResultOutbox`` wraps the app's session service (both runners and ``ChatSessions`` use it)
and delegates every method; it also moves the stamps a ``/live`` user message carries into its
event's metadata (``history.carry_stamps``). When the append of a real tool result fails with an
outage (``foundation.outages.outage_of``), it keeps a copy of the event in this process and raises
``ResultKept``. A writer per chat then tries again with backoff (0.2 s doubling to 2 s) for
at most ``retry_seconds``: it opens the session fresh and appends the same event (same id,
invocation, content). Meanwhile the turn keeps the chat's lease (``settled``), so nobody else
declares the call's outcome unknown; a retry of the request gets 503.

A write is given up (one WARNING naming the chat and the call) when time runs out, or when
the store refuses the event for a reason that is no outage: the call is then left to the next
holder, as outcome unknown. When another holder has the chat (it was fenced after the event,
its call was answered meanwhile, or the lease lapsed while the result waited), the result is
not lost but handed to that holder instead (``hand_off_to``, docs/adr/0073).

The same hand-off takes a tool's result whose append the store refuses as stale: the run lost
its chat (a paused or starved process that woke after another took it over and fenced it off).
The stale run still writes nothing to the session; the chat's holder applies the result under
its own lease (``turns/late_results.py``). A hand-off the store cannot take either is logged
(WARNING, chat and call) and lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from google.adk.errors import StaleSessionError
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session
from pydantic_core import to_jsonable_python

from adk_stream_protocol.foundation.outages import SESSION_POOL, SESSION_STORE, Outages, outage_of
from adk_stream_protocol.store.chat_index import ChatIndex, LateResult
from adk_stream_protocol.store.history import carry_stamps
from adk_stream_protocol.store.sessions import FENCE_KEY
from adk_stream_protocol.store.wrapped_sessions import WrappedSessions

logger = logging.getLogger(__name__)

# Why a kept result is handed to the chat's holder rather than given up: another has the chat.
_ANSWERED = "the call was answered meanwhile"
_TAKEN = "another holder took the chat"
_LAPSED = "the chat's lease lapsed"
HANDED_OFF = frozenset({_ANSWERED, _TAKEN, _LAPSED})

FIRST_DELAY_SECONDS = 0.2
MAX_DELAY_SECONDS = 2.0

# (user id, session id): a chat, as the coordination names it.
_Chat = tuple[str, str]


class ResultKept(Exception):
    """A tool's result could not be stored (the store is down): it is kept in this process and
    written when the store is back. Raised from the outage, which stays its cause."""

    def __init__(self, chat_id: str, call_ids: list[str]) -> None:
        super().__init__(f"result of call {','.join(call_ids)} kept for chat={chat_id}")
        self.chat_id = chat_id
        self.call_ids = call_ids


def kept_in(exc: BaseException) -> ResultKept | None:
    """The ``ResultKept`` among the exception, its causes and contexts, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ResultKept):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def tool_result_ids(event: Event) -> list[str]:
    """The ids of the real tool results the event carries: an agent's function responses,
    not ADK's "needs approval" stand-ins (``requested_tool_confirmations``)."""
    if event.author == "user" or event.partial or not event.content or not event.content.parts:
        return []
    placeholders = event.actions.requested_tool_confirmations if event.actions else {}
    return [
        part.function_response.id
        for part in event.content.parts
        if part.function_response is not None
        and part.function_response.id
        and part.function_response.id not in placeholders
    ]


@dataclass
class _Kept:
    app_name: str
    chat: _Chat
    event: Event
    call_ids: list[str]
    deadline: float  # on the monotonic clock


@dataclass
class _ChatOutbox:
    kept: list[_Kept] = field(default_factory=list)
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    abandoned: bool = False


class ResultOutbox(WrappedSessions):
    """The app's session service, with the results an outage kept from it written later."""

    def __init__(
        self, inner: BaseSessionService, outages: Outages, *, retry_seconds: float = 300.0
    ) -> None:
        super().__init__(inner)
        self._outages = outages
        self._retry_seconds = retry_seconds
        self._chats: dict[_Chat, _ChatOutbox] = {}
        self._writers: set[asyncio.Task[None]] = set()
        self._late: ChatIndex | None = None

    def hand_off_to(self, late: ChatIndex) -> None:
        """Where results of runs that lost their chat go (the chat index)."""
        self._late = late

    @property
    def late(self) -> ChatIndex | None:
        """Where the chats' late results wait for their holders, if anywhere."""
        return self._late

    async def append_event(self, session: Session, event: Event) -> Event:
        carry_stamps(event)  # a live message's stamps, carried in its state delta
        if not tool_result_ids(event):
            return await self._append_event(session, event)
        # A tool's result is stored, kept or handed off even when its run is stopped meanwhile
        # (a lost lease stops it once its tool has ended): the tool did its work.
        appending = asyncio.ensure_future(self._append_event(session, event))
        appending.add_done_callback(_retrieved)
        return await asyncio.shield(appending)

    async def _append_event(self, session: Session, event: Event) -> Event:
        try:
            return await self.inner.append_event(session, event)
        except StaleSessionError:
            # The run lost its chat (fenced off): its tool results go to the holder.
            if tool_result_ids(event):
                chat = (session.user_id, session.id)
                await self._hand_off(session.app_name, chat, event, "its write was refused")
            raise
        except Exception as exc:
            call_ids = tool_result_ids(event)
            if not call_ids or outage_of(exc) is None:
                raise
            # A copy: ADK's run may still hold the event. The store trimmed its temp state
            # already, as it would have before storing it.
            kept = _Kept(
                session.app_name,
                (session.user_id, session.id),
                event.model_copy(deep=True),
                call_ids,
                self._deadline(),
            )
            self._keep(kept)
            raise ResultKept(session.id, call_ids) from exc

    # -- the outbox ----------------------------------------------------------------------
    def holds(self, chat: _Chat) -> bool:
        """Whether results of the chat wait here to be written."""
        return chat in self._chats

    async def settled(self, chat: _Chat, lost: asyncio.Event) -> None:
        """Wait until the chat's kept results are written or given up. ``lost``: the chat's
        lease lapsed, so another holder may answer the calls; the writes are given up."""
        outbox = self._chats.get(chat)
        if outbox is None:
            return
        done = asyncio.ensure_future(outbox.settled.wait())
        lapsed = asyncio.ensure_future(lost.wait())
        try:
            await asyncio.wait({done, lapsed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            done.cancel()
            lapsed.cancel()
        if not outbox.settled.is_set():
            outbox.abandoned = True
            logger.warning(
                "chat lease lapsed while results waited to be saved chat=%s; giving them up",
                chat[1],
            )

    async def close(self) -> None:
        """Stop the writers (the process ends): what they still hold is given up."""
        for task in list(self._writers):
            task.cancel()
        await asyncio.gather(*self._writers, return_exceptions=True)
        for outbox in self._chats.values():
            for kept in outbox.kept:
                _give_up(kept, "the server stopped")
        self._chats.clear()

    def _deadline(self) -> float:
        return time.monotonic() + self._retry_seconds

    def _keep(self, kept: _Kept) -> None:
        outbox = self._chats.get(kept.chat)
        logger.info(
            "result kept until the session store is back chat=%s call=%s",
            kept.chat[1],
            ",".join(kept.call_ids),
        )
        if outbox is not None:
            outbox.kept.append(kept)
            return
        outbox = self._chats[kept.chat] = _ChatOutbox([kept])
        task = asyncio.create_task(self._write(kept.chat, outbox), name=f"outbox:{kept.chat[1]}")
        self._writers.add(task)
        task.add_done_callback(self._writers.discard)

    async def _write(self, chat: _Chat, outbox: _ChatOutbox) -> None:
        """Write the chat's kept results in order, each until stored or given up."""
        try:
            while outbox.kept:
                kept = outbox.kept[0]
                if outbox.abandoned:
                    await self._give_up(kept, _LAPSED)
                else:
                    await self._write_one(kept, outbox)
                outbox.kept.pop(0)
        finally:
            self._chats.pop(chat, None)
            outbox.settled.set()

    async def _write_one(self, kept: _Kept, outbox: _ChatOutbox) -> None:
        delay = FIRST_DELAY_SECONDS
        while True:
            await asyncio.sleep(min(delay, max(0.0, kept.deadline - time.monotonic())))
            if outbox.abandoned:
                return await self._give_up(kept, _LAPSED)
            try:
                reason = await self._append(kept)
            except StaleSessionError:
                continue  # written to between our read and our append: read it again
            except Exception as exc:
                store = outage_of(exc)
                if store is None:
                    return _give_up(kept, f"{type(exc).__name__}: {exc}")
                self._outages.down(store, exc, f"saving a kept result of chat={kept.chat[1]}")
                if time.monotonic() >= kept.deadline:
                    return _give_up(kept, f"the store was not back in {self._retry_seconds:g} s")
                delay = min(delay * 2, MAX_DELAY_SECONDS)
                continue
            self._outages.up(SESSION_STORE, SESSION_POOL)
            if reason is not None:
                return await self._give_up(kept, reason)
            logger.info("kept result saved chat=%s call=%s", kept.chat[1], ",".join(kept.call_ids))
            return None

    async def _append(self, kept: _Kept) -> str | None:
        """Append the kept event to the session read fresh; why not, if it must not be."""
        user_id, session_id = kept.chat
        session = await self.inner.get_session(
            app_name=kept.app_name, user_id=user_id, session_id=session_id
        )
        if session is None:
            return "the chat is gone"
        answered = {call_id for stored in session.events for call_id in tool_result_ids(stored)}
        if any(stored.id == kept.event.id for stored in session.events):
            return None  # the failed append was stored after all
        if answered & set(kept.call_ids):
            return _ANSWERED
        if any(
            FENCE_KEY in (stored.custom_metadata or {}) and stored.timestamp > kept.event.timestamp
            for stored in session.events
        ):
            return _TAKEN
        await self.inner.append_event(session, kept.event.model_copy(deep=True))
        return None

    async def _give_up(self, kept: _Kept, reason: str) -> None:
        """A kept result not written: handed to the chat's holder when another has the chat,
        else left as outcome unknown."""
        if reason in HANDED_OFF:
            await self._hand_off(kept.app_name, kept.chat, kept.event, reason)
        else:
            _give_up(kept, reason)

    async def _hand_off(self, app_name: str, chat: _Chat, event: Event, why: str) -> None:
        """The event's tool results, for the chat's holder to apply. One WARNING per result:
        handed off, or lost when the store cannot take it either."""
        user_id, chat_id = chat
        for late in late_results_of(event):
            try:
                if self._late is None:
                    raise RuntimeError("no store for late results")
                await self._late.keep_late_result(app_name, user_id, chat_id, late)
            except Exception as exc:
                logger.warning(
                    "late result lost (%s; %s) chat=%s call=%s tool=%s: the call stays as "
                    "the chat's holder recorded it",
                    why,
                    type(exc).__name__,
                    chat_id,
                    late.call_id,
                    late.tool_name,
                )
                continue
            logger.warning(
                "late result handed to the chat's holder (%s: this run lost the chat) "
                "chat=%s call=%s tool=%s",
                why,
                chat_id,
                late.call_id,
                late.tool_name,
            )


def late_results_of(event: Event) -> list[LateResult]:
    """The event's real tool results as late results, in its author's name and invocation."""
    ids = set(tool_result_ids(event))
    parts = event.content.parts if event.content and event.content.parts else []
    now = datetime.now(UTC)
    return [
        LateResult(
            call_id=response.id,
            tool_name=response.name or "",
            response=to_jsonable_python(response.response or {}, fallback=str),
            invocation_id=event.invocation_id,
            author=event.author,
            created_at=now,
        )
        for part in parts
        if (response := part.function_response) is not None and response.id in ids and response.id
    ]


def _retrieved(task: asyncio.Future[Event]) -> None:
    """A shielded append's failure, seen: its caller, stopped meanwhile, no longer waits."""
    if not task.cancelled():
        task.exception()


def _give_up(kept: _Kept, reason: str) -> None:
    logger.warning(
        "kept result not saved (%s) chat=%s call=%s: the call is left as outcome unknown",
        reason,
        kept.chat[1],
        ",".join(kept.call_ids),
    )
