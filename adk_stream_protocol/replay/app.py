"""The replay server: recorded responses (``ADK_STREAM_RECORD_DIR``) served as a stand-in
``POST /stream`` and ``WS /live``, with no agent, so a frontend can be built and tested against
them. ``adk-stream-protocol replay DIR`` serves ``create_replay_app(DIR)``.

Which recording answers a request, and with which ids, is ``replay_store``'s rule; the chunks
come at their recorded times divided by ``speed`` (0: at once). ``/stream`` answers as the
real one does (the same headers and keep-alives); a request no recording answers gets a 404
whose ``detail`` lists what is recorded. ``GET /stream/{chatId}/stream`` answers 204 (nothing
ever runs to be resumed) and ``DELETE`` 204. The playground and ``/health`` are served as by
``create_app``, behind the same host, origin and header policies.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.security import add_http_policies, origin_allowed
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.sse import DONE, KEEP_ALIVE, SSE_HEADERS
from adk_stream_protocol.replay.sockets import ChatSocketReplay, EnvelopeReplay
from adk_stream_protocol.replay.store import Replay, ReplayStore, load_recordings, paced, sse_event
from adk_stream_protocol.transports.sse_response import EventStreamResponse
from adk_stream_protocol.transports.stream import read_chat_request

logger = logging.getLogger(__name__)


def create_replay_app(
    record_dir: Path, *, settings: Settings | None = None, speed: float = 1.0
) -> FastAPI:
    """Serve the recordings in ``record_dir`` (read now, once: a recording made later needs
    a restart). ``speed`` scales the recorded pauses between chunks: 2 halves them, 0 drops
    them. Raises ``NotADirectoryError`` when ``record_dir`` is not a directory."""
    if not (math.isfinite(speed) and speed >= 0):
        raise ValueError(f"speed must be 0 or more, not {speed}")
    settings = settings or Settings()
    store = ReplayStore(load_recordings(record_dir))
    app = FastAPI(
        title="adk-stream-protocol replay", docs_url=None, redoc_url=None, openapi_url=None
    )
    # The same policies as create_app: a replay serves the same pages on the same hosts.
    add_http_policies(app, settings)

    @app.post("/stream", response_model=None)
    async def stream(request: Request) -> Response:
        try:
            chat = await read_chat_request(request, settings)
            replay = store.pick(chat, chat.ai_sdk)
        except RequestError as exc:
            logger.info("replay: stream request refused status=%s", exc.status)
            return JSONResponse({"detail": exc.message}, status_code=exc.status)
        logger.info("replay: /stream plays %s", replay.name)
        return EventStreamResponse(
            _events(replay, speed),
            headers=SSE_HEADERS,
            keep_alive_seconds=settings.keep_alive_seconds,
            keep_alive=KEEP_ALIVE,
        )

    @app.api_route("/stream/{chat_id}/stream", methods=["GET", "DELETE"])
    async def nothing_runs(chat_id: str) -> Response:
        """Nothing to resume or stop: a replayed response never outlives its request."""
        return Response(status_code=204)

    @app.websocket("/live")
    async def live(websocket: WebSocket) -> None:
        if not origin_allowed(websocket.headers, settings.cors_origins):
            reason = "this origin may not open /live; see ADK_STREAM_CORS_ORIGINS"
            try:
                await websocket.send_denial_response(PlainTextResponse(reason, status_code=403))
            except RuntimeError:  # no denial-response extension: a plain close (HTTP 403)
                await websocket.close(1008, reason)
            return
        await websocket.accept()
        protocol = EnvelopeReplay if "chatId" in websocket.query_params else ChatSocketReplay
        await protocol(websocket, store, settings, speed).serve()

    @app.get("/health")
    async def health() -> dict[str, str | int]:
        return {"status": "ok", "recordings": len(store.recordings)}

    if settings.playground_dir is not None and (settings.playground_dir / "index.html").is_file():
        # Mounted last, so the routes above take precedence.
        app.mount("/", StaticFiles(directory=settings.playground_dir, html=True), name="playground")
    return app


async def _events(replay: Replay, speed: float) -> AsyncIterator[bytes]:
    async for chunk in paced(replay.chunks, speed):
        yield sse_event(chunk)
    yield DONE.encode()
