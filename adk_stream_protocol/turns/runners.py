"""``Runners``: ADK as this application's turns run it.

The two runners (``run_async`` for ``/stream`` and ai 7's socket; ``run_live`` with the
approval gate for ``/live``), each with our plugins registered as one (docs/adr/0053); the
stores they run on (the chats' sessions behind the result outbox, the artifacts, the
memory); every run's configuration; who answered a response; a chat's rewind; whether ADK's
live mode can run the agent at all.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from google.adk.agents import BaseAgent, LoopAgent, ParallelAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps import App
from google.adk.plugins import plugin_manager
from google.adk.runners import Runner
from google.adk.sessions import Session
from google.adk.workflow import BaseNode, Workflow
from google.genai import types

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.foundation.outages import Outages
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.observability.adk_telemetry import RunTelemetry
from adk_stream_protocol.plugins.chain import chained
from adk_stream_protocol.plugins.steering import SteeringPlugin
from adk_stream_protocol.protocol.shared_state import SharedState
from adk_stream_protocol.protocol.step_authors import StepAuthors
from adk_stream_protocol.store.artifact_files import ChatArtifacts, create_artifact_service
from adk_stream_protocol.store.history_window import window_of
from adk_stream_protocol.store.memories import create_memory_service
from adk_stream_protocol.store.result_outbox import ResultOutbox
from adk_stream_protocol.store.rewinds import rewind_before_event
from adk_stream_protocol.store.sessions import ChatSessions
from adk_stream_protocol.turns.chat_tools import ChatTools
from adk_stream_protocol.turns.compaction import guarded
from adk_stream_protocol.turns.response import ChatParts

# The names our plugin chains are registered under, in each runner.
PLUGINS = "adk_stream_protocol"
LIVE_PLUGINS = "adk_stream_protocol_live"

# What the server runs: an ADK agent or graph workflow (ADK 2's nodes, agents among them), or
# an App around one.
AgentLike = BaseNode | App

# The agents ADK's live mode cannot run, wherever they are in the tree (docs/adr/0063): in
# ADK 2.13 the first two raise NotImplementedError from `run_live`, and a graph workflow's
# start node is given no user message there, so its first node fails or waits forever.
_NOT_LIVE = (ParallelAgent, LoopAgent, Workflow)

# The client says when the user starts and stops speaking (audio_control frames).
_CLIENT_SIDE_VAD = types.RealtimeInputConfig(
    automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
)


class Runners:
    """Both runners, the stores they run on, and how each run is configured."""

    def __init__(
        self,
        settings: Settings,
        agent: AgentLike,
        live_agent: AgentLike,
        *,
        outbox: ResultOutbox,
        tools: ChatTools,
        outages: Outages,
    ) -> None:
        self._settings = settings
        # A tool's result the store could not take is written when it is back: the outbox is
        # the session service both runners use.
        self.outbox = outbox
        self.artifacts = create_artifact_service(settings.artifact_store)
        # What `load_memory` and `preload_memory` search, on both runners.
        self.memory = create_memory_service(settings.memory_store, agents_dir=settings.agents_dir)
        # Every run's telemetry switches, read from the environment once: a run given none
        # builds them anew several times per streamed partial (docs/adr/0049), and given as
        # fields they are read without a fallback. A run nothing observes gets the cheapest
        # (docs/adr/0055).
        self.run_telemetry = RunTelemetry()
        # A run_async turn's configuration but for its stamps, validated once per telemetry
        # config: each turn copies one (RunConfig's validation reads the environment every
        # time).
        self._stream_run_configs = {
            config: RunConfig(streaming_mode=StreamingMode.SSE, telemetry=config)
            for config in (self.run_telemetry.observed, self.run_telemetry.unobserved)
        }
        app = agent if isinstance(agent, App) else App(name=settings.app_name, root_agent=agent)
        # Compaction never summarizes a turn that waits for the page.
        app = guarded(app)
        self._compacts = app.events_compaction_config is not None
        # Which tools run now, first so that it sees every call end. Steering messages of a
        # resumed turn reach the model. A sign-in comes back to the server's callback, when it
        # has one (ADK's live flow does not pause for one). Ours are registered as one plugin
        # where the app's order allows.
        steered = app.model_copy(
            update={
                "plugins": chained(
                    PLUGINS,
                    [tools.running],
                    app.plugins,
                    [
                        SteeringPlugin(),
                        tools.ui,
                        tools.starts,
                        *([tools.sign_ins] if tools.sign_ins else []),
                    ],
                )
            }
        )
        self.runner = Runner(
            app=steered,
            session_service=outbox,
            artifact_service=self.artifacts,
            memory_service=self.memory,
        )
        # /live gates tools itself (ADK live cannot confirm): the same app plus our gate.
        live_app = (
            live_agent
            if isinstance(live_agent, App)
            else app.model_copy(update={"root_agent": live_agent})
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
                            [tools.gate, tools.ui, tools.starts],
                        )
                    }
                ),
                session_service=outbox,
                artifact_service=self.artifacts,
                memory_service=self.memory,
            )
        # Why `/live?chatId=` refuses this agent, read once from its tree.
        self.live_refusal = live_refusal(live_app.root_agent)
        # Who answered is told only where more than one agent can.
        self._named_authors = _answered_by_several(app.root_agent)
        self._named_live_authors = _answered_by_several(live_app.root_agent)
        self.sessions = ChatSessions(outbox, app.name, outages)

    def run_config(self, custom_metadata: dict[str, Any], chat: ChatKey | None = None) -> RunConfig:
        """A ``run_async`` turn's configuration; ``custom_metadata``: its events' stamps.
        With compaction on, the run of ``chat`` loads its history from the last compaction on
        (``history_window``)."""
        prepared = self._stream_run_configs[self.run_telemetry.current()]
        update: dict[str, Any] = {"custom_metadata": custom_metadata}
        if self._compacts and chat is not None and self.sessions.cache is not None:
            events = self.sessions.cache.cached_events(self.sessions.app_name, *chat)
            if events is not None:
                update["get_session_config"] = window_of(events)
        return prepared.model_copy(update=update)

    def live_run_config(self) -> RunConfig:
        telemetry = self.run_telemetry.current()
        if self._settings.live_modality == "AUDIO":
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

    def chat_artifacts(self, user_id: str, chat_id: str) -> ChatArtifacts:
        return ChatArtifacts(
            self.artifacts,
            app_name=self.sessions.app_name,
            user_id=user_id,
            chat_id=chat_id,
            inline_max_bytes=self._settings.artifact_inline_max_bytes,
            root_path=self._settings.root_path,
        )

    def shared_state(self, state: Mapping[str, Any]) -> SharedState | None:
        """A chat's shared state from its session's, or None when nothing is shared."""
        prefix = self._settings.shared_state_prefix
        return SharedState(prefix, state) if prefix else None

    def step_authors(self, *, live: bool = False) -> StepAuthors | None:
        """Who answered, for one response; None for an app of one agent."""
        named = self._named_live_authors if live else self._named_authors
        return StepAuthors() if named else None

    def chat_parts(
        self, chat: ChatKey, shared_state: SharedState | None, *, live: bool = False
    ) -> ChatParts:
        """What one response of the chat sends beside the model's answer."""
        return ChatParts(
            files=self.chat_artifacts(*chat),
            shared_state=shared_state,
            authors=self.step_authors(live=live),
        )

    async def rewind(self, session: Session, before_event_id: str) -> None:
        """Rewind a chat to just before one of its events: history, state and artifacts."""
        try:
            await rewind_before_event(
                self.runner, self.outbox, session, before_event_id, artifacts=self.artifacts
            )
        finally:  # the state's repair writes behind the session service
            self.sessions.forget(session.user_id, session.id)

    async def close(self) -> None:
        await self.runner.close()
        await self.live_runner.close()


