"""Steering messages in a resumed ``/stream`` turn (docs/adr/0022).

A continuation's steering messages are stored as a user event in the paused invocation
(``TurnPlan.prior_tool_results``, stamped with their ids), because ADK refuses a message that
holds text beside the function responses that resume the run. ADK keeps that event in the
history of later turns, where it sits after the tool results, but when it builds the model
request of the resumed step itself, it drops every event between a call and the result that
ends the history. ``SteeringPlugin`` puts such steering back, at the end, so that the model
reads it with the results, in the same turn.
"""

from __future__ import annotations

from google.adk.agents.callback_context import CallbackContext
from google.adk.models import LlmRequest, LlmResponse
from google.adk.plugins import BasePlugin
from google.genai import types

from adk_stream_protocol.history import is_steering


class SteeringPlugin(BasePlugin):
    """Before each model call of a ``run_async``: the steering added to this invocation is in
    the model's input."""

    def __init__(self) -> None:
        super().__init__(name="adk_stream_protocol_steering")

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        invocation_id = callback_context.invocation_id
        for event in callback_context.session.events:
            if event.invocation_id != invocation_id or not is_steering(event):
                continue
            content = event.content.parts if event.content else None
            parts = [p for p in content or [] if not p.function_response]
            if parts and not any(_holds(c, parts) for c in llm_request.contents):
                llm_request.contents.append(types.Content(role="user", parts=parts))
        return None


def _holds(content: types.Content, parts: list[types.Part]) -> bool:
    return all(part in (content.parts or []) for part in parts)
