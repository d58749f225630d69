"""Who may talk to the server from a browser, and the headers every response carries.

The policy (docs/adr/0019): the Host header must name this server (``trusted_hosts``, against
DNS rebinding); a WebSocket handshake from a browser must come from the server's own origin or
one of ``cors_origins`` (against cross-site WebSocket hijacking, since a socket carries the
user's cookies); every response says ``nosniff``, and the playground page may load and frame
nothing from elsewhere.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adk_stream_protocol.foundation.settings import Settings

# Every response.
_COMMON_HEADERS = ((b"x-content-type-options", b"nosniff"),)
# The playground page and its files: nothing from another origin, not framed by other sites.
# `connect-src 'self'` covers the page's own ws:// and wss:// URLs.
PLAYGROUND_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'self'"
)
_PAGE_HEADERS = (
    (b"content-security-policy", PLAYGROUND_CSP.encode()),
    (b"referrer-policy", b"same-origin"),
)


def add_http_policies(app: Starlette, settings: Settings, *, exempt: Iterable[str] = ()) -> None:
    """The policy's middleware: the host check first, then CORS for ``cors_origins``, and the
    response headers (the page policy on all paths but ``exempt``)."""
    # Added innermost first: the host check runs before anything else.
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["*"],
            expose_headers=["x-vercel-ai-ui-message-stream"],
        )
    app.add_middleware(SecurityHeadersMiddleware, exempt=exempt)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.trusted_hosts)


# Query parameters of our own, whose values are no secret (a chat id is not user content).
_PLAIN_QUERY_KEYS = frozenset({"chatId", "resume", "version", "transport", "api"})
_QUERY_PARAMETER = re.compile(r"([?&])([^=&#\s\"]+)=([^&#\s\"]*)")


class QueryRedaction(logging.Filter):
    """Hides the values of other query parameters in uvicorn's request lines (its access log,
    and the ``WebSocket ... [accepted]`` lines): a credential in the query string, which a
    browser's WebSocket handshake may have to use (docs/operating/security.md), stays out of the
    log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _redacted(arg) if isinstance(arg, str) and "?" in arg else arg
                for arg in record.args
            )
        return True


def _redacted(path: str) -> str:
    def hide(match: re.Match[str]) -> str:
        separator, key, _ = match.groups()
        return match[0] if key in _PLAIN_QUERY_KEYS else f"{separator}{key}=[redacted]"

    return _QUERY_PARAMETER.sub(hide, path)


def redact_query_strings_in_server_logs() -> None:
    """Put ``QueryRedaction`` on uvicorn's loggers (once: it is called at each start-up)."""
    for name in ("uvicorn.access", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, QueryRedaction) for f in logger.filters):
            logger.addFilter(QueryRedaction())


def origin_allowed(headers: Mapping[str, str], allowed: Iterable[str]) -> bool:
    """May a WebSocket handshake with these headers proceed?

    No ``Origin``: not a browser, so no ambient cookies to abuse: allowed (authentication is
    the identity dependency's job). Otherwise the origin must be the server's own (same
    scheme-less host and port as the ``Host`` header) or listed.
    """
    origin = headers.get("origin")
    if origin is None:
        return True
    allowed = set(allowed)
    if "*" in allowed or origin in allowed:
        return True
    host = headers.get("host", "")
    parts = urlsplit(origin)
    return bool(host) and parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


class SecurityHeadersMiddleware:
    """Adds ``nosniff`` to every HTTP response and the page policy to all but ``exempt``
    paths (the opt-in API docs pages, which load their scripts from a CDN).

    The policy is harmless on API responses (it governs documents only), so it is not
    limited to the playground's paths.
    """

    def __init__(self, app: ASGIApp, *, exempt: Iterable[str] = ()) -> None:
        self.app = app
        self._exempt = frozenset(exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra: tuple[tuple[bytes, bytes], ...] = _COMMON_HEADERS
        if scope["path"] not in self._exempt:
            extra = (*_COMMON_HEADERS, *_PAGE_HEADERS)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = Headers(raw=message.get("headers", [])).keys()
                added = [(k, v) for k, v in extra if k.decode() not in present]
                message = {**message, "headers": [*message.get("headers", []), *added]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
