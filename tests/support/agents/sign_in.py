"""An agent whose tool signs the user in at an OAuth2 provider (issue 37), in the shape of
ADK's authenticated-tool samples: the tool reads the credential with
``tool_context.get_auth_response``, asks for one with ``request_credential`` while it has
none, and with one calls the provider's API with the access token ADK exchanged the
authorization code for. The provider is a real one (``tests/support/oauth_provider.py``); the
model is ``ScriptedLlm``.

A ``Ledger`` (``samples.py``) holds one line per API call the tool made, so a test sees that
the token worked, for whom, and how often. ``served_forecaster`` is the API-key tool of
``human_input.py`` for a server that imports its agent (the real clients' tests)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
from fastapi.openapi.models import OAuth2, OAuthFlowAuthorizationCode, OAuthFlows
from google.adk.agents import Context, LlmAgent
from google.adk.apps import App
from google.adk.auth.auth_credential import AuthCredential, AuthCredentialTypes, OAuth2Auth
from google.adk.auth.auth_tool import AuthConfig
from google.adk.events import Event
from google.adk.tools import ToolContext
from google.adk.workflow import START, FunctionNode, Workflow

from adk_stream_protocol.testing import ScriptedLlm, call
from tests.support.agents.human_input import forecast_agent
from tests.support.agents.samples import Ledger
from tests.support.oauth_provider import SCOPE, Provider

SIGNED_IN_ANSWER = "Here is who you are at the provider."
WAITING = {"status": "waiting for the user to sign in"}


def profile_auth(provider: Provider, redirect_uri: str | None) -> AuthConfig:
    """The provider's authorization-code flow, with the agent's registered client
    (``redirect_uri``: where the provider sends the user back; None leaves it to the
    server's callback route)."""
    return AuthConfig(
        auth_scheme=OAuth2(
            flows=OAuthFlows(
                authorizationCode=OAuthFlowAuthorizationCode(
                    authorizationUrl=provider.authorize_url,
                    tokenUrl=provider.token_url,
                    scopes={SCOPE: "who you are"},
                )
            )
        ),
        raw_auth_credential=AuthCredential(
            auth_type=AuthCredentialTypes.OAUTH2,
            oauth2=OAuth2Auth(
                client_id=provider.client.client_id,
                client_secret=provider.client.client_secret,
                redirect_uri=redirect_uri,
            ),
        ),
        credential_key="provider_profile",
    )


def profile_agent(
    provider: Provider,
    ledger: Ledger,
    redirect_uri: str | None,
    release: threading.Event | None = None,
) -> LlmAgent:
    """An agent with one tool, ``get_profile``: the signed-in user's profile at the
    provider. With ``release``, the tool waits for it once it has a token (so that a test's
    resume begins before the answer ends)."""
    auth = profile_auth(provider, redirect_uri)

    async def get_profile(tool_context: ToolContext) -> dict[str, Any]:
        """Who the user is at the provider."""
        credential = tool_context.get_auth_response(auth)
        token = credential.oauth2.access_token if credential and credential.oauth2 else None
        if not token:
            tool_context.request_credential(auth)
            return dict(WAITING)
        if release is not None:
            await asyncio.to_thread(release.wait, 10)
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.get(provider.api_url, headers={"authorization": f"Bearer {token}"})
        answer.raise_for_status()
        profile: dict[str, Any] = answer.json()
        ledger.record(f"profile of {profile['sub']}")
        return profile

    model = ScriptedLlm(
        script={
            "who am i": [call("get_profile"), SIGNED_IN_ANSWER],
            "": ["Ask me who you are."],
        }
    )
    return LlmAgent(name="profiler", model=model, tools=[get_profile])


def profile_workflow(provider: Provider, ledger: Ledger, redirect_uri: str | None) -> App:
    """A graph ``Workflow`` whose one ``FunctionNode`` signs the user in before it runs
    (``auth_config``: ADK asks, and checks that the answer brings back the ``state`` it made),
    then says who the user is at the provider."""
    auth = profile_auth(provider, redirect_uri)

    async def greet(ctx: Context) -> Event:
        credential = ctx.get_auth_response(auth)
        token = credential.oauth2.access_token if credential and credential.oauth2 else None
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.get(provider.api_url, headers={"authorization": f"Bearer {token}"})
        answer.raise_for_status()
        profile: dict[str, Any] = answer.json()
        ledger.record(f"profile of {profile['sub']}")
        return Event(message=f"Hello, {profile['name']}.")

    node = FunctionNode(func=greet, auth_config=auth, rerun_on_resume=True)
    workflow = Workflow(name="greeter", edges=[(START, node)])
    return App(name="greeter", root_agent=workflow)


# The API-key forecaster as a server serves it
# (ADK_STREAM_AGENT=tests.support.agents.sign_in:served_forecaster): what its tool did is read
# from what the page got, not from this ledger.
served_forecaster = forecast_agent(Ledger())
