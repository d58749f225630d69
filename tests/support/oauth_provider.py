"""A real OAuth2 provider for the sign-in tests (issue 37): Authlib's ``AuthorizationServer``
with the authorization-code grant (PKCE when the client asks for it), its consent page, its
token endpoint and an API that takes the bearer tokens it issued, served by uvicorn from a
thread on a free loopback port.

Nothing of the server under test is in it: the server reaches it as it would reach any
provider, ADK's token exchange with ``requests`` and a tool's API call with ``httpx``, over
the loopback. ``Provider`` keeps what it issued (codes, tokens) and whom its API served, so a
test sees that a token was exchanged once and used; ``SigningInBrowser`` is the user's browser
tab: it opens an authorization URL, approves (or denies) on the consent page, and reads where
the provider sends it back.
"""

from __future__ import annotations

import html
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlencode

import httpx
from authlib.oauth2 import OAuth2Error, ResourceProtector
from authlib.oauth2.rfc6749 import (
    AuthorizationServer,
    ClientMixin,
    JsonRequest,
    OAuth2Request,
    TokenMixin,
)
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant
from authlib.oauth2.rfc6749.models import AuthorizationCodeMixin
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator
from authlib.oauth2.rfc7636 import CodeChallenge
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tests.support.rig import serve_app_in_thread

SCOPE = "profile"
# The people who can sign in at the provider, and what its API says about each.
PEOPLE = {
    "alice": {"sub": "alice", "name": "Alice Example"},
    "bob": {"sub": "bob", "name": "Bob Example"},
}


@dataclass
class RegisteredClient(ClientMixin):
    """The agent's OAuth2 client, as the provider registered it."""

    client_id: str
    client_secret: str
    redirect_uris: list[str]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        return " ".join(s for s in (scope or "").split() if s == SCOPE)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "authorization_code"


@dataclass
class IssuedCode(AuthorizationCodeMixin):
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    code_challenge: str | None
    code_challenge_method: str | None

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class IssuedToken(TokenMixin):
    access_token: str
    client_id: str
    scope: str
    user: str
    issued_at: float
    expires_in: int

    def check_client(self, client: ClientMixin) -> bool:
        return bool(client.get_client_id() == self.client_id)

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return time.time() > self.issued_at + self.expires_in

    def is_revoked(self) -> bool:
        return False

    def get_user(self) -> str:
        return self.user

    def get_client(self) -> ClientMixin:
        raise NotImplementedError  # not asked by the bearer validator


