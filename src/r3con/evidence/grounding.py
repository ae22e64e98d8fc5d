"""Whether values are grounded: a record's own values in its passage or document, the answer's numbers
in what it cites (or in what the agent's code printed).

    ungrounded(record, passage, hay)   the record's scalar fields found in neither
    unsupported_numbers(answer, ...)   the answer's numbers that no cited record, cited document,
                                       code output or the question states

Numbers compare as numbers (`r3con.evidence._values`): separators, scale words ("4.2 million", 万, 亿), a
percentage as a fraction (5.2% and 0.052); a document that declares its unit ("单位：万元",
"in thousands") has its numbers counted at that unit too. A value written with fewer decimals stands
for its rounding (4.2 for 4.21, "4.2 million" for 4,213,000); an integer must be exact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ._fold import fold
from ._values import MONTHS, Numbers, Stated, nfkc, stated, value_of

SHORT_STRING_CHARS = 100  # longer string fields (descriptions, summaries) are the model's words: not checked
SHORT_STRING_WORDS = 12

_UNIT_DECLARED = re.compile(r"(?:单位|货币单位)\s*[:：]?\s*(?:人民币|美元|港元|港币)?\s*(千|万|百万|千万|亿)元"
                            r"|\(?\s*in\s+(thousands|millions|billions)\b", re.IGNORECASE)
_DECLARED_SCALE = {"千": 3, "万": 4, "百万": 6, "千万": 7, "亿": 8, "thousands": 3, "millions": 6, "billions": 9}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DATES = (
    (re.compile(r"(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})\s*日?"), "ymd"),
    (re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})", re.IGNORECASE), "mdy"),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})", re.IGNORECASE), "dmy"),
)
_MONTH_NUMBER = {m: i + 1 for i, m in enumerate("january february march april may june july august september "
                                                "october november december".split())}


def _month(name: str) -> int:
    name = name.lower().rstrip(".")
    return next(n for full, n in _MONTH_NUMBER.items() if full.startswith(name[:3]))


def dates(text: str) -> set[tuple[int, int, int]]:
    """The full dates (year, month, day) a text states: 2019-03-31, 2019年3月31日, March 31, 2019, 31 March 2019."""
    norm, _ = nfkc(text)
    found: set[tuple[int, int, int]] = set()
    for pattern, order in _DATES:
        for m in pattern.finditer(norm):
            a, b, c = m.groups()
            try:
                y, mo, d = ((int(a), int(b), int(c)) if order == "ymd" else (int(c), _month(a), int(b))
                            if order == "mdy" else (int(c), _month(b), int(a)))
            except (StopIteration, ValueError):
                continue
            if 1 <= mo <= 12 and 1 <= d <= 31:
                found.add((y, mo, d))
    return found


def declared_scales(text: str) -> set[int]:
    """Powers of ten a document declares its figures in ("单位：万元" is 4, "in thousands" is 3)."""
    return {_DECLARED_SCALE[(m.group(1) or m.group(2)).lower()] for m in _UNIT_DECLARED.finditer(text)}


def _near(value: Decimal, step: Decimal, found: Iterable[Decimal]) -> bool:
    """Some value of `found` rounds to `value` at `step` (the last digit `value` is written with)."""
    half = step / 2
    return any(abs(f - value) <= half for f in found)


class Source:
    """A text whose numbers, dates and folded words are looked up, each computed once."""

    def __init__(self, text: str):
        self.text = text
        self._numbers: frozenset[Decimal] | None = None
        self._dates: set[tuple[int, int, int]] | None = None
        self._folded: str | None = None
        self._scales: set[int] | None = None

    @property
    def numbers(self) -> frozenset[Decimal]:
        if self._numbers is None:
            base = Numbers(self.text).values
            extra = {v.scaleb(s) for s in self.scales for v in base}
            self._numbers = base | frozenset(extra)
        return self._numbers

    @property
    def scales(self) -> set[int]:
        if self._scales is None:
            self._scales = declared_scales(self.text)
        return self._scales

    @property
    def dates(self) -> set[tuple[int, int, int]]:
        if self._dates is None:
            self._dates = dates(self.text)
        return self._dates

    @property
    def folded(self) -> str:
        if self._folded is None:
            self._folded = fold(self.text)[0]
        return self._folded

    def has_number(self, value: Decimal) -> bool:
        return _near(value, _step_of(value), self.numbers)

    def has_string(self, value: str) -> bool:
        wanted = fold(value)[0]
        return bool(wanted) and wanted in self.folded


def _step_of(value: Decimal) -> Decimal:
    exponent = value.normalize().as_tuple().exponent
    return Decimal(1).scaleb(exponent) if isinstance(exponent, int) and exponent < 0 else Decimal(0)


def _number_in(value: str) -> Decimal | None:
    """A string that is only a number ("4,200", "5.2%", "$4.2 million"): its value; else None."""
    found = stated(value)
    if len(found) != 1:
        return None
    rest = value.replace(found[0].text, "").strip(" $€£¥%()")
    if rest and not re.fullmatch(r"(?i)(?:usd|rmb|cny|eur|gbp|元|万元|亿元|percent|per cent)?", rest):
        return None
    return found[0].value


def field_grounded(value: Any, sources: tuple[Source, ...]) -> bool | None:
    """Whether a field's value is in one of `sources` (None: not a value this checks: booleans, nulls,
    long strings, lists and objects)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        try:
            number = value_of(value)
        except InvalidOperation:
            return None
        return any(s.has_number(number) for s in sources)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > SHORT_STRING_CHARS or len(text.split()) > SHORT_STRING_WORDS:
        return None
    if any(s.has_string(text) for s in sources):
        return True
    when = dates(text)
    if when:
        return any(when & s.dates for s in sources)
    amount = _number_in(text)
    if amount is not None:
        return any(s.has_number(amount) for s in sources)
    return False


