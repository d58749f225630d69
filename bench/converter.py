"""Benchmark 1: ADK events to SSE bytes, in process.

One long response of real ADK ``Event``s (per model call: thought partials, text partials, the
aggregate with a function call, then the tool's result; a final answer at the end) goes through
``StreamProtocolConverter`` and ``sse.encode_event``. In the same run:

- the floor: the same chunk dicts only serialised to SSE lines, with stdlib ``json`` and ``orjson``;
- our own floor: only reading of the ADK events what the converter reads, writing nothing;
- the bare floor: that reading, then orjson on the ready chunk dicts: any converter that reads
  what ours reads and writes with orjson pays at least this;
- pydantic-ai's Vercel AI encoder (``VercelAIEventStream``, AI SDK v6) fed the same content as
  pydantic-ai events (part start / delta / end, tool call and tool result events).

Everything ends as the bytes written to the socket.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import orjson
from google.adk.events import Event
from google.genai import types
from pydantic_ai import messages as pa
from pydantic_ai.ui.vercel_ai import VercelAIEventStream

from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.protocol.sse import DONE, encode_event
from bench.core import Figure, Size

AUTHOR = "bench_agent"
THOUGHT = ["Let me think. ", "The user wants the weather, ", "so I call the tool."]
TEXT = [
    "Looking up the weather ",
    "for Tokyo and a few other places ",
    "so that the answer is complete, ",
    "then I will summarise it ",
    "in a short and friendly sentence.",
]
WEATHER = {"location": "Tokyo", "temperature": 18, "condition": "Cloudy", "humidity": 65}


def adk_events(rounds: int) -> list[Event]:
    """``rounds`` model calls with thoughts, text and a tool call, each followed by its result,
    then a final streamed answer: as ``run_async`` yields them under ``StreamingMode.SSE``."""
    events: list[Event] = []

    def partial(text: str, thought: bool) -> Event:
        part = types.Part(text=text, thought=thought or None)
        content = types.Content(role="model", parts=[part])
        return Event(author=AUTHOR, invocation_id="e-bench", partial=True, content=content)

    def aggregate(parts: list[types.Part]) -> Event:
        return Event(
            author=AUTHOR,
            invocation_id="e-bench",
            content=types.Content(role="model", parts=parts),
            finish_reason=types.FinishReason.STOP,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=100, candidates_token_count=40, total_token_count=140
            ),
            model_version="bench-offline",
        )

    for r in range(rounds):
        events += [partial(t, True) for t in THOUGHT] + [partial(t, False) for t in TEXT]
        call = types.FunctionCall(id=f"adk-{r}", name="get_weather", args={"location": "Tokyo"})
        events.append(
            aggregate(
                [
                    types.Part(text="".join(THOUGHT), thought=True),
                    types.Part(text="".join(TEXT)),
                    types.Part(function_call=call),
                ]
            )
        )
        response = types.FunctionResponse(id=f"adk-{r}", name="get_weather", response=WEATHER)
        content = types.Content(role="user", parts=[types.Part(function_response=response)])
        events.append(Event(author=AUTHOR, invocation_id="e-bench", content=content))
    events += [partial(t, False) for t in TEXT]
    events.append(aggregate([types.Part(text="".join(TEXT))]))
    return events


def pydantic_ai_events(rounds: int) -> list[pa.AgentStreamEvent]:
    """The same content as pydantic-ai's agent stream events."""
    events: list[pa.AgentStreamEvent] = []

    def streamed_part(index: int, pieces: list[str], thought: bool) -> None:
        if thought:
            events.append(pa.PartStartEvent(index=index, part=pa.ThinkingPart(content=pieces[0])))
            events.extend(
                pa.PartDeltaEvent(index=index, delta=pa.ThinkingPartDelta(content_delta=p))
                for p in pieces[1:]
            )
            events.append(pa.PartEndEvent(index=index, part=pa.ThinkingPart("".join(pieces))))
        else:
            events.append(pa.PartStartEvent(index=index, part=pa.TextPart(content=pieces[0])))
            events.extend(
                pa.PartDeltaEvent(index=index, delta=pa.TextPartDelta(content_delta=p))
                for p in pieces[1:]
            )
            events.append(pa.PartEndEvent(index=index, part=pa.TextPart("".join(pieces))))

    for r in range(rounds):
        streamed_part(0, THOUGHT, True)
        streamed_part(1, TEXT, False)
        call = pa.ToolCallPart(
            tool_name="get_weather", args={"location": "Tokyo"}, tool_call_id=f"c{r}"
        )
        events += [pa.PartStartEvent(index=2, part=call), pa.PartEndEvent(index=2, part=call)]
        events.append(pa.FunctionToolCallEvent(part=call, args_valid=True))
        result = pa.ToolReturnPart(tool_name="get_weather", content=WEATHER, tool_call_id=f"c{r}")
        events.append(pa.FunctionToolResultEvent(part=result))
    streamed_part(0, TEXT, False)
    return events


