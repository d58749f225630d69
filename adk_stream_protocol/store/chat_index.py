"""The chat index: each chat's messages as the page held them, its title, and when it last
changed, so that chats can be listed and restored without reading ADK's events
(docs/adr/0043-chat-index.md).

One row per (app, user, chat) and one per message, in the session store's own database
(``chat_tables.py``: tables beside ADK's, on SQLite or PostgreSQL; a write stores only the
messages that are new or changed), or in this process for an in-memory store
(``InMemoryChatIndex``). Both follow the same rules, which keep a chat consistent when
requests on it race (several tabs, several processes):

- ``record_messages`` writes the messages, the title and what waits in one step. With
  ``create=True`` it creates the chat if it is missing (two first writes of one chat make
  one row); with ``create=False`` it only updates a chat that exists, so the end of a
  response never brings back a chat deleted meanwhile.
- A title the user gave (``rename``) is kept by every later ``record_messages``.
- ``updated_at`` is the last write's time (``record_messages``, or ``record_start`` when it
  changes more than the messages: otherwise the response's end moves it), and never goes
  back (two processes' clocks may differ a little). A rename is not activity: it does not
  move the chat.
- Listing is newest activity first, ties by chat id, and pages by an opaque cursor that
  names the last chat given: a chat written between two pages moves to the top (the page
  the user already has) and is neither repeated nor makes another one skipped.

The index also holds the chat's *late results* (docs/adr/0073): a tool's result that a run
which had lost its chat could not store in the session. The chat's current holder applies
them (``turns/late_results.py``) and drops them here; the stale run never writes the session.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from adk_stream_protocol.protocol.ui_messages import CHAT_ID_PATTERN

Waiting = Literal["approval", "browser"]

TITLE_MAX_CHARS = 80
UNTITLED = "New chat"
# How far back a shortened title looks for a space to cut at, rather than cut a word.
_TITLE_WORD_SLACK = 24
_ELLIPSIS = "…"


@dataclass(frozen=True)
class ChatSummary:
    chat_id: str
    title: str
    created_at: datetime  # UTC
    updated_at: datetime  # UTC: the last record_messages
    waiting: Waiting | None  # what the last assistant message waits for, when recorded


@dataclass(frozen=True)
class ChatRecord:
    summary: ChatSummary
    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class ChatOutline:
    """What a turn needs of a chat's record to join a request to it: each message's id and
    digest (of its stored JSON), and the last message itself. ``in_rows``: the messages are the
    index's rows (False: an earlier version's whole-chat column, whose messages a write must
    store again whole)."""

    ids: list[Any]
    digests: list[str]
    last: dict[str, Any] | None
    in_rows: bool = True


@dataclass(frozen=True)
class ChatPage:
    chats: list[ChatSummary]
    next_cursor: str | None  # None: this is the last page


@dataclass(frozen=True)
class LateResult:
    """A tool's result that its run could not store because it had lost the chat (its write
    refused as stale, or a kept result given up): for the chat's holder to apply. ``author``
    and ``invocation_id``: the call's agent and invocation, which the applied result is stored
    in."""

    call_id: str
    tool_name: str
    response: dict[str, Any]
    invocation_id: str
    author: str
    created_at: datetime  # UTC


class StaleRecordError(RuntimeError):
    """A write said its leading messages are the record's own, and the record no longer holds
    them (an earlier version wrote the chat whole meanwhile, or it was deleted and made
    again): nothing was written."""


class InvalidCursorError(ValueError):
    """A cursor this index did not give out (or one made unreadable on the way)."""


class ChatIndex(ABC):
    """The chats of an app's users. Every method is one atomic step of the store."""

    @abstractmethod
    async def prepare(self) -> None:
        """Make the store ready (its table) before the first request."""

    @abstractmethod
    async def record_messages(
        self,
        app: str,
        user: str,
        chat_id: str,
        messages: list[dict[str, Any]],
        *,
        create: bool = True,
        since: int = 0,
    ) -> bool:
        """Store the chat's messages (JSON values: UIMessage dicts), its title (the first
        user text, unless renamed) and what it waits for; ``updated_at`` is now. Whether the
        chat is recorded: False only when ``create`` is off and the chat does not exist.

        ``since``: the first ``since`` messages are the record's own, as it holds them (read
        under the chat's lease): they are neither read nor written, so a turn costs what it
        changes, not what the chat holds (``messages[:since]`` may be placeholders; the last
        message is always written, so it never is one).
        ``StaleRecordError`` when the record does not hold that many messages as rows."""

    @abstractmethod
    async def record_start(
        self,
        app: str,
        user: str,
        chat_id: str,
        messages: list[dict[str, Any]],
        *,
        create: bool = True,
        since: int = 0,
    ) -> bool:
        """``record_messages`` at a response's start, whose end records the chat again:
        when the chat exists and its title and what it waits for stay as they are,
        ``updated_at`` stays too and only the messages are written (on SQLite a rollback
        journal's pages fewer)."""

    @abstractmethod
    async def outline(self, app: str, user: str, chat_id: str) -> ChatOutline | None:
        """The chat's message ids and digests and its last message (``None``: no such chat),
        without reading every message."""

    @abstractmethod
    async def list_chats(
        self, app: str, user: str, *, limit: int, cursor: str | None = None
    ) -> ChatPage:
        """The user's chats, newest activity first: ``limit`` of them after ``cursor``
        (a page's ``next_cursor``). ``InvalidCursorError`` for a cursor not given out here."""

    @abstractmethod
    async def get_chat(self, app: str, user: str, chat_id: str) -> ChatRecord | None: ...

    @abstractmethod
    async def rename(self, app: str, user: str, chat_id: str, title: str) -> bool:
        """Give the chat a title that ``record_messages`` keeps; False for no such chat."""

    @abstractmethod
    async def delete(self, app: str, user: str, chat_id: str) -> bool:
        """Forget the chat; False for no such chat."""

    @abstractmethod
    async def keep_late_result(self, app: str, user: str, chat_id: str, late: LateResult) -> None:
        """Hand a late result to the chat's holder; a second one for the same call is
        ignored (the first is the run's result)."""

    @abstractmethod
    async def late_results(self, app: str, user: str, chat_id: str) -> list[LateResult]:
        """The chat's late results not yet applied, oldest first."""

    @abstractmethod
    async def drop_late_result(self, app: str, user: str, chat_id: str, call_id: str) -> None:
        """Forget the call's late result: applied, or dropped by the holder."""

    @abstractmethod
    async def take_fencing_token(self, app: str, user: str, chat_id: str, generation: int) -> int:
        """A new fencing token for the chat's holder whose lease has ``generation``: the
        higher of it and one more than the last token taken (docs/adr/0074). Kept as long as
        the store, deleting the chat included, so a token never repeats."""

    async def close(self) -> None:  # noqa: B027 - most indexes hold nothing of their own
        """Let go of what the index opened itself (not a store it shares)."""


