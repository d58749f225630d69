"""The command ``adk-stream-protocol`` (docs/adr/0028-package-and-command.md).

``adk-stream-protocol serve [AGENT_OR_AGENTS_DIR] [--host H] [--port P] [--reload]`` runs the
server under uvicorn: the demo agent; a ``module:attribute`` agent; one agent's folder; or a
folder of agents in ADK's layout, each under ``/apps/<name>/``.

``adk-stream-protocol replay DIR [--speed S] [--host H] [--port P]`` serves the responses
recorded in DIR (``ADK_STREAM_RECORD_DIR``) as a stand-in ``/stream`` and ``/live``, with no
agent.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.replay.app import create_replay_app
from adk_stream_protocol.server.agents_folder import create_server
from adk_stream_protocol.turns.drain import END_WAIT_SECONDS, TOOL_WAIT_SECONDS

logger = logging.getLogger(__name__)

# What uvicorn imports in its worker (and again after each reload): the server the
# environment describes, which `serve` has set from its arguments.
SERVER_FACTORY = "adk_stream_protocol.cli:server_from_environment"


def server_from_environment() -> ASGIApp:
    return create_server(Settings())


def graceful_shutdown_seconds(settings: Settings) -> int:
    """uvicorn's ``timeout_graceful_shutdown``: above the drain's longest run, the grace
    plus a started tool's wait and the runs' last writes."""
    return math.ceil(settings.shutdown_grace_seconds + TOOL_WAIT_SECONDS + END_WAIT_SECONDS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command == "serve":
        return _serve(parser, args)
    if args.command == "replay":
        return _replay(parser, args)
    parser.error(f"unknown command {args.command!r}")  # argparse exits
    return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adk-stream-protocol",
        description="Serve a Google ADK agent to Vercel AI SDK useChat clients.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the server",
        description=(
            "Run the server: POST /stream, WS /live and the playground page at /. With no "
            "argument it serves the demo agent (or ADK_STREAM_AGENT). Settings come from "
            "ADK_STREAM_* environment variables (docs/operating/settings.md)."
        ),
    )
    serve.add_argument(
        "agent",
        nargs="?",
        metavar="AGENT_OR_AGENTS_DIR",
        help=(
            "'package.module:attribute' naming an ADK agent, workflow or App (imported from the "
            "current folder); or one agent's folder (with agent.py or root_agent.yaml), served "
            "at /; or a folder of such folders, each agent served at /apps/<folder name>/"
        ),
    )
    _listen_arguments(serve)
    serve.add_argument(
        "--reload", action="store_true", help="restart when a Python file of the agent changes"
    )
    replay = commands.add_parser(
        "replay",
        help="serve recorded responses, with no agent",
        description=(
            "Serve the responses recorded in DIR (with ADK_STREAM_RECORD_DIR=DIR) as a "
            "stand-in POST /stream and WS /live, and the playground page at /. A request is "
            "answered by a recording of the same message (docs/frontend/recording.md)."
        ),
    )
    replay.add_argument("record_dir", metavar="DIR", type=Path, help="the recordings' folder")
    replay.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="how much faster than recorded the chunks come (default 1; 0: all at once)",
    )
    _listen_arguments(replay)
    return parser


def _listen_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--host", help="address to listen on (default: ADK_STREAM_HOST, 127.0.0.1)"
    )
    command.add_argument("--port", type=int, help="port (default: ADK_STREAM_PORT, 8000)")


def _serve(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    watch = Path.cwd()
    if args.agent:
        folder = Path(args.agent)
        if folder.is_dir():
            # The worker reads it from the environment, after every reload too.
            os.environ["ADK_STREAM_AGENTS_DIR"] = str(folder.resolve())
            os.environ.pop("ADK_STREAM_AGENT", None)
            watch = folder.resolve()
        elif ":" in args.agent:
            os.environ["ADK_STREAM_AGENT"] = args.agent
            os.environ.pop("ADK_STREAM_AGENTS_DIR", None)
        else:
            parser.error(f"{args.agent!r} is neither a folder nor 'package.module:attribute'")
    # A console script does not import from the current folder, as `python -m` would; an
    # agent named as `module:attribute` is looked for there. (uvicorn's reloading worker
    # gets this sys.path too.)
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    settings = Settings()
    uvicorn.run(
        SERVER_FACTORY,
        factory=True,
        host=args.host or settings.host,
        port=settings.port if args.port is None else args.port,
        reload=args.reload,
        reload_dirs=[str(watch)] if args.reload else None,
        timeout_graceful_shutdown=graceful_shutdown_seconds(settings),
    )
    return 0


def _replay(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    settings = Settings()
    try:
        app = create_replay_app(args.record_dir, settings=settings, speed=args.speed)
    except (NotADirectoryError, FileNotFoundError, ValueError) as exc:
        parser.error(str(exc))  # argparse exits
    uvicorn.run(
        app,
        host=args.host or settings.host,
        port=settings.port if args.port is None else args.port,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
