"""The plan step of a request turn (``POST /stream``, an ai 7 socket's ``send``), under the
chat's lease: the stored session read (or fenced after an unclean takeover), the request
planned against it (``planner.plan_turn``), and what must be in the session before the run
starts: a rewind, the results the plan stores in the paused invocation, and the page's changes
to the shared state when no run carries them (docs/adr/0044).
"""

from __future__ import annotations

import logging

from google.adk.events import Event, EventActions

from adk_stream_protocol.coordination.base import ChatLease
from adk_stream_protocol.protocol.shared_state import SharedState
from adk_stream_protocol.protocol.ui_messages import ChatRequest
from adk_stream_protocol.turns.bridge import Bridge
from adk_stream_protocol.turns.planner import TurnPlan, plan_turn

logger = logging.getLogger(__name__)


async def plan_request(
    bridge: Bridge, user_id: str, request: ChatRequest, lease: ChatLease
) -> tuple[TurnPlan, SharedState | None]:
    """The request's plan against the stored session, under the chat's lease, and what must
    be stored before its run: a rewind, prior results, the page's state (ADR 0044); with the
    chat's shared state, changed by the rewind and the request, for its response."""
    sessions = bridge.sessions
    if lease.unclean:  # the former holder lapsed: its writes are refused from now on
        session = await sessions.fence(user_id, request.id, lease.generation)
    else:
        session = await sessions.open(user_id, request.id)
    plan = plan_turn(
        request,
        session.events,
        defer_intermediate=not bridge.settings.stream_intermediate_results,
    )
    shared_state = bridge.shared_state(session.state)
    if plan.rewind_before_event_id:  # ADK's, with the keys it left None removed
        await bridge.rewind(session, plan.rewind_before_event_id)
    rewound = bool(plan.rewind_before_event_id) and shared_state is not None
    if rewound or plan.prior_tool_results is not None:
        session = await sessions.open(user_id, request.id)  # after what the rewind gave back
    # Stored in the paused invocation: the calls' results, where the model expects them; the
    # page's state when nothing runs to carry it on the user's event (as ADK does).
    page_state = None if plan.new_message is not None else request.state
    if plan.prior_tool_results is not None or page_state:
        await sessions.service.append_event(
            session,
            Event(
                author="user",
                invocation_id=plan.prior_invocation_id or session.events[-1].invocation_id,
                content=plan.prior_tool_results,
                custom_metadata=plan.prior_metadata,
                actions=EventActions(state_delta=dict(page_state or {})),
            ),
        )
    if shared_state is not None:  # the page is sent what the rewind and its request changed
        shared_state.reset(session.state)
        shared_state.update(request.state)
    plan.state_delta = dict(request.state) if request.state and page_state is None else None
    logger.info(
        "turn user=%s chat=%s trigger=%s continuation=%s rewind=%s",
        user_id,
        request.id,
        request.trigger,
        plan.continuation,
        bool(plan.rewind_before_event_id),
    )
    return plan, shared_state
