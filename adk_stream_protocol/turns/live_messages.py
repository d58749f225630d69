"""What a user message on a ``/live?chatId=`` socket sends the live model, and the rewind that
a regenerate or an edit needs first (docs/adr/0046).

A new message goes to the socket's run as it is. A regenerate (``trigger:
"regenerate-message"``) or an edit (``sendMessage`` with the ``messageId`` of a user message)
answers an earlier message again, and the live model cannot forget what it has heard: it got
the chat's history when it connected and has kept every turn since. So the chat is planned
as ``POST /stream`` plans it (``plan_turn``: which user message's event to rewind to, and what
to send), the socket's turn is abandoned as a new message abandons it, then
``rewind_live_chat`` ends the run, rewinds the session to before that event
(``Bridge.rewind``) and starts the run again: the model connects anew with the rewound
history, and the message is its next turn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from google.genai import types

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.inputs import is_voice_turn, user_content
from adk_stream_protocol.protocol.ui_messages import ChatRequest
from adk_stream_protocol.store.history import USER_MESSAGE_ID_KEY
from adk_stream_protocol.turns.bridge import Bridge
from adk_stream_protocol.turns.live_runs import LiveRun
from adk_stream_protocol.turns.planning import plan_turn

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveMessage:
    """What a user message on the socket sends the live model."""

    content: types.Content | None  # None: a voice turn, whose audio follows
    user_message_id: str  # stamped on the event ADK stores for it
    # A regenerate or an edit: the chat is rewound to before this event first.
    rewind_before_event_id: str | None = None

    @property
    def stamps(self) -> dict[str, str]:
        """The metadata of the event ADK stores for the message (``LiveRun.send_content``)."""
        return {USER_MESSAGE_ID_KEY: self.user_message_id}


def answers_again(request: ChatRequest) -> bool:
    """A regenerate, or an edit: the request names a message the chat may hold already."""
    return request.trigger == "regenerate-message" or request.message_id is not None


async def plan_live_message(
    bridge: Bridge, chat: ChatKey, request: ChatRequest, *, last_sent: str | None
) -> LiveMessage:
    """What the request's user message sends, or ``RequestError`` before anything changes.
    ``last_sent``: the user message sent last on this socket."""
    last = request.last_message
    if not answers_again(request):
        if last.id == last_sent:
            raise RequestError(409, f"message {last.id!r} was already sent on this connection")
        return LiveMessage(None if is_voice_turn(last) else user_content(last), last.id)
    if is_voice_turn(last):
        raise RequestError(422, "a voice message cannot be answered again; speak it again")
    # The plan reads what the session holds now; the run may still add to the turn it will
    # abandon, never before the user message to rewind to.
    session = await bridge.sessions.open(*chat)
    plan = plan_turn(request, session.events)
    if plan.new_message is None:  # pragma: no cover - a user message is always sent
        raise RequestError(422, "the request sends no user message")
    return LiveMessage(
        plan.new_message, plan.user_message_id or last.id, plan.rewind_before_event_id
    )


async def rewind_live_chat(
    bridge: Bridge, run: LiveRun, chat: ChatKey, message: LiveMessage
) -> Exception | None:
    """End the run, rewind the chat to before the message's event, and start the run again on
    it. Returns what ``LiveRun.use`` returns: the new run's failure, for the response."""
    assert message.rewind_before_event_id is not None
    await run.close()
    try:
        session = await bridge.sessions.open(*chat)
        await bridge.rewind(session, message.rewind_before_event_id)
        logger.info("live chat=%s rewound; the run starts again", chat[1])
    finally:
        await run.reopen()  # a start that fails is tried again, and reported, by ``use``
    # A history that ends on the user's side is answered at connect: not in this response.
    await run.wait_model_idle()
    return await run.use()
