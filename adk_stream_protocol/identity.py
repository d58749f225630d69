"""Who is asking. The one place to plug in real authentication.

Every endpoint takes the user id from the ``current_user`` dependency. The default trusts
nobody's word and serves a single local user, which is right for a development server and
for a deployment behind an authenticating proxy that runs one instance per user. Replace it
with ``app.dependency_overrides[current_user] = your_dependency`` (anything FastAPI can
inject; it must return a stable user id string) or ``create_app(identity=...)``.
"""

from __future__ import annotations

LOCAL_USER = "local-user"


async def current_user() -> str:
    return LOCAL_USER
