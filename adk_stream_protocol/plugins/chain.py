"""Our plugins of one runner, registered with ADK as one plugin (docs/adr/0053).

ADK's plugin manager awaits every callback of every registered plugin, the base class's
no-ops included, for every model response and every event: with four plugins of ours, those
awaits were 3-4 % of the server's CPU per answer under load, for callbacks none of them has
(bench/PROFILE.md). A ``PluginChain`` is one registration. It passes each callback to those of
its members that implement it, in order, and stops at the first that returns a value, as the
plugin manager does between plugins; the callbacks no member implements stay the base class's
no-ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.adk.events import Event
from google.adk.models import LlmResponse
from google.adk.plugins import BasePlugin
from google.adk.plugins.plugin_manager import PluginManager

# The callbacks a chain passes on: every one that a plugin of ours implements.
FORWARDED = frozenset(
    {
        "before_model_callback",
        "before_tool_callback",
        "after_tool_callback",
        "on_tool_error_callback",
        "on_event_callback",
    }
)


def implemented_callbacks(plugin: type[BasePlugin]) -> set[str]:
    """The callbacks a plugin class defines itself, not inheriting the base class's no-op."""
    return {
        name
        for name in vars(BasePlugin)
        if name.endswith("_callback") and getattr(plugin, name) is not vars(BasePlugin)[name]
    }


class PluginChain(BasePlugin):
    """``members`` as one plugin named ``name``, in their order."""

    def __init__(self, name: str, members: Sequence[BasePlugin]) -> None:
        super().__init__(name=name)
        self.members = tuple(members)
        implemented = [implemented_callbacks(type(member)) for member in self.members]
        if missing := set().union(*implemented) - FORWARDED:
            raise ValueError(f"a chain does not pass on {sorted(missing)}")
        self._implementers = {
            callback: tuple(
                getattr(member, callback)
                for member, names in zip(self.members, implemented, strict=True)
                if callback in names
            )
            for callback in FORWARDED
        }

    def member(self, name: str) -> BasePlugin | None:
        return next((m for m in self.members if m.name == name), None)

    async def _first(self, callback: str, arguments: dict[str, Any]) -> Any:
        for method in self._implementers[callback]:
            result = await method(**arguments)
            if result is not None:
                return result
        return None

    # ADK calls these with keyword arguments only (BasePlugin's signatures): they go on as
    # they came.

    async def before_model_callback(self, **arguments: Any) -> LlmResponse | None:
        result: LlmResponse | None = await self._first("before_model_callback", arguments)
        return result

    async def before_tool_callback(self, **arguments: Any) -> dict[str, Any] | None:
        result: dict[str, Any] | None = await self._first("before_tool_callback", arguments)
        return result

    async def after_tool_callback(self, **arguments: Any) -> dict[str, Any] | None:
        result: dict[str, Any] | None = await self._first("after_tool_callback", arguments)
        return result

    async def on_tool_error_callback(self, **arguments: Any) -> dict[str, Any] | None:
        result: dict[str, Any] | None = await self._first("on_tool_error_callback", arguments)
        return result

    async def on_event_callback(self, **arguments: Any) -> Event | None:
        result: Event | None = await self._first("on_event_callback", arguments)
        return result


def chained(
    name: str, first: Sequence[BasePlugin], app: Sequence[BasePlugin], last: Sequence[BasePlugin]
) -> list[BasePlugin]:
    """``first``, the app's own plugins, then ``last``: ours in as few registrations as that
    order allows (one when the app has none)."""
    if not app:
        return [PluginChain(name, [*first, *last])]
    return [
        *([PluginChain(f"{name}_first", first)] if first else []),
        *app,
        *([PluginChain(f"{name}_last", last)] if last else []),
    ]


def find_plugin(manager: PluginManager, name: str) -> BasePlugin | None:
    """The plugin ``name``, registered on its own or in a chain."""
    if (plugin := manager.get_plugin(name)) is not None:
        return plugin
    for registered in manager.plugins:
        if isinstance(registered, PluginChain) and (member := registered.member(name)):
            return member
    return None
