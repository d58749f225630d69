"""Tools that reach the page while they run: ``send_data`` (docs/adr/0025).

A tool calls ``await send_data(tool_context, "progress", {...}, id="x")`` and the client's
message gets a ``data-progress`` part (or, with ``transient=True``, only its ``onData``
callback). The chunk goes to the response that is answering the tool's chat right now.

The route is ``ToolUiPlugin``: the application adds one to both runners (in their plugin
chains), and a run tells it, for as long as it runs, where its chat's data goes
(``open_route``/``close_route``): a request turn's response, or a ``/live`` run's reports. A
tool finds the plugin through its own invocation (ADK's plugin manager): no module-level
state. A chat runs one turn at a time (its lease), so the chat names the turn. Outside a
served turn (``adk web``, a test calling the tool directly) ``send_data`` does nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from google.adk.plugins import BasePlugin
from google.adk.tools import ToolContext

from adk_stream_protocol.plugins.chain import find_plugin
from adk_stream_protocol.protocol.chunks import DataChunk
from adk_stream_protocol.protocol.event_values import json_safe

logger = logging.getLogger(__name__)

PLUGIN_NAME = "adk_stream_protocol_tool_ui"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# Where a chat's tool data goes: the chunk, and the id of the call that sent it.
DataRoute = Callable[[DataChunk, str | None], Awaitable[None]]


class ToolUiPlugin(BasePlugin):
    """The routes from tools to the responses of the chats that run now."""

    def __init__(self) -> None:
        super().__init__(name=PLUGIN_NAME)
        self._routes: dict[tuple[str, str], DataRoute] = {}

    def open_route(self, chat: tuple[str, str], route: DataRoute) -> None:
        self._routes[chat] = route

    def close_route(self, chat: tuple[str, str], route: DataRoute) -> None:
        """Forget the chat's route, unless another turn has opened its own since."""
        if self._routes.get(chat) == route:
            del self._routes[chat]

    def route(self, chat: tuple[str, str]) -> DataRoute | None:
        return self._routes.get(chat)


async def send_data(
    tool_context: ToolContext,
    name: str,
    data: Any,
    *,
    id: str | None = None,  # the AI SDK's name for it
    transient: bool = False,
) -> None:
    """Send a ``data-<name>`` part to the page from inside a tool.

    ``id``: a later part with the same name and id replaces this one in the message (progress
    that updates in place). ``transient``: the client hands it to ``onData`` and does not keep
    it in the message. ``data`` is made JSON (dates, bytes…) as tool results are.
    """
    if not _NAME.match(name):
        raise ValueError(f"a data part name is 1-64 letters, digits, '-' or '_', not {name!r}")
    chunk = DataChunk(
        type=f"data-{name}", data=json_safe(data), id=id, transient=True if transient else None
    )
    plugin = find_plugin(tool_context.get_invocation_context().plugin_manager, PLUGIN_NAME)
    chat = (tool_context.session.user_id, tool_context.session.id)
    route = plugin.route(chat) if isinstance(plugin, ToolUiPlugin) else None
    if route is None:
        logger.debug("data-%s not sent: no served turn for chat=%s", name, chat[1])
        return
    await route(chunk, tool_context.function_call_id)
