"""Which agent the server runs: one passed to ``create_app``, one named by a setting, or the
demo agent (docs/adr/0006-offline-demo-model.md)."""

from __future__ import annotations

import importlib
import logging

from google.adk.agents import BaseAgent
from google.adk.apps import App

from adk_stream_protocol.settings import Settings

logger = logging.getLogger(__name__)

AgentLike = BaseAgent | App


def load_agent(spec: str) -> AgentLike:
    """Import ``module:attribute`` and check that it is an ADK agent or App."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"agent setting {spec!r} must look like 'package.module:attribute'")
    target: object = importlib.import_module(module_name)
    for name in attribute.split("."):
        target = getattr(target, name)
    if not isinstance(target, BaseAgent | App):
        raise TypeError(f"{spec!r} is a {type(target).__name__}, not an ADK agent or App")
    return target


def resolve_agents(settings: Settings, agent: AgentLike | None) -> tuple[AgentLike, AgentLike]:
    """The agent for /stream and the one for /live: the same, unless it is the demo agent,
    which gets a live-capable model on /live."""
    if agent is not None:
        return agent, agent
    if settings.agent:
        loaded = load_agent(settings.agent)
        return loaded, loaded
    from adk_stream_protocol.demo import build_demo_agent, register_offline_model

    register_offline_model()
    model, live_model = settings.resolved_model(), settings.resolved_live_model()
    logger.info("serving the demo agent with model %s (live: %s)", model, live_model)
    return build_demo_agent(model), build_demo_agent(live_model)
