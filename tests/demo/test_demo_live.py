"""The offline demo model over ADK's real `Runner.run_live` (text, tools, history, voice)."""

from __future__ import annotations

import array
import asyncio
import math
import re
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing, asynccontextmanager

import pytest
from google.adk.agents import LiveRequestQueue
from google.adk.agents.run_config import RunConfig  # type: ignore[attr-defined, unused-ignore]
from google.adk.events.event import Event
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from adk_stream_protocol.demo import OFFLINE_MODEL_NAME, build_demo_agent
from adk_stream_protocol.demo.live import (
    LONG_UTTERANCE_PHRASE,
    OUTPUT_AUDIO_MIME_TYPE,
    SHORT_UTTERANCE_PHRASE,
    LiveOptions,
    OfflineLiveConnection,
)
from adk_stream_protocol.demo.replies import ERROR_CODE

APP, USER, SESSION = "demo_app", "user-1", "session-1"
AGENT = "demo_agent"
WAIT = 5.0  # Seconds; every wait is bounded so a broken flow fails instead of hanging.
INPUT_RATE = 16_000
INPUT_MIME = f"audio/pcm;rate={INPUT_RATE}"
HELLO_ANSWER = (
    'You said: "hello there". I am the offline demo model; try asking about the weather,'
    " a payment, your location or music."
)
# Long enough that its answer is still streaming when the test interrupts it.
LONG_MESSAGE = " ".join(f"word{n}" for n in range(200))


# --- Audio helpers ---------------------------------------------------------------


def pcm(seconds: float, amplitude: int = 8_000, hz: float = 300.0) -> bytes:
    """PCM16 LE mono at 16 kHz: a tone (speech to the model) or, with amplitude 0, silence."""
    count = round(seconds * INPUT_RATE)
    step = 2 * math.pi * hz / INPUT_RATE
    samples = array.array("h", (round(amplitude * math.sin(step * n)) for n in range(count)))
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()


def stream_audio(queue: LiveRequestQueue, data: bytes, chunk_seconds: float = 0.1) -> None:
    size = round(chunk_seconds * INPUT_RATE) * 2
    for start in range(0, len(data), size):
        queue.send_realtime(types.Blob(mime_type=INPUT_MIME, data=data[start : start + size]))


# --- Event helpers ---------------------------------------------------------------


def texts(events: Sequence[Event], *, partial: bool, thought: bool = False) -> list[str]:
    return [
        part.text
        for event in events
        if bool(event.partial) == partial and event.content
        for part in event.content.parts or []
        if part.text is not None and bool(part.thought) == thought
    ]


def calls(events: Sequence[Event]) -> list[types.FunctionCall]:
    return [fc for event in events for fc in event.get_function_calls()]


def results(events: Sequence[Event]) -> list[types.FunctionResponse]:
    return [fr for event in events for fr in event.get_function_responses()]


def audio_chunks(events: Sequence[Event]) -> list[types.Blob]:
    return [
        part.inline_data
        for event in events
        if event.content
        for part in event.content.parts or []
        if part.inline_data is not None
    ]


def transcripts(events: Sequence[Event], kind: str, *, partial: bool) -> list[str]:
    found: list[str] = []
    for event in events:
        transcription = getattr(event, kind)
        if transcription is not None and bool(event.partial) == partial:
            found.append(transcription.text or "")
    return found


def assert_turn_ends(events: Sequence[Event]) -> None:
    """A turn ends with a usage event and a content-less turn_complete event."""
    *_, usage, last = events
    assert usage.usage_metadata is not None and usage.content is None
    assert last.turn_complete and last.content is None
    assert [e for e in events if e.turn_complete] == [last]


# --- A live chat -------------------------------------------------------------------


