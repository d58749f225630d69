"""Confirmations that wait in a ``/live?chatId=`` chat's session, seen from its socket
(docs/adr/0057, which replaced the handover of 0047).

ADK's live flow cannot resume a confirmation, so on ``/live`` the approval waits inside the
socket's run (``LiveApprovalPlugin``), and the gate stores it in the session as ``run_async``
stores ADK's pause when it asks. When the socket leaves, its run ends and the wait with it;
the call stays paused there. The chat then waits for the answer as a ``/stream`` chat does:
``POST /stream`` and ai 7's socket answer it on any instance, and so does a new
``/live?chatId=`` socket (``StoredPause``): the answer goes through ``run_async`` (ADK runs
the tool with it), that response goes to the socket, then the socket's live run starts on the
new history. The live run does not start while the pause waits: the model would be asked to
answer a history that ends on ADK's placeholder.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import nullcontext

from google.adk.events import Event

from adk_stream_protocol.coordination.base import ChatKey, ChatLease
from adk_stream_protocol.protocol.tool_calls import (
    DISCONNECTED_RESULT,
    turn_calls,
)
from adk_stream_protocol.protocol.ui_messages import ChatRequest
from adk_stream_protocol.store.history import current_turn, live_events
from adk_stream_protocol.turns.live_runs import LiveRun
from adk_stream_protocol.turns.openings import Client
from adk_stream_protocol.turns.planning import plan_turn
from adk_stream_protocol.turns.request_turns import (
    PlannedTurn,
    RequestTurn,
    approval_decisions,
    plan_joined,
)
from adk_stream_protocol.turns.response import ChunkSink
from adk_stream_protocol.turns.turn_services import TurnServices

logger = logging.getLogger(__name__)


class _LentLease:
    """The socket's lease lent to one ``run_async`` turn: the socket gives it back, not the
    turn (which releases its lease when it ends)."""

    def __init__(self, lease: ChatLease) -> None:
        self._lease = lease
        self.token = lease.token
        self.lost = lease.lost
        self.unclean = False  # fenced when the socket took the chat
        self.generation = lease.generation

    def held(self) -> bool:
        return self._lease.held()

    async def release(self) -> None:
        return None

    async def hold_for_results(self, ttl_seconds: float) -> None:
        await self._lease.hold_for_results(ttl_seconds)


class StoredPause:
    """A ``/live?chatId=`` socket's view of confirmations that wait in its chat's session:
    whether there are any, their answer through ``run_async``, and their abandonment."""

    def __init__(self, services: TurnServices, chat: ChatKey, lease: ChatLease) -> None:
        self._services = services
        self._sessions = services.runners.sessions
        self._chat = chat
        self._lease = lease
        self.waiting = False
        self._settled = asyncio.Event()  # clear while an answer's run goes on
        self._settled.set()

    async def check(self) -> bool:
        """Whether the chat's current turn waits for an answer to a confirmation."""
        session = await self._sessions.open(*self._chat)
        calls = turn_calls(current_turn(live_events(session.events)))
        self.waiting = bool(calls.pending_confirmations())
        return self.waiting

    async def starts_run(self) -> bool:
        """At connect: whether the live run starts now (no stored confirmation waits). A
        store that fails here fails the run's start too, which reports it."""
        try:
            return not await self.check()
        except Exception:
            logger.info("live chat=%s: stored confirmations not read", self._chat[1])
            return True

    @property
    def answering(self) -> bool:
        return not self._settled.is_set()

    async def settled(self) -> None:
        """Wait until an answer's run, and the live run's start after it, are over."""
        await self._settled.wait()

    async def answer(
        self, request: ChatRequest, sink: ChunkSink, run: LiveRun, *, on_end: Callable[[], None]
    ) -> None:
        """Answer through ``run_async``, as ``POST /stream`` does, under the socket's lease;
        ``on_end`` when its run has ended, then the socket's live run starts on the answered
        history, unless the chat waits again."""
        services, lease = self._services, _LentLease(self._lease)
        async with services.responses.opening(self._chat, lease) as log:
            request, plan, shared_state = await plan_joined(services, self._chat, request, lease)
            # A live run started meanwhile (by audio) holds the session as it was: it starts
            # again.
            await run.close()
            opened = await services.responses.open(Client("live"), self._chat, lease, log, request)
        self._settled.clear()

        def ended() -> None:
            on_end()
            services.runtime.tasks.spawn(
                self._after_answer(run.reopen), name=f"live-answered:{self._chat[1]}"
            )

        planned = PlannedTurn(plan, approval_decisions(request), shared_state)
        turn = RequestTurn(services, opened, planned, sink, on_end=ended)
        logger.info("live chat=%s: a stored confirmation answered through run_async", self._chat[1])
        turn.begin()

    async def _after_answer(self, then: Callable[[], Awaitable[None]]) -> None:
        try:
            # The turn let go of the lease it was lent: the socket's tools hold it again.
            self._services.tools.starts.hold(self._chat, self._lease)
            if not await self.check():
                await then()
        except Exception:
            logger.warning("live chat=%s: after an answer", self._chat[1], exc_info=True)
        finally:
            self._settled.set()

    async def leave(self, run: LiveRun, *, keep_paused: bool = True) -> None:
        """The socket leaves: its approvals still waiting stay paused in the session, where
        they were stored when asked (not when ``keep_paused`` is off: a deleted chat's are
        cancelled), its browser calls end ("the user left") as the record then says."""
        await self._settled.wait()  # an answer's run holds the lease it was lent
        services = self._services
        pending = services.coordination.pending
        left = await pending.waiting(self._chat)
        asked = [call for call in left if call.approval_id is not None and keep_paused]
        if asked:  # as under run_async, the model is not called after the pause
            run.queue.close()
        with services.tools.gate.pausing_on_leave(self._chat) if asked else nullcontext():
            await pending.unwatch(self._chat, dict(DISCONNECTED_RESULT))
            await run.close()
        unanswered = [c for c in left if c not in asked]
        await services.responses.records.record_unanswered(self._chat, unanswered)

    async def abandon(self, request: ChatRequest) -> None:
        """A new message instead of the answer: the calls waiting get the result ``POST
        /stream`` gives them (``plan_turn``), so the live model's history stays valid."""
        if not self.waiting:
            return
        session = await self._sessions.open(*self._chat)
        plan = plan_turn(request, session.events)
        if plan.prior_tool_results is not None and plan.rewind_before_event_id is None:
            await self._sessions.service.append_event(
                session,
                Event(
                    author="user",
                    invocation_id=plan.prior_invocation_id or session.events[-1].invocation_id,
                    content=plan.prior_tool_results,
                ),
            )
        self.waiting = False
