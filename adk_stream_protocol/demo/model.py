"""A deterministic, offline ADK model for demos and end-to-end tests.

`OfflineDemoLlm` never touches the network. Its reply is a pure function of
`llm_request.contents`: the latest user message decides the intent, and the
function responses that follow it decide how far the plan has progressed. That
keeps retries, resumes after approvals and browser-tool results reproducible.

ADK strips its own `adk-` call ids before the request reaches a model, so calls
and their responses are paired by name and order instead of by id.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from google.adk.models import BaseLlm, LlmCapabilities, LLMRegistry
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from typing_extensions import override

logger = logging.getLogger(__name__)

OFFLINE_MODEL_NAME = "offline-demo"
ERROR_CODE = "DEMO_MODEL_FAILURE"
# Deliberately carries an "internal detail" so the server can prove it redacts.
ERROR_MESSAGE = "offline demo model failure (internal detail: stack xyz)"
# The response ADK gives a confirmation-gated call the user rejected.
REJECTED_ERROR = "This tool call is rejected."

IntentKind = Literal[
    "fail", "payment", "payment_help", "weather", "location", "music", "recall", "chat"
]

# --- Parsing rules (all regexes live here) -----------------------------------

_RE_FAIL = re.compile(r"\bfail\b|失敗", re.I)
# "What did I say first?": answered from the history, so a test can see what the model saw.
_RE_RECALL = re.compile(r"what did i (?:say|ask) first|最初に何", re.I)
_RE_THINK = re.compile(r"\bthink\b|step by step|考えて", re.I)
_RE_PAY_STRONG = re.compile(r"\bpay(?:ment)?\b|送金|支払", re.I)
_RE_PAY_WEAK = re.compile(r"\b(?:send|transfer)\b|払", re.I)
_RE_WEATHER = re.compile(r"weather|天気|気温", re.I)
_RE_LOCATION = re.compile(r"where am i|\blocation\b|現在地|居場所|位置情報|どこにいる", re.I)
# No \b around "bgm": in "BGMを2に" the Japanese letter is a word character too.
_RE_MUSIC = re.compile(r"\bmusic|bgm|音楽", re.I)
_RE_TRACK = re.compile(r"(?:track|#|no\.?|曲)\s*(\d+)|(\d+)", re.I)
# Separators that turn several payments into a sequence of model steps.
_RE_SEQUENCE = re.compile(r"\b(?:and\s+)?then\b|\bafter that\b|その後|そして|それから|次に", re.I)

_AMOUNT = r"(?P<sym>[$€¥])?\s*(?P<amount>\d+(?:,\d{3})*(?:\.\d+)?)"
_CURRENCY_WORDS = r"(?:dollars?|usd|yen|jpy|euros?|eur)(?![a-z])|ドル|円|ユーロ"
_CURRENCY = rf"(?P<cur>{_CURRENCY_WORDS})"
_STOPWORDS = (
    r"(?:pay|send|transfer|and|then|to|me|of|for|with|a|an|the|please|now|also|just"
    r"|dollars?|usd|yen|jpy|euros?|eur)\b"
)
_NAME_EN = rf"(?P<name>(?!{_STOPWORDS})[A-Za-z][A-Za-z'-]*)"
# Japanese has no spaces: accept a run of Latin, katakana or kanji characters,
# so "その後Taroさんに" yields "Taro" rather than "その後Taro".
_NAME_JA = r"(?P<name>[A-Za-z][A-Za-z'-]*|[ァ-ヴー]+|[一-龥々]+)"
_HONORIFIC = r"(?:さん|様|くん|ちゃん)?"
_PAYMENT_PATTERNS = [
    # "send 50 dollars to Hanako", "pay $10 to Alice"
    re.compile(rf"{_AMOUNT}\s*{_CURRENCY}?\s+to\s+{_NAME_EN}", re.I),
    # "pay Alice 10", "Pay Alice 10 and Bob 20 euros"
    re.compile(rf"\b{_NAME_EN}\s+{_AMOUNT}(?:\s*{_CURRENCY})?", re.I),
    # "Hanakoさんに50ドル送金して"
    re.compile(rf"{_NAME_JA}{_HONORIFIC}に\s*{_AMOUNT}\s*{_CURRENCY}?", re.I),
    # "50ドルを花子さんに送金"
    re.compile(rf"{_AMOUNT}\s*{_CURRENCY}?を\s*{_NAME_JA}{_HONORIFIC}に", re.I),
]
_CURRENCY_CODES = {
    "$": "USD", "dollar": "USD", "dollars": "USD", "usd": "USD", "ドル": "USD",
    "¥": "JPY", "yen": "JPY", "jpy": "JPY", "円": "JPY",
    "€": "EUR", "euro": "EUR", "euros": "EUR", "eur": "EUR", "ユーロ": "EUR",
}  # fmt: skip
# The message-wide default currency ("Pay Alice 10 and Bob 20 euros" -> both EUR).
_RE_ANY_CURRENCY = re.compile(rf"[$€¥]|(?<![a-z]){_CURRENCY_WORDS}", re.I)

_CITIES = {
    "tokyo": "Tokyo", "東京": "Tokyo",
    "osaka": "Osaka", "大阪": "Osaka",
    "kyoto": "Kyoto", "京都": "Kyoto",
    "sapporo": "Sapporo", "札幌": "Sapporo",
    "san francisco": "San Francisco", "サンフランシスコ": "San Francisco",
    "london": "London", "ロンドン": "London",
    "new york": "New York", "ニューヨーク": "New York",
    "paris": "Paris", "パリ": "Paris",
}  # fmt: skip
_DEFAULT_CITY = "Tokyo"
_RE_CITY_EN = re.compile(
    r"weather\s+(?:like\s+)?(?:in|for|at)\s+([A-Za-z][A-Za-z .'-]*?)"
    r"(?=\s+(?:today|now|tomorrow|this)\b|[?!.,]|$)",
    re.I,
)
_RE_CITY_JA = re.compile(r"([^\s、。,?!\uff1f\uff01]+?)の(?:天気|気温)")
_JA_NOT_CITIES = {"今日", "明日", "今", "現在", "今週", "週末", "ここ"}

_HINT = (
    "I am the offline demo model; try asking about the weather, a payment, your location or music."
)


# --- Data ---------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedCall:
    """A function call the model intends to make."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Intent:
    """What the latest user message asks for, as a plan of call batches.

    Each entry of `steps` is one model response; all calls of a step are
    issued together (parallel calls), later steps wait for earlier results.
    """

    kind: IntentKind
    text: str
    steps: tuple[tuple[PlannedCall, ...], ...] = ()
    think: bool = False


