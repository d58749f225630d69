"""StreamProtocolConverter fed with real ADK ``Event`` objects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.adk.events import Event, EventActions
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from adk_stream_protocol.protocol.chunks import BaseChunk
from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.protocol.event_values import map_finish_reason
from tests.support.rig import assert_emitted_chunk, assert_strict_chunk

AGENT = "demo_agent"


def model_event(
    *parts: types.Part, partial: bool | None = False, event_id: str = "E1", **fields: Any
) -> Event:
    return Event(
        author=AGENT,
        id=event_id,
        invocation_id="e-1",
        partial=partial,
        content=types.Content(role="model", parts=list(parts)),
        **fields,
    )


def tool_event(*responses: tuple[str, str, Any], **fields: Any) -> Event:
    parts = [
        types.Part(function_response=types.FunctionResponse(id=cid, name=name, response=resp))
        for cid, name, resp in responses
    ]
    return Event(
        author=AGENT, invocation_id="e-1", content=types.Content(role="user", parts=parts), **fields
    )


def text(value: str, thought: bool = False) -> types.Part:
    return types.Part(text=value, thought=thought or None)


def call(call_id: str, name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))


def run(events: list[Event], **options: Any) -> list[dict[str, Any]]:
    converter = StreamProtocolConverter(message_id="msg1", id_prefix="t", **options)
    chunks: list[BaseChunk] = converter.start()
    for event in events:
        chunks += converter.convert(event)
    chunks += converter.finish()
    wire = wire_of(chunks)
    for chunk in wire:
        assert_strict_chunk(chunk)
    return wire


def wire_of(chunks: Sequence[BaseChunk]) -> list[dict[str, Any]]:
    """The chunks' wire dicts, each proven to be what a validated chunk would give."""
    for chunk in chunks:
        assert_emitted_chunk(chunk)
    return [c.to_wire_dict() for c in chunks]


def types_of(chunks: list[dict[str, Any]]) -> list[str]:
    return [c["type"] for c in chunks]


def confirmation_call(confirmation_id: str, original_id: str, name: str, **args: Any) -> types.Part:
    return call(
        confirmation_id,
        "adk_request_confirmation",
        originalFunctionCall={"id": original_id, "name": name, "args": args},
        toolConfirmation={"hint": DECLARED_HINT.format(name=name), "confirmed": False},
    )


# How ADK words the hint of a declared confirmation (`require_confirmation`): not shown to the
# user (docs/adr/0041). If ADK rewords it, the approval requests below grow a data part.
DECLARED_HINT = (
    "Please approve or reject the tool call {name}() by responding with a FunctionResponse "
    "with an expected ToolConfirmation payload."
)


def test_streamed_text_is_not_repeated_by_the_aggregate() -> None:
    chunks = run(
        [
            model_event(text("Hello "), partial=True),
            model_event(text("there"), partial=True),
            model_event(text("Hello there"), finish_reason=types.FinishReason.STOP),
        ]
    )
    assert types_of(chunks) == [
        "start", "start-step", "text-start", "text-delta", "text-delta", "text-end",
        "finish-step", "finish",
    ]  # fmt: skip
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "Hello there"
    assert chunks[0] == {"type": "start", "messageId": "msg1"}
    assert chunks[-1]["finishReason"] == "stop"


def test_unstreamed_text_is_emitted_whole() -> None:
    chunks = run([model_event(text("All at once"))])
    deltas = [c["delta"] for c in chunks if c["type"] == "text-delta"]
    assert deltas == ["All at once"]


def test_live_partials_with_fresh_ids_are_not_duplicated() -> None:
    chunks = run(
        [
            model_event(text("Hi "), partial=True, event_id="L1"),
            model_event(text("you"), partial=True, event_id="L2"),
            model_event(text("Hi you"), event_id="L3"),
        ]
    )
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "Hi you"


def branch_event(branch: str, *parts: types.Part, partial: bool = True) -> Event:
    """An event of one branch of a ``ParallelAgent`` (ADK names the branch by its path)."""
    return Event(
        author=branch,
        invocation_id="e-1",
        partial=partial,
        branch=f"research.{branch}",
        content=types.Content(role="model", parts=list(parts)),
    )


