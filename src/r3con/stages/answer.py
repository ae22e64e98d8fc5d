"""Stage 3, answer synthesis: a coding agent over the records in a sandboxed REPL, or direct reasoning.

The agent sees the task, the notes, the schema and a view of the data; each reply's ```python block
runs in a persistent worker process where the full data is bound; the printed output comes back as
the next message; `final_answer(value, cite=[...])` ends the loop, naming the records (their `_id`)
or documents the answer rests on. At the step bound, one last call asks for a plain answer with a
"Sources:" line, as direct reasoning does. The model's mistakes (no code, exceptions, timeouts) are
observations, not failures.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..artifacts.jsonstream import listlike
from ..artifacts.tables import table_name, unique_name
from ..evidence.citations import split_sources
from ..llm.replies import final_answer_line, reply_text
from ..llm.types import LLM, ChatRequest, Message
from ..prompts.render import Rendered, render
from ..sandbox import Sandbox, SandboxLimits

STAGE = "reason"
_CODE = re.compile(r"```(?:python|py|Python)?[ \t]*\n(.*?)```", flags=re.DOTALL)


@dataclass(frozen=True)
class AgentStep:
    """One turn of the agent: its reply, the code it ran, and what the REPL answered."""

    index: int
    reply: str
    code: str | None
    observation: str | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.index, "reply": self.reply, "code": self.code,
                "observation": self.observation, "error": self.error}


@dataclass(frozen=True)
class AnswerResult:
    answer: str
    mode: str
    steps: tuple[AgentStep, ...] = ()
    capped: bool = False
    isolation: Mapping[str, Any] | None = None  # the sandbox's IsolationReport.to_dict()
    citations: tuple[str, ...] = ()  # what the answer names as its evidence: record ids, documents


@dataclass(frozen=True)
class AnswerOptions:
    mode: Literal["code", "direct"] = "code"
    max_steps: int = 10
    max_tokens: int = 4096
    temperature: float | None = None
    data_view_chars: int = 24_000
    sandbox_limits: SandboxLimits = SandboxLimits()
    sandbox_mode: Literal["best", "strict"] = "best"
    scratch_root: Path | None = None


def extract_code(reply: str) -> str | None:
    """The first fenced Python block of a reply, or None."""
    match = _CODE.search(reply)
    return match.group(1).strip() if match else None


def render_value(value: Any) -> str:
    """A final_answer value as text: strings as they are, other values as JSON."""
    if isinstance(value, str):
        return value.strip()
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def data_view(tables: Mapping[str, Sequence[Mapping[str, Any]]], max_chars: int) -> str:
    """The whole data as the model sees it (`shown`) as JSON if it fits in `max_chars`, else per table: its
    count, fields and a sample."""
    whole = _whole(tables, max_chars)
    if whole is not None:
        return whole
    budget = max(200, max_chars // max(1, len(tables)))
    parts = []
    for name, rows in tables.items():
        fields = sorted({key for row in rows for key in row if key not in HIDDEN_FIELDS})
        sample: list[Mapping[str, Any]] = []
        used = 0
        for row in rows:
            size = len(json.dumps(shown(row), ensure_ascii=False))
            if used + size > budget and sample:
                break
            sample.append(shown(row))
            used += size
        parts.append(json.dumps({
            "table": name, "records": len(rows), "fields": fields,
            "sample_of_first_records": sample,
        }, ensure_ascii=False))
    return "The data is too large to show whole; every record is in the REPL.\n" + "\n".join(parts)


def _whole(tables: Mapping[str, Sequence[Mapping[str, Any]]], max_chars: int) -> str | None:
    """The whole data as JSON when it fits in `max_chars`, else None; the records are measured one at a
    time until they pass `max_chars`, so large data is never encoded whole just to learn it does not fit."""
    used = 0
    for rows in tables.values():
        for row in rows:
            used += len(json.dumps(shown(row), ensure_ascii=False))
            if used > max_chars:
                return None
    whole = json.dumps({k: [shown(row) for row in v] for k, v in tables.items()}, ensure_ascii=False, indent=None)
    return whole if len(whole) <= max_chars else None


HIDDEN_FIELDS = ("_span",)  # offsets into the document: for people and the report, noise to the model


def shown(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A record as the answering model sees it: with its id and passage, without its span. Made a record at
    a time, as it is measured or written (the sandbox leaves the same fields out, `Sandbox(hidden=)`): a
    copy of every record at once would be the answer stage's largest holder."""
    return {k: v for k, v in row.items() if k not in HIDDEN_FIELDS}


def sandbox_names(tables: Mapping[str, Any]) -> dict[str, str]:
    """{record type: the name the sandbox binds it to}: the type's own name where it is a Python identifier
    (not a keyword), else made safe as the tables' names are (`tables.table_name`), each distinct."""
    out: dict[str, str] = {}
    for name in tables:
        safe = name if name.isidentifier() and not keyword.iskeyword(name) else table_name(name)
        if keyword.iskeyword(safe):
            safe += "_"
        out[name] = unique_name(safe, set(out.values()))
    return out


def _missing_text(missing: Sequence[str]) -> str:
    return ", ".join(f"Document {key}" for key in missing)


