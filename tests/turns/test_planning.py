"""The plan step of a turn (``planning.py``, ``answers.py``): what one ``/stream`` request asks
ADK to do, read from the client's messages and the stored events, without running anything."""

from __future__ import annotations

from typing import Any

import pytest
from google.adk.events import Event, EventActions
from google.genai import types

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.limits import RequestLimits
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.tool_calls import (
    ABANDONED_RESULT,
    CONFIRMATION_TOOL,
    OUTCOME_UNKNOWN_RESULT,
    turn_calls,
)
from adk_stream_protocol.protocol.ui_messages import ChatRequest, UIMessage, parse_chat_request
from adk_stream_protocol.turns.answers import (
    Answers,
    Decision,
    OpenInterrupts,
    check_complete,
    collect_answers,
)
from adk_stream_protocol.turns.planning import RearmedCall, TurnPlan, plan_turn
from tests.protocol.test_tool_calls import (
    call_event,
    gated_call,
    model_text,
    response_event,
    stamped,
    started,
    user_decision,
    user_turn,
)

LIMITS = RequestLimits.from_settings(Settings())
NEW_ID = "msg_new"

# -- requests as DefaultChatTransport sends them -------------------------------------------------


def request(*messages: dict[str, Any], **extra: Any) -> ChatRequest:
    return parse_chat_request({"id": "chat-1", "messages": list(messages), **extra}, LIMITS)


