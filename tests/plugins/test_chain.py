"""Our plugins as one registration (docs/adr/0053): a chain passes on every callback its
members implement, in their order, and stops where ADK's plugin manager would."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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
from adk_stream_protocol.plugins.sign_ins import SignInPlugin
from adk_stream_protocol.plugins.steering import SteeringPlugin
from adk_stream_protocol.plugins.tool_starts import ToolStartPlugin
from adk_stream_protocol.plugins.tool_ui import ToolUiPlugin


class Recording(BasePlugin):
    """Records each call of the callbacks a chain passes on, with what it was given; answers
    them when given an answer."""

    def __init__(self, name: str, calls: list[str], answer: Any = None) -> None:
        super().__init__(name=name)
        self.calls = calls
        self.answer = answer
        self.arguments: list[dict[str, Any]] = []

    async def _record(self, callback: str, arguments: dict[str, Any]) -> Any:
        self.calls.append(f"{self.name}.{callback}")
        self.arguments.append(arguments)
        return self.answer

    async def before_model_callback(self, **arguments: Any) -> Any:
        return await self._record("before_model_callback", arguments)

    async def before_tool_callback(self, **arguments: Any) -> Any:
        return await self._record("before_tool_callback", arguments)

    async def after_tool_callback(self, **arguments: Any) -> Any:
        return await self._record("after_tool_callback", arguments)

    async def on_tool_error_callback(self, **arguments: Any) -> Any:
        return await self._record("on_tool_error_callback", arguments)

    async def on_event_callback(self, **arguments: Any) -> Any:
        return await self._record("on_event_callback", arguments)


# Each callback a chain passes on, as ADK's plugin manager runs it (Recording reads none of
# the arguments: stand-ins do, passed through as they are).
STAND_IN: Any = object()
CALLBACKS: dict[str, Callable[[PluginManager], Awaitable[Any]]] = {
    "before_model_callback": lambda m: m.run_before_model_callback(
        callback_context=STAND_IN, llm_request=STAND_IN
    ),
    "before_tool_callback": lambda m: m.run_before_tool_callback(
        tool=STAND_IN, tool_args={}, tool_context=STAND_IN
    ),
    "after_tool_callback": lambda m: m.run_after_tool_callback(
        tool=STAND_IN, tool_args={}, tool_context=STAND_IN, result={"ok": 1}
    ),
    "on_tool_error_callback": lambda m: m.run_on_tool_error_callback(
        tool=STAND_IN, tool_args={}, tool_context=STAND_IN, error=ValueError("x")
    ),
    "on_event_callback": lambda m: m.run_on_event_callback(
        invocation_context=STAND_IN, event=STAND_IN
    ),
}


class Quiet(BasePlugin):
    """Implements nothing (as the tool UI's route table)."""


class OnUserMessages(BasePlugin):
    async def on_user_message_callback(self, **kwargs: Any) -> None:
        return None


@pytest.mark.parametrize(
    "plugin",
    [RunningTools, SteeringPlugin, ToolUiPlugin, ToolStartPlugin, LiveApprovalPlugin, SignInPlugin],
)
def test_every_callback_of_our_plugins_is_passed_on(plugin: type[BasePlugin]) -> None:
    assert implemented_callbacks(plugin) <= FORWARDED


def test_a_chain_refuses_a_member_whose_callbacks_it_would_drop() -> None:
    with pytest.raises(ValueError, match="on_user_message_callback"):
        PluginChain("ours", [Quiet(name="quiet"), OnUserMessages(name="messages")])


def test_every_callback_it_passes_on_is_run_here() -> None:
    assert set(CALLBACKS) == FORWARDED


@pytest.mark.parametrize("callback", sorted(CALLBACKS))
@pytest.mark.asyncio
async def test_members_answer_in_order_until_one_answers(callback: str) -> None:
    run = CALLBACKS[callback]
    calls: list[str] = []
    a = Recording("a", calls)
    chain = PluginChain(
        "ours",
        [
            a,
            Quiet(name="quiet"),
            Recording("b", calls, answer={"from": "b"}),
            Recording("c", calls),
        ],
    )
    answered = PluginManager(plugins=[chain, Recording("after", calls)])
    assert await run(answered) == {"from": "b"}
    assert calls == [f"a.{callback}", f"b.{callback}"], "c and the plugin after it not asked"
    assert STAND_IN in a.arguments[0].values(), "the arguments go on as ADK gave them"
    calls.clear()
    unanswered = PluginManager(
        plugins=[PluginChain("ours", [Recording("a", calls)]), Recording("z", calls)]
    )
    assert await run(unanswered) is None
    assert calls == [f"a.{callback}", f"z.{callback}"]


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