def test_parallel_branches_that_stream_at_once_each_get_their_own_blocks() -> None:
    """Interleaved deltas of two branches go to two text parts; each branch's aggregate
    repeats only its own words; a branch's thought and text are its own blocks too."""
    chunks = run(
        [
            branch_event("flights", text("Checking fares", thought=True)),
            branch_event("hotels", text("Three ")),
            branch_event("flights", text("Two ")),
            branch_event("hotels", text("hotels.")),
            branch_event("flights", text("flights.")),
            branch_event("hotels", text("Three hotels."), partial=False),
            branch_event("flights", text("Two flights."), partial=False),
            model_event(text("Both found.")),
        ]
    )
    texts: dict[str, str] = {}
    for chunk in chunks:
        if chunk["type"] == "text-delta":
            texts[chunk["id"]] = texts.get(chunk["id"], "") + chunk["delta"]
    assert list(texts.values()) == ["Three hotels.", "Two flights.", "Both found."]
    reasoning = [c for c in chunks if c["type"].startswith("reasoning-")]
    assert [c["type"] for c in reasoning] == ["reasoning-start", "reasoning-delta", "reasoning-end"]
    # Each block ends once, after its last delta and before the next step or the end.
    for block_id in texts:
        kinds = [c["type"] for c in chunks if c.get("id") == block_id]
        assert kinds[0] == "text-start" and kinds[-1] == "text-end" and kinds.count("text-end") == 1
    assert types_of(chunks)[-2:] == ["finish-step", "finish"]


def test_a_step_that_ends_while_branches_stream_ends_every_branchs_blocks() -> None:
    """ai 6 forgets open blocks at a step's end: tool results of one branch close the other's
    text before the next step opens, and its next words open a new block."""
    chunks = run(
        [
            branch_event("hotels", text("Three ")),
            branch_event("flights", call("c1", "find_flights"), partial=False),
            tool_event(("c1", "find_flights", {"found": 2}), branch="research.flights"),
            branch_event("flights", text("Two flights.")),
            branch_event("hotels", text("hotels.")),
        ]
    )
    open_blocks: set[str] = set()
    for chunk in chunks:
        if chunk["type"] == "text-start":
            open_blocks.add(chunk["id"])
        elif chunk["type"] == "text-end":
            open_blocks.discard(chunk["id"])
        elif chunk["type"] in ("finish-step", "start-step"):
            assert open_blocks == set(), chunk
        elif chunk["type"] == "text-delta":
            assert chunk["id"] in open_blocks


def test_reasoning_then_text_get_separate_blocks() -> None:
    chunks = run(
        [
            model_event(text("Let me think.", thought=True), partial=True),
            model_event(text("Answer."), partial=True),
            model_event(text("Let me think.", thought=True), text("Answer.")),
        ]
    )
    assert types_of(chunks) == [
        "start", "start-step", "reasoning-start", "reasoning-delta", "reasoning-end",
        "text-start", "text-delta", "text-end", "finish-step", "finish",
    ]  # fmt: skip
    reasoning_id = chunks[2]["id"]
    text_id = chunks[5]["id"]
    assert reasoning_id != text_id


def test_every_function_call_of_a_response_becomes_a_tool_part() -> None:
    chunks = run(
        [
            model_event(
                call("c1", "process_payment", amount=10, recipient="Alice"),
                call("c2", "process_payment", amount=20, recipient="Bob"),
            ),
            tool_event(
                ("c1", "process_payment", {"success": True}),
                ("c2", "process_payment", {"success": True}),
            ),
            model_event(text("Both paid."), event_id="E2"),
        ]
    )
    available = [c for c in chunks if c["type"] == "tool-input-available"]
    assert [(c["toolCallId"], c["input"]["recipient"]) for c in available] == [
        ("c1", "Alice"),
        ("c2", "Bob"),
    ]
    assert len([c for c in chunks if c["type"] == "tool-input-start"]) == 2
    outputs = [c["toolCallId"] for c in chunks if c["type"] == "tool-output-available"]
    assert outputs == ["c1", "c2"]
    # Tool results stay in the step of their calls; the follow-up text opens a new step.
    assert types_of(chunks)[:9] == [
        "start", "start-step", "tool-input-start", "tool-input-available", "tool-input-start",
        "tool-input-available", "tool-output-available", "tool-output-available", "finish-step",
    ]  # fmt: skip
    assert types_of(chunks)[9] == "start-step"


def test_function_calls_in_partial_events_are_ignored() -> None:
    chunks = run(
        [
            model_event(call("adk-throwaway", "get_weather", location="Tokyo"), partial=True),
            model_event(call("adk-final", "get_weather", location="Tokyo")),
        ]
    )
    assert [c["toolCallId"] for c in chunks if c["type"] == "tool-input-available"] == ["adk-final"]


