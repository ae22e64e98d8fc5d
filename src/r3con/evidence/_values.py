"""What carries meaning in a text: its numbers (as values), dates and times, negations, names and units.

`tokens(text)` splits a text into the pieces the value check compares, each with a comparison key
(`norm`) and, where it carries meaning, a `flag`:

    number      a number as a value: separators, decimal point or comma, sign ("-5", "−5", "(5)" as in
                accounts), percentages ("5%", "5 per cent"), scale words and suffixes ("4.2 million",
                "$3bn", "500万", "3.5亿"), ordinals ("21st"), number words ("fifty-two"); 1,250,000,
                1 250 000 and 1250000 are one value
    date        times ("10:30", "10.30 p.m."), month and weekday names
    negation    not no never none nobody nothing nowhere neither nor without cannot, "n't"
                (split: "didn't" is "did" + "not"); CJK 不 没 无 未 非 否 莫 勿 别 毋 弗
    unit        a currency ("$", "USD", "dollars" ...), or a unit word (`UNITS`: miles, hours, shares,
                tons ...) just after a number ("4,200 shares", "5 miles")
    direction   the words of a change's direction (increase/decrease, rose/fell, higher/lower, gain/loss ...)
    name        a capitalised Latin word that the vocabulary (`Vocabulary`: the words the document
                writes in lower case) never has in lower case: "Harker", "Varna", not "The" or "About"
    term        a CJK character other than a function character (的 了 和 与 ...): without
                segmentation there is no telling a name from another word, and a changed character
                in copied Chinese or Japanese text almost always changes what is named

Other words (and function words, punctuation, white space) have no flag: they may differ.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cached_property

Flag = str  # "number", "date", "negation", "unit", "direction", "name", "term"

_IDEOGRAPH = "\u3005\u3007\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CURRENCY = {"$": "$", "us$": "$", "usd": "$", "dollar": "$", "dollars": "$", "€": "€", "eur": "€", "euro": "€",
             "euros": "€", "£": "£", "gbp": "£", "pound": "£", "pounds": "£", "¥": "¥", "rmb": "¥", "cny": "¥",
             "yuan": "¥", "jpy": "jp¥", "yen": "jp¥", "hk$": "hk$", "hkd": "hk$"}
_SCALE = {"thousand": 3, "k": 3, "million": 6, "mn": 6, "m": 6, "mm": 6, "billion": 9, "bn": 9, "b": 9,
          "trillion": 12, "tn": 12, "千": 3, "万": 4, "十万": 5, "百万": 6, "千万": 7, "亿": 8, "万亿": 12}
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_NUMBER_WORDS.update({w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())})
_ORDINAL_WORDS = {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split())}
_MULTIPLIERS = {"hundred": 2, "thousand": 3, "million": 6, "billion": 9}
NEGATIONS = frozenset("not no never none nobody nothing nowhere neither nor without cannot".split())
CJK_NEGATIONS = frozenset("不没无未非否莫勿别毋弗")
DIRECTIONS = frozenset((
    "increase increased increases increasing decrease decreased decreases decreasing rise rises rose risen "
    "rising fall falls fell fallen falling grow grew grown growth decline declined declines declining higher "
    "lower highest lowest up down gain gains gained loss losses lost profit profits more less fewer above below "
    "before after positive negative surplus deficit up down upward downward maximum minimum").split())
MONTHS = frozenset(("january february march april may june july august september october november december "
                    "jan feb mar apr jun jul aug sep sept oct nov dec").split())
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
FUNCTION_WORDS = frozenset((
    "a an the of to in on at by for with from into onto upon and or but as that which who whom whose this these "
    "those it its is are was were be been being has have had do does did so then there here also very "
    "i me my we us our you your he him his she her they them their one's s").split())
CJK_FUNCTION = frozenset("的地得了着过之其也都而并及与和或等是在对为于以将已被把向从即则就又还这那该此所个")
UNITS = frozenset((
    "mile miles km kilometre kilometres kilometer kilometers metre metres meter meters m cm mm foot feet yard yards "
    "inch inches acre acres hectare hectares mile kg kilogram kilograms gram grams g lb lbs pound pounds ton tons "
    "tonne tonnes ounce ounces oz gallon gallons litre litres liter liters barrel barrels bbl mcf boe kwh mw mwh "
    "second seconds minute minutes hour hours day days week weeks month months year years decade decades "
    "century centuries share shares unit units point points bps basis cent cents employees people men persons "
    "times x").split())
_CONTRACTIONS = {"can't": "can", "won't": "will", "shan't": "shall", "ain't": "am"}

_NUMBER = re.compile(r"""
    (?P<cur>(?:US\$|HK\$|USD|HKD|RMB|CNY|EUR|GBP|JPY|[$€£¥])\s{0,8})?
    (?P<sign>[-−+](?=\d))?
    (?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?           # 1,250,000.5
      |\d{1,3}(?:[\u00a0\u202f\u2009']\d{3})+(?:[.,]\d+)?   # 1 250 000 (narrow spaces), 1'250'000
      |\d{1,3}(?:\x20\d{3})+(?:\.\d+)?(?![\d,]|\.\d)  # 1 250 000 (plain spaces; not before more digits)
      |\d{1,3}(?:\.\d{3}){2,}(?:,\d+)?              # 1.250.000,5
      |\d+(?:\.\d+)?(?:,\d{1,2}(?!\d))?             # 1250000, 4.2, 4,25 (a decimal comma)
      |\.\d+)
    (?P<time>(?::\d{2}){1,2})?
    (?P<suffix>\s{0,3}(?:%|per\s?cent(?![a-z])|percent(?![a-z])|个\s*百\s*分\s*点|百\s*分\s*点)
      |\s?(?:[ap]\.m\.|[ap]m(?![a-z]))
      |(?:st|nd|rd|th)(?![a-z])
      |\s{0,3}(?:thousand|million|billion|trillion)(?![a-z])
      |(?:bn|mn|tn)(?![a-z])
      |\s?(?:万\s*亿|十\s*万|百\s*万|千\s*万|万|亿|千)
    )?
    """, re.VERBOSE | re.IGNORECASE)
_SMALL_SCALE = re.compile(r"(?:k|m|mm|b)\b", re.IGNORECASE)  # "$4m", "$3.5k": only after a currency
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")


_IDEOGRAPH_CHAR = re.compile(f"[{_IDEOGRAPH}]")


def _latin(c: str) -> bool:
    """A letter of an alphabet (a digit after it is part of a word: "R3", "A4"); CJK characters are not."""
    return c.isalpha() and not _IDEOGRAPH_CHAR.match(c)


@dataclass(frozen=True)
class Token:
    """One piece of a text: its comparison key, its flag (None: may differ), [start, end) in the text."""

    norm: str
    flag: Flag | None
    start: int
    end: int


ELLIPSIS = "..."


class Vocabulary:
    """The words a text writes in lower case (its other capitalised words are names), computed once."""

    def __init__(self, *texts: str):
        self.lower: set[str] = set()
        for text in texts:
            self.add(text)

    def add(self, text: str) -> None:
        self.lower.update(w for w in _WORD.findall(text) if w.islower())

    def is_name(self, word: str) -> bool:
        """A capitalised word the vocabulary never has in lower case (wherever it stands: titles and
        headings capitalise common words too)."""
        if not word[:1].isupper() or word == "I" or word.lower() in FUNCTION_WORDS:
            return False
        base = word.lower().replace("’", "'")
        return (base[:-2] if base.endswith("'s") else base) not in self.lower


def nfkc(text: str) -> tuple[str, list[int]]:
    """`text` in Unicode compatibility form (full-width digits and punctuation, ligatures, "…") and for
    each character of it the index of the original character."""
    if text.isascii():
        return text, list(range(len(text)))
    out: list[str] = []
    index: list[int] = []
    for i, c in enumerate(text):
        d = unicodedata.normalize("NFKC", c) if ord(c) > 127 else c
        if c in "\u00a0\u202f\u2009":
            d = c  # grouping spaces keep their meaning for numbers
        out.append(d)
        index.extend([i] * len(d))
    return "".join(out), index


def number_value(raw: str) -> Decimal | None:
    """The value of a number as written (separators and a decimal comma read), without sign or scale."""
    s = raw.replace("\u00a0", "").replace("\u202f", "").replace("\u2009", "").replace("'", "").replace(" ", "")
    if re.fullmatch(r"\d{1,3}(?:\.\d{3}){2,}(?:,\d+)?", s):
        s = s.replace(".", "").replace(",", ".")
    elif re.fullmatch(r"\d+,\d{1,2}", s):
        s = s.replace(",", ".")
    else:
        s = s.replace(",", "")
    try:
        return Decimal(s)
    except InvalidOperation:
        return None


def _canonical(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def _number_token(m: re.Match[str], text: str, offset: int, index: list[int]) -> tuple[list[Token], int]:
    """The tokens of the number `m` matched (a currency first, if any) and where in `text` it ends."""
    value = number_value(m.group("num"))
    if value is None:
        return [], m.end()
    stop = m.end()
    suffix = re.sub(r"\s", "", (m.group("suffix") or "").lower())
    cur = (m.group("cur") or "").strip().lower()
    if m.group("time"):
        norm = f"t{int(value)}{m.group('time')}{suffix.replace('.', '') if suffix[:1] in 'ap' else ''}"
        return [Token(norm, "date", offset + index[m.start()], offset + index[stop - 1] + 1)], stop
    if suffix[:1] in ("a", "p") and suffix.replace(".", "") in ("am", "pm"):
        norm = f"t{_canonical(value)}{suffix.replace('.', '')}"
        return [Token(norm, "date", offset + index[m.start()], offset + index[stop - 1] + 1)], stop
    scale = _SCALE.get(suffix, 0)
    if cur and not suffix:
        small = _SMALL_SCALE.match(text, stop)
        if small:
            scale, stop = _SCALE[small.group(0).lower()], small.end()
    negative = bool(m.group("sign") and m.group("sign") in "-−")
    if not negative and text[:m.start()].rstrip(" ").endswith("(") and text[stop:].lstrip(" ").startswith(")"):
        negative = True  # (1,234) in accounts
    value = value.scaleb(scale)
    kind = "o" if suffix in ("st", "nd", "rd", "th") else "pp" if "百分点" in suffix else (
        "%" if "%" in suffix or "cent" in suffix else "")
    num_start = m.start("sign") if m.group("sign") else m.start("num")
    out = [Token(f"#{_canonical(-value if negative else value)}{kind}", "number",
                 offset + index[num_start], offset + index[stop - 1] + 1)]
    if cur:
        out.insert(0, Token("¤" + _CURRENCY.get(cur, cur), "unit", offset + index[m.start()],
                            offset + index[m.start() + len(m.group("cur").rstrip()) - 1] + 1))
    return out, stop


def tokens(text: str, vocabulary: Vocabulary | None = None, *, offset: int = 0) -> list[Token]:
    """The pieces of `text` the value check compares (see the module's docstring), spans indexing `text`
    (plus `offset`)."""
    vocab = vocabulary or Vocabulary(text)
    norm, index = nfkc(text)
    out: list[Token] = []
    i, n = 0, len(norm)
    last_number = -10  # index in `out` of the last number token (the word after it is its unit)
    while i < n:
        c = norm[i]
        if c.isspace() or (not c.isalnum() and c not in "$€£¥-−+.(…"):
            i += 1
            continue
        if norm.startswith("...", i):
            j = i
            while j < n and norm[j] == ".":
                j += 1
            out.append(Token(ELLIPSIS, None, offset + index[i], offset + index[j - 1] + 1))
            i = j
            continue
        m = _NUMBER.match(norm, i)
        if m and m.group("num") and (i == 0 or not _latin(norm[i - 1]) or m.group("cur")):
            if m.group("sign") and not m.group("cur") and i > 0 and norm[i - 1].isalnum():
                i += 1  # "10-15": a range, not a sign
                continue
            found, stop = _number_token(m, norm, offset, index)
            if found:
                out.extend(found)
                last_number = len(out) - 1
                i = stop
                continue
        if c in "$€£¥":  # a currency standing apart from its number (table columns: "$      107")
            out.append(Token("¤" + _CURRENCY[c], "unit", offset + index[i], offset + index[i] + 1))
            i += 1
            continue
        if _IDEOGRAPH_CHAR.match(c):
            flag = "negation" if c in CJK_NEGATIONS else None if c in CJK_FUNCTION else "term"
            out.append(Token(c, flag, offset + index[i], offset + index[i] + 1))
            i += 1
            continue
        w = _WORD.match(norm, i)
        if not w:
            i += 1
            continue
        word = w.group(0)
        out.extend(_word_tokens(word, offset + index[w.start()], offset + index[w.end() - 1] + 1, vocab,
                                unit=len(out) - 1 == last_number))
        i = w.end()
    return _number_words(out)


def _word_tokens(word: str, start: int, end: int, vocab: Vocabulary, unit: bool) -> list[Token]:
    lower = word.lower().replace("’", "'")
    if lower.endswith("n't"):
        head = _CONTRACTIONS.get(lower, lower[:-3])
        return [Token(head, None, start, end - 3), Token("not", "negation", end - 3, end)]
    if lower in NEGATIONS:
        return [Token(lower, "negation", start, end)] if lower != "cannot" else [
            Token("can", None, start, end - 3), Token("not", "negation", end - 3, end)]
    if lower.endswith("'s") and len(lower) > 2:  # "Harker's": the name, then the possessive
        return [*_word_tokens(word[:-2], start, end - 2, vocab, unit), Token("'s", None, end - 2, end)]
    if lower in _CURRENCY:
        return [Token("¤" + _CURRENCY[lower], "unit", start, end)]
    flag: Flag | None = None
    if lower in MONTHS or lower in WEEKDAYS:
        flag = "date" if word[:1].isupper() or lower in WEEKDAYS or len(lower) > 3 else None
    elif lower in DIRECTIONS:
        flag = "direction"
    elif vocab.is_name(word):
        flag = "name"
    elif unit and lower in UNITS:
        flag = "unit"
    return [Token(lower, flag, start, end)]


def _number_words(out: list[Token]) -> list[Token]:
    """Runs of English number words ("fifty-two", "two hundred", "third") as number tokens."""
    result: list[Token] = []
    i = 0
    while i < len(out):
        t = out[i]
        if t.norm in _ORDINAL_WORDS and t.flag in (None, "name"):
            result.append(Token(f"#{_ORDINAL_WORDS[t.norm]}o", "number", t.start, t.end))
            i += 1
            continue
        if (t.norm not in _NUMBER_WORDS and t.norm != "hundred") or t.flag not in (None, "name"):
            result.append(t)
            i += 1
            continue
        total, current, j = 0, 0, i
        while j < len(out) and (out[j].norm in _NUMBER_WORDS or out[j].norm in _MULTIPLIERS
                                or (out[j].norm == "and" and j + 1 < len(out) and out[j + 1].norm in _NUMBER_WORDS)):
            word = out[j].norm
            if word in _NUMBER_WORDS:
                current += _NUMBER_WORDS[word]
            elif word == "hundred":
                current = max(current, 1) * 100
            elif word in _MULTIPLIERS:
                total += max(current, 1) * 10 ** _MULTIPLIERS[word]
                current = 0
            j += 1
        result.append(Token(f"#{total + current}", "number", t.start, out[j - 1].end))
        i = j
    return result


@dataclass(frozen=True)
class Stated:
    """A number as a text states it: where, its value (sign and scale applied) and the value as written
    (without the scale), the step of its last written digit at its scale, and whether it is a percentage."""

    text: str
    start: int
    end: int
    value: Decimal
    written: Decimal
    step: Decimal
    percent: bool

    def candidates(self) -> list[tuple[Decimal, Decimal]]:
        """(value, step) pairs it may stand for: as scaled, as written, a percentage as a fraction."""
        out = [(self.value, self.step), (self.written, _step(self.written))]
        if self.percent:
            out.append((self.value.scaleb(-2), self.step.scaleb(-2)))
        return out


def _step(value: Decimal) -> Decimal:
    exponent = value.as_tuple().exponent
    return Decimal(1).scaleb(exponent if isinstance(exponent, int) and exponent < 0 else 0)


def stated(text: str) -> list[Stated]:
    """The numbers `text` states in digits (not times, not digits inside words like "R3")."""
    norm, index = nfkc(text)
    out: list[Stated] = []
    for m in _NUMBER.finditer(norm):
        sign_at = m.start("sign") if m.group("sign") else -1
        signed = sign_at >= 0 and not (sign_at > 0 and norm[sign_at - 1].isalnum())  # "10-15" is a range
        start = sign_at if signed else m.start("num")
        before = norm[start - 1] if start > 0 else " "
        if m.group("time") or _latin(before) or before.isdigit() or (before == "." and start > 1 and norm[start - 2].isalnum()):
            continue  # a time, or digits inside a word or an id ("R3", "R3.1.2")
        written = number_value(m.group("num"))
        if written is None:
            continue
        suffix = re.sub(r"\s", "", (m.group("suffix") or "").lower())
        scale = _SCALE.get(suffix, 0)
        if m.group("cur") and not suffix and (small := _SMALL_SCALE.match(norm, m.end())):
            scale = _SCALE[small.group(0).lower()]
        sign = -1 if signed and m.group("sign") in "-−" else 1
        if sign == 1 and norm[:start].rstrip(" ").endswith("(") and norm[m.end():].lstrip(" ").startswith(")"):
            sign = -1
        out.append(Stated(text[index[start]:index[m.end() - 1] + 1], index[start], index[m.end() - 1] + 1,
                          sign * written.scaleb(scale), sign * written, _step(written).scaleb(scale),
                          "%" in suffix or "cent" in suffix))
    return out


@dataclass(frozen=True)
class Numbers:
    """The numeric values a text states, each with and without its scale word ("4.2 million": 4.2 and
    4,200,000), percentages also as fractions, number words too; for looking a value up."""

    text: str

    @cached_property
    def values(self) -> frozenset[Decimal]:
        found: set[Decimal] = set()
        for n in stated(self.text):
            found.update({n.value, n.written, abs(n.written)})
            if n.percent:
                found.add(n.value.scaleb(-2))
        for t in _number_words(tokens_plain(self.text)):
            if t.flag == "number":
                found.add(Decimal(t.norm.strip("#o%")))
        return frozenset(found)


def tokens_plain(text: str) -> list[Token]:
    """Words only (lower case), for number words: no vocabulary or flags needed."""
    return [Token(w.group(0).lower(), None, w.start(), w.end()) for w in _WORD.finditer(text)]


def value_of(number: int | float) -> Decimal:
    """A JSON number as a Decimal (floats by their shortest repr: 4.2, not 4.2000000000000002)."""
    return Decimal(repr(number)) if isinstance(number, float) else Decimal(number)
