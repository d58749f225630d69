"""The part kinds (``protocol/parts/``) and the client table (``protocol/clients.py``),
docs/adr/0059: the registry, the request's part union and the chunk catalogue agree; each
chunk type a client has is folded by exactly one kind (or by the message itself); the
converter reaches the parts made from ADK event content through its hook only (docs/adr/0062);
what ai 6 and ai 7 do differently is read from the table; and a recording made for ai 7 is
sent to an ai 6 client as its strict schema accepts it."""

from __future__ import annotations

import gc
import typing
import weakref
from collections.abc import Sequence
from typing import Any

import pytest
from google.adk.events import Event
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from adk_stream_protocol.protocol import chunks as c
from adk_stream_protocol.protocol.clients import AI6, AI7, client_for, downgraded
from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.protocol.message_fold import MessageFold
from adk_stream_protocol.protocol.parts.base import EventPart, PartKind
from adk_stream_protocol.protocol.parts.kinds import (
    EVENT_PARTS,
    PART_KINDS,
    PART_TAGS,
    UIMessagePart,
    kind_of,
)
from adk_stream_protocol.protocol.parts.steps import Steps
from adk_stream_protocol.protocol.parts.tools import Tools
from adk_stream_protocol.testing_client import assistant_message
from bench.converter import adk_events
from tests.protocol.test_converter import model_event, text
from tests.support.rig import assert_strict_chunk
from tests.test_layout import import_graph

# The chunks the message folds itself: they change the message, not one of its parts.
MESSAGE_CHUNKS = {"start", "finish", "message-metadata", "error", "abort"}


def catalogue_tags() -> set[str]:
    union = typing.get_args(typing.get_args(c.UIMessageChunk)[0])
    return {typing.get_args(member)[1].tag for member in union}


def union_members() -> list[tuple[str, type[Any]]]:
    union = typing.get_args(typing.get_args(UIMessagePart)[0])
    return [(typing.get_args(m)[1].tag, typing.get_args(m)[0]) for m in union]


def test_the_part_union_holds_each_kinds_request_parts_in_the_registrys_order() -> None:
    registered = [pair for kind in PART_KINDS for pair in kind.request_parts]
    assert union_members() == registered
    assert {tag for tag, _ in registered} == PART_TAGS


def test_every_part_type_has_one_kind() -> None:
    exact = [t for kind in PART_KINDS for t in kind.part_types]
    assert len(exact) == len(set(exact))
    for kind in PART_KINDS:
        for part_type in kind.part_types:
            assert kind_of(part_type) is kind
        if kind.part_prefix is not None:
            assert kind_of(f"{kind.part_prefix}anything") is kind
    assert kind_of("tool-weather") is Tools and kind_of("dynamic-tool") is Tools
    assert kind_of("step-start") is Steps
    assert kind_of("no-such-part") is None


def test_the_converter_reads_each_event_part_through_the_registry_and_names_none() -> None:
    """A part made from ADK event content is its module and its entry in ``EVENT_PARTS``:
    the converter imports no such module."""
    assert EVENT_PARTS and len(set(EVENT_PARTS)) == len(EVENT_PARTS)
    converter = import_graph()["adk_stream_protocol.protocol.converter"]
    for part in EVENT_PARTS:
        assert issubclass(part, EventPart) and part is not EventPart
        assert part.__module__ not in converter, f"the converter imports {part.__module__}"
    assert "adk_stream_protocol.protocol.parts.kinds" in converter


def fold_tables() -> tuple[dict[str, PartKind], dict[str, PartKind]]:
    """Chunk type -> the kind whose fold takes it, and chunk prefix -> kind."""
    message: dict[str, Any] = {"id": "m", "role": "assistant", "parts": []}
    by_type: dict[str, PartKind] = {}
    by_prefix: dict[str, PartKind] = {}
    for kind in (kind(message, AI7) for kind in PART_KINDS):
        for chunk_type in kind.folds():
            assert chunk_type not in by_type, f"{chunk_type} is folded by two kinds"
            by_type[chunk_type] = kind
        by_prefix.update(dict.fromkeys(kind.prefixed_folds(), kind))
    return by_type, by_prefix


def test_each_chunk_type_of_a_client_is_folded_by_one_kind_or_the_message() -> None:
    by_type, by_prefix = fold_tables()
    assert not MESSAGE_CHUNKS & by_type.keys()
    assert by_type.keys() | MESSAGE_CHUNKS == AI7.chunk_types
    assert set(by_prefix) == {"data-"}
    assert AI6.chunk_types < AI7.chunk_types


def test_the_catalogue_is_what_ai_7_accepts_and_ai_6_only_without_the_ai_7_chunk() -> None:
    tags = catalogue_tags() - {"data"}
    assert tags <= AI7.chunk_types
    assert tags - AI6.chunk_types == {"tool-approval-response"}
    assert all(AI6.accepts(t) for t in ("data-x", "data-state"))


