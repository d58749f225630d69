"""Shared state: the session state keys under a prefix, between the agent and the page
(docs/adr/0044).

To the page: one ``data-state`` part with the fixed id ``state``, whose data is every key
under the prefix with its current value, keys as the session stores them (prefix included). A
response sends it when something changed those keys: the request's own ``state`` field, a
rewind, or an event's ``actions.state_delta`` (tools, callbacks). It is no transient part, so
it stays in the message; a later one in the same message replaces it. Keys outside the prefix
are never sent.

From the page: a request's ``state`` field, ``{"ui:theme": "dark"}``, checked here against the
request limits (only keys under the prefix, so many keys, so many bytes) and applied by the
turn as a state delta on the user's event, before the model runs. ``null`` removes a key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.adk.events import Event
from pydantic_core import to_json

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.limits import RequestLimits
from adk_stream_protocol.protocol.chunks import DataChunk
from adk_stream_protocol.protocol.event_values import json_safe

STATE_PART = "data-state"
STATE_PART_ID = "state"


def check_state_field(state: Mapping[str, Any], limits: RequestLimits) -> None:
    """A request's ``state`` field, refused unless it only writes keys under the prefix
    (422) and stays within the limits (413)."""
    prefix = limits.state_prefix
    if not state:
        return
    if not prefix:
        raise RequestError(
            422, "this server shares no state with the page: a request's `state` is refused"
        )
    if len(state) > limits.max_state_keys:
        raise RequestError(
            413, f"`state` changes {len(state)} keys; the limit is {limits.max_state_keys}"
        )
    for key in state:
        if not key.startswith(prefix) or key == prefix:
            shown = key if len(key) <= 40 else key[:37] + "..."
            raise RequestError(
                422, f"`state` may only change keys named {prefix}<name>, not {shown!r}"
            )
    size = len(to_json(state))
    if size > limits.max_state_bytes:
        raise RequestError(
            413, f"`state` is {size} bytes of JSON; the limit is {limits.max_state_bytes}"
        )


class SharedState:
    """The keys under the prefix of one chat's session state, kept current from the deltas
    of its turns, and whether they changed since the page was last sent them."""

    def __init__(self, prefix: str, state: Mapping[str, Any]) -> None:
        self._prefix = prefix
        self._values = self._shared(state)
        self._changed = False

    def reset(self, state: Mapping[str, Any]) -> None:
        """The whole state read again (after a rewind gave earlier values back)."""
        values = self._shared(state)
        if values != self._values:
            self._values = values
            self._changed = True

    def update(self, delta: Mapping[str, Any] | None) -> None:
        """A state delta (the page's, or an event's). ``None`` as a value removes the key, as
        our rewinds leave no key that ADK set to ``None``."""
        for key, value in (delta or {}).items():
            if not key.startswith(self._prefix):
                continue
            if value is None:
                if self._values.pop(key, None) is not None:
                    self._changed = True
                continue
            # A copy: an agent may change the object it stored, then store it again.
            safe = json_safe(value)
            if self._values.get(key) != safe:
                self._values[key] = safe
                self._changed = True

    def observe(self, event: Event) -> None:
        self.update(event.actions.state_delta if event.actions else None)

    def changed_part(self) -> DataChunk | None:
        """The ``data-state`` part when the keys changed since the last one, else None."""
        if not self._changed:
            return None
        self._changed = False
        return DataChunk(type=STATE_PART, id=STATE_PART_ID, data=dict(self._values))

    def _shared(self, state: Mapping[str, Any]) -> dict[str, Any]:
        return {
            key: json_safe(value)
            for key, value in state.items()
            if key.startswith(self._prefix) and value is not None
        }
