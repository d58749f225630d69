"""``GET /artifacts/{chatId}/{filename}?version=N``: an artifact too big for a ``data:`` URL
(docs/adr/0025).

The same identity rule as every other route: the ``current_user`` dependency says who asks,
and artifacts are looked up under that user's id and the chat id, so another user's chat (or
a chat that does not exist) is a 404, never a 403 that would confirm it exists.
"""

from __future__ import annotations

import logging
import re
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response

from adk_stream_protocol.foundation.identity import current_user
from adk_stream_protocol.protocol.ui_messages import CHAT_ID_PATTERN
from adk_stream_protocol.turns.bridge import bridge_of

logger = logging.getLogger(__name__)

router = APIRouter()


@router.get(
    "/artifacts/{chat_id}/{filename:path}",
    response_model=None,
    responses={
        200: {"description": "The artifact's bytes, as a download"},
        404: {
            "description": "No such artifact for this user",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
    },
)
async def get_artifact(
    chat_id: str,
    filename: str,
    request: Request,
    user_id: Annotated[str, Depends(current_user)],
    version: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    if not re.fullmatch(CHAT_ID_PATTERN, chat_id):
        raise HTTPException(404, "no such artifact")
    bridge = bridge_of(request.app.state)
    part = await bridge.artifact_service.load_artifact(
        app_name=bridge.sessions.app_name,
        user_id=user_id,
        session_id=chat_id,
        filename=filename,
        version=version,
    )
    blob = part.inline_data if part is not None else None
    if blob is None or blob.data is None:
        logger.info("artifact not found user=%s chat=%s version=%s", user_id, chat_id, version)
        raise HTTPException(404, "no such artifact")
    name = quote(filename.rpartition("/")[2] or "artifact", safe="")
    return Response(
        content=blob.data,
        media_type=blob.mime_type or "application/octet-stream",
        headers={
            # A download, never a page of this origin: an SVG or HTML artifact runs no script.
            "content-disposition": f"attachment; filename*=UTF-8''{name}",
            "content-security-policy": "sandbox",
            "cache-control": "private, max-age=0",
        },
    )
