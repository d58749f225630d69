"""``WS /live``: the WebSocket transport (docs/live-protocol.md).

A socket speaks one of two protocols, decided at the handshake by its query string:

- with ``?chatId=``: our envelope protocol (``live_connections``), one chat per socket served
  by ADK ``run_live``, with voice, interrupts and the approval gate (our ``client/``);
- without: ai 7's stock ``WebSocketChatTransport`` protocol (``chat_sockets``), which never
  puts a chat id in the URL and names the chat in every frame.

The envelope handshake: the origin, who is asking, the chat id, and the chat's lease, which
one socket holds at a time (on every instance). A socket that finds the chat held because a
response is still being written (its socket left; resumable streams) replays it when it
asked to resume, then waits for the chat. The socket itself is served by
``live_connections.LiveConnection``.
"""

from __future__ import annotations

import json
import logging
import re
from contextlib import aclosing

from fastapi import APIRouter, WebSocket
from fastapi.responses import PlainTextResponse

from adk_stream_protocol.coordination.base import ChatKey, ChatLease, StopSubscription
from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.identity import user_of
from adk_stream_protocol.foundation.outages import REDIS
from adk_stream_protocol.foundation.security import origin_allowed
from adk_stream_protocol.protocol.ui_messages import CHAT_ID_PATTERN
from adk_stream_protocol.transports.chat_sockets import ChatSocket
from adk_stream_protocol.transports.live_connections import (
    HeldChat,
    LiveConnection,
    ResponseSlot,
    SocketIO,
)
from adk_stream_protocol.transports.live_frames import (
    CLOSE_BAD_REQUEST,
    CLOSE_CHAT_BUSY,
    CLOSE_CHAT_DELETED,
    CLOSE_TRY_AGAIN_LATER,
    DELETED_REASON,
)
from adk_stream_protocol.transports.live_restarts import LiveRestart
from adk_stream_protocol.turns.bridge import Bridge, bridge_of

logger = logging.getLogger(__name__)

# How long a new socket waits for the chat's previous socket to finish leaving (its run
# closed, its approvals handed over: ADR 0047) before it is refused as a second one (4409).
LEAVING_SOCKET_SECONDS = 3.0

router = APIRouter()


@router.websocket("/live")
async def live(websocket: WebSocket) -> None:
    bridge = bridge_of(websocket.app.state)
    if bridge.drain.draining:  # a restart: connect to another instance
        restarting = bridge.drain.refusal()
        await _deny(
            websocket, restarting.status, restarting.message, retry_after=restarting.retry_after
        )
        return
    if not origin_allowed(websocket.headers, bridge.settings.cors_origins):
        # A page of another site: its socket would carry this user's cookies.
        logger.info("live handshake refused: origin not allowed")
        await _deny(websocket, 403, "this origin may not open /live; see ADK_STREAM_CORS_ORIGINS")
        return
    if "chatId" not in websocket.query_params:
        # ai 7's transport: who asks is established per frame, from the frame's headers.
        await websocket.accept()
        await ChatSocket(bridge, websocket).serve()
        return
    try:
        user_id = await user_of(websocket)
    except RequestError as exc:
        logger.info("live handshake refused status=%s", exc.status)
        await _deny(websocket, exc.status, exc.message)
        return
    await websocket.accept()
    chat_id = websocket.query_params.get("chatId", "")
    if not re.fullmatch(CHAT_ID_PATTERN, chat_id):
        await websocket.close(CLOSE_BAD_REQUEST, "connect with ?chatId=<chat id>")
        return
    chat: ChatKey = (user_id, chat_id)
    resume = websocket.query_params.get("resume", "").lower() in ("1", "true")
    try:
        # Watched before the chat is taken: a delete sent while the socket waits for the chat,
        # or as it gets it, still reaches the socket.
        stop = await bridge.coordination.stops.subscribe(chat)
    except Exception as exc:
        await _refuse_in_outage(bridge, websocket, exc, chat_id)
        return
    try:
        await _serve_chat(bridge, websocket, chat, stop, resume=resume)
    finally:
        await stop.close()  # (closing twice is harmless)


