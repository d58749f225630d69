"""The offline demo model stays fast, and its answer small, whatever a client sends.

The model answers on the server's event loop, so one slow answer stalls every request.
These inputs used to hold the loop for 10 s to minutes at 20 KB, half an hour to hours at
200 KB: regexes that rescanned a long run of letters, digits or spaces from each of its
characters, and an echo of the whole message streamed a few words per event. Each test
here fails against that code, by its deadline or by its bounds, except those marked as
guarding inputs it already read in linear time (and the chunking kept as it was).
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import aclosing, contextmanager
from types import FrameType

import pytest
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from adk_stream_protocol.demo.bounds import (
    MAX_LISTED_ATTACHMENTS,
    MAX_PAYMENTS_PER_MESSAGE,
    MAX_QUOTE_CHARS,
    MAX_REPLY_CHARS,
    MAX_STREAM_PIECES,
)
from adk_stream_protocol.demo.chunks import chunk_text
from adk_stream_protocol.demo.intents import parse_intent
from adk_stream_protocol.demo.live import LiveOptions, OfflineLiveConnection
from adk_stream_protocol.demo.model import OfflineDemoLlm
from adk_stream_protocol.demo.replies import decide_reply

SIZE = 200_000  # The server's default limit on the characters of one message.
# Seconds for SIZE characters: the model needs well under one, even on a slow and busy
# 2-core machine; the old code needed half an hour or more.
DEADLINE = 10.0
HUGE = 5_000_000  # A message far over any limit: the answer must not grow with it.
BIG = 1_000_000  # Big enough that the old answer was thousands of events, cheaper than HUGE.
HUGE_DEADLINE = 60.0  # Seconds: reading 5 MB takes a few; the old code took minutes.
# The longest reply text: MAX_REPLY_CHARS and the note saying it was cut.
REPLY_LIMIT = MAX_REPLY_CHARS + 100
WORDS = "lorem ipsum dolor sit amet, consectetur adipiscing elit "


class DeadlineExceeded(Exception):
    pass


@contextmanager
def deadline(seconds: float = DEADLINE) -> Iterator[None]:
    """Fails the test when the block runs longer than `seconds`.

    A watchdog thread could not do this: a regex search holds the GIL until it ends. A
    SIGALRM handler runs inside a search (the regex engine checks for signals), so a
    quadratic search is stopped at the deadline instead of running for minutes.
    """
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        started = time.monotonic()
        yield
        assert time.monotonic() - started < seconds, f"took longer than {seconds} s"
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise DeadlineExceeded(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def user(*parts: types.Part) -> types.Content:
    return types.Content(role="user", parts=list(parts))


def said(text: str) -> types.Content:
    return user(types.Part(text=text))


def generate(contents: list[types.Content]) -> list[LlmResponse]:
    """Every response of the model, streamed as in ADK's SSE mode."""

    async def collect() -> list[LlmResponse]:
        request = LlmRequest(contents=contents)
        return [r async for r in OfflineDemoLlm().generate_content_async(request, stream=True)]

    return asyncio.run(collect())


def partial_texts(responses: list[LlmResponse]) -> list[str]:
    return [
        part.text
        for r in responses
        if r.partial and r.content
        for part in r.content.parts or []
        if part.text is not None and not part.thought
    ]


def final_text(responses: list[LlmResponse]) -> str:
    last = responses[-1]
    assert last.partial is False and last.content is not None
    return "".join(p.text or "" for p in last.content.parts or [] if not p.thought)


