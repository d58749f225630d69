"""The offline demo agent driven through ADK's real Runner (SSE streaming mode)."""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from typing import Any

import pytest
from google.adk.agents.run_config import (  # type: ignore[attr-defined, unused-ignore]
    RunConfig,
    StreamingMode,
)
from google.adk.events.event import Event
from google.adk.models import LLMRegistry
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from adk_stream_protocol.demo import (
    OFFLINE_MODEL_NAME,
    OfflineDemoLlm,
    build_demo_agent,
    register_offline_model,
)
from adk_stream_protocol.demo.chunks import chunk_text
from adk_stream_protocol.demo.intents import parse_intent
from adk_stream_protocol.demo.replies import ERROR_CODE
from adk_stream_protocol.demo.tools import WALLET_STATE_KEY, get_weather

APP, USER, SESSION = "demo_app", "user-1", "session-1"
CONFIRMATION = "adk_request_confirmation"
# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
TXN = r"txn_[0-9a-f]{12}"


class Chat:
    """One session of the demo agent, run the way the server runs it."""

    def __init__(self, mode: StreamingMode = StreamingMode.SSE) -> None:
        self.sessions = InMemorySessionService()
        self.runner = Runner(
            agent=build_demo_agent(OFFLINE_MODEL_NAME),
            app_name=APP,
            session_service=self.sessions,
        )
        self.run_config = RunConfig(streaming_mode=mode)

    async def start(self) -> Chat:
        await self.sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        return self

    async def send(self, *parts: types.Part) -> list[Event]:
        message = types.Content(role="user", parts=list(parts))
        return [
            event
            async for event in self.runner.run_async(
                user_id=USER, session_id=SESSION, new_message=message, run_config=self.run_config
            )
        ]

    async def say(self, text: str) -> list[Event]:
        return await self.send(types.Part(text=text))

    async def answer_confirmations(self, events: Sequence[Event], confirmed: bool) -> list[Event]:
        """Answers every pending confirmation of a step in ONE message."""
        requests = [fc for fc in calls(events) if fc.name == CONFIRMATION]
        assert requests, "expected a confirmation request"
        return await self.send(
            *(response_part(CONFIRMATION, fc.id, {"confirmed": confirmed}) for fc in requests)
        )

    async def state(self) -> dict[str, Any]:
        session = await self.sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        return dict(session.state)

    async def history(self) -> list[Event]:
        session = await self.sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        return list(session.events)


async def new_chat(mode: StreamingMode = StreamingMode.SSE) -> Chat:
    return await Chat(mode).start()


def response_part(name: str, call_id: str | None, response: dict[str, Any]) -> types.Part:
    return types.Part(
        function_response=types.FunctionResponse(name=name, id=call_id, response=response)
    )


def calls(events: Sequence[Event]) -> list[types.FunctionCall]:
    return [fc for event in events if not event.partial for fc in event.get_function_calls()]


def tool_calls(events: Sequence[Event]) -> list[tuple[str, dict[str, Any]]]:
    """Model function calls (without ADK's confirmation requests) as (name, args)."""
    return [(fc.name or "", dict(fc.args or {})) for fc in calls(events) if fc.name != CONFIRMATION]


def responses(events: Sequence[Event]) -> list[types.FunctionResponse]:
    return [fr for event in events for fr in event.get_function_responses()]


def partial_texts(events: Sequence[Event], *, thought: bool = False) -> list[str]:
    return [
        part.text
        for event in events
        if event.partial and event.content
        for part in event.content.parts or []
        if part.text is not None and bool(part.thought) == thought
    ]


def final_text(events: Sequence[Event]) -> str:
    """Text of the last non-partial model event (thoughts excluded)."""
    last = [e for e in events if not e.partial and e.content and e.content.role == "model"][-1]
    return "".join(p.text or "" for p in last.content.parts or [] if not p.thought)  # type: ignore[union-attr]