class LiveChat:
    """One run_live session of the demo agent, consumed in a background task."""

    def __init__(self, sessions: InMemorySessionService, runner: Runner, modality: str) -> None:
        self.sessions = sessions
        self.runner = runner
        self.queue = LiveRequestQueue()
        self.run_config = RunConfig(response_modalities=[modality])
        self._events: asyncio.Queue[Event | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._consume())

    async def _consume(self) -> None:
        try:
            async for event in self.runner.run_live(
                user_id=USER,
                session_id=SESSION,
                live_request_queue=self.queue,
                run_config=self.run_config,
            ):
                await self._events.put(event)
        finally:
            await self._events.put(None)

    def say(self, text: str) -> None:
        self.queue.send_content(types.Content(role="user", parts=[types.Part(text=text)]))

    async def next_event(self) -> Event:
        event = await asyncio.wait_for(self._events.get(), WAIT)
        assert event is not None, "the live run ended unexpectedly"
        return event

    async def until(self, done: Callable[[Event], bool]) -> list[Event]:
        """Events up to and including the first one for which `done` is true."""
        events: list[Event] = []
        while True:
            events.append(await self.next_event())
            if done(events[-1]):
                return events

    async def turn(self) -> list[Event]:
        return await self.until(lambda e: bool(e.turn_complete))

    async def close(self) -> list[Event]:
        """Ends the run (idempotent) and returns the events that were still on their way."""
        assert self._task is not None
        if not self._task.done():
            self.queue.close()
            await asyncio.wait_for(self._task, WAIT)
        leftover: list[Event] = []
        while not self._events.empty():
            if (event := self._events.get_nowait()) is not None:
                leftover.append(event)
        return leftover

    async def persisted(self) -> list[Event]:
        session = await self.sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        return list(session.events)


def new_runner(sessions: InMemorySessionService) -> Runner:
    return Runner(
        agent=build_demo_agent(OFFLINE_MODEL_NAME), app_name=APP, session_service=sessions
    )


@asynccontextmanager
async def live_chat(
    modality: str = "TEXT", sessions: InMemorySessionService | None = None
) -> AsyncIterator[LiveChat]:
    """A started live chat; the session is created unless `sessions` already holds it."""
    if sessions is None:
        sessions = InMemorySessionService()
        await sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    chat = LiveChat(sessions, new_runner(sessions), modality)
    chat.start()
    try:
        yield chat
    finally:
        await chat.close()


class Direct:
    """The live connection driven without ADK, for what run_live cannot show."""

    def __init__(self, options: LiveOptions | None = None) -> None:
        self.connection = OfflineLiveConnection(options or LiveOptions(), pace_seconds=0)

    async def say(self, text: str) -> None:
        await self.connection.send_content(
            types.Content(role="user", parts=[types.Part(text=text)])
        )

    async def answer(self, call: types.FunctionCall, response: dict[str, object]) -> None:
        result = types.FunctionResponse(name=call.name, id=call.id, response=response)
        await self.connection.send_content(
            types.Content(role="user", parts=[types.Part(function_response=result)])
        )

    async def turn(self) -> list[LlmResponse]:
        """One receive() call: the responses of a turn (none once the session ended)."""
        return await asyncio.wait_for(self._read(lambda _: False), WAIT)

    async def until_call(self) -> list[LlmResponse]:
        return await asyncio.wait_for(self._read(lambda r: bool(calls_of(r))), WAIT)

    async def _read(self, stop: Callable[[LlmResponse], bool]) -> list[LlmResponse]:
        read: list[LlmResponse] = []
        async with aclosing(self.connection.receive()) as responses:
            async for response in responses:
                read.append(response)
                if stop(response):
                    break
        return read


def parts(response: LlmResponse) -> list[types.Part]:
    return list(response.content.parts or []) if response.content else []


def calls_of(response: LlmResponse) -> list[types.FunctionCall]:
    return [p.function_call for p in parts(response) if p.function_call]


def call_in(responses: Sequence[LlmResponse]) -> types.FunctionCall:
    (call,) = [c for r in responses for c in calls_of(r)]
    return call


