"""Offline demo agent: a scripted model and five tools (two run in the browser)."""

from adk_stream_protocol.foundation.model_names import OFFLINE_MODEL_NAME

from .agent import build_demo_agent
from .model import OfflineDemoLlm, register_offline_model
from .tools import demo_tools

__all__ = [
    "OFFLINE_MODEL_NAME",
    "OfflineDemoLlm",
    "build_demo_agent",
    "demo_tools",
    "register_offline_model",
]
