"""Holding back a continuation's text and earlier results (``deferral.py``)."""

from __future__ import annotations

from adk_stream_protocol.protocol.chunks import (
    BaseChunk,
    DataChunk,
    FileChunk,
    FinishStepChunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    ReasoningStartChunk,
    StartStepChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
    ToolApprovalRequestChunk,
    ToolInputAvailableChunk,
    ToolInputStartChunk,
    ToolOutputAvailableChunk,
    ToolOutputDeniedChunk,
    ToolOutputErrorChunk,
)
from adk_stream_protocol.turns.deferral import Deferral, only_what_pauses


def text(text_id: str, words: str) -> list[BaseChunk]:
    return [
        TextStartChunk(id=text_id),
        TextDeltaChunk(id=text_id, delta=words),
        TextEndChunk(id=text_id),
    ]


def new_call(call_id: str, tool: str) -> list[BaseChunk]:
    return [
        ToolInputStartChunk(tool_call_id=call_id, tool_name=tool),
        ToolInputAvailableChunk(tool_call_id=call_id, tool_name=tool, input={"amount": 5}),
    ]


def test_not_paused_sends_what_was_held_then_what_was_collected() -> None:
    held = text("t0", "Held from before.")
    collected: list[BaseChunk] = [StartStepChunk(), *text("t1", "Done."), FinishStepChunk()]
    deferral = Deferral(held)
    deferral.collect(collected[:2])
    deferral.collect(collected[2:])
    now, later = deferral.settle(paused=False)
    assert now == [*held, *collected]
    assert later == []


def test_paused_sends_only_the_new_call_and_holds_the_rest() -> None:
    held = text("t0", "Held from before.")
    earlier_result = ToolOutputAvailableChunk(tool_call_id="call-pay", output={"ok": True})
    first_step: list[BaseChunk] = [StartStepChunk(), earlier_result, FinishStepChunk()]
    words = text("t1", "Now the second payment.")
    request = ToolApprovalRequestChunk(approval_id="conf-two", tool_call_id="call-two")
    second_step: list[BaseChunk] = [
        StartStepChunk(),
        *words,
        *new_call("call-two", "process_payment"),
        request,
        FinishStepChunk(),
    ]
    deferral = Deferral(held)
    deferral.collect([*first_step, *second_step])
    now, later = deferral.settle(paused=True)
    assert now == [
        second_step[0],
        *new_call("call-two", "process_payment"),
        request,
        second_step[-1],
    ]
    # Held: what earlier responses held, then this response's held chunks in their order.
    assert later == [*held, *first_step, *words]


def test_paused_with_nothing_held_before() -> None:
    deferral = Deferral()
    chunks: list[BaseChunk] = [*text("t1", "Thinking aloud."), *new_call("c1", "get_location")]
    deferral.collect(chunks)
    now, later = deferral.settle(paused=True)
    assert now == chunks[3:]
    assert later == chunks[:3]


def test_only_what_pauses_drops_content_and_others_results() -> None:
    reasoning: list[BaseChunk] = [
        ReasoningStartChunk(id="r1"),
        ReasoningDeltaChunk(id="r1", delta="hmm"),
        ReasoningEndChunk(id="r1"),
    ]
    own_output = ToolOutputAvailableChunk(tool_call_id="c-new", output={"temp": 21})
    own_error = ToolOutputErrorChunk(tool_call_id="c-new2", error_text="boom")
    chunks: list[BaseChunk] = [
        StartStepChunk(),
        *reasoning,
        FileChunk(url="data:text/plain,hi", media_type="text/plain"),
        DataChunk(type="data-weather", data={"temp": 21}),
        ToolOutputAvailableChunk(tool_call_id="c-old", output={"ok": True}),
        ToolOutputErrorChunk(tool_call_id="c-old2", error_text="failed"),
        ToolOutputDeniedChunk(tool_call_id="c-old3"),
        *new_call("c-new", "get_weather"),
        own_output,
        ToolInputAvailableChunk(tool_call_id="c-new2", tool_name="get_weather", input={}),
        own_error,
        FinishStepChunk(),
    ]
    assert only_what_pauses(chunks) == [
        chunks[0],
        *new_call("c-new", "get_weather"),
        own_output,
        chunks[-3],
        own_error,
        chunks[-1],
    ]


def test_only_what_pauses_drops_steps_left_empty() -> None:
    chunks: list[BaseChunk] = [
        StartStepChunk(),
        *text("t1", "Only words."),
        FinishStepChunk(),
        StartStepChunk(),
        ToolOutputDeniedChunk(tool_call_id="c-old"),
        FinishStepChunk(),
        StartStepChunk(),
        *new_call("c-new", "get_location"),
        FinishStepChunk(),
    ]
    assert only_what_pauses(chunks) == [StartStepChunk(), *chunks[9:11], FinishStepChunk()]
    assert only_what_pauses(chunks[:8]) == []
