"""LLM judges, under one of two protocols.

"official" (the default for Loong and CorpusQA) is the benchmark's own: its judge prompt verbatim
(`prompts/official/`, source and commit in `sources.json`), no JSON schema, one call, and its parser:

    loong     `[[N]]`, else `[N]` (N a decimal, e.g. 87.5); correct = rated 100; no score = judge_failed
              (MozerWang/Loong src/utils/metric.py `extract_number`)
    corpusqa  the answer is what follows the first "The answer is: " on its line (else the whole reply);
              correct = "[[YES]]" in the reply and "[[NO]]" not; neither = judge_failed, counted wrong
              (Tongyi-Zhiwen/CorpusQA src/eval.py `extract_answer`, `evaluate_one`)

"r3con" (Dracula's only protocol, and any `--judge-prompt`) sends r3con's own prompt with a JSON
schema, validates the reply (a reply in the benchmark's own format is read by the parser above) and
re-asks once with the reason:

    loong     rates 1-100 against the gold (accuracy, completeness); correct = rated 100
    corpusqa  equivalent or not (same values or meaning, in any notation); correct = equivalent
    dracula   count right and every victim right; judged on the strict and on the lenient gold

Judge calls go through the `LLM` seam with stage "judge" (and mode "rating" or "yes_no" under the
official protocol, which says what reply format the prompt asks for). A reply that stays unusable
gives a "judge_failed" verdict; an endpoint error gives "judge_error", which a resumed evaluation
judges again. How each counts is the scorer's business (`scoring.py`).
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

from ..errors import ConfigError, InputError, R3conError
from ..llm.json_reply import NoJSON, extract_json
from ..llm.types import LLM, ChatRequest, Message, Usage
from ..prompts.render import parse_source, render_source
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

OFFICIAL = "official"  # the benchmark's own prompt, parser and counting
R3CON = "r3con"  # r3con's prompt with a JSON schema, validated and re-asked once
PROTOCOLS = (OFFICIAL, R3CON)

PAPER_JUDGE = "gpt-5.4-mini"  # the judge of the R3CON paper's tables (with the benchmarks' own prompts)
BENCHMARK_JUDGES = {"loong": "gpt-4-turbo-2024-04-09", "corpusqa": "deepseek-v3"}  # the benchmarks' own judges
# Where each named judge is served when no judge base URL is given: OpenAI; CorpusQA's DeepSeek-V3 on the
# DashScope endpoint its src/eval.py calls.
JUDGE_URLS = {
    PAPER_JUDGE: "https://api.openai.com/v1",
    "gpt-4-turbo-2024-04-09": "https://api.openai.com/v1",
    "deepseek-v3": "https://dashscope.aliyuncs.com/compatible-mode/v1",
}
JUDGES = ("paper", "benchmark", "endpoint")


@dataclass(frozen=True)
class JudgeChoice:
    """Who judges: `model` at `base_url` with `api_key`, or (base_url None) the run's own endpoint."""

    who: str  # paper | benchmark | endpoint
    model: str | None = None  # None: the run's judge-stage model
    base_url: str | None = None
    api_key: str | None = None


def choose_judge(
    benchmark: str,
    who: str | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
) -> JudgeChoice:
    """Resolve `--judge` at the CLI's edge. A judge endpoint is configured when a judge key or base URL is
    given (`--judge-api-key` / R3CON_JUDGE_API_KEY, `--judge-base-url` / R3CON_JUDGE_BASE_URL); then the
    default is the paper's judge (gpt-5.4-mini), else the run's own endpoint and model ("endpoint").
    "benchmark" is the benchmark's own judge (Loong: GPT-4-turbo-2024-04-09; CorpusQA: DeepSeek-V3).
    OPENAI_API_KEY alone does not send the judge elsewhere: it is often the key of the endpoint under test."""
    env = env or {}
    key = api_key or env.get("R3CON_JUDGE_API_KEY") or None
    url = base_url or env.get("R3CON_JUDGE_BASE_URL") or None
    who = who or ("paper" if key or url else "endpoint")
    if who not in JUDGES:
        raise ConfigError(f"unknown --judge {who!r}; use {', '.join(JUDGES)}")
    if who == "endpoint":
        return JudgeChoice("endpoint", model)
    if who == "benchmark" and benchmark not in BENCHMARK_JUDGES:
        raise ConfigError(f"{benchmark} has no judge of its own; pass --judge paper or --judge endpoint")
    name = model or (PAPER_JUDGE if who == "paper" else BENCHMARK_JUDGES[benchmark])
    if not (key or url):
        raise ConfigError(
            f"the {who} judge ({name}) needs its endpoint's key: set R3CON_JUDGE_API_KEY "
            "(and R3CON_JUDGE_BASE_URL off OpenAI), or pass --judge endpoint to judge with the run's endpoint"
        )
    return JudgeChoice(who, name, url or JUDGE_URLS.get(name, JUDGE_URLS[PAPER_JUDGE]), key)


@dataclass(frozen=True)
class Verdict:
    """A judged (or not judgeable) answer. `correct` is what accuracy counts; `rating` is Loong's 1-100."""

    status: str
    correct: bool = False
    rating: float | None = None
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


