"""Who is asking. The one place to plug in real authentication.

Every endpoint takes the user id from the ``current_user`` dependency. The default trusts
nobody's word and serves a single local user, which is right for a development server and
for a deployment behind an authenticating proxy that runs one instance per user. Replace it
with ``app.dependency_overrides[current_user] = your_dependency`` (anything FastAPI can
inject; it must return a stable user id string) or ``create_app(identity=...)``.

``/live`` runs it itself (``user_of``): at the handshake of a socket that serves one chat, and
for every request frame of an ai 7 socket, with that frame's ``headers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Annotated

from fastapi import Depends, HTTPException, WebSocket, WebSocketException
from fastapi.dependencies.utils import get_dependant, solve_dependencies

from adk_stream_protocol.foundation.errors import RequestError

LOCAL_USER = "local-user"


async def current_user() -> str:
    return LOCAL_USER


async def user_of(websocket: WebSocket, frame_headers: Mapping[str, str] | None = None) -> str:
    """Run the app's identity dependency (with its overrides) for a WebSocket: at the
    handshake, or for one request frame of an ai 7 socket, whose ``headers`` are laid over
    the handshake's (a browser can set headers only there). A refusal is a ``RequestError``
    with the dependency's status and detail."""
    try:
        connection = _with_headers(websocket, frame_headers) if frame_headers else websocket
        solved = await solve_dependencies(
            request=connection,
            dependant=_IDENTITY,
            dependency_overrides_provider=websocket.app,
            # Unused by FastAPI (it takes the route's stacks from the scope), still required.
            async_exit_stack=AsyncExitStack(),
            embed_body_fields=False,
        )
    except HTTPException as exc:
        raise RequestError(exc.status_code, str(exc.detail)) from None
    except WebSocketException as exc:
        raise RequestError(403, exc.reason or "not allowed") from None
    except UnicodeEncodeError:
        raise RequestError(422, "header names and values must be Latin-1 text") from None
    if solved.errors:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error.get('loc', ()))}: {error.get('msg')}"
            for error in solved.errors
        )
        raise RequestError(401, f"who is asking could not be established ({problems})")
    user = solved.values["user_id"]
    if not isinstance(user, str) or not user:
        raise RuntimeError("the identity dependency must return a non-empty string")
    return user


def _with_headers(websocket: WebSocket, frame_headers: Mapping[str, str]) -> WebSocket:
    """The handshake's connection as the frame's request: its headers, then the frame's."""
    headers = {k.lower(): v for k, v in websocket.headers.items()}
    headers.update({k.lower(): v for k, v in frame_headers.items()})
    scope = dict(websocket.scope)
    scope["headers"] = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    return WebSocket(scope, receive=websocket.receive, send=websocket.send)


async def _identity(user_id: Annotated[str, Depends(current_user)]) -> str:
    return user_id


_IDENTITY = get_dependant(path="/live", call=_identity)
