"""The evaluation harness: benchmarks' tasks, LLM judges, scoring, resumable runs and reports.

    tasks = load_benchmark("loong", Path("data/loong"), TaskFilter(sets=(2, 3, 4), limit=20))
    result = await run_eval(tasks, Settings.resolve(), Path("evals/loong"), EvalOptions(methods=["r3con"]))
    write_report(build_report([Path("evals/loong")]), Path("evals/report"))
"""

from __future__ import annotations

from .benchmarks import Coverage, load_benchmark, paper_coverage
from .corpusqa import extract_final_answer, load_corpusqa
from .dracula import load_dracula
from .judges import (
    JudgeChoice,
    JudgePrompt,
    JudgeSpec,
    OfficialPrompt,
    Verdict,
    builtin_prompt,
    choose_judge,
    judge_answer,
    judge_spec,
    official_prompt,
    prompt_from_file,
)
from .loong import PAPER_SETS, DownloadError, download, download_loong, load_loong
from .records import TaskRecord
from .report import Report, ReportRow, build_report, load_reference, render_markdown, write_report
from .runner import EvalOptions, EvalResult, MethodRunner, run_eval
from .scoring import (
    Accuracy,
    OfficialCell,
    OfficialScore,
    Summary,
    TaskScore,
    accuracy,
    official_score,
    summarize,
    summarize_records,
    task_score,
)
from .tasks import (
    BENCHMARKS,
    EvalTask,
    TaskFilter,
    TaskSet,
    default_data_dir,
    resolve_data_dir,
)

__all__ = [
    "BENCHMARKS",
    "PAPER_SETS",
    "Accuracy",
    "Coverage",
    "DownloadError",
    "EvalOptions",
    "EvalResult",
    "EvalTask",
    "JudgeChoice",
    "JudgePrompt",
    "JudgeSpec",
    "MethodRunner",
    "OfficialCell",
    "OfficialPrompt",
    "OfficialScore",
    "Report",
    "ReportRow",
    "Summary",
    "TaskFilter",
    "TaskRecord",
    "TaskScore",
    "TaskSet",
    "Verdict",
    "accuracy",
    "build_report",
    "builtin_prompt",
    "choose_judge",
    "default_data_dir",
    "download",
    "download_loong",
    "extract_final_answer",
    "judge_answer",
    "judge_spec",
    "load_benchmark",
    "load_corpusqa",
    "load_dracula",
    "load_loong",
    "load_reference",
    "official_prompt",
    "official_score",
    "paper_coverage",
    "prompt_from_file",
    "render_markdown",
    "resolve_data_dir",
    "run_eval",
    "summarize",
    "summarize_records",
    "task_score",
    "write_report",
]
