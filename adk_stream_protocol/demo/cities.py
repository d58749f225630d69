"""The city a weather question is about.

Like the payment rules (see payments.py), each rule here costs linear time for any input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

# Read-only: the model keeps no state between requests.
_CITIES: Mapping[str, str] = MappingProxyType({
    "tokyo": "Tokyo", "東京": "Tokyo",
    "osaka": "Osaka", "大阪": "Osaka",
    "kyoto": "Kyoto", "京都": "Kyoto",
    "sapporo": "Sapporo", "札幌": "Sapporo",
    "san francisco": "San Francisco", "サンフランシスコ": "San Francisco",
    "london": "London", "ロンドン": "London",
    "new york": "New York", "ニューヨーク": "New York",
    "paris": "Paris", "パリ": "Paris",
})  # fmt: skip
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
_JA_NOT_CITIES = frozenset({"今日", "明日", "今", "現在", "今週", "週末", "ここ"})


def parse_city(text: str) -> str:
    """The city the text asks about (the first known one it names), else the default."""
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
