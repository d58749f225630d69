"""The application. ``uvicorn server:app``, or ``python server.py`` for the host/port settings.
(``adk-stream-protocol serve`` is the installed package's command for the same.)"""

import logging

import uvicorn

from adk_stream_protocol import Settings, create_server
from adk_stream_protocol.cli import graceful_shutdown_seconds

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

# The demo agent, or what ADK_STREAM_AGENT / ADK_STREAM_AGENTS_DIR name.
app = create_server()

if __name__ == "__main__":
    settings = Settings()
    # Above the drain a SIGTERM starts (docs/adr/0033, docs/deployment.md).
    uvicorn.run(
        "server:app",
        host=settings.host,
        port=settings.port,
        timeout_graceful_shutdown=graceful_shutdown_seconds(settings),
    )
