"""A turn that answers one chat request with one ADK ``run_async`` (``POST /stream``).

plan (``planning.plan_request``, under the chat's lease) → run (``Runner.run_async``) → convert and
deliver (``response.Response``). The transport only supplies the request and a ``ChunkSink``.

The run is its own task. When the client goes away (``stop()``, a closed tab) the transport
calls ``client_left``: that sets ADK's abort signal, and the run ends on its own, sealing the
invocation in the session, instead of being cancelled in the middle of a write. A stop sent
through ``StopSignals`` (``DELETE /stream/{chatId}/stream``, from any instance) and a lease
that lapsed under the run do the same. With resumable streams a client that leaves does not
stop the run: the response goes on into the chat's chunk log, to be resumed. A client that
says it is done with the response (``stop``, an ai 7 socket's ``abort``) stops it either way.

A turn is given what it runs with (``TurnServices``), the response opened for it under the
chat's lease for its ``Client`` (``OpenedResponse``: the transport, the AI SDK version the
client is known to speak), and its ``PlannedTurn``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Callable, Sequence, Set
from contextlib import aclosing
from dataclasses import dataclass

from google.adk.events import Event

from adk_stream_protocol.coordination.base import ChatKey, ChatLease
from adk_stream_protocol.foundation.errors import ABORTED_CODE, RequestError
from adk_stream_protocol.foundation.outages import (
    REDIS,
    RESULT_KEPT_MESSAGE,
    RESULTS_WAITING_MESSAGE,
    RETRY_AFTER_SECONDS,
    SESSION_POOL,
    SESSION_STORE,
)
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.protocol.shared_state import SharedState
from adk_stream_protocol.protocol.ui_messages import ChatRequest
from adk_stream_protocol.store.history import (
    ASSISTANT_MESSAGE_ID_KEY,
    DEFERRED_KEY,
    RESPONSE_ID_KEY,
    USER_MESSAGE_ID_KEY,
)
from adk_stream_protocol.store.result_outbox import kept_in
from adk_stream_protocol.store.session_cache import watch_compactions
from adk_stream_protocol.turns.deferral import Deferral
from adk_stream_protocol.turns.drain import END_WAIT_SECONDS, RESTART_TEXT, TOOL_WAIT_SECONDS
from adk_stream_protocol.turns.openings import Client, OpenedResponse
from adk_stream_protocol.turns.planning import TurnPlan, plan_request
from adk_stream_protocol.turns.recovery import Recovery, finish_cut_run
from adk_stream_protocol.turns.response import ChunkSink, Delivery, Response
from adk_stream_protocol.turns.turn_services import TurnServices

logger = logging.getLogger(__name__)


async def begin_request_turn(
    services: TurnServices,
    user_id: str,
    request: ChatRequest,
    sink: ChunkSink,
    *,
    client: Client,
    on_end: Callable[[], None],
) -> RequestTurn:
    """Plan the request under the chat's lease and start its run. Refusals raise
    ``RequestError`` before anything is sent, a store's outage as 503; ``on_end`` is called
    once the run has ended."""
    runtime = services.runtime
    try:
        # 503 once the server drains; a plan under way holds the drain.
        with runtime.drain.admission():
            turn = await _begin(services, (user_id, request.id), request, sink, client, on_end)
    except Exception as exc:
        refusal = None if isinstance(exc, RequestError) else runtime.outages.refusal(exc, "a turn")
        if refusal is None:
            raise
        raise refusal from exc
    runtime.outages.up(REDIS, SESSION_STORE, SESSION_POOL)
    return turn


async def _begin(
    services: TurnServices,
    chat: ChatKey,
    request: ChatRequest,
    sink: ChunkSink,
    client: Client,
    on_end: Callable[[], None],
) -> RequestTurn:
    lease = await take_chat(services, chat)
    responses = services.responses
    try:
        async with responses.opening(chat, lease) as log:
            request, plan, shared_state = await plan_joined(services, chat, request, lease)
            opened = await responses.open(client, chat, lease, log, request)
    except BaseException:
        await lease.release()
        raise
    decisions = (
        approval_decisions(request, _run_by_page(services.settings, plan))
        if plan.continuation
        else []
    )
    turn = RequestTurn(
        services, opened, PlannedTurn(plan, decisions, shared_state), sink, on_end=on_end
    )
    turn.begin()
    return turn


async def plan_joined(
    services: TurnServices, chat: ChatKey, request: ChatRequest, lease: ChatLease
) -> tuple[ChatRequest, TurnPlan, SharedState | None]:
    """The request completed from the chat's record and planned, under the chat's lease; joined
    again when the plan applied late results, which change the record under the join."""
    records, limit = services.responses.records, services.settings.max_added_bytes
    completed = await records.complete(chat, request, max_added_bytes=limit)
    plan, shared_state = await plan_request(
        services.runners,
        chat[0],
        completed,
        lease,
        defer_intermediate=not services.settings.stream_intermediate_results,
    )
    if plan.settled_late:
        completed = await records.complete(chat, request, max_added_bytes=limit)
    return completed, plan, shared_state


async def take_chat(services: TurnServices, chat: ChatKey) -> ChatLease:
    """The chat's lease for a request; 409 after the busy timeout, 503 while results wait."""
    leases = services.coordination.leases
    lease = await leases.try_acquire(chat)
    if lease is not None:
        return lease
    await _refuse_while_results_wait(services, chat)
    try:
        return await leases.acquire(chat, services.settings.chat_busy_timeout_seconds)
    except TimeoutError:  # the builtin one: the chat stayed held (not a Redis timeout)
        await _refuse_while_results_wait(services, chat)
        raise RequestError(
            409, "this chat is still answering an earlier request; try again shortly"
        ) from None