def user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def assistant(message_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"}, *parts]}


def decided(
    tool: str,
    call_id: str,
    approval_id: str,
    approved: bool,
    tool_input: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A tool part after addToolApprovalResponse."""
    return {
        "type": f"tool-{tool}",
        "toolCallId": call_id,
        "state": "approval-responded",
        "input": tool_input or {},
        "approval": {"id": approval_id, "approved": approved, **extra},
    }


def output(tool: str, call_id: str, value: Any, **extra: Any) -> dict[str, Any]:
    """A tool part after addToolOutput."""
    return {
        "type": f"tool-{tool}",
        "toolCallId": call_id,
        "state": "output-available",
        "input": {},
        "output": value,
        **extra,
    }


def plan(body: ChatRequest, events: list[Event], *, defer_intermediate: bool = True) -> TurnPlan:
    return plan_turn(body, events, defer_intermediate=defer_intermediate, new_id=lambda: NEW_ID)


def refused(body: ChatRequest, events: list[Event]) -> RequestError:
    with pytest.raises(RequestError) as caught:
        plan(body, events)
    return caught.value


def text_content(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def function_responses(*responses: tuple[str, str, dict[str, Any]]) -> types.Content:
    return types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(name=name, id=call_id, response=response)
            )
            for name, call_id, response in responses
        ],
    )


def confirmed(confirmation_id: str, response: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return (CONFIRMATION_TOOL, confirmation_id, response)


# Stored turns: "u1" asked for a payment that waits for approval.
PAY_ARGS = {"amount": 50, "to": "Hanako"}


def payment_turn(payload: Any = None) -> list[Event]:
    return [
        user_turn("Send 50 dollars to Hanako", "u1", "inv-1"),
        *gated_call("inv-1", "call-pay", "process_payment", "conf-pay", PAY_ARGS, payload=payload),
    ]


def browser_turn() -> list[Event]:
    return [
        user_turn("Where am I?", "u1", "inv-1"),
        call_event("inv-1", "call-loc", "get_location", {"precise": True}, browser=True),
    ]


# -- a new message -------------------------------------------------------------------------------


def test_new_message_in_an_empty_chat() -> None:
    result = plan(request(user("u1", "Hello")), [])
    assert result == TurnPlan(
        message_id=NEW_ID, new_message=text_content("Hello"), user_message_id="u1"
    )


def test_new_message_after_a_finished_turn_sends_only_the_new_message() -> None:
    events = [user_turn("Hello", "u1", "inv-1"), model_text("Hi!", "inv-1")]
    body = request(
        user("u1", "Hello"), assistant("a1", {"type": "text", "text": "Hi!"}), user("u2", "Bye")
    )
    result = plan(body, events)
    assert result.new_message == text_content("Bye")
    assert result.user_message_id == "u2"
    assert result.message_id == NEW_ID
    assert result.continuation is False
    assert result.rewind_before_event_id is None
    assert result.prior_tool_results is None


def test_repeated_message_id_is_refused() -> None:
    error = refused(request(user("u1", "Hello")), [user_turn("Hello", "u1", "inv-1")])
    assert error.status == 409
    assert "already sent" in error.message


def test_edit_with_message_id_rewinds_before_the_edited_message() -> None:
    events = [
        user_turn("Hello", "u1", "inv-1"),
        model_text("Hi!", "inv-1"),
        user_turn("Weather?", "u2", "inv-2"),
        model_text("Sunny.", "inv-2"),
    ]
    result = plan(request(user("u1", "Hello again"), messageId="u1"), events)
    assert result.rewind_before_event_id == events[0].id
    assert result.new_message == text_content("Hello again")
    assert result.user_message_id == "u1"
    assert result.message_id == NEW_ID


def unparsed(*messages: dict[str, Any], **extra: Any) -> ChatRequest:
    """A request as the model reads it, without ``parse_chat_request``'s own checks (which
    refuse a ``messageId`` that names no last message first: tests/turns/test_chat_joins.py):
    the plan refuses it all the same."""
    return ChatRequest.model_validate({"id": "chat-1", "messages": list(messages), **extra})


def test_message_id_naming_another_message_is_refused() -> None:
    error = refused(unparsed(user("u1", "Hello"), messageId="u0"), [])
    assert error.status == 422


def test_system_message_last_is_refused() -> None:
    body = request({"id": "s1", "role": "system", "parts": [{"type": "text", "text": "Be nice"}]})
    assert refused(body, []).status == 422


def test_rewound_message_may_be_sent_again() -> None:
    rewind = Event(
        invocation_id="inv-r",
        author="user",
        actions=EventActions(rewind_before_invocation_id="inv-1"),
    )
    events = [user_turn("Hello", "u1", "inv-1"), model_text("Hi!", "inv-1"), rewind]
    result = plan(request(user("u1", "Hello")), events)
    assert result.rewind_before_event_id is None
    assert result.new_message == text_content("Hello")


def test_new_message_gives_abandoned_calls_a_result() -> None:
    events = [
        user_turn("Pay, locate, weather", "u1", "inv-1"),
        call_event("inv-1", "call-w", "get_weather", {"city": "Tokyo"}),
        response_event("inv-1", "call-w", "get_weather", {"temp": 21}),
        call_event("inv-1", "call-loc", "get_location", browser=True),
        *gated_call("inv-1", "call-pay", "process_payment", "conf-pay", PAY_ARGS),
    ]
    body = request(user("u1", "Pay, locate, weather"), assistant("a1"), user("u2", "Never mind"))
    result = plan(body, events)
    abandoned = dict(ABANDONED_RESULT)
    assert result.prior_tool_results == function_responses(
        ("get_location", "call-loc", abandoned), ("process_payment", "call-pay", abandoned)
    )
    assert result.prior_invocation_id == "inv-1"
    assert result.new_message == text_content("Never mind")


# -- regenerate ----------------------------------------------------------------------------------


def test_regenerate_rewinds_to_the_last_user_turn_and_resends_it() -> None:
    events = [
        user_turn("Hello", "u1", "inv-1"),
        model_text("Hi!", "inv-1"),
        user_turn("Weather?", "u2", "inv-2"),
        model_text("Sunny.", "inv-2"),
    ]
    # The session, not the client, holds what was said.
    body = request(
        user("u1", "Hello"),
        assistant("a1"),
        user("u2-client", "edited by the client"),
        trigger="regenerate-message",
    )
    result = plan(body, events)
    assert result.rewind_before_event_id == events[2].id
    assert result.new_message == text_content("Weather?")
    assert result.user_message_id == "u2"
    assert result.message_id == NEW_ID


def test_regenerate_with_nothing_stored_answers_the_clients_message() -> None:
    result = plan(request(user("u1", "Hello"), trigger="regenerate-message"), [])
    assert result == TurnPlan(
        message_id=NEW_ID, new_message=text_content("Hello"), user_message_id="u1"
    )


def test_regenerate_needs_a_user_message_last() -> None:
    body = request(user("u1", "Hello"), assistant("a1"), trigger="regenerate-message")
    assert refused(body, [user_turn("Hello", "u1", "inv-1")]).status == 422


# -- continuations: approvals --------------------------------------------------------------------


def test_approval_becomes_a_confirmation_response() -> None:
    body = request(
        user("u1", "Send"),
        assistant("a1", decided("process_payment", "call-pay", "conf-pay", True, PAY_ARGS)),
    )
    result = plan(body, payment_turn())
    assert result.continuation is True
    assert result.message_id == "a1"
    assert result.new_message == function_responses(confirmed("conf-pay", {"confirmed": True}))
    assert result.prior_tool_results is None
    assert result.prior_invocation_id == "inv-1"
    assert result.denied_tool_call_ids == frozenset()
    assert result.rearmed_calls == []


def test_approval_hands_the_tools_payload_back_without_the_reason() -> None:
    payload = {"account": "savings"}
    body = request(
        user("u1", "Send"),
        assistant(
            "a1", decided("process_payment", "call-pay", "conf-pay", True, reason="looks fine")
        ),
    )
    result = plan(body, payment_turn(payload))
    assert result.new_message == function_responses(
        confirmed("conf-pay", {"confirmed": True, "payload": payload})
    )


def test_denial_becomes_a_refusing_confirmation_and_a_denied_call() -> None:
    body = request(
        user("u1", "Send"),
        assistant("a1", decided("process_payment", "call-pay", "conf-pay", False)),
    )
    result = plan(body, payment_turn())
    assert result.new_message == function_responses(confirmed("conf-pay", {"confirmed": False}))
    assert result.denied_tool_call_ids == frozenset({"call-pay"})


def test_approval_sent_twice_acts_once() -> None:
    # conf-pay was denied in an earlier response of this turn; conf-two is new.
    events = [
        *payment_turn(),
        user_decision("inv-2", "conf-pay", confirmed=False),
        response_event("inv-2", "call-pay", "process_payment", {"error": "rejected"}),
        *gated_call("inv-2", "call-two", "process_payment", "conf-two", {"amount": 5}),
    ]
    body = request(
        user("u1", "Send"),
        assistant(
            "a1",
            decided("process_payment", "call-pay", "conf-pay", False),
            decided("process_payment", "call-two", "conf-two", True),
        ),
    )
    result = plan(body, events)
    assert result.new_message == function_responses(confirmed("conf-two", {"confirmed": True}))
    assert result.denied_tool_call_ids == frozenset({"call-pay"})  # the earlier decision holds
    assert result.prior_invocation_id == "inv-2"


def test_approval_already_acted_on_with_nothing_else_is_refused() -> None:
    # The approved payment ran and the model answered: the same approval again is a duplicate.
    events = [
        *payment_turn(),
        user_decision("inv-1", "conf-pay", confirmed=True),
        response_event("inv-1", "call-pay", "process_payment", {"status": "paid"}),
        model_text("Sent.", "inv-1"),
    ]
    body = request(
        user("u1", "Send"),
        assistant("a1", decided("process_payment", "call-pay", "conf-pay", True)),
    )
    error = refused(body, events)
    assert error.status == 409
    assert "answers no pending approval" in error.message


def test_a_retried_approval_whose_call_never_ran_finishes_the_cut_run() -> None:
    # The decision is stored, then the process died before the tool started (docs/adr/0032).
    events = [*payment_turn(), user_decision("inv-1", "conf-pay", confirmed=True)]
    body = request(
        user("u1", "Send"),
        assistant("a1", decided("process_payment", "call-pay", "conf-pay", True)),
    )
    result = plan(body, events)
    assert result.continuation and result.new_message is None
    assert result.message_id == "a1"
    assert result.recovery is not None
    assert result.recovery.invocation_id == "inv-1"
    assert result.recovery.results == ()  # ADK runs the approved call when resumed


def test_a_started_call_without_its_result_is_recorded_as_outcome_unknown() -> None:
    events = [
        *payment_turn(),
        user_decision("inv-1", "conf-pay", confirmed=True),
        started("inv-1", "call-pay"),
    ]
    body = request(
        user("u1", "Send"),
        assistant("a1", decided("process_payment", "call-pay", "conf-pay", True)),
    )
    recovery = plan(body, events).recovery
    assert recovery is not None
    (result,) = recovery.results
    assert (result.call_id, result.outcome, result.author) == ("call-pay", "unknown", "agent")
    assert result.response == dict(OUTCOME_UNKNOWN_RESULT)


def test_results_stored_without_the_model_answer_resume_the_model() -> None:
    events = [
        user_turn("Weather?", "u1", "inv-1"),
        call_event("inv-1", "call-w", "get_weather", {"city": "Tokyo"}),
        started("inv-1", "call-w"),
        response_event("inv-1", "call-w", "get_weather", {"sky": "sunny"}),
    ]
    recovery = plan(request(user("u1", "Weather?"), user("u2", "And now?")), events).recovery
    assert recovery is not None and recovery.results == ()


def test_a_call_that_never_started_gets_a_not_started_result_before_the_next_message() -> None:
    events = [
        user_turn("Weather?", "u1", "inv-1"),
        call_event("inv-1", "call-w", "get_weather", {"city": "Tokyo"}),
    ]
    result = plan(request(user("u1", "Weather?"), user("u2", "And now?")), events)
    assert result.new_message is not None  # the new message runs after the recovery
    assert result.recovery is not None
    (recorded,) = result.recovery.results
    assert (recorded.call_id, recorded.outcome) == ("call-w", "not-started")


def test_a_turn_that_ended_or_waits_needs_no_recovery() -> None:
    answered = [*payment_turn(), user_decision("inv-1", "conf-pay", confirmed=False)]
    assert plan(request(user("u1", "Send"), user("u2", "Hi")), payment_turn()).recovery is None
    ended = [*answered, model_text("Not sent.", "inv-1")]
    assert plan(request(user("u1", "Send"), user("u2", "Hi")), ended).recovery is None


def test_approval_naming_another_call_is_refused() -> None:
    events = [*payment_turn(), *gated_call("inv-1", "call-two", "process_payment", "conf-two")]
    body = request(
        user("u1", "Send"),
        assistant("a1", decided("process_payment", "call-two", "conf-pay", True)),
    )
    error = refused(body, events)
    assert error.status == 409
    assert "conf-pay" in error.message


def test_unknown_approval_is_refused() -> None:
    body = request(
        user("u1", "Send"), assistant("a1", decided("process_payment", "call-pay", "conf-x", True))
    )
    error = refused(body, payment_turn())
    assert error.status == 409
    assert "conf-x" in error.message


def test_approval_of_an_earlier_turn_is_refused() -> None:
    events = [*payment_turn(), user_turn("Something else", "u2", "inv-2")]
    body = request(
        user("u1", "Send"),
        assistant("a1", decided("process_payment", "call-pay", "conf-pay", True)),
    )
    assert refused(body, events).status == 409


def test_partial_answer_of_a_step_is_refused() -> None:
    events = [*payment_turn(), *gated_call("inv-1", "call-two", "process_payment", "conf-two")]
    body = request(
        user("u1", "Send"),
        assistant(
            "a1",
            decided("process_payment", "call-pay", "conf-pay", True),
            {
                "type": "tool-process_payment",
                "toolCallId": "call-two",
                "state": "approval-requested",
                "input": {},
                "approval": {"id": "conf-two"},
            },
        ),
    )
    error = refused(body, events)
    assert error.status == 409
    assert "answer all pending approvals and tool calls of this step together" in error.message
    assert error.message.endswith("still open: conf-two")


def test_continuation_message_id_must_name_the_last_message() -> None:
    body = unparsed(
        user("u1", "Send"),
        assistant("a1", decided("process_payment", "call-pay", "conf-pay", True)),
        messageId="a0",
    )
    assert refused(body, payment_turn()).status == 422


# -- continuations: browser results --------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "result"),
    [
        (output("get_location", "call-loc", {"lat": 35.6}), {"lat": 35.6}),
        (output("get_location", "call-loc", "Tokyo"), {"result": "Tokyo"}),
        (
            {
                "type": "tool-get_location",
                "toolCallId": "call-loc",
                "state": "output-error",
                "input": {},
                "errorText": "denied by the browser",
            },
            {"error": "denied by the browser"},
        ),
    ],
)
def test_browser_output_becomes_the_calls_function_response(
    part: dict[str, Any], result: dict[str, Any]
) -> None:
    body = request(user("u1", "Where am I?"), assistant("a1", part))
    plan_ = plan(body, browser_turn())
    assert plan_.new_message == function_responses(("get_location", "call-loc", result))
    assert plan_.prior_tool_results is None
    assert plan_.continuation is True


def test_output_for_a_gated_browser_call_is_refused() -> None:
    events = [
        user_turn("Where am I?", "u1", "inv-1"),
        *gated_call("inv-1", "call-loc", "get_location", "conf-loc", browser=True),
    ]
    body = request(user("u1", "Where"), assistant("a1", output("get_location", "call-loc", {})))
    error = refused(body, events)
    assert error.status == 409
    assert "needs the user's approval" in error.message


def test_output_for_a_gated_server_call_is_refused() -> None:
    body = request(
        user("u1", "Send"), assistant("a1", output("process_payment", "call-pay", {"ok": True}))
    )
    error = refused(body, payment_turn())
    assert error.status == 409
    assert "call-pay" in error.message


def test_output_for_an_unknown_call_is_refused() -> None:
    body = request(user("u1", "Where"), assistant("a1", output("get_location", "call-x", {})))
    error = refused(body, browser_turn())
    assert error.status == 409
    assert "call-x" in error.message


def test_servers_own_result_shown_back_is_not_an_answer() -> None:
    events = [
        *browser_turn(),
        call_event("inv-1", "call-w", "get_weather", {"city": "Tokyo"}),
        response_event("inv-1", "call-w", "get_weather", {"temp": 21}),
    ]
    body = request(
        user("u1", "Where"),
        assistant(
            "a1",
            output("get_weather", "call-w", {"temp": 99}),
            output("get_location", "call-loc", {"lat": 1}),
        ),
    )
    result = plan(body, events)
    assert result.new_message == function_responses(("get_location", "call-loc", {"lat": 1}))


def test_approved_browser_call_without_output_is_rearmed() -> None:
    events = [
        user_turn("Where am I?", "u1", "inv-1"),
        *gated_call(
            "inv-1", "call-loc", "get_location", "conf-loc", {"precise": True}, browser=True
        ),
    ]
    body = request(
        user("u1", "Where"),
        assistant("a1", decided("get_location", "call-loc", "conf-loc", True, {"precise": True})),
    )
    result = plan(body, events)
    assert result.rearmed_calls == [RearmedCall("call-loc", "get_location", {"precise": True})]
    assert result.new_message is None
    assert result.prior_tool_results is None
    assert result.continuation is True


def test_approvals_and_outputs_together_store_the_outputs_first() -> None:
    events = [*payment_turn(), call_event("inv-1", "call-loc", "get_location", browser=True)]
    body = request(
        user("u1", "Send"),
        assistant(
            "a1",
            decided("process_payment", "call-pay", "conf-pay", True),
            output("get_location", "call-loc", {"lat": 35.6}),
        ),
    )
    result = plan(body, events)
    assert result.new_message == function_responses(confirmed("conf-pay", {"confirmed": True}))
    assert result.prior_tool_results == function_responses(
        ("get_location", "call-loc", {"lat": 35.6})
    )


def test_approved_browser_call_with_its_output_in_one_message() -> None:
    events = [
        user_turn("Where am I?", "u1", "inv-1"),
        *gated_call("inv-1", "call-loc", "get_location", "conf-loc", browser=True),
    ]
    part = output(
        "get_location", "call-loc", {"lat": 35.6}, approval={"id": "conf-loc", "approved": True}
    )
    result = plan(request(user("u1", "Where"), assistant("a1", part)), events)
    assert result.rearmed_calls == []
    assert result.new_message == function_responses(confirmed("conf-loc", {"confirmed": True}))
    assert result.prior_tool_results == function_responses(
        ("get_location", "call-loc", {"lat": 35.6})
    )


# -- deferral: the flag and the held responses ---------------------------------------------------


@pytest.mark.parametrize("defer", [True, False])
def test_continuation_defers_as_configured(defer: bool) -> None:
    body = request(
        user("u1", "Send"),
        assistant("a1", decided("process_payment", "call-pay", "conf-pay", True)),
    )
    assert plan(body, payment_turn(), defer_intermediate=defer).defer is defer


def test_new_message_never_defers() -> None:
    assert plan(request(user("u1", "Hello")), []).defer is False


def test_replay_groups_the_deferred_responses_of_this_turn() -> None:
    old_turn = stamped(
        [user_turn("Earlier", "u0", "inv-0"), model_text("Earlier answer", "inv-0")], "r-old"
    )
    first = stamped(payment_turn(), "r0", deferred=False)
    second = stamped(
        [
            user_decision("inv-2", "conf-pay", confirmed=True),  # the user's, never replayed
            response_event("inv-2", "call-pay", "process_payment", {"ok": True}),
            model_text("Paid. Now the second one.", "inv-2"),
            *gated_call("inv-2", "call-two", "process_payment", "conf-two"),
        ],
        "r1",
    )
    third = stamped(
        [
            user_decision("inv-3", "conf-two", confirmed=True),
            response_event("inv-3", "call-two", "process_payment", {"ok": True}),
            *gated_call("inv-3", "call-three", "process_payment", "conf-three"),
        ],
        "r2",
    )
    body = request(
        user("u0", "Earlier"),
        assistant("a0"),
        user("u1", "Send"),
        assistant(
            "a1",
            decided("process_payment", "call-pay", "conf-pay", True),
            decided("process_payment", "call-two", "conf-two", True),
            decided("process_payment", "call-three", "conf-three", True),
        ),
    )
    result = plan(body, [*old_turn, *first, *second, *third])
    assert result.replay == [second[1:], third[1:]]
    assert result.new_message == function_responses(confirmed("conf-three", {"confirmed": True}))


# -- the answer rules on their own ---------------------------------------------------------------


def message(*parts: dict[str, Any]) -> UIMessage:
    return request(user("u1", "Hi"), assistant("a1", *parts)).last_message


def test_collect_answers_reads_decisions_outputs_and_rearmed_calls() -> None:
    events = [
        *payment_turn(),
        *gated_call("inv-1", "call-loc", "get_location", "conf-loc", browser=True),
        call_event("inv-1", "call-cam", "take_photo", browser=True),
    ]
    view = OpenInterrupts(turn_calls(events))
    answers = collect_answers(
        message(
            decided("process_payment", "call-pay", "conf-pay", False),
            decided("get_location", "call-loc", "conf-loc", True),
            output("take_photo", "call-cam", "photo.png"),
        ),
        view,
    )
    assert answers.decisions == [
        Decision("conf-pay", "call-pay", False),
        Decision("conf-loc", "call-loc", True),
    ]
    assert answers.outputs == {"call-cam": {"result": "photo.png"}}
    assert answers.rearmed == ["call-loc"]
    assert answers.denied == {"call-pay"}
    assert not answers.empty()
    check_complete(answers, "a1", view)  # re-armed: the step completes with the browser


def test_check_complete_lets_a_rearmed_call_wait_for_the_rest() -> None:
    events = [
        *payment_turn(),
        *gated_call("inv-1", "call-loc", "get_location", "conf-loc", browser=True),
    ]
    view = OpenInterrupts(turn_calls(events))
    answers = collect_answers(message(decided("get_location", "call-loc", "conf-loc", True)), view)
    assert answers.rearmed == ["call-loc"]
    check_complete(answers, "a1", view)  # conf-pay is still open: answered with the result


def test_check_complete_refuses_nothing_answered() -> None:
    view = OpenInterrupts(turn_calls(payment_turn()))
    with pytest.raises(RequestError) as caught:
        check_complete(Answers(), "a1", view)
    assert caught.value.status == 409
    assert "'a1'" in caught.value.message


def test_check_complete_names_every_open_item() -> None:
    events = [
        *payment_turn(),
        call_event("inv-1", "call-loc", "get_location", browser=True),
        *gated_call("inv-1", "call-two", "process_payment", "conf-two"),
    ]
    view = OpenInterrupts(turn_calls(events))
    answers = Answers(decisions=[Decision("conf-pay", "call-pay", True)])
    with pytest.raises(RequestError) as caught:
        check_complete(answers, "a1", view)
    assert caught.value.message.endswith("still open: call-loc, conf-two")


def test_stored_pending_view_of_a_turn() -> None:
    events = [
        *payment_turn(),
        user_decision("inv-2", "conf-pay", confirmed=True),
        *gated_call("inv-2", "call-loc", "get_location", "conf-loc", browser=True),
    ]
    view = OpenInterrupts(turn_calls(events))
    assert view.approval_call("conf-pay") == "call-pay"
    assert view.approval_call("conf-loc") == "call-loc"
    assert view.approval_call("nope") is None
    assert view.approval_decided("conf-pay") is True
    assert view.approval_decided("conf-loc") is False
    assert view.pending_approvals() == {"conf-loc"}
    assert view.waiting_calls() == {"call-loc"}
    assert view.gated_calls() == {"call-loc"}
    assert view.answered_calls() == {"conf-pay"}
