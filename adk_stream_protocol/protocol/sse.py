"""Server-Sent Events framing of UI message stream chunks.

Both transports use the same framing: ``/stream`` writes these bytes to the HTTP body and
``/live`` sends each event as one WebSocket text frame. Every event ends with a blank line,
the last one included, because the client's parser has no flush: an event without its
trailing blank line is silently lost.
"""

from __future__ import annotations

from collections.abc import Mapping

from adk_stream_protocol.protocol.chunks import BaseChunk

DONE = "data: [DONE]\n\n"
# A comment line: clients skip it, proxies see traffic while a stream pauses.
KEEP_ALIVE = b": keep-alive\n\n"

# The headers the AI SDK's own server sends. The client checks none of them; proxies and
# other consumers rely on them (x-accel-buffering stops nginx from buffering the stream).
SSE_HEADERS: Mapping[str, str] = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}


def encode_event(chunk: BaseChunk) -> bytes:
    """Frame one chunk as one SSE event, as bytes for an HTTP body: ``data: <json>\\n\\n``."""
    return b"data: %b\n\n" % chunk.to_wire_json()


def format_event(chunk: BaseChunk) -> str:
    """The same event as text, for a WebSocket text frame."""
    return f"data: {chunk.to_wire_json().decode()}\n\n"
