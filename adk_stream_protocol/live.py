"""``WS /live``: the WebSocket transport (docs/live-protocol.md).

The handshake: the origin, the chat id, and the chat's lease, which one socket holds at a time
(on every instance). A socket that finds the chat held because a response is still being
written (its socket left; resumable streams) replays it when it asked to resume, then waits
for the chat. The socket itself is served by ``live_connections.LiveConnection``.
"""

from __future__ import annotations

import json
import logging
import re
from contextlib import aclosing
from typing import Annotated

from fastapi import APIRouter, Depends, WebSocket
from fastapi.responses import PlainTextResponse

from adk_stream_protocol.bridge import Bridge, bridge_of
from adk_stream_protocol.coordination import ChatKey, ChatLease
from adk_stream_protocol.identity import current_user
from adk_stream_protocol.live_connections import CLOSE_BAD_REQUEST, CLOSE_CHAT_BUSY, LiveConnection
from adk_stream_protocol.security import origin_allowed
from adk_stream_protocol.ui_messages import CHAT_ID_PATTERN

logger = logging.getLogger(__name__)

router = APIRouter()


@router.websocket("/live")
async def live(websocket: WebSocket, user_id: Annotated[str, Depends(current_user)]) -> None:
    bridge = bridge_of(websocket.app.state)
    if not origin_allowed(websocket.headers, bridge.settings.cors_origins):
        # A page of another site: its socket would carry this user's cookies.
        logger.info("live handshake refused: origin not allowed")
        await _deny(websocket, 403, "this origin may not open /live; see ADK_STREAM_CORS_ORIGINS")
        return
    await websocket.accept()
    chat_id = websocket.query_params.get("chatId", "")
    if not re.fullmatch(CHAT_ID_PATTERN, chat_id):
        await websocket.close(CLOSE_BAD_REQUEST, "connect with ?chatId=<chat id>")
        return
    chat: ChatKey = (user_id, chat_id)
    resume = websocket.query_params.get("resume", "").lower() in ("1", "true")
    lease = await bridge.coordination.leases.try_acquire(chat)
    if lease is None:
        lease = await _after_active_response(bridge, websocket, chat, replay=resume)
        if lease is None:
            await websocket.close(CLOSE_CHAT_BUSY, "this chat already has a live connection")
            return
    elif resume:
        await websocket.send_text(json.dumps({"type": "no-active"}))
    connection = LiveConnection(bridge, websocket, user_id=user_id, chat_id=chat_id, lease=lease)
    await connection.serve()


async def _after_active_response(
    bridge: Bridge, websocket: WebSocket, chat: ChatKey, *, replay: bool
) -> ChatLease | None:
    """The chat is held. If it holds because a response is still being written (its socket
    left, and streams are resumable), replay that response when asked (``resume``), then wait
    for the chat to come free. Held with no active response: another live socket has it."""
    events = await bridge.coordination.chunk_logs.follow(chat)
    if events is None:
        return None
    logger.info("live resume chat=%s replay=%s", chat[1], replay)
    async with aclosing(events):
        async for event in events:
            if replay:
                await websocket.send_text(event.decode())
    try:
        return await bridge.coordination.leases.acquire(
            chat, bridge.settings.chat_busy_timeout_seconds
        )
    except TimeoutError:
        return None


async def _deny(websocket: WebSocket, status: int, reason: str) -> None:
    """Refuse a handshake with an HTTP status, where the server can send one."""
    try:
        await websocket.send_denial_response(PlainTextResponse(reason, status_code=status))
    except RuntimeError:  # no denial-response extension: a plain close (HTTP 403)
        await websocket.close(1008, reason)
