"""`r3con run`: parse, let the library prepare and begin the run, show its events, print what it answered."""

from __future__ import annotations

import asyncio
import glob
import os
import signal
import sys
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..artifacts.folder import json_text
from ..config import Settings
from ..corpus.names import shown as shown_name
from ..corpus.readers import READABLE
from ..display import Followed, cached_line, make_progress, path_lines, reuse_line, usage_line, wrapped
from ..errors import ConfigError, InputError
from ..runs import Prepared, ReadOptions, Run, begin, prepare, prepare_resume
from ._ended import (
    failed,
    interrupt_sends_nothing,
    interrupted_line,
    report_line,
    run_stoppable,
    terminate_as_interrupt,
)
from ._inputs import read_question, report_inputs, warn_many_rounds, warn_unknown_variables
from ._local import with_local_server
from ._options import PDF_PASSWORD, READ_OPTIONS, RUN, SHOWN_OPTIONS, Shown, option_group, settings_options

if TYPE_CHECKING:
    from ..pipeline.method import RunResult


@settings_options(*RUN)
@option_group("shown", Shown, SHOWN_OPTIONS)
@option_group("read", lambda exclude, include_hidden, pdf_password: ReadOptions(
    tuple(exclude or ()), include_hidden, pdf_password), {**READ_OPTIONS, **PDF_PASSWORD})
