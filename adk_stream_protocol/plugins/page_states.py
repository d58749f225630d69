"""The page's changes to the shared state of a ``/live?chatId=`` turn that waits for it
(docs/adr/0044).

A request that answers an approval or a browser call may carry changes (its ``state``). The
run's call, waiting in ``LiveApprovalPlugin``, goes on as soon as the answer arrives: a
``LiveRequest`` with the changes, which ADK takes from the queue in its own time, could reach
the session after the tool or the model has read it. So the changes wait here, and the gate
stores them when the wait ends, before the call goes on: a content-less user event of the
invocation, appended to the run's own session object in order with the run's other appends.
A new message takes what no wait took, and sends it with its content (``LiveRun``).
"""

from __future__ import annotations

from typing import Any

from adk_stream_protocol.coordination.base import ChatKey


class PageStates:
    """The page's changes per chat, until the chat's run stores them."""

    def __init__(self) -> None:
        self._waiting: dict[ChatKey, dict[str, Any]] = {}

    def put(self, chat: ChatKey, delta: dict[str, Any]) -> None:
        self._waiting.setdefault(chat, {}).update(delta)

    def take(self, chat: ChatKey) -> dict[str, Any]:
        """The chat's changes (``{}`` for none), forgotten here."""
        return self._waiting.pop(chat, {})
