"""Stage 2b, population: each document fills the schema on its own, with all notes as background.

Replies are requested with `response_format` json_schema, validated with a real JSON Schema validator,
repaired when slightly broken, and re-asked with the validation error. Records are stamped with their
source document (`_doc`, and `_part` for split documents, `_title`) and merged into one data set.
A request refused as too long for the window is sent again with half the notes (when a notes
selector is given), never cut silently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import jsonschema

from .._prompts import render
from ..corpus import Document
from ..errors import BudgetExceeded, ContextTooLong, OutputError, R3conError
from ..llm.types import LLM, ChatRequest, Message
from ..results import Failure
from ..tokens import estimate_tokens
from ._common import document_messages, reply_text
from ._json import NoJSON, extract_json
from .notes_select import NotesSelector
from .schema import schema_text

STAGE = "populate"


@dataclass(frozen=True)
class PopulateResult:
    """Records per table (each stamped with its source), records per document, and failures."""

    tables: Mapping[str, tuple[Mapping[str, Any], ...]]
    per_doc: Mapping[str, int]
    failures: tuple[Failure, ...] = ()
    repaired: int = 0
    reasked: int = 0

    @property
    def total(self) -> int:
        return sum(len(rows) for rows in self.tables.values())


@dataclass(frozen=True)
class PopulateOptions:
    layout: str = "cache"
    max_tokens: int = 4096
    attempts: int = 3
    temperature: float | None = None
    breakpoints: bool = False
    selector: NotesSelector | None = field(default=None, compare=False)
    on_done: Callable[[str], None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class _DocRecords:
    records: Mapping[str, list[dict[str, Any]]]
    repaired: bool
    reasks: int


def _validation_message(error: jsonschema.ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "the top level"
    return f"at {where}: {error.message}"[:500]


async def populate_document(
    llm: LLM, task: str, schema: Mapping[str, Any], doc: Document, notes: str, options: PopulateOptions
) -> _DocRecords:
    """Records of one document, validated against `schema`; raises OutputError after the last attempt."""
    budget: int | None = None
    while True:
        try:
            return await _populate_once(llm, task, schema, doc, notes, options)
        except ContextTooLong as exc:
            if options.selector is None or budget == 0:
                raise ContextTooLong(f"document {doc.key} with its notes does not fit the context window; "
                                     "pass a smaller --part-tokens or --notes-budget",
                                     status=exc.status, body=exc.body) from exc
            budget = estimate_tokens(notes) // 2 if budget is None else budget // 2
            notes = (await options.selector.select(task, budget=budget, stage=STAGE)).text


async def _populate_once(
    llm: LLM, task: str, schema: Mapping[str, Any], doc: Document, notes: str, options: PopulateOptions
) -> _DocRecords:
    validator = jsonschema.Draft202012Validator(schema)
    instructions = render("populate", task=task, schema=schema_text(schema), notes=notes)
    messages = list(document_messages(doc, instructions, options.layout, options.breakpoints))
    repaired_any = False
    problem = "no attempt"
    for attempt in range(options.attempts):
        completion = await llm.complete(
            ChatRequest(
                messages=tuple(messages), stage=STAGE, doc=doc.number,
                part=doc.part if doc.parts > 1 else None, max_tokens=options.max_tokens,
                temperature=options.temperature, response_schema=schema, schema_name="records",
                prompt_name=instructions.name, prompt_hash=instructions.hash,
            )
        )
        reply = reply_text(completion)
        try:
            value, repaired = extract_json(reply)
        except NoJSON as exc:
            problem = str(exc)
        else:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
            if error is None:
                repaired_any = repaired_any or repaired
                tables = {name: list(value.get(name) or []) for name in schema["properties"]}
                return _DocRecords(records=tables, repaired=repaired_any, reasks=attempt)
            problem = _validation_message(error)
        retry = render("populate_retry", error=problem)
        messages += [Message("assistant", reply), Message("user", retry.text)]
    raise OutputError(f"records did not match the schema after {options.attempts} attempts ({problem})")


def stamp(record: Mapping[str, Any], doc: Document) -> dict[str, Any]:
    """The record with its source document: `_doc`, `_part` (split documents only) and `_title`."""
    stamped = dict(record)
    stamped["_doc"] = doc.number
    if doc.parts > 1:
        stamped["_part"] = doc.part
    stamped["_title"] = doc.title
    return stamped


async def populate(
    llm: LLM, task: str, schema: Mapping[str, Any], docs: Sequence[Document], notes: str,
    options: PopulateOptions | None = None,
) -> PopulateResult:
    """Fill `schema` from every document concurrently and merge the stamped records."""
    options = options or PopulateOptions()

    async def one(doc: Document) -> tuple[Document, _DocRecords | None, Failure | None]:
        try:
            return doc, await populate_document(llm, task, schema, doc, notes, options), None
        except BudgetExceeded:
            raise  # --max-cost stops the run, not just this document
        except R3conError as exc:
            return doc, None, Failure(STAGE, doc.key, str(exc))
        finally:
            if options.on_done:
                options.on_done(STAGE)

    outcomes = await asyncio.gather(*(one(doc) for doc in docs))
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in schema["properties"]}
    per_doc: dict[str, int] = {}
    failures: list[Failure] = []
    repaired = reasked = 0
    for doc, result, failure in outcomes:
        if failure is not None or result is None:
            failures.extend([failure] if failure else [])
            continue
        count = 0
        for name, rows in result.records.items():
            for row in rows:
                if isinstance(row, Mapping):
                    tables[name].append(stamp(row, doc))
                    count += 1
        per_doc[doc.key] = count
        repaired += int(result.repaired)
        reasked += result.reasks
    return PopulateResult(
        tables=MappingProxyType({k: tuple(v) for k, v in tables.items()}),
        per_doc=MappingProxyType(per_doc), failures=tuple(failures), repaired=repaired, reasked=reasked,
    )
