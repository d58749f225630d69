"""Human in the loop over POST /stream, at the HTTP level: approvals, browser tools, and every
answer the server must refuse (the tool must not run: the demo wallet shows it). In-process;
the stock clients with streamed intermediate results on the wire."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adk_stream_protocol.protocol.tool_calls import ABANDONED_RESULT as CANCELLED_RESULT
from adk_stream_protocol.store.history import live_events
from tests.support.apps import user_from_header
from tests.support.real_client import CLIENTS, drive, ready, tool_parts
from tests.support.rig import (
    InProcessApp,
    Response,
    ServerPool,
    StreamResult,
    Target,
    answer_approvals,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    stored_events,
    stored_state,
    user_message,
)

WALLET = "demo:wallet_balance"
INTERMEDIATE_RESULTS = {"ADK_STREAM_STREAM_INTERMEDIATE_RESULTS": "true"}


def new_chat() -> str:
    return f"hitl-{uuid.uuid4().hex[:12]}"


class Conversation:
    """One chat driven the way DefaultChatTransport drives it: the whole history each time."""

    def __init__(self, target: Target, headers: dict[str, str] | None = None) -> None:
        self.target = target
        self.chat_id = new_chat()
        self.messages: list[dict[str, Any]] = []
        self.responses: list[StreamResult] = []  # of the current assistant message
        self.decisions: dict[str, dict[str, Any]] = {}  # approvals the client gave, by call
        self.headers = headers or {}

    def say(self, text: str) -> StreamResult:
        self.messages.append(user_message(text, f"u-{uuid.uuid4().hex[:8]}"))
        self.responses = []
        return self._post(chat_body(self.chat_id, *self.messages))

    def assistant(self) -> dict[str, Any]:
        message = assistant_message(*self.responses)
        for part in message["parts"]:
            decision = self.decisions.get(part.get("toolCallId", ""))
            if decision is not None and part.get("state") == "approval-requested":
                part.update(state="approval-responded", approval=decision)
        return message

    def answer(self, message: dict[str, Any]) -> StreamResult:
        """Continue the assistant message with the client's changes to it."""
        if self.messages and self.messages[-1]["role"] == "assistant":
            self.messages.pop()
        self.messages.append(message)
        for part in message["parts"]:
            if isinstance(part.get("approval"), dict) and "approved" in part["approval"]:
                self.decisions[part["toolCallId"]] = part["approval"]
        return self._post(chat_body(self.chat_id, *self.messages, messageId=message["id"]))

    def refused(self, message: dict[str, Any]) -> Response:
        body = chat_body(self.chat_id, *self.messages[:-1], message, messageId=message["id"])
        if self.messages[-1]["role"] == "user":
            body = chat_body(self.chat_id, *self.messages, message, messageId=message["id"])
        return self.target.http.post("/stream", json=body, headers=self.headers)

    def wallet(self) -> Any:
        return stored_state(self.target, self.chat_id).get(WALLET, 1000)

    def _post(self, body: dict[str, Any]) -> StreamResult:
        result = post_stream(self.target, body, headers=self.headers)
        assert result.status == 200, result.body
        self.responses.append(result)
        if not self.messages or self.messages[-1]["role"] != "assistant":
            self.messages.append(self.assistant())
        else:
            self.messages[-1] = self.assistant()
        return result


def stored_results(target: Target, chat_id: str, call_id: str) -> list[Any]:
    """The results stored for one call, in order."""
    return [
        p.function_response.response
        for e in live_events(stored_events(target, chat_id))
        for p in (e.content.parts if e.content and e.content.parts else [])
        if p.function_response and p.function_response.id == call_id
    ]


def outcome(result: StreamResult) -> list[tuple[str, str]]:
    return [
        (c["type"], c["toolCallId"])
        for c in result.chunks
        if c["type"] in ("tool-output-available", "tool-output-error", "tool-output-denied")
    ]


# -- one approval ------------------------------------------------------------------------------


