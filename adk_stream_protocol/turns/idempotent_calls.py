"""Running a call of a cut turn again, under its own id, when its tool is declared idempotent
(docs/adr/0074).

The call started (its start mark is stored) and its result never was: the process died, lost
its lease, or lost its store. Its tool's backend makes one effect per call id, so running it
again is safe, and gives the page and the model the real result instead of "outcome unknown".

It runs as ADK runs a call: ``handle_function_call_list_async`` in an invocation context of
the cut invocation, in the calling agent's name and branch, with every plugin's callbacks
(ours write a new start mark under the current lease and check that lease first) and the
agent's own. An approved call runs with its approval, so ADK does not ask again. Should this
run be cut too, its start is again without a result, and the next holder runs it again.

A tool that fails when run again has failed: its error is the call's result, so a chat never
loops on it. A refusal (the lease was lost meanwhile) or an outage is not the tool's: it ends
the turn as any run's would, and the call waits for the next holder.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.agents.run_config import RunConfig
from google.adk.events import Event
from google.adk.flows.llm_flows.functions import handle_function_call_list_async
from google.adk.runners import Runner
from google.adk.sessions import Session
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from adk_stream_protocol.foundation.outages import outage_of
from adk_stream_protocol.protocol.refusals import Refusal
from adk_stream_protocol.protocol.tool_calls import (
    CALL_OUTCOME_KEY,
    OUTCOME_UNKNOWN_RESULT,
    RecordedResult,
    recorded_results,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rerun:
    """A call of a cut run to run again: what ADK needs to run it as its agent did."""

    author: str
    branch: str | None
    call_id: str
    tool_name: str
    args: dict[str, Any]
    approved: bool  # the user approved it: it runs with that approval, not asked again
    approval_payload: Any = None  # the approval's payload, when it came with one

    def function_call(self) -> types.FunctionCall:
        return types.FunctionCall(id=self.call_id, name=self.tool_name, args=dict(self.args))

    def result(self, response: dict[str, Any], outcome: str, invocation_id: str) -> Event:
        """A result the server records for the call in its agent's name."""
        recorded = RecordedResult(self.author, self.call_id, self.tool_name, outcome, response)
        return recorded_results([recorded], invocation_id, branch=self.branch)


async def run_again(runner: Runner, session: Session, invocation_id: str, rerun: Rerun) -> Event:
    """The call's result from running it again (not yet stored); "outcome unknown" when its
    agent or tool is no longer there to run it."""
    tool_owner = _agent(runner, rerun.author)
    context = InvocationContext(
        artifact_service=runner.artifact_service,
        session_service=runner.session_service,
        memory_service=runner.memory_service,
        credential_service=runner.credential_service,
        plugin_manager=runner.plugin_manager,
        invocation_id=invocation_id,
        agent=tool_owner,
        branch=rerun.branch,
        session=session,
        run_config=RunConfig(),
    )
    tools = (
        {tool.name: tool for tool in await tool_owner.canonical_tools(ReadonlyContext(context))}
        if tool_owner is not None
        else {}
    )
    if rerun.tool_name not in tools:
        logger.warning(
            "cannot run a call again: its agent or tool is gone chat=%s call=%s tool=%s",
            session.id,
            rerun.call_id,
            rerun.tool_name,
        )
        return rerun.result(dict(OUTCOME_UNKNOWN_RESULT), "unknown", invocation_id)
    approvals = (
        {rerun.call_id: ToolConfirmation(confirmed=True, payload=rerun.approval_payload)}
        if rerun.approved
        else None
    )
    logger.info(
        "running a call again under its id chat=%s call=%s tool=%s",
        session.id,
        rerun.call_id,
        rerun.tool_name,
    )
    try:
        event = await handle_function_call_list_async(
            context, [rerun.function_call()], tools, tool_confirmation_dict=approvals
        )
    except Exception as exc:
        if isinstance(exc, Refusal) or outage_of(exc) is not None:
            raise  # not the tool's failure: the call waits for the chat's next holder
        logger.warning(
            "a call run again failed chat=%s call=%s tool=%s: %s",
            session.id,
            rerun.call_id,
            rerun.tool_name,
            type(exc).__name__,
            exc_info=True,
        )
        failed = {"error": f"The tool failed when the server ran it again ({type(exc).__name__})."}
        return rerun.result(failed, "rerun", invocation_id)
    if event is None:  # a tool whose callbacks answered nothing: ADK has no result for it
        return rerun.result({}, "rerun", invocation_id)
    metadata = dict(event.custom_metadata or {})
    metadata[CALL_OUTCOME_KEY] = {rerun.call_id: "rerun"}
    event.custom_metadata = metadata
    return event


def _agent(runner: Runner, name: str) -> LlmAgent | None:
    root = runner.agent
    found = root.find_agent(name) if hasattr(root, "find_agent") else None
    return found if isinstance(found, LlmAgent) else None
