"""Serve a Google ADK agent to Vercel AI SDK clients (``useChat``, ai 6 and 7) over SSE and
WebSocket."""

from adk_stream_protocol.agents_folder import create_server
from adk_stream_protocol.app import create_app
from adk_stream_protocol.converter import StreamProtocolConverter
from adk_stream_protocol.settings import Settings
from adk_stream_protocol.tool_ui import send_data

__all__ = ["Settings", "StreamProtocolConverter", "create_app", "create_server", "send_data"]