def test_error_shaped_result_becomes_tool_output_error_and_denial_output_denied() -> None:
    chunks = run(
        [
            model_event(
                call("c1", "process_payment", amount=5000), call("c2", "process_payment", amount=1)
            ),
            tool_event(
                ("c1", "process_payment", {"success": False, "error": "insufficient balance"}),
                ("c2", "process_payment", {"error": "This tool call is rejected."}),
            ),
        ],
        denied_tool_call_ids={"c2"},
    )
    assert {
        "type": "tool-output-error",
        "toolCallId": "c1",
        "errorText": "insufficient balance",
    } in chunks
    assert {"type": "tool-output-denied", "toolCallId": "c2"} in chunks


def test_confirmation_becomes_an_approval_request_in_the_same_step() -> None:
    placeholder = {"error": "This tool call requires confirmation, please approve or reject."}
    chunks = run(
        [
            model_event(call("c1", "process_payment", amount=50, recipient="Hanako")),
            model_event(
                confirmation_call("conf1", "c1", "process_payment", amount=50, recipient="Hanako"),
                event_id="E2",
                long_running_tool_ids={"conf1"},
            ),
            tool_event(
                ("c1", "process_payment", placeholder),
                actions=EventActions(
                    requested_tool_confirmations={"c1": ToolConfirmation(hint="approve?")},
                    skip_summarization=True,
                ),
            ),
        ]
    )
    assert types_of(chunks) == [
        "start", "start-step", "tool-input-start", "tool-input-available",
        "tool-approval-request", "finish-step", "finish",
    ]  # fmt: skip
    assert chunks[4] == {"type": "tool-approval-request", "approvalId": "conf1", "toolCallId": "c1"}
    assert chunks[-1]["finishReason"] == "tool-calls"
    assert all(c.get("toolName") != "adk_request_confirmation" for c in chunks)


def test_confirmation_after_a_settled_sibling_stays_in_the_step() -> None:
    # ADK order when one call of the response already settled: results first, then the request.
    placeholder = {"error": "This tool call requires confirmation, please approve or reject."}
    chunks = run(
        [
            model_event(
                call("c1", "process_payment", amount=5), call("c2", "get_weather", location="Tokyo")
            ),
            tool_event(
                ("c1", "process_payment", placeholder),
                ("c2", "get_weather", {"temperature": 18}),
                actions=EventActions(
                    requested_tool_confirmations={"c1": ToolConfirmation(hint="?")}
                ),
            ),
            model_event(
                confirmation_call("conf1", "c1", "process_payment", amount=5), event_id="E2"
            ),
        ]
    )
    kinds = types_of(chunks)
    assert kinds.count("start-step") == 1, kinds
    assert kinds.index("tool-approval-request") < kinds.index("finish-step")
    assert [c["toolCallId"] for c in chunks if c["type"] == "tool-output-available"] == ["c2"]


def test_browser_tool_pauses_the_response_with_tool_calls() -> None:
    chunks = run([model_event(call("c1", "change_bgm", track=2), long_running_tool_ids={"c1"})])
    assert types_of(chunks) == [
        "start", "start-step", "tool-input-start", "tool-input-available", "finish-step", "finish",
    ]  # fmt: skip
    assert chunks[-1]["finishReason"] == "tool-calls"


def test_continuation_puts_outputs_before_the_new_step() -> None:
    chunks = run(
        [
            tool_event(("c1", "process_payment", {"success": True})),
            model_event(text("Paid."), event_id="E9"),
        ]
    )
    assert types_of(chunks) == [
        "start", "tool-output-available", "start-step", "text-start", "text-delta", "text-end",
        "finish-step", "finish",
    ]  # fmt: skip


def test_a_response_ending_on_tool_results_gets_an_empty_last_step() -> None:
    # Otherwise lastAssistantMessageIsCompleteWithToolCalls sees a complete step and resubmits.
    chunks = run(
        [
            model_event(call("c1", "get_weather", location="Tokyo")),
            tool_event(("c1", "get_weather", {"temperature": 18})),
        ]
    )
    assert types_of(chunks)[-4:] == ["finish-step", "start-step", "finish-step", "finish"]


