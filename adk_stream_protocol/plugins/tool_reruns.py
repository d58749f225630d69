"""A tool call run again once the user has answered the confirmation its body asked for
(``tool_context.request_confirmation``), on ``/live`` (docs/adr/0038-live-tool-calls.md).

Under ``run_async`` ADK re-executes such a call when the answer arrives: the plugins' and the
agent's before-tool callbacks, the body with ``tool_context.tool_confirmation`` set, and the
agent's after-tool callbacks. ADK's live flow cannot resume a call
(``flows/llm_flows/tools/_live_caller.py``), so the live approval gate runs the same steps
itself, inside the call that asked, once per answer.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.tools import BaseTool, ToolContext
from google.adk.tools.tool_confirmation import ToolConfirmation


async def rerun_confirmed(
    tool: BaseTool,
    args: dict[str, Any],
    context: ToolContext,
    confirmation: ToolConfirmation,
) -> Any:
    """The call's result when run again with ``confirmation``, as ADK's resume runs it."""
    context.tool_confirmation = confirmation
    # The asking run's pause is not the answer's: the re-run decides for itself.
    context.actions.skip_summarization = None
    invocation = context.get_invocation_context()
    agent = invocation.agent if isinstance(invocation.agent, LlmAgent) else None
    # The plugins first (a durable start mark, a lost chat refusing the body), then the agent's.
    result = await invocation.plugin_manager.run_before_tool_callback(
        tool=tool, tool_args=args, tool_context=context
    )
    if result is None and agent is not None:
        result = await _first_answer(
            agent.canonical_before_tool_callbacks, tool=tool, args=args, tool_context=context
        )
    if result is not None:
        return result
    result = await tool.run_async(args=args, tool_context=context)
    if agent is not None:
        replaced = await _first_answer(
            agent.canonical_after_tool_callbacks,
            tool=tool,
            args=args,
            tool_context=context,
            tool_response=result,
        )
        if replaced is not None:
            return replaced
    return result


async def _first_answer(callbacks: Sequence[Any], **kwargs: Any) -> Any:
    """The first callback's answer that is not ``None``, as ADK's chain stops at it."""
    for callback in callbacks:
        answer = callback(**kwargs)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is not None:
            return answer
    return None
