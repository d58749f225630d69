"""The ``Bridge``: what one running application shares between its requests.

It holds the settings, the two ADK runners (``run_async`` for ``/stream``, ``run_live`` with
the approval gate for ``/live``), the chats' sessions and their index (``chats``: what each
chat's page holds, for listing and restoring), the coordination seams and the process's
response slots. The application builds one at start-up (``app.state.bridge``);
the transports reach it through ``bridge_of``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, NamedTuple

from google.adk.agents import BaseAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps import App
from google.adk.plugins import plugin_manager
from google.adk.runners import Runner
from google.adk.sessions import Session
from google.genai import types
from starlette.datastructures import State

from adk_stream_protocol.coordination.base import (
    ChatKey,
    ChatLease,
    Coordination,
    ResponseLog,
    StopSubscription,
    WaitingCall,
)
from adk_stream_protocol.foundation.limits import ResponseSlots
from adk_stream_protocol.foundation.outages import Outages, outage_of
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.observability.adk_telemetry import RunTelemetry
from adk_stream_protocol.observability.metrics import Metrics
from adk_stream_protocol.observability.recording import Recorder
from adk_stream_protocol.observability.telemetry import Telemetry
from adk_stream_protocol.plugins.approvals import LiveApprovalPlugin
from adk_stream_protocol.plugins.chain import chained
from adk_stream_protocol.plugins.page_states import PageStates
from adk_stream_protocol.plugins.running_tools import RunningTools
from adk_stream_protocol.plugins.steering import SteeringPlugin
from adk_stream_protocol.plugins.tool_starts import ToolStartPlugin
from adk_stream_protocol.plugins.tool_ui import ToolUiPlugin
from adk_stream_protocol.protocol.chunks import AiSdkVersion, Transport
from adk_stream_protocol.protocol.shared_state import SharedState
from adk_stream_protocol.protocol.step_authors import StepAuthors
from adk_stream_protocol.protocol.ui_messages import ChatRequest
from adk_stream_protocol.store.artifact_files import ChatArtifacts, create_artifact_service
from adk_stream_protocol.store.chat_tables import create_chat_index
from adk_stream_protocol.store.result_outbox import ResultOutbox
from adk_stream_protocol.store.rewinds import rewind_before_event
from adk_stream_protocol.store.sessions import ChatSessions, create_session_service
from adk_stream_protocol.turns.chat_records import (
    ResponseRecords,
    open_records,
    record_unanswered,
)
from adk_stream_protocol.turns.drain import Drain
from adk_stream_protocol.turns.response import UnloggedResponse

logger = logging.getLogger(__name__)

# The names our plugin chains are registered under, in each runner (docs/adr/0053).
PLUGINS = "adk_stream_protocol"
LIVE_PLUGINS = "adk_stream_protocol_live"

# What the server runs: an ADK agent, or an App around one.
AgentLike = BaseAgent | App

# The client says when the user starts and stops speaking (audio_control frames).
_CLIENT_SIDE_VAD = types.RealtimeInputConfig(
    automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
)


class OpenedResponse(NamedTuple):
    """A response's stop signal, chunk log and records (``Bridge.open_response``)."""

    stop: StopSubscription
    log: ResponseLog
    records: ResponseRecords