# -- the encoders under test ------------------------------------------------------------------


def ours(events: Sequence[Event]) -> list[bytes]:
    converter = StreamProtocolConverter(message_id="msg_bench")
    out = [encode_event(c) for c in converter.start()]
    for event in events:
        out += [encode_event(c) for c in converter.convert(event)]
    out += [encode_event(c) for c in converter.finish()]
    out.append(DONE.encode())
    return out


def chunk_dicts(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The wire dicts of our chunks for these events (the floor serialises exactly these)."""
    converter = StreamProtocolConverter(message_id="msg_bench")
    chunks = converter.start()
    for event in events:
        chunks += converter.convert(event)
    chunks += converter.finish()
    return [c.to_wire_dict() for c in chunks]


def read_only(events: Sequence[Event]) -> list[bytes]:
    """Our own floor: read of every event what the converter reads (its flags, its parts' text,
    thoughts, calls and results, the final events' usage), and write nothing. What ours costs
    beyond this is making and serialising the chunks."""
    seen = 0
    for event in events:
        flags = (
            event.partial,
            event.model_version,
            event.grounding_metadata,
            event.input_transcription,
            event.output_transcription,
            event.error_code,
        )
        content = event.content
        parts = content.parts if content is not None else None
        if parts and content is not None:
            role = content.role
            for part in parts:
                if part.inline_data is not None:
                    continue
                if part.text:
                    seen += len(part.text) + bool(part.thought)
                elif (call := part.function_call) is not None:
                    seen += len(call.id or "") + len(call.name or "") + len(call.args or {})
                elif (result := part.function_response) is not None:
                    seen += len(result.id or "") + len(result.name or "")
                    seen += len(result.response or {})
            if not event.partial and role == "model":
                seen += len(event.long_running_tool_ids or ())
        if not flags[0]:
            usage = event.usage_metadata
            if usage is not None:
                seen += (usage.prompt_token_count or 0) + (usage.candidates_token_count or 0)
                seen += (usage.total_token_count or 0) + (usage.thoughts_token_count or 0)
            seen += bool(event.finish_reason) + bool(event.actions)
    return [] if seen else [b""]


def floor_json(dicts: Sequence[dict[str, Any]]) -> list[bytes]:
    out = [
        f"data: {json.dumps(d, separators=(',', ':'), ensure_ascii=False)}\n\n".encode()
        for d in dicts
    ]
    out.append(DONE.encode())
    return out


def floor_orjson(dicts: Sequence[dict[str, Any]]) -> list[bytes]:
    out = [b"data: " + orjson.dumps(d) + b"\n\n" for d in dicts]
    out.append(DONE.encode())
    return out


def read_then_orjson(events: Sequence[Event], dicts: Sequence[dict[str, Any]]) -> list[bytes]:
    """The bare floor: our own floor's reading, then the orjson floor's writing."""
    read_only(events)
    return floor_orjson(dicts)


async def pydantic_ai(events: Sequence[pa.AgentStreamEvent]) -> list[bytes]:
    async def source() -> AsyncIterator[pa.AgentStreamEvent]:
        for event in events:
            yield event

    stream: VercelAIEventStream[Any, Any] = VercelAIEventStream(sdk_version=6)
    return [line.encode() async for line in stream.encode_stream(stream.transform_stream(source()))]


# -- the benchmark ----------------------------------------------------------------------------


def _best_time(repeats: int, work: Callable[[], list[bytes]]) -> tuple[float, list[bytes]]:
    best, out = float("inf"), []
    for _ in range(repeats):
        start = time.perf_counter()
        out = work()
        best = min(best, time.perf_counter() - start)
    return best, out


def run(size: Size) -> list[Figure]:
    events = adk_events(size.converter_rounds)
    dicts = chunk_dicts(events)
    pa_events = pydantic_ai_events(size.converter_rounds)
    loop = asyncio.new_event_loop()
    contenders: dict[str, Callable[[], list[bytes]]] = {
        "ours": lambda: ours(events),
        "json": lambda: floor_json(dicts),
        "orjson": lambda: floor_orjson(dicts),
        "pydantic-ai": lambda: loop.run_until_complete(pydantic_ai(pa_events)),
        "read": lambda: read_only(events),
        "bare": lambda: read_then_orjson(events, dicts),
    }
    note = f"{len(events):,} ADK events, {len(dicts) + 1:,} chunks per stream"
    vs_pa = Figure(
        "1 converter",
        "time per stream",
        "ms",
        "lower",
        "pydantic-ai VercelAIEventStream",
        1 / 3,  # issue 27: at least 3x its speed
        note,
    )
    vs_json = Figure("1 converter", "time per stream", "ms", "lower", "floor: stdlib json", 3.0)
    vs_orjson = Figure(
        "1 converter",
        "time per stream",
        "ms",
        "lower",
        "floor: orjson",
        3.0,
    )
    vs_read = Figure(
        "1 converter",
        "time per stream",
        "ms",
        "lower",
        "floor: only reading the ADK events",
    )
    vs_bare = Figure(
        "1 converter",
        "time per stream",
        "ms",
        "lower",
        "bare floor: reading the events, then orjson on ready chunks",
    )
    bare_over_orjson: list[float] = []
    chunks = Figure("1 converter", "chunks/s", "k/s", "higher", "pydantic-ai VercelAIEventStream")
    rate = Figure("1 converter", "bytes/s", "MB/s", "higher", "pydantic-ai VercelAIEventStream")
    try:
        for r in range(size.runs):
            names = list(contenders)
            names = names[r % len(names) :] + names[: r % len(names)]  # rotate the order
            times: dict[str, float] = {}
            outputs: dict[str, list[bytes]] = {}
            for name in names:
                times[name], outputs[name] = _best_time(size.converter_repeats, contenders[name])
            ms = {name: t * 1000 for name, t in times.items()}
            vs_pa.add(ms["ours"], ms["pydantic-ai"])
            vs_json.add(ms["ours"], ms["json"])
            vs_orjson.add(ms["ours"], ms["orjson"])
            vs_read.add(ms["ours"], ms["read"])
            vs_bare.add(ms["ours"], ms["bare"])
            bare_over_orjson.append(ms["bare"] / ms["orjson"])
            ours_out, pa_out = outputs["ours"], outputs["pydantic-ai"]
            chunks.add(
                len(ours_out) / times["ours"] / 1e3, len(pa_out) / times["pydantic-ai"] / 1e3
            )
            rate.add(
                sum(map(len, ours_out)) / times["ours"] / 1e6,
                sum(map(len, pa_out)) / times["pydantic-ai"] / 1e6,
            )
    finally:
        loop.close()
    bare = statistics.median(bare_over_orjson)
    vs_orjson.why = (
        f"out of reach: reading the events and writing their chunks with orjson, nothing "
        f"between, is already {bare:.2f}x this floor (the bare floor, below)"
    )
    return [vs_pa, vs_json, vs_orjson, vs_read, vs_bare, chunks, rate]
