"""The chunk catalogue's wire rules: what a chunk becomes as bytes."""

from __future__ import annotations

import json
import typing

import pytest
from pydantic import ValidationError

from adk_stream_protocol.protocol import chunks as c
from adk_stream_protocol.protocol.sse import encode_event, format_event

# One chunk of every type, with optional fields both set and unset.
SAMPLES: list[c.BaseChunk] = [
    c.StartChunk(message_id="m1"),
    c.StartChunk(message_id="m1", message_metadata={"a": 1}),
    c.FinishChunk(),
    c.FinishChunk(finish_reason="stop", message_metadata={"usage": {"totalTokens": 3}}),
    c.StartStepChunk(),
    c.FinishStepChunk(),
    c.TextStartChunk(id="t1"),
    c.TextDeltaChunk(id="t1", delta='héllo "quoted"\n'),
    c.TextEndChunk(id="t1", provider_metadata={"google": {"k": 1}}),
    c.ReasoningStartChunk(id="r1"),
    c.ReasoningDeltaChunk(id="r1", delta="hmm"),
    c.ReasoningEndChunk(id="r1"),
    c.ToolInputStartChunk(tool_call_id="c1", tool_name="get_weather"),
    c.ToolInputDeltaChunk(tool_call_id="c1", input_text_delta='{"a"'),
    c.ToolInputAvailableChunk(tool_call_id="c1", tool_name="get_weather", input={"x": 1}),
    c.ToolInputAvailableChunk(tool_call_id="c1", tool_name="get_weather", input=None),
    c.ToolInputErrorChunk(tool_call_id="c1", tool_name="t", input=None, error_text="bad"),
    c.ToolApprovalRequestChunk(approval_id="a1", tool_call_id="c1"),
    c.ToolOutputAvailableChunk(tool_call_id="c1", output={"kept": None, "list": [None]}),
    c.ToolOutputAvailableChunk(tool_call_id="c1", output=None),
    c.ToolOutputErrorChunk(tool_call_id="c1", error_text="failed"),
    c.ToolOutputDeniedChunk(tool_call_id="c1"),
    c.SourceUrlChunk(source_id="s1", url="https://example.com"),
    c.SourceDocumentChunk(source_id="s2", media_type="text/plain", title="doc"),
    c.FileChunk(url="data:image/png;base64,AA==", media_type="image/png"),
    c.DataChunk(type="data-pcm", data={"rate": 24000}, transient=True),
    c.DataChunk(type="data-empty", data=None),
    c.MessageMetadataChunk(message_metadata=None),
    c.ErrorChunk(error_text="oops"),
    c.AbortChunk(),
    # ai 7 only (sent only to a client known to be ai 7; tests/transports/test_live_v7.py).
    c.ToolApprovalResponseChunk(approval_id="a1", approved=False, reason="no"),
    c.TextEndChunk(
        id="t1",
        citations=[
            c.Citation(
                source=c.CitationSource(id="s1", url="https://example.com", title="Example"),
                start_index=0,
                end_index=5,
                cited_text="hello",
            ),
            c.Citation(source=c.CitationSource(id="s2", url="https://example.org")),
        ],
    ),
    c.FinishChunk(finish_reason="interrupted"),
]


def test_samples_cover_every_chunk_type() -> None:
    union = typing.get_args(typing.get_args(c.UIMessageChunk)[0])
    models = {typing.get_args(member)[0] for member in union}
    assert models == {type(sample) for sample in SAMPLES}


@pytest.mark.parametrize("chunk", SAMPLES, ids=lambda chunk: type(chunk).__name__)
def test_wire_json_and_wire_dict_agree_and_round_trip(chunk: c.BaseChunk) -> None:
    wire = chunk.to_wire_dict()
    always = {type(chunk).model_fields[name].alias for name in type(chunk)._always_sent}
    assert always <= wire.keys(), "a key the client requires is missing"
    assert all(v is not None for k, v in wire.items() if k not in always), "a null was sent"
    assert json.loads(chunk.to_wire_json()) == wire
    assert c.UI_MESSAGE_CHUNK.validate_python(wire) == chunk
    assert encode_event(chunk) == b"data: " + chunk.to_wire_json() + b"\n\n"
    assert format_event(chunk).encode() == encode_event(chunk)


def test_unset_optional_fields_are_omitted_not_null() -> None:
    assert c.StartChunk(message_id="m1").to_wire_dict() == {"type": "start", "messageId": "m1"}
    assert c.FinishChunk().to_wire_json() == b'{"type":"finish"}'
    assert c.AbortChunk().to_wire_dict() == {"type": "abort"}


def test_unknown_typed_fields_are_always_sent_even_when_null() -> None:
    assert c.ToolOutputAvailableChunk(tool_call_id="c1", output=None).to_wire_json() == (
        b'{"type":"tool-output-available","toolCallId":"c1","output":null}'
    )
    assert c.MessageMetadataChunk(message_metadata=None).to_wire_dict() == {
        "type": "message-metadata",
        "messageMetadata": None,
    }
    # ...but an unset optional sibling is still left out.
    chunk = c.ToolInputAvailableChunk(tool_call_id="c1", tool_name="t", input=None)
    assert chunk.to_wire_dict() == {
        "type": "tool-input-available",
        "toolCallId": "c1",
        "toolName": "t",
        "input": None,
    }


def test_null_inside_a_value_is_kept() -> None:
    chunk = c.ToolOutputAvailableChunk(tool_call_id="c1", output={"a": None, "b": [None, 1]})
    assert json.loads(chunk.to_wire_json())["output"] == {"a": None, "b": [None, 1]}


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ValidationError):
        c.UI_MESSAGE_CHUNK.validate_python({"type": "text-delta", "id": "t", "delta": "x", "z": 1})
    with pytest.raises(ValidationError):
        c.UI_MESSAGE_CHUNK.validate_python({"type": "data-x"})  # data is required
