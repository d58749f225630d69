"""The call tracker of a turn (``tool_calls.py``): which calls were made, which the browser
runs, which ADK gates behind a confirmation, and which have their result.

The events are built the way ADK stores them; the builders here serve ``test_planning.py`` too.
"""

from __future__ import annotations

from typing import Any

from google.adk.events import Event, EventActions
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from adk_stream_protocol.protocol.interrupts import PageCall
from adk_stream_protocol.protocol.tool_calls import (
    CALL_STARTED_KEY,
    CONFIRMATION_TOOL,
    Confirmation,
    TurnCalls,
    turn_calls,
)
from adk_stream_protocol.store.history import DEFERRED_KEY, RESPONSE_ID_KEY, USER_MESSAGE_ID_KEY

# ADK's stand-in result for a call that waits for the user's confirmation.
PLACEHOLDER = {"error": "This tool call requires confirmation, please approve or reject."}

# -- building events as ADK stores them ---------------------------------------------------------


def user_turn(text: str, message_id: str, invocation_id: str) -> Event:
    """A message the user typed, stamped with the client's message id."""
    return Event(
        invocation_id=invocation_id,
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        custom_metadata={USER_MESSAGE_ID_KEY: message_id},
    )


def model_text(text: str, invocation_id: str) -> Event:
    return Event(
        invocation_id=invocation_id,
        author="agent",
        content=types.Content(role="model", parts=[types.Part(text=text)]),
    )


def call_event(
    invocation_id: str,
    call_id: str,
    name: str,
    args: dict[str, Any] | None = None,
    *,
    browser: bool = False,
    partial: bool | None = None,
) -> Event:
    """The model calling a tool; a browser tool is an ADK long-running tool."""
    return Event(
        invocation_id=invocation_id,
        author="agent",
        content=types.Content(
            role="model",
            parts=[types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))],
        ),
        long_running_tool_ids={call_id} if browser else None,
        partial=partial,
    )


def response_event(
    invocation_id: str,
    call_id: str,
    name: str,
    response: dict[str, Any],
    *,
    author: str = "agent",
    placeholders: dict[str, ToolConfirmation] | None = None,
) -> Event:
    """A tool's result; ``placeholders`` makes it ADK's "needs approval" stand-in."""
    return Event(
        invocation_id=invocation_id,
        author=author,
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call_id, name=name, response=response
                    )
                )
            ],
        ),
        actions=EventActions(requested_tool_confirmations=placeholders or {}),
    )


def confirmation_event(
    invocation_id: str,
    confirmation_id: str,
    call_id: str,
    name: str,
    args: dict[str, Any] | None = None,
    payload: Any = None,
) -> Event:
    """ADK's ``adk_request_confirmation`` call, built as ADK builds it."""
    original = types.FunctionCall(id=call_id, name=name, args=args)
    confirmation = ToolConfirmation(hint="Please approve.", payload=payload)
    return Event(
        invocation_id=invocation_id,
        author="agent",
        content=types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(
                        id=confirmation_id,
                        name=CONFIRMATION_TOOL,
                        args={
                            "originalFunctionCall": original.model_dump(
                                exclude_none=True, by_alias=True
                            ),
                            "toolConfirmation": confirmation.model_dump(
                                by_alias=True, exclude_none=True
                            ),
                        },
                    )
                )
            ],
        ),
        long_running_tool_ids={confirmation_id},
    )


def gated_call(
    invocation_id: str,
    call_id: str,
    name: str,
    confirmation_id: str,
    args: dict[str, Any] | None = None,
    *,
    browser: bool = False,
    payload: Any = None,
) -> list[Event]:
    """A call that ADK holds for the user's approval: the call, the stand-in result and the
    confirmation request."""
    return [
        call_event(invocation_id, call_id, name, args, browser=browser),
        response_event(
            invocation_id,
            call_id,
            name,
            PLACEHOLDER,
            placeholders={call_id: ToolConfirmation(hint="Please approve.", payload=payload)},
        ),
        confirmation_event(invocation_id, confirmation_id, call_id, name, args, payload),
    ]


def started(invocation_id: str, call_id: str) -> Event:
    """The mark the server stores just before a tool's body runs (plugins/tool_starts.py)."""
    return Event(
        invocation_id=invocation_id, author="agent", custom_metadata={CALL_STARTED_KEY: call_id}
    )


