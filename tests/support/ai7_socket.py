"""A plain client of ai 7's ``WebSocketChatTransport`` protocol on ``/live`` (a socket
without ``?chatId=``): frames out, the server's frames read back by ``requestId``."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.support.rig import StreamResult, Target, WebSocketLike


@dataclass
class Reply:
    """What the server answered one request: its frames in order, and their chunks."""

    frames: list[dict[str, Any]] = field(default_factory=list)

    @property
    def chunks(self) -> list[dict[str, Any]]:
        return [f["chunk"] for f in self.frames if f["type"] == "chunk"]

    @property
    def last(self) -> str:
        return str(self.frames[-1]["type"])

    def stream(self) -> StreamResult:
        """The chunks as a response (``[DONE]`` for ``end``), for the /stream checks."""
        payloads = [json.dumps(c) for c in self.chunks]
        if self.last == "end":
            payloads.append("[DONE]")
        body = "".join(f"data: {p}\n\n" for p in payloads)
        return StreamResult(200, {}, body, payloads, self.chunks)


class V7Socket:
    """The frames of ai 7's transport over one socket, read back by ``requestId``."""

    def __init__(self, target: Target, path: str = "/live", **headers: str) -> None:
        self.ws: WebSocketLike = target.connect(path, headers or None)
        self.replies: dict[str, Reply] = {}

    def send(
        self,
        chat_id: str,
        *messages: dict[str, Any],
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        **extra: Any,
    ) -> str:
        request_id = uuid.uuid4().hex[:16]
        self.frame(
            {
                "type": "send",
                "requestId": request_id,
                "id": chat_id,
                "trigger": "submit-message",
                "messages": list(messages),
                "headers": headers or {},
                "body": body or {},
                **extra,
            }
        )
        return request_id

    def resume(self, chat_id: str, **extra: Any) -> str:
        request_id = uuid.uuid4().hex[:16]
        self.frame(
            {"type": "resume", "requestId": request_id, "id": chat_id, "headers": {}, "body": {}}
            | extra
        )
        return request_id

    def frame(self, frame: dict[str, Any]) -> None:
        self.ws.send(json.dumps(frame))

    def reply(self, request_id: str, timeout: float = 30) -> Reply:
        """Frames until the request's last one (``end``, ``error`` or ``no-active``)."""
        while not self._complete(request_id):
            frame = json.loads(self.ws.recv(timeout))
            assert isinstance(frame.get("requestId"), str), frame  # every frame names one
            self.replies.setdefault(frame["requestId"], Reply()).frames.append(frame)
        return self.replies[request_id]

    def chunks_until(self, request_id: str, count: int, timeout: float = 30) -> Reply:
        reply = self.replies.setdefault(request_id, Reply())
        while len(reply.chunks) < count:
            frame = json.loads(self.ws.recv(timeout))
            self.replies.setdefault(frame["requestId"], Reply()).frames.append(frame)
        return reply

    def _complete(self, request_id: str) -> bool:
        reply = self.replies.get(request_id)
        return reply is not None and reply.last in ("end", "error", "no-active")

    def close(self) -> None:
        self.ws.close()
