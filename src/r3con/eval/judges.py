"""LLM judges: one prompt and reply schema per benchmark, replies validated, re-asked once when unusable.

    loong     rates 1-100 against the gold (accuracy, completeness); correct = rated 100
    corpusqa  equivalent or not (same values or meaning, in any notation); correct = equivalent
    dracula   count right and every victim right; judged on the strict and on the lenient gold

Judge calls go through the `LLM` seam with stage "judge" and a `json_schema` response format. A reply
that stays unusable after one re-ask gives a "judge_failed" verdict (worst score); an endpoint error
gives "judge_error", which a resumed evaluation judges again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import jsonschema

from .._json import NoJSON, extract_json
from .._prompts import parse_source, render_source
from ..errors import ConfigError, InputError, R3conError
from ..llm.types import LLM, ChatRequest, Message, Usage
from .corpusqa import extract_final_answer
from .tasks import EvalTask

JUDGED = "judged"  # the judge gave a usable verdict
EMPTY = "empty"  # the answer was empty: worst score, no judge call
FAILED = "failed"  # the method failed: worst score, no judge call
CAPPED = "capped"  # the method hit its step bound: worst score, no judge call
JUDGE_FAILED = "judge_failed"  # the judge's reply stayed unusable after one re-ask: worst score
JUDGE_ERROR = "judge_error"  # the judge's endpoint failed: worst score until a resumed run judges again
STATUSES = (JUDGED, EMPTY, FAILED, CAPPED, JUDGE_FAILED, JUDGE_ERROR)

JUDGE_MAX_TOKENS = 2048
_VARIABLES = ("task", "answer", "gold")


@dataclass(frozen=True)
class Verdict:
    """A judged (or not judgeable) answer. `correct` is what accuracy counts; `rating` is Loong's 1-100."""

    status: str
    correct: bool = False
    rating: int | None = None
    lenient_correct: bool | None = None
    rationale: str = ""
    error: str = ""
    judge_model: str = ""
    prompt_name: str = ""
    prompt_hash: str = ""
    usage: Usage = Usage()
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "correct": self.correct,
            "rating": self.rating,
            "lenient_correct": self.lenient_correct,
            "rationale": self.rationale,
            "error": self.error,
            "judge_model": self.judge_model,
            "prompt_name": self.prompt_name,
            "prompt_hash": self.prompt_hash,
            "usage": self.usage.to_dict(),
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            status=str(data["status"]),
            correct=bool(data.get("correct", False)),
            rating=data.get("rating"),
            lenient_correct=data.get("lenient_correct"),
            rationale=str(data.get("rationale", "")),
            error=str(data.get("error", "")),
            judge_model=str(data.get("judge_model", "")),
            prompt_name=str(data.get("prompt_name", "")),
            prompt_hash=str(data.get("prompt_hash", "")),
            usage=Usage.from_dict(data.get("usage", {})),
            details=dict(data.get("details", {})),
        )


@dataclass(frozen=True)
class JudgePrompt:
    """A judge prompt template (Jinja, strict undefined) with its name and the hash of its text."""

    name: str
    source: str

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:12]

    def render(self, **variables: Any) -> str:
        try:
            return render_source(self.source, **variables)
        except jinja2.UndefinedError as exc:
            raise ConfigError(
                f"judge prompt {self.name}: {exc.message}; a judge prompt may use {', '.join(_VARIABLES)}"
            ) from exc
        except jinja2.TemplateError as exc:
            raise ConfigError(f"judge prompt {self.name} is not a valid Jinja template: {exc}") from exc


def builtin_prompt(name: str) -> JudgePrompt:
    """A prompt shipped with r3con (`r3con/eval/prompts/NAME.j2`)."""
    source = resources.files("r3con.eval").joinpath("prompts", f"{name}.j2").read_text(encoding="utf-8")
    return JudgePrompt(name=name, source=source)