def user_decision(invocation_id: str, confirmation_id: str, confirmed: bool) -> Event:
    """The user's answer to a confirmation request, as the server stores it."""
    return response_event(
        invocation_id,
        confirmation_id,
        CONFIRMATION_TOOL,
        {"confirmed": confirmed},
        author="user",
    )


def stamped(events: list[Event], response_id: str, *, deferred: bool = True) -> list[Event]:
    """The run stamps of one response (``RunConfig.custom_metadata``)."""
    for event in events:
        metadata = dict(event.custom_metadata or {})
        metadata[RESPONSE_ID_KEY] = response_id
        if deferred:
            metadata[DEFERRED_KEY] = True
        event.custom_metadata = metadata
    return events


# -- the tracker ----------------------------------------------------------------------------------


def test_calls_their_arguments_browser_calls_and_invocation_are_recorded() -> None:
    calls = turn_calls(
        [
            user_turn("Where am I, and the weather?", "u1", "inv-0"),
            call_event("inv-1", "call-w", "get_weather", {"city": "Tokyo"}),
            call_event("inv-2", "call-loc", "get_location", {"precise": True}, browser=True),
        ]
    )
    assert calls.calls == {"call-w": "get_weather", "call-loc": "get_location"}
    assert calls.call_args == {"call-w": {"city": "Tokyo"}, "call-loc": {"precise": True}}
    assert calls.page_calls == {"call-loc": PageCall.BROWSER}
    assert calls.invocation_id == "inv-2"  # of the latest call
    assert calls.pending_page_calls() == {"call-loc"}
    assert calls.unsettled() == {"call-w", "call-loc"}
    assert calls.answered == set()


def test_results_settle_calls() -> None:
    calls = turn_calls(
        [
            call_event("inv-1", "call-w", "get_weather", {"city": "Tokyo"}),
            call_event("inv-1", "call-loc", "get_location", browser=True),
            response_event("inv-1", "call-w", "get_weather", {"temp": 21}),
            response_event("inv-1", "call-loc", "get_location", {"lat": 35.6}, author="user"),
        ]
    )
    assert calls.answered == {"call-w", "call-loc"}
    assert calls.unsettled() == set()
    assert calls.pending_page_calls() == set()


def test_confirmation_request_gates_its_call_and_placeholder_is_no_result() -> None:
    calls = turn_calls(
        gated_call(
            "inv-1", "call-pay", "process_payment", "conf-pay", {"amount": 50}, payload={"n": 1}
        )
    )
    assert calls.calls == {"call-pay": "process_payment"}  # the confirmation is not a call
    assert calls.confirmations == {"conf-pay": Confirmation("conf-pay", "call-pay", {"n": 1})}
    assert calls.answered == set()  # ADK's stand-in result does not count
    assert calls.pending_confirmations() == calls.confirmations
    assert calls.gated_calls() == {"call-pay"}
    assert calls.unsettled() == {"call-pay"}
    assert calls.denied == set()


def test_confirmation_without_payload_has_none() -> None:
    calls = turn_calls(gated_call("inv-1", "call-pay", "process_payment", "conf-pay"))
    assert calls.confirmations["conf-pay"].payload is None


def test_gated_browser_call_is_both_gated_and_waiting() -> None:
    calls = turn_calls(
        gated_call("inv-1", "call-loc", "get_location", "conf-loc", {"precise": True}, browser=True)
    )
    assert calls.gated_calls() == {"call-loc"}
    assert calls.pending_page_calls() == {"call-loc"}


def test_user_denial_marks_the_gated_call_denied() -> None:
    calls = turn_calls(
        [
            *gated_call("inv-1", "call-pay", "process_payment", "conf-pay"),
            user_decision("inv-1", "conf-pay", confirmed=False),
        ]
    )
    assert calls.denied == {"call-pay"}
    assert calls.answered == {"conf-pay"}
    assert calls.pending_confirmations() == {}
    assert calls.gated_calls() == set()


def test_user_approval_answers_the_confirmation_without_denying() -> None:
    calls = turn_calls(
        [
            *gated_call("inv-1", "call-pay", "process_payment", "conf-pay"),
            user_decision("inv-1", "conf-pay", confirmed=True),
        ]
    )
    assert calls.denied == set()
    assert calls.answered == {"conf-pay"}
    assert calls.gated_calls() == set()
    assert calls.unsettled() == {"call-pay"}  # approved, not run yet