@dataclass(frozen=True)
class OfficialPrompt:
    """A benchmark's own judge prompt, verbatim: a user template (Python `str.format` slots, as upstream
    fills them) and for CorpusQA a system message; `sources` names each file's repository, path and commit."""

    benchmark: str
    user: str
    system: str | None = None
    sources: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.benchmark}_official"

    @property
    def hash(self) -> str:
        return hashlib.sha256(f"{self.system or ''}\x00{self.user}".encode()).hexdigest()[:12]

    def messages(self, question: str, answer: str, gold: str) -> tuple[Message, ...]:
        """The judge's messages for `answer` to `question`, filled exactly as upstream fills them."""
        if self.benchmark == "loong":  # prompt.format(question, answer, predict): the gold answer second
            return (Message("user", self.user.format(question, gold, answer)),)
        user = Message("user", self.user.format(problem=question, answer_1=answer, answer_2=gold))
        return (Message("system", self.system or ""), user)


_OFFICIAL_FILES = {"loong": (None, "loong_judge.txt"), "corpusqa": ("corpusqa_judge_system.txt", "corpusqa_judge_user.txt")}


def official_prompt(benchmark: str) -> OfficialPrompt:
    """The judge prompt of `benchmark`'s own evaluation code (`r3con/eval/prompts/official/`)."""
    if benchmark not in _OFFICIAL_FILES:
        raise ConfigError(f"{benchmark} has no official judge protocol; pass --judge-protocol r3con")
    folder = resources.files("r3con.eval").joinpath("prompts", "official")
    sources = json.loads(folder.joinpath("sources.json").read_text(encoding="utf-8"))
    system_file, user_file = _OFFICIAL_FILES[benchmark]
    return OfficialPrompt(
        benchmark=benchmark,
        user=folder.joinpath(user_file).read_text(encoding="utf-8"),
        system=folder.joinpath(system_file).read_text(encoding="utf-8") if system_file else None,
        sources={name: sources[name] for name in (system_file, user_file) if name},
    )


# MozerWang/Loong src/utils/metric.py extract_number: `[[N]]` first, then `[N]`; N may be a decimal.
_LOONG_DOUBLE = re.compile(r"\[\[([0-9]*\.?[0-9]+)\]\]")
_LOONG_SINGLE = re.compile(r"\[([0-9]*\.?[0-9]+)\]")
# Tongyi-Zhiwen/CorpusQA src/eval.py extract_answer: the first match, case-sensitive, to the end of its line.
_CORPUSQA_ANSWER = re.compile(r"The answer is: (.*)")


def loong_official_score(reply: str) -> float | None:
    """The score Loong's own parser reads in a judge reply, or None when it finds none."""
    match = _LOONG_DOUBLE.search(reply) or _LOONG_SINGLE.search(reply)
    return float(match.group(1)) if match else None


def corpusqa_official_answer(response: str) -> str:
    """The part of a method's answer CorpusQA's own code sends to its judge."""
    match = _CORPUSQA_ANSWER.search(response)
    return match.group(1).strip() if match else response.strip()


def corpusqa_official_verdict(reply: str) -> bool | None:
    """CorpusQA's own reading of a judge reply: YES only with "[[YES]]" and no "[[NO]]"; None when neither
    appears (upstream counts that as wrong as well)."""
    if "[[YES]]" in reply and "[[NO]]" not in reply:
        return True
    if "[[NO]]" in reply:
        return False
    return None


def _schema(**properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"rationale": {"type": "string"}, **properties},
        "required": ["rationale", *properties],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class JudgeSpec:
    """How one benchmark is judged: the protocol, the prompt, and (r3con protocol) the reply schema."""

    benchmark: str
    prompt: JudgePrompt | OfficialPrompt
    schema: Mapping[str, Any]
    schema_name: str
    max_tokens: int = JUDGE_MAX_TOKENS
    protocol: str = R3CON


_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "loong": ("rating", _schema(score={"type": "number", "minimum": 1, "maximum": 100})),
    "corpusqa": ("equivalence", _schema(equivalent={"type": "boolean"})),
    "dracula": ("death_toll", _schema(count_correct={"type": "boolean"}, victims_correct={"type": "boolean"})),
}


def default_protocol(benchmark: str, prompt: JudgePrompt | None = None) -> str:
    """The benchmark's own protocol where it has one and no `--judge-prompt` replaces its prompt; else r3con's."""
    return OFFICIAL if benchmark in _OFFICIAL_FILES and prompt is None else R3CON