def assert_streamed(events: Sequence[Event], expected: str) -> None:
    """The answer arrives in >= 3 partials that add up to the aggregate."""
    pieces = partial_texts(events)
    assert len(pieces) >= 3
    assert "".join(pieces) == expected
    assert final_text(events) == expected


# --- Plain text, thinking, uploads, failures ---------------------------------------------


@pytest.mark.asyncio
async def test_chat_reply_streams_partials_then_one_aggregate() -> None:
    chat = await new_chat()
    events = await chat.say("hello there")

    expected = (
        'You said: "hello there". I am the offline demo model; try asking about the weather,'
        " a payment, your location or music."
    )
    assert_streamed(events, expected)
    aggregate = events[-1]
    assert aggregate.partial is False
    # ADK gives all partials and their aggregate the same event id.
    assert {e.id for e in events} == {aggregate.id}
    assert aggregate.finish_reason == types.FinishReason.STOP
    assert aggregate.model_version == OFFLINE_MODEL_NAME
    usage = aggregate.usage_metadata
    assert usage is not None
    assert (usage.prompt_token_count, usage.candidates_token_count) == (2, 21)
    assert usage.thoughts_token_count is None
    assert usage.total_token_count == 23


@pytest.mark.asyncio
async def test_think_streams_thought_partials_before_the_answer() -> None:
    chat = await new_chat()
    events = await chat.say("Think step by step: hello")

    thought = "Let me think step by step. The message needs no tool, so I will answer directly."
    thoughts = partial_texts(events, thought=True)
    assert len(thoughts) >= 3
    assert "".join(thoughts) == thought
    # Every thought partial comes before the first answer partial.
    kinds = [partial_texts([e], thought=True) != [] for e in events if e.partial]
    assert kinds == [True] * len(thoughts) + [False] * (len(kinds) - len(thoughts))

    aggregate = events[-1]
    assert aggregate.content is not None
    parts = aggregate.content.parts or []
    answer = f'You said: "Think step by step: hello". {_hint()}'
    assert [(p.thought, p.text) for p in parts] == [(True, thought), (None, answer)]
    usage = aggregate.usage_metadata
    assert usage is not None
    counts = (usage.prompt_token_count, usage.candidates_token_count, usage.thoughts_token_count)
    # Deterministic "token" counts: words of the request, the answer and the thought.
    assert counts == (5, 24, 16) == (5, len(answer.split()), len(thought.split()))
    assert usage.total_token_count == 5 + 24 + 16


@pytest.mark.asyncio
async def test_uploaded_image_reaches_the_model() -> None:
    chat = await new_chat()
    events = await chat.send(
        types.Part(text="What is this?"),
        types.Part(inline_data=types.Blob(mime_type="image/png", data=PNG)),
    )
    expected = f'I received 1 image (image/png, {len(PNG)} bytes). You said: "What is this?". '
    assert_streamed(events, expected + _hint())


@pytest.mark.asyncio
async def test_fail_returns_one_error_event_without_content() -> None:
    chat = await new_chat()
    events = await chat.say("please fail")

    assert len(events) == 1
    (event,) = events
    assert event.error_code == ERROR_CODE == "DEMO_MODEL_FAILURE"
    assert event.error_message == "offline demo model failure (internal detail: stack xyz)"
    assert event.content is None
    assert event.is_final_response()


@pytest.mark.asyncio
async def test_non_streaming_mode_yields_only_the_aggregate() -> None:
    chat = await new_chat(StreamingMode.NONE)
    events = await chat.say("hello")

    assert len(events) == 1
    assert events[0].partial is False
    assert final_text(events) == f'You said: "hello". {_hint()}'
    assert events[0].usage_metadata is not None