def test_approved_payment_runs_once_and_continues_the_message(app: InProcessApp) -> None:
    chat = Conversation(app)
    first = chat.say("Send 50 dollars to Hanako")
    (request,) = first.of_type("tool-approval-request")
    second = chat.answer(answer_approvals(chat.assistant(), True))
    assert second.chunks[0] == {"type": "start", "messageId": first.chunks[0]["messageId"]}
    # The outcome comes first, with the wallet it changed (shared state, ADR 0044), then the
    # model's answer in a new step.
    assert second.types()[:4] == ["start", "tool-output-available", "data-state", "start-step"]
    assert outcome(second) == [("tool-output-available", request["toolCallId"])]
    assert "Sent 50 USD to Hanako" in second.text()
    assert chat.wallet() == 950


class ActiveWhenStored:
    """The app's chat index, noting for each write of a chat's messages whether the chat had
    an active response then (what ``GET /chats/{chatId}`` would have said with them), and the
    same each time a request is planned (when it reads the chat's session)."""

    def __init__(self, target: InProcessApp) -> None:
        self.bridge = target.app.state.bridge
        self.index = self.bridge.chats
        self.seen: list[tuple[str, bool]] = []  # (last message's role or "planned", active)
        sessions = self.bridge.sessions
        opened = sessions.open

        async def open_for_planning(user: str, chat_id: str, *args: Any, **kw: Any) -> Any:
            self.seen.append(("planned", await self._active(user, chat_id)))
            return await opened(user, chat_id, *args, **kw)

        sessions.open = open_for_planning

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)

    async def _active(self, user: str, chat_id: str) -> bool:
        logs = self.bridge.coordination.chunk_logs
        return (user, chat_id) in await logs.with_active_response([(user, chat_id)])

    async def record_messages(
        self, app: str, user: str, chat_id: str, messages: list[dict[str, Any]], **kw: Any
    ) -> bool:
        self.seen.append((messages[-1]["role"], await self._active(user, chat_id)))
        return bool(await self.index.record_messages(app, user, chat_id, messages, **kw))

    async def record_start(
        self, app: str, user: str, chat_id: str, messages: list[dict[str, Any]], **kw: Any
    ) -> bool:
        self.seen.append((messages[-1]["role"], await self._active(user, chat_id)))
        return bool(await self.index.record_start(app, user, chat_id, messages, **kw))


def test_a_page_that_reads_the_answered_approval_finds_its_response_active(
    tmp_path: Path,
) -> None:
    """The response's log is open before the request is planned, and so before the chat's
    messages as the request carried them (the approval answered) are stored: a page that
    reloads meanwhile finds the answer active, so it resumes that answer, neither missing it
    nor holding the message twice (ADR 0045)."""
    with in_process_app(tmp_path) as target:
        spy = ActiveWhenStored(target)
        spy.bridge.records.index = spy  # where responses record the chat's messages
        chat = Conversation(target)
        chat.say("Send 50 dollars to Hanako")
        chat.answer(answer_approvals(chat.assistant(), True))
    # Each request planned, its messages stored as its response opens (the question, then
    # the approval's answer) and again as it ends: always with that response active.
    assert spy.seen == [
        *[("planned", True), ("user", True), ("assistant", True)],
        *[("planned", True), ("assistant", True), ("assistant", True)],
    ]


def test_denied_payment_is_output_denied_and_never_runs(app: InProcessApp) -> None:
    chat = Conversation(app)
    first = chat.say("Send 50 dollars to Hanako")
    (request,) = first.of_type("tool-approval-request")
    message = answer_approvals(chat.assistant(), False)
    message["parts"][-1]["approval"]["reason"] = "not today"  # ADK must not see extra keys
    second = chat.answer(message)
    assert outcome(second) == [("tool-output-denied", request["toolCallId"])]
    assert "not done because you rejected it" in second.text()
    assert chat.wallet() == 1000


def test_the_same_approval_twice_runs_the_tool_once(app: InProcessApp) -> None:
    chat = Conversation(app)
    chat.say("Send 50 dollars to Hanako")
    approved = answer_approvals(chat.assistant(), True)
    chat.answer(copy.deepcopy(approved))
    again = chat.refused(approved)
    assert again.status_code == 409
    assert "already answered" in again.json()["detail"]
    assert chat.wallet() == 950


