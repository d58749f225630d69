"""Data parts: ``data-<name>``, the app's own.

- From ADK: nothing of ADK's content is a data part; the server's features make them (the
  shared state, who answered, a confirmation's payload, a live run's transcript and audio)
  and so do a chat's tools (``send_data``), each as a ``DataChunk``.
- The fold: a transient one reaches only ``onData``; one with the type and id of a part
  already in the message replaces that part's data; any other is added, as sent.
- The rebuild: the chunk again. The request: ``DataUIPart``, shown only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk, UnknownJson
from adk_stream_protocol.protocol.clients import AiSdkClient
from adk_stream_protocol.protocol.parts.base import (
    ABSENT,
    Chunk,
    Fold,
    FoldTarget,
    Part,
    PartKind,
    UIPart,
    given,
    put,
)


def data_part(message: Part, chunk: Chunk) -> bool:
    """A ``data-*`` chunk folded onto ``message``; True when the message changed."""
    if chunk.get("transient"):
        return False
    if given(chunk.get("id")):
        for part in message["parts"]:
            if part.get("type") == chunk["type"] and part.get("id") == chunk["id"]:
                put(part, "data", chunk.get("data", ABSENT))
                return True
    message["parts"].append(dict(chunk))
    return True


class DataUIPart(UIPart):
    type: Annotated[str, Field(pattern=r"^data-.+")]
    id: str | None = None
    data: UnknownJson = None


class Data(PartKind):
    """``data-<name>`` parts."""

    part_prefix = "data-"
    request_parts = (("data", DataUIPart),)

    def prefixed_folds(self) -> dict[str, Fold]:
        return {"data-": self._data}

    def _data(self, target: FoldTarget, chunk: Chunk) -> None:
        if data_part(target.message, chunk):
            target.write()

    @classmethod
    def rebuild(
        cls, part: Mapping[str, Any], client: AiSdkClient, block_id: str
    ) -> list[BaseChunk]:
        return [DataChunk(type=part["type"], data=part.get("data"), id=part.get("id"))]
