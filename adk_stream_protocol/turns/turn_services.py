"""``TurnServices``: what a turn runs with, application-wide, in a few named groups.

The ``Bridge`` builds them once (it is the composition root) and the transports hand them to
the turns they start; a turn takes what it uses from them and never reaches for the
application itself. Each group is a plain object that a test can build on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from adk_stream_protocol.coordination.base import Coordination
from adk_stream_protocol.foundation.outages import Outages
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.observability.telemetry import Telemetry
from adk_stream_protocol.turns.background_tasks import BackgroundTasks
from adk_stream_protocol.turns.chat_tools import ChatTools
from adk_stream_protocol.turns.drain import Drain
from adk_stream_protocol.turns.openings import ResponseOpener
from adk_stream_protocol.turns.runners import Runners


@dataclass(frozen=True)
class Runtime:
    """The application while it runs: its background tasks, the drain of a rolling restart, its
    telemetry and which of its stores are down."""

    tasks: BackgroundTasks
    drain: Drain
    telemetry: Telemetry
    outages: Outages


@dataclass(frozen=True)
class TurnServices:
    """What every turn runs with: the settings; ADK's runners and the stores they run on;
    our plugins; the coordination between processes; how a response is opened; the
    application's runtime."""

    settings: Settings
    runners: Runners
    tools: ChatTools
    coordination: Coordination
    responses: ResponseOpener
    runtime: Runtime
