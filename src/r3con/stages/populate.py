"""Stage 2b, population: each document fills the schema on its own, with all notes as background.

Replies are requested with `response_format` json_schema, validated with a real JSON Schema validator,
repaired when slightly broken, and re-asked with the validation error. Records are stamped with their
source document (`_doc`, and `_part` for split documents, `_title`) and merged into one data set.
Each document is shown the final notes: every note when they all fit the notes budget, else those
that rank first for the task (the same for every call) and, for a document with a note, its own
selection of the others (`FinalNotes.for_document`). A request refused as too long for the window is sent again with
half the notes (when the final notes are given, not a text), never cut silently. Each record also carries the passage it comes from, checked
against the document (`_evidence`): `_id`, `_passage`, `_span`, `_match`.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import jsonschema

from ..artifacts.rows import SpooledRows
from ..config import Settings
from ..corpus.documents import Document
from ..corpus.places import PerPart, places_of
from ..corpus.spool import TextSpool
from ..errors import OutputError
from ..evidence.citations import EvidenceStats, Haystack
from ..evidence.grounding import Source
from ..llm.json_reply import NoJSON, extract_json
from ..llm.replies import reply_text
from ..llm.types import LLM, ChatRequest, Message
from ..notes.final import FinalNotes
from ..notes.selection import NotesChoice, PlannedChoices, Selects, Shown, fitting
from ..notes.shown import ShownLog
from ..prompts.render import render
from ..results import Failure
from ..tokens import estimate_tokens
from ._evidence import FLAGGED, Unverified, categorical, check, ordered, record_id, unverified, with_passage
from .fanout import DOCUMENT_ERRORS, fan_out
from .messages import SHARED_OVERHEAD, document_messages, reply_excerpt
from .plan import CacheSeen, CallPlan, Placement, Shared, plan_populate
from .schema import schema_text

STAGE = "populate"


@dataclass(frozen=True)
class PopulateResult:
    """Records per table (each stamped with its source), records per document, and failures."""

    tables: Mapping[str, Sequence[Mapping[str, Any]]]  # a `SpooledRows` a table: on disk, read as iterated
    per_doc: Mapping[str, int]
    failures: tuple[Failure, ...] = ()
    kept: frozenset[str] = frozenset()  # documents whose earlier records were kept (`PopulateOptions.keep`)
    repaired: int = 0
    reasked: int = 0
    shared_first: int = 0  # documents whose call put the shared instructions before the document
    dropped: tuple[Mapping[str, Any], ...] = ()  # unverified records left out (--unverified drop)
    evidence: EvidenceStats = EvidenceStats()
    shown: ShownLog = field(default_factory=ShownLog)  # per document (corpus order), the final notes it was shown, when chosen per document

    @property
    def total(self) -> int:
        return sum(len(rows) for rows in self.tables.values())


@dataclass(frozen=True)
class RecordLimits:
    """What one reply's records may hold (R3CON_MAX_RECORDS, R3CON_MAX_RECORD_FIELDS, R3CON_MAX_VALUE_CHARS): a
    reply over them (broken or hostile: a record of unbounded fields would hold the run's memory with it) degrades
    its document."""

    records: int  # records one document part may yield
    fields: int  # fields one record may have (the schema's and the passage field)
    value_chars: int  # characters one field's value may take, as JSON

    @classmethod
    def of(cls, settings: Settings = Settings()) -> RecordLimits:
        """The limits `settings` set (by default, their defaults: Settings is their one source)."""
        return cls(settings.max_records, settings.max_record_fields, settings.max_value_chars)


@dataclass(frozen=True)
class PopulateOptions:
    max_tokens: int = 4096
    attempts: int = 3
    temperature: float | None = None
    breakpoints: bool = False
    placement: Placement = Placement()
    reverse: bool = False  # send the calls backwards (`Placement.order`): after an odd number of rounds
    cache: CacheSeen = CacheSeen()  # what the relevance rounds' replies said of the cache (`plan_populate`)
    unverified: Unverified = "reask"  # records whose passage is not in the document: re-ask once, keep flagged, drop
    limits: RecordLimits = RecordLimits.of()  # what one reply's records may hold
    in_flight: int | None = None  # calls prepared at once (their prompts held); None: all (a batch needs them)
    keep: Callable[[Document], Mapping[str, list[dict[str, Any]]] | None] | None = field(default=None, compare=False)
    """`keep(doc)`: an earlier run's records of `doc` (per table) to keep without a call, or None to populate it."""
    selects: Selects | None = field(default=None, compare=False)
    """Where the documents' own notes choices are made (`--engine ray`: on the workers), or None: here."""


@dataclass(frozen=True, slots=True)
class _DocRecords:
    """One document's records and how they were got. Slotted, its records (on disk once `_finished`) a shared
    empty mapping: the stage holds one a document until it ends."""

    records: Mapping[str, list[dict[str, Any]]]
    repaired: bool
    reasks: int
    shared_first: bool = False
    conversation: tuple[Message, ...] = ()  # the messages and the accepted reply, for an evidence re-ask
    evidence_reasked: bool = False
    kept: bool = False
    shown: Shown | None = None  # the final notes its call was shown, when chosen per document
    spooled: array[int] = field(default_factory=lambda: array("q"))  # (table, at, size) a record: `_finished`


def _validation_message(error: jsonschema.ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "the top level"
    return f"at {where}: {error.message}"[:500]


@dataclass(frozen=True)
class _Form:
    """The schema as every population call uses it: the mapping, its prompt text, its validator (built once)."""

    schema: Mapping[str, Any]
    text: str
    validator: jsonschema.protocols.Validator
    tokens: int

    @classmethod
    def of(cls, schema: Mapping[str, Any], task: str) -> _Form:
        """The schema with its passage field; a record without a passage is valid, and found unverified."""
        sent = with_passage(schema)
        text = schema_text(sent)
        validator = jsonschema.Draft202012Validator(with_passage(schema, required=False))
        return cls(sent, text, validator, estimate_tokens(f"{task}\n{text}") + SHARED_OVERHEAD)


def over_limits(tables: Mapping[str, Sequence[Any]], limits: RecordLimits) -> str | None:
    """What in a reply's records is over `limits`, naming the setting that raises it; None when nothing is."""
    count = sum(len(rows) for rows in tables.values())
    if count > limits.records:
        return f"{count:,} records, more than the {limits.records:,} one document part may yield (R3CON_MAX_RECORDS)"
    for name, rows in tables.items():
        for i, row in enumerate(rows, start=1):
            if not isinstance(row, Mapping):
                continue
            if len(row) > limits.fields:
                return (f"record {i} of {name!r} has {len(row):,} fields, more than the {limits.fields:,} a record may "
                        "have (R3CON_MAX_RECORD_FIELDS)")
            for field_name, value in row.items():
                size = len(value) if isinstance(value, str) else len(json.dumps(value, ensure_ascii=False, default=str)) \
                    if isinstance(value, list | dict) else 0
                if size > limits.value_chars:
                    return (f"field {str(field_name)[:40]!r} of record {i} of {name!r} holds {size:,} characters, more "
                            f"than the {limits.value_chars:,} a value may take (R3CON_MAX_VALUE_CHARS)")
    return None


async def populate_document(
    llm: LLM, task: str, form: _Form, call: CallPlan, first: NotesChoice, options: PopulateOptions,
    final: FinalNotes | None = None,
) -> _DocRecords:
    """Records of one document, validated against `schema`; raises OutputError after the last attempt.
    Too long for the window, it is sent again with fewer of the `final` notes (when given), placed anew."""
    doc = call.doc

    async def once(choice: NotesChoice) -> _DocRecords:
        placed = call if choice is first else options.placement.call(
            doc, Shared(form.tokens + choice.tokens, common=final is None or not final.per_document),
            cold=call.cold)  # a smaller selection than the other calls': not common to them
        done = await _checked(llm, form, doc, await _populate_once(llm, task, form, placed, choice.text, options),
                              options)
        return done if final is None or not final.per_document else replace(done, shown=Shown.of(
            doc.key, 0, choice, choice.text, refit=choice is not first))

    return await fitting(once, first, None if final is None else _fewer(final, doc.key),
                         f"document {doc.key} with its notes does not fit the context window; "
                         "pass a smaller --part-tokens or --notes-budget")


def _shared(form: _Form, final: FinalNotes) -> Shared:
    """The part of a call besides its document that every call shares: the task, the schema and the notes
    every document is shown first (`FinalNotes.head`: all of its notes, when every note fits)."""
    if not final.per_document:
        return Shared(form.tokens + final.choice.tokens)
    return Shared(form.tokens + final.head_tokens, selected=True)


def _fewer(final: FinalNotes, key: str) -> Callable[[int], Awaitable[NotesChoice]]:
    """Document `key`'s notes within a smaller budget, counted by their text (as the first notes are)."""
    async def select(budget: int) -> NotesChoice:
        choice = await final.for_document(key, budget=budget)
        return replace(choice, tokens=estimate_tokens(choice.text))

    return select


async def _populate_once(
    llm: LLM, task: str, form: _Form, call: CallPlan, notes: str, options: PopulateOptions
) -> _DocRecords:
    schema, doc, first = form.schema, call.doc, call.shared_first
    instructions = render("populate", task=task, schema=form.text, notes=notes, where=call.where)
    first_messages = document_messages(doc, instructions, call.layout, options.breakpoints, shared_first=first)
    messages = list(first_messages)
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
            error = jsonschema.exceptions.best_match(form.validator.iter_errors(value))
            if error is None:
                repaired_any = repaired_any or repaired
                tables = {name: list(value.get(name) or []) for name in schema["properties"]}
                over = over_limits(tables, options.limits)
                if over is not None:  # not a mistake a re-ask mends: the document degrades, saying why
                    raise OutputError(f"the reply's records are over r3con's limits: {over}")
                return _DocRecords(records=tables, repaired=repaired_any, reasks=attempt, shared_first=first,
                                   conversation=(*messages, Message("assistant", reply)))
            problem = _validation_message(error)
        retry = render("populate_retry", error=problem, excerpt=reply_excerpt(reply))
        messages = [*first_messages, Message("user", retry.text)]  # the error, not the failed reply (it may be long)
    raise OutputError(f"records did not match the schema after {options.attempts} attempts ({problem})")


async def _checked(llm: LLM, form: _Form, doc: Document, result: _DocRecords, options: PopulateOptions) -> _DocRecords:
    """Locate each record's passage; with `reask`, ask once more for the records whose passage is not found."""
    hay, source, skip = Haystack(doc.text), Source(doc.text), categorical(form.schema)
    check(result.records, doc, hay, skip, source)
    missing = list(unverified(result.records))
    if options.unverified != "reask" or not missing:
        return result
    prompt = render("populate_evidence", records=[
        {"table": name, "index": i, "passage": json.dumps(row["_passage"], ensure_ascii=False)
                                                if row.get("_passage") else "(no passage given)",
         "differences": [f"the document says {json.dumps(d['document'], ensure_ascii=False)} where the passage "
                         f"says {json.dumps(d['record'], ensure_ascii=False)}" for d in row.get("_mismatch") or ()]}
        for name, i, row in missing])
    try:
        completion = await llm.complete(ChatRequest(
            messages=(*result.conversation, Message("user", prompt.text)), stage=STAGE, doc=doc.number,
            part=doc.part if doc.parts > 1 else None, max_tokens=options.max_tokens, temperature=options.temperature,
            response_schema=form.schema, schema_name="records", prompt_name=prompt.name, prompt_hash=prompt.hash,
        ))
    except DOCUMENT_ERRORS:
        return replace(result, evidence_reasked=True)  # the re-ask is a second chance: its failure keeps the first records, flagged
    try:
        value, _ = extract_json(reply_text(completion))
    except NoJSON:
        return replace(result, evidence_reasked=True)  # the first records stand, flagged
    if jsonschema.exceptions.best_match(form.validator.iter_errors(value)) is not None:
        return replace(result, evidence_reasked=True)
    tables = {name: list(value.get(name) or []) for name in form.schema["properties"]}
    if over_limits(tables, options.limits) is not None:
        return replace(result, evidence_reasked=True)  # the first records stand, flagged
    check(tables, doc, hay, skip, source)
    return replace(result, records=tables, evidence_reasked=True)


def sent_schema(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The schema as population sends it: each record with its passage field."""
    return with_passage(schema)


def stamp(record: Mapping[str, Any], doc: Document) -> dict[str, Any]:
    """The record with its source document: `_doc`, `_part` (split documents only) and `_title`."""
    stamped = dict(record)
    stamped["_doc"] = doc.number
    if doc.parts > 1:
        stamped["_part"] = doc.part
    else:
        stamped.pop("_part", None)  # a record kept from an earlier run names this run's part, or none
    stamped["_title"] = doc.title
    return stamped


async def populate(
    llm: LLM, task: str, schema: Mapping[str, Any], docs: Sequence[Document], notes: str | FinalNotes,
    options: PopulateOptions | None = None,
) -> PopulateResult:
    """Fill `schema` from every document concurrently and merge the stamped records. `notes`: the final
    notes (each document is shown `FinalNotes.for_document`), or one text every document is shown."""
    options = options or PopulateOptions()
    form = _Form.of(schema, task)
    final = notes if isinstance(notes, FinalNotes) else None
    choices = await _choices(final, docs, options.selects)  # per document key, on disk while the calls are planned
    text = notes if isinstance(notes, str) else notes.text
    common = NotesChoice(text, shown=0, indexed=0, tokens=estimate_tokens(text))  # when every document's is the same
    shared = Shared(form.tokens + common.tokens) if final is None else _shared(form, final)
    calls = plan_populate(options.placement, docs, shared, options.cache, options.reverse)

    places = places_of(docs)  # the run's one dict of the parts' places, when `docs` are its `Parts`
    log = ShownLog(places)  # what each answered call was shown, on disk until the stage's record is written
    names = list(schema["properties"])
    spool = TextSpool("the records")  # each record on disk from its call's end; the tables are where they are

    async def one(call: CallPlan) -> _DocRecords:
        first = common if choices is None or final is None else _rendered(final, final.chosen(call.doc.key, choices))
        earlier = options.keep(call.doc) if options.keep is not None else None
        if earlier is not None:
            if choices is not None:
                log.add(Shown.of(call.doc.key, 0, first, first.text))
            return _finished(_DocRecords(records={name: list(earlier.get(name) or []) for name in names},
                                         repaired=False, reasks=0, kept=True), call.doc, names, spool)
        done = await populate_document(llm, task, form, call, first, options, final)
        if done.shown is not None:
            log.add(done.shown)
        # neither the conversation nor what it was shown is kept for every document until the stage ends; the
        # records are made as the stage returns them and written to the spool now, the reply's dicts let go
        return _finished(replace(done, conversation=(), shown=None), call.doc, names, spool)

    sent = await fan_out(STAGE, calls, one, key=lambda call: call.doc.key, limit=options.in_flight)
    by_key = {call.doc.key: outcome for call, outcome in zip(calls, sent, strict=True)}
    outcomes = [(doc, by_key[doc.key]) for doc in docs]  # corpus order
    tables = {name: SpooledRows(spool) for name in names}
    per_doc = PerPart(places)  # records kept per part: an array beside the places, not a dict of its own
    dropped: list[dict[str, Any]] = []

    def given() -> Iterator[dict[str, Any]]:
        """Every record the model gave, dropped ones too (for the counts), read back once in corpus order;
        the kept ones taken into their tables where they are."""
        for doc, result in outcomes:
            if isinstance(result, Failure):
                continue
            count = 0
            for table, at, size in zip(*(iter(result.spooled),) * 3, strict=True):
                name, rows = names[table], tables[names[table]]
                record = rows.read(at, size)
                yield record
                if options.unverified == "drop" and record.get("_match") in FLAGGED:
                    dropped.append({**record, "_table": name})
                    continue
                rows.adopt(at, size)
                count += 1
            per_doc[doc.key] = count

    evidence = EvidenceStats.of(given(), dropped=0, places=places)  # the one pass: counted, then kept or dropped
    done = [(doc, result) for doc, result in outcomes if not isinstance(result, Failure)]
    return PopulateResult(
        tables=MappingProxyType(dict(tables)), per_doc=MappingProxyType(per_doc),
        failures=tuple(result for _, result in outcomes if isinstance(result, Failure)),
        repaired=sum(int(r.repaired) for _, r in done), reasked=sum(r.reasks for _, r in done),
        shared_first=sum(int(r.shared_first) for _, r in done), dropped=tuple(dropped),
        kept=frozenset(doc.key for doc, r in done if r.kept),
        evidence=replace(evidence, reasked=sum(int(r.evidence_reasked) for _, r in done), dropped=len(dropped)),
        shown=log.order(d.key for d in docs),  # corpus order
    )


_ON_DISK: Mapping[str, list[dict[str, Any]]] = MappingProxyType({})  # what a finished document holds of its records


def _finished(done: _DocRecords, doc: Document, names: Sequence[str], spool: TextSpool) -> _DocRecords:
    """`done` with its records as the stage gives them, written to `spool` (`spooled`: the table's place in
    `names`, where the record is, its size): each stamped with `doc`, given its id (`record_id`, in the order of
    the tables and of the rows), its fields ordered; what is not a record (not a mapping) left out."""
    index = 0
    spooled = array("q")
    for name, rows in done.records.items():
        for row in rows:
            if isinstance(row, Mapping):
                index += 1
                at, size = SpooledRows.write(spool, ordered({**stamp(row, doc), "_id": record_id(doc, index)}))
                spooled.extend((names.index(name), at, size))
    return replace(done, records=_ON_DISK, spooled=spooled)


async def _choices(final: FinalNotes | None, docs: Sequence[Document],
                   selects: Selects | None) -> PlannedChoices | None:
    """Each document's own choice of the final notes, on disk until its call, when they are chosen per document."""
    if final is None or not final.per_document:
        return None
    return await final.planned([d.key for d in docs], selects, places_of(docs))


def _rendered(final: FinalNotes, choice: NotesChoice) -> NotesChoice:
    """`choice` with its text and keys, rendered as its call goes out."""
    return final.filled(choice)