def test_error_event_gives_one_redacted_error_chunk() -> None:
    converter = StreamProtocolConverter(message_id="m", id_prefix="t")
    chunks = converter.start()
    chunks += converter.convert(model_event(text("partial answer"), partial=True))
    chunks += converter.convert(
        Event(
            author=AGENT,
            invocation_id="e-1",
            error_code="ValueError",
            error_message="secret internal detail at /srv/app.py",
        )
    )
    # run_async re-raises after the error event: the transport calls fail().
    chunks += converter.fail(ValueError("secret internal detail at /srv/app.py"))
    wire = wire_of(chunks)
    errors = [c for c in wire if c["type"] == "error"]
    assert len(errors) == 1
    assert "secret" not in errors[0]["errorText"]
    assert "ref " in errors[0]["errorText"]
    assert wire[-1] == {"type": "finish", "finishReason": "error"}
    assert "text-end" in types_of(wire)


def test_error_detail_setting_shows_the_error() -> None:
    converter = StreamProtocolConverter(error_detail=True)
    chunks = converter.convert(Event(author=AGENT, error_code="DEMO", error_message="boom"))
    assert chunks[-1].to_wire_dict()["errorText"].startswith("DEMO: boom")


def test_usage_is_summed_over_model_calls_with_model_version() -> None:
    def usage(
        prompt: int, out: int, thoughts: int = 0
    ) -> types.GenerateContentResponseUsageMetadata:
        return types.GenerateContentResponseUsageMetadata(
            prompt_token_count=prompt,
            candidates_token_count=out,
            thoughts_token_count=thoughts or None,
            total_token_count=prompt + out + thoughts,
        )

    chunks = run(
        [
            model_event(
                call("c1", "get_weather", location="Tokyo"),
                usage_metadata=usage(10, 2, 3),
                model_version="m-1",
            ),
            tool_event(("c1", "get_weather", {"temperature": 18})),
            model_event(text("Sunny."), event_id="E2", usage_metadata=usage(20, 4)),
        ]
    )
    assert chunks[-1]["messageMetadata"] == {
        "usage": {"inputTokens": 30, "outputTokens": 9, "totalTokens": 39, "reasoningTokens": 3},
        "modelVersion": "m-1",
    }


def test_finish_reasons_map_to_the_six_values() -> None:
    assert map_finish_reason(types.FinishReason.MAX_TOKENS) == "length"
    assert map_finish_reason(types.FinishReason.SAFETY) == "content-filter"
    assert map_finish_reason(types.FinishReason.MALFORMED_FUNCTION_CALL) == "error"
    assert map_finish_reason(types.FinishReason.IMAGE_OTHER) == "other"
    assert map_finish_reason("SOMETHING_NEW") == "other"
    chunks = run([model_event(text("cut"), finish_reason=types.FinishReason.MAX_TOKENS)])
    assert chunks[-1]["finishReason"] == "length"


def test_inline_image_becomes_a_file_chunk_and_audio_transient_data() -> None:
    image = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG"))
    audio = types.Part(inline_data=types.Blob(mime_type="audio/pcm;rate=24000", data=b"\x00\x01"))
    chunks = run([model_event(image, audio)])
    assert {
        "type": "file",
        "url": "data:image/png;base64,iVBORw==",
        "mediaType": "image/png",
    } in chunks
    pcm = next(c for c in chunks if c["type"] == "data-pcm")
    assert pcm["transient"] is True
    assert pcm["data"] == {"data": "AAE=", "mediaType": "audio/pcm;rate=24000", "sampleRate": 24000}


def test_tool_values_that_are_not_json_are_made_safe() -> None:
    chunks = run(
        [
            model_event(call("c1", "get_weather", location="Tokyo")),
            tool_event(("c1", "get_weather", {"raw": b"\x00\xff", "when": object})),
        ]
    )
    output = next(c for c in chunks if c["type"] == "tool-output-available")["output"]
    assert output["raw"] == "AP8="
    assert isinstance(output["when"], str)


def test_each_converter_is_one_response() -> None:
    first = StreamProtocolConverter()
    second = StreamProtocolConverter()
    a = first.convert(model_event(text("x"), partial=True))
    b = second.convert(model_event(text("x"), partial=True))
    ids = {c.to_wire_dict()["id"] for c in a + b if c.to_wire_dict()["type"] == "text-start"}
    assert len(ids) == 2
    assert first.finish() and first.finish() == []  # finish is sent once


# What the converter knows about ADK's types. When ADK adds a field, this fails so that
# someone decides whether the converter must handle it.
HANDLED_PART_FIELDS = {
    "text",
    "thought",
    "function_call",
    "function_response",
    "inline_data",
    "file_data",
}
IGNORED_PART_FIELDS = {
    "thought_signature", "executable_code", "code_execution_result", "video_metadata",
    "media_resolution", "tool_call", "tool_response", "part_metadata", "media_processing",
    "speech_metadata", "audio_transcription",
}  # fmt: skip
HANDLED_EVENT_FIELDS = {
    "content", "partial", "finish_reason", "error_code", "error_message", "usage_metadata",
    "model_version", "long_running_tool_ids", "actions",
}  # fmt: skip


