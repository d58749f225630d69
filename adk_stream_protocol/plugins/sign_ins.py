"""OAuth2 sign-ins that come back to the server (``ADK_STREAM_AUTH_CALLBACK_URL``,
docs/adr/0065).

ADK asks for a sign-in with an ``adk_request_credential`` call whose ``authConfig`` carries the
provider's authorization URL (``exchangedAuthCredential.oauth2.authUri``), made with ADK's own
``state`` and the ``redirect_uri`` the agent configured. ADK expects the page to take the
provider's redirect and answer with the URL it came back to. With a callback URL set,
``SignInPlugin`` turns the request, before it is stored or sent, into one that comes back to
the server instead: the authorization URL's ``redirect_uri`` becomes the callback's and its
``state`` a new one-time value, bound (``SignIns``, in the chat's coordination) to the user,
the chat and the call. What ADK made for itself stays in the binding, not on the page: its
``state`` and, for a public client, the PKCE ``codeVerifier``.

``redirect_answer`` is the other half: the answer ADK expects, from a binding and the query
the provider redirected with. The route that takes the redirect (``transports/auth_callback``)
hands it to the chat as a backend's result.
"""

from __future__ import annotations

import copy
import logging
import secrets
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from google.adk.plugins import BasePlugin
from google.genai import types

from adk_stream_protocol.coordination.base import SignIn, SignIns
from adk_stream_protocol.protocol.interrupts import CREDENTIAL_TOOL

logger = logging.getLogger(__name__)

PLUGIN_NAME = "adk_stream_protocol_sign_ins"


class SignInPlugin(BasePlugin):
    """Credential requests that ask for an OAuth2 redirect, made to come back to
    ``callback_url``, each bound for ``ttl_seconds``."""

    def __init__(self, sign_ins: SignIns, callback_url: str, ttl_seconds: float) -> None:
        super().__init__(name=PLUGIN_NAME)
        self._sign_ins = sign_ins
        self._callback_url = callback_url
        self._ttl_seconds = ttl_seconds

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        waiting = event.long_running_tool_ids
        if event.partial or not waiting or event.content is None or not event.content.parts:
            return None  # the cheap test first: this runs for every event
        parts = event.content.parts
        if not any(_credential_call(p, waiting) for p in parts):
            return None
        session = invocation_context.session
        chat = (session.user_id, session.id)
        changed = [await self._through_callback(chat, p, waiting) for p in parts]
        if all(new is old for new, old in zip(changed, parts, strict=True)):
            return None
        content = event.content.model_copy(update={"parts": changed})
        return event.model_copy(update={"content": content})

    async def _through_callback(
        self, chat: tuple[str, str], part: types.Part, waiting: Sequence[str] | set[str]
    ) -> types.Part:
        """The part, its call made to come back to the callback and bound; as it is when it
        is no credential request for an OAuth2 redirect."""
        call = part.function_call
        if call is None or not _credential_call(part, waiting) or not call.id:
            return part
        args = dict(call.args or {})
        config = args.get("authConfig")
        oauth2 = _oauth2_of(config)
        if not isinstance(config, dict) or oauth2 is None or not oauth2.get("authUri"):
            return part  # an API key, a token the page holds: nothing comes back to us
        state = secrets.token_urlsafe(32)
        callback = self._callback_url
        # ADK's answer but for the redirect: its own state and verifier, our callback.
        answer = _with_oauth2(config, redirectUri=callback)
        # The page's: the URL to open, which comes back to us with our state; no PKCE
        # verifier, which only ADK uses.
        shown = _with_oauth2(
            config,
            authUri=_with_query(str(oauth2["authUri"]), redirect_uri=callback, state=state),
            redirectUri=callback,
            state=state,
            codeVerifier=None,
        )
        await self._sign_ins.bind(state, SignIn(chat, call.id, answer), self._ttl_seconds)
        logger.info("sign-in through the callback chat=%s call=%s", chat[1], call.id)
        new_call = call.model_copy(update={"args": {**args, "authConfig": shown}})
        return part.model_copy(update={"function_call": new_call})


def redirect_answer(sign_in: SignIn, callback_url: str, query: str) -> dict[str, Any]:
    """ADK's answer to the sign-in's request, from the query the provider redirected to
    ``callback_url`` with: the request's ``authConfig`` with the URL the user came back to,
    its ``state`` ADK's own again (as ADK made the authorization URL)."""
    answer = copy.deepcopy(sign_in.answer)
    oauth2 = _oauth2_of(answer)
    assert oauth2 is not None  # bound only for such a request
    adk_state = oauth2.get("state")
    params = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "state"]
    if isinstance(adk_state, str):
        params.append(("state", adk_state))
    oauth2["authResponseUri"] = f"{callback_url}?{urlencode(params)}"
    return answer


def _credential_call(part: types.Part, waiting: Sequence[str] | set[str]) -> bool:
    call = part.function_call
    return call is not None and call.name == CREDENTIAL_TOOL and call.id in waiting


def _oauth2_of(config: Any) -> dict[str, Any] | None:
    """The ``exchangedAuthCredential.oauth2`` of an ``authConfig`` as ADK writes it."""
    credential = config.get("exchangedAuthCredential") if isinstance(config, dict) else None
    oauth2 = credential.get("oauth2") if isinstance(credential, dict) else None
    return oauth2 if isinstance(oauth2, dict) else None


def _with_oauth2(config: dict[str, Any], **values: Any) -> dict[str, Any]:
    """A copy of ``config`` with ``values`` set in its ``exchangedAuthCredential.oauth2``
    (None: the key removed)."""
    changed = copy.deepcopy(config)
    oauth2 = _oauth2_of(changed)
    assert oauth2 is not None  # only called for a config that has one
    for key, value in values.items():
        if value is None:
            oauth2.pop(key, None)
        else:
            oauth2[key] = value
    return changed


def _with_query(url: str, **values: str) -> str:
    """``url`` with the query parameters ``values`` set (replaced, or added)."""
    parts = urlsplit(url)
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in values]
    return urlunsplit(parts._replace(query=urlencode([*kept, *values.items()])))
