"""The offline model's reply planning (demo/replies.py), without ADK's runner.

`decide_reply` is a pure function of the conversation: these tests build the contents a
request carries, step by step, as ADK would (call ids stripped), and check the reply.
"""

from __future__ import annotations

from typing import Any

from google.genai import types

from adk_stream_protocol.demo.plans import PlannedCall
from adk_stream_protocol.demo.replies import Reply, decide_reply
from adk_stream_protocol.demo.wording import HINT

# What ADK's confirmation gate answers for a call the user rejected (a literal in ADK).
ADK_REJECTION = {"error": "This tool call is rejected."}


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def model_calls(reply: Reply) -> types.Content:
    """The model's turn as ADK keeps it: the reply's text and its calls, without ids."""
    parts = [types.Part(text=reply.text)] if reply.text else []
    parts += [
        types.Part(function_call=types.FunctionCall(name=c.name, args=dict(c.args)))
        for c in reply.calls
    ]
    return types.Content(role="model", parts=parts)


def results(*responses: tuple[str, dict[str, Any]]) -> types.Content:
    parts = [
        types.Part(function_response=types.FunctionResponse(name=name, response=response))
        for name, response in responses
    ]
    return types.Content(role="user", parts=parts)


def payment(recipient: str, amount: int, currency: str = "USD") -> PlannedCall:
    args = {"amount": amount, "recipient": recipient, "currency": currency}
    return PlannedCall("process_payment", args)


def test_weather_is_a_call_then_an_answer_from_its_result() -> None:
    question = user("What's the weather in London today?")
    first = decide_reply([question])
    assert first == Reply(calls=(PlannedCall("get_weather", {"location": "London"}),))

    weather = {"location": "London", "temperature": 12, "condition": "Rainy", "humidity": 85}
    answer = decide_reply([question, model_calls(first), results(("get_weather", weather))])
    assert answer == Reply(text="It is 12°C and rainy in London.")


def test_unknown_city_says_the_weather_is_a_default() -> None:
    question = user("weather in Oslo?")
    first = decide_reply([question])
    assert first.calls == (PlannedCall("get_weather", {"location": "Oslo"}),)
    default = {"location": "Oslo", "temperature": 20, "condition": "Unknown"}
    answer = decide_reply([question, model_calls(first), results(("get_weather", default))])
    assert answer.text == "I have no offline weather data for Oslo; the demo assumes 20°C."


def test_sequential_payments_report_each_result_before_the_next_call() -> None:
    question = user("Send 50 dollars to Hanako, then pay Bob 20")
    first = decide_reply([question])
    assert first == Reply(calls=(payment("Hanako", 50),))

    paid = {
        "success": True,
        "transaction_id": "txn_1",
        "amount": 50,
        "currency": "USD",
        "recipient": "Hanako",
        "wallet_balance": 950.0,
    }
    history = [question, model_calls(first), results(("process_payment", paid))]
    second = decide_reply(history)
    assert second.calls == (payment("Bob", 20),)
    assert second.text == (
        "Sent 50 USD to Hanako (transaction txn_1). Wallet balance: 950. Now paying Bob 20 USD."
    )

    # The user rejects the second payment in the approval dialog.
    history += [model_calls(second), results(("process_payment", ADK_REJECTION))]
    final = decide_reply(history)
    assert final.calls == ()
    assert final.text == (
        "Sent 50 USD to Hanako (transaction txn_1). Wallet balance: 950."
        " The payment of 20 USD to Bob was not done because you rejected it."
    )


def test_parallel_calls_of_one_tool_are_paired_with_their_results_in_order() -> None:
    # No ids reach the model: each response goes to the first pending call of its name.
    question = user("Pay Alice 10 and Bob 20 euros")
    first = decide_reply([question])
    assert first.calls == (payment("Alice", 10, "EUR"), payment("Bob", 20, "EUR"))

    refused = {"success": False, "error": "Insufficient funds"}
    history = [
        question,
        model_calls(first),
        results(("process_payment", ADK_REJECTION), ("process_payment", refused)),
    ]
    assert decide_reply(history).text == (
        "The payment of 10 EUR to Alice was not done because you rejected it."
        " The payment of 20 EUR to Bob failed: Insufficient funds"
    )


def test_browser_location_result_is_read_from_its_coordinates() -> None:
    question = user("Where am I?")
    first = decide_reply([question])
    assert first == Reply(calls=(PlannedCall("get_location"),))

    # A browser result as the client may send it: wrapped in {"result": ...}.
    position = {"result": {"coords": {"latitude": 35.68, "longitude": 139.76}, "city": "Tokyo"}}
    answer = decide_reply([question, model_calls(first), results(("get_location", position))])
    assert answer.text == "You are at latitude 35.68, longitude 139.76 in Tokyo."


def test_browser_music_change_reports_the_track() -> None:
    question = user("BGMを2に変えて")
    first = decide_reply([question])
    assert first.calls == (PlannedCall("change_bgm", {"track": 2}),)
    answer = decide_reply([question, model_calls(first), results(("change_bgm", {"track": 2}))])
    assert answer.text == "Now playing BGM track 2."


def test_plain_text_is_echoed_with_the_hint() -> None:
    assert decide_reply([user("hello there")]) == Reply(text=f'You said: "hello there". {HINT}')
    assert decide_reply([]) == Reply(text=HINT)


def test_thinking_is_a_thought_about_the_plan() -> None:
    chat = decide_reply([user("think about hello")])
    assert chat.thought == (
        "Let me think step by step. The message needs no tool, so I will answer directly."
    )
    weather = decide_reply([user("think: weather in Paris?")])
    assert weather.thought == (
        "Let me think step by step. I will call get_weather and wait for the result."
    )
    assert weather.calls == (PlannedCall("get_weather", {"location": "Paris"}),)


def test_a_new_message_starts_a_new_plan() -> None:
    question = user("weather in Tokyo")
    first = decide_reply([question])
    weather = {"location": "Tokyo", "temperature": 18, "condition": "Cloudy"}
    done = [question, model_calls(first), results(("get_weather", weather))]
    done.append(model_calls(decide_reply(done)))
    # The weather results before it no longer count: "thanks" is plain text.
    assert decide_reply([*done, user("thanks")]).text == f'You said: "thanks". {HINT}'
    # And the same question again is a new call, not the old answer.
    assert decide_reply([*done, user("weather in Tokyo")]) == first


def test_recall_and_failure() -> None:
    history = [user("first words"), types.Content(role="model", parts=[types.Part(text="ok")])]
    recall = decide_reply([*history, user("What did I say first?")])
    assert recall.text == 'Your first message was: "first words".'
    assert decide_reply([*history, user("please fail")]) == Reply(error=True)
