"""What must be shared when several processes serve one chat, behind small interfaces.

Five kinds of state outlive a single request and may have to be seen by another process:

- ``ChatLeases``: the right to run a chat; two requests on one chat never run at once.
- ``PendingCalls``: tool calls waiting for the client (approvals, browser results). The tool
  waits where its run is; the answer may arrive anywhere.
- ``StopSignals``: a request to stop a chat's running response (or to let a chat being
  deleted go).
- ``ChunkLogs``: the chunks an active response has sent, so a client can resume it.
- ``SignIns``: the sign-ins under way at an OAuth2 provider, each under the one-time ``state``
  the provider sends back to the server's callback route.

The transports and the core only know these interfaces. ``local.py`` gives the
in-process implementations (the embedded default); a shared store implements the same
interfaces. Every method that may need the network is a coroutine, and every wait is on an
event, never a poll.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

ChatKey = tuple[str, str]  # (user id, chat id): a chat belongs to its user

Outcome = Literal["approved", "denied", "timeout", "cancelled"]


@dataclass(frozen=True)
class Verdict:
    """The end of an approval's wait: its outcome, and the payload the user answered with
    (an edited one), if any."""

    outcome: Outcome
    payload: Any = None


class ChatLease(Protocol):
    """The right to run one chat, held until released (released once, whoever calls).

    A shared store's lease lapses when its holder stops renewing it (a crashed process). A
    live holder whose lease lapsed anyway (a stalled process, a lost store) finds ``lost``
    set: another may hold the chat now, so it must stop its run.
    """

    token: str  # this holding, unique: whoever checks the chat's holder compares it
    lost: asyncio.Event
    # Taken after a holder that never released it (its lease lapsed: a crash, a stall). That
    # holder may still write to the chat's session: the new one fences it off first. Always
    # False in one process, where a lock cannot lapse.
    unclean: bool
    generation: int  # how many times the chat was taken, this one included (0: not counted)

    def held(self) -> bool:
        """Still this process's, as far as it can tell without asking the store: not lost,
        and renewed within its TTL by this process's own clock. A process that was stalled
        past the TTL and has just woken is not a holder, before any renewal says so."""

    async def release(self) -> None: ...

    async def hold_for_results(self, ttl_seconds: float) -> None:
        """From now on this holding only waits for the chat's kept tool results to be saved:
        ``results_waiting`` says so to every process, for at most ``ttl_seconds`` and until the
        release. Best effort: a store that cannot take the mark leaves others answering
        "busy"."""


class ChatLeases(Protocol):
    async def acquire(self, chat: ChatKey, wait_seconds: float) -> ChatLease:
        """Wait up to ``wait_seconds`` for the chat; ``TimeoutError`` if it stays busy."""

    async def try_acquire(self, chat: ChatKey) -> ChatLease | None:
        """The chat if it is free now, else None (no queueing behind others)."""

    async def results_waiting(self, chat: ChatKey) -> bool:
        """Whether the chat's current holder only waits for kept results to be saved
        (``hold_for_results``): a request for it is told to try again, not that it is busy."""


@dataclass(frozen=True)
class WaitingCall:
    """A tool call that has started to wait for the client."""

    call_id: str
    tool_name: str
    approval_id: str | None = None  # set for an approval; None for a browser result
    # What an in-tool confirmation asks with: shown on the page.
    hint: str | None = None
    payload: Any = None


class PendingCalls(Protocol):
    """Tool calls of a chat waiting for the client: the user's approval or the result of a
    tool the browser runs.

    A call only waits while someone watches its chat (the connection that serves it):
    with no watcher, an approval is ``cancelled`` and a browser call gets ``unwatched``.
    """

    def watch(self, chat: ChatKey, listener: Callable[[WaitingCall], None]) -> None:
        """Call ``listener`` whenever a call of the chat starts to wait."""

    async def unwatch(self, chat: ChatKey, result: dict[str, Any]) -> None:
        """Nobody serves the chat any more: its waiting calls end (approvals ``cancelled``,
        browser calls with ``result``)."""

    async def ask_approval(
        self, chat: ChatKey, call_id: str, tool_name: str, timeout_seconds: float
    ) -> Outcome: ...

    async def ask_confirmation(
        self,
        chat: ChatKey,
        call: WaitingCall,
        timeout_seconds: float,
    ) -> Verdict:
        """``ask_approval`` for ``call`` (its ``approval_id`` as given, else a new one), with
        the payload the user answered with."""

    async def decide(
        self, chat: ChatKey, approval_id: str, approved: bool, payload: Any = None
    ) -> None: ...

    async def wait_result(
        self, chat: ChatKey, call_id: str, timeout_seconds: float, unwatched: dict[str, Any]
    ) -> dict[str, Any]:
        """The browser's result for the call (``deliver``), or a timeout result."""

    async def deliver(self, chat: ChatKey, call_id: str, result: dict[str, Any]) -> None:
        """A browser result; kept if the call does not wait yet (it may still be gated)."""

    async def cancel(self, chat: ChatKey, result: dict[str, Any]) -> None:
        """End every waiting call of the chat: approvals ``cancelled``, browser calls with
        ``result``; results delivered early are dropped."""

    async def waiting(self, chat: ChatKey) -> list[WaitingCall]: ...


