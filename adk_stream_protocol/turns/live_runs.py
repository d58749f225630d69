"""The ADK ``run_live`` of one ``/live`` socket: its request queue, its task, and where the
live model is in its own turn.

One run serves every message of the socket; a regenerate or an edit closes it and opens
another on the rewound session (``reopen``). The run knows nothing of responses, turns or
sockets: it reports (``RunReports``) each event, each data part its tools send (``ToolData``)
and its failure (``RunFailed``) to whoever drives the socket, which hands them to its current
turn. It discards what the client did not ask for until that model turn ends: the tail of a
turn interrupted or abandoned by a new message, and the answer to a history that ends on the
user's side, which the model gives as it connects.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from google.adk.agents import LiveRequest, LiveRequestQueue
from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.observability.telemetry import LiveRunTrace, ResponseObserver, Telemetry
from adk_stream_protocol.protocol.chunks import DataChunk
from adk_stream_protocol.protocol.shared_state import SharedState
from adk_stream_protocol.store.history import (
    CARRIED_STAMPS_KEY,
    RESPONSE_ID_KEY,
    ends_on_users_side,
)
from adk_stream_protocol.turns.background_tasks import BackgroundTasks
from adk_stream_protocol.turns.chat_tools import ChatTools
from adk_stream_protocol.turns.late_results import settle_late_results
from adk_stream_protocol.turns.recovery import finish_cut_run, stored_recovery
from adk_stream_protocol.turns.response import ChatParts
from adk_stream_protocol.turns.runners import Runners

logger = logging.getLogger(__name__)

# How long a new message waits for the model to close a turn it abandons.
TURN_END_WAIT_SECONDS = 10.0
# How long a closing socket lets the run end on its own before cancelling it.
_CLOSE_WAIT_SECONDS = 2.0


@dataclass(frozen=True)
class ToolData:
    """A data part a tool of the run sent while it ran (``send_data``), and the id of its
    call."""

    chunk: DataChunk
    call_id: str | None


@dataclass(frozen=True)
class RunFailed:
    """The run failed after the client's input had used it."""

    error: Exception


RunReport = Event | ToolData | RunFailed


class _Handover:
    """One report, and its reporter waiting until it was handled."""

    __slots__ = ("handled", "report")

    def __init__(self, report: RunReport) -> None:
        self.report = report
        self.handled: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class RunReports:
    """What a run reports to whoever drives its socket, in order and one at a time.

    A report is handed over as a call would be: its reporter goes on once the driver has
    handled it and asks for the next (``next``). So the run reads ADK's next event only
    after the last one reached the turn, and a tool goes on once its data part has.
    """

    def __init__(self) -> None:
        self._waiting: deque[_Handover] = deque()
        self._arrived = asyncio.Event()
        self._handling: _Handover | None = None
        self._closed = False

    async def put(self, report: RunReport) -> None:
        """Hand ``report`` over; returns once it was handled (at once when nobody drives)."""
        if self._closed:
            return
        handover = _Handover(report)
        self._waiting.append(handover)
        self._arrived.set()
        try:
            await handover.handled
        except asyncio.CancelledError:
            if handover in self._waiting:  # never handed over: it goes with its reporter
                self._waiting.remove(handover)
            raise

    async def next(self) -> RunReport | None:
        """The last report is handled: the next one, once it comes; None once closed."""
        self._done_with_last()
        while not self._waiting:
            if self._closed:
                return None
            self._arrived.clear()
            await self._arrived.wait()
        self._handling = self._waiting.popleft()
        return self._handling.report

    def close(self) -> None:
        """Nobody drives the socket any more: no reporter waits from now on."""
        self._closed = True
        self._done_with_last()
        while self._waiting:
            _handled(self._waiting.popleft())
        self._arrived.set()

    def _done_with_last(self) -> None:
        if self._handling is not None:
            _handled(self._handling)
            self._handling = None


def _handled(handover: _Handover) -> None:
    if not handover.handled.done():
        handover.handled.set_result(None)


