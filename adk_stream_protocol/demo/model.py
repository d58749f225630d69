"""A deterministic, offline ADK model for demos and end-to-end tests.

`OfflineDemoLlm` never touches the network. Its reply is a pure function of
`llm_request.contents`: the latest user message decides the intent, and the
function responses that follow it decide how far the plan has progressed. That
keeps retries, resumes after approvals and browser-tool results reproducible.

ADK strips its own `adk-` call ids before the request reaches a model, so calls
and their responses are paired by name and order instead of by id.

The model runs on the server's event loop and reads untrusted text, so its work is
linear in what it reads, whatever that is, and its reply is bounded (see "Bounds").
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import heapq
import itertools
import json
import logging
import re
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from google.adk.models import BaseLlm, LlmCapabilities, LLMRegistry
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from typing_extensions import override

from .names import OFFLINE_MODEL_NAME, OFFLINE_MODEL_PATTERN

logger = logging.getLogger(__name__)

ERROR_CODE = "DEMO_MODEL_FAILURE"
# Deliberately carries an "internal detail" so the server can prove it redacts.
ERROR_MESSAGE = "offline demo model failure (internal detail: stack xyz)"
# The response ADK gives a confirmation-gated call the user rejected.
REJECTED_ERROR = "This tool call is rejected."

IntentKind = Literal[
    "fail", "payment", "payment_help", "weather", "location", "music", "recall", "chat"
]

# --- Bounds -------------------------------------------------------------------------
#
# The model runs on the server's event loop, so neither its work nor its output may grow
# without limit with what a client sends.

# A longer message is echoed (and recalled) by its beginning and its length only.
MAX_QUOTE_CHARS = 1_000
# A longer answer is cut, saying so: it is streamed, stored and sent in every later request.
MAX_REPLY_CHARS = 4_000
# Partial responses per streamed text: ADK and the transport handle each one separately.
MAX_STREAM_PIECES = 64
# Attachments listed by name in the note; the others are only counted.
MAX_LISTED_ATTACHMENTS = 5
# A longer MIME type or file URI is shortened in the attachments note.
MAX_DETAIL_CHARS = 100
# Messages with more text than this are read in a worker thread: linear, but at the text
# limit (200,000 characters) the rules take longer than one request may hold the event loop.
OFF_LOOP_CHARS = 16_000
# Python's own int(str) limit: longer numbers raise, and converting them is quadratic.
MAX_NUMBER_DIGITS = 4_300
# Each payment is a tool call and an approval request; more are left out, saying so.
MAX_PAYMENTS_PER_MESSAGE = 10

# --- Parsing rules (all regexes live here) -----------------------------------
#
# Each rule runs on a whole user message, so each must cost linear time for ANY input:
# * possessive quantifiers (`*+`, `++`) where giving characters back can never help (the
#   next thing needed is not a digit, a letter or a space), so nothing is retried;
# * left anchors, so a run of letters, digits or spaces is scanned from its start only
#   instead of again from each of its characters.
# The matches are the same as those of the plain patterns these replace.

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
_RE_TRACK = re.compile(r"(?:track|#|no\.?|曲)\s*+(\d++)|(\d++)", re.I)
# Separators that turn several payments into a sequence of model steps.
_RE_SEQUENCE = re.compile(r"\b(?:and\s++)?then\b|\bafter that\b|その後|そして|それから|次に", re.I)
# Joins the segments of a message (see _parse_payment_steps): no rule matches it.
_SEGMENT_END = "\x00"
_RE_WORD = re.compile(r"\S+")  # For chunk_text.

_SYMBOL = r"(?P<sym>[$€¥])"
_NUMBER = r"(?P<amount>\d++(?:,\d{3})*+(?:\.\d++)?+)"
# An amount that opens a pattern ("$ 5", "50"). The anchored form starts only at a
# symbol or at the first of a run of spaces or digits: from inside such a run the
# match would be the one that starts at the run's first character. Its lookahead
# only makes the many positions where no amount starts fail fast.
_AMOUNT_FREE = rf"{_SYMBOL}?\s*+{_NUMBER}"
_AMOUNT_ANCHORED = rf"(?=[$€¥\s\d])(?:{_SYMBOL}|(?<![$€¥\s\d])|(?<=\d)(?=\s))\s*+{_NUMBER}"
# An amount after a name and its spaces ("Alice $10", "花子さんに500").
_AMOUNT_AFTER_NAME = rf"(?:{_SYMBOL}\s*+)?{_NUMBER}"
_CURRENCY_WORDS = r"(?:dollars?|usd|yen|jpy|euros?|eur)(?![a-z])|ドル|円|ユーロ"
_CURRENCY = rf"(?P<cur>{_CURRENCY_WORDS})"
_STOPWORDS = (
    r"(?:pay|send|transfer|and|then|to|me|of|for|with|a|an|the|please|now|also|just"
    r"|dollars?|usd|yen|jpy|euros?|eur)\b"
)
_NAME_EN = rf"(?P<name>(?!{_STOPWORDS})[A-Za-z][A-Za-z'-]*+)"
# In a run of letters, hyphens and apostrophes, the first word that could be a name
# ("to-Bob" -> "Bob"). Atomic: when the run is not followed by an amount, no later word
# of the run is tried (it would end at the same place, before the same text).
_NAME_EN_SKIPPING_STOPWORDS = (
    rf"(?>[A-Za-z'-]*?\b(?=[A-Za-z])(?!{_STOPWORDS}))(?P<name>[A-Za-z][A-Za-z'-]*+)"
)
# Japanese has no spaces: accept a run of Latin, katakana or kanji characters,
# so "その後Taroさんに" yields "Taro" rather than "その後Taro".
_NAME_JA = r"(?P<name>[A-Za-z][A-Za-z'-]*+|[ァ-ヴー]++|[一-龥々]++)"
# Where a Japanese-style name can start: the first letter of its run (a later letter
# of the run would give the same match, only shorter).
_NAME_JA_START = (
    r"(?=[A-Za-z'\-ァ-ヴー一-龥々])"  # Fails fast where no name can start.
    r"(?:(?<![A-Za-z'-])[-']*+(?=[A-Za-z])"
    r"|(?<![ァ-ヴー])(?=[ァ-ヴー])"
    r"|(?<![一-龥々])(?=[一-龥々]))"
)
_HONORIFIC = r"(?:さん|様|くん|ちゃん)?"


@dataclass(frozen=True)
class _PaymentRule:
    """One payment pattern, as two regexes that together match like the plain pattern.

    `anchored` only starts where a leftmost match can start, so it never rescans a run
    from each of its characters. Where the previous match ended, a match may start inside
    a run ("50ドル" then "ボブに3ドル"): there `free`, the pattern without its left anchor,
    is tried once.
    """

    free: re.Pattern[str]
    anchored: re.Pattern[str]
    # The plain pattern starts its match at the name (the regexes may start before it).
    starts_at_name: bool
    # Words every match contains (lower case): a fast test that skips most texts.
    needs: tuple[str, ...]

    @classmethod
    def of(
        cls, free: str, anchored: str, *, starts_at_name: bool = False, needs: tuple[str, ...] = ()
    ) -> _PaymentRule:
        return cls(re.compile(free, re.I), re.compile(anchored, re.I), starts_at_name, needs)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        """Like `re.finditer` with the plain pattern, in linear time."""
        pos = 0
        while match := self.free.match(text, pos) or self.anchored.search(text, pos + 1):
            yield match
            pos = match.end()

    def starts_and_matches(self, text: str) -> Iterator[tuple[int, re.Match[str]]]:
        """The matches, each with where the plain pattern's match starts."""
        for match in self.finditer(text):
            yield (match.start("name") if self.starts_at_name else match.start()), match


