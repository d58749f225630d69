"""Applications for tests that replace parts of the default server the way a deployment would."""

from __future__ import annotations

from fastapi import Header

from adk_stream_protocol import create_app


async def user_from_header(x_test_user: str = Header()) -> str:
    """Test-only identity: trusts a header. A real deployment verifies a token here."""
    return x_test_user


# The demo agent, with identity taken from `x-test-user` (see the `identity` parameter).
header_identity_app = create_app(identity=user_from_header)