async def _refuse_while_results_wait(services: TurnServices, chat: ChatKey) -> None:
    """A chat whose turn holds its lease until kept results are saved, here or in another
    process: 503, since the store's return ends it, not the busy 409."""
    leases = services.coordination.leases
    if services.runners.outbox.holds(chat) or await leases.results_waiting(chat):
        raise RequestError(503, RESULTS_WAITING_MESSAGE, retry_after=RETRY_AFTER_SECONDS)


def _run_by_page(settings: Settings, plan: TurnPlan) -> set[str]:
    """Approved browser calls the page runs as the user approved them (``add-output``)."""
    if settings.browser_approval_flow != "add-output":
        return set()
    return {call.call_id for call in plan.rearmed_calls}


def approval_decisions(
    request: ChatRequest, unsent: Set[str] = frozenset()
) -> list[tuple[str, bool, str | None]]:
    """The approvals the continuation answers: parts the client marked responded. Not those
    of ``unsent``: ai 7 applies a ``tool-approval-response`` to the part, which would undo
    the output the page adds meanwhile."""
    return [
        (part.approval.id, part.approval.approved, part.approval.reason)
        for part in request.last_message.tool_parts()
        if part.state == "approval-responded"
        and part.approval is not None
        and part.approval.approved is not None
        and part.tool_call_id not in unsent
    ]


@dataclass(frozen=True)
class PlannedTurn:
    """A request's plan, and what its response starts from: the approvals the continuation
    answers, the chat's shared state."""

    plan: TurnPlan
    decisions: Sequence[tuple[str, bool, str | None]] = ()
    shared_state: SharedState | None = None


