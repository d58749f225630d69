"""ADK's UI widgets (``EventActions.render_ui_widgets``) as ``data-ui-widget`` parts, read
through the converter's hook (``parts/ui_widgets.py``, docs/adr/0062), fed real ADK events:
where their chunks go, what they hold, that a partial event is never read, that a held-back
event's widget is replayed, and how the client's message keeps them."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from google.adk.events import Event, EventActions
from google.adk.events.ui_widget import UiWidget

from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.protocol.message_fold import MessageFold
from adk_stream_protocol.protocol.parts.ui_widgets import UI_WIDGET_PART
from tests.protocol.test_converter import (
    AGENT,
    call,
    model_event,
    run,
    text,
    tool_event,
    types_of,
    wire_of,
)
from tests.support.rig import assert_strict_chunk

APP = {"resource_uri": "ui://charts/weather.html", "tool_args": {"city": "Oslo"}}


def widgets(*widget: UiWidget) -> EventActions:
    return EventActions(render_ui_widgets=list(widget))


def test_a_tools_widget_follows_its_output_in_the_step_of_its_call() -> None:
    chunks = run(
        [
            model_event(call("c1", "show_chart", city="Oslo")),
            tool_event(
                ("c1", "show_chart", {"shown": "Oslo"}),
                actions=widgets(UiWidget(id="c1", provider="mcp", payload=APP)),
            ),
            model_event(text("Here is Oslo."), event_id="E2"),
        ]
    )
    assert types_of(chunks) == [
        "start", "start-step", "tool-input-start", "tool-input-available",
        "tool-output-available", UI_WIDGET_PART, "finish-step",
        "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish",
    ]  # fmt: skip
    (widget,) = [c for c in chunks if c["type"] == UI_WIDGET_PART]
    assert widget == {
        "type": UI_WIDGET_PART,
        "id": "c1",
        "data": {"provider": "mcp", "payload": APP},
    }


def test_each_widget_of_an_event_is_a_part_of_its_own_in_their_order() -> None:
    chunks = run(
        [
            tool_event(
                ("c1", "show_chart", {}),
                ("c2", "show_chart", {}),
                actions=widgets(
                    UiWidget(id="c1", provider="mcp", payload=APP),
                    UiWidget(id="c2", provider="mcp", payload=APP),
                ),
            ),
        ]
    )
    assert [c["id"] for c in chunks if c["type"] == UI_WIDGET_PART] == ["c1", "c2"]


def test_a_widgets_payload_is_sent_as_json_and_no_field_is_ever_null() -> None:
    when = datetime.date(2026, 12, 6)
    chunks = run(
        [
            Event(author=AGENT, actions=widgets(UiWidget(id="w1", provider="receipts"))),
            Event(
                author=AGENT,
                actions=widgets(
                    UiWidget(id="w2", provider="mcp", payload={"day": when, "png": b"\x89P"})
                ),
            ),
        ]
    )
    sent = [c for c in chunks if c["type"] == UI_WIDGET_PART]
    assert sent == [
        {"type": UI_WIDGET_PART, "id": "w1", "data": {"provider": "receipts", "payload": {}}},
        {
            "type": UI_WIDGET_PART,
            "id": "w2",
            "data": {"provider": "mcp", "payload": {"day": "2026-12-06", "png": "iVA="}},
        },
    ]
    for chunk in sent:
        assert_strict_chunk(chunk, 6)
        assert_strict_chunk(chunk, 7)


@pytest.mark.parametrize("ai_sdk", [6, 7])
def test_a_widget_closes_the_text_streamed_before_it_and_the_text_goes_on_after_it(
    ai_sdk: Any,
) -> None:
    chunks = run(
        [
            model_event(text("Look "), partial=True),
            Event(author=AGENT, actions=widgets(UiWidget(id="w1", provider="mcp", payload=APP))),
            model_event(text("at this."), partial=True, event_id="E2"),
            model_event(text("Look at this."), event_id="E3"),
        ],
        ai_sdk=ai_sdk,
    )
    assert types_of(chunks) == [
        "start", "start-step", "text-start", "text-delta", "text-end", UI_WIDGET_PART,
        "text-start", "text-delta", "text-end", "finish-step", "finish",
    ]  # fmt: skip
    message = MessageFold([], ai_sdk=ai_sdk).apply_all(chunks)[-1]
    assert [p["type"] for p in message["parts"]] == ["step-start", "text", UI_WIDGET_PART, "text"]


def test_a_partial_event_is_never_read_for_widgets() -> None:
    partial = model_event(
        text("Look"),
        partial=True,
        actions=widgets(UiWidget(id="w1", provider="mcp", payload=APP)),
    )
    assert UI_WIDGET_PART not in types_of(run([partial]))


def test_a_held_back_events_widget_is_replayed_with_it_even_when_its_result_is_not() -> None:
    """The final response of a turn sends what a paused continuation held back: a widget is
    held as the event's text is (only what pauses goes out then, docs/adr/0010), also when the
    result it comes with was delivered, its call being the paused response's own."""
    held = [
        model_event(call("c1", "show_chart", city="Oslo")),
        tool_event(
            ("c1", "show_chart", {"shown": "Oslo"}),
            actions=widgets(UiWidget(id="c1", provider="mcp", payload=APP)),
        ),
    ]
    replayed = wire_of(StreamProtocolConverter(message_id="m", id_prefix="t").replay([held]))
    assert replayed == [
        {"type": UI_WIDGET_PART, "id": "c1", "data": {"provider": "mcp", "payload": APP}}
    ]


def test_a_later_widget_with_the_same_id_replaces_the_earlier_ones_data_in_the_message() -> None:
    chunks = run(
        [
            Event(author=AGENT, actions=widgets(UiWidget(id="w1", provider="mcp", payload=APP))),
            Event(author=AGENT, actions=widgets(UiWidget(id="w1", provider="mcp"))),
        ]
    )
    message = MessageFold([]).apply_all(chunks)[-1]
    assert message["parts"] == [
        {"type": UI_WIDGET_PART, "id": "w1", "data": {"provider": "mcp", "payload": {}}}
    ]