_TO_NAME = rf"(?:\s*+{_CURRENCY}\s++|\s++)to\s++{_NAME_EN}"
_AFTER_NAME = rf"\s++{_AMOUNT_AFTER_NAME}(?:\s*+{_CURRENCY})?"
_JA_AFTER_NAME = rf"{_HONORIFIC}に\s*+{_AMOUNT_AFTER_NAME}\s*+{_CURRENCY}?"
_JA_TO_NAME = rf"\s*+{_CURRENCY}?を\s*+{_NAME_JA}{_HONORIFIC}に"
_PAYMENT_RULES = [
    # "send 50 dollars to Hanako", "pay $10 to Alice"
    _PaymentRule.of(_AMOUNT_FREE + _TO_NAME, _AMOUNT_ANCHORED + _TO_NAME, needs=("to",)),
    # "pay Alice 10", "Pay Alice 10 and Bob 20 euros"
    _PaymentRule.of(
        _NAME_EN_SKIPPING_STOPWORDS + _AFTER_NAME,
        r"(?=[A-Za-z'-])(?<![A-Za-z'-])" + _NAME_EN_SKIPPING_STOPWORDS + _AFTER_NAME,
        starts_at_name=True,
    ),
    # "Hanakoさんに50ドル送金して"
    _PaymentRule.of(
        r"[-']*+" + _NAME_JA + _JA_AFTER_NAME,
        _NAME_JA_START + _NAME_JA + _JA_AFTER_NAME,
        starts_at_name=True,
        needs=("に",),
    ),
    # "50ドルを花子さんに送金"
    _PaymentRule.of(_AMOUNT_FREE + _JA_TO_NAME, _AMOUNT_ANCHORED + _JA_TO_NAME, needs=("を", "に")),
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
# "weather in", "weather like at", ... up to the first letter of the city.
_RE_CITY_EN_LEAD = re.compile(r"weather\s++(?:like\s++)?(?:in|for|at)\s++(?=[A-Za-z])", re.I)
# The city: the fewest characters up to a word like "today", punctuation or the end. The
# lookbehind checks a run of spaces before "today" once, from its first space.
_RE_CITY_EN = re.compile(
    r"[A-Za-z][A-Za-z .'-]*?(?=(?<!\s)\s++(?:today|now|tomorrow|this)\b|[?!.,]|$)", re.I
)
_RE_CITY_EN_RUN = re.compile(r"[A-Za-z .'-]*+", re.I)
# Anchored at the start of a run: a later start in the run finds the same "の天気" or none.
_RE_CITY_JA = re.compile(
    r"(?<![^\s、。,?!\uff1f\uff01])([^\s、。,?!\uff1f\uff01]+?)の(?:天気|気温)"
)
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
    # Whether more payments were asked for than MAX_PAYMENTS_PER_MESSAGE (left out).
    payments_left_out: bool = False


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
    pay_strong = _RE_PAY_STRONG.search(text) is not None
    if pay_strong or _RE_PAY_WEAK.search(text):  # Payments are only looked for then.
        steps, left_out = _parse_payment_steps(text)
        if steps:
            return Intent("payment", text, steps, think, left_out)
    if pay_strong:
        return Intent("payment_help", text, think=think)
    if _RE_WEATHER.search(text):
        call = PlannedCall("get_weather", {"location": _parse_city(text)})
        return Intent("weather", text, ((call,),), think)
    if _RE_LOCATION.search(text):
        return Intent("location", text, ((PlannedCall("get_location"),),), think)
    if _RE_MUSIC.search(text):
        match = _RE_TRACK.search(text)
        digits = next(g for g in match.groups() if g) if match else ""
        track = int(digits) if 0 < len(digits) <= MAX_NUMBER_DIGITS else 1
        return Intent("music", text, ((PlannedCall("change_bgm", {"track": track}),),), think)
    return Intent("chat", text, think=think)


def _parse_payment_steps(text: str) -> tuple[tuple[tuple[PlannedCall, ...], ...], bool]:
    """One step per sequential segment ("..., then ..."), one call per payment.

    Also tells whether payments were left out (beyond MAX_PAYMENTS_PER_MESSAGE).
    """
    default_currency = _currency_code(_first_match(_RE_ANY_CURRENCY, text)) or "USD"
    segments = _RE_SEQUENCE.split(text)
    # The segments are searched as one text, separated by a character that no rule can
    # match, cross or take for a letter: like the end of a text to every rule. One pass
    # per rule then costs no more for a message with many segments.
    joined = _SEGMENT_END.join(segments)
    segment_ends = list(itertools.accumulate(len(segment) + 1 for segment in segments))
    steps: list[list[PlannedCall]] = []
    last_segment, planned = -1, 0
    for match in _payment_matches(joined):
        call = _payment_call(match, default_currency)
        if call is None:
            continue
        if planned == MAX_PAYMENTS_PER_MESSAGE:
            return tuple(map(tuple, steps)), True
        segment = bisect.bisect_right(segment_ends, match.start())
        if segment != last_segment:
            steps.append([])
            last_segment = segment
        steps[-1].append(call)
        planned += 1
    return tuple(map(tuple, steps)), False


def _payment_matches(text: str) -> Iterator[re.Match[str]]:
    """Every rule may match: the earliest non-overlapping matches, lazily, in order."""
    lowered = text.lower()
    rules = [r for r in _PAYMENT_RULES if all(word in lowered for word in r.needs)]
    # Each rule's matches come in order; a tie goes to the earlier rule.
    merged = heapq.merge(
        *(rule.starts_and_matches(text) for rule in rules),
        key=lambda start_and_match: start_and_match[0],
    )
    end = -1
    for start, match in merged:
        if start >= end:
            end = match.end()
            yield match


def _payment_call(match: re.Match[str], default_currency: str) -> PlannedCall | None:
    amount_text = match.group("amount").replace(",", "")
    if len(amount_text) > MAX_NUMBER_DIGITS:
        return None  # No amount anyone means; int() would refuse it.
    amount: float | int = float(amount_text) if "." in amount_text else int(amount_text)
    currency = (
        _currency_code(match.group("cur")) or _currency_code(match.group("sym")) or default_currency
    )
    name = match.group("name")
    recipient = name[:1].upper() + name[1:]  # "pay bob 5" -> "Bob"; no-op for Japanese
    args = {"amount": amount, "recipient": recipient, "currency": currency}
    return PlannedCall("process_payment", args)


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
    if city := _english_city(text):
        return city.strip().title()
    if (match := _RE_CITY_JA.search(text)) and match.group(1) not in _JA_NOT_CITIES:
        return match.group(1)
    return _DEFAULT_CITY


def _english_city(text: str) -> str | None:
    """The city after the first "weather in" that is followed by one, if any."""
    failed_until = 0
    for lead in _RE_CITY_EN_LEAD.finditer(text):
        start = lead.end()
        # A start inside a run of city characters that already failed would fail too
        # (it can only end at the same places); skipping it keeps this linear.
        if start < failed_until:
            continue
        if match := _RE_CITY_EN.match(text, start):
            return match.group()
        run = _RE_CITY_EN_RUN.match(text, start)
        failed_until = run.end() if run else start
    return None


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
        return Reply(thought=_thought(intent, calls), text=_bounded(sentence), calls=calls)

    all_results = [r for step in results_by_step for r in step]
    if all_results:
        answer = " ".join(_describe(r) for r in all_results)
        if intent.payments_left_out:
            answer += (
                " I left out the other payments you asked for: the demo makes at most"
                f" {MAX_PAYMENTS_PER_MESSAGE} per message."
            )
    elif intent.kind == "recall":
        first = next((_text_of(c) for c in contents if c.role == "user" and _text_of(c)), text)
        answer = f"Your first message was: {_quote(first)}."
    elif intent.kind == "payment_help":
        answer = 'Tell me who to pay and how much, for example "Pay Alice 10".'
    else:
        answer = f"You said: {_quote(text)}. {_HINT}" if text else _HINT
    note = _attachments_note(user_content)
    final_text = f"{note} {answer}" if note else answer
    return Reply(thought=_thought(intent, ()), text=_bounded(final_text))


def _quote(text: str) -> str:
    """The text in double quotes; of a long text, its beginning and its length."""
    if len(text) <= MAX_QUOTE_CHARS:
        return f'"{text}"'
    return (
        f'"{text[:MAX_QUOTE_CHARS]}…" (the first {MAX_QUOTE_CHARS:,} of {len(text):,} characters)'
    )


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"


def _bounded(reply_text: str) -> str:
    """The reply text, cut at MAX_REPLY_CHARS with a note saying so."""
    if len(reply_text) <= MAX_REPLY_CHARS:
        return reply_text
    return (
        f"{reply_text[:MAX_REPLY_CHARS]}… (the answer is cut here: it would be"
        f" {len(reply_text):,} characters long)"
    )


async def decide_reply_off_loop(contents: Sequence[types.Content]) -> Reply:
    """``decide_reply``, in a worker thread when the contents hold much text."""
    size = sum(len(p.text or "") for c in contents for p in c.parts or [])
    if size <= OFF_LOOP_CHARS:
        return decide_reply(contents)
    return await asyncio.to_thread(decide_reply, list(contents))


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
    pending: dict[str | None, deque[types.FunctionCall]] = {}
    for content in later:
        if content.role == "model" and (calls := _calls_of(content)):
            pending = {}
            for c in calls:
                pending.setdefault(c.name, deque()).append(c)
            steps.append([])
            continue
        for part in content.parts or []:
            response = part.function_response
            if response is None or not steps:
                continue
            # Ids are stripped before the request reaches the model, so take
            # the first pending call with the same name.
            same_name = pending.get(response.name)
            call = same_name.popleft() if same_name else None
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


# --- Streaming ------------------------------------------------------------------


def chunk_text(text: str) -> list[str]:
    """Splits text into small chunks of a few words: at least three, at most MAX_STREAM_PIECES.

    A chunk is whole words with the spaces after them (the first one also takes the
    leading spaces), so the chunks add up to the text.
    """
    starts = [m.start() for m in _RE_WORD.finditer(text)]
    if len(starts) >= 3:
        # Up to 4 words a chunk, more when that would make too many chunks.
        size = max(1, min(4, len(starts) // 3), -(-len(starts) // MAX_STREAM_PIECES))
        bounds = [0, *starts[size::size], len(text)]
        return [text[a:b] for a, b in itertools.pairwise(bounds)]
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
        reply = await decide_reply_off_loop(llm_request.contents)
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
                    # ADK queues a partial event without suspending: without this the
                    # whole answer would be processed, and held back, in one slice of
                    # the event loop instead of streaming between other requests.
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
