"""Run methods over a benchmark's tasks, judge the answers, and keep every step on disk so a run resumes.

A task's record is written when its method finishes and again when its answer is judged, so an
interrupted evaluation picks up where it stopped: a judged task costs nothing again, an answered one
is only judged, and only tasks without a record run their method.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..corpus.documents import Document
from ..errors import BudgetExceeded, ConfigError, R3conError
from ..llm.layers.budget import CostCap, sharing
from ..llm.types import LLM, ChatRequest, Completion, Usage
from .benchmarks import paper_coverage
from .judges import CAPPED as CAPPED_VERDICT
from .judges import EMPTY, JUDGE_ERROR, JudgePrompt, JudgeSpec, Verdict, judge_answer, judge_spec
from .judges import FAILED as FAILED_VERDICT
from .records import (
    ANSWERED,
    CAPPED,
    FAILED,
    MANIFEST,
    TaskRecord,
    read_json,
    read_record,
    record_path,
    write_json,
    write_record,
)
from .scoring import Summary, summarize_records
from .tasks import EvalTask, TaskSet, safe_name

if TYPE_CHECKING:
    from ..results import MethodOutcome

MethodRunner = Callable[[str, str, tuple[Document, ...], Settings, Path], Awaitable["MethodOutcome"]]
"""Same signature as `r3con.methods.run_method(name, task, documents, settings, run_dir)`."""

RecordCallback = Callable[[TaskRecord, str], None]
"""Called as each task finishes, with what this run did for it: "ran", "judged" or "kept"; and every
JUDGE_HEARTBEAT_S while its judge is slow, with "judging N s" (the task is not finished then)."""

MANIFEST_VERSION = 1
JUDGE_HEARTBEAT_S = 30.0  # a judgment still running says so this often (`on_record(record, "judging N s")`)


@dataclass(frozen=True)
class EvalResult:
    """What `run_eval` did and the scores of the tasks it was given, per method."""

    out_dir: Path
    benchmark: str
    summaries: Mapping[str, Summary]
    records: Mapping[str, tuple[TaskRecord, ...]]
    skipped: Mapping[str, int] = field(default_factory=dict)
    ran: int = 0  # method runs this call made
    judged: int = 0  # tasks this call judged (with judge calls)
    usage: Mapping[str, Usage] = field(default_factory=dict)  # per method, over all its records
    judge_usage: Mapping[str, Usage] = field(default_factory=dict)  # per method, over all its verdicts

    def to_dict(self) -> dict[str, Any]:
        return {
            "out_dir": str(self.out_dir),
            "benchmark": self.benchmark,
            "skipped": dict(self.skipped),
            "ran": self.ran,
            "judged": self.judged,
            "methods": {
                method: {
                    **summary.to_dict(),
                    "usage": self.usage[method].to_dict(),
                    "judge_usage": self.judge_usage[method].to_dict(),
                }
                for method, summary in self.summaries.items()
            },
        }


class _LazyJudge:
    """The judge's client, opened (with `build_llm`) only when a task actually needs judging."""

    def __init__(self, settings: Settings, calls_log: Path, given: LLM | None, cap: CostCap | None = None):
        self._settings = settings
        self._cap = cap
        self._calls_log = calls_log
        self._llm = given
        self._lock = asyncio.Lock()
        self._stack = contextlib.AsyncExitStack()

    async def complete(self, request: ChatRequest) -> Completion:
        if self._llm is None:
            async with self._lock:
                if self._llm is None:
                    from ..llm import build_llm

                    stack = build_llm(self._settings, self._calls_log, cap=self._cap)
                    self._llm = await self._stack.enter_async_context(stack)
        return await self._llm.complete(request)

    async def aclose(self) -> None:
        await self._stack.aclose()


def _default_runner(methods: Sequence[str]) -> MethodRunner:
    from ..methods import available_methods, run_method

    known = available_methods()
    for method in methods:
        if method not in known:
            raise ConfigError(f"unknown method {method!r}; choose one of {', '.join(known)}")
    return run_method


