"""`r3con eval run | report | download`: thin commands over `r3con.eval`."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_type_hints

import typer

from ..errors import ConfigError, R3conError
from ._options import settings_options

if TYPE_CHECKING:
    from ..config import Settings
    from ..eval import EvalOptions

eval_app = typer.Typer(
    name="eval", no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
    help="Evaluate methods on benchmarks (Loong, CorpusQA, Dracula) with an LLM judge, and report.",
)

F = TypeVar("F", bound=Callable[..., Any])


def _one_line_errors(fn: F) -> F:
    """r3con errors become one line on stderr and the error's exit code; Ctrl-C says how to resume."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except R3conError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            print("interrupted; finished tasks are saved: run the same command again to resume", file=sys.stderr)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def _ints(option: str, text: str | None) -> tuple[int, ...] | None:
    if text is None or text.strip().lower() == "all":
        return None
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"{option} takes numbers separated by commas, e.g. {option} 2,3,4") from None


def _strings(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    return tuple(part.strip() for part in text.split(",") if part.strip()) or None


def _method_names(values: list[str] | None) -> list[str]:
    """--method values: repeated or comma-separated names, 'all' for every registered method; r3con by default."""
    from ..methods import available_methods

    names: list[str] = []
    for value in values or ["r3con"]:
        for name in (part.strip() for part in value.split(",")):
            for expanded in (available_methods() if name == "all" else [name] if name else []):
                if expanded not in names:
                    names.append(expanded)
    return names


Benchmark = Annotated[str, typer.Option("--benchmark", "-b", help="loong, corpusqa or dracula")]
Data = Annotated[Path | None, typer.Option(
    "--data", help="The benchmark's data: a folder (Loong: loong.jsonl + doc/; Dracula: docs/ + manifest.json) or "
    "CorpusQA's 1m_4domains.jsonl. Default: $R3CON_DATA/<benchmark>, else ../shared/data/<benchmark> beside the repo.")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables")]
NoPlots = Annotated[bool, typer.Option("--no-plots", help="Skip the PNG plots (they need matplotlib)")]


class _Progress:
    """One line on stderr per task as it is kept, run or judged (and while a slow judge works on it)."""

    def __init__(self, total: int, quiet: bool):
        self.total, self.quiet, self.done = total, quiet, 0

    def record(self, record: Any, action: str) -> None:
        if action.startswith("judging"):  # a slow judge: still working on it, not done
            if not self.quiet:
                print(f"[{self.done}/{self.total}] {record.method} {record.task_id}: {action} so far", file=sys.stderr,
                      flush=True)
            return
        self.done += 1
        if self.quiet:
            return
        verdict = record.verdict
        outcome = "pending" if verdict is None else ("correct" if verdict.correct else verdict.status)
        if verdict is not None and verdict.status == "judged" and not verdict.correct:
            outcome = "wrong"
        if verdict is not None and verdict.rating is not None:
            outcome += f" (rating {verdict.rating})"
        print(f"[{self.done}/{self.total}] {record.method} {record.task_id}: {action}, {outcome}", file=sys.stderr,
              flush=True)


def _methods(methods: list[str], option: list[str] | None) -> Any:
    """The methods' runner with their `--option`s (None: each with its defaults); ConfigError for an unknown
    method or one whose extra is not installed."""
    from ..methods import available_methods, check_extras, configured_methods

    unknown = [m for m in methods if m not in available_methods()]
    if unknown:
        raise ConfigError(f"unknown method {unknown[0]!r}; choose one of {', '.join(available_methods())}")
    check_extras(methods)
    if not option:
        return None
    chosen = configured_methods(methods, option)

    async def configured(name: str, task: str, documents: Any, settings: Any, run_dir: Path) -> Any:
        return await chosen[name](task, documents, settings, run_dir)

    return configured


@dataclass(frozen=True)
class RunFlags:
    """`r3con eval run`'s own flags as given (the settings' shared flags come apart, as `flags`); one field a
    flag, so typer reads the command's options from these fields."""

    benchmark: Benchmark
    data: Data = None
    method: Annotated[list[str] | None, typer.Option("--method", "-m", help="Method to evaluate: repeatable or comma-separated, 'all' for every method (default r3con; list: r3con eval methods)")] = None
    option: Annotated[list[str] | None, typer.Option("--option", "-o", help="A method option KEY=VALUE, or METHOD.KEY=VALUE for one method (repeatable; list: r3con eval methods)")] = None
    sets: Annotated[str | None, typer.Option("--sets", help="Loong sets, e.g. 2,3,4 (the paper's, the default) or all")] = None
    domains: Annotated[str | None, typer.Option("--domains", help="e.g. financial,paper (Loong) or financial_en (CorpusQA)")] = None
    levels: Annotated[str | None, typer.Option("--levels", help="Loong levels, e.g. 1,2")] = None
    languages: Annotated[str | None, typer.Option("--languages", help="e.g. en or zh")] = None
    limit: Annotated[int | None, typer.Option("--limit", help="At most N tasks (first in file order)")] = None
    tasks: Annotated[str | None, typer.Option("--tasks", help="Only these task ids, comma-separated")] = None
    workers: Annotated[int, typer.Option("--workers", "-w", help="Tasks run at once")] = 4
    out: Annotated[Path | None, typer.Option("--out", help="Evaluation folder (default ./r3con-evals/<benchmark>); rerun to resume")] = None
    judge: Annotated[str | None, typer.Option("--judge", help="Who judges: paper (gpt-5.4-mini, the default when a judge key or URL is set), benchmark (Loong: gpt-4-turbo-2024-04-09, CorpusQA: deepseek-v3) or endpoint (the run's endpoint and model, the default otherwise)")] = None
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="The judge's endpoint (env R3CON_JUDGE_BASE_URL; default OpenAI's, DashScope's for deepseek-v3)")] = None
    judge_api_key: Annotated[str | None, typer.Option("--judge-api-key", help="The judge endpoint's key (env R3CON_JUDGE_API_KEY)")] = None
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="Model for the judge (env R3CON_MODEL_JUDGE; default: the --judge's, or --model)")] = None
    judge_protocol: Annotated[str | None, typer.Option("--judge-protocol", help="official (the benchmark's own prompt, parser and counting; the default for Loong and CorpusQA) or r3con (r3con's prompt with a JSON schema)")] = None
    judge_prompt: Annotated[Path | None, typer.Option("--judge-prompt", help="Jinja file replacing r3con's judge prompt (with --judge-protocol r3con); it may use {{ task }}, {{ answer }}, {{ gold }}")] = None
    score_capped: Annotated[bool, typer.Option("--score-capped", help="Judge step-capped answers instead of scoring them worst")] = False
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Run failed tasks again")] = False
    rejudge: Annotated[bool, typer.Option("--rejudge", help="Judge answers judged with another prompt again")] = False
    no_plots: NoPlots = False
    as_json: Json = False
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr")] = False

    def settings(self, flags: dict[str, Any]) -> tuple[Settings, Settings | None]:
        """The run's settings and, where another endpoint judges, the judge's (its own URL, key and model)."""
        from ..config import Settings
        from ..eval.judges import choose_judge

        chosen = choose_judge(self.benchmark, self.judge, model=self.judge_model, base_url=self.judge_base_url,
                              api_key=self.judge_api_key, env=os.environ)
        if chosen.base_url is None and self.judge_model:
            flags = {**flags, "stage_models": {**flags.get("stage_models", {}), "judge": self.judge_model}}
        settings = Settings.resolve(**flags)
        if chosen.base_url is None:
            return settings, None
        return settings, dataclasses.replace(
            settings, base_url=chosen.base_url, base_urls=(chosen.base_url,), pool_file=None,
            api_key=chosen.api_key, model=chosen.model, stage_models={})

    def task_set(self) -> Any:
        """The benchmark's tasks these flags choose; ConfigError when none does."""
        from ..eval import load_benchmark, resolve_data_dir
        from ..eval.loong import PAPER_SETS
        from ..eval.tasks import TaskFilter

        sets = _ints("--sets", self.sets) if self.sets is not None else (
            PAPER_SETS if self.benchmark == "loong" else None)
        filters = TaskFilter(sets=sets, levels=_ints("--levels", self.levels), domains=_strings(self.domains),
                             languages=_strings(self.languages), task_ids=_strings(self.tasks), limit=self.limit)
        task_set = load_benchmark(self.benchmark, resolve_data_dir(self.benchmark, self.data), filters)
        if not task_set.tasks:
            raise ConfigError(f"no {self.benchmark} task matches the filters; loosen --sets/--domains/--levels/--tasks")
        return task_set

    def options(self, methods: list[str], judge_settings: Settings | None) -> EvalOptions:
        from ..eval import EvalOptions, prompt_from_file

        return EvalOptions(
            methods=methods, workers=self.workers, judge_protocol=self.judge_protocol, judge_settings=judge_settings,
            judge_prompt=prompt_from_file(self.judge_prompt) if self.judge_prompt else None,
            score_capped=self.score_capped, retry_failed=self.retry_failed, rejudge=self.rejudge)


