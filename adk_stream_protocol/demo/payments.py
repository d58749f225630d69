"""Payments in a user message: the rules that find them, and the calls they become.

Each rule runs on a whole user message, so each must cost linear time for ANY input:

* possessive quantifiers (`*+`, `++`) where giving characters back can never help (the
  next thing needed is not a digit, a letter or a space), so nothing is retried;
* left anchors, so a run of letters, digits or spaces is scanned from its start only
  instead of again from each of its characters.

The matches are the same as those of the plain patterns these replace.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .bounds import MAX_NUMBER_DIGITS, MAX_PAYMENTS_PER_MESSAGE
from .plans import PlannedCall

# Separators that turn several payments into a sequence of model steps.
_RE_SEQUENCE = re.compile(r"\b(?:and\s++)?then\b|\bafter that\b|その後|そして|それから|次に", re.I)
# Joins the segments of a message (see parse_payment_steps): no rule matches it.
_SEGMENT_END = "\x00"

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
_PAYMENT_RULES = (
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
)
# Read-only: the model keeps no state between requests.
_CURRENCY_CODES: Mapping[str, str] = MappingProxyType({
    "$": "USD", "dollar": "USD", "dollars": "USD", "usd": "USD", "ドル": "USD",
    "¥": "JPY", "yen": "JPY", "jpy": "JPY", "円": "JPY",
    "€": "EUR", "euro": "EUR", "euros": "EUR", "eur": "EUR", "ユーロ": "EUR",
})  # fmt: skip
# The message-wide default currency ("Pay Alice 10 and Bob 20 euros" -> both EUR).
_RE_ANY_CURRENCY = re.compile(rf"[$€¥]|(?<![a-z]){_CURRENCY_WORDS}", re.I)


def parse_payment_steps(text: str) -> tuple[tuple[tuple[PlannedCall, ...], ...], bool]:
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