# --- Weather (server tool) -------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("text", "city", "answer"),
    [
        ("What's the weather in Tokyo?", "Tokyo", "It is 18°C and cloudy in Tokyo."),
        ("東京の天気は\uff1f", "Tokyo", "It is 18°C and cloudy in Tokyo."),
        ("weather in london today", "London", "It is 12°C and rainy in London."),
        (
            "What is the weather like in Berlin?",
            "Berlin",
            "I have no offline weather data for Berlin; the demo assumes 20°C.",
        ),
    ],
)
async def test_weather_calls_get_weather_then_answers(text: str, city: str, answer: str) -> None:
    chat = await new_chat()
    events = await chat.say(text)

    call_event = events[0]
    assert call_event.partial is False  # function calls only come in the aggregate
    assert tool_calls(events) == [("get_weather", {"location": city})]
    (result,) = responses(events)
    assert result.name == "get_weather" and result.id == calls(events)[0].id
    assert result.response is not None and result.response["location"] == city
    assert_streamed(events[2:], answer)


# --- Payments (server tool with approval) --------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Send 50 dollars to Hanako", {"amount": 50, "recipient": "Hanako", "currency": "USD"}),
        ("Pay Alice 10", {"amount": 10, "recipient": "Alice", "currency": "USD"}),
        ("Hanakoさんに50ドル送金して", {"amount": 50, "recipient": "Hanako", "currency": "USD"}),
        ("花子さんに500円送金して", {"amount": 500, "recipient": "花子", "currency": "JPY"}),
        ("Pay Bob €12.5", {"amount": 12.5, "recipient": "Bob", "currency": "EUR"}),
    ],
)
async def test_payment_is_confirmed_then_executed(text: str, args: dict[str, Any]) -> None:
    chat = await new_chat()
    events = await chat.say(text)

    assert tool_calls(events) == [("process_payment", args)]
    (request,) = [fc for fc in calls(events) if fc.name == CONFIRMATION]
    assert request.args is not None
    assert request.args["originalFunctionCall"]["args"] == args
    assert responses(events)[0].response == {
        "error": "This tool call requires confirmation, please approve or reject."
    }

    events = await chat.answer_confirmations(events, confirmed=True)
    (result,) = responses(events)
    assert result.response is not None and result.response["success"] is True
    balance = 1000 - args["amount"]
    assert result.response["wallet_balance"] == balance
    amount = f"{args['amount']:g}"
    assert re.fullmatch(
        rf"Sent {amount} {args['currency']} to {args['recipient']} \(transaction {TXN}\)\."
        rf" Wallet balance: {balance:g}\.",
        final_text(events),
    )
    assert len(partial_texts(events)) >= 3
    assert (await chat.state())[WALLET_STATE_KEY] == balance


@pytest.mark.asyncio
async def test_rejected_payment_is_not_executed() -> None:
    chat = await new_chat()
    events = await chat.say("Send 50 dollars to Hanako")
    events = await chat.answer_confirmations(events, confirmed=False)

    assert [fr.response for fr in responses(events)] == [{"error": "This tool call is rejected."}]
    assert_streamed(
        events[1:], "The payment of 50 USD to Hanako was not done because you rejected it."
    )
    assert WALLET_STATE_KEY not in await chat.state()


@pytest.mark.asyncio
async def test_payment_above_the_balance_fails() -> None:
    chat = await new_chat()
    events = await chat.answer_confirmations(await chat.say("Pay Alice 5000"), confirmed=True)

    assert [fr.response for fr in responses(events)] == [
        {
            "success": False,
            "error": "Insufficient funds: 5000 USD requested, wallet balance is 1000.",
        }
    ]
    assert final_text(events) == (
        "The payment of 5000 USD to Alice failed:"
        " Insufficient funds: 5000 USD requested, wallet balance is 1000."
    )