# --- Text ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_text_turn_streams_partials_then_full_text_then_turn_complete() -> None:
    async with live_chat() as chat:
        chat.say("hello there")
        events = await chat.turn()

    pieces = texts(events, partial=True)
    assert len(pieces) >= 3 and "".join(pieces) == HELLO_ANSWER
    assert texts(events, partial=False) == [HELLO_ANSWER]
    # Order: every partial, then the full text, then usage, then turn_complete.
    assert [bool(e.partial) for e in events] == [True] * len(pieces) + [False] * 3
    assert_turn_ends(events)
    assert {e.author for e in events} == {AGENT}
    assert {e.model_version for e in events} == {OFFLINE_MODEL_NAME}
    assert len({e.id for e in events}) == len(events)  # Live events all get fresh ids.


@pytest.mark.asyncio
async def test_two_text_turns_in_one_session_leave_nothing_behind() -> None:
    async with live_chat() as chat:
        chat.say("hello there")
        first = await chat.turn()
        chat.say("second message")
        second = await chat.turn()
        leftover = await chat.close()
        persisted = await chat.persisted()

    assert texts(first, partial=False) == [HELLO_ANSWER]
    assert texts(second, partial=False)[0].startswith('You said: "second message".')
    assert_turn_ends(second)
    assert leftover == []
    user_texts = [e.content.parts[0].text for e in persisted if e.author == "user" and e.content]  # type: ignore[index]
    assert user_texts == ["hello there", "second message"]
    # Partials are not persisted; the full texts and turn_complete events are.
    assert not any(e.partial for e in persisted)
    assert sum(1 for e in persisted if e.turn_complete) == 2


@pytest.mark.asyncio
async def test_thinking_streams_thought_text_before_the_answer() -> None:
    async with live_chat() as chat:
        chat.say("think step by step and say hi")
        events = await chat.turn()

    thoughts = texts(events, partial=False, thought=True)
    assert thoughts == [
        "Let me think step by step. The message needs no tool, so I will answer directly."
    ]
    assert len(texts(events, partial=True, thought=True)) >= 3
    first_answer = next(i for i, e in enumerate(events) if texts([e], partial=True))
    last_thought = max(i for i, e in enumerate(events) if texts([e], partial=False, thought=True))
    assert last_thought < first_answer


@pytest.mark.asyncio
async def test_partial_content_is_answered_with_the_content_that_completes_it() -> None:
    async with live_chat() as chat:
        partial = types.Content(role="user", parts=[types.Part(text="hello")])
        chat.queue.send_content(partial, partial=True)
        chat.say("there")
        events = await chat.turn()

    assert texts(events, partial=False) == [HELLO_ANSWER]


@pytest.mark.asyncio
async def test_failure_is_an_error_event_and_the_session_goes_on() -> None:
    async with live_chat() as chat:
        chat.say("please fail")
        failed = await chat.turn()
        chat.say("hello there")
        recovered = await chat.turn()

    errors = [e for e in failed if e.error_code]
    assert [e.error_code for e in errors] == [ERROR_CODE] and errors[0].content is None
    assert_turn_ends(failed)
    assert texts(recovered, partial=False) == [HELLO_ANSWER]


# --- Tools -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_weather_tool_runs_and_its_result_goes_back_to_the_model() -> None:
    async with live_chat() as chat:
        chat.say("What's the weather in London?")
        events = await chat.turn()
        persisted = await chat.persisted()

    (call,) = calls(events)
    assert call.name == "get_weather" and call.args == {"location": "London"}
    assert re.fullmatch(r"function-call-\d+", call.id or "")  # The model's own, as Gemini's.
    (result,) = results(events)
    assert result.id == call.id and (result.response or {})["temperature"] == 12
    call_index = next(i for i, e in enumerate(events) if e.get_function_calls())
    result_index = next(i for i, e in enumerate(events) if e.get_function_responses())
    assert events[call_index].partial is None and call_index < result_index
    answer = events[result_index + 1 :]
    assert texts(answer, partial=False) == ["It is 12°C and rainy in London."]
    assert "".join(texts(answer, partial=True)) == "It is 12°C and rainy in London."
    assert_turn_ends(events)
    # ADK persists the call and the tool's result.
    assert calls(persisted) == [call] and results(persisted)[0].id == call.id