async def answer_direct(
    llm: LLM, task: str, notes: str, schema: str, tables: Mapping[str, Sequence[Mapping[str, Any]]],
    options: AnswerOptions, missing: Sequence[str] = (),
) -> AnswerResult:
    """Answer from the notes and the data in one call, without code."""
    data = data_view(tables, options.data_view_chars) if tables else ""
    prompt = render("direct", task=task, notes=notes, schema=schema, data=data, missing=_missing_text(missing))
    completion = await llm.complete(ChatRequest(
        messages=(Message("user", prompt.text),), stage=STAGE, mode="direct", max_tokens=options.max_tokens,
        temperature=options.temperature, prompt_name=prompt.name, prompt_hash=prompt.hash,
    ))
    text, cited = split_sources(reply_text(completion))
    return AnswerResult(answer=final_answer_line(text), mode="direct", citations=tuple(cited))


async def answer_with_code(
    llm: LLM, task: str, notes: Mapping[str, str], notes_text: str, schema: str,
    tables: Mapping[str, Sequence[Mapping[str, Any]]], options: AnswerOptions, missing: Sequence[str] = (),
    extra_variables: Mapping[str, Any] | None = None,
) -> AnswerResult:
    """Run the coding agent until it calls final_answer or reaches `max_steps`."""
    # the records themselves, not copies: a list each, or the table read from disk as it is sent (`SpooledRows`)
    view = {name: rows if listlike(rows) else list(rows) for name, rows in tables.items()}
    names = sandbox_names(view)
    renamed = "; ".join(f"record type {name!r} is {safe} (records[{safe!r}], dfs[{safe!r}])"
                        for name, safe in names.items() if name != safe)
    if renamed:  # the model's own type names, as the sandbox can bind them
        schema = f"{schema}\n\nIn the sandbox, {renamed}."
    system = render("agent_system", max_steps=options.max_steps)
    first = render("agent_task", task=task, notes=notes_text, schema=schema,
                   data=data_view(view, options.data_view_chars), missing=_missing_text(missing))
    # one list per table, bound as records[name], as `name` and as dfs[name]: the sandbox sends it once
    safe_view = {names[name]: rows for name, rows in view.items()}
    # the notes as given (a run's final notes are on disk, `SpooledNotes`): the sandbox's data is written a note at a time
    variables: dict[str, Any] = {"records": {**view, **safe_view}, "notes": notes if notes else {}}
    for name, rows in safe_view.items():
        if name not in variables:
            variables[name] = rows
    variables.update(extra_variables or {})
    sandbox = Sandbox(variables=variables, dataframes=safe_view, limits=options.sandbox_limits,
                      mode=options.sandbox_mode, scratch_root=options.scratch_root, hidden=HIDDEN_FIELDS)
    del view, safe_view, variables  # the sandbox has them until its data is on disk; the agent's steps do not
    return await run_agent(llm, system, first, sandbox, options)


async def run_agent(
    llm: LLM, system: Rendered, first: Rendered, sandbox: Sandbox, options: AnswerOptions, *, stage: str = STAGE,
) -> AnswerResult:
    """The agent loop over an unstarted `sandbox`: each reply's code runs there until `final_answer`
    or `options.max_steps`, then one last plain answer. Calls carry `stage`; the baselines reuse it."""
    messages: list[Message] = [Message("system", system.text), Message("user", first.text)]
    steps: list[AgentStep] = []
    async with sandbox:
        for index in range(1, options.max_steps + 1):
            reply = await _ask(llm, messages, "code", options, first, stage)
            code = extract_code(reply)
            messages.append(Message("assistant", reply))
            if code is None:
                observation = "No ```python block found. Write one; call final_answer(value) in code when done."
                steps.append(AgentStep(index, reply, None, observation, error="no code"))
                messages.append(Message("user", observation))
                continue
            cell = await sandbox.run(code)
            if cell.has_final_answer:
                steps.append(AgentStep(index, reply, code, cell.observation()))
                return AnswerResult(answer=render_value(cell.final_answer), mode="code", steps=tuple(steps),
                                    isolation=sandbox.isolation.to_dict(), citations=cell.citations)
            observation = cell.observation()
            steps.append(AgentStep(index, reply, code, observation, error=cell.error))
            messages.append(Message("user", observation))
        final = render("agent_final")
        messages.append(Message("user", final.text))
        reply = await _ask(llm, messages, "final", options, final, stage)
        steps.append(AgentStep(options.max_steps + 1, reply, None, None))
        text, cited = split_sources(reply)
        return AnswerResult(answer=final_answer_line(text), mode="code", steps=tuple(steps), capped=True,
                            isolation=sandbox.isolation.to_dict(), citations=tuple(cited))


async def _ask(llm: LLM, messages: list[Message], mode: str, options: AnswerOptions, prompt: Any,
               stage: str = STAGE) -> str:
    completion = await llm.complete(ChatRequest(
        messages=tuple(messages), stage=stage, mode=mode, max_tokens=options.max_tokens,
        temperature=options.temperature, prompt_name=prompt.name, prompt_hash=prompt.hash,
    ))
    return reply_text(completion)