def live_refusal(root: object) -> str | None:
    """Why ADK's live mode cannot run the agent tree under ``root``, for the user; None when
    it can. The first ``ParallelAgent``, ``LoopAgent`` or ``Workflow`` found names the kind."""
    found = _first_not_live(root, set())
    if found is None:
        return None
    kind = next(kind.__name__ for kind in _NOT_LIVE if isinstance(found, kind))
    return (
        f"Live mode (ADK's run_live) cannot run this agent: {found.name!r} is a {kind}. "
        "Use POST /stream, or ai 7's WebSocketChatTransport on /live (without ?chatId=), "
        "for it."
    )


def _answered_by_several(root: object) -> bool:
    """Whether more than one agent or node can answer under ``root``: it has sub-agents, or
    it is a graph ``Workflow``, whose nodes answer."""
    return isinstance(root, Workflow) or bool(getattr(root, "sub_agents", None))


def _first_not_live(agent: object, seen: set[int]) -> BaseAgent | Workflow | None:
    if isinstance(agent, _NOT_LIVE):
        return agent
    if id(agent) in seen:
        return None
    seen.add(id(agent))
    for sub_agent in getattr(agent, "sub_agents", None) or ():
        if (found := _first_not_live(sub_agent, seen)) is not None:
            return found
    return None


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