class Bridge:
    """Everything one running application shares: settings, runners, chats, coordination,
    response slots and background tasks."""

    def __init__(
        self,
        settings: Settings,
        agent: AgentLike,
        live_agent: AgentLike,
        coordination: Coordination,
        *,
        outages: Outages | None = None,
    ) -> None:
        self.settings = settings
        # Which stores are down: one WARNING per outage, an INFO when it ends (ADR 0030).
        self.outages = outages or Outages()
        self.coordination = coordination
        self.telemetry = Telemetry(Metrics() if settings.metrics else None)
        # Every run's telemetry switches, read from the environment once: a run given none
        # builds them anew several times per streamed partial (docs/adr/0049), and given as
        # fields they are read without a fallback (docs/adr/0055). A run nothing observes
        # gets the cheapest (the amendment).
        self.run_telemetry = RunTelemetry()
        # A run_async turn's configuration but for its stamps, validated once per telemetry
        # config: each turn copies one (ADR 0049; RunConfig's validation reads the
        # environment every time).
        self._stream_run_configs = {
            config: RunConfig(streaming_mode=StreamingMode.SSE, telemetry=config)
            for config in (self.run_telemetry.observed, self.run_telemetry.unobserved)
        }
        # A tool's result the store could not take is written when it is back (ADR 0035).
        self.outbox = ResultOutbox(
            create_session_service(settings.session_store),
            self.outages,
            retry_seconds=settings.result_retry_seconds,
        )
        service = self.outbox
        # Each chat's messages as its page held them, beside the sessions (docs/adr/0043).
        self.chats = create_chat_index(settings.session_store, service)
        self.artifact_service = create_artifact_service(settings.artifact_store)
        # Tools send data parts to the response of their chat (docs/adr/0025).
        self.tool_ui = ToolUiPlugin()
        # Every tool start is stored before its body runs (docs/adr/0032).
        self.tool_starts = ToolStartPlugin(service)
        app = agent if isinstance(agent, App) else App(name=settings.app_name, root_agent=agent)
        # Which tools run now, first so that it sees every call end (docs/adr/0033).
        self.running_tools = RunningTools()
        # Steering messages of a resumed turn reach the model (docs/adr/0022). Ours are
        # registered as one plugin where the app's order allows (docs/adr/0053).
        steered = app.model_copy(
            update={
                "plugins": chained(
                    PLUGINS,
                    [self.running_tools],
                    app.plugins,
                    [SteeringPlugin(), self.tool_ui, self.tool_starts],
                )
            }
        )
        self.runner = Runner(
            app=steered, session_service=service, artifact_service=self.artifact_service
        )
        # /live gates tools itself (ADK live cannot confirm): the same app plus our plugin.
        live_app = (
            live_agent
            if isinstance(live_agent, App)
            else app.model_copy(update={"root_agent": live_agent})
        )
        # The page's changes sent with an answer on /live, stored by the gate (ADR 0044).
        self.page_states = PageStates()
        gate = self.live_gate = LiveApprovalPlugin(
            coordination.pending,
            settings.approval_timeout_seconds,
            on_outcome=lambda outcome: self.telemetry.approval_outcome("live", outcome),
            page_states=self.page_states,
            append=self.tool_starts.append,
        )
        # Each runner registers the app's plugins; ADK logs each registration, so the plugins
        # both runners carry would be announced twice at every start.
        with _quiet_registrations(p.name for p in steered.plugins):
            self.live_runner = Runner(
                app=live_app.model_copy(
                    update={
                        "plugins": chained(
                            LIVE_PLUGINS,
                            [],
                            live_app.plugins,
                            [gate, self.tool_ui, self.tool_starts],
                        )
                    }
                ),
                session_service=service,
                artifact_service=self.artifact_service,
            )
        # Who answered is told only where more than one agent can (docs/adr/0044).
        self._named_authors = bool(getattr(app.root_agent, "sub_agents", None))
        self._named_live_authors = bool(getattr(live_app.root_agent, "sub_agents", None))
        self.sessions = ChatSessions(service, app.name, self.outages)
        self.response_slots = ResponseSlots(settings.max_concurrent_responses)
        self.recorder = Recorder(settings.record_dir)
        self._tasks: set[asyncio.Task[Any]] = set()
        # What a restart ends, and whether one is under way (docs/adr/0033).
        self.drain = Drain()

    async def prepare(self) -> None:
        """Get the stores ready before the first request: the sessions' tables, then the
        chat index's beside them."""
        await self.sessions.prepare()
        await self.chats.prepare()

    def chat_artifacts(self, user_id: str, chat_id: str) -> ChatArtifacts:
        return ChatArtifacts(
            self.artifact_service,
            app_name=self.sessions.app_name,
            user_id=user_id,
            chat_id=chat_id,
            inline_max_bytes=self.settings.artifact_inline_max_bytes,
            root_path=self.settings.root_path,
        )

    async def rewind(self, session: Session, before_event_id: str) -> None:
        """Rewind a chat to just before one of its events: history, state and artifacts
        (docs/adr/0036, docs/adr/0046)."""
        await rewind_before_event(
            self.runner,
            self.sessions.service,
            session,
            before_event_id,
            artifacts=self.artifact_service,
        )

    def shared_state(self, state: Mapping[str, Any]) -> SharedState | None:
        """A chat's shared state from its session's, or None when nothing is shared."""
        prefix = self.settings.shared_state_prefix
        return SharedState(prefix, state) if prefix else None

    def step_authors(self, *, live: bool = False) -> StepAuthors | None:
        """Who answered, for one response; None for an app of one agent."""
        named = self._named_live_authors if live else self._named_authors
        return StepAuthors() if named else None

    async def open_response_log(self, chat: ChatKey, lease: ChatLease) -> ResponseLog:
        """A new response's chunk log, or none while its store is unavailable: the response
        still reaches its own client; only a resume of it would find nothing (ADR 0030)."""
        try:
            return await self.coordination.chunk_logs.open(chat, lease)
        except Exception as exc:
            store = outage_of(exc)
            if store is None:
                raise
            self.outages.down(store, exc, f"opening a response log of chat={chat[1]}")
            return UnloggedResponse()

    async def open_records(
        self,
        transport: Transport,
        chat: ChatKey,
        request: ChatRequest | None,
        *,
        ai_sdk: AiSdkVersion | None = None,
    ) -> ResponseRecords:
        """A new response's records: the chat's messages (ADR 0042), and its recording."""
        chats, app = self.chats, self.sessions.app_name
        return await open_records(
            chats, app, self.recorder, transport, chat, request, ai_sdk=ai_sdk
        )

    @asynccontextmanager
    async def opening_response(self, chat: ChatKey, lease: ChatLease) -> AsyncIterator[ResponseLog]:
        """A new response's chunk log, opened as soon as the chat's lease is held: from here
        the chat reads as answering, so a page that reloads while the turn is planned and
        its messages stored resumes it (ADR 0045). Closed again if the turn never starts."""
        log = await self.open_response_log(chat, lease)
        try:
            yield log
        except BaseException:
            await log.close()
            raise

    async def open_response(
        self,
        transport: Transport,
        chat: ChatKey,
        request: ChatRequest | None,
        log: ResponseLog,
        *,
        ai_sdk: AiSdkVersion | None = None,
    ) -> OpenedResponse:
        """What a response of ``run_async`` needs besides its log (``opening_response``):
        the chat's stop signal, then its records, the request's messages stored."""
        stop = await self.coordination.stops.subscribe(chat)
        try:
            records = await self.open_records(transport, chat, request, ai_sdk=ai_sdk)
        except BaseException:
            await stop.close()
            raise
        return OpenedResponse(stop, log, records)

    async def record_unanswered(self, chat: ChatKey, calls: Sequence[WaitingCall]) -> None:
        """Calls their socket left unanswered, ended so in the chat's record (ADR 0042)."""
        await record_unanswered(self.chats, self.sessions.app_name, chat, calls)

    def run_config(self, custom_metadata: dict[str, Any]) -> RunConfig:
        """A ``run_async`` turn's configuration; ``custom_metadata``: its events' stamps."""
        prepared = self._stream_run_configs[self.run_telemetry.current()]
        return prepared.model_copy(update={"custom_metadata": custom_metadata})

    def live_run_config(self) -> RunConfig:
        telemetry = self.run_telemetry.current()
        if self.settings.live_modality == "AUDIO":
            return RunConfig(
                telemetry=telemetry,
                response_modalities=["AUDIO"],
                output_audio_transcription=types.AudioTranscriptionConfig(),
                input_audio_transcription=types.AudioTranscriptionConfig(),
                realtime_input_config=_CLIENT_SIDE_VAD,
            )
        return RunConfig(
            telemetry=telemetry,
            response_modalities=["TEXT"],
            output_audio_transcription=None,
            input_audio_transcription=types.AudioTranscriptionConfig(),
            realtime_input_config=_CLIENT_SIDE_VAD,
        )

    def spawn(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        """Run a background task that the bridge keeps alive and cancels on shutdown."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.chats.close()
        await self.outbox.close()
        await self.recorder.close()
        await self.runner.close()
        await self.live_runner.close()


def bridge_of(state: State) -> Bridge:
    """The application's bridge, from ``request.app.state`` (set by the lifespan)."""
    bridge: Bridge = state.bridge
    return bridge


# ADK's line for a plugin a runner registers (google.adk.plugins.plugin_manager).
_REGISTERED = "Plugin '%s' registered."


class _AlreadyRegistered(logging.Filter):
    """Drops ADK's registration line of the plugins named (announced once already)."""

    def __init__(self, names: Iterable[str]) -> None:
        super().__init__()
        self._names = frozenset(names)

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.msg == _REGISTERED and args[:1] and args[0] in self._names)


@contextmanager
def _quiet_registrations(names: Iterable[str]) -> Iterator[None]:
    """While a second runner is built: no second registration line for ``names``."""
    quiet = _AlreadyRegistered(names)
    plugin_manager.logger.addFilter(quiet)
    try:
        yield
    finally:
        plugin_manager.logger.removeFilter(quiet)
