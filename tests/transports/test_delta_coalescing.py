"""Delta coalescing (``ADK_STREAM_DELTA_COALESCING_MS``, docs/adr/0048): the merge itself, and
`POST /stream` and `/live?chatId=` answers with it on and off, on the real app and model."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from adk_stream_protocol.coordination.local import _LocalResponseLog
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.chunks import (
    ReasoningDeltaChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
    ToolInputAvailableChunk,
)
from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.transports.stream import QueueSink
from adk_stream_protocol.turns.delta_coalescing import DeltaCoalescer
from adk_stream_protocol.turns.response import Delivery, Response, UnloggedResponse
from bench.agent import long_answer, long_prompt
from tests.support.rig import (
    InProcessApp,
    LiveSocket,
    StreamResult,
    assert_valid_stream,
    chat_body,
    in_process_app,
    post_stream,
    user_message,
)

BENCH_AGENT = "bench.agent:root_agent"


def text(block: str, delta: str) -> TextDeltaChunk:
    return TextDeltaChunk(id=block, delta=delta)


def test_a_blocks_first_delta_goes_out_and_the_later_ones_join_until_released() -> None:
    merge = DeltaCoalescer(0.04)
    assert merge.take([TextStartChunk(id="t1"), text("t1", "a")]) == [
        TextStartChunk(id="t1"),
        text("t1", "a"),
    ]
    assert merge.take([text("t1", "b")]) == []
    assert merge.take([text("t1", "c"), text("t1", "d")]) == []
    assert merge.holding
    assert merge.release() == [text("t1", "bcd")]
    assert merge.release() == []


def test_any_other_chunk_sends_what_is_held_first_so_nothing_is_reordered() -> None:
    merge = DeltaCoalescer(0.04)
    call = ToolInputAvailableChunk(tool_call_id="c1", tool_name="t", input={})
    merge.take([text("t1", "a")])
    merge.take([text("t1", "b")])
    assert merge.take([call, text("t1", "c")]) == [text("t1", "b"), call]
    assert merge.take([TextEndChunk(id="t1")]) == [text("t1", "c"), TextEndChunk(id="t1")]


def test_deltas_of_other_blocks_and_kinds_never_merge() -> None:
    merge = DeltaCoalescer(0.04)
    thought = ReasoningDeltaChunk(id="r1", delta="x")
    merge.take([text("t1", "a"), thought])  # the first of each block: both out
    assert merge.take([text("t1", "b"), ReasoningDeltaChunk(id="r1", delta="y")]) == [
        text("t1", "b")
    ]
    assert merge.take([text("t2", "z")]) == [
        ReasoningDeltaChunk(id="r1", delta="y"),
        text("t2", "z"),
    ]


# -- the window's end -----------------------------------------------------------------------


class SocketLikeSink:
    """A sink that waits on every send, as a socket does: no ``send_now``."""

    def __init__(self) -> None:
        self.events: list[bytes] = []
        self.arrived = asyncio.Event()  # set by each send

    async def send(self, events: Sequence[bytes]) -> None:
        await asyncio.sleep(0)  # a socket's send gives the loop a turn: this one only that
        self.take(events)

    def take(self, events: Sequence[bytes]) -> None:
        self.events.extend(events)
        self.arrived.set()

    async def grown_to(self, count: int) -> None:
        """Until the sink holds ``count`` events."""
        while len(self.events) < count:
            self.arrived.clear()
            await self.arrived.wait()

    async def close(self) -> None:
        return None


class ImmediateSink(SocketLikeSink):
    def send_now(self, events: Sequence[bytes]) -> None:
        self.take(events)


async def held_then_released(sink: SocketLikeSink) -> int:
    """Three deltas of one block, the last two held for a 20 ms window; the tasks started
    for the release."""
    loop = asyncio.get_running_loop()
    releases = 0

    def counting(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Future[Any]:
        nonlocal releases
        releases += getattr(coro, "__qualname__", "").startswith("Response._release")
        return asyncio.Task(coro, loop=loop)

    loop.set_task_factory(counting)
    try:
        response = Response(
            StreamProtocolConverter(message_id="m1"),
            Delivery(sink, UnloggedResponse(), coalescing_seconds=0.02),
        )
        await response.emit([TextStartChunk(id="t1"), text("t1", "a")])
        await response.emit([text("t1", "b")])
        await response.emit([text("t1", "c")])
        assert len(sink.events) == 2, "the later deltas are held"
        # The window is 20 ms; its release is a timer's, not ours.
        await asyncio.wait_for(sink.grown_to(3), 1)
        assert sink.events[2] == b'data: {"type":"text-delta","id":"t1","delta":"bc"}\n\n'
        await response.finish()
        return releases
    finally:
        loop.set_task_factory(None)


@pytest.mark.asyncio
async def test_a_window_ends_with_a_delivery_from_the_timer_when_log_and_sink_take_it_now() -> None:
    assert await held_then_released(ImmediateSink()) == 0


@pytest.mark.asyncio
async def test_a_window_ends_with_a_task_that_waits_its_turn_when_the_sink_waits() -> None:
    assert await held_then_released(SocketLikeSink()) == 1


def test_the_stream_sink_and_the_local_logs_take_events_at_once() -> None:
    """What puts `POST /stream`'s windows on the timer's path (on Redis, the log waits)."""
    assert callable(QueueSink().send_now)
    assert callable(UnloggedResponse().append_now)
    assert callable(getattr(_LocalResponseLog, "append_now", None))


# -- through the app ---------------------------------------------------------------------------

WORDS, PER = 120, 2  # 60 partials, 2 words each


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, InProcessApp]]:
    off = tmp_path_factory.mktemp("off")
    on = tmp_path_factory.mktemp("on")
    with (
        in_process_app(Path(off), agent=BENCH_AGENT, delta_coalescing_ms=0) as plain,
        in_process_app(Path(on), agent=BENCH_AGENT) as merged,  # the default window
    ):
        yield {"off": plain, "on": merged}


def ask(app: InProcessApp, prompt: str, chat_id: str | None = None) -> StreamResult:
    chat_id = chat_id or f"merge-{uuid.uuid4().hex[:12]}"
    result = post_stream(app, chat_body(chat_id, user_message(prompt, "u1")))
    assert_valid_stream(result)
    return result


def test_the_default_window_is_the_one_measured() -> None:
    """ADR 0048: 100 ms, the smallest window that met the page's goal in benchmark 12."""
    assert Settings.model_fields["delta_coalescing_ms"].default == 100