def _update_manifest(
    out_dir: Path, task_set: TaskSet, methods: Sequence[str], settings: Settings, spec: JudgeSpec, rejudge: bool,
    judge_settings: Settings,
) -> None:
    path = out_dir / MANIFEST
    old: dict[str, Any] = read_json(path) if path.exists() else {}
    if old and old.get("benchmark") != task_set.benchmark:
        raise ConfigError(
            f"{out_dir} holds a {old.get('benchmark')} evaluation; pass another --out for {task_set.benchmark}"
        )
    old_prompt = old.get("judge", {}).get("prompt_hash")
    if old_prompt and old_prompt != spec.prompt.hash and not rejudge:
        raise ConfigError(
            f"{out_dir} was judged with another judge prompt ({old['judge'].get('prompt_name')}); "
            "pass the same --judge-prompt and --judge-protocol, --rejudge to judge every answer again, or another --out"
        )
    task_ids = list(old.get("task_ids", []))
    seen = set(task_ids)
    task_ids += [t.id for t in task_set.tasks if t.id not in seen]
    write_json(
        path,
        {
            "version": MANIFEST_VERSION,
            "benchmark": task_set.benchmark,
            "methods": sorted(set(old.get("methods", [])) | set(methods)),
            "task_ids": task_ids,
            "skipped": dict(task_set.skipped),
            "data_dir": str(task_set.data_dir),
            "filters": task_set.filters.describe(),
            "paper_set": coverage.to_dict() if (coverage := paper_coverage(task_set)) else None,
            "settings": settings.public(),
            "judge": {
                "protocol": spec.protocol,
                "prompt_name": spec.prompt.name,
                "prompt_hash": spec.prompt.hash,
                "model": judge_settings.model_for("judge"),
                "endpoint": judge_settings.public().get("base_url"),
            },
            "created": old.get("created") or _now(),
            "updated": _now(),
        },
    )


