"""A confirmation a ``/live?chatId=`` socket left unanswered, handed over to any instance
through the session, in ADK's own shape (docs/adr/0047-live-confirmation-handoff.md).

ADK's live flow cannot resume a confirmation, so on ``/live`` the approval waits inside the
socket's run (``LiveApprovalPlugin``). When the socket leaves, its run ends and the wait with
it. Instead of ending the call as cancelled, the gate lets it pause as ``run_async`` pauses it
(ADK's "needs confirmation" placeholder, the request in the result's actions) and
``hand_off`` writes the ``adk_request_confirmation`` call ``run_async`` would have written
after it, under the approval's id. The chat then waits for the answer as a ``/stream`` chat
does: ``POST /stream`` and ai 7's socket answer it on any instance, and so does a new
``/live?chatId=`` socket (``StoredPause``): the answer goes through ``run_async`` (ADK runs
the tool with it), that response goes to the socket, then the socket's live run starts on the
new history. The live run does not start while the pause waits: the model would be asked to
answer a history that ends on ADK's placeholder.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext

from google.adk.events import Event, EventActions
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from adk_stream_protocol.coordination.base import ChatKey, ChatLease, WaitingCall
from adk_stream_protocol.protocol.tool_calls import (
    CONFIRMATION_TOOL,
    DISCONNECTED_RESULT,
    turn_calls,
)
from adk_stream_protocol.protocol.ui_messages import ChatRequest
from adk_stream_protocol.store.history import current_turn, live_events
from adk_stream_protocol.turns.bridge import Bridge
from adk_stream_protocol.turns.live_runs import LiveRun
from adk_stream_protocol.turns.planning import plan_request, plan_turn
from adk_stream_protocol.turns.request_turns import RequestTurn, approval_decisions
from adk_stream_protocol.turns.response import ChunkSink

logger = logging.getLogger(__name__)

# ADK's own result of a call that waits for confirmation (``FunctionTool``'s gate): what the
# stored history holds for the call until the answer, as under ``run_async``.
NEEDS_CONFIRMATION_RESULT = {
    "error": "This tool call requires confirmation, please approve or reject."
}


async def hand_off(bridge: Bridge, chat: ChatKey, calls: Sequence[WaitingCall]) -> None:
    """Store the approvals ``calls`` (their socket left) as ADK's pause: each call's
    placeholder result (if its run ended before storing it) and one ``adk_request_confirmation``
    call per approval, whose id is the approval's, so the page's answer names it."""
    if not calls:
        return
    session = await bridge.sessions.open(*chat)
    events = live_events(session.events)
    made = {c.id: (c, e) for e in events for c in e.get_function_calls() if c.id}
    results = {r.id: e for e in events for r in e.get_function_responses() if r.id}
    for call in calls:
        if call.approval_id is None or call.call_id not in made:
            continue
        original, event = made[call.call_id]
        result = results.get(call.call_id)
        asked = result.actions.requested_tool_confirmations.get(call.call_id) if result else None
        if result is not None and asked is None:
            logger.info("call %s has its result; not handed off", call.call_id)
            continue
        if asked is None:  # the run ended before ADK stored the pause: stored here
            asked = ToolConfirmation(hint=call.hint, payload=call.payload)
            await bridge.sessions.service.append_event(session, _placeholder(event, call, asked))
        request = types.FunctionCall(
            name=CONFIRMATION_TOOL,
            id=call.approval_id,
            args={
                "originalFunctionCall": original.model_dump(exclude_none=True, by_alias=True),
                "toolConfirmation": asked.model_dump(by_alias=True, exclude_none=True),
            },
        )
        # As ADK's ``generate_request_confirmation_event``: the model's side, long-running.
        confirmation = Event(
            invocation_id=event.invocation_id,
            author=event.author,
            branch=event.branch,
            content=types.Content(role="model", parts=[types.Part(function_call=request)]),
            long_running_tool_ids={call.approval_id},
        )
        await bridge.sessions.service.append_event(session, confirmation)
        logger.info("approval %s of chat=%s handed over to the session", call.approval_id, chat[1])


def _placeholder(call_event: Event, call: WaitingCall, asked: ToolConfirmation) -> Event:
    response = types.FunctionResponse(
        name=call.tool_name, id=call.call_id, response=dict(NEEDS_CONFIRMATION_RESULT)
    )
    return Event(
        invocation_id=call_event.invocation_id,
        author=call_event.author,
        branch=call_event.branch,
        content=types.Content(role="user", parts=[types.Part(function_response=response)]),
        actions=EventActions(
            skip_summarization=True, requested_tool_confirmations={call.call_id: asked}
        ),
    )


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

    def __init__(self, bridge: Bridge, chat: ChatKey, lease: ChatLease) -> None:
        self._bridge = bridge
        self._chat = chat
        self._lease = lease
        self.waiting = False
        self._settled = asyncio.Event()  # clear while an answer's run goes on
        self._settled.set()

    async def check(self) -> bool:
        """Whether the chat's current turn waits for an answer to a confirmation."""
        session = await self._bridge.sessions.open(*self._chat)
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
        lease = _LentLease(self._lease)
        async with self._bridge.opening_response(self._chat, lease) as log:
            plan, shared_state = await plan_request(self._bridge, self._chat[0], request, lease)
            # A live run started meanwhile (by audio) holds the session as it was: it starts
            # again.
            await run.close()
            opened = await self._bridge.open_response("live", self._chat, request, log)
        self._settled.clear()

        def ended() -> None:
            on_end()
            self._bridge.spawn(
                self._after_answer(run.reopen), name=f"live-answered:{self._chat[1]}"
            )

        turn = RequestTurn(
            self._bridge,
            self._chat,
            plan,
            sink,
            opened=opened,
            lease=lease,
            on_end=ended,
            decisions=approval_decisions(request),
            transport="live",
            shared_state=shared_state,
        )
        logger.info("live chat=%s: a stored confirmation answered through run_async", self._chat[1])
        turn.begin()

    async def _after_answer(self, then: Callable[[], Awaitable[None]]) -> None:
        try:
            # The turn let go of the lease it was lent: the socket's tools hold it again.
            self._bridge.tool_starts.hold(self._chat, self._lease)
            if not await self.check():
                await then()
        except Exception:
            logger.warning("live chat=%s: after an answer", self._chat[1], exc_info=True)
        finally:
            self._settled.set()

    async def leave(self, run: LiveRun, *, hand_over: bool = True) -> None:
        """The socket leaves: its approvals still waiting are handed over to the session
        (not when ``hand_over`` is off: a deleted chat's are cancelled), its browser calls end
        ("the user left") as the record then says (ADR 0042)."""
        await self._settled.wait()  # an answer's run holds the lease it was lent
        pending = self._bridge.coordination.pending
        left = await pending.waiting(self._chat)
        asked = [call for call in left if call.approval_id is not None and hand_over]
        if asked:  # as under run_async, the model is not called after the pause
            run.queue.close()
        with self._bridge.live_gate.handing_off(self._chat) if asked else nullcontext():
            await pending.unwatch(self._chat, dict(DISCONNECTED_RESULT))
            await run.close()
        await self._bridge.record_unanswered(self._chat, [c for c in left if c not in asked])
        if self._lease.held():
            await hand_off(self._bridge, self._chat, asked)

    async def abandon(self, request: ChatRequest) -> None:
        """A new message instead of the answer: the calls waiting get the result ``POST
        /stream`` gives them (``plan_turn``), so the live model's history stays valid."""
        if not self.waiting:
            return
        session = await self._bridge.sessions.open(*self._chat)
        plan = plan_turn(request, session.events)
        if plan.prior_tool_results is not None and plan.rewind_before_event_id is None:
            await self._bridge.sessions.service.append_event(
                session,
                Event(
                    author="user",
                    invocation_id=plan.prior_invocation_id or session.events[-1].invocation_id,
                    content=plan.prior_tool_results,
                ),
            )
        self.waiting = False
