"""Opening a response, on every transport: its chunk log as soon as the chat's lease is held
(from then on the chat reads as answering, docs/adr/0045), then the chat's stop signal and
its records (the request's messages stored). ``OpenedResponse`` is what a ``run_async`` turn
holds of its chat while it runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from adk_stream_protocol.coordination.base import (
    ChatKey,
    ChatLease,
    Coordination,
    ResponseLog,
    StopSubscription,
)
from adk_stream_protocol.foundation.outages import Outages, outage_of
from adk_stream_protocol.protocol.chunks import AiSdkVersion, Transport
from adk_stream_protocol.protocol.ui_messages import ChatRequest
from adk_stream_protocol.turns.chat_records import ChatRecords, ResponseRecords
from adk_stream_protocol.turns.response import UnloggedResponse


@dataclass(frozen=True)
class Client:
    """Who a response goes to: the transport it asked over, and the AI SDK version the
    transport knows it speaks (7 only on an ai 7 socket, or when a ``POST /stream`` body says
    so); None where it does not know: its chunks are ai 6's, and its records fold as the
    request says. ``resumes``: it asked for none of it, it resumes (a cut turn finished on
    ``GET /stream/{chatId}/stream``): it holds no copy of the message the response continues,
    and gets its rebuild as a resumer reading the chunk log does."""

    transport: Transport = "stream"
    ai_sdk: AiSdkVersion | None = None
    resumes: bool = False

    @property
    def chunks_for(self) -> AiSdkVersion:
        """The AI SDK version its chunks are made for."""
        return self.ai_sdk or 6


@dataclass(frozen=True)
class OpenedResponse:
    """A response opened under its chat's lease for its client: the chat, the lease, the
    chat's stop signal, the response's chunk log and its records."""

    chat: ChatKey
    lease: ChatLease
    client: Client
    stop: StopSubscription
    log: ResponseLog
    records: ResponseRecords


class ResponseOpener:
    """Opens the responses of this application: their chunk logs, stop signals and records."""

    def __init__(self, coordination: Coordination, records: ChatRecords, outages: Outages) -> None:
        self._coordination = coordination
        self.records = records
        self._outages = outages

    async def open_log(self, chat: ChatKey, lease: ChatLease) -> ResponseLog:
        """A new response's chunk log, or none while its store is unavailable: the response
        still reaches its own client; only a resume of it would find nothing."""
        try:
            return await self._coordination.chunk_logs.open(chat, lease)
        except Exception as exc:
            store = outage_of(exc)
            if store is None:
                raise
            self._outages.down(store, exc, f"opening a response log of chat={chat[1]}")
            return UnloggedResponse()

    @asynccontextmanager
    async def opening(self, chat: ChatKey, lease: ChatLease) -> AsyncIterator[ResponseLog]:
        """A new response's chunk log, opened as soon as the chat's lease is held: from here
        the chat reads as answering, so a page that reloads while the turn is planned and
        its messages stored resumes it. Closed again if the turn never starts."""
        log = await self.open_log(chat, lease)
        try:
            yield log
        except BaseException:
            await log.close()
            raise

    async def open(
        self,
        client: Client,
        chat: ChatKey,
        lease: ChatLease,
        log: ResponseLog,
        request: ChatRequest | None,
    ) -> OpenedResponse:
        """What a response of ``run_async`` needs besides its log (``opening``): the chat's
        stop signal, then its records, the request's messages stored (``request`` None: the
        chat's stored ones go on)."""
        stop = await self._coordination.stops.subscribe(chat)
        try:
            records = await self.records.open(
                client.transport, chat, request, ai_sdk=client.ai_sdk, lease=lease
            )
        except BaseException:
            await stop.close()
            raise
        return OpenedResponse(chat, lease, client, stop, log, records)