@dataclass(frozen=True)
class ToolResult:
    """A function response paired with the call it answers."""

    name: str
    args: dict[str, Any]
    response: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """One model response, before it is turned into LlmResponses."""

    thought: str | None = None
    text: str | None = None
    calls: tuple[PlannedCall, ...] = ()
    error: bool = False


# --- Intent parsing -------------------------------------------------------------


def parse_intent(text: str) -> Intent:
    """Classifies a user message; the order of the checks is the priority."""
    think = bool(_RE_THINK.search(text))
    if _RE_FAIL.search(text):
        return Intent("fail", text, think=think)
    if _RE_RECALL.search(text):
        return Intent("recall", text, think=think)
    steps = _parse_payment_steps(text)
    if steps and (_RE_PAY_STRONG.search(text) or _RE_PAY_WEAK.search(text)):
        return Intent("payment", text, steps, think)
    if _RE_PAY_STRONG.search(text):
        return Intent("payment_help", text, think=think)
    if _RE_WEATHER.search(text):
        call = PlannedCall("get_weather", {"location": _parse_city(text)})
        return Intent("weather", text, ((call,),), think)
    if _RE_LOCATION.search(text):
        return Intent("location", text, ((PlannedCall("get_location"),),), think)
    if _RE_MUSIC.search(text):
        match = _RE_TRACK.search(text)
        track = int(next(g for g in match.groups() if g)) if match else 1
        return Intent("music", text, ((PlannedCall("change_bgm", {"track": track}),),), think)
    return Intent("chat", text, think=think)


