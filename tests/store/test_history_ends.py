"""Where a stored history ends for the live model (``history.ends_on_users_side``): what ADK
leaves out of the model's contents does not count (docs/adr/0047)."""

from __future__ import annotations

from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.protocol.tool_calls import CONFIRMATION_TOOL
from adk_stream_protocol.store.history import ends_on_users_side


def _event(author: str, role: str, part: types.Part) -> Event:
    return Event(author=author, invocation_id="e-1", content=types.Content(role=role, parts=[part]))


def test_a_paused_confirmation_ends_on_the_users_side() -> None:
    """A call, ADK's placeholder result, then the ``adk_request_confirmation`` call: the model
    gets the call and the placeholder (ADK filters the confirmation out), so a live model
    connecting on it would answer the placeholder."""
    call = types.FunctionCall(name="transfer", id="c1", args={"amount": 5})
    placeholder = types.FunctionResponse(name="transfer", id="c1", response={"error": "wait"})
    request = types.FunctionCall(
        name=CONFIRMATION_TOOL, id="apr_1", args={"originalFunctionCall": {"id": "c1"}}
    )
    events = [
        _event("user", "user", types.Part(text="send 5")),
        _event("bank", "model", types.Part(function_call=call)),
        _event("bank", "user", types.Part(function_response=placeholder)),
        _event("bank", "model", types.Part(function_call=request)),
    ]
    assert ends_on_users_side(events)
    answer = _event("bank", "model", types.Part(text="Sent."))
    assert not ends_on_users_side([*events, answer])
