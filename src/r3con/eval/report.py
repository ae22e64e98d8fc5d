"""Reports over evaluation folders: Markdown and CSV tables and PNG plots, with the paper's numbers beside."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..files import write_atomic
from ..llm.types import Usage
from .judges import CAPPED, EMPTY, FAILED, JUDGE_ERROR, JUDGE_FAILED, OFFICIAL, PAPER_JUDGE
from .plots import plot_categories, plot_pareto, unavailable
from .records import MANIFEST, TaskRecord, read_json, read_record, record_path
from .scoring import CATEGORIES, Accuracy, OfficialCell, Summary, method_cost, summarize_records

NOT_AVAILABLE = "n/a"
DEFAULT_MODEL = "(endpoint default)"
_BENCHMARK_TITLES = {"loong": "Loong", "corpusqa": "CorpusQA", "dracula": "Dracula"}


@dataclass(frozen=True)
class ReferenceResult:
    """A published result: accuracy and SE in percent, cost in USD; None where the paper's value is not available."""

    benchmark: str
    method: str
    label: str
    model: str | None
    accuracy: float | None
    se: float | None
    cost_usd: float | None
    note: str | None = None
    categories: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None
    correct: int | None = None  # the paper's count and denominator, where known (CorpusQA 231 of 327)
    n: int | None = None
    judge: str | None = None

    def category(self, key: str, value: str) -> str:
        """The published cell for one category value, or "n/a"."""
        cell = (self.categories or {}).get(key, {}).get(value)
        if not cell or cell.get("accuracy") is None:
            return NOT_AVAILABLE
        se = cell.get("se")
        return f"{cell['accuracy']:.2f}" + (f" ± {se:.2f}" if se is not None else "")


def load_reference() -> dict[str, tuple[ReferenceResult, ...]]:
    """The paper's published results shipped with r3con (`r3con/eval/reference/paper.json`), per benchmark."""
    data = json.loads(resources.files("r3con.eval").joinpath("reference", "paper.json").read_text(encoding="utf-8"))
    return {
        benchmark: tuple(
            ReferenceResult(
                benchmark=benchmark,
                method=r["method"],
                label=r.get("label") or r["method"],
                model=r.get("model"),
                accuracy=r.get("accuracy"),
                se=r.get("se"),
                cost_usd=r.get("cost_usd"),
                note=r.get("note"),
                categories=r.get("categories"),
                correct=r.get("correct"),
                n=r.get("n"),
                judge=r.get("judge"),
            )
            for r in entry.get("results", [])
        )
        for benchmark, entry in data["benchmarks"].items()
    }


def reference_metric(benchmark: str) -> str:
    data = json.loads(resources.files("r3con.eval").joinpath("reference", "paper.json").read_text(encoding="utf-8"))
    return str(data["benchmarks"].get(benchmark, {}).get("metric", "accuracy"))


@dataclass(frozen=True)
class ReportRow:
    """One method with one model on one benchmark, over every folder that evaluated it."""

    benchmark: str
    method: str
    model: str
    summary: Summary
    usage: Usage
    judge_usage: Usage
    selected: int
    recorded: int
    judge_models: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    records: tuple[TaskRecord, ...] = ()  # each task's record, for the per-task table

    @property
    def not_run(self) -> int:
        return max(0, self.selected - self.recorded)

    @property
    def label(self) -> str:
        return f"{self.method} ({self.model})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "method": self.method,
            "model": self.model,
            **self.summary.to_dict(),
            "selected": self.selected,
            "not_run": self.not_run,
            "usage": self.usage.to_dict(),
            "judge_usage": self.judge_usage.to_dict(),
            "judge_models": list(self.judge_models),
            "folders": list(self.folders),
        }