def repeated(unit: str, size: int = SIZE) -> str:
    return unit * (size // len(unit))


def huge_message(size: int = HUGE) -> str:
    return repeated(WORDS, size).strip()  # The model strips what it reads.


def name(n: int) -> str:
    """A distinct name for each number: "Pa", "Pb", ... (names have no digits)."""
    letters = ""
    while True:
        n, digit = divmod(n, 26)
        letters += "abcdefghijklmnopqrstuvwxyz"[digit]
        if not n:
            return "P" + letters


# --- Every input is read in linear time --------------------------------------------------

# One family per way the old regexes went quadratic. Each message is about SIZE long; its
# first words decide which rules read it (payments are only parsed after "pay" or "送金").
FAMILIES = [
    pytest.param(repeated("a"), id="one-latin-token"),
    pytest.param("pay " + repeated("a"), id="pay-one-latin-token"),
    pytest.param("pay " + repeated("b-"), id="pay-hyphenated-token"),
    pytest.param("pay " + repeated("b'"), id="pay-apostrophes"),
    pytest.param("送金" + repeated("ア"), id="katakana-run"),
    pytest.param("送金" + repeated("漢"), id="kanji-run"),
    pytest.param(repeated("漢") + " 天気", id="kanji-run-without-no"),
    pytest.param(repeated("あ") + " 天気", id="hiragana-run-without-no"),
    pytest.param(repeated("の") + " 天気", id="no-run"),
    pytest.param(repeated("1"), id="digits"),
    pytest.param("pay bob " + repeated("1"), id="pay-digits"),
    pytest.param("pay $" + repeated("1"), id="pay-dollar-digits"),
    pytest.param("pay bob 1" + repeated(",000"), id="pay-thousands"),
    pytest.param("play music " + repeated("1"), id="music-digits"),
    pytest.param("pay bob" + repeated(" ") + "x", id="pay-spaces"),
    pytest.param("pay 5" + repeated("\u3000") + "x", id="pay-ideographic-spaces"),
    pytest.param("weather in " + repeated("a"), id="weather-in-token"),
    pytest.param("weather in a" + repeated(" ") + "5", id="weather-in-spaces"),
    pytest.param(repeated("weather in ") + "5", id="weather-in-repeated"),
    pytest.param("送金" + repeated("ドル"), id="currency-katakana"),
]
# Inputs the old code already read in linear time (these tests pass against it too). They
# exercise what replaced it: the segments searched as one text, the rules' prefilters.
ALREADY_LINEAR = [
    pytest.param("pay " + repeated("1,"), id="pay-digits-with-commas"),
    pytest.param("pay " + repeated("then "), id="then-separators"),
    pytest.param("送金" + repeated("その後"), id="sonogo-separators"),
    pytest.param("pay " + repeated("Bob 5 then "), id="payment-then-separators"),
    pytest.param("pay " + repeated("5 to "), id="amounts-to"),
    pytest.param("送金" + repeated("アに"), id="names-ni"),
    pytest.param("送金" + repeated("5を"), id="amounts-wo"),
]


@pytest.mark.parametrize("text", FAMILIES + ALREADY_LINEAR)
def test_any_message_is_answered_in_linear_time(text: str) -> None:
    with deadline():  # parse_intent, decide_reply, chunk_text, usage: the model's whole path.
        responses = generate([said(text)])
    assert len(partial_texts(responses)) <= MAX_STREAM_PIECES
    assert len(final_text(responses)) <= REPLY_LIMIT


def test_many_payments_are_capped() -> None:
    text = "pay " + " and ".join(f"{name(n)} {n}" for n in range(1, SIZE // 16))
    with deadline():
        intent = parse_intent(text)
    (calls,) = intent.steps
    assert [c.args["recipient"] for c in calls] == [name(n) for n in range(1, 11)]
    assert len(calls) == MAX_PAYMENTS_PER_MESSAGE and intent.payments_left_out

    # The answer says so once the payments ran.
    call_parts = [
        types.Part(function_call=types.FunctionCall(name=c.name, args=c.args)) for c in calls
    ]
    results = [
        types.Part(
            function_response=types.FunctionResponse(
                name="process_payment", response={"error": "This tool call is rejected."}
            )
        )
        for _ in calls
    ]
    reply = decide_reply(
        [said(text), types.Content(role="model", parts=call_parts), user(*results)]
    )
    assert reply.text is not None
    assert reply.text.endswith(
        " I left out the other payments you asked for: the demo makes at most 10 per message."
    )


def test_many_sequential_payments_are_capped() -> None:
    text = "pay " + ", then ".join(f"{name(n)} {n}" for n in range(1, SIZE // 16))
    with deadline():
        intent = parse_intent(text)
    assert [len(step) for step in intent.steps] == [1] * MAX_PAYMENTS_PER_MESSAGE
    assert intent.payments_left_out


@pytest.mark.parametrize(
    ("text", "kind"),
    [("pay bob " + "1" * 5_000, "payment_help"), ("play music track " + "9" * 5_000, "music")],
)
def test_a_number_too_long_for_int_is_not_read(text: str, kind: str) -> None:
    with deadline():
        intent = parse_intent(text)
    assert intent.kind == kind
    if kind == "music":
        assert intent.steps[0][0].args == {"track": 1}


def test_many_tool_results_are_paired_in_linear_time() -> None:
    count = 10_000  # The old pairing compared every call with every result: minutes.
    calls = [types.Part(function_call=types.FunctionCall(name=f"tool_{n}")) for n in range(count)]
    results = [
        types.Part(function_response=types.FunctionResponse(name=f"tool_{n}", response={}))
        for n in reversed(range(count))
    ]
    contents = [said("hello"), types.Content(role="model", parts=calls), user(*results)]
    with deadline():
        reply = decide_reply(contents)
    assert reply.text is not None and len(reply.text) <= REPLY_LIMIT
    assert reply.text.startswith(f"tool_{count - 1} returned {{}}.")


# --- The answer and the events streaming it are bounded ---------------------------------


def test_a_huge_message_is_echoed_by_its_beginning_in_few_pieces() -> None:
    text = huge_message()
    with deadline(HUGE_DEADLINE):
        responses = generate([said(text)])
    answer = final_text(responses)
    assert answer.startswith(
        f'You said: "{text[:MAX_QUOTE_CHARS]}…" (the first 1,000 of {len(text):,} characters).'
    )
    assert len(answer) <= REPLY_LIMIT
    pieces = partial_texts(responses)
    assert 3 <= len(pieces) <= MAX_STREAM_PIECES and "".join(pieces) == answer


@pytest.mark.parametrize("audio_output", [False, True], ids=["text", "audio"])
def test_a_big_message_streams_a_bounded_number_of_pieces_live(audio_output: bool) -> None:
    connection = OfflineLiveConnection(LiveOptions(audio_output=audio_output), pace_seconds=0)

    async def turn() -> list[LlmResponse]:
        await connection.send_content(said(huge_message(BIG)))
        async with aclosing(connection.receive()) as responses:
            read = [r async for r in responses]
        await connection.close()
        return read

    with deadline(HUGE_DEADLINE):
        responses = asyncio.run(turn())
    if audio_output:
        spoken = [r.output_transcription.text or "" for r in responses if r.output_transcription]
        *pieces, full = spoken
    else:
        *pieces, full = [
            p.text or "" for r in responses if r.content for p in r.content.parts or []
        ]
    assert 3 <= len(pieces) <= MAX_STREAM_PIECES
    assert "".join(pieces) == full and len(full) <= REPLY_LIMIT


def test_a_big_first_message_is_recalled_by_its_beginning() -> None:
    first = huge_message(BIG)
    contents = [
        said(first),
        types.Content(role="model", parts=[types.Part(text="ok")]),
        said("What did I say first?"),
    ]
    with deadline(HUGE_DEADLINE):
        reply = decide_reply(contents)
    assert reply.text == (
        f'Your first message was: "{first[:MAX_QUOTE_CHARS]}…"'
        f" (the first 1,000 of {len(first):,} characters)."
    )


def test_the_attachments_note_is_bounded() -> None:
    uri = "https://example.com/" + "x" * 1_000_000
    files = [types.Part(file_data=types.FileData(mime_type="text/plain", file_uri=uri))] * 1_000
    with deadline():
        reply = decide_reply([user(types.Part(text="hi"), *files)])
    assert reply.text is not None and len(reply.text) <= REPLY_LIMIT
    listed = f"text/plain, {uri[:100]}…"
    expected = "; ".join([listed] * MAX_LISTED_ATTACHMENTS)
    assert reply.text.startswith(f"I received 1000 files ({expected}; and 995 more).")


# --- Chunking --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "chunks"),
    [
        ("a b c d e f g h i j k", ["a b c ", "d e f ", "g h i ", "j k"]),
        ("  one two three", ["  one ", "two ", "three"]),
        ("hello there", ["hell", "o th", "ere"]),
        ("東京の天気", ["東京", "の天", "気"]),
        (
            " ".join(f"w{n}" for n in range(13)),
            ["w0 w1 w2 w3 ", "w4 w5 w6 w7 ", "w8 w9 w10 w11 ", "w12"],
        ),
    ],
)
def test_short_texts_chunk_as_before(text: str, chunks: list[str]) -> None:
    assert chunk_text(text) == chunks  # Exactly as the old code did (it passes there too).


# Up to 256 words the chunks are what they always were (4 words at most); beyond, each
# chunk takes more words instead of there being more chunks (the old code fails there).
@pytest.mark.parametrize("words", [3, 12, 256, 257, 1_000, 1_000_000])
def test_chunks_are_few_words_and_at_most_max_stream_pieces(words: int) -> None:
    text = " ".join(["word"] * words)
    with deadline():
        chunks = chunk_text(text)
    assert "".join(chunks) == text
    size = max(min(4, words // 3), -(-words // MAX_STREAM_PIECES))
    assert [len(c.split()) for c in chunks[:-1]] == [size] * (len(chunks) - 1)
    assert 3 <= len(chunks) <= MAX_STREAM_PIECES
