"""Our plugins as one registration (docs/adr/0053): a chain passes on every callback its
members implement, in their order, and stops where ADK's plugin manager would."""

from __future__ import annotations

from typing import Any

import pytest
from google.adk.plugins import BasePlugin
from google.adk.plugins.plugin_manager import PluginManager

from adk_stream_protocol.plugins.approvals import LiveApprovalPlugin
from adk_stream_protocol.plugins.chain import (
    FORWARDED,
    PluginChain,
    chained,
    find_plugin,
    implemented_callbacks,
)
from adk_stream_protocol.plugins.running_tools import RunningTools
from adk_stream_protocol.plugins.steering import SteeringPlugin
from adk_stream_protocol.plugins.tool_starts import ToolStartPlugin
from adk_stream_protocol.plugins.tool_ui import ToolUiPlugin


class Recording(BasePlugin):
    """Records its before-tool calls; answers them when given an answer."""

    def __init__(self, name: str, calls: list[str], answer: dict[str, Any] | None = None) -> None:
        super().__init__(name=name)
        self.calls = calls
        self.answer = answer

    async def before_tool_callback(self, **kwargs: Any) -> dict[str, Any] | None:
        self.calls.append(self.name)
        return self.answer


class Quiet(BasePlugin):
    """Implements nothing (as the tool UI's route table)."""


class OnEvents(BasePlugin):
    async def on_event_callback(self, **kwargs: Any) -> None:
        return None


@pytest.mark.parametrize(
    "plugin", [RunningTools, SteeringPlugin, ToolUiPlugin, ToolStartPlugin, LiveApprovalPlugin]
)
def test_every_callback_of_our_plugins_is_passed_on(plugin: type[BasePlugin]) -> None:
    assert implemented_callbacks(plugin) <= FORWARDED


def test_a_chain_refuses_a_member_whose_callbacks_it_would_drop() -> None:
    with pytest.raises(ValueError, match="on_event_callback"):
        PluginChain("ours", [Quiet(name="quiet"), OnEvents(name="events")])


@pytest.mark.asyncio
async def test_members_answer_in_order_until_one_answers() -> None:
    calls: list[str] = []
    chain = PluginChain(
        "ours",
        [
            Recording("a", calls),
            Quiet(name="quiet"),
            Recording("b", calls, answer={"from": "b"}),
            Recording("c", calls),
        ],
    )
    answered = PluginManager(plugins=[chain, Recording("after", calls)])
    assert await _before_tool(answered) == {"from": "b"}
    assert calls == ["a", "b"], "c and the plugin after the chain are not asked"
    calls.clear()
    unanswered = PluginManager(
        plugins=[PluginChain("ours", [Recording("a", calls)]), Recording("z", calls)]
    )
    assert await _before_tool(unanswered) is None
    assert calls == ["a", "z"]


async def _before_tool(manager: PluginManager) -> Any:
    # Recording reads none of them: ADK's manager passes them through as they are.
    none: Any = None
    return await manager.run_before_tool_callback(tool=none, tool_args={}, tool_context=none)


def test_ours_are_one_plugin_unless_the_apps_own_stand_between() -> None:
    first, app, last = Quiet(name="first"), Quiet(name="app"), Quiet(name="last")
    (alone,) = chained("ours", [first], [], [last])
    assert isinstance(alone, PluginChain) and alone.members == (first, last)
    around = chained("ours", [first], [app], [last])
    assert [p.name for p in around] == ["ours_first", "app", "ours_last"]
    assert [p.name for p in chained("ours", [], [app], [last])] == ["app", "ours_last"]


def test_a_member_is_found_by_its_name_in_its_chain() -> None:
    member, plain = Quiet(name="member"), Quiet(name="plain")
    manager = PluginManager(plugins=[PluginChain("ours", [member]), plain])
    assert find_plugin(manager, "member") is member
    assert find_plugin(manager, "plain") is plain
    assert find_plugin(manager, "ours") is manager.plugins[0]
    assert find_plugin(manager, "missing") is None
