"""ADK's UI widgets as ``data-ui-widget`` parts.

- From ADK: each ``UiWidget`` in an event's ``actions.render_ui_widgets`` (ADK 2.13: a tool
  calls ``tool_context.render_ui_widget``; an MCP tool with an MCP App does, with
  ``provider="mcp"`` and the call's id) becomes one ``data-ui-widget`` chunk: ``id`` the
  widget's id, ``data`` ``{"provider": ..., "payload": ...}``, the payload as JSON
  (``json_safe``; ADK's default is ``{}``, so neither key is ever ``null``). It comes after the
  event's own chunks: a tool's widget follows the tool's output, in its step.
- The fold, the rebuild and the request are a data part's (``data.py``): kept in the message,
  and a later widget with the same id replaces the data of the earlier one.
"""

from __future__ import annotations

from google.adk.events import Event

from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk
from adk_stream_protocol.protocol.event_values import json_safe
from adk_stream_protocol.protocol.parts.base import EventPart

UI_WIDGET_PART = "data-ui-widget"


class UiWidgets(EventPart):
    """The widgets an event asks the page to render."""

    def chunks(self, event: Event) -> list[BaseChunk]:
        widgets = event.actions.render_ui_widgets
        if not widgets:
            return []
        return [
            DataChunk(
                type=UI_WIDGET_PART,
                id=widget.id,
                data={"provider": widget.provider, "payload": json_safe(widget.payload)},
            )
            for widget in widgets
        ]
