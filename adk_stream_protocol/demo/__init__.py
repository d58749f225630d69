"""Offline demo agent: a scripted model and five tools (two run in the browser)."""

from .agent import build_demo_agent
from .model import OfflineDemoLlm, register_offline_model
from .names import OFFLINE_MODEL_NAME
from .tools import demo_tools

__all__ = [
    "OFFLINE_MODEL_NAME",
    "OfflineDemoLlm",
    "build_demo_agent",
    "demo_tools",
    "register_offline_model",
]