def ungrounded(record: Mapping[str, Any], sources: tuple[Source, ...], skip: Iterable[str] = ()) -> list[str]:
    """The record's fields (not `_`-prefixed, not in `skip`) whose scalar value no source states."""
    skipped = set(skip)
    return [k for k, v in record.items()
            if not k.startswith("_") and k not in skipped and field_grounded(v, sources) is False]


_IDS = re.compile(r"\bR\d+(?:\.\d+){2}\b|\b(?:documents?|docs?\.?|part)\s*#?\s*\d+(?:\.\d+)?|文档\s*\d+", re.IGNORECASE)
_LIST_MARKER = re.compile(r"^\s*(?:\d{1,2}[.)]|\(\d{1,2}\))\s", re.MULTILINE)


def answer_numbers(answer: str) -> list[Stated]:
    """The numbers an answer states, less record ids, document numbers and list markers."""
    masked = _IDS.sub(lambda m: " " * len(m.group(0)), answer)
    masked = _LIST_MARKER.sub(lambda m: " " * len(m.group(0)), masked)
    return stated(masked)


def unsupported_numbers(answer: str, sources: Iterable[str], values: Iterable[Any] = (),
                        computed_by: str | None = None) -> tuple[str, ...]:
    """The answer's numbers (as written) that none of `sources` (texts) or `values` (record fields) states.
    `computed_by`: the code that produced the answer with `final_answer`: a number not typed into that
    code is its output over the records, not a claim of the model's."""
    found: set[Decimal] = set()
    for text in sources:
        found |= Source(text).numbers
    for value in values:
        if isinstance(value, int | float) and not isinstance(value, bool):
            found.add(value_of(value))
        elif isinstance(value, str) and len(value) <= 200:
            found |= Numbers(value).values
    typed = Numbers(computed_by).values if computed_by is not None else None
    out: list[str] = []
    for n in answer_numbers(answer):
        if any(_near(v, step, found) for v, step in n.candidates()):
            continue
        if typed is not None and not any(v in typed for v, _ in n.candidates()):
            continue  # computed by the code, not typed into it
        if n.text not in out:
            out.append(n.text)
    return tuple(out)
