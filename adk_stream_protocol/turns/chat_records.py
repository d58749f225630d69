"""What a response is recorded in: the chat's messages, and a recording when those are on.

The chat's messages are kept as the page held them when each response ended
(docs/adr/0042): the messages the client held when it sent the request, with the response's
delivered chunks folded onto them as ``useChat`` folds them (``protocol/message_fold.py``).
A request that sent only the chat's last message(s) is first completed from the record
(``complete``, docs/adr/0069): the record stays whole, and only the messages a response adds
or changes are written. They are stored when the response begins (a page that reloads
mid-answer finds its question and resumes the answer onto it) and again before its
``[DONE]`` goes out, so a page that has the end of a response finds it in
``GET /chats/{chatId}``. Both writes happen under the chat's lease.

A turn's cost of the record follows what it sends and adds, not what the chat holds: the
request is joined on the record's outline (ids and digests, ``join_outline``), the record's
messages before the sent ones stand in the completed chat as placeholders (``_Recorded``:
their id only, never written), and both writes leave the chat's first messages that the
record holds as they are alone (``record_messages(since=...)``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from adk_stream_protocol.coordination.base import ChatKey, ChatLease, WaitingCall
from adk_stream_protocol.observability.recording import Recorder
from adk_stream_protocol.protocol.chunks import AiSdkVersion, BaseChunk, StartChunk, Transport
from adk_stream_protocol.protocol.credentials import messages_without_secrets
from adk_stream_protocol.protocol.message_chunks import message_chunks
from adk_stream_protocol.protocol.message_fold import Message, MessageFold
from adk_stream_protocol.protocol.tool_calls import APPROVAL_CANCELLED_RESULT, DISCONNECTED_RESULT
from adk_stream_protocol.protocol.ui_messages import ChatRequest
from adk_stream_protocol.store.chat_index import ChatIndex
from adk_stream_protocol.turns.chat_joins import join_chat, join_outline, keep_late_outputs

logger = logging.getLogger(__name__)


class DeliveryRecord(Protocol):
    """Sees the chunks a response delivers, then its end (a recording). Called on the event
    loop: it must neither block nor raise."""

    def delivered(self, chunks: Sequence[BaseChunk]) -> None: ...

    def ended(self) -> None: ...


class _Recorded(dict[str, Any]):
    """One of the record's messages before the ones a request sent, in the completed chat:
    its id only (what a fold looks at). Never written: the record holds it."""


class MessageRecord:
    """One response's messages: the fold of what it delivers, stored by ``save``.
    ``held``: the fold's first messages that the record holds as they are."""

    def __init__(
        self,
        chats: ChatIndex,
        app: str,
        chat: ChatKey,
        fold: MessageFold,
        *,
        rebuilds: bool = False,
        held: Sequence[Message] = (),
    ) -> None:
        self._chats = chats
        self._app = app
        self._chat = chat
        self._fold = fold
        self._rebuilds = rebuilds
        self._failed = False
        self._held = held

    @property
    def chat(self) -> ChatKey:
        return self._chat

    def rebuilt(self, start: Sequence[BaseChunk]) -> list[BaseChunk]:
        """Before ``start`` is delivered: when the response continues the message the client
        held (``start`` names it), the chunks that rebuild that message, for the chunk log
        only."""
        message = self._fold.message
        ids = [c.message_id for c in start if isinstance(c, StartChunk)]
        if not self._rebuilds or not message.get("parts") or ids != [message.get("id")]:
            return []
        try:
            return message_chunks(message, self._fold.ai_sdk)
        except Exception:
            # A message the page sent that no chunk rebuilds: resumed as before, from empty.
            logger.exception("continued message not rebuilt chat=%s", self._chat[1])
            return []

    def delivered(self, chunks: Sequence[BaseChunk]) -> None:
        if self._failed:
            return
        try:
            for chunk in chunks:
                self._fold.apply(chunk.to_wire_dict())
        except Exception:
            # A bug of the fold must not cost the response its chunks: the record is left
            # as it was at the response's start, for the next response to write again.
            self._failed = True
            logger.exception("chat messages not folded chat=%s", self._chat[1])

    async def save(self) -> None:
        """Store the messages as the response left them. A failure is logged and the response
        goes on: it has reached its client, and the chat's next response writes them again."""
        user, chat_id = self._chat
        if self._failed:
            return
        try:
            messages = self._fold.messages
            # The fold replaces a message in place or adds one: the first it changed bounds
            # what is written (a response continuing one of the record's earlier messages).
            since = next(
                (at for at, message in enumerate(self._held) if messages[at] is not message),
                len(self._held),
            )
            if any(isinstance(m, _Recorded) for m in messages[since:]):
                # Placeholders to write: the record's messages, read (a rare response).
                stored = await self._chats.get_chat(self._app, user, chat_id)
                if stored is None:
                    return
                messages = [
                    stored.messages[at] if isinstance(m, _Recorded) else m
                    for at, m in enumerate(messages)
                ]
            await self._chats.record_messages(
                self._app, user, chat_id, messages, create=False, since=since
            )
        except Exception as exc:
            logger.warning(
                "chat messages not stored user=%s chat=%s error=%s",
                user,
                chat_id,
                type(exc).__name__,
            )