class RequestTurn:
    """The run of one planned request and its one response."""

    def __init__(
        self,
        services: TurnServices,
        opened: OpenedResponse,
        planned: PlannedTurn,
        sink: ChunkSink,
        *,
        on_end: Callable[[], None],
    ) -> None:
        self._settings = services.settings
        self._runners = services.runners
        self._tools = services.tools
        self._runtime = services.runtime
        self._opened = opened
        self._planned = planned
        self._chat = opened.chat
        self._plan = planned.plan
        self._sink = sink
        self._lease = opened.lease
        self._stop = opened.stop
        self._on_end = on_end
        client = opened.client
        self._observer = services.runtime.telemetry.response(
            self._chat[1],
            client.transport,
            ai_sdk=client.chunks_for,
            continuation=self._plan.continuation,
        )
        self._restarting = False  # the server ends the run for a restart
        self._events_done = False  # the run's events all came: a restart cuts nothing
        self._results_marked = False  # the lease says it waits for kept results
        self._ended = asyncio.Event()

    # A producer: the drain waits for it, and ends it before its followers.
    order = 0
    busy = True

    def begin(self) -> None:
        self._runtime.drain.add(self)
        # The run's task copies the current context: ADK's spans nest under the response's.
        with self._observer.current():
            self._runtime.tasks.spawn(self._run(), name=f"stream:{self._chat[1]}")

    def client_left(self) -> None:
        if self._settings.resumable_streams:
            logger.info("client left user=%s chat=%s: the response goes on", *self._chat)
            return
        logger.info("client left user=%s chat=%s: aborting the run", *self._chat)
        self._stop.stopped.set()

    def stop(self) -> None:
        """The client is done with the response: the run ends as a stop ends it."""
        logger.info("response stopped by its client user=%s chat=%s", *self._chat)
        self._stop.stopped.set()

    async def end_for_restart(self) -> None:
        """The grace is over: once no tool of the run is running (an abort would cancel it),
        stop the run; its response ends with the restart's ``error``."""
        await self._until_tools_end("restart")
        logger.info("restart: ending the response user=%s chat=%s", *self._chat)
        self._restarting = not self._events_done
        self._stop.stopped.set()
        try:
            await asyncio.wait_for(self._ended.wait(), END_WAIT_SECONDS)
        except TimeoutError:
            logger.warning("restart: the run did not end chat=%s", self._chat[1])

    async def _abort_when_lease_lost(self) -> None:
        await self._lease.lost.wait()
        logger.warning("chat lease lapsed under its run user=%s chat=%s: aborting", *self._chat)
        # A tool already running finishes first: cut, its work would be half done and its
        # result lost; finished, its result goes to the chat's holder.
        await self._until_tools_end("lease lapsed")
        self._stop.stopped.set()

    async def _until_tools_end(self, why: str) -> None:
        """Until no tool of the run is running (an abort would cancel it), at most
        ``TOOL_WAIT_SECONDS``."""
        tools = self._tools.running
        try:
            async with asyncio.timeout(TOOL_WAIT_SECONDS):
                while tools.running(self._chat):  # checked again: no await before the stop
                    await tools.idle(self._chat)
        except TimeoutError:
            logger.warning("%s: a tool still runs chat=%s; ending its run", why, self._chat[1])

    async def _run(self) -> None:
        plan = self._plan
        converter = StreamProtocolConverter(
            message_id=plan.message_id,
            error_detail=self._settings.error_detail,
            denied_tool_call_ids=plan.denied_tool_call_ids,
            ai_sdk=self._opened.client.chunks_for,
        )
        tasks, tools = self._runtime.tasks, self._tools
        # A tool the fence stopped (ToolNotStarted) reaches it as ADK's generic error event.
        converter.refused = lambda event: tools.starts.refused(self._chat, event.invocation_id)
        lease_watch = tasks.spawn(self._abort_when_lease_lost(), name="lease-watch")
        response: Response | None = None
        try:
            opened = self._opened
            response = Response(
                converter,
                Delivery(
                    self._sink,
                    opened.log,
                    opened.records,
                    coalescing_seconds=self._settings.delta_coalescing_ms / 1000,
                    sink_resumes=opened.client.resumes,
                ),
                parts=self._runners.chat_parts(self._chat, self._planned.shared_state),
                deferral=Deferral() if plan.defer else None,
                observer=self._observer,
            )
            await response.start()
            # The chat's tools send their data parts here while the run lasts.
            tools.ui.open_route(self._chat, response.tool_data)
            tools.starts.hold(self._chat, self._lease)
            try:
                await response.approval_responses(self._planned.decisions)
                await response.emit(converter.replay(plan.replay))
                if plan.recovery is not None:
                    # A retry continues the cut run in this response; before a new message
                    # the client has moved on, so the run finishes unseen.
                    await self._finish_cut_run(
                        plan.recovery, response if plan.new_message is None else None
                    )
                if plan.new_message is not None:
                    async with aclosing(self._events()) as events:
                        async for event in events:
                            if not (self._restarting and _is_abort(event)):
                                await response.convert(event)
                        self._events_done = True
                elif plan.recovery is None:
                    announce = self._settings.browser_approval_flow == "on-tool-call"
                    for call in plan.rearmed_calls:
                        await response.rearm(
                            call.call_id, call.tool_name, call.args, announce=announce
                        )
                self._events_done = True
            except Exception as exc:
                where = f"the run of chat={self._chat[1]}"
                kept = kept_in(exc)
                text = self._runtime.outages.interrupted(
                    kept.__cause__ or kept if kept else exc, where
                )
                if kept is not None:  # the tool ran; its result waits for the store
                    text = RESULT_KEPT_MESSAGE
                    # Before the client has its answer: its retry may reach another process.
                    await self._hold_for_results()
                await response.fail(exc, error_text=text)
            else:
                if self._restarting:
                    await response.end_with_error(RESTART_TEXT)
                else:
                    await response.finish()
        finally:
            if response is not None:
                tools.ui.close_route(self._chat, response.tool_data)
            tools.starts.let_go(self._chat, self._lease)
            lease_watch.cancel()
            self._observer.end()  # a no-op once the response ended
            await self._sink.close()  # a no-op once the response ended
            try:
                # Nobody else may answer the calls while this process holds their results.
                await self._hold_for_results()
                await self._runners.outbox.settled(self._chat, self._lease.lost)
            finally:
                await self._stop.close()
                await self._lease.release()
                self._runtime.drain.discard(self)
                self._ended.set()
                self._on_end()

    async def _hold_for_results(self) -> None:
        """Tell every process that the chat's lease now waits for kept results (once)."""
        if self._results_marked or not self._runners.outbox.holds(self._chat):
            return
        self._results_marked = True
        settings = self._settings
        # Longer than the writes are tried; the release removes it first.
        await self._lease.hold_for_results(
            settings.result_retry_seconds + settings.lease_ttl_seconds
        )

    async def _finish_cut_run(self, recovery: Recovery, response: Response | None) -> None:
        """Finish the turn's cut run: into ``response``, or unseen when it is None."""
        stamps = self._stamps() if response is not None else {RESPONSE_ID_KEY: uuid.uuid4().hex}
        run = finish_cut_run(
            self._runners, self._chat, recovery, stamps=stamps, abort_signal=self._stop.stopped
        )
        async with aclosing(run) as events:
            async for event in events:
                if response is not None and not (self._restarting and _is_abort(event)):
                    await response.convert(event)

    def _stamps(self) -> dict[str, object]:
        plan = self._plan
        stamps: dict[str, object] = {RESPONSE_ID_KEY: uuid.uuid4().hex}
        if plan.user_message_id is not None:
            stamps[USER_MESSAGE_ID_KEY] = plan.user_message_id
        stamps[ASSISTANT_MESSAGE_ID_KEY] = plan.message_id
        if plan.defer:
            stamps[DEFERRED_KEY] = True
        return stamps

    async def _events(self) -> AsyncGenerator[Event, None]:
        """The run's events, then the compactions ADK stored after them without yielding
        them (``data-compaction``)."""
        plan = self._plan
        assert plan.new_message is not None
        compactions = watch_compactions()
        run = self._runners.runner.run_async(
            user_id=self._chat[0],
            session_id=self._chat[1],
            new_message=plan.new_message,
            state_delta=plan.state_delta,
            run_config=self._runners.run_config(self._stamps(), self._chat),
            abort_signal=self._stop.stopped,
        )
        async with aclosing(run) as events:
            async for event in events:
                yield event
        for compaction in compactions:
            yield compaction


def _is_abort(event: Event) -> bool:
    code = event.error_code
    return code is not None and str(getattr(code, "name", code)) == ABORTED_CODE