def _parse_payment_steps(text: str) -> tuple[tuple[PlannedCall, ...], ...]:
    """One step per sequential segment ("..., then ..."), one call per payment."""
    default_currency = _currency_code(_first_match(_RE_ANY_CURRENCY, text)) or "USD"
    steps = []
    for segment in _RE_SEQUENCE.split(text):
        calls = tuple(_parse_payments(segment, default_currency))
        if calls:
            steps.append(calls)
    return tuple(steps)


def _parse_payments(segment: str, default_currency: str) -> list[PlannedCall]:
    # Every pattern may match; keep the earliest non-overlapping matches.
    matches = sorted(
        (m for pattern in _PAYMENT_PATTERNS for m in pattern.finditer(segment)),
        key=lambda m: m.start(),
    )
    calls: list[PlannedCall] = []
    end = -1
    for m in matches:
        if m.start() < end:
            continue
        end = m.end()
        amount_text = m.group("amount").replace(",", "")
        amount: float | int = float(amount_text) if "." in amount_text else int(amount_text)
        currency = (
            _currency_code(m.group("cur")) or _currency_code(m.group("sym")) or default_currency
        )
        name = m.group("name")
        recipient = name[:1].upper() + name[1:]  # "pay bob 5" -> "Bob"; no-op for Japanese
        args = {"amount": amount, "recipient": recipient, "currency": currency}
        calls.append(PlannedCall("process_payment", args))
    return calls


def _currency_code(word: str | None) -> str | None:
    return _CURRENCY_CODES.get(word.lower()) if word else None


