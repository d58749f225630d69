"""Test your own agent through this server, offline: a scripted model and a client.

``ScriptedLlm`` is a real ADK model (a ``BaseLlm``) that answers from a script instead of the
network, streaming its text in partials as Gemini does. ``serve_agent`` starts the real app
(``create_app``: real ADK ``Runner``, real endpoints) in this process with an agent, and its
``AgentClient`` (``testing_client.py``) sends chat messages to ``POST /stream``, or to
``/live?chatId=`` with ``live=True``, as ``useChat`` does and reads the answer back as chunks
and as the assistant message the page would show::

    agent = LlmAgent(name="helper", model=ScriptedLlm(script={...}), tools=[...])
    with serve_agent(agent) as chat:
        answer = chat.send("What's the weather in Tokyo?")
        assert answer.text == "It is sunny in Tokyo."

docs/agent/testing.md shows whole tests (tests/test_readme_example.py runs them).
Install with the ``testing`` extra: Starlette's ``TestClient`` needs ``httpx2`` (with only
``httpx`` it warns that this is deprecated).
"""

from __future__ import annotations

from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Collection,
    Iterator,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from typing import Any, Literal

from google.adk.models import BaseLlm, LlmCapabilities
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import BaseModel, Field
from typing_extensions import override

from adk_stream_protocol.demo.history import calls_of, latest_user_message_index, text_of
from adk_stream_protocol.demo.live import OfflineLiveConnection
from adk_stream_protocol.demo.live_options import LiveOptions
from adk_stream_protocol.demo.model import reply_responses
from adk_stream_protocol.demo.plans import PlannedCall
from adk_stream_protocol.demo.replies import Reply as DemoReply
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.parts.tools import tool_error_text
from adk_stream_protocol.protocol.tool_calls import REJECTED_RESULT
from adk_stream_protocol.server.app import create_app
from adk_stream_protocol.testing_client import (
    AgentClient,
    ChatResponse,
    LocalTestClient,
    answer_approvals,
    assistant_message,
    sse_payloads,
)
from adk_stream_protocol.turns.bridge import AgentLike

__all__ = [
    "NO_BRANCH",
    "NO_SCRIPT",
    "SCRIPTED_ERROR",
    "SCRIPT_ENDED",
    "AgentClient",
    "Answer",
    "Branch",
    "ChatResponse",
    "Outcome",
    "ScriptedLlm",
    "Step",
    "ToolCall",
    "answer_approvals",
    "assistant_message",
    "call",
    "outcome_of",
    "serve_agent",
    "settings_for_tests",
    "sse_payloads",
]

# The error codes of a script that has no answer (the server logs them with the message).
NO_SCRIPT = "NO_SCRIPT"
SCRIPT_ENDED = "SCRIPT_ENDED"
SCRIPTED_ERROR = "SCRIPTED_ERROR"
NO_BRANCH = "NO_BRANCH"


# -- the scripted model --------------------------------------------------------------------