class _Request(OAuth2Request):
    """A request as Authlib reads it: its query and form read beforehand (Authlib is
    synchronous, Starlette's body is not)."""

    def __init__(self, request: Request, form: dict[str, str]) -> None:
        super().__init__(request.method, str(request.url), headers=request.headers)
        self._args = dict(request.query_params)
        self._form = form
        self.payload = BasicOAuth2Payload({**self._args, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


@dataclass
class Provider:
    """The provider's state: one registered client, what it issued, whom its API served."""

    client: RegisteredClient
    base_url: str = ""
    codes: dict[str, IssuedCode] = field(default_factory=dict)
    tokens: dict[str, IssuedToken] = field(default_factory=dict)
    exchanged: list[str] = field(default_factory=list)  # codes exchanged, in order
    served: list[str] = field(default_factory=list)  # whom the API answered, in order

    @property
    def authorize_url(self) -> str:
        return f"{self.base_url}/authorize"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/me"

    def secrets(self) -> list[str]:
        """Every secret of the provider's: the client's, each code and each token."""
        return [
            self.client.client_secret,
            *self.codes,
            *self.exchanged,
            *self.tokens,
        ]


class _Grant(AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = [
        "client_secret_basic",
        "client_secret_post",
    ]

    def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
        provider: Provider = self.server.provider
        data = request.payload.data
        provider.codes[code] = IssuedCode(
            code=code,
            client_id=request.client.get_client_id(),
            redirect_uri=data.get("redirect_uri", ""),
            scope=request.scope or "",
            user=request.user,
            code_challenge=data.get("code_challenge"),
            code_challenge_method=data.get("code_challenge_method"),
        )

    def query_authorization_code(self, code: str, client: ClientMixin) -> IssuedCode | None:
        issued = self.server.provider.codes.get(code)
        return issued if issued is not None and issued.client_id == client.client_id else None

    def delete_authorization_code(self, authorization_code: IssuedCode) -> None:
        provider: Provider = self.server.provider
        provider.codes.pop(authorization_code.code, None)
        provider.exchanged.append(authorization_code.code)

    def authenticate_user(self, authorization_code: IssuedCode) -> str:
        return authorization_code.user


class _Server(AuthorizationServer):
    def __init__(self, provider: Provider) -> None:
        super().__init__(scopes_supported=[SCOPE])
        self.provider = provider
        self.register_token_generator(
            "default", BearerTokenGenerator(lambda **_: secrets.token_urlsafe(24))
        )
        self.register_grant(_Grant, [CodeChallenge(required=False)])

    def query_client(self, client_id: str) -> RegisteredClient | None:
        client = self.provider.client
        return client if client.client_id == client_id else None

    def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
        self.provider.tokens[token["access_token"]] = IssuedToken(
            access_token=token["access_token"],
            client_id=request.client.get_client_id(),
            scope=token.get("scope", ""),
            user=request.user,
            issued_at=time.time(),
            expires_in=int(token.get("expires_in", 3600)),
        )

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        assert isinstance(request, OAuth2Request), request  # read by the route beforehand
        return request

    def create_json_request(self, request: Any) -> JsonRequest:
        raise NotImplementedError  # no JSON endpoint here

    def handle_response(self, status: int, body: Any, headers: Any) -> Response:
        if isinstance(body, dict):
            return JSONResponse(body, status, headers=dict(headers))
        return Response(body or "", status, headers=dict(headers))

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        return None


class _Tokens(BearerTokenValidator):
    def __init__(self, provider: Provider) -> None:
        super().__init__()
        self._provider = provider

    def authenticate_token(self, token_string: str) -> IssuedToken | None:
        return self._provider.tokens.get(token_string)


def provider_app(provider: Provider) -> Starlette:
    """The provider's routes: the consent page and its answer, the token endpoint, the API."""
    server = _Server(provider)
    protector = ResourceProtector()
    protector.register_token_validator(_Tokens(provider))

    async def consent(request: Request) -> Response:
        oauth_request = _Request(request, {})
        try:
            server.get_consent_grant(request=oauth_request, end_user=None)
        except OAuth2Error as error:
            return JSONResponse(dict(error.get_body()), error.status_code)
        action = html.escape(f"/authorize?{request.url.query}")
        return HTMLResponse(
            f'<form method="post" action="{action}"><input name="user">'
            '<button name="decision" value="allow">Allow</button>'
            '<button name="decision" value="deny">Deny</button></form>'
        )

    async def decide(request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        oauth_request = _Request(request, form)
        user = form.get("user") if form.get("decision") == "allow" else None
        if user is not None and user not in PEOPLE:
            return HTMLResponse("no such person", 403)
        grant = server.get_consent_grant(request=oauth_request, end_user=user)
        response: Response = server.create_authorization_response(
            request=oauth_request, grant_user=user, grant=grant
        )
        return response

    async def token(request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        response: Response = server.create_token_response(_Request(request, form))
        return response

    async def me(request: Request) -> Response:
        try:
            issued = protector.validate_request([SCOPE], _Request(request, {}))
        except OAuth2Error as error:
            return JSONResponse(dict(error.get_body()), error.status_code)
        provider.served.append(issued.user)
        return JSONResponse(PEOPLE[issued.user])

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/authorize", consent, methods=["GET"]),
            Route("/authorize", decide, methods=["POST"]),
            Route("/token", token, methods=["POST"]),
            Route("/api/me", me, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )


@contextmanager
def serve_provider(redirect_uris: list[str], workdir: Path) -> Iterator[Provider]:
    """A provider with one client, which may send users back to ``redirect_uris``, served
    until the block ends."""
    client = RegisteredClient(
        client_id=f"agent-{secrets.token_hex(4)}",
        client_secret=secrets.token_urlsafe(24),
        redirect_uris=redirect_uris,
    )
    provider = Provider(client)
    with serve_app_in_thread(provider_app(provider), workdir / "provider.db") as served:
        provider.base_url = served.base_url
        yield provider


class SigningInBrowser:
    """The browser tab the page opens at the provider's authorization URL."""

    def __init__(self) -> None:
        self._http = httpx.Client(timeout=10)

    def sign_in(self, auth_uri: str, person: str = "alice", *, allow: bool = True) -> str:
        """Open ``auth_uri``, answer the consent page as ``person``, and return where the
        provider sends the tab back (its redirect, not followed)."""
        page = self._http.get(auth_uri)
        assert page.status_code == 200 and "<form" in page.text, page.text
        decision = {"user": person, "decision": "allow" if allow else "deny"}
        answer = self._http.post(
            auth_uri,
            content=urlencode(decision),
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert answer.status_code == 302, answer.text
        return str(answer.headers["location"])

    def close(self) -> None:
        self._http.close()