def test_only_the_users_confirmation_response_denies() -> None:
    agent_answer = response_event("inv-1", "conf-pay", CONFIRMATION_TOOL, {"confirmed": False})
    calls = turn_calls(
        [*gated_call("inv-1", "call-pay", "process_payment", "conf-pay"), agent_answer]
    )
    assert calls.denied == set()
    assert calls.answered == {"conf-pay"}


def test_confirmation_without_original_call_is_ignored() -> None:
    no_original = Event(
        invocation_id="inv-1",
        author="agent",
        content=types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(
                        id="conf-a", name=CONFIRMATION_TOOL, args={"toolConfirmation": {}}
                    )
                ),
                types.Part(
                    function_call=types.FunctionCall(
                        id="conf-b",
                        name=CONFIRMATION_TOOL,
                        args={"originalFunctionCall": {"name": "process_payment"}},  # no id
                    )
                ),
            ],
        ),
    )
    calls = turn_calls([no_original])
    assert calls.confirmations == {}
    assert calls.calls == {}


def test_partial_events_are_ignored() -> None:
    calls = TurnCalls()
    calls.observe(call_event("inv-1", "call-w", "get_weather", {"city": "To"}, partial=True))
    assert calls.calls == {}
    assert calls.invocation_id is None
    calls.observe(call_event("inv-1", "call-w", "get_weather", {"city": "Tokyo"}))
    assert calls.calls == {"call-w": "get_weather"}
    assert calls.call_args == {"call-w": {"city": "Tokyo"}}


def test_events_without_content_change_nothing() -> None:
    calls = TurnCalls()
    calls.observe(Event(invocation_id="inv-9", author="user"))
    calls.observe(model_text("Hello", "inv-9"))
    assert calls == TurnCalls(ended=True)  # only that the model's answer ended the run


def test_a_start_without_a_result_stays_open_and_a_result_closes_it() -> None:
    calls = turn_calls([call_event("inv-1", "call-w", "get_weather"), started("inv-1", "call-w")])
    assert calls.open_starts == {"call-w"}
    assert calls.interrupted()
    calls.observe(response_event("inv-1", "call-w", "get_weather", {"sky": "sunny"}))
    assert calls.open_starts == set()
    assert calls.interrupted()  # results, and no model answer after them
    calls.observe(model_text("Sunny.", "inv-1"))
    assert not calls.interrupted()


def test_a_turn_waiting_for_the_client_is_not_interrupted() -> None:
    calls = turn_calls(gated_call("inv-1", "call-pay", "process_payment", "conf-pay"))
    assert not calls.interrupted()
    calls.observe(user_decision("inv-1", "conf-pay", confirmed=True))
    assert calls.decisions == {"conf-pay": True}
    assert calls.decided_unrun() == {"call-pay"}
    assert calls.interrupted()
    calls.observe(started("inv-1", "call-pay"))
    assert calls.decided_unrun() == set()  # started: no longer the resumed run's to decide


def test_results_after_which_adk_calls_no_model_end_the_run() -> None:
    skipped = response_event("inv-1", "call-w", "get_weather", {"sky": "sunny"})
    skipped.actions = EventActions(skip_summarization=True)
    calls = turn_calls([call_event("inv-1", "call-w", "get_weather"), skipped])
    assert calls.ended and not calls.interrupted()
    pending = response_event("inv-1", "call-job", "start_job", {"status": "pending"})
    calls = turn_calls([call_event("inv-1", "call-job", "start_job", browser=True), pending])
    assert calls.ended and not calls.interrupted()


def test_observe_folds_like_turn_calls() -> None:
    events = [
        call_event("inv-1", "call-loc", "get_location", browser=True),
        *gated_call("inv-1", "call-pay", "process_payment", "conf-pay"),
        user_decision("inv-1", "conf-pay", confirmed=False),
    ]
    observed = TurnCalls()
    for event in events:
        observed.observe(event)
    assert observed == turn_calls(events)
    assert observed.denied == {"call-pay"}
    assert observed.pending_page_calls() == {"call-loc"}