@dataclass(frozen=True)
class Report:
    rows: tuple[ReportRow, ...]
    reference: Mapping[str, tuple[ReferenceResult, ...]]
    skipped: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    judges: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)  # each folder's judge (eval.json)
    paper_set: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # the paper's tasks beside the folder's

    @property
    def benchmarks(self) -> list[str]:
        return list(dict.fromkeys(r.benchmark for r in self.rows))

    def rows_for(self, benchmark: str) -> list[ReportRow]:
        return [r for r in self.rows if r.benchmark == benchmark]

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmarks": {
                b: {
                    "skipped": dict(self.skipped.get(b, {})),
                    "judges": [dict(j) for j in self.judges.get(b, ())],
                    "judge_differs_from_papers": bool(judge_warnings(self, b)),
                    "paper_set": dict(self.paper_set.get(b, {})),
                    "runs": [r.to_dict() for r in self.rows_for(b)],
                    "reference": [
                        {k: v for k, v in ref.__dict__.items() if k != "benchmark"} for ref in self.reference.get(b, ())
                    ],
                }
                for b in self.benchmarks
            }
        }


def _model_of(records: Sequence[TaskRecord]) -> str:
    models = Counter(r.model or DEFAULT_MODEL for r in records)
    return models.most_common(1)[0][0] if models else DEFAULT_MODEL


def build_report(dirs: Sequence[Path]) -> Report:
    """Collect the evaluation folders written by `run_eval` (one per benchmark run) into one report."""
    if not dirs:
        raise InputError("no evaluation folder given; pass one or more OUT folders of `r3con eval run`")
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    skipped: dict[str, dict[str, int]] = {}
    judges: dict[str, list[dict[str, Any]]] = {}
    paper_set: dict[str, dict[str, Any]] = {}
    for folder in dirs:
        path = folder / MANIFEST
        if not path.is_file():
            raise InputError(f"{folder} holds no evaluation ({MANIFEST}); pass a folder written by `r3con eval run`")
        manifest = read_json(path)
        benchmark = str(manifest["benchmark"])
        for reason, count in manifest.get("skipped", {}).items():
            bench_skipped = skipped.setdefault(benchmark, {})
            bench_skipped[reason] = max(bench_skipped.get(reason, 0), int(count))
        judge = manifest.get("judge") or {}
        entry = {"protocol": judge.get("protocol", "r3con"), "model": judge.get("model"), "prompt": judge.get("prompt_name")}
        if entry not in judges.setdefault(benchmark, []):
            judges[benchmark].append(entry)
        if manifest.get("paper_set"):
            paper_set[benchmark] = manifest["paper_set"]
        task_ids = [str(t) for t in manifest.get("task_ids", [])]
        for method in manifest.get("methods", []):
            records = [read_record(p) for t in task_ids if (p := record_path(folder, method, t)).is_file()]
            group = groups.setdefault(
                (benchmark, method, _model_of(records)), {"records": {}, "selected": set(), "folders": []}
            )
            group["records"].update({r.task_id: r for r in records})  # a later folder's record wins
            group["selected"].update(task_ids)
            group["folders"].append(str(folder))
    rows = []
    for (benchmark, method, model), group in groups.items():
        records = list(group["records"].values())
        rows.append(
            ReportRow(
                benchmark=benchmark,
                method=method,
                model=model,
                summary=summarize_records(records, benchmark),
                usage=sum((r.usage for r in records), Usage()),
                judge_usage=sum((r.verdict.usage for r in records if r.verdict is not None), Usage()),
                selected=len(group["selected"]),
                recorded=len(records),
                judge_models=tuple(sorted({r.verdict.judge_model for r in records if r.verdict and r.verdict.judge_model})),
                folders=tuple(group["folders"]),
                records=tuple(records),
            )
        )
    return Report(rows=tuple(rows), reference=load_reference(), skipped=skipped,
                  judges={b: tuple(j) for b, j in judges.items()}, paper_set=paper_set)


