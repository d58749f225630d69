"""One turn on a ``/live`` socket: a user message, and every response until the model's
answer is complete.

A turn opens a response for its message, and another for each continuation (the client's
approvals and browser results). Each response ends with ``[DONE]`` when the model's turn
completes, when it is interrupted, or when the turn pauses for the client. The turn owns what
lasts across its responses: the calls made so far, the approvals asked, the chunks held back
for its final response, and events that arrived while no response was open. A new message
starts a new turn, so none of it outlives the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.coordination.base import ChatKey, PendingCalls, WaitingCall
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.observability.telemetry import ResponseObserver
from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk, FinishReason
from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.protocol.tool_calls import Confirmation, TurnCalls
from adk_stream_protocol.protocol.ui_messages import UIMessage
from adk_stream_protocol.turns.answers import (
    Answers,
    OpenInterrupts,
    check_complete,
    collect_answers,
    take_steering,
)
from adk_stream_protocol.turns.background_tasks import BackgroundTasks
from adk_stream_protocol.turns.deferral import Deferral
from adk_stream_protocol.turns.live_runs import LiveRun
from adk_stream_protocol.turns.response import ChatParts, Delivery, Response

logger = logging.getLogger(__name__)


class LiveResponse(Response):
    """A response on the socket, and what it needs to know to end when it pauses."""

    def __init__(
        self,
        converter: StreamProtocolConverter,
        delivery: Delivery,
        *,
        on_end: Callable[[], None],
        parts: ChatParts,
        deferral: Deferral | None,
        observer: ResponseObserver,
    ) -> None:
        super().__init__(converter, delivery, parts=parts, deferral=deferral, observer=observer)
        self.calls = TurnCalls()  # the calls this response made, and their results
        self.announced: set[str] = set()  # approval ids whose requests it sent
        self.on_end = on_end  # gives back the process's response slot


class LiveTurn:
    """One user message on the socket, and every response until its answer is complete.
    The connection drives it (the run's events, the calls that wait, the client's frames);
    it sends the model what its responses need through the socket's ``LiveRun``."""

    def __init__(
        self,
        chat: ChatKey,
        run: LiveRun,
        *,
        user_message_id: str | None,
        pending: PendingCalls,
        settings: Settings,
        tasks: BackgroundTasks,
    ) -> None:
        self._chat = chat
        self._settings = settings
        self._run = run
        self._pending = pending
        self._tasks = tasks
        # The user message the turn answers: the same one sent again is refused.
        self.user_message_id = user_message_id
        self.calls = TurnCalls()  # every call of the turn, from the run's events
        self._delivered: set[str] = set()  # browser calls whose result the client gave
        # Calls the user denied: their result (the refusal) reaches the turn's events only with
        # the other results of their step, but the browser owes nothing for them.
        self._denied: set[str] = set()
        self._rearm: set[str] = set()  # approved browser calls to hand back to the browser
        self._unannounced: list[WaitingCall] = []  # approvals whose call event is still due
        self._held: list[BaseChunk] = []  # held back for the turn's final response
        self._backlog: list[Event] = []  # arrived while no response was open
        self._steered: set[str] = set()  # ids of the steering messages this turn took
        self._steering: list[types.Part] = []  # taken, for when the model's turn completes
        # The model goes on with answers the socket gave (a decision, a browser result) and
        # has not completed its turn yet: a continuation that brings nothing new is answered
        # with the rest of it, whenever the client sends it (docs/adr/0011).
        self._working = False
        self.response: LiveResponse | None = None
        self._ending: LiveResponse | None = None  # the last response closed, maybe still ending

    # -- responses ----------------------------------------------------------------------------

    async def open_response(
        self,
        message_id: str,
        delivery: Delivery,
        *,
        on_end: Callable[[], None],
        continuation: bool = False,
        denied: set[str] | None = None,
        page_state: dict[str, Any] | None = None,
    ) -> LiveResponse:
        """The next response of the turn; ``on_end``: called as it closes (it gives back
        the process's response slot); ``page_state``: the request's changes to the shared
        state, stored by the run before the model goes on."""
        self._run.send_state(page_state, answers=continuation)
        converter = StreamProtocolConverter(
            message_id=message_id,
            error_detail=self._settings.error_detail,
            # Also those denied in an earlier response: their refusal comes with their step.
            denied_tool_call_ids=(denied or set()) | self._denied,
            # A new message holds no earlier calls; a continuation holds this turn's calls.
            known_tool_call_ids=set(self.calls.calls) if continuation else set(),
        )
        defer = continuation and not self._settings.stream_intermediate_results
        response = LiveResponse(
            converter,
            delivery,
            on_end=on_end,
            parts=self._run.chat_parts(),
            deferral=Deferral(self._held) if defer else None,
            observer=self._run.observe_response(continuation=continuation),
        )
        self.response = response
        await response.start()
        return response

    async def end_response(self, reason: FinishReason | None = None) -> None:
        response = self._close_response()
        if response is not None:
            held = await response.finish(reason)
            if response.deferring:
                self._held = held

    async def fail_response(self, exc: Exception, *, error_text: str | None = None) -> bool:
        """End the open response with an ``error`` chunk and ``[DONE]``; False if none is.
        ``error_text``: a failure already understood and logged (a store's outage)."""
        response = self._close_response()
        if response is None:
            return False
        await response.fail(exc, error_text=error_text)
        self._held = []
        return True

    def _close_response(self) -> LiveResponse | None:
        response, self.response = self.response, None
        if response is not None:
            self._ending = response
            response.on_end()
        return response

    async def end_if_paused(self) -> None:
        """End the response when its turn waits only for the client."""
        response = self.response
        if response is None or not response.awaiting_client:
            return
        waiting = await self._pending.waiting(self._chat)
        if any(w.approval_id and w.approval_id not in response.announced for w in waiting):
            return  # an approval request is about to be sent in this response
        if response.calls.unsettled() - {w.call_id for w in waiting}:
            return  # a tool of this step has not run yet: its result or request belongs here
        await self.end_response()

    # -- the run's events ---------------------------------------------------------------------

    async def on_event(self, event: Event) -> None:
        if event.turn_complete or event.interrupted:
            self._working = False
        response = self.response
        if response is None:
            self._backlog.append(event)
            return
        self.calls.observe(event)
        response.calls.observe(event)
        await response.convert(event)
        await self._announce_known_calls(response)
        if event.turn_complete and self._steering:
            self._steer()  # the response goes on with the model's answer to it
        elif event.turn_complete:
            await self.end_response()
        elif event.interrupted:
            self._run.discard_rest_of_model_turn()
            await self.end_response(reason="other")
        else:
            await self.end_if_paused()

    async def tool_data(self, chunk: DataChunk, call_id: str | None) -> None:
        """A data part from a tool of this turn, into its open response. A tool of an abandoned
        turn still running has no part in this message: dropped."""
        response = self.response
        if response is not None and (call_id is None or call_id in self.calls.calls):
            await response.tool_data(chunk, call_id)
        else:
            logger.debug("tool data of another turn dropped chat=%s", self._chat[1])

    async def streaming(self) -> bool:
        """Whether a response is open. One already ending (its record being stored) first
        has its [DONE] out: what answers the client's next frame comes after that [DONE]."""
        if self.response is None and self._ending is not None:
            await self._ending.done.wait()
        return self.response is not None

    async def interrupt(self) -> None:
        if not await self.streaming():
            return
        logger.info("live interrupt chat=%s", self._chat[1])
        self._run.discard_rest_of_model_turn()
        await self.end_response(reason="other")

    # -- calls waiting for the client (the approval plugin's, through the connection) ---------

    def on_waiting(self, call: WaitingCall) -> None:
        self._working = False  # the run waits for the client again
        if call.approval_id is not None:  # what the gate stored in the session, folded alike
            self.calls.ask(Confirmation(call.approval_id, call.call_id, call.payload))
        self._tasks.spawn(self._announce(call), name=f"live-call:{self._chat[1]}")

    async def _announce(self, call: WaitingCall) -> None:
        response = self.response
        if response is None:
            logger.info("call %s waits with no open response", call.call_id)
            if call.approval_id is not None:
                self._unannounced.append(call)  # asked in the next response of the turn
            return
        if call.approval_id is None:
            if call.call_id in self._delivered:
                return  # its result came meanwhile: the run has it, nothing waits
            if call.call_id in self._rearm:
                # Approved without its result: the browser runs it now.
                self._rearm.discard(call.call_id)
                name = self.calls.calls.get(call.call_id, "")
                args = self.calls.call_args.get(call.call_id, {})
                announce = self._settings.browser_approval_flow == "on-tool-call"
                await response.rearm(call.call_id, name, args, announce=announce)
            await self.end_if_paused()
        elif call.call_id in self.calls.calls:
            await self._request_approval(response, call)
        else:
            # The tool part must be in the message before its approval request: sent when
            # the call's event arrives.
            self._unannounced.append(call)

    async def _announce_known_calls(self, response: LiveResponse) -> None:
        ready = [c for c in self._unannounced if c.call_id in self.calls.calls]
        for call in ready:
            self._unannounced.remove(call)
            await self._request_approval(response, call)

    async def _request_approval(self, response: LiveResponse, call: WaitingCall) -> None:
        assert call.approval_id is not None
        await response.approval_request(call.approval_id, call.call_id, call.hint, call.payload)
        response.announced.add(call.approval_id)
        await self.end_if_paused()

    # -- the client's answers -----------------------------------------------------------------

    async def plan_continuation(self, message: UIMessage) -> Answers:
        """What the client's message answers (refused with ``RequestError`` if nothing)."""
        held = await self._pending.waiting(self._chat)
        view = OpenInterrupts(
            self.calls,
            delivered=self._delivered,
            denied=self._denied,
            held={w.approval_id for w in held if w.approval_id is not None},
        )
        answers = collect_answers(message, view)
        take_steering(answers, message, self._steered)
        # Events that wait, or the model still at work on answers this socket gave (a
        # tool_result frame, say), are worth a response: it carries the rest of the turn.
        if not (answers.empty() and (self._backlog or self._working)):
            check_complete(answers, message.id, view)
        return answers

    async def apply_answers(self, answers: Answers) -> None:
        """Run what the answers decide, inside the response just opened for them."""
        # Steering waits for the end of the model's turn: user content sent while the model
        # waits for tool results or answers interrupts it.
        self._steered.update(answers.steering_ids)
        self._steering.extend(answers.steering)
        if self.response is not None:
            for decision in answers.decisions:
                self.response.observer.approval_decided(decision.approved)
        backlog, self._backlog = self._backlog, []
        for event in backlog:
            await self.on_event(event)
        if self.response is not None:
            await self._announce_known_calls(self.response)  # asked while none was open
        self._rearm.update(
            c for c in answers.rearmed if c not in answers.outputs and c not in self._delivered
        )
        self._working = self._working or bool(answers.decisions)
        self._denied.update(answers.denied)
        for decision in answers.decisions:
            await self._pending.decide(
                self._chat, decision.approval_id, decision.approved, decision.payload
            )
        for call_id, result in answers.outputs.items():
            await self.deliver(call_id, result)

    def _steer(self) -> None:
        logger.debug("live steering sent chat=%s parts=%d", self._chat[1], len(self._steering))
        content = types.Content(role="user", parts=self._steering)
        self._steering = []
        self._run.send_content(content)

    async def take_result(self, call_id: str, result: Any) -> str | None:
        """A ``tool_result`` frame's output for ``call_id``, delivered; or why it cannot be."""
        if call_id in self._delivered:
            return "its result was given already"
        if call_id in self.calls.answered:
            return "the call has its result"
        if call_id not in self.calls.page_calls:
            return "no browser call of this turn has that id"
        await self.deliver(call_id, result if isinstance(result, dict) else {"result": result})
        return None

    async def deliver(self, call_id: str, result: dict[str, Any]) -> None:
        self._delivered.add(call_id)
        self._rearm.discard(call_id)  # the browser has run it: nothing to hand back
        self._working = True
        await self._pending.deliver(self._chat, call_id, result)