def test_on_stream_paced_deltas_merge_into_fewer_chunks_with_the_same_text(
    apps: dict[str, InProcessApp],
) -> None:
    # 60 partials 5 ms apart: about 300 ms of answer, which the default 100 ms window sends
    # in 4 or so deltas.
    prompt = long_prompt(WORDS, PER, pace=0.005)
    plain, merged = ask(apps["off"], prompt), ask(apps["on"], prompt)
    assert plain.text() == merged.text() == long_answer(WORDS)
    assert len(plain.of_type("text-delta")) == WORDS // PER
    deltas = merged.of_type("text-delta")
    first = " ".join(long_answer(WORDS).split(" ")[:PER]) + " "
    assert deltas[0]["delta"] == first, "a block's first delta is never held"
    assert 2 < len(deltas) <= WORDS // PER // 3, [d["delta"] for d in deltas]
    # Only deltas changed: every other chunk, in the same order.
    assert [t for t in merged.types() if t != "text-delta"] == [
        t for t in plain.types() if t != "text-delta"
    ]


def test_on_stream_the_chats_record_holds_the_merged_answer(apps: dict[str, InProcessApp]) -> None:
    chat_id = f"merge-{uuid.uuid4().hex[:12]}"
    ask(apps["on"], long_prompt(WORDS, PER, pace=0.002), chat_id)
    stored = apps["on"].http.get(f"/chats/{chat_id}").json()["messages"]
    texts = [p["text"] for p in stored[-1]["parts"] if p["type"] == "text"]
    assert texts == [long_answer(WORDS)]


def test_on_live_the_answer_is_the_same_in_fewer_deltas(apps: dict[str, InProcessApp]) -> None:
    answers: dict[str, StreamResult] = {}
    for name, app in apps.items():
        with LiveSocket(app, f"merge-live-{uuid.uuid4().hex[:12]}") as socket:
            answers[name] = socket.message(user_message("Hello there", "u1"))
        assert_valid_stream(answers[name])
    plain, merged = answers["off"], answers["on"]
    assert plain.text() == merged.text()
    assert 'You said: "Hello there"' in merged.text()
    assert len(merged.of_type("text-delta")) < len(plain.of_type("text-delta"))
    first = [merged.of_type("text-delta")[0]["delta"], plain.of_type("text-delta")[0]["delta"]]
    assert first[0] == first[1], "a block's first delta is never held"
