"""The mutation battery of the value check: genuine passages of real documents altered as copying models
alter them, each verified against its document (`r3con.evidence.citations.verify`).

Meaning-changing alterations must never come out verified (exact, tolerant or fuzzy); meaning-keeping
ones should (at least 98%). A paraphrase that reorders clauses is reported on its own (see
docs/evidence.md): it keeps the values but is not a copy.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from r3con.evidence.citations import VERIFIED, Haystack, fold, verify

Mutate = Callable[[str, random.Random], str | None]


@dataclass(frozen=True)
class Case:
    kind: str
    group: str  # "changes" meaning, "keeps" it, or "reorders" (not a copy, reported on its own)
    corpus: str
    doc: str
    passage: str
    altered: str
    outcome: str
    differences: tuple[str, ...] = ()


# -- sentences ---------------------------------------------------------------------------------------

_EN_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z“\"'(])|\n\s*\n")
_ZH_SPLIT = re.compile(r"(?<=[。！？；])|\n")


def sentences(text: str, cjk: bool) -> list[str]:
    """Sentences (or table rows) of the text, exactly as they stand in it, of a length a record quotes."""
    pieces = _ZH_SPLIT.split(text) if cjk else _EN_SPLIT.split(text)
    out = []
    for p in pieces:
        s = p.strip()
        lo, hi = (15, 160) if cjk else (50, 320)
        if re.search(r"\b(?:Mr|Mrs|Dr|St|Messrs|Inc|No)\.$", s):
            continue  # cut at an abbreviation, not at a sentence's end
        if lo <= len(s) <= hi and s in text and "\ufffd" not in s:
            out.append(s)
    return out


# -- meaning-changing alterations ------------------------------------------------------------------

_NUM = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w])")
_YEAR = re.compile(r"(?<!\d)(1[0-9]{3}|20[0-9]{2})(?!\d)")


def _pick(rng: random.Random, matches: list[re.Match[str]]) -> re.Match[str] | None:
    return rng.choice(matches) if matches else None


def one_digit(s: str, rng: random.Random) -> str | None:
    m = _pick(rng, [m for m in _NUM.finditer(s) if not _YEAR.fullmatch(m.group(0))])
    if m is None:
        return None
    digits = [i for i, c in enumerate(m.group(0)) if c.isdigit()]
    i = rng.choice(digits)
    old = m.group(0)[i]
    new = rng.choice([d for d in "0123456789" if d != old and not (i == 0 and d == "0")])
    return s[:m.start() + i] + new + s[m.start() + i + 1:]


def year(s: str, rng: random.Random) -> str | None:
    m = _pick(rng, list(_YEAR.finditer(s)))
    if m is None:
        return None
    shifted = int(m.group(0)) + rng.choice([-3, -2, -1, 1, 2, 3])
    return s[:m.start()] + str(shifted) + s[m.end():]


_AMOUNT = re.compile(r"(?:[$€£¥]\s?)?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[$€£¥]\s?\d+(?:\.\d+)?|\d+(?:\.\d+)?\s?(?:million|billion|thousand|万|亿)")


def amount(s: str, rng: random.Random) -> str | None:
    m = _pick(rng, list(_AMOUNT.finditer(s)))
    if m is None:
        return None
    text = m.group(0)
    digits = re.search(r"\d[\d,]*(?:\.\d+)?", text)
    assert digits is not None
    raw = digits.group(0)
    decimals = len(raw.split(".")[1]) if "." in raw else 0
    value = float(raw.replace(",", "")) * rng.choice([0.5, 0.8, 1.25, 1.5, 2.0, 3.0])
    new = f"{value:,.{decimals}f}" if "," in raw else f"{value:.{decimals}f}"
    if new == raw:
        return None
    return s[:m.start()] + text.replace(raw, new, 1) + s[m.end():]


_PERCENT = re.compile(r"(\d+(?:\.\d+)?)(\s?(?:%|％|percent|per cent))")


def percentage(s: str, rng: random.Random) -> str | None:
    m = _pick(rng, list(_PERCENT.finditer(s)))
    if m is None:
        return None
    raw = m.group(1)
    decimals = len(raw.split(".")[1]) if "." in raw else 0
    new = f"{float(raw) + rng.choice([-5, -2, -1, -0.5, 0.5, 1, 2, 5]) * (1 if decimals == 0 else 0.1):.{decimals}f}"
    if new == raw or new.startswith("-"):
        return None
    return s[:m.start(1)] + new + s[m.end(1):]


_UNITS = [("million", "billion"), ("billion", "million"), ("thousand", "million"), ("miles", "kilometres"),
          ("hours", "minutes"), ("days", "weeks"), ("feet", "yards"), ("years", "months"), ("weeks", "days"),
          ("minutes", "hours"), ("万元", "亿元"), ("亿元", "万元"), ("千元", "万元"), ("百万元", "亿元"),
          ("USD", "EUR"), ("%", " basis points"), ("个百分点", "%"), ("元", "美元"), ("shares", "units")]


def unit(s: str, rng: random.Random) -> str | None:
    options = []
    for old, new in _UNITS:
        pattern = rf"(?<=\d)\s?{re.escape(old)}(?!\w)" if old.isascii() and old.isalpha() else rf"(?<=\d){re.escape(old)}"
        options += [(m, new) for m in re.finditer(pattern, s)]
    if not options:
        return None
    m, new = rng.choice(options)
    lead = " " if m.group(0).startswith(" ") or (new.isascii() and new[:1].isalpha()) else ""
    return s[:m.start()] + lead + new.strip() + s[m.end():]


_EN_AUX = re.compile(r"\b(is|was|were|are|had|has|could|would|will|did|does|do|can|should|must|shall)\b(?! not\b)")
_EN_NOT = re.compile(r"\s(?:not|never)\b|n't\b|\bno\s(?=\w)")
_ZH_ADD = re.compile(r"(是|会|能|可以|应|需要|存在|适用|包括|影响)")
_ZH_NOT = re.compile(r"不|未|没有|没|无|非")


def negation_added(s: str, rng: random.Random) -> str | None:
    if re.search(r"[\u4e00-\u9fff]", s):
        m = _pick(rng, [m for m in _ZH_ADD.finditer(s) if m.start() == 0 or s[m.start() - 1] not in "不未没无非"])
        return None if m is None else s[:m.start()] + "不" + s[m.start():]
    m = _pick(rng, list(_EN_AUX.finditer(s)))
    return None if m is None else s[:m.end()] + " not" + s[m.end():]


def negation_dropped(s: str, rng: random.Random) -> str | None:
    if re.search(r"[\u4e00-\u9fff]", s):
        m = _pick(rng, list(_ZH_NOT.finditer(s)))
        return None if m is None else s[:m.start()] + s[m.end():]
    m = _pick(rng, list(_EN_NOT.finditer(s)))
    if m is None:
        return None
    return s[:m.start()] + (" " if m.group(0).startswith(" ") and not m.group(0).startswith(" no") else "") + s[m.end():]


_CAPITAL = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]{2,}\b")


def name_swap(names: list[str]) -> Mutate:
    """A name of the passage (a capitalised word where no sentence begins; a company's short name in
    Chinese) replaced by another name of the same corpus."""
    def mutate(s: str, rng: random.Random) -> str | None:
        zh = [n for n in names if re.search(r"[\u4e00-\u9fff]", n) and n in s]
        if zh:
            old = rng.choice(zh)
            new = rng.choice([n for n in names if n != old and re.search(r"[\u4e00-\u9fff]", n)])
            return s.replace(old, new, 1)
        m = _pick(rng, [m for m in _CAPITAL.finditer(s) if m.group(0) in names])
        if m is None:
            return None
        new = rng.choice([n for n in names if n != m.group(0) and n.isascii()])
        return s[:m.start()] + new + s[m.end():]
    return mutate


_EN_DATE = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)? (January|February|March|April|May|June|July|August|September|"
                      r"October|November|December)|\b(January|February|March|April|May|June|July|August|September|"
                      r"October|November|December) (\d{1,2})\b")
_ZH_DATE = re.compile(r"(\d{1,2})(\s?)(月)(\s?)(\d{1,2})(\s?)日")
_MONTHS = "January February March April May June July August September October November December".split()


def date(s: str, rng: random.Random) -> str | None:
    m = _pick(rng, list(_ZH_DATE.finditer(s)))
    if m is not None:
        day = int(m.group(5))
        new = str(day - 1 if day > 1 else day + 1)
        return s[:m.start(5)] + new + s[m.end(5):]
    m = _pick(rng, list(_EN_DATE.finditer(s)))
    if m is None:
        return None
    if rng.random() < 0.5:  # another day
        g = 1 if m.group(1) else 4
        day = int(m.group(g))
        return s[:m.start(g)] + str(day + 1 if day < 28 else day - 1) + s[m.end(g):]
    g = 2 if m.group(2) else 3
    month = rng.choice([x for x in _MONTHS if x != m.group(g)])
    return s[:m.start(g)] + month + s[m.end(g):]


_DIRECTIONS = [("increased", "decreased"), ("decreased", "increased"), ("increase", "decrease"),
               ("decrease", "increase"), ("rose", "fell"), ("fell", "rose"), ("higher", "lower"), ("lower", "higher"),
               ("more", "less"), ("before", "after"), ("after", "before"), ("增加", "减少"), ("减少", "增加"),
               ("增长", "下降"), ("下降", "增长"), ("上升", "下降")]


def direction(s: str, rng: random.Random) -> str | None:
    options = [(m, new) for old, new in _DIRECTIONS for m in re.finditer(rf"\b{old}\b" if old.isascii() else old, s)]
    if not options:
        return None
    m, new = rng.choice(options)
    return s[:m.start()] + new + s[m.end():]


# -- meaning-keeping alterations -------------------------------------------------------------------


def whitespace(s: str, rng: random.Random) -> str | None:
    if re.search(r"[\u4e00-\u9fff]", s):  # a space between CJK characters (as some models copy), or none
        spaced = re.sub(r"(?<=[\u4e00-\u9fff])(?=[\u4e00-\u9fff])", " ", s)
        return spaced if rng.random() < 0.5 and spaced != s else re.sub(r"\s+", "", s) if re.search(r"\s", s) else spaced
    words = s.split()
    if len(words) < 6:
        return None
    return "\n".join("  ".join(words[i:i + 5]) for i in range(0, len(words), 5))


_QUOTES = {"“": '"', "”": '"', "‘": "'", "’": "'", '"': "“", "'": "’"}


def quotes(s: str, rng: random.Random) -> str | None:
    if not any(c in s for c in _QUOTES):
        return None
    return "".join(_QUOTES.get(c, c) for c in s)


def dashes(s: str, rng: random.Random) -> str | None:
    if "—" in s or "–" in s:
        return s.replace("—", "--").replace("–", "-")
    if " - " in s or "--" in s:
        return s.replace(" - ", " — ").replace("--", "—")
    return None


def hyphenation(s: str, rng: random.Random) -> str | None:
    words = [m for m in re.finditer(r"\b[a-z]{8,}\b", s)]
    if not words:
        return None
    m = rng.choice(words)
    cut = m.start() + len(m.group(0)) // 2
    return s[:cut] + "-\n" + s[cut:]


def case(s: str, rng: random.Random) -> str | None:
    if s.lower() == s:
        return None
    return s.lower() if rng.random() < 0.7 else s.upper()


_HALF = {"，": ",", "。": ".", "：": ":", "；": ";", "（": "(", "）": ")", "！": "!", "？": "?", "、": ","}


def full_width(s: str, rng: random.Random) -> str | None:
    if any(c in s for c in _HALF):
        return "".join(_HALF.get(c, c) for c in s)
    if re.search(r"[0-9A-Za-z(),:%]", s):  # to full-width forms
        return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and (c.isalnum() or c in "(),:%") else c for c in s)
    return None


def elision(s: str, rng: random.Random) -> str | None:
    words = s.split()
    if len(words) >= 13:  # at least four words kept on either side
        a = rng.randrange(4, len(words) - 8)
        b = a + rng.randrange(2, 5)
        return " ".join(words[:a]) + " ... " + " ".join(words[b:])
    if re.search(r"[\u4e00-\u9fff]", s):  # from one clause or cell boundary to another
        cuts = [m.end() for m in re.finditer(r"[，、|；：]", s)]
        pairs = [(a, b) for a in cuts for b in cuts if 10 <= a and b - a >= 3 and len(s) - b >= 10]
        if not pairs:
            return None
        a, b = rng.choice(pairs)
        return s[:a] + "……" + s[b:]
    return None


_FUNCTION = re.compile(r" (the|a|an|of the|that) ")


def function_words(s: str, rng: random.Random) -> str | None:
    if re.search(r"[\u4e00-\u9fff]", s):
        hits = [m.start() for m in re.finditer("的", s)]
        if not hits:
            return None
        i = rng.choice(hits)
        return s[:i] + s[i + 1:]
    m = _pick(rng, list(_FUNCTION.finditer(s)))
    return None if m is None else s[:m.start()] + " " + s[m.end():]


def number_format(s: str, rng: random.Random) -> str | None:
    """1,250,000 as 1 250 000 or 1250000; 5% as 5 percent; didn't as did not."""
    grouped = list(re.finditer(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d,])", s))
    if grouped:
        m = rng.choice(grouped)
        sep = rng.choice([" ", "", "\u202f"])
        return s[:m.start()] + m.group(0).replace(",", sep) + s[m.end():]
    if re.search(r"\d%", s):
        return re.sub(r"(\d)%", r"\1 percent", s, count=1)
    if "n't" in s:
        return s.replace("n't", " not", 1).replace("ca not", "cannot").replace("wo not", "will not")
    return None