def judge_spec(benchmark: str, prompt: JudgePrompt | None = None, protocol: str | None = None) -> JudgeSpec:
    """The judge of `benchmark` under `protocol` (default: `default_protocol`); `prompt` replaces r3con's prompt."""
    if benchmark not in _SCHEMAS:
        raise ConfigError(f"no judge for benchmark {benchmark!r}; use one of {', '.join(sorted(_SCHEMAS))}")
    protocol = protocol or default_protocol(benchmark, prompt)
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown judge protocol {protocol!r}; use {' or '.join(PROTOCOLS)}")
    schema_name, schema = _SCHEMAS[benchmark]
    if protocol == OFFICIAL:
        if prompt is not None:
            raise ConfigError("--judge-prompt replaces r3con's judge prompt; pass --judge-protocol r3con with it")
        return JudgeSpec(benchmark, official_prompt(benchmark), schema, schema_name, protocol=OFFICIAL)
    return JudgeSpec(
        benchmark=benchmark,
        prompt=prompt or builtin_prompt(f"{benchmark}_judge"),
        schema=schema,
        schema_name=schema_name,
    )


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
    """A reply in the benchmark's own format, read by its own parser ("Rating: [[87.5]]", "[[YES]]")."""
    if benchmark == "loong" and (score := loong_official_score(content)) is not None:
        return {"rationale": content.strip(), "score": score}
    if benchmark == "corpusqa" and (equivalent := corpusqa_official_verdict(content)) is not None:
        return {"rationale": content.strip(), "equivalent": equivalent}
    return None


@dataclass(frozen=True)
class _Reply:
    data: dict[str, Any] | None
    usage: Usage
    model: str
    status: str
    error: str = ""
    content: str = ""  # the judge's reply as it came (kept in the verdict under the official protocol)


async def _ask_official(llm: LLM, spec: JudgeSpec, prompt: OfficialPrompt, task: str, answer: str, gold: str) -> _Reply:
    """One judgment as upstream makes it: one call, no schema, the benchmark's own parser."""
    request = ChatRequest(
        messages=prompt.messages(task, answer, gold),
        stage="judge",
        mode="rating" if spec.benchmark == "loong" else "yes_no",
        max_tokens=spec.max_tokens,
        temperature=0,
        prompt_name=prompt.name,
        prompt_hash=prompt.hash,
    )
    try:
        completion = await llm.complete(request)
    except ConfigError:
        raise
    except R3conError as exc:
        spent = exc.usage if isinstance(exc.usage, Usage) else Usage()
        return _Reply(None, spent, "", JUDGE_ERROR, f"{type(exc).__name__}: {exc}")
    reply = completion.content
    data: dict[str, Any]
    if spec.benchmark == "loong":
        score = loong_official_score(reply)
        if score is None:
            return _Reply(None, completion.usage, completion.model, JUDGE_FAILED, "no [[score]] or [score] in the judge's reply", reply)
        data = {"rationale": reply.strip(), "score": score}
    else:
        equivalent = corpusqa_official_verdict(reply)
        if equivalent is None:
            return _Reply(None, completion.usage, completion.model, JUDGE_FAILED, "neither [[YES]] nor [[NO]] in the judge's reply", reply)
        data = {"rationale": reply.strip(), "equivalent": equivalent}
    return _Reply(data, completion.usage, completion.model, JUDGED, content=reply)


async def _ask(llm: LLM, spec: JudgeSpec, task: str, answer: str, gold: str) -> _Reply:
    """One judgment: ask, and re-ask once with the reason when the reply is unusable."""
    if isinstance(spec.prompt, OfficialPrompt):
        return await _ask_official(llm, spec, spec.prompt, task, answer, gold)
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


def judged_answer(benchmark: str, answer: str, protocol: str = R3CON) -> str:
    """The part of a method's answer the judge sees (CorpusQA: what follows "The answer is:", as the
    protocol reads it; Loong under the official protocol: the answer as it is)."""
    if protocol == OFFICIAL:
        return corpusqa_official_answer(answer) if benchmark == "corpusqa" else answer
    return extract_final_answer(answer) if benchmark == "corpusqa" else answer.strip()


async def judge_answer(spec: JudgeSpec, task: EvalTask, answer: str, llm: LLM) -> Verdict:
    """Judge `answer` to `task`; an empty answer gets an "empty" verdict without a judge call (how it
    counts is the scorer's: wrong for r3con and CorpusQA, regenerated, so left out, for Loong)."""
    shown = judged_answer(spec.benchmark, answer, spec.protocol)
    base = Verdict(status=EMPTY, prompt_name=spec.prompt.name, prompt_hash=spec.prompt.hash)
    if not shown.strip():
        return replace(base, lenient_correct=False if task.gold_lenient is not None else None)
    official = spec.protocol == OFFICIAL
    question = task.judge_question if official and task.judge_question else task.task_text
    gold = task.judge_gold if official and task.judge_gold else task.gold
    reply = await _ask(llm, spec, question, shown, gold)
    if spec.benchmark == "dracula":
        return await _judge_dracula(spec, task, shown, llm, base, reply)
    verdict = replace(base, status=reply.status, usage=reply.usage, judge_model=reply.model, error=reply.error)
    kept = {"reply": reply.content} if official and reply.status != JUDGE_ERROR else {}
    if reply.data is None:
        return replace(verdict, details=kept)
    rationale = str(reply.data.get("rationale", ""))
    details = {**reply.data, **kept}
    if spec.benchmark == "loong":
        rating = float(reply.data["score"])
        return replace(verdict, correct=rating == 100, rating=rating, rationale=rationale, details=details)
    return replace(verdict, correct=bool(reply.data["equivalent"]), rationale=rationale, details=details)


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