class ResponseRecords:
    """A response's records: its recording (when on) and the chat's messages."""

    def __init__(
        self,
        recording: DeliveryRecord | None,
        messages: MessageRecord | None,
        lease: ChatLease | None = None,
    ) -> None:
        self._recording = recording
        self._messages = messages
        self._lease = lease  # the messages are stored at the end only while it is held

    def rebuilt(self, start: Sequence[BaseChunk]) -> list[BaseChunk]:
        """What a resumer reads after ``start``: the continued message rebuilt."""
        return self._messages.rebuilt(start) if self._messages is not None else []

    def delivered(self, chunks: Sequence[BaseChunk]) -> None:
        if self._recording is not None:
            self._recording.delivered(chunks)
        if self._messages is not None:
            self._messages.delivered(chunks)

    async def settle(self) -> None:
        """Before the response's ``[DONE]``: the messages stored, unless the response lost its
        chat: another holder may have it and its record (a late result applied there), which a
        run that lost it does not write over."""
        if self._messages is None:
            return
        if self._lease is not None and not self._lease.held():
            chat_id = self._messages.chat[1]
            logger.info("chat messages not stored: the response lost its chat chat=%s", chat_id)
            return
        await self._messages.save()

    def ended(self) -> None:
        if self._recording is not None:
            self._recording.ended()