def judge_warnings(report: Report, benchmark: str) -> list[str]:
    """Why this benchmark's numbers do not stand beside the paper's as they are: another judge model, or
    r3con's judge protocol instead of the benchmark's own. Empty when the setting is the paper's."""
    if benchmark not in ("loong", "corpusqa"):
        return []
    served = {m for r in report.rows_for(benchmark) for m in r.judge_models}
    configured = {str(j["model"]) for j in report.judges.get(benchmark, ()) if j.get("model")}
    models = sorted(served or configured) or ["the endpoint's default model"]
    out = []
    if any(m != PAPER_JUDGE for m in models):
        out.append(f"the judge ({', '.join(models)}) is not the paper's ({PAPER_JUDGE})")
    protocols = sorted({str(j.get("protocol")) for j in report.judges.get(benchmark, ())})
    if any(p != OFFICIAL for p in protocols):
        out.append(f"judged under the {', '.join(protocols)} protocol, not the benchmark's own prompt and parser")
    return out


# ---- tables -------------------------------------------------------------------------------------------

def _cell(acc: Accuracy | None) -> str:
    return NOT_AVAILABLE if acc is None or acc.n == 0 else f"{acc.percent:.2f} ± {acc.se_percent:.2f} ({acc.n})"


_SUMMARY_COLUMNS = (
    "source", "method", "model", "tasks", "accuracy", "se", "mean_rating", "lenient_accuracy", "failed", "capped",
    "empty", "judge_failed", "degraded", "pending", "not_run", "cost_usd", "paid_usd", "prompt_tokens",
    "completion_tokens", "calls", "cache_hits", "judge_cost_usd", "judge_calls", "judge_model",
    "correct", "official_accuracy", "official_correct", "official_counted", "official_mean_score",
    "official_success_rate",
)


def summary_rows(report: Report, benchmark: str) -> list[dict[str, Any]]:
    """The summary table of one benchmark, runs first, then the paper's rows (values None where not available)."""
    out: list[dict[str, Any]] = []
    for row in report.rows_for(benchmark):
        s = row.summary
        out.append({
            "source": "run", "method": row.method, "model": row.model, "tasks": s.n,
            "accuracy": round(s.accuracy.percent, 2), "se": round(s.accuracy.se_percent, 2),
            "mean_rating": round(s.rating.mean, 2) if s.rating else None,
            "lenient_accuracy": round(s.lenient.percent, 2) if s.lenient else None,
            "failed": s.outcomes.get(FAILED, 0), "capped": s.outcomes.get(CAPPED, 0), "empty": s.outcomes.get(EMPTY, 0),
            "judge_failed": s.outcomes.get(JUDGE_FAILED, 0) + s.outcomes.get(JUDGE_ERROR, 0),
            "degraded": s.degraded, "pending": s.pending, "not_run": row.not_run,
            "cost_usd": round(method_cost(row.usage), 4), "paid_usd": round(row.usage.cost_usd, 4),
            "prompt_tokens": row.usage.prompt_tokens, "completion_tokens": row.usage.completion_tokens,
            "calls": row.usage.calls, "cache_hits": row.usage.cache_hits,
            "judge_cost_usd": round(row.judge_usage.cost_usd, 4), "judge_calls": row.judge_usage.calls,
            "judge_model": ", ".join(row.judge_models) or None,
            "correct": s.accuracy.correct,
            **_official_columns(s),
        })
    for ref in report.reference.get(benchmark, ()):
        blank = dict.fromkeys(_SUMMARY_COLUMNS)
        blank.update({
            "source": "paper", "method": ref.label, "model": ref.model, "accuracy": ref.accuracy, "se": ref.se,
            "cost_usd": ref.cost_usd, "tasks": ref.n, "correct": ref.correct, "judge_model": ref.judge,
        })
        out.append(blank)
    return out


def _official_columns(summary: Summary) -> dict[str, Any]:
    off = summary.official
    if off is None:
        return {}
    acc, mean_score, rate = off.overall.accuracy, off.overall.mean_score, off.overall.success_rate
    return {
        "official_accuracy": None if acc is None else round(acc, 2),
        "official_correct": off.overall.correct, "official_counted": off.overall.counted,
        "official_mean_score": None if mean_score is None else round(mean_score, 2),
        "official_success_rate": None if rate is None else round(rate, 4),
    }


