"""How the offline model words its replies: tool results, plans and thoughts as sentences,
and the quotes and cuts that keep them bounded."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from google.genai import types

from .bounds import MAX_DETAIL_CHARS, MAX_LISTED_ATTACHMENTS, MAX_QUOTE_CHARS, MAX_REPLY_CHARS
from .history import ToolResult
from .plans import Intent, PlannedCall

# The response ADK gives a confirmation-gated call the user rejected.
REJECTED_ERROR = "This tool call is rejected."

# The answer to a message the model has no rule for.
HINT = (
    "I am the offline demo model; try asking about the weather, a payment, your location or music."
)


def thought_for(intent: Intent, calls: Iterable[PlannedCall]) -> str | None:
    """The thought streamed before the calls (or the answer) when the user asks to think."""
    if not intent.think:
        return None
    names = sorted({c.name for c in calls})
    if names:
        plan = f"I will call {', '.join(names)} and wait for the result."
    elif intent.kind == "chat":
        plan = "The message needs no tool, so I will answer directly."
    else:
        plan = "I have what I need, so I will summarise it for the user."
    return f"Let me think step by step. {plan}"


def describe_next(calls: Sequence[PlannedCall]) -> str:
    """What the next step does, for the sentence that announces it."""
    payments = [c for c in calls if c.name == "process_payment"]
    if len(payments) == len(calls):
        return "paying " + " and ".join(
            f"{c.args['recipient']} {_num(c.args['amount'])} {c.args['currency']}" for c in payments
        )
    return "calling " + ", ".join(c.name for c in calls)


def describe(result: ToolResult) -> str:
    """One sentence about a tool result, for the final answer."""
    name, args, response = result.name, result.args, result.response
    error = response.get("error")
    if error is not None and response.get("success") is not True:
        subject = _subject(name, args)
        if error == REJECTED_ERROR:
            return f"{subject} was not done because you rejected it."
        if name == "process_payment" and response.get("success") is False:
            return f"{subject} failed: {error}"
        return f"{subject} was not done ({error})."
    # The demo's own tools' results in words; a result without the fields a sentence needs
    # (an agent's own tool of the same name) is reported as it came, never as "None°C".
    if name == "process_payment" and _has(response, "transaction_id", "wallet_balance"):
        return (
            f"Sent {_num(response.get('amount', args.get('amount')))}"
            f" {response.get('currency', args.get('currency', 'USD'))}"
            f" to {response.get('recipient', args.get('recipient'))}"
            f" (transaction {response.get('transaction_id')})."
            f" Wallet balance: {_num(response.get('wallet_balance'))}."
        )
    if name == "get_weather" and _has(response, "temperature", "condition"):
        location = response.get("location", args.get("location"))
        if response.get("condition") == "Unknown":
            return (
                f"I have no offline weather data for {location};"
                f" the demo assumes {response.get('temperature')}°C."
            )
        return (
            f"It is {response.get('temperature')}°C and"
            f" {str(response.get('condition', '')).lower()} in {location}."
        )
    if name == "get_location":
        return _describe_location(response)
    if name == "change_bgm" and "track" in response | args:
        return f"Now playing BGM track {response.get('track', args.get('track'))}."
    if name == "draw_chart" and _has(response, "bars", "filename"):
        return f"Here is your chart of {response.get('bars')} cities ({response.get('filename')})."
    return f"{name} returned {json.dumps(response, ensure_ascii=False, sort_keys=True)}."


def _has(response: dict[str, Any], *fields: str) -> bool:
    return all(response.get(f) is not None for f in fields)


def _num(value: Any) -> str:
    # 10.0 reads better as "10"; ADK may coerce int arguments to float.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _subject(name: str, args: dict[str, Any]) -> str:
    if name == "process_payment":
        amount = _num(args.get("amount"))
        return f"The payment of {amount} {args.get('currency', 'USD')} to {args.get('recipient')}"
    subjects = {
        "get_weather": f"The weather lookup for {args.get('location')}",
        "get_location": "The location request",
        "change_bgm": f"The change to BGM track {args.get('track')}",
    }
    return subjects.get(name, f"The {name} call")


def _describe_location(response: dict[str, Any]) -> str:
    coords = response.get("coords")
    source = coords if isinstance(coords, dict) else response
    lat = source.get("latitude", source.get("lat"))
    lon = source.get("longitude", source.get("lng", source.get("lon")))
    city = response.get("city")
    if lat is not None and lon is not None:
        where = f" in {city}" if city else ""
        return f"You are at latitude {lat}, longitude {lon}{where}."
    if city:
        return f"You are in {city}."
    return f"Your browser reported: {json.dumps(response, ensure_ascii=False, sort_keys=True)}."


def attachments_note(content: types.Content | None) -> str | None:
    """Mentions uploaded files so a test can prove they reached the model."""
    details: list[str] = []
    count = 0
    kinds: set[str] = set()
    for part in content.parts or [] if content else []:
        if part.inline_data is not None:
            mime = part.inline_data.mime_type or "application/octet-stream"
            detail = f"{len(part.inline_data.data or b'')} bytes"
        elif part.file_data is not None:
            mime = part.file_data.mime_type or "application/octet-stream"
            detail = _shorten(str(part.file_data.file_uri), MAX_DETAIL_CHARS)
        else:
            continue
        count += 1
        kinds.add("image" if mime.startswith("image/") else "file")
        if len(details) < MAX_LISTED_ATTACHMENTS:
            details.append(f"{_shorten(mime, MAX_DETAIL_CHARS)}, {detail}")
    if not details:
        return None
    if count > len(details):
        details.append(f"and {count - len(details)} more")
    noun = "image" if kinds == {"image"} else "file"
    plural = "s" if count > 1 else ""
    return f"I received {count} {noun}{plural} ({'; '.join(details)})."


def quote(text: str) -> str:
    """The text in double quotes; of a long text, its beginning and its length."""
    if len(text) <= MAX_QUOTE_CHARS:
        return f'"{text}"'
    return (
        f'"{text[:MAX_QUOTE_CHARS]}…" (the first {MAX_QUOTE_CHARS:,} of {len(text):,} characters)'
    )


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"


def bounded(reply_text: str) -> str:
    """The reply text, cut at MAX_REPLY_CHARS with a note saying so."""
    if len(reply_text) <= MAX_REPLY_CHARS:
        return reply_text
    return (
        f"{reply_text[:MAX_REPLY_CHARS]}… (the answer is cut here: it would be"
        f" {len(reply_text):,} characters long)"
    )
