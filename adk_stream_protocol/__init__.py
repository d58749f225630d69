"""Serve a Google ADK agent to Vercel AI SDK clients (``useChat``, ai 6 and 7) over SSE and
WebSocket.

What users import lives here, whichever folder holds it (docs/architecture.md).
"""

from adk_stream_protocol.foundation.identity import current_user
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.plugins.idempotency import idempotent, lease_generation
from adk_stream_protocol.plugins.tool_ui import send_data
from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.server.agents_folder import create_server
from adk_stream_protocol.server.app import create_app

__all__ = [
    "Settings",
    "StreamProtocolConverter",
    "create_app",
    "create_server",
    "current_user",
    "idempotent",
    "lease_generation",
    "send_data",
]