_SYNONYMS = [("said", "stated"), ("began", "started"), ("large", "big"), ("big", "large"), ("quickly", "rapidly"),
             ("about", "approximately"), ("also", "likewise"), ("shows", "indicates"), ("seemed", "appeared"),
             ("looked", "seemed"), ("went", "proceeded"), ("came", "arrived"), ("asked", "enquired"),
             ("told", "informed"), ("used", "employed"), ("provide", "supply"), ("include", "comprise"),
             ("received", "got"), ("small", "little"), ("great", "huge"), ("company", "firm"), ("whole", "entire")]


def light_paraphrase(s: str, rng: random.Random) -> str | None:
    """One or two common words replaced by a synonym (what a careless copy does with a quote)."""
    options = [(m, new) for old, new in _SYNONYMS for m in re.finditer(rf"\b{old}\b", s)]
    if not options:
        return None
    m, new = rng.choice(options)
    return s[:m.start()] + new + s[m.end():]


_CJK_SYNONYMS = [("变动", "变化"), ("情况", "状况"), ("原因", "缘由"), ("公司", "企业"), ("主要", "首要"), ("增加", "增长"),
                 ("期末", "期终"), ("报告", "报表")]


def cjk_synonym(s: str, rng: random.Random) -> str | None:
    """A CJK word replaced by a near-synonym: its characters change, which the check counts as a changed
    term (no segmentation tells a synonym from another name); reported apart."""
    options = [(m, new) for old, new in _CJK_SYNONYMS for m in re.finditer(old, s)]
    if not options:
        return None
    m, new = rng.choice(options)
    return s[:m.start()] + new + s[m.end():]