@pytest.mark.asyncio
async def test_two_payments_in_one_message_are_two_calls_in_one_response() -> None:
    chat = await new_chat()
    events = await chat.say("Pay Alice 10 and Bob 20")

    call_event = events[0]
    assert call_event.content is not None
    assert [p.function_call.name for p in call_event.content.parts or [] if p.function_call] == [
        "process_payment",
        "process_payment",
    ]
    assert tool_calls(events) == [
        ("process_payment", {"amount": 10, "recipient": "Alice", "currency": "USD"}),
        ("process_payment", {"amount": 20, "recipient": "Bob", "currency": "USD"}),
    ]
    # ADK asks for both approvals in one event.
    requests = [e for e in events if any(fc.name == CONFIRMATION for fc in e.get_function_calls())]
    assert len(requests) == 1 and len(requests[0].get_function_calls()) == 2

    events = await chat.answer_confirmations(events, confirmed=True)
    assert [fr.response["recipient"] for fr in responses(events) if fr.response] == ["Alice", "Bob"]
    assert re.fullmatch(
        rf"Sent 10 USD to Alice \(transaction {TXN}\)\. Wallet balance: 990\."
        rf" Sent 20 USD to Bob \(transaction {TXN}\)\. Wallet balance: 970\.",
        final_text(events),
    )
    assert (await chat.state())[WALLET_STATE_KEY] == 970


@pytest.mark.asyncio
async def test_one_approved_and_one_rejected_payment() -> None:
    chat = await new_chat()
    events = await chat.say("Pay Alice 10 and Bob 20")
    first, second = [fc for fc in calls(events) if fc.name == CONFIRMATION]
    events = await chat.send(
        response_part(CONFIRMATION, first.id, {"confirmed": True}),
        response_part(CONFIRMATION, second.id, {"confirmed": False}),
    )
    assert re.fullmatch(
        rf"Sent 10 USD to Alice \(transaction {TXN}\)\. Wallet balance: 990\."
        r" The payment of 20 USD to Bob was not done because you rejected it\.",
        final_text(events),
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("text", "first", "second"),
    [
        ("Pay Alice 10, then pay Bob 20", ("Alice", 10), ("Bob", 20)),
        (
            "Hanakoさんに50ドル送金して、その後Taroさんに20ドル送金して",
            ("Hanako", 50),
            ("Taro", 20),
        ),
    ],
)
async def test_sequential_payments_take_two_model_steps(
    text: str, first: tuple[str, int], second: tuple[str, int]
) -> None:
    chat = await new_chat()
    events = await chat.say(text)
    assert tool_calls(events) == [
        ("process_payment", {"amount": first[1], "recipient": first[0], "currency": "USD"})
    ]

    # After the first payment the model streams a sentence AND the next call together.
    events = await chat.answer_confirmations(events, confirmed=True)
    step = [e for e in events if e.content and e.content.role == "model"]
    aggregate = next(e for e in step if not e.partial and e.get_function_calls())
    assert aggregate.content is not None
    kinds = [("text" if p.text else "call") for p in aggregate.content.parts or []]
    assert kinds == ["text", "call"]
    sentence = aggregate.content.parts[0].text  # type: ignore[index]
    assert re.fullmatch(
        rf"Sent {first[1]} USD to {first[0]} \(transaction {TXN}\)\."
        rf" Wallet balance: {1000 - first[1]}\. Now paying {second[0]} {second[1]} USD\.",
        sentence or "",
    )
    assert "".join(partial_texts(events)) == sentence
    assert len(partial_texts(events)) >= 3
    assert tool_calls(events) == [
        ("process_payment", {"amount": second[1], "recipient": second[0], "currency": "USD"})
    ]

    events = await chat.answer_confirmations(events, confirmed=True)
    remaining = 1000 - first[1] - second[1]
    assert re.fullmatch(
        rf"Sent {first[1]} USD to {first[0]} \(transaction {TXN}\)\."
        rf" Wallet balance: {1000 - first[1]}\."
        rf" Sent {second[1]} USD to {second[0]} \(transaction {TXN}\)\."
        rf" Wallet balance: {remaining}\.",
        final_text(events),
    )
    assert (await chat.state())[WALLET_STATE_KEY] == remaining


# --- Browser tools (long-running) ----------------------------------------------------------


