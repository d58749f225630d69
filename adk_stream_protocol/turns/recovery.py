"""Finishing a turn whose run was cut short (docs/adr/0032).

A run stops before it ends when its process dies or its store fails under it. What it leaves
in the session says what is owed:

- a call the user decided (approved or denied) with no result and no start: the run never got
  to it. The resumed invocation runs it (approved) or refuses it (denied), once.
- a call whose start is recorded but whose result is not: it may have done its work. It gets
  ``OUTCOME_UNKNOWN_RESULT`` and is never run again automatically, unless its tool is declared
  idempotent: then it is run again under the same call id (``turns/idempotent_calls.py``), and
  its result is the one recorded.
- any other call of the run without a result never started: ``NOT_STARTED_RESULT``.
- results stored and no model answer after them: the resumed invocation calls the model.

``recovery_of`` reads that from the turn's calls; ``finish_cut_run`` records the results, runs
the idempotent calls again, then resumes the invocation by its id
(``Runner.run_async(invocation_id=...)``). A request turn streams what that yields; a live run
lets it finish unseen before it connects the model.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass

from google.adk.events import Event

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.protocol.tool_calls import (
    NOT_STARTED_RESULT,
    OUTCOME_UNKNOWN_RESULT,
    RecordedResult,
    TurnCalls,
    recorded_results,
    turn_calls,
)
from adk_stream_protocol.store.history import current_turn, live_events
from adk_stream_protocol.turns.idempotent_calls import Rerun, run_again
from adk_stream_protocol.turns.runners import Runners

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recovery:
    """How to finish a cut turn: the results to record, the calls to run again, then the
    invocation to resume."""

    invocation_id: str
    results: tuple[RecordedResult, ...]
    reruns: tuple[Rerun, ...] = ()

    @property
    def unknown(self) -> list[str]:
        return [r.call_id for r in self.results if r.outcome == "unknown"]


def recovery_of(calls: TurnCalls) -> Recovery | None:
    """What finishing the turn takes, or None when it ended or waits for the client."""
    if not calls.interrupted() or calls.invocation_id is None:
        return None
    decided = calls.decided_unrun()
    approvals = calls.approvals()
    results: list[RecordedResult] = []
    reruns: list[Rerun] = []
    for call_id in sorted(calls.unsettled() - decided - set(calls.page_calls)):
        unknown = call_id in calls.open_starts
        if unknown and call_id in calls.idempotent_starts:
            reruns.append(
                Rerun(
                    author=calls.authors.get(call_id, ""),
                    branch=calls.branches.get(call_id),
                    call_id=call_id,
                    tool_name=calls.calls[call_id],
                    args=calls.call_args.get(call_id, {}),
                    approved=call_id in approvals,
                    approval_payload=approvals.get(call_id),
                )
            )
            continue
        results.append(
            RecordedResult(
                author=calls.authors.get(call_id, ""),
                call_id=call_id,
                tool_name=calls.calls[call_id],
                outcome="unknown" if unknown else "not-started",
                response=dict(OUTCOME_UNKNOWN_RESULT if unknown else NOT_STARTED_RESULT),
            )
        )
    return Recovery(calls.invocation_id, tuple(results), tuple(reruns))


async def stored_recovery(runners: Runners, chat: ChatKey) -> Recovery | None:
    """The recovery the chat's stored current turn needs, if its run was cut short."""
    session = await runners.sessions.open(*chat)
    return recovery_of(turn_calls(current_turn(live_events(session.events))))


async def finish_cut_run(
    runners: Runners,
    chat: ChatKey,
    recovery: Recovery,
    *,
    stamps: Mapping[str, object],
    abort_signal: asyncio.Event,
) -> AsyncGenerator[Event, None]:
    """Record the results owed to calls that cannot run, run the idempotent calls whose outcome
    is unknown again, then resume the cut invocation: it runs or refuses the calls the user
    decided, and calls the model. Yields the recorded events, then the run's. The caller holds
    the chat's lease."""
    user_id, chat_id = chat
    sessions = runners.sessions
    session = await sessions.open(user_id, chat_id)
    for author in sorted({r.author for r in recovery.results}):
        results = [r for r in recovery.results if r.author == author]
        yield await sessions.service.append_event(
            session, recorded_results(results, recovery.invocation_id)
        )
    logger.warning(
        "finishing a cut run user=%s chat=%s invocation=%s outcome-unknown=%s run-again=%s",
        user_id,
        chat_id,
        recovery.invocation_id,
        ",".join(recovery.unknown) or "none",
        ",".join(r.call_id for r in recovery.reruns) or "none",
    )
    for rerun in recovery.reruns:
        result = await run_again(runners.runner, session, recovery.invocation_id, rerun)
        yield await sessions.service.append_event(session, result)
    async with aclosing(
        runners.runner.run_async(
            user_id=user_id,
            session_id=chat_id,
            invocation_id=recovery.invocation_id,
            run_config=runners.run_config(dict(stamps), (user_id, chat_id)),
            abort_signal=abort_signal,
        )
    ) as events:
        async for event in events:
            yield event