@pytest.mark.asyncio
async def test_browser_tool_waits_for_the_client_result() -> None:
    async with live_chat() as chat:
        chat.say("play music track 2")
        paused = await chat.until(lambda e: bool(e.get_function_calls()))
        (call,) = calls(paused)
        assert call.name == "change_bgm" and call.args == {"track": 2}
        assert paused[-1].long_running_tool_ids == {call.id}
        response = types.FunctionResponse(name="change_bgm", id=call.id, response={"track": 2})
        chat.queue.send_content(
            types.Content(role="user", parts=[types.Part(function_response=response)])
        )
        answer = await chat.turn()

    assert texts(answer, partial=False) == ["Now playing BGM track 2."]
    assert_turn_ends(answer)


@pytest.mark.asyncio
async def test_confirmation_gated_tool_gets_adks_placeholder_and_the_model_answers() -> None:
    # Live ADK cannot ask for confirmation: the gated tool answers with a placeholder error.
    async with live_chat() as chat:
        chat.say("pay Alice 10")
        events = await chat.turn()

    (result,) = results(events)
    assert "requires confirmation" in str((result.response or {}).get("error"))
    (answer,) = texts(events, partial=False)
    assert answer.startswith("The payment of 10 USD to Alice was not done")


# --- History -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_live_model_continues_a_conversation_started_with_run_async() -> None:
    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    runner = new_runner(sessions)
    message = types.Content(role="user", parts=[types.Part(text="play music track 2")])
    started = [
        e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message=message)
    ]
    (call,) = calls(started)
    # The browser's result for the paused call, stored the way the server stores it.
    response = types.FunctionResponse(name="change_bgm", id=call.id, response={"track": 2})
    await sessions.append_event(
        session,
        Event(
            invocation_id=started[-1].invocation_id,
            author="user",
            content=types.Content(role="user", parts=[types.Part(function_response=response)]),
        ),
    )

    async with live_chat(sessions=sessions) as chat:
        # The history ends with the user's side, so the model answers without new input.
        answer = await chat.turn()
        chat.say("What's the weather in London?")
        weather = await chat.turn()

    assert texts(answer, partial=False) == ["Now playing BGM track 2."]
    # The model's own call ids, none of them one already in the history.
    (weather_call,) = calls(weather)
    assert re.fullmatch(r"function-call-\d+", weather_call.id or "") and weather_call.id != call.id


@pytest.mark.asyncio
async def test_history_drives_the_next_step_of_a_plan() -> None:
    model = Direct()
    first_call = types.FunctionCall(
        name="process_payment", args={"amount": 10, "recipient": "Alice", "currency": "USD"}
    )
    outcome = {"success": True, "amount": 10, "currency": "USD", "recipient": "Alice"}
    first_result = types.FunctionResponse(
        name="process_payment", response={**outcome, "transaction_id": "t1", "wallet_balance": 990}
    )
    await model.connection.send_history(
        [
            types.Content(role="user", parts=[types.Part(text="Pay Alice 10 then Bob 20")]),
            types.Content(role="model", parts=[types.Part(function_call=first_call)]),
            types.Content(role="user", parts=[types.Part(function_response=first_result)]),
        ]
    )
    responses = await model.until_call()
    await model.connection.close()

    (text,) = [p.text for r in responses if not r.partial for p in parts(r) if p.text]
    assert text.startswith("Sent 10 USD to Alice") and text.endswith("Now paying Bob 20 USD.")
    call = call_in(responses)
    assert call.args == {"amount": 20, "recipient": "Bob", "currency": "USD"}
    assert re.fullmatch(r"function-call-\d+", call.id or "")


