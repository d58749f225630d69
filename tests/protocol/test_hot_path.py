"""The converter's hot path (docs/adr/0050): the chunks every streamed word makes are built
without validation and serialised with orjson. Every chunk it emits, over benchmark 1's
stream and over the shapes of test_converter.py (whose ``run`` checks each one the same way),
must be what the catalogue validates and what pydantic's general serialiser writes."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from google.adk.events import Event
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_stream_protocol.protocol.chunks import (
    AiSdkVersion,
    BaseChunk,
    ReasoningDeltaChunk,
    TextDeltaChunk,
    TextEndChunk,
)
from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.turns.delta_coalescing import DeltaCoalescer
from bench.converter import adk_events
from tests.protocol.test_converter import model_event, text
from tests.support.rig import assert_emitted_chunk, assert_strict_chunk


def converted(events: Sequence[Event], ai_sdk: AiSdkVersion = 6) -> list[BaseChunk]:
    converter = StreamProtocolConverter(message_id="msg1", id_prefix="t", ai_sdk=ai_sdk)
    chunks = converter.start()
    for event in events:
        chunks += converter.convert(event)
    return chunks + converter.finish()


@pytest.mark.parametrize("ai_sdk", [6, 7])
def test_every_chunk_of_the_benchmark_stream_is_what_validation_gives(ai_sdk: AiSdkVersion) -> None:
    chunks = converted(adk_events(3), ai_sdk)
    assert {c.to_wire_dict()["type"] for c in chunks} >= {
        "start-step", "finish-step", "text-start", "text-delta", "text-end",
        "reasoning-start", "reasoning-delta", "reasoning-end", "tool-input-available",
    }  # fmt: skip
    for chunk in chunks:
        assert_emitted_chunk(chunk)
        assert_strict_chunk(chunk.to_wire_dict(), ai_sdk)


def test_merged_deltas_stay_valid() -> None:
    """Delta coalescing copies a built delta with a longer text (``model_copy``)."""
    coalescer = DeltaCoalescer(window_seconds=1.0)
    chunks = converted(adk_events(2))
    out = coalescer.take(chunks) + coalescer.release()
    merged = [c for c in out if isinstance(c, TextDeltaChunk | ReasoningDeltaChunk)]
    assert len(merged) < len([c for c in chunks if isinstance(c, TextDeltaChunk)])
    for chunk in out:
        assert_emitted_chunk(chunk)


def grounded(answer: str) -> Event:
    """A final event whose grounding cites a stretch of the streamed answer."""
    grounding = types.GroundingMetadata(
        grounding_chunks=[
            types.GroundingChunk(web=types.GroundingChunkWeb(uri="https://a.example", title="A"))
        ],
        grounding_supports=[
            types.GroundingSupport(
                segment=types.Segment(text=answer.split()[0]), grounding_chunk_indices=[0]
            )
        ],
    )
    return model_event(text(answer), grounding_metadata=grounding)


def test_a_text_end_with_citations_takes_the_general_path() -> None:
    answer = "Tokyo is cloudy."
    chunks = converted([model_event(text(answer), partial=True), grounded(answer)], ai_sdk=7)
    ends = [c for c in chunks if isinstance(c, TextEndChunk)]
    assert ends and ends[0].citations
    assert ends[0].citations[0].cited_text == "Tokyo"
    for chunk in chunks:
        assert_emitted_chunk(chunk)


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.tuples(st.text(), st.booleans()), min_size=1, max_size=6))
def test_any_text_serialises_as_pydantic_would(pieces: list[tuple[str, bool]]) -> None:
    """Escapes, control characters, U+2028, astral characters: orjson writes the same bytes."""
    events = [model_event(text(piece, thought), partial=True) for piece, thought in pieces]
    events.append(model_event(*(text(piece, thought) for piece, thought in pieces)))
    for chunk in converted(events):
        assert_emitted_chunk(chunk)


def test_a_lone_surrogate_fails_on_both_paths() -> None:
    """Neither serialiser writes a lone surrogate (it is not UTF-8); the fast one fails too,
    rather than sending something the general one would not."""
    chunks = converted([model_event(text("bad \ud800"), partial=True)])
    delta = next(c for c in chunks if isinstance(c, TextDeltaChunk))
    with pytest.raises(ValueError):
        BaseChunk.to_wire_json(delta)
    with pytest.raises(TypeError):
        delta.to_wire_json()
