"""Recording responses (``ADK_STREAM_RECORD_DIR``; docs/adr/0026): one JSONL file per response,
which ``replay`` serves again with no agent behind it.

A file is named ``<UTC time, µs>_<chat id>_<6 hex>.jsonl``, so names sort by time, and holds
one JSON object per line:

1. ``{"kind":"request","version":1,"transport":"stream"|"ai7-socket"|"live","chatId",
   "trigger","messageId"?,"aiSdk":6|7,"time":"<ISO UTC>","request":{…}}``: ``request`` is the
   chat request as the client sent it (for a socket, the chat request its frame carries),
   but for the credentials a page answered a sign-in with (docs/adr/0065); headers are never
   recorded, neither the HTTP ones nor a frame's;
2. ``{"kind":"chunk","t":<ms since the request>,"chunk":{…}}`` for every chunk the client was
   sent, as sent (after deferral: what a continuation held back is not there);
3. ``{"kind":"end","t":…,"finishReason"?:…,"error"?:…}``.

A response's chunks stay in memory (they are frozen objects) until it ends; then one worker
thread serialises and writes the whole file under a temporary name and renames it into
place, off the event loop. A reader therefore never sees half a file, and a slow disk delays
nothing but the file. A write that fails is logged (a warning the first time, then at debug)
and costs the response nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adk_stream_protocol.protocol.chunks import (
    AiSdkVersion,
    BaseChunk,
    ErrorChunk,
    FinishChunk,
    Transport,
)
from adk_stream_protocol.protocol.credentials import payload_without_secrets
from adk_stream_protocol.protocol.ui_messages import ChatRequest

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
SUFFIX = ".jsonl"
_COMPACT = (",", ":")


class Recorder:
    """The recordings of one application (held by its ``Bridge``); off without a directory."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._writes: set[asyncio.Task[None]] = set()
        self._warned = False

    def open(
        self, transport: Transport, request: ChatRequest, *, ai_sdk: AiSdkVersion = 6
    ) -> ResponseRecording | None:
        """A recording of the response to ``request``, begun now; None when recording is off."""
        if self.directory is None:
            return None
        return ResponseRecording(self, self.directory, transport, request, ai_sdk)

    def save(self, path: Path, lines: Iterator[bytes]) -> None:
        """Write a recording in a worker thread (``lines`` are made there too)."""
        task = asyncio.get_running_loop().create_task(self._write(path, lines))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, path: Path, lines: Iterator[bytes]) -> None:
        try:
            await asyncio.to_thread(write_file, path, lines)
        except Exception as exc:
            # An OSError names the file and the reason; anything else only by its type, as
            # its text could quote what the user sent.
            reason = str(exc) if isinstance(exc, OSError) else type(exc).__name__
            if not self._warned:
                self._warned = True
                logger.warning(
                    "recording not written (later failures are logged at debug): %s", reason
                )
            else:
                logger.debug("recording not written: %s", reason)
        else:
            logger.debug("recorded %s", path.name)

    async def close(self) -> None:
        """Let the recordings still being written finish (the application is stopping)."""
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)


class ResponseRecording:
    """One response's recording: the ``DeliveryRecord`` of its ``Response``."""

    def __init__(
        self,
        recorder: Recorder,
        directory: Path,
        transport: Transport,
        request: ChatRequest,
        ai_sdk: AiSdkVersion,
    ) -> None:
        self._recorder = recorder
        self._started = time.monotonic()
        now = datetime.now(UTC)
        chat = re.sub(r"[^A-Za-z0-9_.-]", "-", request.id)  # ':' is not for every file system
        self.path = directory / f"{now:%Y%m%dT%H%M%S%f}Z_{chat}_{secrets.token_hex(3)}{SUFFIX}"
        header: dict[str, Any] = {
            "kind": "request",
            "version": FORMAT_VERSION,
            "transport": transport,
            "chatId": request.id,
            "trigger": request.trigger,
        }
        if request.message_id is not None:
            header["messageId"] = request.message_id
        header.update(
            aiSdk=ai_sdk,
            time=now.isoformat(timespec="microseconds").replace("+00:00", "Z"),
            request=payload_without_secrets(request.payload),
        )
        self._header = header
        self._chunks: list[tuple[int, BaseChunk]] = []
        self._ended = False

    def delivered(self, chunks: Sequence[BaseChunk]) -> None:
        t = self._elapsed_ms()
        self._chunks.extend((t, chunk) for chunk in chunks)

    def ended(self) -> None:
        if self._ended:
            return
        self._ended = True
        end: dict[str, Any] = {"kind": "end", "t": self._elapsed_ms()}
        for _, chunk in self._chunks:
            if isinstance(chunk, FinishChunk) and chunk.finish_reason is not None:
                end["finishReason"] = chunk.finish_reason
            elif isinstance(chunk, ErrorChunk):
                end["error"] = chunk.error_text
        try:
            self._recorder.save(self.path, _lines(self._header, self._chunks, end))
        except RuntimeError:  # no running loop: the application is gone
            logger.debug("recording dropped: no event loop")

    def _elapsed_ms(self) -> int:
        return round((time.monotonic() - self._started) * 1000)


def _lines(
    header: dict[str, Any], chunks: list[tuple[int, BaseChunk]], end: dict[str, Any]
) -> Iterator[bytes]:
    yield _json_line(header)
    for t, chunk in chunks:
        # The chunk's JSON exactly as the client received it.
        yield b'{"kind":"chunk","t":%d,"chunk":%s}\n' % (t, chunk.to_wire_json())
    yield _json_line(end)


def _json_line(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=_COMPACT).encode() + b"\n"


def write_file(path: Path, lines: Iterator[bytes]) -> None:
    """Write ``path`` whole: under a hidden temporary name first, readable by its owner only
    (the directory too, when this makes it), then renamed into place."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.part")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            for line in lines:
                file.write(line)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