class StopSubscription(Protocol):
    stopped: asyncio.Event
    # Set, never cleared, by a stop that deletes the chat (before ``stopped``): whoever
    # serves the chat beyond one response (a /live socket) lets it go too.
    deleted: asyncio.Event

    async def close(self) -> None: ...


class StopSignals(Protocol):
    async def subscribe(self, chat: ChatKey) -> StopSubscription:
        """Watch for a stop of the chat's running response (``stopped`` is set)."""

    async def stop(self, chat: ChatKey, *, deleted: bool = False) -> None:
        """Stop the chat's running response; ``deleted``: the chat is being deleted, so its
        holders also let it go."""


class ResponseLog(Protocol):
    """The framed chunks (SSE events) one active response has sent, in order. A log kept in
    this process may also have ``append_now(events)``, the same without waiting."""

    async def append(self, events: Sequence[bytes]) -> None: ...

    async def close(self) -> None:
        """The response ended: followers get the rest and stop."""


class ChunkLogs(Protocol):
    async def open(self, chat: ChatKey, holder: ChatLease) -> ResponseLog:
        """Start the log of the chat's new active response (replacing an ended one), written
        under ``holder``: if that lease lapses before the log ends, its producer is gone."""

    async def follow(self, chat: ChatKey) -> AsyncGenerator[bytes, None] | None:
        """The chat's active response from its first event, then live until it ends; None
        when the chat has no active response. If the producer dies first, the follower gets
        an ``error`` event and ``[DONE]`` once its lease has lapsed. A log whose producer is
        already known to be dead is none: None once its lease has lapsed, so the caller can
        take the chat and finish its cut turn."""

    async def with_active_response(self, chats: Sequence[ChatKey]) -> set[ChatKey]:
        """Which of the chats have an active response now (a log whose producer holds its
        chat), without reading any log: for a list of chats."""

    async def discard(self, chat: ChatKey) -> None:
        """Drop the chat's log, for a chat being deleted (whose lease the caller holds, so no
        response of it runs): it can no longer be resumed."""


@dataclass(frozen=True)
class SignIn:
    """A sign-in under way: the provider's redirect that brings its ``state`` back answers
    the chat's credential request ``call_id``, with ``answer`` (ADK's ``AuthConfig`` as the
    request made it) and the URL the provider redirected to."""

    chat: ChatKey
    call_id: str
    answer: dict[str, Any]


class SignIns(Protocol):
    async def bind(self, state: str, sign_in: SignIn, ttl_seconds: float) -> None:
        """Keep ``sign_in`` under ``state`` (a new, unguessable value) for ``ttl_seconds``."""

    async def take(self, state: str) -> SignIn | None:
        """The sign-in under ``state``, once: None for a state never bound, taken before, or
        bound longer ago than its time to live."""


@dataclass(frozen=True)
class Coordination:
    leases: ChatLeases
    pending: PendingCalls
    stops: StopSignals
    chunk_logs: ChunkLogs
    sign_ins: SignIns