def _takes_flags(flags_type: type[Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command whose parameters, for typer, are the fields of the frozen dataclass `flags_type`; the
    command is called with one `flags_type` built from them (and `flags`, the shared options' settings)."""
    hints = get_type_hints(flags_type, include_extras=True)
    parameters = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name],
                          default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default)
        for f in dataclasses.fields(flags_type)]

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def with_flags(*, flags: dict[str, Any] | None = None, **given: Any) -> Any:
            return command(flags_type(**given), flags or {})

        with_flags.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        with_flags.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_flags

    return wrap


@eval_app.command()
@_one_line_errors
@settings_options("model", "base_url", "pool", "api_key", "stage_model", "concurrency", "embedding_model", "max_cost",
                  "batch", "prices", "cache", "no_cache")
@_takes_flags(RunFlags)
def run(given: RunFlags, flags: dict[str, Any]) -> None:
    """Run methods over a benchmark's tasks, judge the answers, and write a report into OUT/report."""
    from ..eval import run_eval
    from ..eval.benchmarks import paper_coverage
    from ._inputs import warn_unknown_variables
    from ._local import with_local_server

    warn_unknown_variables()
    settings, judge_settings = given.settings(flags)
    task_set = given.task_set()
    out_dir = given.out or Path("r3con-evals") / given.benchmark
    options = given.options(_method_names(given.method), judge_settings)
    coverage = paper_coverage(task_set)
    methods = list(options.methods)
    progress = _Progress(len(task_set.tasks) * len(methods), given.quiet)
    method_fn = _methods(methods, given.option)
    settings = with_local_server(settings, quiet=given.quiet, required=False)  # some methods need no endpoint
    if not given.quiet:
        if coverage is not None:
            print(coverage.line(), file=sys.stderr)
        for reason, count in task_set.skipped.items():
            print(f"skipping {count} {given.benchmark} tasks: {reason}", file=sys.stderr)
        print(f"{len(task_set.tasks)} tasks x {len(methods)} method(s) -> {out_dir}", file=sys.stderr)
    result = asyncio.run(run_eval(task_set, settings, out_dir, options,
                                  method_fn=method_fn, on_record=progress.record))
    _report(result, out_dir, coverage, plots=not given.no_plots, as_json=given.as_json)


