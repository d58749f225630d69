"""Applications for tests that replace parts of the default server the way a deployment would."""

from __future__ import annotations

from fastapi import Header, HTTPException
from starlette.requests import HTTPConnection

from adk_stream_protocol import create_app


async def user_from_header(x_test_user: str = Header()) -> str:
    """Test-only identity: trusts a header. A real deployment verifies a token here."""
    return x_test_user


# The demo agent, with identity taken from `x-test-user` (see the `identity` parameter).
header_identity_app = create_app(identity=user_from_header)


# Test-only tokens. A real deployment verifies a signed token (a JWT, a session cookie) here.
_TOKENS = {"token-alice": "alice", "token-bob": "bob"}


async def user_from_token(connection: HTTPConnection) -> str:
    """The way docs/operating/security.md documents for both transports: `Authorization: Bearer
    <token>` on HTTP, `?token=<token>` where a browser cannot set headers (the WebSocket handshake).
    Raising HTTPException refuses the request, and on /live the handshake, with that status."""
    token = connection.query_params.get("token")
    scheme, _, credentials = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        token = credentials
    user = _TOKENS.get(token or "")
    if user is None:
        raise HTTPException(401, "a valid token is needed")
    return user


token_identity_app = create_app(identity=user_from_token)