def _first_match(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(0) if match else None


def _parse_city(text: str) -> str:
    lowered = text.lower()
    known = [(lowered.find(alias), city) for alias, city in _CITIES.items() if alias in lowered]
    if known:
        return min(known)[1]
    if match := _RE_CITY_EN.search(text):
        return match.group(1).strip().title()
    if (match := _RE_CITY_JA.search(text)) and match.group(1) not in _JA_NOT_CITIES:
        return match.group(1)
    return _DEFAULT_CITY


# --- Deciding the reply ---------------------------------------------------------


def decide_reply(contents: Sequence[types.Content]) -> Reply:
    """The whole behaviour of the model: contents in, one response out."""
    user_index = _latest_user_message_index(contents)
    user_content = contents[user_index] if user_index is not None else None
    text = _text_of(user_content)
    intent = parse_intent(text)
    later = list(contents[user_index + 1 :]) if user_index is not None else []
    steps_done = sum(1 for c in later if c.role == "model" and _calls_of(c))
    results_by_step = _pair_results(later)
    logger.debug("offline model: intent=%s steps_done=%d", intent.kind, steps_done)

    if intent.kind == "fail":
        return Reply(error=True)
    if steps_done < len(intent.steps):
        calls = intent.steps[steps_done]
        if steps_done == 0:  # The first step is calls only, like most real models.
            return Reply(thought=_thought(intent, calls), calls=calls)
        # Later steps report the previous results and make the next calls together.
        progress = [_describe(r) for r in results_by_step[-1]]
        sentence = " ".join([*progress, f"Now {_describe_next(calls)}."])
        return Reply(thought=_thought(intent, calls), text=sentence, calls=calls)

    all_results = [r for step in results_by_step for r in step]
    if all_results:
        answer = " ".join(_describe(r) for r in all_results)
    elif intent.kind == "recall":
        first = next((_text_of(c) for c in contents if c.role == "user" and _text_of(c)), text)
        answer = f'Your first message was: "{first}".'
    elif intent.kind == "payment_help":
        answer = 'Tell me who to pay and how much, for example "Pay Alice 10".'
    else:
        answer = f'You said: "{text}". {_HINT}' if text else _HINT
    note = _attachments_note(user_content)
    final_text = f"{note} {answer}" if note else answer
    return Reply(thought=_thought(intent, ()), text=final_text)


def _latest_user_message_index(contents: Sequence[types.Content]) -> int | None:
    # A user message is any user content that is not function responses
    # (tool results and browser results also arrive with role "user").
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        parts = content.parts or []
        if content.role == "user" and not any(p.function_response for p in parts):
            return index
    return None


def _text_of(content: types.Content | None) -> str:
    if content is None:
        return ""
    return " ".join(p.text for p in content.parts or [] if p.text and not p.thought).strip()


def _calls_of(content: types.Content) -> list[types.FunctionCall]:
    return [p.function_call for p in content.parts or [] if p.function_call]


def _pair_results(later: Sequence[types.Content]) -> list[list[ToolResult]]:
    """Groups function responses by the model step whose calls they answer."""
    steps: list[list[ToolResult]] = []
    pending: list[types.FunctionCall] = []
    for content in later:
        if content.role == "model" and _calls_of(content):
            pending = _calls_of(content)
            steps.append([])
            continue
        for part in content.parts or []:
            response = part.function_response
            if response is None or not steps:
                continue
            # Ids are stripped before the request reaches the model, so take
            # the first pending call with the same name.
            call = next((c for c in pending if c.name == response.name), None)
            if call is not None:
                pending.remove(call)
            name = response.name or "unknown_tool"
            args = dict(call.args or {}) if call else {}
            steps[-1].append(ToolResult(name, args, _unwrap(response.response)))
    return steps


def _unwrap(response: dict[str, Any] | None) -> dict[str, Any]:
    # ADK wraps non-dict tool returns as {"result": value}; clients may too.
    if not response:
        return {}
    inner = response.get("result")
    if len(response) == 1 and isinstance(inner, dict):
        return inner
    return response


def _thought(intent: Intent, calls: Iterable[PlannedCall]) -> str | None:
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


def _describe_next(calls: Sequence[PlannedCall]) -> str:
    payments = [c for c in calls if c.name == "process_payment"]
    if len(payments) == len(calls):
        return "paying " + " and ".join(
            f"{c.args['recipient']} {_num(c.args['amount'])} {c.args['currency']}" for c in payments
        )
    return "calling " + ", ".join(c.name for c in calls)


def _describe(result: ToolResult) -> str:
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
    if name == "process_payment":
        return (
            f"Sent {_num(response.get('amount', args.get('amount')))}"
            f" {response.get('currency', args.get('currency', 'USD'))}"
            f" to {response.get('recipient', args.get('recipient'))}"
            f" (transaction {response.get('transaction_id')})."
            f" Wallet balance: {_num(response.get('wallet_balance'))}."
        )
    if name == "get_weather":
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
    if name == "change_bgm":
        return f"Now playing BGM track {response.get('track', args.get('track'))}."
    return f"{name} returned {json.dumps(response, ensure_ascii=False, sort_keys=True)}."


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


def _attachments_note(content: types.Content | None) -> str | None:
    """Mentions uploaded files so a test can prove they reached the model."""
    details: list[str] = []
    kinds: set[str] = set()
    for part in content.parts or [] if content else []:
        if part.inline_data is not None:
            mime = part.inline_data.mime_type or "application/octet-stream"
            details.append(f"{mime}, {len(part.inline_data.data or b'')} bytes")
        elif part.file_data is not None:
            mime = part.file_data.mime_type or "application/octet-stream"
            details.append(f"{mime}, {part.file_data.file_uri}")
        else:
            continue
        kinds.add("image" if mime.startswith("image/") else "file")
    if not details:
        return None
    noun = "image" if kinds == {"image"} else "file"
    plural = "s" if len(details) > 1 else ""
    return f"I received {len(details)} {noun}{plural} ({'; '.join(details)})."


# --- Streaming ------------------------------------------------------------------


def chunk_text(text: str) -> list[str]:
    """Splits text into at least three small chunks (a few words each)."""
    words = re.findall(r"\S+\s*", text)
    if words:
        words[0] = text[: len(text) - len(text.lstrip())] + words[0]
    if len(words) >= 3:
        size = max(1, min(4, len(words) // 3))
        return ["".join(words[i : i + size]) for i in range(0, len(words), size)]
    if len(text) >= 3:  # Too few words (e.g. Japanese): split by characters.
        step = -(-len(text) // 3)
        return [text[i : i + step] for i in range(0, len(text), step)]
    return [text] if text else []


def _word_count(part: types.Part) -> int:
    if part.text:
        return len(part.text.split())
    if part.function_call:
        payload = json.dumps(part.function_call.args or {}, ensure_ascii=False, sort_keys=True)
        return 1 + len(payload.split())
    if part.function_response:
        payload = json.dumps(
            part.function_response.response or {}, ensure_ascii=False, sort_keys=True, default=str
        )
        return 1 + len(payload.split())
    return 1  # inline data, files, code: count as one "token"


def _usage(
    contents: Sequence[types.Content], parts: Sequence[types.Part]
) -> types.GenerateContentResponseUsageMetadata:
    prompt = sum(_word_count(p) for c in contents for p in c.parts or [])
    thoughts = sum(_word_count(p) for p in parts if p.thought)
    candidates = sum(_word_count(p) for p in parts if not p.thought)
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=candidates,
        thoughts_token_count=thoughts or None,
        total_token_count=prompt + candidates + thoughts,
    )


class OfflineDemoLlm(BaseLlm):
    """Scripted model: weather, payments, location, music, thinking and failure."""

    model: str = OFFLINE_MODEL_NAME

    @classmethod
    @override
    def supported_models(cls) -> list[str]:
        return [r"offline-.*"]

    @property
    @override
    def capabilities(self) -> LlmCapabilities:
        # Declared outright: BaseLlm's name-based fallback is deprecated.
        return LlmCapabilities(output_schema_and_tools=False)

    @override
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        reply = decide_reply(llm_request.contents)
        if reply.error:
            yield LlmResponse(error_code=ERROR_CODE, error_message=ERROR_MESSAGE)
            return

        parts: list[types.Part] = []
        if reply.thought:
            parts.append(types.Part(text=reply.thought, thought=True))
        if reply.text:
            parts.append(types.Part(text=reply.text))
        parts.extend(
            types.Part(function_call=types.FunctionCall(name=c.name, args=dict(c.args)))
            for c in reply.calls
        )

        if stream:
            # Text streams in small partials; calls only appear in the aggregate.
            for part in parts:
                if part.text is None:
                    continue
                for piece in chunk_text(part.text):
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
            usage_metadata=_usage(llm_request.contents, parts),
            model_version=self.model,
        )

    @override
    @contextlib.asynccontextmanager
    async def connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        """Opens a scripted live session (Runner.run_live); see `demo/live.py`."""
        # Imported here because live.py builds on this module's reply logic.
        from .live import OfflineLiveConnection

        connection = OfflineLiveConnection.for_request(llm_request, model_version=self.model)
        try:
            yield connection
        finally:
            await connection.close()


def register_offline_model() -> None:
    """Lets agents name the model as a string ("offline-demo"). Idempotent."""
    try:
        if LLMRegistry.resolve(OFFLINE_MODEL_NAME) is OfflineDemoLlm:
            return
    except ValueError:
        pass  # Not registered yet.
    LLMRegistry.register(OfflineDemoLlm)