@pytest.mark.asyncio
async def test_get_location_needs_approval_then_waits_for_the_browser() -> None:
    chat = await new_chat()
    events = await chat.say("Where am I?")

    # Run 1: the call (long-running), the confirmation request, the placeholder answer.
    call_event, request_event, placeholder_event = events
    (call,) = call_event.get_function_calls()
    assert (call.name, call.args) == ("get_location", {})
    assert call_event.long_running_tool_ids == {call.id}
    (request,) = request_event.get_function_calls()
    assert request.name == CONFIRMATION
    assert request.args is not None and request.args["originalFunctionCall"]["id"] == call.id
    assert request_event.long_running_tool_ids == {request.id}
    (placeholder,) = placeholder_event.get_function_responses()
    assert placeholder.id == call.id
    assert call.id in placeholder_event.actions.requested_tool_confirmations

    # The server answers the approval only together with the browser's result: the result
    # is stored as its own event (ADK drops it from a message that also holds a
    # confirmation answer), then the approval resumes the same invocation.
    location = {"latitude": 35.6812, "longitude": 139.7671, "accuracy": 20}
    session = await chat.sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session is not None
    await chat.sessions.append_event(
        session,
        Event(
            author="user",
            invocation_id=call_event.invocation_id,
            content=types.Content(
                role="user", parts=[response_part("get_location", call.id, location)]
            ),
        ),
    )
    events = await chat.answer_confirmations(events, confirmed=True)
    assert {e.invocation_id for e in events} == {call_event.invocation_id}
    assert_streamed(events, "You are at latitude 35.6812, longitude 139.7671.")


@pytest.mark.asyncio
async def test_get_location_denied_in_japanese() -> None:
    chat = await new_chat()
    events = await chat.say("現在地を教えて")
    assert tool_calls(events) == [("get_location", {})]

    events = await chat.answer_confirmations(events, confirmed=False)
    assert [fr.response for fr in responses(events)] == [{"error": "This tool call is rejected."}]
    assert_streamed(events[1:], "The location request was not done because you rejected it.")


@pytest.mark.asyncio
@pytest.mark.parametrize(("text", "track"), [("play music track 2", 2), ("BGMを変えて", 1)])
async def test_change_bgm_is_long_running_and_resumes(text: str, track: int) -> None:
    chat = await new_chat()
    events = await chat.say(text)

    (call_event,) = events  # no FunctionResponse: the browser owes it
    (call,) = call_event.get_function_calls()
    assert (call.name, call.args) == ("change_bgm", {"track": track})
    assert call_event.long_running_tool_ids == {call.id}

    events = await chat.send(
        response_part("change_bgm", call.id, {"success": True, "track": track})
    )
    assert_streamed(events, f"Now playing BGM track {track}.")


@pytest.mark.asyncio
async def test_cancelled_browser_call_is_acknowledged() -> None:
    chat = await new_chat()
    (call_event,) = await chat.say("change the bgm to 2")
    (call,) = call_event.get_function_calls()

    events = await chat.send(response_part("change_bgm", call.id, {"error": "cancelled"}))
    assert final_text(events) == "The change to BGM track 2 was not done (cancelled)."


# --- Pure parts --------------------------------------------------------------------------


def test_register_offline_model_is_idempotent() -> None:
    register_offline_model()
    register_offline_model()
    assert LLMRegistry.resolve("offline-demo") is OfflineDemoLlm
    llm = LLMRegistry.new_llm("offline-fast")
    assert isinstance(llm, OfflineDemoLlm) and llm.model == "offline-fast"