def test_guard_adk_part_fields_are_all_known() -> None:
    assert set(types.Part.model_fields) == HANDLED_PART_FIELDS | IGNORED_PART_FIELDS


def test_guard_adk_event_fields_are_known() -> None:
    known_unused = {
        "grounding_metadata", "turn_complete", "turn_complete_reason", "interaction_status",
        "interrupted", "custom_metadata", "live_session_resumption_update", "live_session_id",
        "go_away", "voice_activity", "input_transcription", "output_transcription",
        "avg_logprobs", "logprobs_result", "cache_metadata", "citation_metadata",
        "interaction_id", "environment_id", "invocation_id", "author", "output", "node_info",
        "branch", "isolation_scope", "id", "timestamp",
    }  # fmt: skip
    assert set(Event.model_fields) == HANDLED_EVENT_FIELDS | known_unused


def test_only_what_pauses_keeps_new_calls_and_drops_held_content() -> None:
    from adk_stream_protocol.turns.deferral import only_what_pauses

    converter = StreamProtocolConverter(message_id="m", id_prefix="t")
    chunks = converter.start()
    chunks += converter.convert(tool_event(("old", "process_payment", {"success": True})))
    chunks += converter.convert(model_event(text("Paid Alice. Now Bob."), partial=True))
    chunks += converter.convert(
        model_event(text("Paid Alice. Now Bob."), call("new", "process_payment", amount=20))
    )
    chunks += converter.convert(
        model_event(confirmation_call("conf", "new", "process_payment", amount=20), event_id="E2")
    )
    chunks += converter.finish()
    kept = wire_of(only_what_pauses(chunks))
    assert types_of(kept) == [
        "start", "start-step", "tool-input-start", "tool-input-available",
        "tool-approval-request", "finish-step", "finish",
    ]  # fmt: skip


def test_replay_delivers_text_and_results_of_earlier_calls_only() -> None:
    held = [
        tool_event(("old", "process_payment", {"success": True})),
        model_event(text("Paid Alice. Now Bob."), call("new", "process_payment", amount=20)),
    ]
    converter = StreamProtocolConverter(message_id="m", id_prefix="t")
    replayed = wire_of(converter.replay([held]))
    assert types_of(replayed) == [
        "tool-output-available", "start-step", "text-start", "text-delta", "text-end",
    ]  # fmt: skip
    assert replayed[0]["toolCallId"] == "old"
    assert replayed[3]["delta"] == "Paid Alice. Now Bob."


def test_replay_opens_no_empty_step_for_an_event_that_held_only_calls() -> None:
    held = [
        tool_event(("old", "process_payment", {"success": True})),
        model_event(call("new", "process_payment", amount=20)),
    ]
    converter = StreamProtocolConverter(message_id="m", id_prefix="t")
    replayed = wire_of(converter.replay([held]))
    assert types_of(replayed) == ["tool-output-available"]


def test_rearm_hands_a_call_back_without_a_step() -> None:
    converter = StreamProtocolConverter(message_id="m")
    chunks = converter.start() + converter.rearm("c1", "get_location", {}) + converter.finish()
    wire = wire_of(chunks)
    assert wire == [
        {"type": "start", "messageId": "m"},
        {
            "type": "tool-input-available",
            "toolCallId": "c1",
            "toolName": "get_location",
            "input": {},
        },
        {"type": "finish", "finishReason": "tool-calls"},
    ]


def test_live_audio_between_transcript_deltas_keeps_one_text_block() -> None:
    def audio() -> Event:
        pcm = types.Part(inline_data=types.Blob(mime_type="audio/pcm;rate=24000", data=b"\x00\x00"))
        return model_event(pcm, partial=None)

    def said(text: str, partial: bool) -> Event:
        return Event(
            author=AGENT,
            partial=partial,
            output_transcription=types.Transcription(text=text, finished=not partial),
        )

    chunks = run([audio(), said("It is ", True), audio(), said("sunny.", True), audio(),
                  said("It is sunny.", False)])  # fmt: skip
    kinds = types_of(chunks)
    assert kinds.count("text-start") == 1 and kinds.count("text-end") == 1
    assert kinds.count("data-pcm") == 3
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "It is sunny."
