"""``GET /auth/callback``: where an OAuth2 provider sends the user back after a tool's sign-in,
when ``ADK_STREAM_AUTH_CALLBACK_URL`` names it (docs/adr/0065).

The provider redirects the browser tab the page opened, with the authorization ``code`` (or
an ``error``) and the ``state`` that ``plugins/sign_ins.py`` bound to the user, the chat and
the credential request. The route takes that state once (unknown, used or expired: 400, and
nothing runs), checks that the tab is the same user's (the identity dependency runs as on every
route; another user: 403), and gives ADK its answer to the request: the ``authConfig`` with the
URL the user came back to. The answer goes to the chat as a backend's result does (docs/adr/0040):
under the chat's lease, at most once, its continuation in the chat's chunk log, which the page
follows with its resume. ADK then exchanges the code and runs the tool again.

The tab is told what happened in a short page. Nothing the provider sent is logged; uvicorn's
request line has its query's values redacted (``foundation/security.py``).
"""

from __future__ import annotations

import html
import logging
import re
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.identity import current_user
from adk_stream_protocol.plugins.sign_ins import redirect_answer
from adk_stream_protocol.turns.bridge import Bridge, bridge_of
from adk_stream_protocol.turns.completed_calls import continue_completed_call

logger = logging.getLogger(__name__)

router = APIRouter()

CALLBACK_PATH = "/auth/callback"
# An OAuth2 error code (RFC 6749, 4.1.2.1): shown to the model and the page as it is.
_ERROR_CODE = re.compile(r"^[a-z_]{1,64}$")
_MAX_STATE = 256

SIGNED_IN = "You can close this tab and go back to the chat."
PROVIDER_REFUSED = "The provider did not sign you in. The chat was told: go back to it."
NOT_VALID = (
    "This sign-in link is not valid: it was used already, it has expired, or this server never "
    "gave it out. Nothing was changed. Go back to the chat and sign in again."
)
OTHER_USER = (
    "This sign-in was started by another user of this server, so it was not used. Nothing "
    "was changed."
)
OFF = "Sign-in callbacks are off on this server (ADK_STREAM_AUTH_CALLBACK_URL is unset)."
NO_CODE = "The provider sent neither an authorization code nor an error."


@router.get(
    CALLBACK_PATH,
    response_class=HTMLResponse,
    responses={
        200: {"description": "The sign-in's answer was given: the chat goes on"},
        400: {"description": "No valid state: unknown, used or expired"},
        403: {"description": "The sign-in is another user's"},
        404: {"description": "Sign-in callbacks are off, or the chat's call is gone"},
        409: {"description": "The call has its answer, or the chat stays busy"},
        503: {"description": "A store is unavailable, or the server drains"},
    },
)
async def sign_in_callback(
    request: Request, user_id: Annotated[str, Depends(current_user)]
) -> HTMLResponse:
    bridge = bridge_of(request.app.state)
    try:
        title, text = await _answer(bridge, request, user_id)
    except RequestError as exc:
        logger.info("sign-in callback refused status=%s reason=%s", exc.status, exc.message)
        headers = {"retry-after": str(exc.retry_after)} if exc.retry_after is not None else {}
        return _page(exc.status, "Sign-in not completed", exc.message, headers)
    return _page(200, title, text)


async def _answer(bridge: Bridge, request: Request, user_id: str) -> tuple[str, str]:
    """Give the chat its answer; what the tab is told. ``RequestError`` for a refusal."""
    callback_url = bridge.settings.auth_callback_url
    if callback_url is None:
        raise RequestError(404, OFF)
    query = request.query_params
    state = query.get("state", "")
    if not state or len(state) > _MAX_STATE:
        raise RequestError(400, NOT_VALID)
    try:
        sign_in = await bridge.coordination.sign_ins.take(state)
    except Exception as exc:
        refusal = bridge.outages.refusal(exc, "a sign-in's callback")
        if refusal is None:
            raise
        raise refusal from exc
    if sign_in is None:
        raise RequestError(400, NOT_VALID)
    if sign_in.chat[0] != user_id:
        raise RequestError(403, OTHER_USER)
    error = query.get("error")
    if error is not None:
        code = error if _ERROR_CODE.match(error) else "invalid_error"
        result = {"error": f"The provider refused the sign-in ({code})."}
        told = (f"Sign-in refused ({code})", PROVIDER_REFUSED)
    elif query.get("code"):
        result = redirect_answer(sign_in, callback_url, request.url.query)
        told = ("Signed in", SIGNED_IN)
    else:
        raise RequestError(400, NO_CODE)
    await continue_completed_call(
        bridge.turns, bridge.response_slots, sign_in.chat, sign_in.call_id, result
    )
    logger.info(
        "sign-in callback user=%s chat=%s call=%s: %s",
        user_id,
        sign_in.chat[1],
        sign_in.call_id,
        "answered" if error is None else "refused by the provider",
    )
    return told


def _page(
    status: int, title: str, text: str, headers: dict[str, str] | None = None
) -> HTMLResponse:
    """A short page for the tab the provider redirected: what happened, nothing else (no
    script, no link the redirect's query could leak through)."""
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p></body></html>"
    )
    extra = {"cache-control": "no-store", "referrer-policy": "no-referrer", **(headers or {})}
    return HTMLResponse(body, status, headers=extra)
