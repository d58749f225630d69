"""A small agent for tests that need what the demo does not have: a slow tool, a tool that
raises, approval that depends on the arguments, and approval asked for from inside a tool.
Served through the `ADK_STREAM_AGENT=tests.support.agents.tools:root_agent` setting, which is also
how users plug in their own agent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm, LlmCapabilities
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import FunctionTool, ToolContext
from google.genai import types

from adk_stream_protocol.demo.live import LiveOptions, OfflineLiveConnection


async def slow_tool(seconds: float) -> dict[str, float]:
    """Waits, then answers."""
    await asyncio.sleep(seconds)
    return {"waited": seconds}


def exploding_tool() -> dict[str, str]:
    """Always raises."""
    raise RuntimeError("secret tool internals /srv/db password=hunter2")


def transfer(amount: float) -> dict[str, float]:
    """Moves money; needs approval above 100 (see `root_agent`)."""
    return {"transferred": amount}


def needs_approval_above_100(amount: float) -> bool:
    return amount > 100


def delete_file(name: str, tool_context: ToolContext) -> dict[str, object]:
    """Deletes a file after asking the user, with a payload the answer must carry back."""
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(
            hint=f"Delete {name}?", payload={"name": name, "keep_backup": True}
        )
        tool_context.actions.skip_summarization = True
        return {"status": "waiting for the user"}
    if not confirmation.confirmed:
        return {"error": f"{name} was not deleted"}
    return {"deleted": name, "confirmed_payload": confirmation.payload}


class ToolCallingLlm(BaseLlm):
    """Calls the tool the user names ("slow 1.5", "explode", "transfer 50", "delete a.txt"),
    then reports its result; "cite" gets an answer with Gemini-style grounding metadata;
    "think 1.5" gets a text answer after that many seconds (a store may stop meanwhile)."""

    model: str = "tool-calling-test"

    @property
    def capabilities(self) -> LlmCapabilities:
        return LlmCapabilities(output_schema_and_tools=False)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        parts = last.parts or []
        if any(p.function_response for p in parts):
            text = f"Tool said {parts[0].function_response.response}."  # type: ignore[union-attr]
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        words = "".join(p.text or "" for p in parts).split()
        if words and words[0] == "think":
            await asyncio.sleep(float(words[1]))
            thought = types.Part(text="Thought it over.")
            yield LlmResponse(content=types.Content(role="model", parts=[thought]))
            return
        if words and words[0] == "cite":
            for response in grounded_answer(stream):
                yield response
            return
        if words and words[0] == "slow":
            call = types.FunctionCall(name="slow_tool", args={"seconds": float(words[1])})
        elif words and words[0] == "explode":
            call = types.FunctionCall(name="exploding_tool", args={})
        elif words and words[0] == "transfer":
            call = types.FunctionCall(name="transfer", args={"amount": float(words[1])})
        elif words and words[0] == "delete":
            call = types.FunctionCall(name="delete_file", args={"name": words[1]})
        else:
            reply = types.Part(
                text="Say 'slow <seconds>', 'explode', 'transfer <n>' or 'delete <f>'."
            )
            yield LlmResponse(content=types.Content(role="model", parts=[reply]))
            return
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(function_call=call)])
        )


GROUNDED_SENTENCES = ("Tokyo is the capital of Japan.", " It has about 14 million people.")
GROUNDING = types.GroundingMetadata(
    grounding_chunks=[
        types.GroundingChunk(
            web=types.GroundingChunkWeb(uri="https://example.org/tokyo", title="Tokyo")
        ),
        types.GroundingChunk(web=types.GroundingChunkWeb(uri="https://example.org/census")),
    ],
    grounding_supports=[
        types.GroundingSupport(
            segment=types.Segment(start_index=0, end_index=30, text=GROUNDED_SENTENCES[0]),
            grounding_chunk_indices=[0],
        ),
        types.GroundingSupport(
            segment=types.Segment(text=GROUNDED_SENTENCES[1].strip()),
            grounding_chunk_indices=[0, 1],
        ),
    ],
)


def grounded_answer(stream: bool) -> list[LlmResponse]:
    """Two sentences, streamed when asked, and the final answer carrying its grounding."""
    text = "".join(GROUNDED_SENTENCES)
    partials = [
        LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=piece)]), partial=True
        )
        for piece in GROUNDED_SENTENCES
    ]
    final = LlmResponse(
        content=types.Content(role="model", parts=[types.Part(text=text)]),
        grounding_metadata=GROUNDING,
    )
    return [*partials, final] if stream else [final]


root_agent = LlmAgent(
    name="test_agent",
    model=ToolCallingLlm(),
    instruction="Call the tool the user names.",
    tools=[
        slow_tool,
        exploding_tool,
        FunctionTool(transfer, require_confirmation=needs_approval_above_100),
        delete_file,
    ],
)


class SlowLiveToolLlm(ToolCallingLlm):
    """The same model, with a live connection (``root_agent`` has none, on purpose)."""

    @contextlib.asynccontextmanager
    async def connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        """On /live: the demo's scripted live model, slowed down so that a test can act
        while an answer is still streaming (resume it, stop it, drop its socket)."""
        options = LiveOptions.from_config(llm_request.live_connect_config)
        connection = OfflineLiveConnection(options, model_version=self.model, pace_seconds=0.2)
        try:
            yield connection
        finally:
            await connection.close()


# The tests' agent on both transports, for what must act while a /live answer still streams.
slow_live_agent = root_agent.model_copy(
    update={"name": "slow_live_agent", "model": SlowLiveToolLlm()}
)


# A user's own agent on the offline model, named as a string: it answers with no call to
# `register_offline_model()` (tests/test_own_agent_offline.py).
offline_agent = LlmAgent(name="own_offline_agent", model="offline-demo")
