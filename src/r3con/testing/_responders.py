"""Generic answers per stage, computed from the request alone (never keyed to a corpus or question)."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import jsonschema

from . import _text as t
from ._reading import Reading


def relevance(r: Reading, sentences: int = 3) -> str:
    """A note: the document's `sentences` sentences sharing most words with the task; round 2 adds links."""
    picked = t.related_sentences(r.document, r.task, k=sentences)
    if not picked:
        return "NONE"
    note = " ".join(picked)
    if r.round >= 2:
        mine = t.content_words(note)
        links = [f"Related: Document {s.label} ({s.title})" for s in r.notes
                 if len(t.content_words(s.text) & mine) >= 2][:3]
        note = "\n".join([note, *links])
    return note


def schema(r: Reading) -> str:
    words = [w for w in re.findall(r"[a-z]+", r.task.lower()) if w not in t.STOP and len(w) > 3]
    noun = max(words, key=words.count) if words else "item"
    table = noun if noun.endswith("s") else noun + "s"
    proposal = {
        "type": "object",
        "properties": {table: {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string", "description": "the entity as named in the document"},
            "description": {"type": "string", "description": "what the document says about it"},
            "quantity": {"type": ["number", "null"], "description": "a number the document gives for it"},
            "evidence": {"type": "string", "description": "a short supporting quote"},
        }, "required": ["name", "evidence"]}}},
    }
    return "```json\n" + json.dumps(proposal, indent=1) + "\n```"


def _is_passage(field: str, spec: dict[str, Any]) -> bool:
    """A field the schema describes as a verbatim passage of the document (by its name or description)."""
    words = f"{field} {spec.get('description') or ''}".lower()
    return "passage" in words or "verbatim" in words


def _fill(spec: dict[str, Any], sentence: str, index: int, field: str = "", passage: str | None = None) -> Any:
    kind = spec.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if "enum" in spec:
        return spec["enum"][0]
    if kind == "object":
        props = spec.get("properties", {})
        return {k: _fill(v, sentence, index, k, passage) for k, v in props.items()}
    if kind == "array":
        return [_fill(spec.get("items", {}), sentence, index, field)] if spec.get("minItems", 0) > 0 else []
    if kind in ("number", "integer"):
        nums = t.numbers(sentence)
        if not nums:
            return None if "null" in (spec.get("type") or []) else 0
        return int(nums[0]) if kind == "integer" else nums[0]
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if _is_passage(field, spec):
        return sentence if passage is None else passage
    if any(w in field for w in ("evidence", "quote", "description", "text", "summary")):
        return sentence[:300]
    found = t.names(sentence)
    return found[index % len(found)] if found else " ".join(sentence.split()[:4])


def records(r: Reading) -> str:
    return invented_records(r)[0]


def invented_records(r: Reading, invent: float = 0.0, key: str = "", reword: float = 0.0,
                     reworded: list[str] | None = None, misvalue: float = 0.0,
                     misvalued: list[list[Any]] | None = None) -> tuple[str, list[str]]:
    """Records from the document's task-related sentences; with `invent`, that share of them (decided by
    `key`, the request) get a passage that is not in the document; with `reword`, that share of the others
    a passage copied carelessly (`_reworded`, listed in `reworded`); with `misvalue`, that share of all of
    them one value the document does not state (listed in `misvalued` as [table, position, field]).
    Returns the reply and the invented passages."""
    response_schema = dict(r.schema) if r.schema is not None else r.prompt_schema
    if response_schema is None:
        return "{}", []
    body = r.document
    picked = t.related_sentences(body, r.task, k=5)
    out: dict[str, Any] = {}
    invented: list[str] = []
    for table, spec in (response_schema.get("properties") or {}).items():
        items = spec.get("items", {}) if spec.get("type") == "array" else spec
        if spec.get("type") == "array":
            rows: list[Any] = []
            for i, s in enumerate(picked):
                rng = random.Random(f"{key}:{table}:{i}")
                fake = _invention(r, s, rng) if invent and rng.random() < invent else None
                if fake is not None:
                    invented.append(fake)
                elif reword and rng.random() < reword:
                    fake = _reworded(s, rng)
                    if reworded is not None:
                        reworded.append(fake)
                row = _fill(items, s, i, passage=fake)
                if misvalue and isinstance(row, dict) and random.Random(f"{key}:{table}:{i}:value").random() < misvalue:
                    changed = _misvalue(row, body)
                    if changed is not None and misvalued is not None:
                        misvalued.append([table, len(rows) + 1, changed])
                rows.append(row)
            out[table] = rows
        else:
            out[table] = _fill(spec, picked[0] if picked else body[:200], 0, table)
    try:
        jsonschema.validate(out, response_schema)
    except jsonschema.ValidationError:
        out, invented = {k: [] for k in out}, []
    return json.dumps(out, ensure_ascii=False), invented


