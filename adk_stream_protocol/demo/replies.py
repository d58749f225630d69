"""What the offline model answers: one reply, a pure function of the conversation.

The latest user message decides the intent, and the function responses that follow
it decide how far the plan has progressed. That keeps retries, resumes after approvals
and browser-tool results reproducible. Both the `run_async` model (model.py) and the
live connection (live.py) answer with `decide_reply_off_loop`, so a chat behaves the
same over either.

The model runs on the server's event loop and reads untrusted text, so its work is
linear in what it reads, whatever that is, and its reply is bounded (see bounds.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, replace

from google.genai import types

from .bounds import MAX_PAYMENTS_PER_MESSAGE, OFF_LOOP_CHARS
from .history import calls_of, latest_user_message_index, pair_results, text_of
from .intents import parse_intent
from .plans import PlannedCall
from .reports import GROUNDED_ANSWER, GROUNDING
from .wording import HINT, attachments_note, bounded, describe, describe_next, quote, thought_for

logger = logging.getLogger(__name__)

# How both models answer a reply with `error` set (the user asked them to fail).
ERROR_CODE = "DEMO_MODEL_FAILURE"
# Deliberately carries an "internal detail" so the server can prove it redacts.
ERROR_MESSAGE = "offline demo model failure (internal detail: stack xyz)"


@dataclass(frozen=True)
class Reply:
    """One model response, before it is turned into LlmResponses."""

    thought: str | None = None
    text: str | None = None
    calls: tuple[PlannedCall, ...] = ()
    error: bool = False
    # Sent with the text, as Gemini sends the grounding of a searched answer.
    grounding: types.GroundingMetadata | None = None
    # What the model reports when ``error`` is set.
    error_code: str = ERROR_CODE
    error_message: str = ERROR_MESSAGE


# How a live connection decides its next reply from the conversation so far.
Decide = Callable[[Sequence[types.Content]], Awaitable[Reply]]


MISSING_TOOLS_TEXT = (
    "I am the offline demo model. I would call {tools} for this, but this agent has no such "
    "tool, so here is only this answer."
)


def within_tools(reply: Reply, tools: Collection[str]) -> Reply:
    """The reply for an agent with these tools. An agent of the user's own on this model may
    lack the demo's tools: it gets the calls it can make, and when it can make none, a word
    on them instead of a failed call."""
    calls = tuple(call for call in reply.calls if call.name in tools)
    if len(calls) == len(reply.calls):
        return reply
    text = reply.text
    if not calls and not text:
        text = MISSING_TOOLS_TEXT.format(tools=", ".join(map(call_text, reply.calls)))
    return replace(reply, calls=calls, text=text)


def call_text(call: PlannedCall) -> str:
    """``get_weather(location="Tokyo")``, each value cut to a few words: a reply stays short
    whatever the message was."""
    values = ((name, json.dumps(value, ensure_ascii=False)) for name, value in call.args.items())
    args = ", ".join(f"{name}={_shortened(text)}" for name, text in values)
    return f"{call.name}({args})"


def _shortened(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decide_reply(contents: Sequence[types.Content]) -> Reply:
    """The whole behaviour of the model: contents in, one response out."""
    user_index = latest_user_message_index(contents)
    user_content = contents[user_index] if user_index is not None else None
    text = text_of(user_content)
    intent = parse_intent(text)
    later = list(contents[user_index + 1 :]) if user_index is not None else []
    steps_done = sum(1 for c in later if c.role == "model" and calls_of(c))
    results_by_step = pair_results(later)
    logger.debug("offline model: intent=%s steps_done=%d", intent.kind, steps_done)

    if intent.kind == "fail":
        return Reply(error=True)
    if steps_done < len(intent.steps):
        calls = intent.steps[steps_done]
        if steps_done == 0:  # The first step is calls only, like most real models.
            return Reply(thought=thought_for(intent, calls), calls=calls)
        # Later steps report the previous results and make the next calls together.
        progress = [describe(r) for r in results_by_step[-1]]
        sentence = " ".join([*progress, f"Now {describe_next(calls)}."])
        return Reply(thought=thought_for(intent, calls), text=bounded(sentence), calls=calls)

    all_results = [r for step in results_by_step for r in step]
    if all_results:
        answer = " ".join(describe(r) for r in all_results)
        if intent.payments_left_out:
            answer += (
                " I left out the other payments you asked for: the demo makes at most"
                f" {MAX_PAYMENTS_PER_MESSAGE} per message."
            )
    elif intent.kind == "recall":
        first = next((text_of(c) for c in contents if c.role == "user" and text_of(c)), text)
        answer = f"Your first message was: {quote(first)}."
    elif intent.kind == "sources":
        text = GROUNDED_ANSWER
        return Reply(thought=thought_for(intent, ()), text=text, grounding=GROUNDING)
    elif intent.kind == "payment_help":
        answer = 'Tell me who to pay and how much, for example "Pay Alice 10".'
    else:
        answer = f"You said: {quote(text)}. {HINT}" if text else HINT
    note = attachments_note(user_content)
    final_text = f"{note} {answer}" if note else answer
    return Reply(thought=thought_for(intent, ()), text=bounded(final_text))


async def decide_reply_off_loop(contents: Sequence[types.Content]) -> Reply:
    """``decide_reply``, in a worker thread when the contents hold much text."""
    size = sum(len(p.text or "") for c in contents for p in c.parts or [])
    if size <= OFF_LOOP_CHARS:
        return decide_reply(contents)
    return await asyncio.to_thread(decide_reply, list(contents))