def reordered(s: str, rng: random.Random) -> str | None:
    """The two halves of a sentence around a comma swapped: the same words and values, not a copy."""
    parts = [p for p in re.split(r",\s+", s.rstrip(".")) if p]
    if len(parts) < 2:
        return None
    i = rng.randrange(1, len(parts))
    head, tail = ", ".join(parts[:i]), ", ".join(parts[i:])
    return tail[:1].upper() + tail[1:] + ", " + head[:1].lower() + head[1:] + "."


def alterations(names: list[str]) -> dict[str, tuple[str, Mutate]]:
    return {
        "one digit": ("changes", one_digit), "year": ("changes", year), "amount": ("changes", amount),
        "percentage": ("changes", percentage), "unit": ("changes", unit),
        "negation added": ("changes", negation_added), "negation dropped": ("changes", negation_dropped),
        "name swapped": ("changes", name_swap(names)), "date": ("changes", date),
        "direction": ("changes", direction),
        "white space": ("keeps", whitespace), "quotes": ("keeps", quotes), "dashes": ("keeps", dashes),
        "hyphenation": ("keeps", hyphenation), "case": ("keeps", case), "full-width forms": ("keeps", full_width),
        "elision (...)": ("keeps", elision), "function words": ("keeps", function_words),
        "number format": ("keeps", number_format), "light paraphrase": ("keeps", light_paraphrase),
        "clauses reordered": ("reorders", reordered), "CJK near-synonym": ("reorders", cjk_synonym),
    }