# -- what a row holds, from the messages -------------------------------------------------------


def title_of(messages: list[dict[str, Any]]) -> str:
    """The first user message's text on one line (control characters and runs of whitespace
    as one space), at most ``TITLE_MAX_CHARS`` (cut at a word, with an ellipsis); ``UNTITLED``
    when no user message has text."""
    for message in messages:
        text = title_text(message)
        if text:
            return shorten(text, TITLE_MAX_CHARS)
    return UNTITLED


def title_text(message: dict[str, Any]) -> str:
    """A user message's text on one line ('' for any other message): what a title is made of.
    A message with some is marked in the index, so a write that leaves the chat's first ones
    alone knows whether they hold its title without reading them."""
    if message.get("role") != "user":
        return ""
    texts = [
        part["text"]
        for part in message.get("parts") or []
        if isinstance(part, dict)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    ]
    return " ".join(_without_controls(" ".join(texts)).split())


# The C0 and C1 control characters (a NUL, which PostgreSQL's text cannot hold, among them).
_CONTROLS = frozenset(chr(code) for code in (*range(32), *range(127, 160)))
_CONTROLS_AS_SPACES = str.maketrans(dict.fromkeys(_CONTROLS, " "))


def is_control(char: str) -> bool:
    return char in _CONTROLS