@pytest.mark.parametrize("chunk_type", sorted(AI7.chunk_types - AI6.chunk_types))
def test_an_ai_6_fold_stops_at_each_chunk_type_only_ai_7_has(chunk_type: str) -> None:
    fold = MessageFold([], ai_sdk=6)
    fold.apply({"type": chunk_type})
    assert fold.refused == f"a chunk of type {chunk_type!r} is not in the ai 6 schema"


def test_the_interrupted_finish_reason_is_ai_7s() -> None:
    for client in (AI6, AI7):
        fold = MessageFold([], ai_sdk=client.version)
        fold.apply({"type": "start", "messageId": "m"})
        fold.apply({"type": "finish", "finishReason": client.stopped_reason})
        assert fold.refused is None
    fold = MessageFold([], ai_sdk=6)
    fold.apply({"type": "finish", "finishReason": "interrupted"})
    assert fold.refused == "the finish reason 'interrupted' is not in the ai 6 schema"


def test_client_for_names_each_table_by_its_version() -> None:
    assert client_for(6) is AI6 and client_for(7) is AI7
    assert (AI6.version, AI7.version) == (6, 7)


def test_a_fold_holds_its_kinds_and_never_the_other_way_round() -> None:
    """Freed as soon as it is dropped, with no work for the collector (docs/adr/0051): the
    kinds get the fold's message with each chunk, they keep no reference to the fold."""
    chunks = converted([*adk_events(1), *confirmation_events()], 7)
    collecting = gc.isenabled()
    gc.disable()
    try:
        fold = MessageFold([], ai_sdk=7)
        fold.apply_all(chunks)
        dropped = weakref.ref(fold)
        del fold
        assert dropped() is None
    finally:
        if collecting:
            gc.enable()


# -- a recording made for ai 7, replayed to ai 6 ------------------------------------------------


def confirmation_events() -> list[Event]:
    """A call gated by a confirmation that has a hint and a payload."""
    call = types.FunctionCall(id="call-1", name="pay", args={"amount": 5})
    confirmation = ToolConfirmation(hint="Pay 5?", payload={"amount": 5})
    ask = types.FunctionCall(
        id="conf-1",
        name="adk_request_confirmation",
        args={
            "originalFunctionCall": call.model_dump(),
            "toolConfirmation": confirmation.model_dump(),
        },
    )
    return [model_event(types.Part(function_call=call), types.Part(function_call=ask))]


def converted(
    events: Sequence[Event], ai_sdk: c.AiSdkVersion, reason: c.FinishReason | None = None
) -> list[dict[str, Any]]:
    converter = StreamProtocolConverter(message_id="m1", id_prefix="t", ai_sdk=ai_sdk)
    chunks = converter.start()
    for event in events:
        chunks += converter.convert(event)
    return [chunk.to_wire_dict() for chunk in chunks + converter.finish(reason)]


GROUNDING = types.GroundingMetadata(
    grounding_chunks=[
        types.GroundingChunk(web=types.GroundingChunkWeb(uri="https://a.example", title="A"))
    ],
    grounding_supports=[
        types.GroundingSupport(segment=types.Segment(text="Tokyo"), grounding_chunk_indices=[0])
    ],
)


def test_an_ai_7_stream_downgraded_is_strict_for_ai_6_and_unchanged_for_ai_7() -> None:
    events = [*adk_events(1), *confirmation_events()]
    events.append(model_event(text("Tokyo"), grounding_metadata=GROUNDING))
    ai7 = converted(events, 7, "interrupted")
    decision = StreamProtocolConverter(ai_sdk=7).approval_responses([("conf-0", True, "fine")])
    ai7[-1:-1] = [chunk.to_wire_dict() for chunk in decision]
    kinds = {chunk["type"] for chunk in ai7}
    assert {"tool-approval-request", "tool-approval-response", "text-end"} <= kinds
    assert any(chunk.get("reason") for chunk in ai7 if chunk["type"] == "tool-approval-request")
    assert any("citations" in chunk for chunk in ai7)
    assert [downgraded(chunk, AI7) for chunk in ai7] == ai7
    for chunk in ai7:
        sent = downgraded(chunk, AI6)
        if chunk["type"] == "tool-approval-response":
            assert sent is None
            continue
        assert sent is not None
        assert_strict_chunk(sent, 6)
        assert "approvalDescriptor" not in sent and "reason" not in sent
    finish = downgraded(ai7[-1], AI6)
    assert finish is not None and finish["finishReason"] == "other"


# -- the testing client's message is the fold's ---------------------------------------------------


def test_the_testing_clients_message_is_the_folds() -> None:
    first = converted(confirmation_events(), 6)
    fold = MessageFold([], ai_sdk=6, new_message_id="assistant")
    assert assistant_message(first) == fold.apply_all(first)[-1] == fold.message
    (tool,) = [p for p in assistant_message(first)["parts"] if p["type"] == "tool-pay"]
    assert tool["state"] == "approval-requested" and tool["approval"] == {"id": "conf-1"}