def prompt_from_file(path: Path) -> JudgePrompt:
    """A user's judge prompt (`--judge-prompt FILE`): Jinja with `{{ task }}`, `{{ answer }}`, `{{ gold }}`."""
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the judge prompt {path}: {exc.strerror or exc}") from exc
    prompt = JudgePrompt(name=f"file:{path.name}", source=source)
    try:
        parse_source(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"judge prompt {path} is not a valid Jinja template (line {exc.lineno}: {exc.message})") from exc
    return prompt


def _schema(**properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"rationale": {"type": "string"}, **properties},
        "required": ["rationale", *properties],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class JudgeSpec:
    """How one benchmark is judged: the prompt, the reply schema and its name."""

    benchmark: str
    prompt: JudgePrompt
    schema: Mapping[str, Any]
    schema_name: str
    max_tokens: int = JUDGE_MAX_TOKENS


_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "loong": ("rating", _schema(score={"type": "integer", "minimum": 1, "maximum": 100})),
    "corpusqa": ("equivalence", _schema(equivalent={"type": "boolean"})),
    "dracula": ("death_toll", _schema(count_correct={"type": "boolean"}, victims_correct={"type": "boolean"})),
}


def judge_spec(benchmark: str, prompt: JudgePrompt | None = None) -> JudgeSpec:
    """The judge of `benchmark`, with its built-in prompt unless `prompt` replaces it."""
    if benchmark not in _SCHEMAS:
        raise ConfigError(f"no judge for benchmark {benchmark!r}; use one of {', '.join(sorted(_SCHEMAS))}")
    schema_name, schema = _SCHEMAS[benchmark]
    return JudgeSpec(
        benchmark=benchmark,
        prompt=prompt or builtin_prompt(f"{benchmark}_judge"),
        schema=schema,
        schema_name=schema_name,
    )


# Replies in upstream's formats ("Rating: [[87]]", "[[YES]]") are accepted when no JSON is found.
_UPSTREAM_RATING = re.compile(r"\[\[\s*(\d{1,3})\s*\]\]")
_UPSTREAM_YES_NO = re.compile(r"\[\[\s*(YES|NO)\s*\]\]", flags=re.IGNORECASE)


class _Unusable(ValueError):
    """The judge's reply cannot be used; the message says why (it is sent back on the re-ask)."""