# -- approvals the server refuses ----------------------------------------------------------


def test_unknown_approval_id_is_refused(app: InProcessApp) -> None:
    chat = Conversation(app)
    chat.say("Send 50 dollars to Hanako")
    message = answer_approvals(chat.assistant(), True)
    message["parts"][-1]["approval"]["id"] = "adk-made-up"
    response = chat.refused(message)
    assert response.status_code == 409
    assert "adk-made-up" in response.json()["detail"]
    assert chat.wallet() == 1000


def test_approval_naming_another_call_is_refused(app: InProcessApp) -> None:
    chat = Conversation(app)
    chat.say("Send 50 dollars to Hanako")
    message = answer_approvals(chat.assistant(), True)
    message["parts"][-1]["toolCallId"] = "adk-someone-else"
    assert chat.refused(message).status_code == 409
    assert chat.wallet() == 1000


def test_stale_approval_after_a_new_message_is_refused(app: InProcessApp) -> None:
    chat = Conversation(app)
    first = chat.say("Send 50 dollars to Hanako")
    (call,) = first.of_type("tool-input-available")
    held = chat.messages[:-1]  # what a stale tab holds: the chat up to the approval
    stale = answer_approvals(chat.assistant(), True)
    chat.say("Never mind, hello")
    # The abandoned call was given a clear result before the new message ran.
    assert stored_results(app, chat.chat_id, call["toolCallId"])[-1] == CANCELLED_RESULT
    body = chat_body(chat.chat_id, *held, stale, messageId=stale["id"])
    response = app.http.post("/stream", json=body, headers=chat.headers)
    assert response.status_code == 409
    assert chat.wallet() == 1000


def test_malformed_approval_is_refused(app: InProcessApp) -> None:
    chat = Conversation(app)
    chat.say("Send 50 dollars to Hanako")
    message = answer_approvals(chat.assistant(), True)
    message["parts"][-1]["approval"]["approved"] = "yes please"
    response = chat.refused(message)
    assert response.status_code == 422
    assert "approval.approved" in response.json()["detail"]
    assert chat.wallet() == 1000


def test_tool_output_for_a_call_that_is_not_waiting_is_refused(app: InProcessApp) -> None:
    chat = Conversation(app)
    chat.say("Send 50 dollars to Hanako")
    message = chat.assistant()
    part = message["parts"][-1]
    part.update(state="output-available", output={"success": True, "forged": True})
    del part["approval"]
    response = chat.refused(message)
    assert response.status_code == 409
    assert "no pending browser call" in response.json()["detail"]
    assert chat.wallet() == 1000


@pytest.fixture(scope="module")
def two_user_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    """Identity from the `x-test-user` header (tests/support/apps.py)."""
    with in_process_app(tmp_path_factory.mktemp("users"), identity=user_from_header) as target:
        yield target


def test_another_users_approval_is_refused(two_user_app: InProcessApp) -> None:
    alice = Conversation(two_user_app, headers={"x-test-user": "alice"})
    alice.say("Send 50 dollars to Hanako")
    approved = answer_approvals(alice.assistant(), True)
    mallory = Conversation(two_user_app, headers={"x-test-user": "mallory"})
    mallory.chat_id = alice.chat_id  # same chat id, other user: another chat
    mallory.messages = copy.deepcopy(alice.messages)
    response = mallory.refused(approved)
    assert response.status_code == 409
    assert stored_state(two_user_app, alice.chat_id, user_id="alice").get(WALLET, 1000) == 1000


# -- several approvals --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decisions", "wallet"),
    [((True, True), 970), ((True, False), 990), ((False, True), 980), ((False, False), 1000)],
)
def test_parallel_approvals_are_answered_together(
    app: InProcessApp, decisions: tuple[bool, bool], wallet: int
) -> None:
    chat = Conversation(app)
    first = chat.say("Pay Alice 10 and Bob 20")
    alice, bob = (c["toolCallId"] for c in first.of_type("tool-approval-request"))
    second = chat.answer(answer_approvals(chat.assistant(), *decisions))
    kinds = {True: "tool-output-available", False: "tool-output-denied"}
    assert outcome(second) == [(kinds[decisions[0]], alice), (kinds[decisions[1]], bob)]
    assert chat.wallet() == wallet
    assert second.of_type("finish")[0]["finishReason"] == "stop"


