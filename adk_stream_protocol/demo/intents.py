"""What a user message asks for: its intent, decided by keywords in priority order.

Like the payment rules (see payments.py), each rule here costs linear time for any input.
"""

from __future__ import annotations

import re

from .bounds import MAX_NUMBER_DIGITS
from .cities import parse_city
from .payments import parse_payment_steps
from .plans import Intent, PlannedCall

_RE_FAIL = re.compile(r"\bfail\b|失敗", re.I)
# "What did I say first?": answered from the history, so a test can see what the model saw.
_RE_RECALL = re.compile(r"what did i (?:say|ask) first|最初に何", re.I)
_RE_THINK = re.compile(r"\bthink\b|step by step|考えて", re.I)
_RE_PAY_STRONG = re.compile(r"\bpay(?:ment)?\b|送金|支払", re.I)
_RE_PAY_WEAK = re.compile(r"\b(?:send|transfer)\b|払", re.I)
_RE_WEATHER = re.compile(r"weather|天気|気温", re.I)
_RE_LOCATION = re.compile(r"where am i|\blocation\b|現在地|居場所|位置情報|どこにいる", re.I)
# "Where am I? Ask twice": two browser calls in one response, each approved on its own.
_RE_TWICE = re.compile(r"\btwice\b|2回", re.I)
# No \b around "bgm": in "BGMを2に" the Japanese letter is a word character too.
_RE_MUSIC = re.compile(r"\bmusic|bgm|音楽", re.I)
# Tools that reach the page: a chart saved as an artifact, sources.
_RE_CHART = re.compile(r"\bchart\b|グラフ", re.I)
_RE_SOURCES = re.compile(r"\bsources?\b|\bcite\b|出典", re.I)
_RE_TRACK = re.compile(r"(?:track|#|no\.?|曲)\s*+(\d++)|(\d++)", re.I)


def parse_intent(text: str) -> Intent:
    """Classifies a user message; the order of the checks is the priority."""
    think = bool(_RE_THINK.search(text))
    if _RE_FAIL.search(text):
        return Intent("fail", text, think=think)
    if _RE_RECALL.search(text):
        return Intent("recall", text, think=think)
    pay_strong = _RE_PAY_STRONG.search(text) is not None
    if pay_strong or _RE_PAY_WEAK.search(text):  # Payments are only looked for then.
        steps, left_out = parse_payment_steps(text)
        if steps:
            return Intent("payment", text, steps, think, left_out)
    if pay_strong:
        return Intent("payment_help", text, think=think)
    if _RE_WEATHER.search(text):
        call = PlannedCall("get_weather", {"location": parse_city(text)})
        return Intent("weather", text, ((call,),), think)
    if _RE_LOCATION.search(text):
        calls = (PlannedCall("get_location"),) * (2 if _RE_TWICE.search(text) else 1)
        return Intent("location", text, (calls,), think)
    if _RE_MUSIC.search(text):
        match = _RE_TRACK.search(text)
        digits = next(g for g in match.groups() if g) if match else ""
        track = int(digits) if 0 < len(digits) <= MAX_NUMBER_DIGITS else 1
        return Intent("music", text, ((PlannedCall("change_bgm", {"track": track}),),), think)
    if _RE_CHART.search(text):
        return Intent("chart", text, ((PlannedCall("draw_chart"),),), think)
    if _RE_SOURCES.search(text):
        return Intent("sources", text, think=think)
    return Intent("chat", text, think=think)
