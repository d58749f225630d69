"""The application. ``uvicorn server:app``, or ``python server.py`` for the host/port settings."""

import logging

import uvicorn

from adk_stream_protocol import Settings, create_app

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

app = create_app()

if __name__ == "__main__":
    settings = Settings()
    uvicorn.run("server:app", host=settings.host, port=settings.port)