def test_answering_one_of_two_parallel_approvals_is_refused(app: InProcessApp) -> None:
    chat = Conversation(app)
    chat.say("Pay Alice 10 and Bob 20")
    message = chat.assistant()
    first_part = next(p for p in message["parts"] if p.get("state") == "approval-requested")
    first_part["state"] = "approval-responded"
    first_part["approval"]["approved"] = True
    response = chat.refused(message)
    assert response.status_code == 409
    assert "together" in response.json()["detail"]
    assert chat.wallet() == 1000


def test_sequential_approvals_defer_text_and_results_to_the_final_response(
    app: InProcessApp,
) -> None:
    chat = Conversation(app)
    first = chat.say("Pay Alice 10, then pay Bob 20")
    (alice,) = first.of_type("tool-approval-request")
    middle = chat.answer(answer_approvals(chat.assistant(), True))
    # The intermediate response carries only the next approval request, and the wallet
    # Alice's payment changed: shared state is never held back (ADR 0044).
    assert middle.types() == [
        "start", "data-state", "start-step", "tool-input-start", "tool-input-available",
        "tool-approval-request", "finish-step", "finish",
    ]  # fmt: skip
    assert middle.of_type("data-state")[0]["data"] == {"ui:wallet": {"balance": 990.0}}
    (bob,) = middle.of_type("tool-approval-request")
    assert middle.of_type("tool-input-available")[0]["input"]["recipient"] == "Bob"
    final = chat.answer(answer_approvals(chat.assistant(), True))
    # Everything held back arrives in order: Alice's result, the sentence written after it,
    # Bob's result, then the final answer.
    order = [
        (c["type"], c.get("toolCallId") or c.get("delta", "")[:10])
        for c in final.chunks
        if c["type"] in ("tool-output-available", "text-delta")
    ]
    assert order[0] == ("tool-output-available", alice["toolCallId"])
    outputs = [i for i, item in enumerate(order) if item[0] == "tool-output-available"]
    assert order[outputs[1]] == ("tool-output-available", bob["toolCallId"])
    between = "".join(
        c["delta"]
        for c in final.chunks[: final.chunks.index(final.of_type("tool-output-available")[1])]
        if c["type"] == "text-delta"
    )
    assert "Now paying Bob 20 USD." in between
    assert final.text().endswith("Wallet balance: 970.")
    assert chat.wallet() == 970


# -- browser tools ---------------------------------------------------------------------------


def test_location_approval_waits_for_the_browser_then_answers(app: InProcessApp) -> None:
    chat = Conversation(app)
    first = chat.say("Where am I?")
    (call,) = first.of_type("tool-input-available")
    assert call["toolName"] == "get_location"
    # The approval alone: the browser must run the tool now. The call is handed back
    # (tool-input-available again, same step) and the model is not called yet.
    rearm = chat.answer(answer_approvals(chat.assistant(), True))
    assert rearm.types() == ["start", "tool-input-available", "finish"]
    assert rearm.chunks[1]["toolCallId"] == call["toolCallId"]
    assert rearm.of_type("finish")[0]["finishReason"] == "tool-calls"
    # The browser's result, with the approval the part keeps.
    message = chat.assistant()
    part = message["parts"][-1]
    part.update(state="output-available", output={"latitude": 35.6762, "longitude": 139.6503})
    part["approval"] = {
        "id": first.of_type("tool-approval-request")[0]["approvalId"],
        "approved": True,
    }
    answer = chat.answer(message)
    assert "You are at latitude 35.6762, longitude 139.6503." in answer.text()
    assert answer.of_type("finish")[0]["finishReason"] == "stop"