@pytest.mark.parametrize(
    ("text", "kind", "steps"),
    [
        ("make a payment of 12.5 euros to Carol", "payment", [[(12.5, "Carol", "EUR")]]),
        ("Pay Alice 10 and Bob 20 yen", "payment", [[(10, "Alice", "JPY"), (20, "Bob", "JPY")]]),
        ("Send Hanako 50 dollars", "payment", [[(50, "Hanako", "USD")]]),
        ("50ドルを花子さんに送金", "payment", [[(50, "花子", "USD")]]),
        ("Pay Ann 1 and then Ben 2", "payment", [[(1, "Ann", "USD")], [(2, "Ben", "USD")]]),
        ("I want to pay", "payment_help", []),
        ("send me the weather in Paris", "weather", []),
        ("hello", "chat", []),
    ],
)
def test_parse_intent(text: str, kind: str, steps: list[list[tuple[Any, str, str]]]) -> None:
    intent = parse_intent(text)
    assert intent.kind == kind
    if kind == "payment":
        parsed = [
            [(c.args["amount"], c.args["recipient"], c.args["currency"]) for c in step]
            for step in intent.steps
        ]
        assert parsed == steps


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        # A payment may start right where the previous one ended, inside a run of letters.
        ("アリスに5ドルボブに3ドル送金", [[(5, "アリス", "USD"), (3, "ボブ", "USD")]]),
        ("花子に5円太郎に3円送金", [[(5, "花子", "JPY"), (3, "太郎", "JPY")]]),
        ("pay Bob 5usd-Ann 3", [[(5, "Bob", "USD"), (3, "Ann", "USD")]]),
        ("5ドルを花子さんに3円を太郎に送金", [[(5, "花子", "USD"), (3, "太郎", "JPY")]]),
        # A stop word joined to a name is skipped; a hyphenated name is kept whole.
        ("pay to-Bob 5", [[(5, "Bob", "USD")]]),
        ("Pay Mary-Ann 5", [[(5, "Mary-Ann", "USD")]]),
        ("pay $ 5 to Bob", [[(5, "Bob", "USD")]]),
        ("Send  50   dollars   to   Hanako", [[(50, "Hanako", "USD")]]),
        ("Pay Bob 1,000.50", [[(1000.5, "Bob", "USD")]]),
        (
            "pay Ann 1 then Ben 2 and then Cy 3",
            [[(1, "Ann", "USD")], [(2, "Ben", "USD")], [(3, "Cy", "USD")]],
        ),
    ],
)
def test_payment_edge_cases(text: str, steps: list[list[tuple[Any, str, str]]]) -> None:
    """Pins what the linear-time payment rules must still match (see demo/payments.py)."""
    intent = parse_intent(text)
    parsed = [
        [(c.args["amount"], c.args["recipient"], c.args["currency"]) for c in step]
        for step in intent.steps
    ]
    assert (intent.kind, parsed) == ("payment", steps)


@pytest.mark.parametrize(
    ("text", "city"),
    [
        ("weather for Rome tomorrow", "Rome"),
        ("weather in 5, weather at Rome.", "Rome"),
        ("weather like in Reykjavik this week", "Reykjavik"),
        ("名古屋の天気", "名古屋"),
        ("明日、名古屋の気温は？", "名古屋"),
        ("今日の天気", "Tokyo"),
    ],
)
def test_weather_city_edge_cases(text: str, city: str) -> None:
    """Pins what the linear-time city rules must still find (see demo/cities.py)."""
    intent = parse_intent(text)
    assert intent.kind == "weather"
    assert intent.steps[0][0].args == {"location": city}


@pytest.mark.parametrize("text", ["a b c d e f g h i j k", "ab", "東京の天気", "It is 18°C."])
def test_chunk_text_round_trips(text: str) -> None:
    chunks = chunk_text(text)
    assert "".join(chunks) == text
    assert len(chunks) >= 3 if len(text) >= 3 else chunks == [text]


def test_get_weather_is_offline_and_deterministic() -> None:
    assert get_weather("tokyo") == {
        "location": "Tokyo",
        "temperature": 18,
        "condition": "Cloudy",
        "humidity": 65,
        "unit": "celsius",
    }
    unknown = get_weather("Atlantis")
    assert (unknown["temperature"], unknown["condition"], unknown["humidity"]) == (
        20,
        "Unknown",
        60,
    )
    assert "note" in unknown


def _hint() -> str:
    return (
        "I am the offline demo model; try asking about the weather, a payment,"
        " your location or music."
    )
