"""The ``Bridge``: the application while it runs, and where its parts are built.

It builds, once at start-up, what the requests share: the coordination seams it is given,
the chats' sessions (behind the result outbox) and their index (``chats``: what each chat's
page holds, for listing and restoring), our plugins (``ChatTools``), both ADK runners
(``Runners``), how a response is opened (``ResponseOpener``), the response slots, the
background tasks and the drain. Turns get the parts they use as ``TurnServices``
(``turns``), never the bridge. The application builds one at start-up
(``app.state.bridge``); the transports reach it through ``bridge_of``.
"""

from __future__ import annotations

from starlette.datastructures import State

from adk_stream_protocol.coordination.base import Coordination
from adk_stream_protocol.foundation.limits import ResponseSlots
from adk_stream_protocol.foundation.outages import Outages
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.observability.metrics import Metrics
from adk_stream_protocol.observability.recording import Recorder
from adk_stream_protocol.observability.telemetry import Telemetry
from adk_stream_protocol.plugins.sign_ins import SignInPlugin
from adk_stream_protocol.plugins.tool_starts import ToolStartPlugin
from adk_stream_protocol.store.artifact_files import ChatArtifacts
from adk_stream_protocol.store.chat_tables import create_chat_index
from adk_stream_protocol.store.result_outbox import ResultOutbox
from adk_stream_protocol.store.session_cache import SessionCache
from adk_stream_protocol.store.sessions import create_session_service
from adk_stream_protocol.turns.background_tasks import BackgroundTasks
from adk_stream_protocol.turns.chat_records import ChatRecords
from adk_stream_protocol.turns.chat_tools import ChatTools
from adk_stream_protocol.turns.drain import Drain
from adk_stream_protocol.turns.openings import ResponseOpener
from adk_stream_protocol.turns.runners import AgentLike, Runners
from adk_stream_protocol.turns.turn_services import Runtime, TurnServices

__all__ = ["AgentLike", "Bridge", "bridge_of"]


class Bridge:
    """The running application: what its requests share, built here (the composition
    root), and handed to its turns as ``TurnServices``."""

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
        # Which stores are down: one WARNING per outage, an INFO when it ends.
        self.outages = outages or Outages()
        self.coordination = coordination
        self.telemetry = Telemetry(Metrics() if settings.metrics else None)
        # A tool's result the store could not take is written when it is back. Under it, the
        # chats' histories this process has read.
        self.session_cache = SessionCache(
            create_session_service(settings.session_store),
            int(settings.session_cache_mb * 1024 * 1024),
        )
        self.outbox = ResultOutbox(
            self.session_cache,
            self.outages,
            retry_seconds=settings.result_retry_seconds,
        )
        # Each chat's messages as its page held them, beside the sessions, its fencing tokens,
        # and the results of runs that lost it, waiting for its holder.
        self.chats = create_chat_index(settings.session_store, self.outbox)
        self.outbox.hand_off_to(self.chats)
        self.tools = ChatTools(
            ToolStartPlugin(self.outbox, self.chats, frozenset(settings.idempotent_tools)),
            coordination.pending,
            approval_timeout_seconds=settings.approval_timeout_seconds,
            on_outcome=lambda outcome: self.telemetry.approval_outcome("live", outcome),
            sign_ins=SignInPlugin(
                coordination.sign_ins, settings.auth_callback_url, settings.auth_state_ttl_seconds
            )
            if settings.auth_callback_url is not None
            else None,
        )
        self.runners = Runners(
            settings, agent, live_agent, outbox=self.outbox, tools=self.tools, outages=self.outages
        )
        self.sessions = self.runners.sessions
        self.artifact_service = self.runners.artifacts
        self.recorder = Recorder(settings.record_dir)
        self.records = ChatRecords(self.chats, self.sessions.app_name, self.recorder)
        self.response_slots = ResponseSlots(settings.max_concurrent_responses)
        self.tasks = BackgroundTasks()
        # What a restart ends, and whether one is under way.
        self.drain = Drain()
        self.turns = TurnServices(
            settings,
            self.runners,
            self.tools,
            coordination,
            ResponseOpener(coordination, self.records, self.outages),
            Runtime(self.tasks, self.drain, self.telemetry, self.outages),
        )

    async def prepare(self) -> None:
        """Get the stores ready before the first request: the sessions' tables, then the
        chat index's beside them."""
        await self.sessions.prepare()
        await self.chats.prepare()

    def chat_artifacts(self, user_id: str, chat_id: str) -> ChatArtifacts:
        return self.runners.chat_artifacts(user_id, chat_id)

    async def close(self) -> None:
        await self.tasks.close()
        await self.chats.close()
        await self.outbox.close()
        await self.recorder.close()
        await self.runners.close()


def bridge_of(state: State) -> Bridge:
    """The application's bridge, from ``request.app.state`` (set by the lifespan)."""
    bridge: Bridge = state.bridge
    return bridge
