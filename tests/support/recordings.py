"""Demo conversations recorded through the real app (``ADK_STREAM_RECORD_DIR``), for the
recording and replay tests: what each request was, and what its client received."""

from __future__ import annotations

import copy
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.ai7_socket import V7Socket
from tests.support.rig import (
    LiveSocket,
    StreamResult,
    answer_approvals,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    user_message,
)
from tests.support.waiting import wait_until

# Secrets sent in headers: no recording may hold them.
HTTP_SECRET = "Bearer http-secret-7f3a"
FRAME_SECRET = "Bearer frame-secret-91c2"
PAYMENT = "Send 50 dollars to Hanako"
WEATHER = "What's the weather in Tokyo?"


@dataclass
class Exchange:
    """One request as the client sent it and the chunks it received."""

    label: str
    transport: str
    request: dict[str, Any]
    chunks: list[dict[str, Any]]


@dataclass
class Recorded:
    directory: Path
    exchanges: list[Exchange] = field(default_factory=list)

    def by_label(self, label: str) -> Exchange:
        (found,) = [e for e in self.exchanges if e.label == label]
        return found

    def files(self) -> list[Path]:
        return sorted(self.directory.glob("*.jsonl"))

    def lines(self, label: str) -> list[dict[str, Any]]:
        index = [e.label for e in self.exchanges].index(label)
        return read_lines(self.files()[index])


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def wait_for_files(directory: Path, count: int, timeout: float = 20.0) -> list[Path]:
    """The recordings once ``count`` are written (they are written after each response)."""

    def written() -> list[Path]:
        files = sorted(directory.glob("*.jsonl"))
        return files if len(files) >= count else []

    # The app writes them off its event loop, and says nothing when it has.
    return wait_until(
        written,
        lambda: f"{count} recordings in {directory}, found {len(list(directory.glob('*.jsonl')))}",
        within=timeout,
    )


def new_chat() -> str:
    return f"rec-{uuid.uuid4().hex[:10]}"


def record_demo_conversations(workdir: Path) -> Recorded:
    """A plain answer, a server tool, an approval and its continuation over ``/stream``; a
    plain answer over an ai 7 socket and one over the envelope ``/live``."""
    recorded = Recorded(workdir / "recordings")
    with in_process_app(workdir, record_dir=recorded.directory) as app:

        def stream(label: str, body: dict[str, Any]) -> StreamResult:
            sent = copy.deepcopy(body)
            result = post_stream(app, body, headers={"authorization": HTTP_SECRET})
            assert result.status == 200, result.body
            recorded.exchanges.append(Exchange(label, "stream", sent, result.chunks))
            wait_for_files(recorded.directory, len(recorded.exchanges))
            return result

        # An app's own body field and a part key the server does not read: kept as sent.
        hello = user_message("hello", "u-hello")
        hello["parts"][0]["providerMetadata"] = {"app": {"draft": 3}}
        stream("plain", chat_body(new_chat(), hello, client="page-1"))
        stream("weather", chat_body(new_chat(), user_message(WEATHER, "u-weather")))
        chat_id = new_chat()
        asked = user_message(PAYMENT, "u-pay")
        first = stream("approval", chat_body(chat_id, asked))
        message = answer_approvals(assistant_message(first), True)
        stream("approved", chat_body(chat_id, asked, message, messageId=message["id"]))

        socket = V7Socket(app)
        try:
            request = {"id": new_chat(), "trigger": "submit-message"}
            messages = [user_message("hello over ai 7", "u-7")]
            request_id = socket.send(
                request["id"], *messages, headers={"authorization": FRAME_SECRET}
            )
            reply = socket.reply(request_id)
            assert reply.last == "end", reply.frames
            sent = {"id": request["id"], "messages": messages, "trigger": "submit-message"}
            recorded.exchanges.append(Exchange("ai7", "ai7-socket", sent, reply.chunks))
            wait_for_files(recorded.directory, len(recorded.exchanges))
        finally:
            socket.close()

        chat_id = new_chat()
        with LiveSocket(app, chat_id) as live:
            body = chat_body(chat_id, user_message("hello over live", "u-live"))
            result = live.message(*body["messages"])
            recorded.exchanges.append(Exchange("live", "live", body, result.chunks))
            wait_for_files(recorded.directory, len(recorded.exchanges))
    return recorded
