"""Serve a Google ADK agent to Vercel AI SDK v6 clients (``useChat``) over SSE and WebSocket."""

from adk_stream_protocol.app import create_app
from adk_stream_protocol.converter import StreamProtocolConverter
from adk_stream_protocol.settings import Settings

__all__ = ["Settings", "StreamProtocolConverter", "create_app"]