async def _serve_chat(
    bridge: Bridge, websocket: WebSocket, chat: ChatKey, stop: StopSubscription, *, resume: bool
) -> None:
    """Take the chat's lease (after its active response, if one is being written), then serve
    the socket with it."""
    try:
        lease = await bridge.coordination.leases.try_acquire(chat)
        followed = False  # a response still being written was followed to its end
        if lease is None:  # held: by a response still being written, or a socket
            lease, followed = await _after_active_response(bridge, websocket, chat, replay=resume)
        if lease is not None and lease.unclean:
            await _fence(bridge, chat, lease)
    except Exception as exc:
        await _refuse_in_outage(bridge, websocket, exc, chat[1])
        return
    if lease is None:
        await websocket.close(CLOSE_CHAT_BUSY, "this chat already has a live connection")
        return
    if stop.deleted.is_set():  # deleted while the socket waited: nothing starts
        await lease.release()
        await websocket.close(CLOSE_CHAT_DELETED, DELETED_REASON)
        return
    bridge.outages.up(REDIS)
    if resume and not followed:
        await websocket.send_text(json.dumps({"type": "no-active"}))
    # A restart waits for the socket's open answer, then closes it.
    restart = LiveRestart(bridge.drain, websocket)
    connection = LiveConnection(
        bridge.turns,
        SocketIO(websocket, bridge.settings, chat[1]),
        HeldChat(chat, lease, stop),
        slot=ResponseSlot(bridge.response_slots),
        restart=restart,
    )
    bridge.drain.add(restart)
    try:
        await connection.serve()
    finally:
        bridge.drain.discard(restart)


async def _refuse_in_outage(
    bridge: Bridge, websocket: WebSocket, exc: Exception, chat_id: str
) -> None:
    """A store that is down closes the socket with 1013 "Try Again Later": the client
    reconnects after a pause, not at once; anything else is raised again."""
    refusal = bridge.outages.refusal(exc, f"a live socket of chat={chat_id}")
    if refusal is None:
        raise exc
    await websocket.close(CLOSE_TRY_AGAIN_LATER, refusal.message)


async def _after_active_response(
    bridge: Bridge, websocket: WebSocket, chat: ChatKey, *, replay: bool
) -> tuple[ChatLease | None, bool]:
    """The chat is held. If it holds because a response is still being written (its socket
    left, and streams are resumable), replay that response when asked (``resume``), then wait
    for the chat to come free. Held with no active response: another live socket has it, or
    is leaving it; refused unless it lets go within ``LEAVING_SOCKET_SECONDS``. Also says
    whether a response was followed (when not, a resume is told ``no-active``)."""
    events = await bridge.coordination.chunk_logs.follow(chat)
    if events is None:
        # Held by another socket, which may be leaving (a reloaded page's socket comes while
        # the old one still hands its waits over): a moment for it, then the refusal.
        try:
            return await bridge.coordination.leases.acquire(chat, LEAVING_SOCKET_SECONDS), False
        except TimeoutError:
            return None, False
    logger.info("live resume chat=%s replay=%s", chat[1], replay)
    async with aclosing(events):
        async for event in events:
            if replay:
                await websocket.send_text(event.decode())
    try:
        lease = await bridge.coordination.leases.acquire(
            chat, bridge.settings.chat_busy_timeout_seconds
        )
    except TimeoutError:
        return None, True
    return lease, True


async def _fence(bridge: Bridge, chat: ChatKey, lease: ChatLease) -> None:
    """The chat was taken over from a holder that lapsed: fence it off before the run reads the
    session. A failure lets the chat go."""
    try:
        await bridge.sessions.fence(*chat, lease.generation)
    except BaseException:
        await lease.release()
        raise


async def _deny(
    websocket: WebSocket, status: int, reason: str, *, retry_after: int | None = None
) -> None:
    """Refuse a handshake with an HTTP status, where the server can send one."""
    headers = {"retry-after": str(retry_after)} if retry_after is not None else None
    try:
        await websocket.send_denial_response(
            PlainTextResponse(reason, status_code=status, headers=headers)
        )
    except RuntimeError:  # no denial-response extension: a plain close (HTTP 403)
        await websocket.close(1008, reason)
