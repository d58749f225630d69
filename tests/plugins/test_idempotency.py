"""Declaring a tool idempotent, by the setting and in code, and what a cut turn does with a
call of such a tool (docs/adr/0074): the start mark says so, and the recovery runs the call
again instead of answering "outcome unknown". The real ADK events a run stores."""

from __future__ import annotations

from typing import Any

import pytest
from google.adk.events import Event
from google.adk.tools import FunctionTool
from google.genai import types

from adk_stream_protocol import Settings, idempotent, lease_generation
from adk_stream_protocol.plugins.idempotency import declared_idempotent
from adk_stream_protocol.protocol.tool_calls import (
    CALL_IDEMPOTENT_KEY,
    CALL_STARTED_KEY,
    turn_calls,
)
from adk_stream_protocol.turns.recovery import recovery_of


def pay(amount: float) -> dict[str, Any]:
    """Pays."""
    return {"paid": amount}


def refund(amount: float) -> dict[str, Any]:
    """Refunds."""
    return {"refunded": amount}


def test_the_setting_names_tools_separated_by_commas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADK_STREAM_IDEMPOTENT_TOOLS", " pay, refund ,,")
    assert Settings().idempotent_tools == ["pay", "refund"]
    monkeypatch.delenv("ADK_STREAM_IDEMPOTENT_TOOLS")
    assert Settings().idempotent_tools == []


def test_a_tool_is_declared_by_name_or_by_its_marker() -> None:
    assert declared_idempotent(FunctionTool(pay), {"pay"})
    assert not declared_idempotent(FunctionTool(pay), {"refund"})
    marked = FunctionTool(idempotent(refund))
    assert declared_idempotent(marked, set())
    assert declared_idempotent(idempotent(FunctionTool(pay)), set())


def _call_event(*calls: tuple[str, str]) -> Event:
    parts = [
        types.Part(function_call=types.FunctionCall(id=call_id, name=name, args={"amount": 1}))
        for call_id, name in calls
    ]
    return Event(
        author="payer",
        invocation_id="inv-1",
        content=types.Content(role="model", parts=parts),
    )


def _start(call_id: str, idempotent: bool) -> Event:
    metadata: dict[str, Any] = {CALL_STARTED_KEY: call_id}
    if idempotent:
        metadata[CALL_IDEMPOTENT_KEY] = True
    return Event(author="payer", invocation_id="inv-1", custom_metadata=metadata)


def test_a_cut_call_of_an_idempotent_tool_is_run_again_and_another_is_unknown() -> None:
    events = [
        Event(
            author="user",
            invocation_id="inv-1",
            content=types.Content(role="user", parts=[types.Part(text="pay")]),
        ),
        _call_event(("c-pay", "pay"), ("c-refund", "refund"), ("c-late", "pay")),
        _start("c-pay", idempotent=True),
        _start("c-refund", idempotent=False),
    ]
    recovery = recovery_of(turn_calls(events))
    assert recovery is not None
    (rerun,) = recovery.reruns
    assert (rerun.call_id, rerun.tool_name, rerun.author) == ("c-pay", "pay", "payer")
    assert rerun.args == {"amount": 1} and not rerun.approved
    outcomes = {result.call_id: result.outcome for result in recovery.results}
    assert outcomes == {"c-refund": "unknown", "c-late": "not-started"}
    assert recovery.unknown == ["c-refund"]


def test_lease_generation_outside_a_run_of_the_server_says_so() -> None:
    class Context:
        def __init__(self) -> None:
            self.state: dict[str, Any] = {}

    with pytest.raises(LookupError, match="does not run in a chat adk-stream-protocol holds"):
        lease_generation(Context())  # type: ignore[arg-type]