def _report(result: Any, out_dir: Path, coverage: Any, *, plots: bool, as_json: bool) -> None:
    """Write the evaluation's report into OUT/report and print the result (a table, or one JSON object)."""
    from ..eval import build_report, write_report

    report_dir = out_dir / "report"
    files = write_report(build_report([out_dir]), report_dir, plots=plots)
    _say_if_plots_skipped(not plots)
    if as_json:
        print(json.dumps({**result.to_dict(), "paper_set": coverage.to_dict() if coverage else None,
                          "report": [str(f) for f in files]}, ensure_ascii=False))
        return
    _print_result(result)
    print(f"report: {report_dir / 'report.md'}", file=sys.stderr)


def _say_if_plots_skipped(no_plots: bool) -> None:
    """One line when the plots were left out for want of matplotlib (the tables are written anyway)."""
    from ..eval.plots import unavailable

    hint = None if no_plots else unavailable()
    if hint:
        print(hint, file=sys.stderr)


def _print_result(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..eval.report import load_reference

    table = Table(title=f"{result.benchmark}: {result.ran} method runs, {result.judged} judged in this call")
    for column in ("method", "tasks", "accuracy ± SE", "official (correct/counted)", "failed", "capped", "pending",
                   "cost (USD)", "judge cost (USD)"):
        table.add_column(column, justify="left" if column == "method" else "right")
    for method, summary in result.summaries.items():
        official = str(summary.official.overall) if summary.official is not None else ""
        table.add_row(
            method, str(summary.n), str(summary.accuracy), official, str(summary.outcomes.get("failed", 0)),
            str(summary.outcomes.get("capped", 0)), str(summary.pending),
            f"{result.usage[method].cost_usd:.4f}", f"{result.judge_usage[method].cost_usd:.4f}",
        )
    for ref in load_reference().get(result.benchmark, ()):
        se = f" ± {ref.se:.2f}" if ref.se is not None else ""
        cost = f"{ref.cost_usd:,.0f}" if ref.cost_usd is not None else "n/a"
        acc = f"{ref.accuracy:.2f}{se}" if ref.accuracy is not None else "n/a"
        counted = f"{ref.accuracy:.2f} ({ref.correct}/{ref.n})" if ref.correct is not None and ref.n else ""
        table.add_row(f"paper: {ref.label}", f"{ref.n:,}" if ref.n else "", acc, counted, "", "", "", cost, "")
    Console().print(table)


@eval_app.command()
@_one_line_errors
def report(
    dirs: Annotated[list[Path], typer.Argument(help="Evaluation folders written by `r3con eval run`")],
    out: Annotated[Path | None, typer.Option("--out", help="Folder for report.md, CSV and PNG files (default: DIR/report, where `eval run` writes it, for one folder; ./r3con-report for several)")] = None,
    no_plots: NoPlots = False,
    as_json: Json = False,
) -> None:
    """Tables (Markdown, CSV) and plots (PNG) over evaluation folders, with the paper's numbers beside."""
    from ..eval import build_report, render_markdown, write_report

    built = build_report(dirs)
    out_dir = out or (dirs[0] / "report" if len(dirs) == 1 else Path("r3con-report"))
    files = write_report(built, out_dir, plots=not no_plots)
    _say_if_plots_skipped(no_plots)
    if as_json:
        print(json.dumps({**built.to_dict(), "files": [str(f) for f in files]}, ensure_ascii=False, default=str))
        return
    print(render_markdown(built))
    print(f"written: {', '.join(str(f) for f in files)}", file=sys.stderr)


@eval_app.command("methods")
@_one_line_errors
def list_methods(as_json: Json = False) -> None:
    """The methods `--method` accepts: R3CON, its ablations and the baselines, one line each, and their options."""
    from ..methods import describe_methods, method_options

    described = describe_methods()
    if as_json:
        print(json.dumps(described, ensure_ascii=False))
        return
    width = max(len(name) for name in described)
    for name, line in described.items():
        print(f"{name:<{width}}  {line}")
        options = method_options(name)
        if options:
            listed = ", ".join(f"{key}={default!r}" for key, (_, default) in options.items())
            print(f"{'':<{width}}  --option {listed}")


@eval_app.command()
@_one_line_errors
def download(
    benchmark: Benchmark,
    to: Annotated[Path, typer.Option("--to", help="Folder to fetch into (then pass it as --data)")],
) -> None:
    """Fetch a benchmark's official files (needs internet): Loong's loong.jsonl and doc.zip."""
    from ..eval import download as fetch

    folder = fetch(benchmark, to)
    print(f"{benchmark} is in {folder}; run: r3con eval run --benchmark {benchmark} --data {folder}")