class LiveRun:
    """A socket's ``run_live``: what the client sends the model goes in (``queue``,
    ``send_content``, ``send_state``); what comes out is reported (``reports``)."""

    def __init__(
        self,
        chat: ChatKey,
        runners: Runners,
        tools: ChatTools,
        *,
        telemetry: Telemetry,
        tasks: BackgroundTasks,
    ) -> None:
        self._chat = chat
        self._runners = runners
        self._tools = tools
        self._telemetry = telemetry
        self._tasks = tasks
        self.reports = RunReports()
        # The artifacts the run's tools save, read for the socket's responses.
        self._files = runners.chat_artifacts(*chat)
        self.queue = LiveRequestQueue()
        self._task: asyncio.Task[None] | None = None
        # Set between the live model's turns (after turn_complete), clear inside one.
        self._model_idle = asyncio.Event()
        self._model_idle.set()
        self._discard_until_turn_end = False
        self._used = False  # whether the client's input has used the run yet
        self._closing = False  # ``close`` ends the run: what it raises on its way out is logged
        self._early_failure: Exception | None = None
        self._trace: LiveRunTrace | None = None  # the run's span, once it started
        self._observer: ResponseObserver | None = None  # of the socket's latest response
        # The chat's shared state, from the session the run starts on and every event of the
        # run, those of no response too.
        self.shared_state: SharedState | None = None

    @property
    def model_busy(self) -> bool:
        return not self._model_idle.is_set()

    async def start(self) -> None:
        """Start when the socket opens, as ADK's ``/run_live`` does: opening the session, the
        flow's preparation and the model's connection then happen before the first message,
        not inside its time to first text. If the session cannot be opened now, the first
        input tries again and reports it."""
        try:
            await self._ensure_started()
        except RequestError as exc:  # the session store's outage, logged where it was met
            logger.info("live run not started at connect chat=%s: %s", self._chat[1], exc)
        except Exception:
            logger.warning("live run not started at connect chat=%s", self._chat[1], exc_info=True)

    async def use(self) -> Exception | None:
        """The client's input needs the run. Returns the failure of a run that ended before
        any input used it, for that input's response to report."""
        await self._ensure_started()
        self._used = True
        failure, self._early_failure = self._early_failure, None
        return failure

    async def _ensure_started(self) -> None:
        # The session exists and holds the history before the run: the live model receives
        # that history when it connects.
        if self._task is None:
            await self._finish_cut_turn()
            session = await self._runners.sessions.open(*self._chat)
            if self.shared_state is None:
                self.shared_state = self._runners.shared_state(session.state)
            else:  # reopened on a rewound chat: what the rewind gave back is sent
                self.shared_state.reset(session.state)
            if ends_on_users_side(session.events):
                # ADK has the model answer such a history as it connects (after a socket left
                # calls waiting, or a rewind to after abandoned ones). Nobody asked for that
                # answer: it is dropped, and the first message waits for it to end.
                self._model_idle.clear()
                self._discard_until_turn_end = True
            self._trace = self._telemetry.live_run(self._chat[1])
            with self._trace.current():  # ADK's spans of the run nest under the run's span
                self._task = self._tasks.spawn(self._run(), name=f"live:{self._chat[1]}")

    async def _finish_cut_turn(self) -> None:
        """A turn whose run was cut short (a crash) is finished before the model connects,
        unseen: the model then gets the whole history."""
        chat = self._chat
        # Results of a run that lost the chat first: they may finish the turn.
        await settle_late_results(self._runners, chat)
        recovery = await stored_recovery(self._runners, chat)
        if recovery is None:
            return
        run = finish_cut_run(
            self._runners,
            chat,
            recovery,
            stamps={RESPONSE_ID_KEY: uuid.uuid4().hex},
            abort_signal=asyncio.Event(),
        )
        async with aclosing(run) as events:
            async for _ in events:
                pass

    def observe_response(self, *, continuation: bool) -> ResponseObserver:
        """The span and metrics of a response of this socket, under the run's span. The run
        outlives the responses: it ends one that the socket left open (``close``)."""
        self._observer = self._telemetry.response(
            self._chat[1],
            "live",
            ai_sdk=6,
            continuation=continuation,
            parent=self._trace.context if self._trace is not None else None,
        )
        return self._observer

    def chat_parts(self) -> ChatParts:
        """What one response of this socket sends of its chat beside the model's answer:
        the artifacts the run's tools save, the chat's shared state as the run keeps it, who
        answered."""
        return ChatParts(
            files=self._files,
            shared_state=self.shared_state,
            authors=self._runners.step_authors(live=True),
        )

    def send_state(self, delta: Mapping[str, Any] | None, *, answers: bool = False) -> None:
        """The page's changes to the shared state, stored by the run as a user event: with a
        new message, before its content (ADK's ``LiveRequest.state_delta``); with answers,
        when the call they answer goes on (``PageStates``)."""
        page_states = self._tools.page_states
        if answers:
            if delta:
                page_states.put(self._chat, dict(delta))
        else:  # with what no answer took
            delta = {**page_states.take(self._chat), **(delta or {})}
            if delta:
                self.queue.send(LiveRequest(state_delta=delta))
        if delta and self.shared_state is not None:
            self.shared_state.update(delta)

    def send_content(self, content: types.Content, *, stamps: dict[str, str] | None = None) -> None:
        """Send user content; ``stamps`` go into the metadata of the event ADK stores for it
        (``history.carry_stamps``)."""
        self._model_idle.clear()  # the model's turn has begun; it ends with turn_complete
        delta = {CARRIED_STAMPS_KEY: stamps} if stamps else None
        self.queue.send(LiveRequest(content=content, state_delta=delta))

    async def _report_data(self, chunk: DataChunk, call_id: str | None) -> None:
        """The route of the run's tools' data parts (``ToolUiPlugin``): reported in turn."""
        await self.reports.put(ToolData(chunk, call_id))

    def discard_rest_of_model_turn(self) -> None:
        """Drop what the model still sends of its current turn (if it is in one): a voice
        turn stopped before any audio has no turn_complete to wait for."""
        self._discard_until_turn_end = self.model_busy

    async def wait_model_idle(self) -> None:
        """Let the model finish a turn the client abandoned, so none of its ending lands in
        the next response."""
        if not self.model_busy:
            return
        self._discard_until_turn_end = True
        try:
            await asyncio.wait_for(self._model_idle.wait(), TURN_END_WAIT_SECONDS)
        except TimeoutError:
            logger.warning("live turn did not end chat=%s; continuing", self._chat[1])

    async def reopen(self) -> None:
        """Start another run after ``close``, on the session as it is now (a rewound chat):
        the live model receives a chat's history only when it connects."""
        self.queue = LiveRequestQueue()
        self._task, self._trace, self._observer = None, None, None
        self._model_idle.set()
        self._discard_until_turn_end = False
        self._closing = False
        await self.start()

    async def close(self) -> None:
        self._closing = True
        self.queue.close()
        self._tools.page_states.take(self._chat)  # nobody stores them now
        if self._observer is not None:
            self._observer.end()  # a no-op once the response ended
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), _CLOSE_WAIT_SECONDS)
        except BaseException as exc:  # too slow, failed, or we are cancelled ourselves
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            if not isinstance(exc, Exception):
                raise
        finally:
            if self._trace is not None:
                self._trace.end()

    async def _run(self) -> None:
        routes = self._tools.ui
        routes.open_route(self._chat, self._report_data)
        try:
            async for event in self._runners.live_runner.run_live(
                user_id=self._chat[0],
                session_id=self._chat[1],
                live_request_queue=self.queue,
                run_config=self._runners.live_run_config(),
            ):
                await self._dispatch(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._closing:  # e.g. an agent's after-agent callback: no turn is open now
                logger.warning(
                    "live run of chat=%s failed as it ended", self._chat[1], exc_info=True
                )
                return
            if not self._used:
                self._early_failure = exc  # reported by the first input (see ``use``)
                return
            await self.reports.put(RunFailed(exc))
        finally:
            routes.close_route(self._chat, self._report_data)

    async def _dispatch(self, event: Event) -> None:
        if self.shared_state is not None:
            self.shared_state.observe(event)
        if event.turn_complete:
            self._model_idle.set()
        elif event.content is not None or event.output_transcription is not None:
            # The model speaks. Not an agent's own event without content (a before-agent
            # callback's state change, before the model has said anything): taken for the
            # model's turn, it made the next message wait for a turn_complete never coming.
            self._model_idle.clear()
        if self._discard_until_turn_end:
            # An interrupted turn still ends with turn_complete (after `interrupted`).
            if event.turn_complete:
                self._discard_until_turn_end = False
            return
        await self.reports.put(event)
