"""Which agent the server runs: one passed to ``create_app``, one named by a setting, or the
demo agent (docs/adr/0006-offline-demo-model.md); and the name of the app it makes, which
names the default chat store (docs/adr/0024-store-per-app.md)."""

from __future__ import annotations

import importlib
import logging
import re
from dataclasses import dataclass

from google.adk.apps import App
from google.adk.workflow import BaseNode

from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.turns.runners import AgentLike

logger = logging.getLogger(__name__)

# What ADK accepts as an App name, and so what is safe in a file name.
_APP_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]*$")


@dataclass(frozen=True)
class ServedAgents:
    """The agent for /stream, the one for /live, and the app's name."""

    agent: AgentLike
    live_agent: AgentLike
    # An App's own name; else `ADK_STREAM_APP_NAME` when it is set; else the user's agent's
    # name; else (the demo) the default app name. It names the default store.
    name: str
    # The app name ADK keeps the chats under: an App's own, else `ADK_STREAM_APP_NAME` (its
    # default for an agent that is not an App). Redis keys carry it too.
    session_app_name: str

    @property
    def agent_name(self) -> str:
        """The root agent's own name (inside an App, its root agent's)."""
        root = self.agent.root_agent if isinstance(self.agent, App) else self.agent
        return root.name if root is not None else self.name


def load_agent(spec: str) -> AgentLike:
    """Import ``module:attribute`` and check that it is an ADK agent, graph workflow or App."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"agent setting {spec!r} must look like 'package.module:attribute'")
    target: object = importlib.import_module(module_name)
    for name in attribute.split("."):
        target = getattr(target, name)
    if not isinstance(target, BaseNode | App):
        raise TypeError(f"{spec!r} is a {type(target).__name__}, not an ADK agent, workflow or App")
    return target


def serve_agents(settings: Settings, agent: AgentLike | None) -> ServedAgents:
    """The agents to serve: the one given, the setting's, or the demo agent (which gets a
    live-capable model on /live)."""
    from adk_stream_protocol.demo import build_demo_agent, register_offline_model

    # Any agent may name the offline model as a string ("offline-demo"). ADK looks such names
    # up in its registry only at the agent's first model call, so registering here, before
    # the first request, is in time, for sub-agents too.
    register_offline_model()
    if agent is None and settings.agent:
        agent = load_agent(settings.agent)
    if agent is not None:
        session_name = agent.name if isinstance(agent, App) else settings.app_name
        return ServedAgents(agent, agent, app_name_of(settings, agent), session_name)
    model, live_model = settings.resolved_model(), settings.resolved_live_model()
    logger.info("serving the demo agent with model %s (live: %s)", model, live_model)
    demo, live_demo = build_demo_agent(model), build_demo_agent(live_model)
    return ServedAgents(demo, live_demo, settings.app_name, settings.app_name)


def app_name_of(settings: Settings, agent: AgentLike) -> str:
    """The name of the app serving a user's agent. Two agents served from one folder get
    two names, and so two default stores, unless the user names both apps alike."""
    if isinstance(agent, App):
        return agent.name
    if "app_name" in settings.model_fields_set:  # set by the user: theirs to choose
        return settings.app_name
    # Agent names are Python identifiers, which may start with `_` or hold non-ASCII letters.
    return agent.name if _APP_NAME.match(agent.name) else settings.app_name
