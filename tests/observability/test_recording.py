"""Recording (``ADK_STREAM_RECORD_DIR``, docs/adr/0026): the real app writes each response,
its request and the chunks its client received as one JSONL file."""

from __future__ import annotations

import logging
import re
import stat
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from adk_stream_protocol import Settings
from tests.support.recordings import (
    FRAME_SECRET,
    HTTP_SECRET,
    Recorded,
    new_chat,
    read_lines,
    record_demo_conversations,
    wait_for_files,
)
from tests.support.rig import (
    answer_approvals,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    user_message,
)

NAME = re.compile(r"^\d{8}T\d{12}Z_(?P<chat>[A-Za-z0-9_.-]+)_[0-9a-f]{6}\.jsonl$")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    yield record_demo_conversations(tmp_path_factory.mktemp("recording"))


def test_one_file_per_response_named_by_time_and_chat(recorded: Recorded) -> None:
    files = recorded.files()
    assert len(files) == len(recorded.exchanges) == 6
    for path, exchange in zip(files, recorded.exchanges, strict=True):
        match = NAME.match(path.name)
        assert match, path.name
        assert match["chat"] == exchange.request["id"]
    assert not list(recorded.directory.glob(".*")), "no temporary file is left behind"


def test_the_header_holds_the_request_as_the_client_sent_it(recorded: Recorded) -> None:
    for exchange in recorded.exchanges:
        header = recorded.lines(exchange.label)[0]
        assert header["kind"] == "request"
        assert header["version"] == 1
        assert header["transport"] == exchange.transport
        assert header["chatId"] == exchange.request["id"]
        assert header["trigger"] == "submit-message"
        assert header["aiSdk"] == (7 if exchange.transport == "ai7-socket" else 6)
        assert header.get("messageId") == exchange.request.get("messageId")
        assert datetime.fromisoformat(header["time"]).tzinfo is not None
        assert header["request"] == exchange.request
    # What the server does not read is kept too: the app's own body field, a part's key.
    plain = recorded.lines("plain")[0]["request"]
    assert plain["client"] == "page-1"
    assert plain["messages"][0]["parts"][0]["providerMetadata"] == {"app": {"draft": 3}}
    assert (
        recorded.lines("approved")[0]["messageId"]
        == recorded.by_label("approval").chunks[0]["messageId"]
    )


def test_the_chunks_are_those_the_client_received_with_their_times(recorded: Recorded) -> None:
    for exchange in recorded.exchanges:
        lines = recorded.lines(exchange.label)
        chunk_lines = lines[1:-1]
        assert all(line["kind"] == "chunk" for line in chunk_lines)
        assert [line["chunk"] for line in chunk_lines] == exchange.chunks, exchange.label
        times = [line["t"] for line in chunk_lines]
        assert all(isinstance(t, int) and t >= 0 for t in times)
        assert times == sorted(times)
        end = lines[-1]
        assert end["kind"] == "end"
        assert end["t"] >= times[-1]
        assert end["finishReason"] == exchange.chunks[-1]["finishReason"]
        assert "error" not in end
    assert recorded.lines("approval")[-1]["finishReason"] == "tool-calls"
    assert recorded.lines("approved")[-1]["finishReason"] == "stop"
    types = [line["chunk"]["type"] for line in recorded.lines("weather")[1:-1]]
    assert "tool-output-available" in types


def test_headers_are_never_recorded(recorded: Recorded) -> None:
    for path in recorded.files():
        text = path.read_text(encoding="utf-8")
        assert HTTP_SECRET not in text and FRAME_SECRET not in text
        assert "authorization" not in text.lower()


def test_files_are_for_their_owner_only(recorded: Recorded) -> None:
    assert stat.S_IMODE(recorded.directory.stat().st_mode) == 0o700
    for path in recorded.files():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_error_response_is_recorded_with_its_error(tmp_path: Path) -> None:
    directory = tmp_path / "recordings"
    with in_process_app(tmp_path, record_dir=directory) as app:
        # The offline demo model fails on request, as a model that errors would.
        result = post_stream(app, chat_body(new_chat(), user_message("please fail", "u1")))
        assert result.of_type("error"), result.types()
        (path,) = wait_for_files(directory, 1)
    end = read_lines(path)[-1]
    assert end["error"] == result.of_type("error")[0]["errorText"]
    assert end["finishReason"] == "error"


def test_an_unwritable_directory_costs_the_response_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    caplog.set_level(logging.DEBUG, logger="adk_stream_protocol.observability.recording")
    with in_process_app(tmp_path, record_dir=blocker / "recordings") as app:
        for text in ("hello", "hello again"):
            result = post_stream(app, chat_body(new_chat(), user_message(text, "u1")))
            assert result.status == 200
            assert "You said" in result.text()
    # The app has stopped: every write has been tried.
    records = [r for r in caplog.records if r.name == "adk_stream_protocol.observability.recording"]
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in records]
    assert "recording not written" in warnings[0].getMessage()
    assert any(r.levelno == logging.DEBUG and "not written" in r.getMessage() for r in records)
    assert not any("hello" in r.getMessage() for r in records), "no user content in the log"


def test_recording_is_off_without_the_setting(tmp_path: Path) -> None:
    with in_process_app(tmp_path) as app:
        assert app.app.state.bridge.recorder.directory is None
        assert post_stream(app, chat_body(new_chat(), user_message("hello", "u1"))).status == 200
    assert not list(tmp_path.rglob("*.jsonl"))


def test_the_setting_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ADK_STREAM_RECORD_DIR", str(tmp_path / "rec"))
    assert Settings().record_dir == tmp_path / "rec"
    monkeypatch.setenv("ADK_STREAM_RECORD_DIR", "")
    assert Settings().record_dir is None


def test_what_a_continuation_holds_back_is_recorded_where_it_is_delivered(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "recordings"
    chat_id = new_chat()
    asked = user_message("Pay Alice 10, then pay Bob 20", "u1")
    with in_process_app(tmp_path, record_dir=directory) as app:
        first = post_stream(app, chat_body(chat_id, asked))
        message = answer_approvals(assistant_message(first), True)
        middle = post_stream(app, chat_body(chat_id, asked, message, messageId=message["id"]))
        # Alice's part is still approval-responded (her result is held back): both answered.
        message = answer_approvals(assistant_message(first, middle), True, True)
        final = post_stream(app, chat_body(chat_id, asked, message, messageId=message["id"]))
        files = wait_for_files(directory, 3)
    recorded = [[line["chunk"] for line in read_lines(path)[1:-1]] for path in files]
    assert recorded == [first.chunks, middle.chunks, final.chunks]
    # The converter made Alice's result in the middle response; the client got it only in
    # the final one, and so did the recording (the wallet it changed is never held back).
    assert [c["type"] for c in recorded[1]] == [
        "start", "data-state", "start-step", "tool-input-start", "tool-input-available",
        "tool-approval-request", "finish-step", "finish",
    ]  # fmt: skip
    (alice,) = first.of_type("tool-approval-request")
    outputs = [c["toolCallId"] for c in recorded[2] if c["type"] == "tool-output-available"]
    assert outputs[0] == alice["toolCallId"]
