"""The FastAPI application: ``create_app`` puts the transports, the middleware and the
playground together.

``create_app`` has no side effects: the session store, the agent and the runners (the
``Bridge``) are built when the application starts (lifespan), so importing ``server``
creates no files.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response, WebSocket
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles

from adk_stream_protocol.foundation.identity import current_user
from adk_stream_protocol.foundation.outages import Outages
from adk_stream_protocol.foundation.security import (
    add_http_policies,
    redact_query_strings_in_server_logs,
)
from adk_stream_protocol.foundation.settings import Settings, removed_settings
from adk_stream_protocol.observability.adk_logs import AdkLogs, installed
from adk_stream_protocol.server.adk_imports import skip_absent_a2a
from adk_stream_protocol.server.agents import serve_agents
from adk_stream_protocol.server.artifacts import router as artifacts_router
from adk_stream_protocol.server.backends import check_extras, open_coordination
from adk_stream_protocol.server.collector import tuned_collector
from adk_stream_protocol.server.draining import ShutdownSignals
from adk_stream_protocol.store.sessions import store_url
from adk_stream_protocol.transports.auth_callback import router as auth_callback_router
from adk_stream_protocol.transports.call_results import router as call_results_router
from adk_stream_protocol.transports.chat_routes import router as chats_router
from adk_stream_protocol.transports.live import router as live_router
from adk_stream_protocol.transports.stream import router as stream_router
from adk_stream_protocol.turns.bridge import AgentLike, Bridge, bridge_of

logger = logging.getLogger(__name__)


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
        # Here, not at import: uvicorn sets its loggers up before the lifespan runs.
        redact_query_strings_in_server_logs()
        skip_absent_a2a()  # ADK would try the import on every run
        for removed in removed_settings(os.environ):
            logger.warning("%s", removed)
        served = serve_agents(settings, agent)
        # The store the app uses from here on: its own by default.
        store = store_url(settings.session_store, served.name)
        app_settings = settings.model_copy(update={"session_store": store})
        check_extras(app_settings)
        # One record of which stores are down, for one WARNING per outage.
        outages = Outages()
        async with open_coordination(
            app_settings, served.session_app_name, outages
        ) as coordination:
            bridge = Bridge(
                app_settings, served.agent, served.live_agent, coordination, outages=outages
            )
            try:
                await bridge.prepare()
                app.state.bridge = bridge
                app.state.agent_name = served.agent_name
                # Each thing once, by its own name: the store is named as the app (which is
                # often the agent's name), the chats in it by ADK's app name.
                logger.info(
                    "ready: agent=%s store=%s adk_app_name=%s coordination=%s resumable=%s",
                    served.agent_name,
                    # A SQLite file's path says where the chats are; other URLs may hold secrets.
                    store if store.startswith("sqlite:") else store.split("://")[0].split("+")[0],
                    bridge.sessions.app_name,
                    ("redis-cluster" if settings.redis_cluster else "redis")
                    if settings.redis_url
                    else "local",
                    settings.resumable_streams,
                )
                # SIGTERM drains before uvicorn shuts down.
                signals = ShutdownSignals.install(bridge.drain.run, settings.shutdown_grace_seconds)
                # ADK's own ERROR of an outage we answer and report: at DEBUG.
                try:
                    with (
                        installed(AdkLogs(fence_author=bridge.sessions.app_name)),
                        tuned_collector(
                            freeze=settings.gc_freeze,
                            young_threshold=settings.gc_young_threshold,
                        ),
                    ):
                        yield
                finally:
                    if signals is not None:
                        signals.remove(bridge.drain.run)
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
    add_http_policies(app, settings, exempt=("/docs", "/redoc"))
    if identity is not None:
        app.dependency_overrides[current_user] = identity
    app.include_router(stream_router)
    app.include_router(live_router)
    app.include_router(artifacts_router)
    app.include_router(call_results_router)
    app.include_router(auth_callback_router)
    app.include_router(chats_router)

    @app.get("/health")
    async def health(request: Request) -> JSONResponse:
        bridge = getattr(request.app.state, "bridge", None)
        if bridge is not None and bridge.drain.draining:
            # A readiness probe fails: the load balancer sends new work elsewhere.
            headers = {"retry-after": "1"}
            return JSONResponse({"status": "draining"}, status_code=503, headers=headers)
        return JSONResponse({"status": "ok"})

    # A folder of agents' paths (`/apps/<name>/...`) asked of a server of one agent: a 404
    # that says so, as the folder's for an unknown name, not the page's 405 for a POST.
    @app.api_route("/apps/{name}", methods=_METHODS, include_in_schema=False)
    @app.api_route("/apps/{name}/{rest:path}", methods=_METHODS, include_in_schema=False)
    async def no_such_agent(request: Request, name: str) -> JSONResponse:
        agent = getattr(request.app.state, "agent_name", None)
        return JSONResponse({"detail": one_agent_only(name, agent)}, status_code=404)

    @app.websocket("/apps/{name}/{rest:path}")
    async def no_such_agent_socket(websocket: WebSocket) -> None:
        await websocket.accept()  # a close before it would reach the client as a bare 403
        await websocket.close(code=4404, reason="no agent of that name; this server runs one, at /")

    if settings.metrics:  # before the playground's mount, which takes the rest

        @app.get("/metrics", include_in_schema=False)
        async def metrics(request: Request) -> Response:
            body, content_type = bridge_of(request.app.state).telemetry.exposition()
            return Response(body, media_type=content_type)

    if settings.playground_dir is not None and (settings.playground_dir / "index.html").is_file():
        # Mounted last, so the API routes above take precedence.
        app.mount("/", StaticFiles(directory=settings.playground_dir, html=True), name="playground")
    return app


_METHODS = ["GET", "POST", "PATCH", "DELETE"]


def one_agent_only(name: str, agent: str | None) -> str:
    """The 404's text for ``/apps/<name>/...`` on a server of one agent."""
    served = f"one agent, {agent!r}," if agent else "one agent"
    return f"no agent named {name!r}: this server runs {served} at / (POST /stream, WS /live)"
