"""One response of a turn, from ADK events to delivered bytes: convert → defer → deliver.

Both transports open a ``Response`` per response and feed it what their run produces; they
differ only in the ``ChunkSink`` that carries the framed events (an SSE body, WebSocket text
frames). Every delivered event also goes to the chat's ``ResponseLog``, so a client that lost
the connection can resume the response from its start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from google.adk.events import Event

from adk_stream_protocol.coordination.base import ResponseLog
from adk_stream_protocol.observability.telemetry import ResponseObserver, error_code
from adk_stream_protocol.protocol.chunks import (
    BaseChunk,
    DataChunk,
    ErrorChunk,
    FinishChunk,
    FinishReason,
    FinishStepChunk,
)
from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.protocol.shared_state import SharedState
from adk_stream_protocol.protocol.sse import DONE, encode_event
from adk_stream_protocol.protocol.step_authors import StepAuthors, answered_by
from adk_stream_protocol.store.artifact_files import ChatArtifacts
from adk_stream_protocol.turns.chat_records import ResponseRecords
from adk_stream_protocol.turns.deferral import Deferral
from adk_stream_protocol.turns.delta_coalescing import DeltaCoalescer

logger = logging.getLogger(__name__)

DONE_EVENT = DONE.encode()

_Taker = Callable[[Sequence[bytes]], None]  # a log's append_now, a sink's send_now


class ChunkSink(Protocol):
    """Where a response's framed events go: the transport's side of the pipeline. A sink
    that takes events without waiting may also have ``send_now(events)`` (as may a log,
    ``append_now``): the end of a coalescing window then delivers with no task."""

    async def send(self, events: Sequence[bytes]) -> None: ...

    async def close(self) -> None:
        """The response ended (its ``[DONE]`` was sent)."""


class UnloggedResponse:
    """The ``ResponseLog`` of a response whose chunk log could not be opened (its store is
    unavailable): the response still reaches its own client, but cannot be resumed."""

    async def append(self, events: Sequence[bytes]) -> None:
        return None

    def append_now(self, events: Sequence[bytes]) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass(frozen=True)
class Delivery:
    """Where a response's chunks go: the transport's ``sink``, the chat's chunk ``log`` (what
    a resumer reads), the ``records`` they are folded into (the chat's messages, a recording),
    and the window within which a block's later deltas are merged before they go
    (``ADK_STREAM_DELTA_COALESCING_MS``; 0: none). ``sink_resumes``: the sink's client is a
    resumer (it holds no copy of the continued message): it gets the rebuild the log gets."""

    sink: ChunkSink
    log: ResponseLog
    records: ResponseRecords | None = None
    coalescing_seconds: float = 0.0
    sink_resumes: bool = False


@dataclass(frozen=True)
class ChatParts:
    """What a response sends of its chat beside the model's answer, each when the app has
    it: the artifacts its events save, as ``file`` parts; the state shared with the page, as
    ``data-state``; who answered, as ``data-agent``."""

    files: ChatArtifacts | None = None
    shared_state: SharedState | None = None
    authors: StepAuthors | None = None


NO_CHAT_PARTS = ChatParts()


class Response:
    """A response's converter, its deferral (if it holds back) and its delivery.

    ``finish``/``fail`` end it once; they return what a deferring response that paused holds
    for the turn's final response.
    """

    def __init__(
        self,
        converter: StreamProtocolConverter,
        delivery: Delivery,
        *,
        parts: ChatParts = NO_CHAT_PARTS,
        deferral: Deferral | None = None,
        observer: ResponseObserver | None = None,
    ) -> None:
        self.converter = converter
        # The chat's shared state and who answered, when the app has them.
        self._state = parts.shared_state
        self._authors = parts.authors
        self.observer = observer or ResponseObserver.inert()  # its span and metrics
        # The chat's messages, a recording.
        self._records = delivery.records
        self._sink = delivery.sink
        self._log = delivery.log
        self._sink_resumes = delivery.sink_resumes
        self._deferral = deferral
        self._files = parts.files  # the chat's saved artifacts, sent as file parts
        self.ended = False
        self.done = asyncio.Event()  # set once its [DONE] is out (or it failed to go out)
        # Deltas merged within a window: the lock keeps a timed release and a delivery from
        # interleaving their chunks.
        window = delivery.coalescing_seconds
        self._coalescer = DeltaCoalescer(window) if window > 0 else None
        self._delivering = asyncio.Lock()
        # A held delta's window ends on a timer. A log and a sink that take events at once
        # let the timer deliver it itself; otherwise (or while a delivery is under way) a
        # task waits for its turn. A task and a sleep per window cost more than the
        # delivery they make (bench/PROFILE.md).
        self._release_timer: asyncio.TimerHandle | None = None
        self._releasing: asyncio.Task[None] | None = None
        append_now = getattr(self._log, "append_now", None)
        send_now = getattr(self._sink, "send_now", None)
        self._at_once: tuple[_Taker, _Taker] | None = (
            (append_now, send_now) if append_now is not None and send_now is not None else None
        )

    @property
    def deferring(self) -> bool:
        return self._deferral is not None

    @property
    def awaiting_client(self) -> bool:
        return self.converter.awaiting_client

    async def start(self) -> None:
        # Sent at once even when deferring: the client sees the response begin.
        start = self.converter.start()
        rebuilt = self._records.rebuilt(start) if self._records is not None else []
        await self._deliver(start)
        if rebuilt:
            # For a resumer only, who starts from an empty message: the client that asked holds
            # the message already. Never folded: the record holds it.
            events = [encode_event(chunk) for chunk in rebuilt]
            await self._log.append(events)
            if self._sink_resumes:
                await self._sink.send(events)
        await self._share_state()  # what the request itself changed

    async def emit(self, chunks: Sequence[BaseChunk], *, keep: bool = False) -> None:
        """Send (or collect, when deferring) chunks; ``keep``: never held for a later
        response, even when this one pauses."""
        if not chunks or self.ended:
            return
        self.observer.chunks(chunks)
        if self._deferral is not None:
            self._deferral.collect(chunks, keep=keep)
        else:
            await self._deliver(chunks)

    async def convert(self, event: Event) -> None:
        errored = self.converter.errored
        chunks = self.converter.convert(event)
        if self._authors is not None:
            chunks = self._authors.mark(answered_by(event), chunks)
        if self.converter.errored and not errored:
            self.observer.error(error_code(event))
        await self.emit(chunks)
        if chunks:
            self.observer.answered(delivered=self._deferral is None)
        if self._files is not None and not self.ended:
            # After the event's tool results: a tool's file follows its output.
            await self.emit(await self._files.files_of(event), keep=True)
        if self._state is not None:
            self._state.observe(event)
            await self._share_state()

    async def _share_state(self) -> None:
        """The ``data-state`` part, when the shared keys changed. Never held back by a
        response that pauses: it is the state now, not a part of the answer."""
        if self._state is None or self.ended:
            return  # an ended response keeps the change for the next one
        if (part := self._state.changed_part()) is not None:
            await self.emit([part], keep=True)

    async def approval_responses(self, decisions: Sequence[tuple[str, bool, str | None]]) -> None:
        for _, approved, _ in decisions:
            self.observer.approval_decided(approved)
        await self.emit(self.converter.approval_responses(decisions))

    async def tool_data(self, chunk: DataChunk, call_id: str | None = None) -> None:
        """A data part a tool sent while it runs (``tool_ui.send_data``). A transient one
        goes out at once even when deferring: it is live progress, kept in no message."""
        if chunk.transient and not self.ended:
            await self._deliver([chunk])
        else:
            await self.emit([chunk], keep=True)

    async def approval_request(
        self, approval_id: str, call_id: str, hint: str | None = None, payload: Any = None
    ) -> None:
        await self.emit(self.converter.approval_request(approval_id, call_id, hint, payload))

    async def rearm(
        self, call_id: str, tool_name: str, args: dict[str, Any], *, announce: bool = True
    ) -> None:
        await self.emit(self.converter.rearm(call_id, tool_name, args, announce=announce))

    async def finish(self, reason: FinishReason | None = None) -> list[BaseChunk]:
        if self.ended:
            return []
        return await self._end_after(self.converter.finish(reason))

    async def fail(self, exc: BaseException, *, error_text: str | None = None) -> list[BaseChunk]:
        """End with an ``error`` chunk after the run (or our handling of it) raised;
        ``error_text``: the text of a failure already understood and logged (an outage)."""
        if self.ended:
            return []
        if not self.converter.errored:
            self.observer.error(type(exc).__name__)
        return await self._end_after(self.converter.fail(exc, error_text=error_text))

    async def end_with_error(self, text: str) -> list[BaseChunk]:
        """End with an ``error`` chunk that says ``text``, where nothing failed in the run:
        the server ended it (a restart)."""
        if self.ended:
            return []
        self.observer.error("server_restart")
        chunks = self.converter.finish()
        ends = (FinishStepChunk, FinishChunk)
        at = next((i for i, c in enumerate(chunks) if isinstance(c, ends)), len(chunks))
        return await self._end_after([*chunks[:at], ErrorChunk(error_text=text), *chunks[at:]])

    async def _end_after(self, chunks: Sequence[BaseChunk]) -> list[BaseChunk]:
        try:
            await self.emit(chunks)
        except BaseException:
            self.done.set()  # its [DONE] cannot go out: nobody may wait for it
            raise
        return await self._end()

    async def _end(self) -> list[BaseChunk]:
        self.ended = True
        held: list[BaseChunk] = []
        try:
            if self._deferral is not None:
                paused = self.converter.awaiting_client and not self.converter.errored
                now, held = self._deferral.settle(paused=paused)
                await self._deliver(now)
                if now:
                    self.observer.delivered()
            await self._release_held()
            if self._records is not None:
                await self._records.settle()  # before the client has the end: docs/adr/0042
            await self._send([DONE_EVENT])
        finally:
            self._cancel_release()  # the end failed to go out: nothing follows
            try:
                await self._log.close()
                await self._sink.close()
            finally:
                self.observer.end()
                self.done.set()
                if self._records is not None:
                    self._records.ended()
        return held

    async def _deliver(self, chunks: Sequence[BaseChunk]) -> None:
        coalescer = self._coalescer
        if coalescer is None:
            await self._put(chunks)
            return
        async with self._delivering:
            await self._put(coalescer.take(chunks))
            if coalescer.holding and self._release_timer is None:
                loop = asyncio.get_running_loop()
                self._release_timer = loop.call_later(coalescer.window_seconds, self._window_over)

    def _window_over(self) -> None:
        """The held delta's window ended (a loop callback)."""
        if self._at_once is None or self._delivering.locked():
            self._releasing = asyncio.create_task(self._release_in_turn())
            return
        # No delivery is under way, and this runs between two steps of the loop: nothing can
        # come between the held delta and what was delivered before it.
        self._release_timer = None
        assert self._coalescer is not None
        append_now, send_now = self._at_once
        try:
            if events := self._framed(self._coalescer.release()):
                append_now(events)
                send_now(events)
        except Exception as exc:  # as below: the next delivery meets it and reports it
            logger.warning("a held delta could not be delivered: %s", type(exc).__name__)

    async def _release_in_turn(self) -> None:
        assert self._coalescer is not None
        async with self._delivering:
            self._release_timer = self._releasing = None
            try:
                await self._put(self._coalescer.release())
            except Exception as exc:  # the next delivery meets the same failure and reports it
                logger.warning("a held delta could not be delivered: %s", type(exc).__name__)

    async def _release_held(self) -> None:
        """The end is never late: what is held goes out before it."""
        if self._coalescer is None:
            return
        async with self._delivering:
            self._cancel_release()
            await self._put(self._coalescer.release())

    def _cancel_release(self) -> None:
        if self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None
        if self._releasing is not None:
            self._releasing.cancel()
            self._releasing = None

    async def _put(self, chunks: Sequence[BaseChunk]) -> None:
        if events := self._framed(chunks):
            await self._send(events)

    def _framed(self, chunks: Sequence[BaseChunk]) -> list[bytes]:
        """The chunks recorded as delivered, and framed for the log and the sink."""
        if not chunks:
            return []
        if self._records is not None:
            self._records.delivered(chunks)
        return [encode_event(chunk) for chunk in chunks]

    async def _send(self, events: list[bytes]) -> None:
        await self._log.append(events)
        await self._sink.send(events)