class ChatRecords:
    """Where this app's responses are recorded: its chats' messages in the chat index (under
    the app's name), and each response's recording when those are on."""

    def __init__(self, index: ChatIndex, app: str, recorder: Recorder) -> None:
        self.index = index
        self._app = app
        self._recorder = recorder

    async def complete(
        self, chat: ChatKey, request: ChatRequest, *, max_added_bytes: int
    ) -> ChatRequest:
        """The request with the chat's recorded messages before the ones it sent, under the
        chat's lease, before it is planned: 409 when it does not fit the record, 413 when it
        adds more than ``max_added_bytes`` to it."""
        user, chat_id = chat
        outline = await self.index.outline(self._app, user, chat_id)
        if outline is None or (outline.in_rows and self._recorder.directory is None):
            joined = join_outline(outline, request, max_added_bytes=max_added_bytes)
            ids = outline.ids[: joined.start] if outline is not None and joined else []
            # A fold finds the message it continues by id: a placeholder is never one.
            if joined is not None and request.message_id not in ids:
                earlier = [_Recorded(id=message_id) for message_id in ids]
                return request.completed(earlier, since=joined.since)
        # The stored messages: an earlier version's whole chat (written whole next), a sent
        # message that differs from an earlier one of the record, or a recording to make.
        stored = await self.index.get_chat(self._app, user, chat_id)
        held = stored.messages if stored is not None else None
        earlier = join_chat(held, request, max_added_bytes=max_added_bytes)
        in_rows = outline is None or outline.in_rows
        # A tool output the record learnt late is not undone by the page's old copy.
        kept = keep_late_outputs(held or [], request.chat_messages, len(earlier))
        return request.completed(earlier, since=len(earlier) if in_rows else 0, sent=kept)

    async def open(
        self,
        transport: Transport,
        chat: ChatKey,
        request: ChatRequest | None,
        *,
        ai_sdk: AiSdkVersion | None = None,
        lease: ChatLease | None = None,
    ) -> ResponseRecords:
        """The records of a response that begins now, under the chat's lease (``ai_sdk``: the
        client's version, when the transport knows it better than the request). The messages
        the client held are stored at once; the chat is created only by a new user message,
        so a chat deleted meanwhile stays deleted. ``lease``: the response's end stores them
        again only while it is held."""
        chats, app = self.index, self._app
        version: AiSdkVersion = ai_sdk or (request.ai_sdk if request is not None else 6)
        recording = self._recorder.open(transport, request, ai_sdk=version) if request else None
        user, chat_id = chat
        if request is None:  # a backend's result, a cut turn finished: the stored messages go on
            messages, since = await self._stored(chat)
        else:
            # The client's state when it sent the request, as sent: an edit or a regeneration
            # has cut it at the branch, and after a stop only the page knows how far it read.
            # A credential the page answered with is not kept (docs/adr/0065).
            messages = messages_without_secrets(request.chat_messages)
            new_message = request.last_message.role == "user"
            since = request.record_since
            # The end records the chat again (its ``updated_at``): the start leaves the
            # chat's row alone when only messages change.
            if not await chats.record_start(
                app, user, chat_id, messages, create=new_message, since=since
            ):
                return ResponseRecords(recording, None)  # deleted: nothing to keep
        fold = MessageFold(
            messages,
            ai_sdk=version,
            trigger=request.trigger if request is not None else "submit-message",
            message_id=request.message_id if request is not None else None,
        )
        # /live?chatId= resumes onto the message its page holds: its log stays as it was.
        rebuilds = transport != "live"
        record = MessageRecord(chats, app, chat, fold, rebuilds=rebuilds, held=messages[:since])
        return ResponseRecords(recording, record, lease)

    async def _stored(self, chat: ChatKey) -> tuple[list[Message], int]:
        """The record's messages for a response with no request (its last continued), and how
        many of them are its own placeholders: all but the last, when they are rows."""
        user, chat_id = chat
        outline = await self.index.outline(self._app, user, chat_id)
        if outline is not None and outline.in_rows and outline.last is not None:
            earlier: list[Message] = [_Recorded(id=message_id) for message_id in outline.ids[:-1]]
            return [*earlier, outline.last], len(earlier)
        stored = await self.index.get_chat(self._app, user, chat_id)
        return (stored.messages if stored is not None else []), 0

    async def record_unanswered(self, chat: ChatKey, calls: Sequence[WaitingCall]) -> None:
        """Calls that ended unanswered with no response open (their socket left): ended in
        the chat's record as the page would show them had it been there,
        ``tool-output-error`` with the text the model got (a cancelled approval's, or the
        browser call's "the user left"), so a reloaded page offers no answer the server would
        refuse."""
        chats, app = self.index, self._app
        user, chat_id = chat
        try:
            stored = await chats.get_chat(app, user, chat_id) if calls else None
            if stored is None:
                return
            fold = MessageFold(stored.messages)  # continues the last assistant message
            for call in calls:
                ended = (
                    DISCONNECTED_RESULT if call.approval_id is None else APPROVAL_CANCELLED_RESULT
                )
                fold.apply(
                    {
                        "type": "tool-output-error",
                        "toolCallId": call.call_id,
                        "errorText": ended["error"],
                    }
                )
            await chats.record_messages(app, user, chat_id, fold.messages, create=False)
        except Exception as exc:  # the socket's run must still end: logged, the record stays
            logger.warning("chat record not updated chat=%s error=%s", chat_id, type(exc).__name__)
