"""A ``/live?chatId=`` socket in a rolling restart (docs/adr/0033): ``LiveRestart`` is what
the ``Drain`` sees of it.

The socket is busy while an answer is open on it: from a ``message`` frame it handles until
that response's ``[DONE]`` is out. The drain waits for it, up to the grace, then closes the
socket with 1012 (Service Restart), and the client connects again, to another instance.
While the server drains, a new message starts no turn: it is refused with an ``error`` chunk
and ``[DONE]``, then the socket closes with 1012 (``LiveConnection``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress

from fastapi import WebSocket

from adk_stream_protocol.transports.live_frames import CLOSE_RESTART, SocketSink
from adk_stream_protocol.turns.drain import Drain

RESTART_REASON = "the server is restarting; connect again"


class LiveRestart:
    order = 2  # a socket: ended after the producers and followers

    def __init__(self, drain: Drain, websocket: WebSocket) -> None:
        self._drain = drain
        self._ws = websocket
        self._open = 0  # accepted messages whose response's [DONE] is not out yet

    @property
    def busy(self) -> bool:
        return self._open > 0

    def answer(self, send_text: Callable[[str], Awaitable[None]]) -> AnswerSink:
        """A ``message`` frame is being handled: busy until its response ends (``AnswerSink``)."""
        self._open += 1
        return AnswerSink(send_text, self._answered)

    def _answered(self) -> None:
        self._open -= 1
        if not self._open:
            self._drain.changed()

    async def end_for_restart(self) -> None:
        with suppress(RuntimeError):  # already closed
            await self._ws.close(CLOSE_RESTART, RESTART_REASON)

    async def close_if_draining(self) -> None:
        """After a refusal: while the server drains, the socket's part is over."""
        if self._drain.draining:
            await self.end_for_restart()


class AnswerSink(SocketSink):
    """The ``ChunkSink`` of one accepted message's response. The answer ends once, when its
    ``[DONE]`` is out (``close``), or when no response was opened for it (``end_unless_opened``)."""

    def __init__(
        self, send_text: Callable[[str], Awaitable[None]], answered: Callable[[], None]
    ) -> None:
        super().__init__(send_text)
        self._answered: Callable[[], None] | None = answered
        self._opened = False  # a response sent its first event here

    async def send(self, events: Sequence[bytes]) -> None:
        self._opened = True
        await super().send(events)

    async def close(self) -> None:
        self.end()

    def end_unless_opened(self) -> None:
        if not self._opened:
            self.end()

    def end(self) -> None:
        answered, self._answered = self._answered, None
        if answered is not None:
            answered()
