"""The FastAPI application: ``create_app`` puts the transports, the middleware and the
playground together.

``create_app`` has no side effects: the session store, the agent and the runners (the
``Bridge``) are built when the application starts (lifespan), so importing ``server``
creates no files.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.staticfiles import StaticFiles

from adk_stream_protocol.foundation.identity import current_user
from adk_stream_protocol.foundation.outages import Outages
from adk_stream_protocol.foundation.security import (
    add_http_policies,
    redact_query_strings_in_server_logs,
)
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.server.agents import serve_agents
from adk_stream_protocol.server.artifacts import router as artifacts_router
from adk_stream_protocol.server.backends import check_extras, open_coordination
from adk_stream_protocol.store.sessions import store_url
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
        served = serve_agents(settings, agent)
        # The store the app uses from here on: its own by default (docs/adr/0024).
        store = store_url(settings.session_store, served.name)
        app_settings = settings.model_copy(update={"session_store": store})
        check_extras(app_settings)
        # One record of which stores are down, for one WARNING per outage (docs/adr/0030).
        outages = Outages()
        async with open_coordination(
            app_settings, served.session_app_name, outages
        ) as coordination:
            bridge = Bridge(
                app_settings, served.agent, served.live_agent, coordination, outages=outages
            )
            try:
                await bridge.sessions.prepare()
                app.state.bridge = bridge
                logger.info(
                    "ready: store=%s coordination=%s app=%s resumable=%s",
                    # A SQLite file's path says where the chats are; other URLs may hold secrets.
                    store if store.startswith("sqlite:") else store.split("://")[0].split("+")[0],
                    "redis" if settings.redis_url else "local",
                    bridge.sessions.app_name,
                    settings.resumable_streams,
                )
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
    add_http_policies(app, settings, exempt=("/docs", "/redoc"))
    if identity is not None:
        app.dependency_overrides[current_user] = identity
    app.include_router(stream_router)
    app.include_router(live_router)
    app.include_router(artifacts_router)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    if settings.metrics:  # docs/adr/0027; before the playground's mount, which takes the rest

        @app.get("/metrics", include_in_schema=False)
        async def metrics(request: Request) -> Response:
            body, content_type = bridge_of(request.app.state).telemetry.exposition()
            return Response(body, media_type=content_type)

    if settings.playground_dir is not None and (settings.playground_dir / "index.html").is_file():
        # Mounted last, so the API routes above take precedence.
        app.mount("/", StaticFiles(directory=settings.playground_dir, html=True), name="playground")
    return app