def run(
    question: Annotated[str | None, typer.Argument(help="The question to answer; - reads it from standard input, @FILE from a file.", show_default=False)] = None,
    paths: Annotated[list[str] | None, typer.Argument(help=f"Files, folders (recursive) or globs: {READABLE} (.docx .xlsx .epub need r3con\\[office])", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Folder for run folders (default ./r3con-runs)")] = None,
    resume: Annotated[Path | None, typer.Option("--resume", help="Continue the run in RUN_DIR (its question, documents and settings); finished calls come from the cache, and --max-cost counts what RUN_DIR already spent")] = None,
    question_file: Annotated[Path | None, typer.Option("--question-file", help="Read the question from this UTF-8 file")] = None,
    sample: Annotated[str | None, typer.Option("--sample", help="Try the run on N documents of PATHS (or a share, 0.1), chosen by content hash so the same files give the same sample; prints the estimate for all of them beside what the sample cost")] = None,
    *, read: ReadOptions, shown: Shown, flags: dict[str, Any] | None = None,
) -> None:
    """Answer QUESTION from the documents under PATHS (or continue a run with --resume RUN_DIR)."""
    flags = {**(flags or {}), "out_dir": out}
    warn_unknown_variables()
    if question_file is not None and question is not None:  # with --question-file every argument is a path...
        if not _names_input(question):  # ...unless it names nothing: then it was meant as the question
            raise InputError(f"the question is given twice: as the argument {question!r} and with --question-file "
                             f"{shown_name(question_file)}; give it one way (with --question-file every argument is a document path, "
                             "and this one names no file)")
        paths, question = [question, *(paths or [])], None
    question = read_question(question, question_file)
    if sample is not None and resume is not None:
        raise ConfigError("--sample picks the documents of a new run; continue a sample's run with --resume RUN_DIR "
                          "alone")
    if resume is None and question is None:
        raise InputError("Missing argument QUESTION: pass the question and the documents, or --resume RUN_DIR")
    with interrupt_sends_nothing(*([interrupted_line(None, resumed=resume)] if resume is not None else [])):
        if resume is not None:
            prepared = prepare_resume(resume, question=question, paths=paths, flags=flags, read=read)
        else:
            prepared = prepare(question, paths or [], Settings.resolve(**flags), read=read, sample=sample)
    try:
        for line in prepared.notices if not shown.quiet else ():
            print(f"r3con: {line}", file=sys.stderr)
        settings = with_local_server(prepared.settings, quiet=shown.quiet)  # after the question and paths are checked
        warn_many_rounds(settings.rounds)
    except BaseException:
        prepared.close()
        raise
    _run_prepared(prepared.with_settings(settings), shown)


def _run_prepared(prepared: Prepared, shown: Shown) -> None:
    """Begin the run, show its progress (and trace it), and print its answer (or how it ended)."""
    traced = _tracing(shown)
    progress = make_progress(shown.quiet)
    held: list[Run] = []
    stopped: BaseException | None = None
    try:
        with terminate_as_interrupt() as signals:
            result = run_stoppable(_drive(prepared, progress, held, traced), signals)
    except (KeyboardInterrupt, Exception) as exc:
        stopped = exc  # said once the progress display is closed
    finally:
        if progress is not None:
            progress.close()
    end = held[0].end if held else None
    if isinstance(stopped, KeyboardInterrupt):
        print(interrupted_line(end, resumed=prepared.run_folder), file=sys.stderr)
        report_line(end, quiet=shown.quiet)
        raise typer.Exit(143 if signal.SIGTERM in signals else 130)
    if stopped is not None:
        raise typer.Exit(failed(stopped, end, quiet=shown.quiet))
    with interrupt_sends_nothing(f"r3con: interrupted; the run had finished: {result.run_dir} holds its answer"):
        _print_run(result, shown, prepared.settings.max_steps)
        if prepared.sampled:
            _print_projection(prepared, held[0], result)


async def _drive(prepared: Prepared, progress: Followed | None, held: list[Run], traced: bool) -> RunResult:
    run = await begin(prepared)
    held.append(run)
    if progress is not None:
        run.listen(progress)
    tracing = _trace(run) if traced else None
    try:
        return await run.until_done()
    finally:
        if tracing is not None:  # its spans flushed, however the run ended; a tracer that fails costs the run nothing
            with suppress(Exception):
                await tracing


def _tracing(shown: Shown) -> bool:
    """Whether the run is traced (`--otel`, or an OTLP endpoint in the environment). Asked with `--otel` and
    OpenTelemetry missing, the command stops before any work; set only in the environment (for other tools,
    perhaps), a warning says the run goes on untraced."""
    from .. import otel

    if not otel.wanted(flag=shown.otel):
        return False
    try:
        otel.require()
    except ConfigError as exc:
        if shown.otel:
            raise
        print(wrapped(f"r3con: warning: {exc}; this run is not traced"), file=sys.stderr)
        return False
    return True


def _trace(run: Run) -> asyncio.Task[None] | None:
    from .. import otel

    try:
        return otel.trace(run)
    except ConfigError as exc:  # the exporter could not be made from the OTEL_* settings: the run goes on
        print(wrapped(f"r3con: warning: {exc}; this run is not traced"), file=sys.stderr)
        return None


def _print_projection(prepared: Prepared, run: Run, result: RunResult) -> None:
    """After a --sample run: what it cost, beside the estimate for the whole folder with the window it used."""
    from ..pipeline.estimate import project

    plan = run.plan
    settings = prepared.settings
    if plan is not None and plan.endpoint is not None:
        settings = Settings.resolve(**{**settings.public(), "api_key": settings.api_key,
                                       "context_window": settings.context_window or plan.window})
    projection = asyncio.run(project(prepared.question, prepared.everything, prepared.corpus.documents, settings,
                                     result.usage, result.model))
    for line in projection.lines():
        print(wrapped(line), file=sys.stderr)


def print_result(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:  # a piece at a time: json.dumps's text, never one string (a large run's summary grows with the corpus)
        sys.stdout.writelines(json_text(summary))
        sys.stdout.write("\n")
        return
    print(summary["answer"])
    for line in evidence_lines(summary.get("evidence") or [], summary.get("unknown_citations") or [],
                               unsupported=summary.get("unsupported_numbers") or []):
        print(line)


def evidence_lines(evidence: list[dict[str, Any]], unknown: list[str], limit: int = 8, width: int = 100,
                   unsupported: list[str] | None = None) -> list[str]:
    """The answer's evidence in a few lines: id, document title, the passage shortened, what differs or is
    ungrounded; then the answer's numbers that nothing it cites states."""
    if not evidence and not unknown and not unsupported:
        return []
    lines = ["", "Evidence:"]
    for item in evidence[:limit]:
        head = f"  [{item['id']}] {item['title']} (document {item['doc']})"
        passage = " ".join(str(item.get("passage") or "").split())
        if item["kind"] == "document" or not passage:
            lines.append(head + (": no passage given" if item["kind"] == "record" else ""))
            continue
        short = passage if len(passage) <= width else passage[: width - 1].rstrip() + "…"
        flag = "" if item.get("match") != "none" else "  (not found in the document)"
        if item.get("match") == "mismatch":
            flag = "  (differs from the document: " + "; ".join(
                f"document says \u201c{d['document']}\u201d, record says \u201c{d['record']}\u201d"
                for d in item.get("differences") or []) + ")"
        if item.get("ungrounded"):
            flag += f"  (values in neither passage nor document: {', '.join(item['ungrounded'])})"
        lines.append(f"{head}: \u201c{short}\u201d{flag}")
    if len(evidence) > limit:
        lines.append(f"  ... and {len(evidence) - limit} more (see result.json)")
    if unknown:
        lines.append(f"  cited but unknown: {', '.join(unknown[:10])}")
    if unsupported:
        lines.append(f"  numbers in the answer that nothing cited states: {', '.join(unsupported[:20])}")
    return lines


def _print_run(result: RunResult, shown: Shown, max_steps: int) -> None:
    print_result(result.summary(lazy=shown.as_json), shown.as_json)
    if not shown.quiet:  # the closing lines fit 80 columns; the folder and the report on lines of their own
        print(wrapped(f"usage: {usage_line(result.usage)}"), file=sys.stderr)
        print(wrapped(f"prefix cache: {cached_line(result.by_stage)}"), file=sys.stderr)
        if result.reuse and result.reuse.get("previous_run"):
            print(wrapped(f"reuse: {reuse_line(result.reuse)}"), file=sys.stderr)
        if result.evidence_stats is not None:
            print(wrapped(f"evidence: {result.evidence_stats.line()}"), file=sys.stderr)
    for used in result.fallbacks:  # what failed and how the run went on, even with --quiet
        print(wrapped(f"warning: {used['stage']} failed ({used['failed']}); {used['fallback']}"), file=sys.stderr)
    for line in result.warnings:
        print(wrapped(f"warning: {line}"), file=sys.stderr)
    if result.capped and not any(used["stage"] == "reason" for used in result.fallbacks):
        print(wrapped(f"warning: reason stopped at --max-steps {max_steps} before the agent finished; the answer "
                      "is its last word (raise --max-steps)"), file=sys.stderr)
    report_inputs(result.inputs, result.run_dir, quiet=shown.quiet, strict=shown.strict)
    if not shown.quiet:
        print(path_lines("run folder", result.run_dir), file=sys.stderr)
    report_line(result, quiet=shown.quiet)


def _names_input(spec: str) -> bool:
    """Whether `spec` names an existing path (a link too, even a broken one) or a glob that matches one."""
    if os.path.lexists(os.path.expanduser(spec)):
        return True
    return glob.has_magic(spec) and bool(glob.glob(os.path.expanduser(spec), recursive=True))
