"""The route a workflow node chose, as ``data-route`` parts.

- From ADK: a node of a ``Workflow`` picks the edges that go on from it by the route its event
  carries (``Event(route=...)``, ``actions.route``: a string, a number, a boolean or a list of
  them); an edge whose route matches runs next, ``DEFAULT_ROUTE``'s when none does. Each final
  event with a route gives a ``data-route`` chunk: ``id`` the node's path (``node_info.path``),
  ``data`` ``{"name": <the node's name>, "path": <its path>, "route": <the route, as ADK
  gives it>}``. The next ``data-node`` and its parts show where it led.
- The fold, the rebuild and the request are a data part's (``data.py``): kept in the message
  and the chat's record, the decision as ADK's web UI shows it beside the node's event.
"""

from __future__ import annotations

from google.adk.events import Event

from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk
from adk_stream_protocol.protocol.event_values import json_safe
from adk_stream_protocol.protocol.parts.base import EventPart

ROUTE_PART = "data-route"


class Routes(EventPart):
    """The way a node sent its workflow on."""

    def chunks(self, event: Event) -> list[BaseChunk]:
        route = event.actions.route
        info = event.node_info
        if route is None or not info.path:
            return []
        data = {"name": info.name, "path": info.path, "route": json_safe(route)}
        return [DataChunk(type=ROUTE_PART, id=info.path, data=data)]
