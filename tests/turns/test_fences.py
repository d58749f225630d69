"""The fence a chat's new holder writes after an unclean takeover (docs/adr/0034): the former
holder's next append is refused, and nothing that reads the session sees the fence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.adk.errors import StaleSessionError
from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.protocol.tool_calls import turn_calls
from adk_stream_protocol.store.sessions import FENCE_KEY, ChatSessions, create_session_service
from adk_stream_protocol.turns.bridge import bridge_of
from tests.support.rig import chat_body, in_process_app, post_stream, stored_events, user_message


def _text(author: str, text: str) -> Event:
    return Event(author=author, content=types.Content(role="model", parts=[types.Part(text=text)]))


@pytest.mark.asyncio
async def test_after_a_fence_the_former_holders_next_append_is_refused(tmp_path: Path) -> None:
    sessions = ChatSessions(create_session_service(f"sqlite:///{tmp_path}/s.db"), "app")
    stalled = await sessions.open("user", "chat")  # the former holder's copy
    await sessions.service.append_event(stalled, _text("agent", "before the stall"))
    fenced = await sessions.fence("user", "chat", 7)
    fence = fenced.events[-1]
    assert fence.author == "app" and fence.content is None
    assert fence.custom_metadata == {FENCE_KEY: 7}
    with pytest.raises(StaleSessionError):
        await sessions.service.append_event(stalled, _text("agent", "after waking"))
    # The new holder goes on writing on the session the fence returned.
    await sessions.service.append_event(fenced, _text("agent", "the new holder"))


def test_a_fence_changes_nothing_turn_calls_reads() -> None:
    call = Event(
        author="agent",
        invocation_id="inv-1",
        content=types.Content(
            role="model", parts=[types.Part(function_call=types.FunctionCall(id="c1", name="t"))]
        ),
    )
    fence = Event(author="app", invocation_id="fence-2", custom_metadata={FENCE_KEY: 2})
    cut = turn_calls([call, fence])
    assert cut.interrupted() and cut.invocation_id == "inv-1"
    ended = turn_calls([call, _text("agent", "done"), fence])
    assert ended.ended and not ended.interrupted()


def test_a_turn_taken_over_uncleanly_fences_before_it_plans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with in_process_app(tmp_path) as target:
        leases = bridge_of(target.app.state).coordination.leases
        acquire = leases.acquire

        async def unclean(*args: Any, **kwargs: Any) -> Any:
            lease = await acquire(*args, **kwargs)
            lease.unclean, lease.generation = True, 7
            return lease

        first = post_stream(target, chat_body("fenced", user_message("hello", "u1")))
        assert first.status == 200
        monkeypatch.setattr(leases, "acquire", unclean)
        second = post_stream(target, chat_body("fenced", user_message("again", "u2")))
        assert second.status == 200
        monkeypatch.undo()
        third = post_stream(target, chat_body("fenced", user_message("and again", "u3")))
        assert third.status == 200
        events = stored_events(target, "fenced")
    fences = [i for i, e in enumerate(events) if FENCE_KEY in (e.custom_metadata or {})]
    assert len(fences) == 1
    fence = events[fences[0]]
    assert fence.custom_metadata == {FENCE_KEY: 7} and fence.author != "user"
    after = events[fences[0] + 1]
    assert after.author == "user" and after.content is not None
    assert after.content.parts is not None and after.content.parts[0].text == "again"
