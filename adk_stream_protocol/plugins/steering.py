"""Steering messages in a resumed ``run_async`` turn: ``POST /stream`` and ai 7's socket
(docs/adr/0022).

A continuation's steering messages are stored as a user event in the paused invocation
(``TurnPlan.prior_tool_results``, stamped with their ids), because ADK refuses a message that
holds text beside the function responses that resume the run. ADK keeps that event in the
history it builds for later model calls, after the tool results; but in the request of the
resumed step itself, it drops every event that holds no result between the call and the
result that ends the history. ``SteeringPlugin`` puts such steering back, at the end, so that
the model reads it with the results, in the same turn.
"""

from __future__ import annotations

from google.adk.agents.callback_context import CallbackContext
from google.adk.models import LlmRequest, LlmResponse
from google.adk.plugins import BasePlugin
from google.genai import types

from adk_stream_protocol.store.history import is_steering


class SteeringPlugin(BasePlugin):
    """Before each model call of a ``run_async``: the steering added to this invocation since
    the model last answered is in the model's input."""

    def __init__(self) -> None:
        super().__init__(name="adk_stream_protocol_steering")

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        for parts in _unanswered_steering(callback_context):
            # What follows the model's last content: the results it is about to read, and the
            # steering if ADK kept it (it does when the steering shares an event with results).
            last_model = max(
                (i for i, c in enumerate(llm_request.contents) if c.role == "model"), default=-1
            )
            tail = llm_request.contents[last_model + 1 :]
            if not any(_holds(c, parts) for c in tail):
                llm_request.contents.append(types.Content(role="user", parts=parts))
        return None


def _unanswered_steering(context: CallbackContext) -> list[list[types.Part]]:
    """The steering of this invocation stored after the model's last answer in it: once the
    model has answered, ADK keeps the steering in the history it builds."""
    found: list[list[types.Part]] = []
    for event in context.session.events:
        if event.invocation_id != context.invocation_id:
            continue
        if event.author != "user" and event.content and event.content.role == "model":
            found = []  # the model answered after these
        elif is_steering(event) and event.content:
            parts = [p for p in event.content.parts or [] if not p.function_response]
            if parts:
                found.append(parts)
    return found


def _holds(content: types.Content, parts: list[types.Part]) -> bool:
    return all(part in (content.parts or []) for part in parts)