def _first_error(group: BaseExceptionGroup) -> BaseException:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_error(exc)
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return group


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _failure_dicts(items: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    return tuple(f.to_dict() if hasattr(f, "to_dict") else {"error": str(f)} for f in items)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class EvalOptions:
    """How `run_eval` runs and judges: which methods, how many tasks at once, who judges and with what
    prompt, and what it does again.

    A step-capped task counts at the worst score unless `score_capped`; a failed one always does
    (`retry_failed` runs it again); `rejudge` judges again answers judged with another prompt. The judge
    follows `judge_protocol` ("official", the default where the benchmark has one, or "r3con"; see
    `judges`) and calls the endpoint of `judge_settings` (default: the run's settings), stage "judge".
    """

    methods: Sequence[str] = ("r3con",)
    workers: int = 4
    judge_prompt: JudgePrompt | None = None
    judge_protocol: str | None = None
    judge_settings: Settings | None = None
    score_capped: bool = False
    retry_failed: bool = False
    rejudge: bool = False


async def run_eval(
    task_set: TaskSet,
    settings: Settings,
    out_dir: Path,
    options: EvalOptions | None = None,
    *,
    method_fn: MethodRunner | None = None,
    judge_llm: LLM | None = None,
    on_record: RecordCallback | None = None,
) -> EvalResult:
    """Run each method on each task (`options.workers` tasks at once), judge the answers, and score them.

    Records go to `out_dir/METHOD/TASK_ID.json`, the methods' run folders to `out_dir/METHOD/runs/TASK_ID`.
    Tasks already recorded there are not run again; answered ones are only judged (see `EvalOptions` for
    what is run or judged again). `method_fn` replaces `r3con.methods.run_method` and `judge_llm` the
    judge's client (built when needed); both are for tests and library callers.
    """
    options = options or EvalOptions()
    methods, workers = options.methods, options.workers
    if workers < 1:
        raise ConfigError("--workers must be at least 1")
    if not methods:
        raise ConfigError("no method to evaluate; pass --method NAME")
    spec = judge_spec(task_set.benchmark, options.judge_prompt, options.judge_protocol)
    judge_settings = options.judge_settings or settings
    out_dir.mkdir(parents=True, exist_ok=True)
    _update_manifest(out_dir, task_set, methods, settings, spec, options.rejudge, judge_settings)
    # --max-cost covers this whole call: every method run and the judge spend against one cap
    cap = CostCap(settings.max_cost_usd) if settings.max_cost_usd is not None else None
    evaluation = _Evaluation(
        settings=settings, out_dir=out_dir, spec=spec, cap=cap,
        runner=method_fn if method_fn is not None else _default_runner(methods),
        judge=_LazyJudge(judge_settings, out_dir / "judge-calls.jsonl", judge_llm, cap),
        semaphore=asyncio.Semaphore(workers), options=options, on_record=on_record)
    try:
        async with asyncio.TaskGroup() as group:
            for task in task_set.tasks:
                for method in methods:
                    group.create_task(evaluation.one(method, task))
    except BaseExceptionGroup as group_error:
        # One task's error stopped the rest; raise it as it is (an R3conError becomes a one-line message).
        raise _first_error(group_error) from None
    finally:
        await evaluation.judge.aclose()
    return evaluation.result(task_set, methods)


@dataclass
class _Evaluation:
    """One `run_eval`: each (method, task) run once, judged once, and recorded as it goes."""

    settings: Settings
    out_dir: Path
    spec: JudgeSpec
    cap: CostCap | None
    runner: MethodRunner
    judge: _LazyJudge
    semaphore: asyncio.Semaphore
    options: EvalOptions
    on_record: RecordCallback | None
    counts: dict[str, int] = field(default_factory=lambda: {"ran": 0, "judged": 0})

    async def one(self, method: str, task: EvalTask) -> None:
        """`task` by `method`: run unless recorded (or failed and `retry_failed`), judged unless judged."""
        async with self.semaphore:
            path = record_path(self.out_dir, method, task.id)
            record = read_record(path) if path.exists() else None
            action = "kept"
            if record is None or (self.options.retry_failed and record.status == FAILED):
                record = await self.run_method(method, task)
                self.counts["ran"] += 1
                action = "ran"
                write_record(self.out_dir, record)
            if self.needs_judging(record):
                started = time.monotonic()
                beat = asyncio.create_task(self.heartbeat(record, started)) if self.on_record is not None else None
                try:
                    verdict, asked = await self.verdict_for(record, task)
                finally:
                    if beat is not None:
                        beat.cancel()
                record = replace(record, verdict=verdict, judge_s=time.monotonic() - started)
                if asked:
                    self.counts["judged"] += 1
                    action = "judged" if action == "kept" else action
                write_record(self.out_dir, record)
            if self.on_record is not None:
                self.on_record(record, action)

    async def run_method(self, method: str, task: EvalTask) -> TaskRecord:
        out_dir, settings = self.out_dir, self.settings
        run_dir = out_dir / safe_name(method) / "runs" / safe_name(task.id)
        base = TaskRecord(
            task_id=task.id, benchmark=task.benchmark, method=method, model=settings.model, status=ANSWERED,
            meta=task.meta, task=task.task_text, gold=task.gold, gold_lenient=task.gold_lenient,
            run_dir=_relative(run_dir, out_dir),
        )
        started = time.monotonic()
        try:
            with sharing(self.cap):
                outcome = await self.runner(method, task.task_text, task.documents, settings, run_dir)
        except (ConfigError, BudgetExceeded):
            raise  # every other task would fail the same way (or --max-cost is reached): stop, say what to do
        except R3conError as exc:
            return replace(base, status=FAILED, error=f"{type(exc).__name__}: {exc}", method_s=time.monotonic() - started)
        return replace(
            base,
            model=getattr(outcome, "model", None) or base.model,  # what the endpoint served, not what was asked
            status=CAPPED if outcome.capped else ANSWERED,
            answer=outcome.answer,
            usage=outcome.usage,
            by_stage=dict(outcome.by_stage),
            degraded=_failure_dicts(outcome.degraded),
            method_s=time.monotonic() - started,
            run_dir=_relative(outcome.run_dir, out_dir),
        )

    async def verdict_for(self, record: TaskRecord, task: EvalTask) -> tuple[Verdict, bool]:
        """The verdict, and whether the judge was asked for it."""
        lenient = False if task.gold_lenient is not None else None
        if record.status == FAILED:
            return Verdict(status=FAILED_VERDICT, error=record.error, lenient_correct=lenient), False
        if record.status == CAPPED and not self.options.score_capped:
            return Verdict(status=CAPPED_VERDICT, lenient_correct=lenient), False
        verdict = await judge_answer(self.spec, task, record.answer, self.judge)
        return verdict, verdict.status != EMPTY

    def needs_judging(self, record: TaskRecord) -> bool:
        verdict = record.verdict
        if verdict is None or verdict.status == JUDGE_ERROR:
            return True
        return self.options.rejudge and verdict.prompt_hash != self.spec.prompt.hash \
            and verdict.status not in (FAILED_VERDICT, CAPPED_VERDICT)

    async def heartbeat(self, record: TaskRecord, started: float) -> None:
        """`on_record(record, "judging N s")` every JUDGE_HEARTBEAT_S while a slow judge works on it."""
        while self.on_record is not None:
            await asyncio.sleep(JUDGE_HEARTBEAT_S)
            self.on_record(record, f"judging {time.monotonic() - started:.0f} s")

    def result(self, task_set: TaskSet, methods: Sequence[str]) -> EvalResult:
        """What the folder holds now, per method: the records, their summaries and usage."""
        records: dict[str, tuple[TaskRecord, ...]] = {}
        for method in methods:
            records[method] = tuple(
                read_record(p) for t in task_set.tasks if (p := record_path(self.out_dir, method, t.id)).exists()
            )
        return EvalResult(
            out_dir=self.out_dir,
            benchmark=task_set.benchmark,
            summaries={m: summarize_records(rs, task_set.benchmark) for m, rs in records.items()},
            records=records,
            skipped=dict(task_set.skipped),
            ran=self.counts["ran"],
            judged=self.counts["judged"],
            usage={m: sum((r.usage for r in rs), Usage()) for m, rs in records.items()},
            judge_usage={
                m: sum((r.verdict.usage for r in rs if r.verdict is not None), Usage()) for m, rs in records.items()
            },
        )
