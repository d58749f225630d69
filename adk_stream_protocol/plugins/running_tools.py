"""Which tools run right now, per chat: a server that restarts waits for them before it
ends a run, since ending a run cancels the tool it is in (docs/adr/0033).

``RunningTools`` is a plugin of the ``run_async`` runner, first in its list so that its
callbacks run whatever later plugins return. A tool counts from its ``before_tool_callback``
to its ``after_tool_callback`` or ``on_tool_error_callback``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from google.adk.plugins import BasePlugin
from google.adk.tools import BaseTool, ToolContext

PLUGIN_NAME = "adk_stream_protocol_running_tools"


class RunningTools(BasePlugin):
    """The call ids of the tools running now, by chat ``(user_id, chat_id)``."""

    def __init__(self) -> None:
        super().__init__(name=PLUGIN_NAME)
        self._running: dict[tuple[str, str], set[str]] = {}
        self._idle: dict[tuple[str, str], asyncio.Event] = {}  # set when the chat's tools end

    def running(self, chat: tuple[str, str]) -> bool:
        return bool(self._running.get(chat))

    async def idle(self, chat: tuple[str, str]) -> None:
        """Return once no tool of the chat runs (bound it with a timeout)."""
        while self.running(chat):
            await self._idle.setdefault(chat, asyncio.Event()).wait()

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        self._running.setdefault(_chat(tool_context), set()).add(_call_id(tool_context))
        return None

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        self._ended(tool_context)
        return None

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        self._ended(tool_context)
        return None

    def _ended(self, tool_context: ToolContext) -> None:
        chat = _chat(tool_context)
        calls = self._running.get(chat)
        if calls is not None:
            calls.discard(_call_id(tool_context))
            if not calls:
                del self._running[chat]
                if (idle := self._idle.pop(chat, None)) is not None:
                    idle.set()


def _chat(tool_context: ToolContext) -> tuple[str, str]:
    return (tool_context.session.user_id, tool_context.session.id)


def _call_id(tool_context: ToolContext) -> str:
    return tool_context.function_call_id or ""