# -- corpora ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    name: str
    cjk: bool
    docs: tuple[tuple[str, str], ...]  # (name, text)
    names: tuple[str, ...]  # names to swap in


def english_names(texts: Iterable[str]) -> list[str]:
    counts: Counter[str] = Counter()
    lower: set[str] = set()
    for text in texts:
        counts.update(_CAPITAL.findall(text))
        lower.update(w for w in re.findall(r"\b[a-z]{3,}\b", text))
    return sorted(n for n, c in counts.items() if c >= 3 and n.lower() not in lower)[:400]


def corpora(data: Path, max_docs: int = 12, max_chars: int = 120_000) -> list[Corpus]:
    """Dracula, English annual reports and Chinese quarterly reports of the Loong benchmark, from `data`."""
    out = []
    dracula = sorted((data / "dracula" / "docs").glob("*.txt"))
    docs = tuple((p.name, p.read_text(encoding="utf-8")) for p in dracula if len(p.read_text(encoding="utf-8")) <= max_chars)
    out.append(Corpus("Dracula", False, docs, tuple(english_names(t for _, t in docs))))
    financial = data / "loong" / "doc" / "financial"
    english = sorted((p for p in financial.glob("2024-*.txt") if p.stat().st_size <= max_chars), key=lambda p: p.name)
    docs = tuple((p.name, p.read_text(encoding="utf-8")) for p in english[:max_docs])
    out.append(Corpus("Loong English reports", False, docs, tuple(english_names(t for _, t in docs))))
    chinese = sorted((p for p in financial.glob("report_*.txt") if p.stat().st_size <= max_chars), key=lambda p: p.name)
    docs = tuple((p.name, p.read_text(encoding="utf-8")) for p in chinese[:max_docs])
    companies = sorted({p.name.split("-")[2] for p in chinese})
    out.append(Corpus("Loong Chinese reports", True, docs, tuple(companies)))
    return out


