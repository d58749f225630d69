"""Joining a request to the chat's record (docs/adr/0069): which of the record's messages come
before the ones the request sent, or a 409 when the page's idea of the chat is not the
server's.

A page may send the whole chat (stock ``useChat``), only its last message(s) (the AI SDK's
persistence recipe, our client's ``sendOnlyLastMessages``), or the recipe's ``{ id, message }``.
The completed chat is the record's messages up to where the sent ones begin, then the sent
ones: it is what the planner and the record see, so everything downstream is as for a whole
chat. The sent messages begin

- at the record's first message (their first id is the record's first): the whole chat;
- at a message the record holds (their first id is found there): the record up to it;
- after the record (their first message is one the record does not hold): a new user
  message continues any chat, so the whole record comes first. Anything else unknown
  first (an assistant message to continue, an edit, a regeneration) is a 409.

Then the completed chat is held against the record, by message ids (contents may differ: the
page's last message holds its answers, and after a stop only the page knows how far it read):

- before its last message, it must be the record's messages in the record's order, as far as
  the record goes; a message the page holds beyond the record (one whose response was never
  recorded) is taken as the page's;
- its last message may stand where the record holds more only if a regeneration or an edit
  explains the cut: the record's message at that place is the one regenerated from or edited
  (same id). A continuation (the page's answers to the record's last assistant message) or a
  re-sent message replaces the record's last message, never one before it;
- a regeneration or an edit names a message the record must hold.

Everything else means the page missed messages another tab or process added, or holds a chat
the server does not: 409, saying to reload the chat from ``GET /chats/{chatId}``. An empty or
missing record joins nothing: the request is the whole chat (a new chat, a store that lost
it). A record that ends with an assistant message with no parts (a response stopped before any
of it reached the page, which never held that message) is taken as ending before it.

A tool output the record learnt late (docs/adr/0073: a late result applied, so the call's
part is output-available where the page still shows the server's *outcome unknown*) is kept:
a page that sends its old copy of a message before its last gets the record's part in it
(``keep_late_outputs``), so a stale copy never writes the unknown outcome back.

The request may add at most ``max_added_bytes`` of JSON to the record: its sent messages
that the record does not hold as sent (413).

A turn joins on the record's outline (``join_outline``: the ids and digests of its messages
and its last message), so what it costs follows what the request sends, not what the chat
holds: a sent message is held as sent when its digest is the stored one, or, for the record's
last message, when it is equal to it. Only a sent message that differs from a stored one
before the last (an edit or a regeneration of an earlier message, a whole chat whose JSON
differs from the stored in key order) needs the stored messages: then ``join_chat`` on them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.tool_calls import OUTCOME_UNKNOWN_RESULT
from adk_stream_protocol.protocol.ui_messages import ChatRequest
from adk_stream_protocol.store.chat_index import ChatOutline, message_digest, message_json

RELOAD = "reload the chat (GET /chats/{chatId}) and send again"


def join_chat(
    stored: Sequence[Mapping[str, Any]] | None,
    request: ChatRequest,
    *,
    max_added_bytes: int,
) -> list[Any]:
    """The record's messages that come before the request's own, or ``RequestError``: 409
    when the request does not fit the record, 413 when it adds too much to it."""
    held = list(stored or [])
    if held and _unseen_answer(held[-1]):
        held.pop()
    sent: list[Any] = request.chat_messages
    if not held:
        _check_added(sent, [], 0, max_added_bytes)
        return []
    held_ids: list[Any] = [message.get("id") for message in held]
    sent_ids = [message.id for message in request.messages]
    first = request.messages[0]
    if first.id in held_ids:
        start = held_ids.index(first.id)
    else:
        _check_unknown_first(request)
        start = len(held)
    _check_fits(held_ids, [*held_ids[:start], *sent_ids], request)
    _check_added(sent, held, start, max_added_bytes)
    return held[:start]


@dataclass(frozen=True)
class OutlineJoin:
    """Where the sent messages begin in the record (``start``: the record's messages before
    them), and how many of the completed chat's first messages the record holds as they are
    (``since``)."""

    start: int
    since: int


def join_outline(
    outline: ChatOutline | None, request: ChatRequest, *, max_added_bytes: int
) -> OutlineJoin | None:
    """``join_chat`` on the record's outline: the join, or ``RequestError`` (409, 413), or
    ``None`` when a sent message differs from a stored one before the record's last (then
    ``join_chat`` on the stored messages says what it adds)."""
    ids: list[Any] = list(outline.ids) if outline is not None else []
    digests = list(outline.digests) if outline is not None else []
    last = outline.last if outline is not None else None
    if ids and last is not None and _unseen_answer(last):
        ids.pop()
        digests.pop()
        last = None
    if not ids:
        _check_added(request.chat_messages, [], 0, max_added_bytes)
        return OutlineJoin(0, 0)
    first = request.messages[0]
    if first.id in ids:
        start = ids.index(first.id)
    else:
        _check_unknown_first(request)
        start = len(ids)
    _check_fits(ids, [*ids[:start], *(m.id for m in request.messages)], request)
    added, since = 0, start
    for at, message in enumerate(request.chat_messages, start):
        text = message_json(message)
        if at < len(ids) and digests[at] == message_digest(text):
            since += since == at  # the record's own, from its first on
            continue
        if at < len(ids) - 1 or (at == len(ids) - 1 and last is None):
            return None
        if at == len(ids) - 1 and message == last:
            continue
        if at == len(ids) - 1 and last is not None and _settled_late(last, message):
            return None  # the record's part is kept: the stored messages are read
        added += len(text.encode())
        if added > max_added_bytes:
            raise _too_much(max_added_bytes)
    return OutlineJoin(start, since)


def keep_late_outputs(
    held: Sequence[Mapping[str, Any]], sent: list[Any], start: int
) -> list[Any] | None:
    """The sent messages (the first at the record's ``start``) with the record's late-settled
    tool parts kept in each one before the last that the record holds; None when none is."""
    kept, changed = list(sent), False
    for offset, message in enumerate(sent[:-1]):
        at = start + offset
        if at >= len(held) or not isinstance(message, dict):
            continue
        stored = held[at]
        if stored.get("id") != message.get("id") or not _settled_late(stored, message):
            continue
        settled = {p.get("toolCallId"): p for p in _settled_parts(stored)}
        kept[offset] = {
            **message,
            "parts": [
                dict(settled[part["toolCallId"]]) if _unknown_part(part, settled) else part
                for part in message.get("parts") or []
            ],
        }
        changed = True
    return kept if changed else None


def _settled_late(stored: Mapping[str, Any], sent: Mapping[str, Any]) -> bool:
    """Whether the page's copy of a message shows a call as outcome unknown that the record
    holds with its output."""
    settled = {p.get("toolCallId"): p for p in _settled_parts(stored)}
    return bool(settled) and any(_unknown_part(p, settled) for p in sent.get("parts") or [])


def _settled_parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        part
        for part in message.get("parts") or []
        if isinstance(part, dict) and part.get("state") == "output-available"
    ]


def _unknown_part(part: Any, settled: Mapping[Any, Mapping[str, Any]]) -> bool:
    return (
        isinstance(part, dict)
        and part.get("toolCallId") in settled
        and part.get("state") == "output-error"
        and part.get("errorText") == OUTCOME_UNKNOWN_RESULT["error"]
    )


def _unseen_answer(message: Mapping[str, Any]) -> bool:
    """An answer with nothing in it: the record's start of a response stopped before anything
    reached the page, which then never held the message. Not held against the page."""
    return message.get("role") == "assistant" and not message.get("parts")


def _check_unknown_first(request: ChatRequest) -> None:
    """The sent messages begin with one the record does not hold: only a new user message
    continues the record; what else would continue it is not there."""
    first, last = request.messages[0], request.last_message
    if request.trigger == "regenerate-message":
        raise _conflict(f"message {last.id!r} to regenerate from is not in this chat's record")
    if request.message_id is not None:
        what = "edited" if last.role == "user" else "continued"
        raise _conflict(f"message {request.message_id!r} to be {what} is not in this chat's record")
    if first.role != "user":
        raise _conflict(
            f"the request continues message {first.id!r}, which is not in this chat's record"
        )


def _check_fits(held_ids: list[Any], chat_ids: list[Any], request: ChatRequest) -> None:
    last_at = len(chat_ids) - 1
    last = request.last_message
    for at in range(min(last_at, len(held_ids))):
        if chat_ids[at] != held_ids[at]:
            raise _conflict(
                f"this page's chat differs from the server's at message {at + 1} "
                f"({chat_ids[at]!r}, the server holds {held_ids[at]!r})"
            )
    regenerating = request.trigger == "regenerate-message"
    editing = not regenerating and last.role == "user" and request.message_id == last.id
    if last_at >= len(held_ids):  # the page holds all the record does, and more
        if regenerating or editing:
            what = "regenerate from" if regenerating else "edit"
            raise _conflict(f"message {last.id!r} to {what} is not in this chat's record")
        return
    if held_ids[last_at] != last.id:
        if regenerating or editing:
            what = "regenerate from" if regenerating else "edit"
            raise _conflict(
                f"message {last.id!r} to {what} is not message {last_at + 1} of this chat's record"
            )
        raise _conflict(
            f"the chat has {len(held_ids) - last_at} message(s) this page does not show "
            "(sent from another tab?)"
        )
    if len(held_ids) > last_at + 1 and not (regenerating or editing):
        if last.role == "user":
            raise _conflict(
                f"message {last.id!r} was already sent in this chat (use regenerate to answer "
                "it again); if this page misses messages"
            )
        raise _conflict(
            f"message {last.id!r} is not the chat's last: the chat has "
            f"{len(held_ids) - last_at - 1} message(s) after it that this page does not show"
        )


def _check_added(
    sent: list[Any], held: list[Mapping[str, Any]], start: int, max_added_bytes: int
) -> None:
    """The sent messages the record does not hold as sent, as JSON bytes, within the limit."""
    added = 0
    for offset, message in enumerate(sent):
        at = start + offset
        if at < len(held) and held[at] == message:
            continue
        added += len(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode())
        if added > max_added_bytes:
            raise _too_much(max_added_bytes)


def _too_much(max_added_bytes: int) -> RequestError:
    return RequestError(
        413,
        f"the request adds more than {max_added_bytes} bytes to the chat's record "
        "(its messages the server does not hold)",
    )


def _conflict(why: str) -> RequestError:
    return RequestError(409, f"{why}; {RELOAD}")