def _misvalue(row: dict[str, Any], body: str) -> str | None:
    """Give the record one value its document does not state: its first number times ten plus seven, else
    its first short text with a surname the document does not have. The field changed, or None."""
    for field, value in row.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and not field.startswith("_"):
            row[field] = value * 10 + 7
            return field
    for field, value in row.items():
        if isinstance(value, str) and not field.startswith("_") and 0 < len(value) <= 60:
            for surname in ("Okonkwo", "Vasquez-Lindqvist", "Thorvaldsen"):
                if surname not in body:
                    row[field] = f"{value} {surname}"
                    return field
    return None


def _reworded(sentence: str, rng: random.Random) -> str:
    """A genuine sentence as a model may copy it: its white space, quotes and dashes changed, or its case,
    or (in a long sentence) one word."""
    words = sentence.split()
    kind = rng.randrange(3)
    if kind == 2 and len(words) >= 12 and len(sentence) >= 60:
        words[len(words) // 2] = "indeed"
        return " ".join(words)
    if kind == 1:
        return sentence.lower()
    loose = "\n".join(" ".join(words[i:i + 5]) for i in range(0, len(words), 5))
    return loose.translate({ord("“"): '"', ord("”"): '"', ord("‘"): "'", ord("’"): "'"}).replace("—", "--")


def _invention(r: Reading, sentence: str, rng: random.Random) -> str | None:
    """A passage a confabulating model might give: a sentence of another document's note (every other
    time, when the prompt has one), else as many of the document's words as `sentence` has, in a new order."""
    body, number = r.document, r.document_label
    flat = " ".join(body.split())
    others = [s for note in r.notes if note.label.split(".")[0] != number.split(".")[0]
              for s in t.sentences(note.text)
              if len(s.split()) >= 6 and " ".join(s.split()) not in flat and not s.startswith("Related:")]
    if others and rng.random() < 0.5:
        return rng.choice(others)
    words = body.split()
    if len(words) < 8:
        return None
    fake = " ".join(rng.choice(words) for _ in range(max(8, len(sentence.split()))))
    return None if fake in body else fake


def agent(r: Reading) -> str:
    """Inspect the records, then answer with the values of the largest table's first text field (cited), or
    without records with the notes' first lines; the code guards itself, so a surprise ends in an answer."""
    if r.steps == 0:
        return ("Let me inspect the data first.\n```python\nfor name, rows in records.items():\n"
                "    print(name, len(rows))\n    for row in rows[:3]:\n        print(' ', row)\n"
                "print('notes:', len(notes))\n```")
    return ("Now I summarise what the records hold.\n```python\n"
            "try:\n"
            "    largest = max(records, key=lambda k: len(records[k])) if records else None\n"
            "    rows = records.get(largest, []) if largest else []\n"
            "    first = next((k for r in rows for k, v in r.items() if isinstance(v, str) and not k.startswith('_')), None)\n"
            "    used = [r for r in rows if first and r.get(first)][:20]\n"
            "    values = sorted({str(r.get(first)) for r in used})\n"
            "    if not used:  # no records (or none with text): what the notes say\n"
            "        found = {k: v.splitlines()[0] for k, v in notes.items() if v}\n"
            "        final_answer('; '.join(found.values())[:600] or 'no evidence found', cite=list(found)[:10])\n"
            "    final_answer(f'{len(rows)} records: ' + ', '.join(values), cite=[r['_id'] for r in used if '_id' in r])\n"
            "except Exception:\n"
            "    final_answer(sum(len(rows) for rows in records.values()))\n```")


def prose(r: Reading) -> str:
    """An answer naming what the records in the prompt name (else the notes' titles), with sources."""
    found = [s.title for s in r.notes]
    rows = [row for table in r.data.values() for row in table]
    names = sorted({n for row in rows for v in row.values() if isinstance(v, str) for n in t.names(v)})[:10]
    summary = ", ".join(names or found[:10]) or "no evidence found"
    cited = ([str(row["_id"]) for row in rows if row.get("_id") and any(n in json.dumps(row, ensure_ascii=False) for n in names)][:10]
             or [f"Document {s.label}" for s in r.notes][:10])
    sources = f"\nSources: {', '.join(cited)}" if cited else ""
    return f"From {len(found)} notes and the records: {summary}.\nAnswer: {summary}{sources}"


# A header line on its own ("[Gold Answer]"): a capital, then letters, spaces and apostrophes only, so a
# JSON list an answer holds ("[\"a\", \"b\"]") is never one.
_BRACKET_HEADER = re.compile(r"^\[[A-Z][A-Za-z' ]*\]$", flags=re.MULTILINE)
# A numbered label opening a line ("Answer 1: ..."): two such labels with one stem are the compared pair.
_NUMBERED_LABEL = re.compile(r"^([A-Z][A-Za-z ]*?) (\d+): ?", flags=re.MULTILINE)


def compared_texts(r: Reading) -> tuple[str, str]:
    """The two texts a judge compares, read by the prompt's shape: the tagged sections after the task;
    else the blocks after the first of bracketed header lines; else the last two numbered labels that
    share a stem ("X 1:", "X 2:"), each to the end of its line."""
    if len(r.plain_sections) >= 3:
        return r.plain_sections[1], r.plain_sections[2]
    text = r.prompt
    headers = list(_BRACKET_HEADER.finditer(text))
    if len(headers) >= 3:
        return text[headers[1].end() : headers[2].start()].strip(), text[headers[2].end() : headers[3].start() if len(headers) > 3 else len(text)].strip()
    labels = list(_NUMBERED_LABEL.finditer(text))
    for i in range(len(labels) - 1, 0, -1):
        first, second = labels[i - 1], labels[i]
        if first.group(1) == second.group(1):
            return (text[first.end() :].split("\n", 1)[0].strip(), text[second.end() :].split("\n", 1)[0].strip())
    return "", ""


def judge(r: Reading) -> str:
    """Scores from the token overlap (F1) of the answer and the gold answer (`compared_texts`): as the
    response schema asks (JSON), else in the format the mode header names, "rating" (a line
    "Rating: [[N]]", N from 1 to 100) or "yes_no" (an explanation, then "[[YES]]" or "[[NO]]")."""
    a, g = (t.content_words(x) for x in compared_texts(r))
    overlap = len(a & g)
    f1 = 0.0 if not overlap else 2 * overlap / (len(a) + len(g))
    why = f"token overlap F1 {f1:.2f} between answer and gold"
    if r.schema is None and r.mode == "rating":
        return f"Evaluation evidence: {why}\nRating: [[{max(1, round(100 * f1))}]]"
    if r.schema is None and r.mode == "yes_no":
        return f"1) {why}\n2) {'[[YES]]' if f1 >= 0.8 else '[[NO]]'}"
    out: dict[str, Any] = {}
    for name, spec in ((r.schema or {}).get("properties") or {}).items():
        kind = spec.get("type")
        if kind in ("integer", "number"):
            out[name] = max(int(spec.get("minimum", 1)), min(int(spec.get("maximum", 100)), round(100 * f1)))
        elif kind == "boolean":
            out[name] = f1 >= 0.8
        else:
            out[name] = why
    return json.dumps(out)