def _without_controls(text: str) -> str:
    return text.translate(_CONTROLS_AS_SPACES)


def shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - len(_ELLIPSIS)]
    space = cut.rfind(" ")
    if space >= len(cut) - _TITLE_WORD_SLACK:
        cut = cut[:space]
    return cut.rstrip() + _ELLIPSIS


def waiting_of(messages: list[dict[str, Any]]) -> Waiting | None:
    """What the chat waits for, from its last message when that is the assistant's: an
    approval (a tool part in ``approval-requested``), else the browser (a tool part in
    ``input-available`` that the provider does not run), else nothing."""
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "assistant":
        return None
    tools = [
        part
        for part in last.get("parts") or []
        if isinstance(part, dict)
        and isinstance(part.get("type"), str)
        and (part["type"].startswith("tool-") or part["type"] == "dynamic-tool")
    ]
    if any(part.get("state") == "approval-requested" for part in tools):
        return "approval"
    if any(
        part.get("state") == "input-available" and not part.get("providerExecuted")
        for part in tools
    ):
        return "browser"
    return None


def message_json(message: dict[str, Any]) -> str:
    """A message as stored (compact JSON; a value that is not JSON raises here)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def message_digest(stored: str) -> str:
    """What tells a stored message from a changed one: a digest of its stored JSON (128
    bits, as hex)."""
    return hashlib.blake2b(stored.encode(), digest_size=16).hexdigest()


# -- time and cursors ---------------------------------------------------------------------------


def now_us() -> int:
    """Now, in microseconds since the epoch: the rows' clock (exact to compare and page by)."""
    return time.time_ns() // 1000


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_time(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def us_of(moment: datetime) -> int:
    """``utc_time``'s inverse, exact."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


def encode_cursor(updated_us: int, chat_id: str) -> str:
    """The position after a chat, opaque to the client."""
    raw = f"{updated_us}.{chat_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidCursorError("not a cursor of this list") from None
    stamp, _, chat_id = raw.partition(".")
    if not stamp.isdigit() or len(stamp) > 19 or not re.fullmatch(CHAT_ID_PATTERN, chat_id):
        raise InvalidCursorError("not a cursor of this list")
    return int(stamp), chat_id


def check_limit(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"a page holds at least one chat, not {limit}")


# -- in this process ----------------------------------------------------------------------------


@dataclass
class _Row:
    title: str
    title_set: bool
    created_us: int
    updated_us: int
    waiting: Waiting | None
    # Each message's JSON, as a database holds it: what is read back is a copy.
    messages: list[str]
    # Each message's id and whether it has a title's text (what the tables' columns hold).
    ids: list[Any]
    digests: list[str]
    titled: list[bool]

    def summary(self, chat_id: str) -> ChatSummary:
        return ChatSummary(
            chat_id, self.title, utc_time(self.created_us), utc_time(self.updated_us), self.waiting
        )


class InMemoryChatIndex(ChatIndex):
    """The index of an in-memory session store: gone with the process, as its sessions are.
    No method awaits inside, so each is atomic on the event loop."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], dict[str, _Row]] = {}
        self._late: dict[tuple[str, str, str], dict[str, LateResult]] = {}
        self._tokens: dict[tuple[str, str, str], int] = {}

    async def prepare(self) -> None:
        return None

    async def take_fencing_token(self, app: str, user: str, chat_id: str, generation: int) -> int:
        key = (app, user, chat_id)
        token = self._tokens[key] = max(self._tokens.get(key, 0) + 1, generation)
        return token

    async def record_messages(
        self,
        app: str,
        user: str,
        chat_id: str,
        messages: list[dict[str, Any]],
        *,
        create: bool = True,
        since: int = 0,
    ) -> bool:
        return self._record((app, user, chat_id), messages, create=create, since=since)

    async def record_start(
        self,
        app: str,
        user: str,
        chat_id: str,
        messages: list[dict[str, Any]],
        *,
        create: bool = True,
        since: int = 0,
    ) -> bool:
        key = (app, user, chat_id)
        return self._record(key, messages, create=create, since=since, stamp=False)

    def _record(
        self,
        key: tuple[str, str, str],
        messages: list[dict[str, Any]],
        *,
        create: bool,
        since: int,
        stamp: bool = True,
    ) -> bool:
        app, user, chat_id = key
        since = min(since, max(len(messages) - 1, 0))
        tail = messages[since:]
        stored, now = [message_json(message) for message in tail], now_us()
        ids, titled = [m.get("id") for m in tail], [bool(title_text(m)) for m in tail]
        digests = [message_digest(text) for text in stored]
        chats = self._rows.get((app, user), {})
        row = chats.get(chat_id)
        if row is None and not create:
            return False
        if since and (row is None or len(row.messages) < since):
            raise StaleRecordError(f"the record does not hold {since} messages")
        if row is None:
            row = _Row(
                title_of(tail), False, now, now, waiting_of(tail), stored, ids, digests, titled
            )
            self._rows.setdefault((app, user), chats)[chat_id] = row
            return True
        title = row.title
        if not row.title_set and not any(row.titled[:since]):
            title = title_of(tail)
        waiting = waiting_of(tail)
        if stamp or title != row.title or waiting != row.waiting:
            row.updated_us = max(row.updated_us, now)
        row.title, row.waiting = title, waiting
        row.messages = [*row.messages[:since], *stored]
        row.ids = [*row.ids[:since], *ids]
        row.digests = [*row.digests[:since], *digests]
        row.titled = [*row.titled[:since], *titled]
        return True

    async def outline(self, app: str, user: str, chat_id: str) -> ChatOutline | None:
        row = self._rows.get((app, user), {}).get(chat_id)
        if row is None:
            return None
        last = json.loads(row.messages[-1]) if row.messages else None
        return ChatOutline(list(row.ids), list(row.digests), last)

    async def list_chats(
        self, app: str, user: str, *, limit: int, cursor: str | None = None
    ) -> ChatPage:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor is not None else None
        chats = self._rows.get((app, user), {})
        ordered = sorted(
            ((row.updated_us, chat_id, row) for chat_id, row in chats.items()),
            key=lambda item: (item[0], item[1]),
            reverse=True,
        )
        if after is not None:
            ordered = [item for item in ordered if (item[0], item[1]) < after]
        page = ordered[:limit]
        more = len(ordered) > limit
        return ChatPage(
            [row.summary(chat_id) for _, chat_id, row in page],
            encode_cursor(page[-1][0], page[-1][1]) if more else None,
        )

    async def get_chat(self, app: str, user: str, chat_id: str) -> ChatRecord | None:
        row = self._rows.get((app, user), {}).get(chat_id)
        if row is None:
            return None
        return ChatRecord(row.summary(chat_id), [json.loads(text) for text in row.messages])

    async def rename(self, app: str, user: str, chat_id: str, title: str) -> bool:
        row = self._rows.get((app, user), {}).get(chat_id)
        if row is None:
            return False
        row.title, row.title_set = title, True
        return True

    async def delete(self, app: str, user: str, chat_id: str) -> bool:
        chats = self._rows.get((app, user), {})
        self._late.pop((app, user, chat_id), None)
        if chats.pop(chat_id, None) is None:
            return False
        if not chats:
            del self._rows[(app, user)]
        return True

    async def keep_late_result(self, app: str, user: str, chat_id: str, late: LateResult) -> None:
        stored = replace(late, response=json.loads(json.dumps(late.response)))  # a copy, as JSON
        self._late.setdefault((app, user, chat_id), {}).setdefault(late.call_id, stored)

    async def late_results(self, app: str, user: str, chat_id: str) -> list[LateResult]:
        held = self._late.get((app, user, chat_id), {}).values()
        return sorted(held, key=lambda late: late.created_at)

    async def drop_late_result(self, app: str, user: str, chat_id: str, call_id: str) -> None:
        held = self._late.get((app, user, chat_id), {})
        held.pop(call_id, None)
        if not held:
            self._late.pop((app, user, chat_id), None)
