"""A deterministic, offline ADK model for demos and end-to-end tests.

`OfflineDemoLlm` never touches the network: what it answers is decided in replies.py,
this module turns that into ADK responses for `run_async`, and `connect` opens the
live connection of live.py for `run_live`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from typing import Any, Protocol

from google.adk.models import BaseLlm, LlmCapabilities, LLMRegistry
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from typing_extensions import override

from adk_stream_protocol.foundation.model_names import OFFLINE_MODEL_NAME, OFFLINE_MODEL_PATTERN

from .chunks import chunk_text
from .live import OfflineLiveConnection
from .replies import Reply, decide_reply_off_loop, within_tools
from .usage import token_usage


class OfflineDemoLlm(BaseLlm):
    """Scripted model: weather, payments, location, music, thinking and failure."""

    model: str = OFFLINE_MODEL_NAME

    @classmethod
    @override
    def supported_models(cls) -> list[str]:
        return [OFFLINE_MODEL_PATTERN]

    @property
    @override
    def capabilities(self) -> LlmCapabilities:
        # Declared outright: BaseLlm's name-based fallback is deprecated.
        return LlmCapabilities(output_schema_and_tools=False)

    @override
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        reply = within_tools(
            await decide_reply_off_loop(llm_request.contents), llm_request.tools_dict
        )
        async for response in reply_responses(reply, llm_request, stream, model_version=self.model):
            yield response

    @override
    @contextlib.asynccontextmanager
    async def connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        """Opens a scripted live session (Runner.run_live); see live.py."""
        connection = OfflineLiveConnection.for_request(llm_request, model_version=self.model)
        try:
            yield connection
        finally:
            await connection.close()


async def reply_responses(
    reply: Reply, llm_request: LlmRequest, stream: bool, *, model_version: str
) -> AsyncGenerator[LlmResponse, None]:
    """One model call's responses for a reply: its error, or its answer (``model_responses``).
    Shared with the scripted model of ``adk_stream_protocol.testing``."""
    if reply.error:
        yield LlmResponse(error_code=reply.error_code, error_message=reply.error_message)
        return
    parts = answer_parts(reply.thought, reply.text, reply.calls)
    async for response in model_responses(
        parts, llm_request, stream, model_version=model_version, grounding=reply.grounding
    ):
        yield response


async def model_responses(
    parts: list[types.Part],
    llm_request: LlmRequest,
    stream: bool,
    *,
    model_version: str,
    grounding: types.GroundingMetadata | None = None,
) -> AsyncGenerator[LlmResponse, None]:
    """One model answer as Gemini streams it under ``StreamingMode.SSE``: its text and thoughts
    in small partials (when ``stream``), then the aggregate with every part, the finish reason
    and the usage. Shared with the scripted model of ``adk_stream_protocol.testing``."""
    if stream:
        # Text streams in small partials; calls only appear in the aggregate.
        for part in parts:
            if part.text is None:
                continue
            for piece in chunk_text(part.text):
                # ADK queues a partial event without suspending: without this the whole
                # answer would be processed, and held back, in one slice of the event loop
                # instead of streaming between other requests.
                await asyncio.sleep(0)
                yield LlmResponse(
                    content=types.Content(
                        role="model", parts=[types.Part(text=piece, thought=part.thought)]
                    ),
                    partial=True,
                )
    yield LlmResponse(
        content=types.Content(role="model", parts=parts),
        partial=False,
        finish_reason=types.FinishReason.STOP,
        usage_metadata=token_usage(llm_request.contents, parts),
        model_version=model_version,
        grounding_metadata=grounding,
    )


class NamedCall(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def args(self) -> Mapping[str, Any]: ...


def answer_parts(
    thought: str | None, text: str | None, calls: Iterable[NamedCall]
) -> list[types.Part]:
    """A scripted answer as a model's content: its thought, its text, then its tool calls."""
    parts: list[types.Part] = []
    if thought:
        parts.append(types.Part(text=thought, thought=True))
    if text:
        parts.append(types.Part(text=text))
    parts.extend(
        types.Part(function_call=types.FunctionCall(name=c.name, args=dict(c.args))) for c in calls
    )
    return parts


def register_offline_model() -> None:
    """Lets agents name the model as a string ("offline-demo"). Idempotent.

    ADK's registry is a process-wide table of ADK's, not state of this package. Each app
    and test calls this, so it registers only when the name does not resolve to this
    class yet (re-registering would be logged and clear ADK's lookup cache); importing
    the module registers nothing.
    """
    try:
        if LLMRegistry.resolve(OFFLINE_MODEL_NAME) is OfflineDemoLlm:
            return
    except ValueError:
        pass  # Not registered yet.
    LLMRegistry.register(OfflineDemoLlm)