# --- Voice -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_audio_turn_with_activity_signals() -> None:
    async with live_chat("AUDIO") as chat:
        chat.queue.send_activity_start()
        stream_audio(chat.queue, pcm(1.5))
        chat.queue.send_activity_end()
        events = await chat.turn()
        persisted = await chat.persisted()

    # The user's words: transcription deltas, then the full text.
    heard = [e for e in events if e.input_transcription]
    assert {e.author for e in heard} == {"user"}
    deltas = transcripts(events, "input_transcription", partial=True)
    assert len(deltas) >= 3 and "".join(deltas) == LONG_UTTERANCE_PHRASE
    assert transcripts(events, "input_transcription", partial=False) == [LONG_UTTERANCE_PHRASE]
    assert heard[-1].input_transcription.finished  # type: ignore[union-attr]
    # The weather tool runs, then the answer is spoken.
    assert [c.name for c in calls(events)] == ["get_weather"]
    answer = "It is 18°C and cloudy in Tokyo."
    spoken = transcripts(events, "output_transcription", partial=True)
    assert len(spoken) >= 3 and "".join(spoken) == answer
    assert transcripts(events, "output_transcription", partial=False) == [answer]
    chunks = audio_chunks(events)
    assert len(chunks) == len(spoken)
    assert {c.mime_type for c in chunks} == {OUTPUT_AUDIO_MIME_TYPE}
    assert all(c.data and len(c.data) % 2 == 0 and any(c.data) for c in chunks)
    # Native audio answers carry no text parts.
    assert texts(events, partial=True) == [] and texts(events, partial=False) == []
    order = [_kind(e) for e in events]
    assert order.index("call") > order.index("input-final")
    assert order.index("output-final") > max(i for i, k in enumerate(order) if k == "audio")
    assert_turn_ends(events)
    # ADK keeps the final transcriptions, not the audio.
    assert transcripts(persisted, "input_transcription", partial=False) == [LONG_UTTERANCE_PHRASE]
    assert transcripts(persisted, "output_transcription", partial=False) == [answer]
    assert audio_chunks(persisted) == []


def _kind(event: Event) -> str:
    if event.input_transcription:
        return "input-final" if event.input_transcription.finished else "input"
    if event.output_transcription:
        return "output-final" if event.output_transcription.finished else "output"
    if event.get_function_calls():
        return "call"
    if audio_chunks([event]):
        return "audio"
    return "other"


@pytest.mark.parametrize("ending", ["silence", "audio_stream_end"])
@pytest.mark.asyncio
async def test_short_utterance_with_automatic_activity_detection(ending: str) -> None:
    async with live_chat("TEXT") as chat:
        stream_audio(chat.queue, pcm(0.3, amplitude=0))  # Silence before speech is ignored.
        stream_audio(chat.queue, pcm(0.5))
        if ending == "silence":
            stream_audio(chat.queue, pcm(0.6, amplitude=0))
        else:
            chat.queue.send_audio_stream_end()
        events = await chat.turn()

    assert transcripts(events, "input_transcription", partial=False) == [SHORT_UTTERANCE_PHRASE]
    # TEXT modality: the answer is text, not transcription plus audio.
    expected = f'You said: "{SHORT_UTTERANCE_PHRASE}". '
    assert texts(events, partial=False)[0].startswith(expected)
    assert audio_chunks(events) == []
    assert transcripts(events, "output_transcription", partial=True) == []


# --- Interruptions ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_new_text_interrupts_the_answer_in_progress() -> None:
    async with live_chat() as chat:
        chat.say(LONG_MESSAGE)
        started = await chat.until(lambda e: bool(e.partial))
        chat.say("What's the weather in London?")
        interrupted = started + await chat.turn()
        next_turn = await chat.turn()

    # The streamed text is closed by a full text flagged interrupted, then turn_complete.
    *_, closing, last = interrupted
    assert closing.interrupted and closing.partial is False
    streamed = "".join(texts(interrupted, partial=True))
    assert texts([closing], partial=False) == [streamed]
    assert f'You said: "{LONG_MESSAGE}"'.startswith(streamed) and len(streamed) < len(LONG_MESSAGE)
    assert last.turn_complete and last.content is None
    assert [c.name for c in calls(next_turn)] == ["get_weather"]
    assert texts(next_turn, partial=False)[-1] == "It is 12°C and rainy in London."


