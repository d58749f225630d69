"""``POST /chats/{chatId}/calls/{callId}/result``: a backend delivers the final result of a
long-running call (docs/adr/0040).

Two checks, both required: the identity dependency says whose chat it is, as on every route
(a chat of another user is an unknown call), and ``Authorization: Bearer`` must carry
``ADK_STREAM_CALL_RESULT_TOKEN``, a service's credential that no page holds, so a user
cannot forge a result from the browser. Without that setting the route is off (403).

The body is ``{"output": <JSON>}`` or ``{"error": "<text>"}``. The answer is 202 once the
call's invocation continues; the page sees the continuation through its resume, or in the
chat's history on its next request.
"""

from __future__ import annotations

import hmac
import logging
import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.identity import current_user
from adk_stream_protocol.foundation.limits import RequestLimits, read_json, run_bounded
from adk_stream_protocol.protocol.ui_messages import CHAT_ID_PATTERN
from adk_stream_protocol.transports.stream import read_body
from adk_stream_protocol.turns.bridge import bridge_of
from adk_stream_protocol.turns.completed_calls import (
    NO_SUCH_CALL,
    continue_completed_call,
    final_result,
)

logger = logging.getLogger(__name__)

router = APIRouter()

CALL_ID_PATTERN = r"[A-Za-z0-9_.:-]{1,128}"
OFF = "backend call results are off: set ADK_STREAM_CALL_RESULT_TOKEN"


class CallResult(BaseModel):
    """The body: the call's final output, or the error it ended with (exactly one)."""

    model_config = ConfigDict(extra="forbid")

    output: Any = None
    error: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> CallResult:
        given = "output" in self.model_fields_set, "error" in self.model_fields_set
        if given.count(True) != 1:
            raise ValueError('give exactly one of "output" and "error"')
        if self.error is not None and not self.error.strip():
            raise ValueError('"error" is empty')
        return self


_JSON: dict[str, Any] = {"content": {"application/json": {"schema": {"type": "object"}}}}


@router.post(
    "/chats/{chat_id}/calls/{call_id}/result",
    response_model=None,
    status_code=202,
    responses={
        202: {"description": "The call's invocation continues", **_JSON},
        401: {"description": "No or a wrong bearer credential", **_JSON},
        403: {"description": "Backend call results are off", **_JSON},
        404: {"description": "No such long-running call in this chat", **_JSON},
        409: {"description": "The call has its result, or the chat stays busy", **_JSON},
        422: {"description": "Not a result", **_JSON},
        503: {"description": "A store is unavailable, or the server drains", **_JSON},
    },
)
async def deliver_call_result(
    chat_id: str,
    call_id: str,
    request: Request,
    user_id: Annotated[str, Depends(current_user)],
) -> JSONResponse:
    bridge = bridge_of(request.app.state)
    try:
        _check_credential(request, bridge.settings.call_result_token)
        if not re.fullmatch(CHAT_ID_PATTERN, chat_id) or not re.fullmatch(CALL_ID_PATTERN, call_id):
            raise RequestError(404, NO_SUCH_CALL)
        body = await read_body(request, bridge.settings)
        depth = RequestLimits.from_settings(bridge.settings).max_json_depth
        value = await run_bounded(len(body), read_json, body, depth)
        if not isinstance(value, dict):
            raise RequestError(422, 'send a JSON object: {"output": …} or {"error": "…"}')
        try:
            result = CallResult.model_validate(value)
        except ValidationError as exc:
            raise RequestError(422, _first_error(exc)) from None
        await continue_completed_call(
            bridge.turns,
            bridge.response_slots,
            (user_id, chat_id),
            call_id,
            final_result(result.output, result.error),
        )
    except RequestError as exc:
        logger.info("call result refused status=%s reason=%s", exc.status, exc.message)
        headers = {"retry-after": str(exc.retry_after)} if exc.retry_after is not None else {}
        if exc.status == 401:
            headers["www-authenticate"] = "Bearer"
        return JSONResponse({"detail": exc.message}, status_code=exc.status, headers=headers)
    return JSONResponse({"chatId": chat_id, "callId": call_id, "status": "continuing"}, 202)


def _check_credential(request: Request, token: Any) -> None:
    if token is None:
        raise RequestError(403, OFF)
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    expected = token.get_secret_value().encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
        raise RequestError(401, "a backend's bearer credential is required")


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ()))
    message = str(error.get("msg", "not a result")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
