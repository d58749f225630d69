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


def resolve_agent(settings: Settings, agent: AgentLike | None) -> AgentLike:
    if agent is not None:
        return agent
    if settings.agent:
        return load_agent(settings.agent)
    from adk_stream_protocol.demo import build_demo_agent, register_offline_model

    register_offline_model()
    model = settings.resolved_model()
    logger.info("serving the demo agent with model %s", model)
    return build_demo_agent(model)
