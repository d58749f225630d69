"""Which server to run, and a folder of agents as one server (docs/adr/0028-package-and-command.md).

A folder in ADK's layout (one agent per subfolder, as ``adk web`` reads it) becomes one server in
which each agent is an app of its own, chosen by the path: ``/apps/<name>/stream``,
``/apps/<name>/live`` and its page at ``/apps/<name>/``. Each app is the same application
``create_app`` builds for one agent, with its own store (``.adk-stream/<name>.db`` by default)
and its own Redis keys, started on its first request, as ``adk web`` loads an agent when it is
first asked for, and stopped with the server.
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from google.adk.cli.utils.agent_loader import AgentLoader
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from adk_stream_protocol.foundation.security import (
    add_http_policies,
    redact_query_strings_in_server_logs,
)
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.server.app import create_app

logger = logging.getLogger(__name__)

# `/apps/<name>` and what follows it. A name is also the app's name, so it follows the app
# name rule (settings.app_name), which keeps it safe in a file name and a Redis key.
_APP_PATH = re.compile(r"^/apps/([a-zA-Z][a-zA-Z0-9_-]{0,47})(/.*)?$")
_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,47}$")

# The index page's look, the playground's (playground/src/styles.css). A stylesheet of its
# own rather than a <style> element: the page policy (foundation/security.py) allows styles
# from the server only. The icon is an empty `data:` image (img-src allows `data:`), so a
# browser asks for no /favicon.ico.
_INDEX_CSS = """
:root { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; font-size: 15px;
  color: #1d2330; background: #f4f5f7; }
body { max-width: 640px; margin: 48px auto; padding: 24px 32px; background: #fff;
  border: 1px solid #d7dbe2; border-radius: 8px; }
h1 { font-size: 20px; margin: 0 0 4px; }
p { color: #6b7385; margin: 0 0 16px; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px;
  background: #f0f2f5; padding: 1px 4px; border-radius: 4px; }
ul { list-style: none; margin: 0; padding: 0; }
li { border-top: 1px solid #d7dbe2; }
li a, li span { display: block; padding: 10px 4px; color: #2f6fde; text-decoration: none; }
li a:hover { background: #e3edff; }
li span { color: #6b7385; }
"""
_INDEX_HEAD = (
    "<!doctype html><meta charset='utf-8'><title>adk-stream-protocol</title>"
    "<meta name='viewport' content='width=device-width, initial-scale=1'>"
    "<link rel='icon' href='data:,'><link rel='stylesheet' href='index.css'>"
)


def create_server(
    settings: Settings | None = None, *, identity: Callable[..., Any] | None = None
) -> ASGIApp:
    """The server the settings describe: a folder of agents (``agents_dir``), one agent's
    folder, or ``create_app`` (an ``agent`` setting, or the demo agent)."""
    settings = settings or Settings()
    if settings.agents_dir is None:
        return create_app(settings=settings, identity=identity)
    if not settings.agents_dir.is_dir():
        raise ValueError(f"agents folder {str(settings.agents_dir)!r} is not a folder")
    loader = AgentLoader(str(settings.agents_dir))
    if loader.is_single_agent:
        # One agent's folder (it holds agent.py or root_agent.yaml): that agent, at `/`.
        name = loader.single_agent_name or ""
        if not _NAME.match(name):
            raise ValueError(f"agent folder name {name!r}: letters, digits, '_' and '-' only")
        agent = loader.load_agent(name)
        return create_app(agent, settings=_settings_for(settings, name), identity=identity)
    return AgentsFolder(loader, settings, identity=identity)


def _settings_for(settings: Settings, name: str) -> Settings:
    """An agent's app: named as its folder, as ADK names it (``ADK_STREAM_APP_NAME`` does not
    apply: one name for every agent would mix their chats), so its store and its Redis keys
    are its own; its links under its path."""
    return settings.model_copy(
        update={"app_name": name, "root_path": f"{settings.root_path}/apps/{name}"}
    )


class AgentsFolder:
    """The ASGI application of a folder of agents: routes ``/apps/<name>/...`` to that agent's
    app (starting it on first use) and answers the rest: ``/`` lists the agents, ``/apps`` too
    as JSON, an unknown name gets 404 (or a WebSocket close 4404) that lists them."""

    def __init__(
        self,
        loader: AgentLoader,
        settings: Settings,
        *,
        identity: Callable[..., Any] | None = None,
    ) -> None:
        self._loader = loader
        self._settings = settings
        self._identity = identity
        self._apps: dict[str, ASGIApp] = {}
        self._starting = asyncio.Lock()
        self._running = AsyncExitStack()
        self._index = self._index_app()

    def names(self) -> list[str]:
        """The agents of the folder, read again on each call: a folder added while the server
        runs is served too."""
        names = self._loader.list_agents()
        return [name for name in names if _NAME.match(name)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _APP_PATH.match(scope["path"]) if scope["type"] in ("http", "websocket") else None
        if match is None:
            await self._index(scope, receive, send)
            return
        name, rest = match.group(1), match.group(2)
        app = self._apps.get(name)
        if app is None and name not in self.names():
            await self._index(scope, receive, send)  # its 404 lists the agents
            return
        if not rest and scope["type"] == "http":
            # The page's assets are relative to its folder: `/apps/<name>` → `/apps/<name>/`.
            query = scope.get("query_string", b"").decode("latin-1")
            location = f"{scope.get('root_path', '')}/apps/{name}/" + (f"?{query}" if query else "")
            await RedirectResponse(location, status_code=307)(scope, receive, send)
            return
        if app is None:
            try:
                app = await self._start(name)
            except Exception:
                logger.exception("agent %r could not be started", name)
                await self._unavailable(name, scope, receive, send)
                return
        child = dict(scope)
        child["root_path"] = f"{scope.get('root_path', '')}/apps/{name}"
        await app(child, receive, send)

    async def _start(self, name: str) -> ASGIApp:
        async with self._starting:
            if (app := self._apps.get(name)) is not None:
                return app  # another request started it meanwhile
            # Importing an agent runs its module's code: off the event loop.
            agent = await asyncio.to_thread(self._loader.load_agent, name)
            app = create_app(
                agent, settings=_settings_for(self._settings, name), identity=self._identity
            )
            await self._running.enter_async_context(app.router.lifespan_context(app))
            logger.info("agent %r started at /apps/%s/", name, name)
            self._apps[name] = app
            return app

    async def _unavailable(self, name: str, scope: Scope, receive: Receive, send: Send) -> None:
        reason = f"agent {name!r} could not be started; the server's log says why"
        if scope["type"] == "websocket":
            websocket = WebSocket(scope, receive, send)
            await websocket.accept()  # a close before it would reach the client as a bare 403
            await websocket.close(code=1011, reason=reason)
            return
        await JSONResponse({"detail": reason}, status_code=500)(scope, receive, send)

    def _index_app(self) -> FastAPI:
        @asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[None]:
            redact_query_strings_in_server_logs()  # before any agent's app has started
            logger.info(
                "agents folder %s: %s", self._loader.agents_dir, ", ".join(self.names()) or "none"
            )
            async with self._running:  # stops every app started
                yield

        app = FastAPI(title="adk-stream-protocol", lifespan=lifespan, openapi_url=None)
        add_http_policies(app, self._settings)

        @app.get("/health")
        async def health() -> dict[str, str]:
            return {"status": "ok"}

        @app.get("/apps")
        async def list_apps() -> dict[str, list[str]]:
            return {"apps": self.names()}

        @app.get("/", response_class=HTMLResponse)
        async def index() -> str:
            items = "".join(
                f'<li><a href="apps/{html.escape(name)}/">{html.escape(name)}</a></li>'
                for name in self.names()
            )
            return (
                f"{_INDEX_HEAD}<h1>Agents</h1><p>Each agent's page; its endpoints are "
                "<code>POST /apps/&lt;name&gt;/stream</code> and "
                "<code>WS /apps/&lt;name&gt;/live</code>.</p>"
                f"<ul>{items or '<li><span>none found</span></li>'}</ul>"
            )

        @app.get("/index.css", include_in_schema=False)
        async def index_css() -> Response:
            return Response(_INDEX_CSS, media_type="text/css")

        @app.api_route("/apps/{name}", methods=["GET", "POST", "PATCH", "DELETE"])
        @app.api_route("/apps/{name}/{rest:path}", methods=["GET", "POST", "PATCH", "DELETE"])
        async def unknown(name: str) -> JSONResponse:
            return JSONResponse({"detail": self._unknown(name)}, status_code=404)

        @app.websocket("/apps/{name}/{rest:path}")
        async def unknown_socket(websocket: WebSocket, name: str) -> None:
            await websocket.accept()
            # A close reason holds 123 bytes: no room for the list (GET /apps has it).
            await websocket.close(code=4404, reason="no agent of that name; GET /apps lists them")

        return app

    def _unknown(self, name: str) -> str:
        names = self.names()
        known = ", ".join(names) if names else "none"
        return f"no agent named {name!r} in this folder (agents: {known})"
