"""The FastAPI application: ``create_app`` and the per-application ``Bridge``.

``create_app`` has no side effects: the session store, the agent and the runner are built
when the application starts (lifespan), so importing ``server`` creates no files.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.middleware.trustedhost import TrustedHostMiddleware
from fastapi.staticfiles import StaticFiles
from google.adk.agents.run_config import RunConfig
from google.adk.apps import App
from google.adk.events import Event
from google.adk.runners import Runner
from google.genai import types

from adk_stream_protocol.agents import AgentLike, resolve_agents
from adk_stream_protocol.approvals import LiveApprovalPlugin, LiveToolGate
from adk_stream_protocol.errors import RequestError
from adk_stream_protocol.identity import current_user
from adk_stream_protocol.limits import ResponseSlots
from adk_stream_protocol.live import router as live_router
from adk_stream_protocol.security import SecurityHeadersMiddleware
from adk_stream_protocol.sessions import ChatLocks, ChatSessions, create_session_service
from adk_stream_protocol.settings import Settings
from adk_stream_protocol.stream import StreamTurn
from adk_stream_protocol.stream import router as stream_router
from adk_stream_protocol.turns import plan_turn
from adk_stream_protocol.ui_messages import ChatRequest

logger = logging.getLogger(__name__)

# The client says when the user starts and stops speaking (audio_control frames).
_CLIENT_SIDE_VAD = types.RealtimeInputConfig(
    automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
)


class Bridge:
    """Everything one running application shares: settings, runner, chats, background tasks."""

    def __init__(self, settings: Settings, agent: AgentLike, live_agent: AgentLike) -> None:
        self.settings = settings
        service = create_session_service(settings.session_store)
        app = agent if isinstance(agent, App) else App(name=settings.app_name, root_agent=agent)
        self.runner = Runner(app=app, session_service=service)
        # /live gates tools itself (ADK live cannot confirm): the same app plus our plugin.
        live_app = (
            live_agent
            if isinstance(live_agent, App)
            else app.model_copy(update={"root_agent": live_agent})
        )
        gate = LiveApprovalPlugin(lambda user, chat: self.live_gates.get((user, chat)))
        self.live_runner = Runner(
            app=live_app.model_copy(update={"plugins": [*live_app.plugins, gate]}),
            session_service=service,
        )
        self.live_gates: dict[tuple[str, str], LiveToolGate] = {}
        self.sessions = ChatSessions(service, app.name)
        self.locks = ChatLocks()
        self.response_slots = ResponseSlots(settings.max_concurrent_responses)
        self._tasks: set[asyncio.Task[Any]] = set()

    def live_run_config(self) -> RunConfig:
        if self.settings.live_modality == "AUDIO":
            return RunConfig(
                response_modalities=["AUDIO"],
                output_audio_transcription=types.AudioTranscriptionConfig(),
                input_audio_transcription=types.AudioTranscriptionConfig(),
                realtime_input_config=_CLIENT_SIDE_VAD,
            )
        return RunConfig(
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

    async def prepare_turn(
        self, user_id: str, request: ChatRequest, *, on_end: Callable[[], None]
    ) -> StreamTurn:
        """Plan one /stream request under the chat's lock and start its run; ``on_end`` is
        called once the run has ended."""
        try:
            lease = await self.locks.acquire(
                user_id, request.id, self.settings.chat_busy_timeout_seconds
            )
        except TimeoutError:
            raise RequestError(
                409, "this chat is still answering an earlier request; try again shortly"
            ) from None
        try:
            session = await self.sessions.open(user_id, request.id)
            plan = plan_turn(
                request,
                session.events,
                defer_intermediate=not self.settings.stream_intermediate_results,
            )
            if plan.rewind_before_invocation_id:
                await self.runner.rewind_async(
                    user_id=user_id,
                    session_id=request.id,
                    rewind_before_invocation_id=plan.rewind_before_invocation_id,
                )
            if plan.prior_tool_results is not None:
                # Stored in the paused invocation, where the model expects the calls' results.
                session = await self.sessions.open(user_id, request.id)
                await self.sessions.service.append_event(
                    session,
                    Event(
                        author="user",
                        invocation_id=plan.prior_invocation_id or session.events[-1].invocation_id,
                        content=plan.prior_tool_results,
                    ),
                )
            logger.info(
                "turn user=%s chat=%s trigger=%s continuation=%s rewind=%s",
                user_id,
                request.id,
                request.trigger,
                plan.continuation,
                bool(plan.rewind_before_invocation_id),
            )
            turn = StreamTurn(
                self, user_id=user_id, chat_id=request.id, plan=plan, lease=lease, on_end=on_end
            )
            turn.begin()
        except BaseException:
            lease.release()
            raise
        return turn

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.runner.close()
        await self.live_runner.close()


def create_app(
    agent: AgentLike | None = None,
    *,
    settings: Settings | None = None,
    identity: Callable[..., Any] | None = None,
) -> FastAPI:
    """Build the server. ``agent`` replaces the demo agent; ``identity`` replaces the
    ``current_user`` dependency (real authentication)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        bridge = Bridge(settings, *resolve_agents(settings, agent))
        app.state.bridge = bridge
        logger.info(
            "ready: store=%s app=%s",
            settings.session_store.split("://")[0],
            bridge.sessions.app_name,
        )
        try:
            yield
        finally:
            await bridge.close()

    docs = settings.api_docs
    app = FastAPI(
        title="adk-stream-protocol",
        lifespan=lifespan,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
    )
    # Added innermost first: the host check runs before anything else.
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["*"],
            expose_headers=["x-vercel-ai-ui-message-stream"],
        )
    app.add_middleware(SecurityHeadersMiddleware, exempt=("/docs", "/redoc"))
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.trusted_hosts)
    if identity is not None:
        app.dependency_overrides[current_user] = identity
    app.include_router(stream_router)
    app.include_router(live_router)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    if settings.playground_dir is not None and (settings.playground_dir / "index.html").is_file():
        # Mounted last, so the API routes above take precedence.
        app.mount("/", StaticFiles(directory=settings.playground_dir, html=True), name="playground")
    return app
