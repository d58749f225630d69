"""A durable mark just before a tool's body runs, so that a crash cannot hide a started call
(docs/adr/0032).

ADK stores a tool's result after the body returns. A process that dies in between leaves the
call without a result, and nothing would tell "never started" (safe to run) from "started,
maybe done" (must never run again). ``ToolStartPlugin`` closes that gap: its
``before_tool_callback`` appends a content-less event naming the call (``CALL_STARTED_KEY``)
to the chat's session, and only once the store has it does the body run. The next turn reads
a start without a result as *outcome unknown* (``TurnCalls.open_starts``).

No mark is written where the body will not run: a call ADK is about to gate behind a
confirmation, a denied call, and a long-running call whose result comes from elsewhere.

The same moment checks that the run still holds its chat: a run whose lease was lost (a
stalled process that woke after another took the chat) does not start the tool.

The mark also says whether the tool is declared idempotent (``plugins/idempotency.py``): such a
call is run again, not answered "outcome unknown", when its result never arrives. Before it,
the holding takes its fencing token from the chat index, once, and hands it to the tool
(``lease_generation``); the mark names it too.

Parallel calls of one step write their marks one at a time, in the order ADK started them, so
their bodies still run in that order: ADK merges their state changes in call order, and a
body that ran out of order would have its change overwritten by an earlier call's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from typing import Any, Protocol

from google.adk.events import Event
from google.adk.plugins import BasePlugin
from google.adk.sessions import BaseSessionService, Session
from google.adk.tools import BaseTool, ToolContext

from adk_stream_protocol.coordination.base import ChatKey, ChatLease
from adk_stream_protocol.plugins.idempotency import LEASE_GENERATION_KEY, declared_idempotent
from adk_stream_protocol.protocol.refusals import Refusal
from adk_stream_protocol.protocol.tool_calls import (
    CALL_IDEMPOTENT_KEY,
    CALL_STARTED_KEY,
    CALL_TOKEN_KEY,
)

logger = logging.getLogger(__name__)

PLUGIN_NAME = "adk_stream_protocol_tool_starts"


class ToolNotStarted(Refusal):
    """The tool's body did not run: its start could not be recorded, or the run no longer
    holds the chat. The call stays as it was, for the chat's next holder to run."""


class FencingTokens(Protocol):
    """Where a holding takes its fencing token (the chat index)."""

    async def take_fencing_token(
        self, app: str, user: str, chat_id: str, generation: int
    ) -> int: ...


class ToolStartPlugin(BasePlugin):
    """Records each tool start in the session before the body runs."""

    def __init__(
        self,
        sessions: BaseSessionService,
        tokens: FencingTokens,
        idempotent_tools: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(name=PLUGIN_NAME)
        self._sessions = sessions
        self._fencing_tokens = tokens
        self._idempotent_tools = idempotent_tools  # ADK_STREAM_IDEMPOTENT_TOOLS
        self._leases: dict[ChatKey, ChatLease] = {}
        # The fencing token of each held chat's holding, fixed at its first tool start.
        self._tokens: dict[ChatKey, tuple[ChatLease, int]] = {}
        # The invocations of each held chat that a lost lease stopped before a tool: ADK
        # reports the refusal as an error event with a generic code, and the chat's response
        # asks here whether that error is one (``refused``), to log it quietly.
        self._refused: dict[ChatKey, set[str]] = {}
        # One lock per running invocation, gone once no call of it waits on it.
        self._order: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def hold(self, chat: ChatKey, lease: ChatLease) -> None:
        """The chat's runs hold ``lease`` from now on: tools start only while it is held."""
        self._leases[chat] = lease
        self._refused.pop(chat, None)

    def let_go(self, chat: ChatKey, lease: ChatLease) -> None:
        if self._leases.get(chat) is lease:
            del self._leases[chat]
            self._refused.pop(chat, None)
            self._tokens.pop(chat, None)

    def refused(self, chat: ChatKey, invocation_id: str) -> bool:
        """Whether this process stopped the chat's invocation before a tool (``ToolNotStarted``)
        while the chat's current lease is held."""
        return invocation_id in self._refused.get(chat, ())

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        call_id = tool_context.function_call_id
        if call_id is None or tool.is_long_running:
            return None
        confirmation = tool_context.tool_confirmation
        if confirmation is not None and not confirmation.confirmed:
            return None  # denied: ADK answers for it
        if confirmation is None and await tool.check_require_confirmation(tool_args, tool_context):
            return None  # ADK asks the user first; the body runs on the approved re-run
        session = tool_context.session
        chat = (session.user_id, session.id)
        lease = self._leases.get(chat)
        if lease is not None and not lease.held():
            logger.warning(
                "tool not started: the run lost its chat user=%s chat=%s call=%s tool=%s",
                *chat,
                call_id,
                tool.name,
            )
            self._refused.setdefault(chat, set()).add(tool_context.invocation_id)
            raise ToolNotStarted("this run no longer holds the chat")
        started: dict[str, Any] = {CALL_STARTED_KEY: call_id}
        if declared_idempotent(tool, self._idempotent_tools):
            started[CALL_IDEMPOTENT_KEY] = True
        if lease is not None:
            token = await self._token(session, lease)
            started[CALL_TOKEN_KEY] = token
            tool_context.state[LEASE_GENERATION_KEY] = token  # a temp: key, never stored
        mark = Event(
            author=tool_context.agent_name,
            invocation_id=tool_context.invocation_id,
            branch=tool_context.branch,
            custom_metadata=started,
        )
        await self.append(tool_context, mark)
        logger.debug("tool start recorded chat=%s call=%s tool=%s", chat[1], call_id, tool.name)
        return None

    async def _token(self, session: Session, lease: ChatLease) -> int:
        """The holding's fencing token, taken at its first tool start. Taken only by a holder
        that passed the lease check; a stalled one that takes one anyway starts nothing with
        it (its mark is refused), and only moves the next holder's higher."""
        chat = (session.user_id, session.id)
        held = self._tokens.get(chat)
        if held is not None and held[0] is lease:
            return held[1]
        token = await self._fencing_tokens.take_fencing_token(
            session.app_name, session.user_id, session.id, lease.generation
        )
        self._tokens[chat] = (lease, token)
        return token

    async def append(self, tool_context: ToolContext, event: Event) -> None:
        """An event of the run's, stored in order with the marks of its other calls."""
        order = self._order.setdefault(tool_context.invocation_id, asyncio.Lock())
        async with order:
            # The invocation's own session object: ADK's later appends see it as current.
            await append_whole(self._sessions, tool_context.session, event)


async def append_whole(service: BaseSessionService, session: Session, event: Event) -> None:
    """``append_event``, finished even when the caller is cancelled meanwhile (a stop). Cut
    after the store took the event but before the session object learnt its new revision,
    it would leave that object stale, and ADK's own next append to it, the seal of the
    aborted run, would be refused (``StaleSessionError``): the stop would end in an error."""
    appending = asyncio.ensure_future(service.append_event(session, event))
    try:
        await asyncio.shield(appending)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await appending  # the store's own failure is the run's next append's to meet
        raise
