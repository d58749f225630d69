"""That ADK summarized part of the chat for the model, as a transient ``data-compaction``
part (docs/adr/0070).

- From ADK: an app with ``events_compaction_config`` has its runner append a compaction event
  after a ``run_async`` invocation (``actions.compaction``: the summarized range's
  ``start_timestamp`` and ``end_timestamp``, and the summary). ADK does not yield it; the turn
  collects what its run stored (``session_cache.watch_compactions``) and converts it after the
  run's last event. It gives one ``data-compaction`` chunk: ``id`` the event's id, ``data``
  ``{"startTimestamp": <seconds>, "endTimestamp": <seconds>}``, ``transient: true``.
- Transient: it reaches ``useChat``'s ``onData`` and is in no message, so the page's record
  stays what the user saw; the summary itself, meant for the model, is not sent.
"""

from __future__ import annotations

from google.adk.events import Event

from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk
from adk_stream_protocol.protocol.parts.base import EventPart

COMPACTION_PART = "data-compaction"


class Compactions(EventPart):
    """A compaction ADK stored after the run."""

    def chunks(self, event: Event) -> list[BaseChunk]:
        compaction = event.actions.compaction
        if compaction is None:
            return []
        data = {
            "startTimestamp": compaction.start_timestamp,
            "endTimestamp": compaction.end_timestamp,
        }
        return [DataChunk(type=COMPACTION_PART, id=event.id, data=data, transient=True)]
