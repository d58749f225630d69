"""A workflow node's output, as ``data-node-output`` parts.

- From ADK: an event's ``output`` is what a node of a ``Workflow`` gave (a ``JoinNode``'s
  gathered inputs, a function node's return value, a pydantic model, an ``LlmAgent`` node's
  ``output_schema`` result). Each final event with one gives a ``data-node-output`` chunk:
  ``id`` the node's path (``node_info.path``, with its run's number), ``data``
  ``{"name": <the node's name>, "path": <its path>, "output": <the output as JSON>,
  "final": <whether it is also the whole workflow's output>}``. ``final`` is true when one of
  ``node_info.output_for`` is a root's path (no ``/``): the output ADK's web UI keeps when it
  hides intermediate events. An output that is the event's own text (ADK's
  ``node_info.message_as_output``: an ``LlmAgent`` node without a schema) reaches the page as
  that text and gives none, so it is never shown twice.
- The fold, the rebuild and the request are a data part's (``data.py``): kept in the message
  and the chat's record; the same node run's output sent again (ADK re-sends a replayed node's
  output when a resumable workflow resumes) replaces the earlier one's data.
"""

from __future__ import annotations

from google.adk.events import Event

from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk
from adk_stream_protocol.protocol.event_values import json_safe
from adk_stream_protocol.protocol.parts.base import EventPart

NODE_OUTPUT_PART = "data-node-output"


class NodeOutputs(EventPart):
    """What a node of a workflow gave."""

    def chunks(self, event: Event) -> list[BaseChunk]:
        info = event.node_info
        if event.output is None or info.message_as_output or not info.path:
            return []
        data = {
            "name": info.name,
            "path": info.path,
            "output": json_safe(event.output),
            "final": any("/" not in path for path in info.output_for or ()),
        }
        return [DataChunk(type=NODE_OUTPUT_PART, id=info.path, data=data)]