@pytest.mark.asyncio
async def test_activity_start_interrupts_a_spoken_answer() -> None:
    async with live_chat("AUDIO") as chat:
        chat.say(LONG_MESSAGE)
        started = await chat.until(lambda e: bool(audio_chunks([e])))
        chat.queue.send_activity_start()
        interrupted = started + await chat.turn()
        stream_audio(chat.queue, pcm(0.4))
        chat.queue.send_activity_end()
        answered = await chat.turn()

    *_, flushed, bare, last = interrupted
    spoken = "".join(transcripts(interrupted, "output_transcription", partial=True))
    assert flushed.output_transcription is not None and flushed.output_transcription.finished
    assert flushed.output_transcription.text == spoken
    assert bare.interrupted and bare.content is None
    assert last.turn_complete
    assert transcripts(answered, "input_transcription", partial=False) == [SHORT_UTTERANCE_PHRASE]
    assert audio_chunks(answered)


@pytest.mark.asyncio
async def test_a_result_for_an_interrupted_call_is_dropped() -> None:
    model = Direct()
    await model.say("play music track 1")
    first_call = call_in(await model.until_call())
    await model.say("play music track 2")
    interrupted = await model.turn()
    assert [(r.interrupted, r.turn_complete) for r in interrupted] == [(True, None), (None, True)]
    second_call = call_in(await model.until_call())
    assert second_call.id != first_call.id

    # The late result of the first call must not answer the second one.
    await model.answer(first_call, {"track": 1})
    await model.answer(second_call, {"track": 2})
    final = await model.turn()
    await model.connection.close()
    assert [p.text for r in final if r.partial is False for p in parts(r)] == [
        "Now playing BGM track 2."
    ]


@pytest.mark.asyncio
async def test_speech_ends_when_the_client_stops_streaming() -> None:
    model = Direct(LiveOptions(audio_output=False))
    await model.connection.send_realtime(types.Blob(mime_type=INPUT_MIME, data=pcm(0.5)))
    events = await model.turn()  # After IDLE_END_OF_SPEECH_SECONDS without audio.
    await model.connection.close()
    finals = [r.input_transcription.text for r in events if r.input_transcription and not r.partial]
    assert finals == [SHORT_UTTERANCE_PHRASE]


@pytest.mark.asyncio
async def test_silence_alone_is_not_an_utterance() -> None:
    model = Direct()
    await model.connection.send_realtime(
        types.Blob(mime_type=INPUT_MIME, data=pcm(1.0, amplitude=0))
    )
    await model.connection.send_realtime(types.LiveClientRealtimeInput(audio_stream_end=True))
    await model.connection.close()
    assert await model.turn() == []
    assert model.connection.history == []


@pytest.mark.asyncio
async def test_receive_ends_without_yielding_after_close() -> None:
    model = Direct()
    await model.connection.close()
    assert await model.turn() == []
    assert await model.turn() == []  # Every later call ends at once too.


def test_options_follow_the_live_connect_config() -> None:
    assert LiveOptions.from_config(
        types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
    ) == LiveOptions(audio_output=False, input_transcription=False, output_transcription=False)
    config = types.LiveConnectConfig(
        response_modalities=[types.Modality.AUDIO],
        input_audio_transcription=types.AudioTranscriptionConfig(),
        output_audio_transcription=types.AudioTranscriptionConfig(),
        realtime_input_config=types.RealtimeInputConfig(
            automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
        ),
    )
    assert LiveOptions.from_config(config) == LiveOptions(
        audio_output=True, automatic_activity_detection=False
    )