def test_location_approval_and_output_in_one_request(app: InProcessApp) -> None:
    chat = Conversation(app)
    first = chat.say("Where am I?")
    message = answer_approvals(chat.assistant(), True)
    part = message["parts"][-1]
    part.update(state="output-available", output={"city": "Tokyo", "latitude": 1, "longitude": 2})
    answer = chat.answer(message)
    assert answer.text()  # the model answered from the browser's result
    assert first.of_type("tool-input-available")[0]["toolCallId"] == part["toolCallId"]
    assert not answer.of_type("tool-output-available"), "the browser's own output is not echoed"


def test_location_denied(app: InProcessApp) -> None:
    chat = Conversation(app)
    first = chat.say("Where am I?")
    (call,) = first.of_type("tool-input-available")
    answer = chat.answer(answer_approvals(chat.assistant(), False))
    assert outcome(answer) == [("tool-output-denied", call["toolCallId"])]
    assert "not done because you rejected it" in answer.text()


def test_a_new_message_cancels_a_waiting_browser_call(app: InProcessApp) -> None:
    chat = Conversation(app)
    first = chat.say("Play music, track 2")
    (call,) = first.of_type("tool-input-available")
    after = chat.say("Actually, what's the weather in London?")
    assert "London" in after.text()
    assert stored_results(app, chat.chat_id, call["toolCallId"]) == [CANCELLED_RESULT]


def test_browser_tool_error_reaches_the_model(app: InProcessApp) -> None:
    chat = Conversation(app)
    chat.say("Play music, track 2")
    message = chat.assistant()
    message["parts"][-1].update(state="output-error", errorText="autoplay blocked")
    answer = chat.answer(message)
    assert "autoplay blocked" in answer.text()


# -- the session survives a restart ---------------------------------------------------------


def test_approval_after_a_server_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The app is stopped (lifespan exited) and a new one started on the same store."""
    workdir = tmp_path_factory.mktemp("restart")
    with in_process_app(workdir) as before:
        chat = Conversation(before)
        chat.say("Send 50 dollars to Hanako")
    with in_process_app(workdir) as after:
        chat.target = after
        answer = chat.answer(answer_approvals(chat.assistant(), True))
        assert "Sent 50 USD to Hanako" in answer.text()
        assert chat.wallet() == 950
        again = chat.refused(chat.messages[-1] | {"parts": chat.messages[-1]["parts"]})
        assert again.status_code == 409
        assert chat.wallet() == 950


# -- the setting that streams intermediate results -------------------------------------------


@pytest.fixture(scope="module")
def streaming_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    with in_process_app(
        tmp_path_factory.mktemp("streaming"), stream_intermediate_results=True
    ) as target:
        yield target


def test_streaming_intermediate_results_when_configured(streaming_app: InProcessApp) -> None:
    chat = Conversation(streaming_app)
    first = chat.say("Pay Alice 10, then pay Bob 20")
    (alice,) = first.of_type("tool-approval-request")
    middle = chat.answer(answer_approvals(chat.assistant(), True))
    assert outcome(middle) == [("tool-output-available", alice["toolCallId"])]
    assert "Now paying Bob 20 USD." in middle.text()
    (bob,) = middle.of_type("tool-approval-request")
    final = chat.answer(answer_approvals(chat.assistant(), True))
    assert outcome(final) == [("tool-output-available", bob["toolCallId"])], "nothing repeated"
    assert chat.wallet() == 970


@pytest.mark.out_of_process  # the real AI SDK client, in Node
@pytest.mark.parametrize("client", CLIENTS)
def test_stock_client_with_streamed_intermediate_results(servers: ServerPool, client: str) -> None:
    report = drive(
        servers.get(INTERMEDIATE_RESULTS),
        client,
        [
            {"action": "send", "text": "Pay Alice 10, then pay Bob 20"},
            {"action": "approve", "approved": True},
            {"action": "approve", "approved": True},
        ],
        sendAutomaticallyWhen="approvals",
    )
    assistant = ready(report)
    assert len(report["requests"]) == 3
    assert [p["state"] for p in tool_parts(assistant)] == ["output-available"] * 2
