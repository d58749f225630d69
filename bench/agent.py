"""The benchmarks' agent: the demo agent's tools and a model that can also give long answers.

``BenchLlm`` is the offline demo model (weather, payments with approval, a live connection)
plus one benchmark-only behaviour: a user message ``bench words=N per=K pace=S`` is answered
with N words, streamed K words per partial with S seconds between partials, then the usual
aggregate. Both servers under test load this same agent: ours through ``ADK_STREAM_AGENT``,
ADK's own through an agents directory (``bench.servers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncGenerator, AsyncIterator

from google.adk.agents import LlmAgent
from google.adk.models import LLMRegistry
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from typing_extensions import override

from adk_stream_protocol.demo import OfflineDemoLlm, demo_tools
from adk_stream_protocol.demo.agent import INSTRUCTION
from adk_stream_protocol.demo.live import DEFAULT_PACE_SECONDS, LiveOptions, OfflineLiveConnection

MODEL_NAME = "bench-offline"
AGENT_NAME = "bench_agent"

_LONG = re.compile(r"^bench words=(\d+) per=(\d+) pace=([\d.]+)$")
_TEXT = (
    "the quick brown fox jumps over a lazy dog while streaming tokens arrive in order "
    "and every client renders them as soon as they land on the wire"
)


# Seconds between the live model's streamed pieces. Benchmark 3 keeps the demo's pace (both
# servers run this live model); benchmark 4 sets 0, because its comparison (/run_sse) runs the
# unpaced non-live model and a held-back continuation ends only when the model's answer does.
LIVE_PACE_ENV = "BENCH_LIVE_PACE_SECONDS"


def long_prompt(words: int, per: int, pace: float = 0.0) -> str:
    """The user message that asks ``BenchLlm`` for a long answer."""
    return f"bench words={words} per={per} pace={pace}"


def long_answer(words: int) -> str:
    vocabulary = re.findall(r"\S+", _TEXT)
    return " ".join(vocabulary[i % len(vocabulary)] for i in range(words))


class BenchLlm(OfflineDemoLlm):
    model: str = MODEL_NAME

    @classmethod
    @override
    def supported_models(cls) -> list[str]:
        return [r"bench-.*"]

    @override
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1] if llm_request.contents else None
        text = (last.parts[0].text or "") if last and last.role == "user" and last.parts else ""
        shaped = chat_turn_response(last, stream)
        if shaped is not None:
            for response in shaped:
                await asyncio.sleep(0)
                yield response
            return
        match = _LONG.match(text)
        if match is None:
            async for response in super().generate_content_async(llm_request, stream):
                yield response
            return
        words, per, pace = int(match[1]), int(match[2]), float(match[3])
        answer = long_answer(words).split(" ")
        if stream:
            for start in range(0, words, per):
                # Even with no pace, yield to the event loop as a real model's network reads do;
                # otherwise the whole answer is produced before the server can send its start.
                await asyncio.sleep(pace)
                piece = " ".join(answer[start : start + per]) + (" " if start + per < words else "")
                part = types.Part(text=piece)
                yield LlmResponse(content=types.Content(role="model", parts=[part]), partial=True)
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=" ".join(answer))]),
            partial=False,
            finish_reason=types.FinishReason.STOP,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=4, candidates_token_count=words, total_token_count=words + 4
            ),
            model_version=self.model,
        )

    @override
    @contextlib.asynccontextmanager
    async def connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        """The demo's live connection, paced by ``BENCH_LIVE_PACE_SECONDS``."""
        pace = float(os.environ.get(LIVE_PACE_ENV, DEFAULT_PACE_SECONDS))
        options = LiveOptions.from_config(llm_request.live_connect_config)
        connection = OfflineLiveConnection(options, model_version=self.model, pace_seconds=pace)
        try:
            yield connection
        finally:
            await connection.close()


# -- a long chat's turn (benchmark 13, bench/chat_shape.py) ---------------------------------------

CHAT_PROMPT = "bench chat "  # a user message that starts so is answered as one long chat's turn
CHAT_TOOL = "bench_records"
CHAT_ANSWER_WORDS = 150
_CHAT_WORDS_PER_PARTIAL = 15


def bench_records(query: str) -> dict[str, object]:
    """Look up the records a question names (about 1 KB of JSON)."""
    rows = [
        {"id": f"rec-{n:03}", "name": f"record {n} for {query[:20]}", "value": n * 17, "ok": True}
        for n in range(13)
    ]
    return {"query": query[:40], "rows": rows}


def chat_turn_response(last: types.Content | None, stream: bool) -> list[LlmResponse] | None:
    """A long chat's turn: a ``bench chat ...`` question gets one call of ``bench_records``;
    the call's result gets a 150-word answer (streamed in partials, then the aggregate).
    ``None`` for anything else."""
    if last is None or not last.parts:
        return None
    part = last.parts[0]
    if part.function_response is not None and part.function_response.name == CHAT_TOOL:
        answer = long_answer(CHAT_ANSWER_WORDS).split(" ")
        responses = []
        if stream:
            for start in range(0, CHAT_ANSWER_WORDS, _CHAT_WORDS_PER_PARTIAL):
                piece = " ".join(answer[start : start + _CHAT_WORDS_PER_PARTIAL]) + " "
                content = types.Content(role="model", parts=[types.Part(text=piece)])
                responses.append(LlmResponse(content=content, partial=True))
        responses.append(
            LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=" ".join(answer))]),
                partial=False,
                finish_reason=types.FinishReason.STOP,
                model_version=MODEL_NAME,
            )
        )
        return responses
    text = part.text or ""
    if last.role == "user" and text.startswith(CHAT_PROMPT):
        call = types.FunctionCall(name=CHAT_TOOL, args={"query": text[len(CHAT_PROMPT) :]})
        return [
            LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)]),
                partial=False,
                finish_reason=types.FinishReason.STOP,
                model_version=MODEL_NAME,
            )
        ]
    return None


def register_bench_model() -> None:
    """Lets agents name the model as a string. Idempotent."""
    try:
        if LLMRegistry.resolve(MODEL_NAME) is BenchLlm:
            return
    except ValueError:
        pass
    LLMRegistry.register(BenchLlm)


def bench_agent() -> LlmAgent:
    register_bench_model()
    return LlmAgent(name=AGENT_NAME, model=MODEL_NAME, instruction=INSTRUCTION, tools=demo_tools())


# What ``ADK_STREAM_AGENT=bench.agent:root_agent`` serves.
root_agent = bench_agent()
