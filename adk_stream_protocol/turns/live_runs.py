"""The ADK ``run_live`` of one ``/live`` socket: its request queue, its task, and where the
live model is in its own turn.

One run serves every message of the socket; a regenerate or an edit closes it and opens
another on the rewound session (``reopen``, docs/adr/0046). The run knows nothing of
responses: it hands each event to ``on_event`` (the connection's current turn), except what
the client did not ask for, which it discards until that model turn ends: the tail of a turn
interrupted or abandoned by a new message, and the answer to a history that ends on the
user's side, which the model gives as it connects.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import aclosing
from typing import Any

from google.adk.agents import LiveRequest, LiveRequestQueue
from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.observability.telemetry import LiveRunTrace, ResponseObserver
from adk_stream_protocol.plugins.tool_ui import DataRoute
from adk_stream_protocol.protocol.chunks import DataChunk
from adk_stream_protocol.protocol.shared_state import SharedState
from adk_stream_protocol.protocol.step_authors import StepAuthors
from adk_stream_protocol.store.history import (
    CARRIED_STAMPS_KEY,
    RESPONSE_ID_KEY,
    ends_on_users_side,
)
from adk_stream_protocol.turns.bridge import Bridge
from adk_stream_protocol.turns.recovery import finish_cut_run, stored_recovery

logger = logging.getLogger(__name__)

# How long a new message waits for the model to close a turn it abandons.
TURN_END_WAIT_SECONDS = 10.0
# How long a closing socket lets the run end on its own before cancelling it.
_CLOSE_WAIT_SECONDS = 2.0


class LiveRun:
    def __init__(
        self,
        bridge: Bridge,
        user_id: str,
        chat_id: str,
        *,
        on_event: Callable[[Event], Awaitable[None]],
        on_failure: Callable[[Exception], Awaitable[None]],
    ) -> None:
        self._bridge = bridge
        self._user_id = user_id
        self._chat_id = chat_id
        self._on_event = on_event
        self._on_failure = on_failure
        # What the run's tools send the page goes to the turn that opened the last response
        # (docs/adr/0025); the artifacts they save are read from here.
        self._data_to: DataRoute | None = None
        self.artifacts = bridge.chat_artifacts(user_id, chat_id)
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
        # run, those of no response too (docs/adr/0044).
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
            logger.info("live run not started at connect chat=%s: %s", self._chat_id, exc)
        except Exception:
            logger.warning("live run not started at connect chat=%s", self._chat_id, exc_info=True)

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
            session = await self._bridge.sessions.open(self._user_id, self._chat_id)
            if self.shared_state is None:
                self.shared_state = self._bridge.shared_state(session.state)
            else:  # reopened on a rewound chat: what the rewind gave back is sent
                self.shared_state.reset(session.state)
            if ends_on_users_side(session.events):
                # ADK has the model answer such a history as it connects (after a socket left
                # calls waiting, or a rewind to after abandoned ones). Nobody asked for that
                # answer: it is dropped, and the first message waits for it to end.
                self._model_idle.clear()
                self._discard_until_turn_end = True
            self._trace = self._bridge.telemetry.live_run(self._chat_id)
            with self._trace.current():  # ADK's spans of the run nest under the run's span
                self._task = self._bridge.spawn(self._run(), name=f"live:{self._chat_id}")

    async def _finish_cut_turn(self) -> None:
        """A turn whose run was cut short (a crash) is finished before the model connects,
        unseen: the model then gets the whole history (docs/adr/0032)."""
        chat = (self._user_id, self._chat_id)
        recovery = await stored_recovery(self._bridge, chat)
        if recovery is None:
            return
        run = finish_cut_run(
            self._bridge,
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
        self._observer = self._bridge.telemetry.response(
            self._chat_id,
            "live",
            ai_sdk=6,
            continuation=continuation,
            parent=self._trace.context if self._trace is not None else None,
        )
        return self._observer

    def step_authors(self) -> StepAuthors | None:
        """Who answered, for one response of this socket (docs/adr/0044)."""
        return self._bridge.step_authors(live=True)

    def send_state(self, delta: Mapping[str, Any] | None, *, answers: bool = False) -> None:
        """The page's changes to the shared state, stored by the run as a user event: with a
        new message, before its content (ADK's ``LiveRequest.state_delta``); with answers,
        when the call they answer goes on (``PageStates``)."""
        chat = (self._user_id, self._chat_id)
        if answers:
            if delta:
                self._bridge.page_states.put(chat, dict(delta))
        else:  # with what no answer took
            delta = {**self._bridge.page_states.take(chat), **(delta or {})}
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

    def send_data_to(self, route: DataRoute) -> None:
        self._data_to = route

    async def _route_data(self, chunk: DataChunk, call_id: str | None) -> None:
        if self._data_to is not None:
            await self._data_to(chunk, call_id)

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
            logger.warning("live turn did not end chat=%s; continuing", self._chat_id)

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
        self._bridge.page_states.take((self._user_id, self._chat_id))  # nobody stores them now
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
        chat = (self._user_id, self._chat_id)
        self._bridge.tool_ui.open_route(chat, self._route_data)
        try:
            async for event in self._bridge.live_runner.run_live(
                user_id=self._user_id,
                session_id=self._chat_id,
                live_request_queue=self.queue,
                run_config=self._bridge.live_run_config(),
            ):
                await self._dispatch(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._closing:  # e.g. an agent's after-agent callback: no turn is open now
                logger.warning(
                    "live run of chat=%s failed as it ended", self._chat_id, exc_info=True
                )
                return
            if not self._used:
                self._early_failure = exc  # reported by the first input (see ``use``)
                return
            await self._on_failure(exc)
        finally:
            self._bridge.tool_ui.close_route(chat, self._route_data)

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
        await self._on_event(event)