def category_rows(report: Report, benchmark: str) -> list[dict[str, Any]]:
    """One row per (source, method, model, category, value), the paper's included where available."""
    out: list[dict[str, Any]] = []
    for row in report.rows_for(benchmark):
        for key, values in row.summary.by_category.items():
            for value, acc in values.items():
                out.append({
                    "source": "run", "method": row.method, "model": row.model, "category": key, "value": value,
                    "n": acc.n, "correct": acc.correct, "accuracy": round(acc.percent, 2), "se": round(acc.se_percent, 2),
                })
    for ref in report.reference.get(benchmark, ()):
        for ref_key, ref_values in (ref.categories or {}).items():
            for ref_value, cell in ref_values.items():
                out.append({
                    "source": "paper", "method": ref.label, "model": ref.model, "category": ref_key,
                    "value": ref_value, "n": cell.get("n"), "correct": None, "accuracy": cell.get("accuracy"), "se": cell.get("se"),
                })
    return out


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def fmt(v: Any) -> str:
        return NOT_AVAILABLE if v is None else str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    """The report as Markdown: per benchmark, a summary table and one table per category."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [f"# r3con evaluation report\n\nGenerated {now}. Folders: "
             + ", ".join(sorted({f for r in report.rows for f in r.folders})) + "."]
    for benchmark in report.benchmarks:
        title = _BENCHMARK_TITLES.get(benchmark, benchmark)
        parts.append(f"## {title}")
        parts.append(_judge_header(report, benchmark))
        notes = [f"Metric: {reference_metric(benchmark)}. Accuracy and SE in percent (SE = sqrt(p(1-p)/n)); "
                 "failed, step-capped and empty answers and judge failures count at the worst score. "
                 "Cost is the method's at the price table, calls served from r3con's cache included (paid is "
                 "what this evaluation was billed; tokens and calls are the billed ones); the judge's is shown apart."]
        for reason, count in report.skipped.get(benchmark, {}).items():
            notes.append(f"Skipped {count} tasks: {reason}.")
        parts.append("\n\n".join(notes))
        rows = summary_rows(report, benchmark)
        header = ["source", "method", "model", "tasks", "accuracy", "± SE"]
        extra = []
        if benchmark == "loong":
            extra.append(("mean rating", "mean_rating"))
        if benchmark == "dracula":
            extra.append(("lenient accuracy", "lenient_accuracy"))
        tail = [("failed", "failed"), ("capped", "capped"), ("empty", "empty"), ("judge failed", "judge_failed"),
                ("degraded", "degraded"), ("pending", "pending"), ("not run", "not_run"), ("cost (USD)", "cost_usd"),
                ("paid (USD)", "paid_usd"), ("prompt tokens", "prompt_tokens"),
                ("completion tokens", "completion_tokens"), ("calls", "calls"), ("cache hits", "cache_hits"),
                ("judge cost (USD)", "judge_cost_usd"), ("judge calls", "judge_calls")]
        keys = ["source", "method", "model", "tasks", "accuracy", "se"] + [k for _, k in extra + tail]
        header += [h for h, _ in extra + tail]
        table = []
        for r in rows:
            cells = []
            for k in keys:
                v = r[k]
                if k in ("accuracy", "se", "mean_rating", "lenient_accuracy") and v is not None:
                    v = f"{v:.2f}"
                elif k in ("cost_usd", "paid_usd", "judge_cost_usd") and v is not None:
                    v = f"{v:,.2f}" if r["source"] == "paper" else f"{v:,.4f}"
                elif isinstance(v, int) and k not in ("tasks",):
                    v = f"{v:,}"
                cells.append(v)
            table.append(cells)
        parts.append(_md_table(header, table))
        notes_ref = [f"- paper, {ref.label}: {ref.note}" for ref in report.reference.get(benchmark, ()) if ref.note]
        if notes_ref:
            parts.append("\n".join(notes_ref))
        official = _official_section(report, benchmark)
        if official:
            parts.append(official)
        for key in CATEGORIES.get(benchmark, ()):
            values: list[str] = []
            for row in report.rows_for(benchmark):
                values += [v for v in row.summary.by_category.get(key, {}) if v not in values]
            if not values:
                continue
            cat_table: list[list[Any]] = [
                ["run", row.method, row.model, *(_cell(row.summary.by_category.get(key, {}).get(v)) for v in values)]
                for row in report.rows_for(benchmark)
            ]
            cat_table += [
                ["paper", ref.label, ref.model, *(ref.category(key, v) for v in values)]
                for ref in report.reference.get(benchmark, ())
            ]
            parts.append(f"### By {key}\n\nAccuracy ± SE (tasks).\n\n"
                         + _md_table(["source", "method", "model", *values], cat_table))
    return "\n\n".join(parts) + "\n"


def _judge_header(report: Report, benchmark: str) -> str:
    """Who judged, under which protocol, over which of the paper's tasks; a warning when it is not the paper's setting."""
    judges = report.judges.get(benchmark, ())
    served = sorted({m for r in report.rows_for(benchmark) for m in r.judge_models})
    described = "; ".join(f"{j.get('protocol')} protocol, prompt {j.get('prompt')}" for j in judges) or "not recorded"
    lines = [f"Judge: {', '.join(served) or 'none called yet'} ({described})."]
    warnings = judge_warnings(report, benchmark)
    if warnings:
        lines.append(f"**Not the paper's setting: {'; '.join(warnings)}. Do not quote these numbers beside the "
                     "paper's without saying so.**")
    covered = report.paper_set.get(benchmark)
    if covered:
        missing = "; ".join(f"{n:,} tasks ({why})" for why, n in covered.get("missing", {}).items())
        line = f"Tasks: {covered['here']:,} of the paper's {covered['paper']:,}"
        line += " (chosen by filters)" if covered.get("subset") else (f"; not in the local copy: {missing}" if missing else "")
        lines.append(line + ".")
    return "\n\n".join(lines)


def _official_cell(cell: OfficialCell | None, *, with_mean: bool = True) -> str:
    if cell is None or cell.accuracy is None:
        return NOT_AVAILABLE
    text = f"{cell.accuracy:.2f} ({cell.correct}/{cell.counted})"
    return text + (f", mean {cell.mean_score:.2f}" if with_mean and cell.mean_score is not None else "")


def _official_section(report: Report, benchmark: str) -> str:
    """The benchmark's own counting beside r3con's, both denominators shown, the paper's row with its n;
    then the official breakdown (Loong set x level, CorpusQA domain)."""
    rows = [(r, r.summary.official) for r in report.rows_for(benchmark) if r.summary.official is not None]
    if not rows:
        return ""
    loong = benchmark == "loong"
    header = ["source", "method", "model", "official accuracy (correct/counted)"]
    header += ["mean score", "scoring success rate"] if loong else []
    header += ["answers judged", "left out of the official count", "r3con accuracy ± SE (correct/n)"]
    table: list[list[Any]] = []
    for row, off in rows:
        strict = row.summary.accuracy
        cells: list[Any] = ["run", row.method, row.model, _official_cell(off.overall, with_mean=False)]
        if loong:
            cells += [None if off.overall.mean_score is None else f"{off.overall.mean_score:.2f}",
                      None if off.overall.success_rate is None else f"{off.overall.success_rate:.2%}"]
        left = ", ".join(f"{n} {why}" for why, n in off.left_out.items()) or "none"
        cells += [off.overall.lines, left, f"{strict} ({strict.correct}/{strict.n})"]
        table.append(cells)
    for ref in report.reference.get(benchmark, ()):
        if ref.accuracy is None:
            continue
        counted = f" ({ref.correct}/{ref.n})" if ref.correct is not None and ref.n else ""
        se = f" ± {ref.se:.2f}" if ref.se is not None else ""
        table.append(["paper", ref.label, ref.model, f"{ref.accuracy:.2f}{se}{counted}", *([None, None] if loong else []),
                      ref.n, None, None])
    text = ("### The benchmark's own counting beside r3con's\n\n"
            + ("Official (Loong's src/utils/metric.py): answers whose judge reply holds no score leave both "
               "averages; accuracy is rated 100 of those scored; the success rate is scored of all answers. "
               if loong else
               "Official (CorpusQA's src/eval.py): correct of the answers judged, a reply without a verdict "
               "counted wrong. ")
            + "Tasks whose method failed or was step-capped have no answer upstream and leave the official "
              "count; r3con counts every finished task, failures as wrong, with SE = sqrt(p(1-p)/n). The "
              "paper's rows are as published (judge gpt-5.4-mini with the benchmark's own prompt), with their "
              "count and denominator where known.\n\n"
            + _md_table(header, table))
    key = "set x level" if loong else "domain"
    values: list[str] = []
    for _, off in rows:
        values += [v for v in off.breakdown.get(key, {}) if v not in values]
    if values:
        breakdown = []
        for row, off in rows:
            cells_by = off.breakdown.get(key, {})
            breakdown.append(["run", row.method, row.model, *(_official_cell(cells_by.get(v)) for v in values)])
        text += (f"\n\n#### Official, by {key}\n\nAccuracy (correct/counted)" + (", mean score" if loong else "")
                 + ".\n\n" + _md_table(["source", "method", "model", *values], breakdown))
    return text


def _csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in columns})
    return buffer.getvalue()


def task_row(row: ReportRow, record: TaskRecord) -> dict[str, Any]:
    """One task under one method as a table row: its outcome, verdict, cost, tokens and timing."""
    verdict = record.verdict
    return {
        "benchmark": row.benchmark, "method": row.method, "model": row.model, "task_id": record.task_id,
        "status": record.status, "judged": verdict.status if verdict is not None else None,
        "correct": verdict.correct if verdict is not None else None,
        "rating": verdict.rating if verdict is not None else None,
        "cost_usd": record.usage.cost_usd, "calls": record.usage.calls,
        "prompt_tokens": record.usage.prompt_tokens, "completion_tokens": record.usage.completion_tokens,
        "method_s": record.method_s, "judge_s": record.judge_s, "answer": record.answer, "error": record.error,
        **{f"meta_{k}": v for k, v in record.meta.items() if isinstance(v, str | int | float | bool)},
        "run_dir": record.run_dir,
    }


def write_report(report: Report, out_dir: Path, *, plots: bool = True) -> list[Path]:
    """Write report.md, summary.csv, categories.csv, (with DuckDB) the same as .parquet and each task's
    outcome as tasks.parquet, and (when matplotlib is installed) the PNG plots.

    Returns the paths written. Without matplotlib (the `eval` extra) the plots are left out, never the
    tables: `plots.unavailable()` says so in a line for the caller to print; without DuckDB (the `sql`
    extra) the Parquet files are left out.
    """
    from ..artifacts.tables import write_parquet

    written = []
    written.append(write_atomic(out_dir / "report.md", render_markdown(report)))
    summary = [{"benchmark": b, **r} for b in report.benchmarks for r in summary_rows(report, b)]
    written.append(write_atomic(out_dir / "summary.csv", _csv(summary, ("benchmark", *_SUMMARY_COLUMNS))))
    categories = [{"benchmark": b, **r} for b in report.benchmarks for r in category_rows(report, b)]
    columns = ("benchmark", "source", "method", "model", "category", "value", "n", "correct", "accuracy", "se")
    written.append(write_atomic(out_dir / "categories.csv", _csv(categories, columns)))
    tasks = [task_row(report_row, r) for report_row in report.rows for r in report_row.records]
    for name, rows in (("summary", summary), ("categories", categories), ("tasks", tasks)):
        parquet = write_parquet(out_dir / f"{name}.parquet", rows)
        if parquet is not None:
            written.append(parquet)
    written.append(write_atomic(out_dir / "report.json",
                                json.dumps(report.to_dict(), ensure_ascii=False, indent=1, default=str) + "\n"))
    if plots and unavailable() is None:
        for benchmark in report.benchmarks:
            written.append(plot_pareto(report, benchmark, out_dir / f"{benchmark}_pareto.png"))
            if any(r.summary.by_category for r in report.rows_for(benchmark)):
                written.append(plot_categories(report, benchmark, out_dir / f"{benchmark}_categories.png"))
    return written
