"""Which node of a workflow is at work, as transient ``data-node`` parts
(docs/adr/0067-workflow-parts.md).

- From ADK: every event of ADK 2's node runtime names its node in ``node_info.path``
  (``"trip_planner@1/flights@1"``: each node under its parent, with the number of its run). A
  final event of a node that sits under another (a workflow's node, or a sub-agent) gives one
  ``data-node`` chunk when that node is not the one this response announced last:
  ``transient``, ``data`` ``{"name": <the node's name>, "path": <its path>}``. ADK sends no
  event when a node starts, so a node is announced with its first complete event, after that
  event's own chunks. A root agent's events (a path of one segment) and those with no path
  (ADK's checkpoints) give none.
- The fold: none. A transient part reaches only ``useChat``'s ``onData``, never the message:
  it is progress, not history (``data-node-output`` and ``data-route`` stay).
"""

from __future__ import annotations

from google.adk.events import Event

from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk
from adk_stream_protocol.protocol.clients import AiSdkClient
from adk_stream_protocol.protocol.parts.base import EventPart

NODE_PART = "data-node"


class WorkflowNodes(EventPart):
    """The node at work: the one of the last ``data-node`` the page received."""

    def __init__(self, client: AiSdkClient) -> None:
        super().__init__(client)
        self._announced = ""  # the path of the node announced last in this response

    def chunks(self, event: Event) -> list[BaseChunk]:
        path = event.node_info.path
        if "/" not in path or path == self._announced:
            return []
        self._announced = path
        data = {"name": event.node_info.name, "path": path}
        return [DataChunk(type=NODE_PART, data=data, transient=True)]
