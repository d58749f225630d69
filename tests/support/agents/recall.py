"""Agents that remember across chats with ADK's memory tools (docs/adr/0063). Each adds its
chat to the app's memory service from its own ``after_agent_callback``, as ADK's samples do
(the server adds nothing by itself); a later chat of the same user finds it there."""

from __future__ import annotations

from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import load_memory, preload_memory
from google.genai import types

from adk_stream_protocol.testing import ScriptedLlm, call

TOLD = "My favourite colour is teal."
ASKED = "Which colour do I like?"
# Where preload_memory puts what it found into the model's request (ADK's own tags).
_PAST_START, _PAST_END = "<PAST_CONVERSATIONS>", "</PAST_CONVERSATIONS>"


async def remember(callback_context: CallbackContext) -> None:
    """The agent's turn is over: its chat goes into memory (ADK's ``add_session_to_memory``)."""
    await callback_context.add_session_to_memory()


def loading_agent() -> LlmAgent:
    """Told something, it notes it; asked, it searches memory with ``load_memory``."""
    model = ScriptedLlm(
        script={
            "favourite colour is": ["Noted."],
            "which colour": [call("load_memory", query="favourite colour"), "Teal, you said."],
        }
    )
    return LlmAgent(
        name="recaller", model=model, tools=[load_memory], after_agent_callback=remember
    )


def answer_from_preloaded_memory(
    callback_context: CallbackContext, llm_request: LlmRequest
) -> LlmResponse | None:
    """The model's answer when ``preload_memory`` put past conversations into its request:
    those conversations, quoted, so the page shows what the model was given. Without them
    the scripted model answers."""
    text = "\n".join(
        part.text for content in llm_request.contents for part in content.parts or [] if part.text
    )
    if _PAST_START not in text:
        return None
    past = text.split(_PAST_START, 1)[1].split(_PAST_END, 1)[0].strip()
    return LlmResponse(
        content=types.Content(role="model", parts=[types.Part(text=f"I recall: {past}")])
    )


def preloading_agent() -> LlmAgent:
    """``preload_memory`` searches memory with each user message before the model is called."""
    return LlmAgent(
        name="preloader",
        model=ScriptedLlm(script={"": ["Noted."]}),
        tools=[preload_memory],
        before_model_callback=answer_from_preloaded_memory,
        after_agent_callback=remember,
    )