def parse_reply(spec: JudgeSpec, content: str) -> dict[str, Any]:
    """The judge's JSON reply, validated against the spec's schema; raises _Unusable with the reason."""
    try:
        data, _repaired = extract_json(content)
    except NoJSON:
        data = _upstream_reply(spec.benchmark, content)
        if data is None:
            raise _Unusable("the reply holds no JSON object") from None
    try:
        jsonschema.validate(data, spec.schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the object"
        raise _Unusable(f"{where}: {exc.message}") from None
    return data


def _upstream_reply(benchmark: str, content: str) -> dict[str, Any] | None:
    if benchmark == "loong" and (m := _UPSTREAM_RATING.search(content)):
        return {"rationale": content.strip(), "score": int(m.group(1))}
    if benchmark == "corpusqa" and (m := _UPSTREAM_YES_NO.search(content)):
        return {"rationale": content.strip(), "equivalent": m.group(1).upper() == "YES"}
    return None


@dataclass(frozen=True)
class _Reply:
    data: dict[str, Any] | None
    usage: Usage
    model: str
    status: str
    error: str = ""


async def _ask(llm: LLM, spec: JudgeSpec, task: str, answer: str, gold: str) -> _Reply:
    """One judgment: ask, and re-ask once with the reason when the reply is unusable."""
    request = ChatRequest(
        messages=(Message("user", spec.prompt.render(task=task, answer=answer, gold=gold)),),
        stage="judge",
        response_schema=spec.schema,
        schema_name=spec.schema_name,
        max_tokens=spec.max_tokens,
        temperature=0,
        prompt_name=spec.prompt.name,
        prompt_hash=spec.prompt.hash,
    )
    usage, model, error = Usage(), "", ""
    for attempt in range(2):
        try:
            completion = await llm.complete(request)
        except ConfigError:
            raise  # nothing else can succeed either: stop the evaluation
        except R3conError as exc:  # the calls it made before failing are billed all the same
            spent = usage + exc.usage if isinstance(exc.usage, Usage) else usage
            return _Reply(None, spent, model, JUDGE_ERROR, f"{type(exc).__name__}: {exc}")
        usage, model = usage + completion.usage, completion.model
        try:
            return _Reply(parse_reply(spec, completion.content), usage, model, JUDGED)
        except _Unusable as exc:
            error = str(exc)
        if attempt == 0:
            retry = builtin_prompt("judge_retry")
            text = retry.render(error=error, schema=json.dumps(spec.schema, ensure_ascii=False))
            request = replace(
                request,
                messages=(*request.messages, Message("assistant", completion.content), Message("user", text)),
                prompt_name=f"{spec.prompt.name}+{retry.name}",
                prompt_hash=retry.hash,
            )
    return _Reply(None, usage, model, JUDGE_FAILED, f"unusable judge reply after a re-ask: {error}")


def judged_answer(benchmark: str, answer: str) -> str:
    """The part of a method's answer the judge sees (CorpusQA: what follows "The answer is:")."""
    return extract_final_answer(answer) if benchmark == "corpusqa" else answer.strip()


async def judge_answer(spec: JudgeSpec, task: EvalTask, answer: str, llm: LLM) -> Verdict:
    """Judge `answer` to `task`; an empty answer scores worst without a judge call."""
    shown = judged_answer(spec.benchmark, answer)
    base = Verdict(status=EMPTY, prompt_name=spec.prompt.name, prompt_hash=spec.prompt.hash)
    if not shown:
        return replace(base, lenient_correct=False if task.gold_lenient is not None else None)
    reply = await _ask(llm, spec, task.task_text, shown, task.gold)
    if spec.benchmark == "dracula":
        return await _judge_dracula(spec, task, shown, llm, base, reply)
    verdict = replace(base, status=reply.status, usage=reply.usage, judge_model=reply.model, error=reply.error)
    if reply.data is None:
        return verdict
    rationale = str(reply.data.get("rationale", ""))
    if spec.benchmark == "loong":
        rating = int(reply.data["score"])
        return replace(verdict, correct=rating == 100, rating=rating, rationale=rationale, details=reply.data)
    return replace(verdict, correct=bool(reply.data["equivalent"]), rationale=rationale, details=reply.data)


def _dracula_correct(data: Mapping[str, Any] | None) -> bool:
    return data is not None and bool(data["count_correct"]) and bool(data["victims_correct"])


async def _judge_dracula(spec: JudgeSpec, task: EvalTask, shown: str, llm: LLM, base: Verdict, strict: _Reply) -> Verdict:
    """Strict and lenient golds are judged separately; an answer right on the strict gold is right leniently too."""
    replies = {"strict": strict}
    if task.gold_lenient is not None:
        replies["lenient"] = await _ask(llm, spec, task.task_text, shown, task.gold_lenient)
    usage = sum((r.usage for r in replies.values()), Usage())
    worst = next((s for s in (JUDGE_ERROR, JUDGE_FAILED) if any(r.status == s for r in replies.values())), JUDGED)
    strict_ok = _dracula_correct(strict.data)
    lenient = replies.get("lenient")
    return replace(
        base,
        status=worst,
        correct=strict_ok,
        lenient_correct=None if lenient is None else strict_ok or _dracula_correct(lenient.data),
        rationale=" | ".join(f"{k}: {r.data.get('rationale', '')}" for k, r in replies.items() if r.data),
        error="; ".join(f"{k}: {r.error}" for k, r in replies.items() if r.error),
        usage=usage,
        judge_model=strict.model or (lenient.model if lenient else ""),
        details={k: r.data for k, r in replies.items() if r.data is not None},
    )