def fixture_corpora(folder: Path) -> list[Corpus]:
    """The committed excerpts (tests/fixtures/evidence): one English, one Chinese."""
    en = [(p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.txt")) if not p.name.startswith("loong")]
    zh = [(p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.glob("loong*.txt"))]
    return [Corpus("fixture English", False, tuple(en), tuple(english_names(t for _, t in en)) + ("Varna", "Whitby")),
            Corpus("fixture Chinese", True, tuple(zh), ("飞亚达", "平安银行", "德赛电池", "格力电器"))]


def run(corpora_: list[Corpus], per_kind: int = 40, seed: int = 7) -> Iterator[Case]:
    """Up to `per_kind` cases of each alteration in each corpus (sentences drawn at random, seeded); an
    altered passage that also stands in the document as it is (folded) is left out: it would be evidence."""
    for corpus in corpora_:
        pool = [(name, text, s) for name, text in corpus.docs for s in sentences(text, corpus.cjk)]
        rng = random.Random(f"{seed}:{corpus.name}")
        rng.shuffle(pool)
        hays = {name: Haystack(text) for name, text in corpus.docs}
        for kind, (group, mutate) in alterations(list(corpus.names)).items():
            made = 0
            for name, _, s in pool:
                if made >= per_kind:
                    break
                altered = mutate(s, random.Random(f"{seed}:{kind}:{s}"))
                if altered is None or altered == s:
                    continue
                hay = hays[name]
                if group == "changes" and fold(altered)[0] in hay.folded[0]:
                    continue
                verdict = verify(altered, hay)
                made += 1
                yield Case(kind, group, corpus.name, name, s, altered, verdict.outcome,
                           tuple(d.line() for d in verdict.differences))


def table(cases: list[Case]) -> str:
    """The confusion table: per alteration, how many cases came out verified (and how), mismatch, none."""
    kinds: dict[str, list[Case]] = {}
    for c in cases:
        kinds.setdefault(c.kind, []).append(c)
    lines = ["| alteration | meaning | cases | verified (exact/tolerant/fuzzy) | mismatch | not found | verified share |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for kind, group in kinds.items():
        n = Counter(c.outcome for c in group)
        verified = sum(n[k] for k in VERIFIED)
        how = "/".join(str(n[k]) for k in VERIFIED)
        label = {"changes": "changed", "keeps": "kept", "reorders": "kept, not a copy"}[group[0].group]
        label = "kept, but new characters" if kind == "CJK near-synonym" else label
        lines.append(f"| {kind} | {label} | {len(group)} | {verified} ({how}) | {n['mismatch']} | {n['none']} | "
                     f"{verified / len(group):.1%} |")
    for label, group_name in (("all meaning-changing", "changes"), ("all meaning-keeping", "keeps")):
        group = [c for c in cases if c.group == group_name]
        if group:
            n = Counter(c.outcome for c in group)
            verified = sum(n[k] for k in VERIFIED)
            lines.append(f"| **{label}** | | {len(group)} | {verified} | {n['mismatch']} | {n['none']} | "
                         f"{verified / len(group):.1%} |")
    return "\n".join(lines)