class ToolCall(BaseModel):
    """A call the model makes to one of the agent's tools."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)


def call(name: str, **args: Any) -> ToolCall:
    """``ToolCall(name=name, args=args)``: ``call("get_weather", city="Tokyo")``."""
    return ToolCall(name=name, args=args)


class Answer(BaseModel):
    """One whole model answer: a thought, text and calls (made together), or a failure."""

    text: str = ""
    thought: str = ""
    calls: list[ToolCall] = Field(default_factory=list)
    # The model fails with this message (an `error` chunk), as a refused Gemini call does.
    error: str | None = None
    error_code: str = SCRIPTED_ERROR


# One model answer: text, a single call, or an `Answer`.
Reply = str | ToolCall | Answer

# How the calls of the step before came back, as the model sees it (their results):
# "denied": the user denied one (ADK's "This tool call is rejected." result);
# "error": else one failed (an error-shaped result, `{"error": ...}`: a tool's own error, a
#   browser tool's `output-error`, a timed-out approval);
# "browser": else one was the page's output of a browser tool (a long-running tool);
# "approved": else they all ran and returned (ADK shows the model no trace of an approval
#   but the result, so a tool that needed none counts the same).
Outcome = Literal["approved", "denied", "error", "browser"]


class Branch(BaseModel):
    """A step that answers by how the previous step's calls came back (``Outcome``):
    ``Branch(approved="Paid.", denied="I did not pay.")``. An outcome without an answer of
    its own, and the first step of a turn (no calls before it), take ``otherwise``; with
    none, the model fails with ``NO_BRANCH``."""

    approved: Reply | None = None
    denied: Reply | None = None
    error: Reply | None = None
    browser: Reply | None = None
    otherwise: Reply | None = None

    def reply_for(self, outcome: Outcome | None) -> Reply | None:
        chosen: Reply | None = getattr(self, outcome) if outcome is not None else None
        return self.otherwise if chosen is None else chosen


# One model answer in a script: a reply, or a `Branch` between replies.
Step = Reply | Branch


class ScriptedLlm(BaseLlm):
    """A model that answers from ``script``: for the latest user message, the first key found
    in its text (case-insensitive; ``""`` matches any) gives the answers of that turn, one
    per model call. An answer with calls is followed, once the tools have answered (or the
    user has approved or denied them), by the next answer of the list; an answer without
    calls ends the turn. Like any model of the flow it sees the whole conversation, so a
    turn resumed after an approval continues where it stopped.

    A ``Branch`` step answers by how the calls before it came back: approved, denied, an
    error or a browser tool's output (``Outcome``).

    No key matching, or a turn asking for more answers than its list has, is a model error
    (``NO_SCRIPT``, ``SCRIPT_ENDED``, ``NO_BRANCH``) whose message says which: the test sees
    an `error` chunk, and the server's log has the message. It serves every endpoint:
    ``POST /stream`` and ai 7's ``/live`` (``run_async``), and ``/live?chatId=`` through a
    live connection (``run_live``) that answers from the same script, in text.
    """

    model: str = "scripted"
    script: dict[str, list[Step]] = Field(default_factory=dict)

    @property
    @override
    def capabilities(self) -> LlmCapabilities:
        return LlmCapabilities(output_schema_and_tools=False)

    @override
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        reply = await self._reply(llm_request.contents, browser_tools(llm_request))
        async for response in reply_responses(reply, llm_request, stream, model_version=self.model):
            yield response

    @override
    @asynccontextmanager
    async def connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        """A live session (``run_live``) on the script: the demo model's live connection,
        with this script deciding each reply, and no pauses."""
        options = LiveOptions.from_config(llm_request.live_connect_config)
        connection = OfflineLiveConnection(
            options,
            model_version=self.model,
            pace_seconds=0,
            decide=partial(self._reply, browser_tools=browser_tools(llm_request)),
        )
        try:
            yield connection
        finally:
            await connection.close()

    async def _reply(
        self, contents: Sequence[types.Content], browser_tools: Collection[str]
    ) -> DemoReply:
        """The script's answer as the demo model's reply, which both connections play."""
        answer = self.answer(contents, browser_tools=browser_tools)
        return DemoReply(
            thought=answer.thought or None,
            text=answer.text or None,
            calls=tuple(PlannedCall(c.name, dict(c.args)) for c in answer.calls),
            error=answer.error is not None,
            error_code=answer.error_code,
            error_message=answer.error or "",
        )

    def answer(
        self, contents: Sequence[types.Content], *, browser_tools: Collection[str] = ()
    ) -> Answer:
        """The answer to a conversation: a pure function of it (and of which of the agent's
        tools the browser runs), so retries and resumes give the same answer."""
        user_index = latest_user_message_index(contents)
        text = text_of(contents[user_index]) if user_index is not None else ""
        steps = next((s for key, s in self.script.items() if key.lower() in text.lower()), None)
        if steps is None:
            keys = ", ".join(repr(key) for key in self.script)
            message = f"no key of the script ({keys}) is in {text!r}"
            return Answer(error=message, error_code=NO_SCRIPT)
        later = contents[user_index + 1 :] if user_index is not None else []
        # Each earlier answer of this turn that made calls was one step of the list.
        done = sum(1 for c in later if c.role == "model" and calls_of(c))
        if done >= len(steps):
            message = f"the script has {len(steps)} answers for {text!r}; asked for {done + 1}"
            return Answer(error=message, error_code=SCRIPT_ENDED)
        step = steps[done]
        if isinstance(step, Branch):
            outcome = outcome_of(later, browser_tools)
            reply = step.reply_for(outcome)
            if reply is None:
                message = (
                    f"answer {done + 1} for {text!r} has no branch for {outcome or 'no calls'}"
                )
                return Answer(error=message, error_code=NO_BRANCH)
            step = reply
        if isinstance(step, str):
            return Answer(text=step)
        if isinstance(step, ToolCall):
            return Answer(calls=[step])
        return step


def outcome_of(
    contents: Sequence[types.Content], browser_tools: Collection[str] = ()
) -> Outcome | None:
    """How the calls of the last model content with calls came back (``Outcome``), from the
    results after it; None when no content made calls."""
    last = max(
        (i for i, c in enumerate(contents) if c.role == "model" and calls_of(c)), default=None
    )
    if last is None:
        return None
    results = [
        part.function_response
        for content in contents[last + 1 :]
        for part in content.parts or []
        if part.function_response is not None
    ]
    errors = [tool_error_text(r.response) for r in results]
    if REJECTED_RESULT["error"] in errors:
        return "denied"
    if any(error is not None for error in errors):
        return "error"
    if any(r.name in browser_tools for r in results):
        return "browser"
    return "approved"


def browser_tools(llm_request: LlmRequest) -> set[str]:
    """The agent's tools the browser runs: ADK's long-running tools."""
    return {name for name, tool in llm_request.tools_dict.items() if tool.is_long_running}


def settings_for_tests(**fields: Any) -> Settings:
    """Settings for a test app: chats in memory, no page, errors shown in full (development
    settings, so that a failing script says why in its `error` chunk); ``fields`` override."""
    values: dict[str, Any] = {"session_store": "memory://", "playground_dir": None}
    values["error_detail"] = True
    values.update(fields)
    return Settings(**values)


@contextmanager
def serve_agent(
    agent: AgentLike,
    settings: Settings | None = None,
    *,
    identity: Callable[..., Any] | None = None,
) -> Iterator[AgentClient]:
    """``create_app(agent, settings=..., identity=...)``, started in this process (Starlette's
    ``TestClient``, lifespan entered), with a client for it. ``settings`` default to
    ``settings_for_tests()``; the environment's ``ADK_STREAM_*`` variables apply as for any
    ``Settings``."""
    app = create_app(agent, settings=settings or settings_for_tests(), identity=identity)
    # `localhost`: a host the default trusted hosts accept (TestClient's own is refused), for
    # requests and sockets alike; the app's host policy stays as it is deployed.
    with LocalTestClient(app, base_url="http://localhost") as http:
        client = AgentClient(http)
        try:
            yield client
        finally:
            client.close()
