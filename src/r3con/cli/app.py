"""Typer commands: run, show, demo, estimate, servers, sql, fake-llm, and the eval group."""

from __future__ import annotations

import asyncio
import dataclasses
import glob
import json
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from ..artifacts.folder import json_text
from ..config import Settings
from ..corpus.documents import load_corpus
from ..corpus.names import shown
from ..corpus.readers import READABLE
from ..corpus.store import CorpusStore, open_store
from ..display import cached_line, make_progress, path_lines, reuse_line, usage_line, wrapped
from ..errors import ConfigError, InputError
from ._ended import failed, report_line
from ._inputs import report_inputs, summary_line
from ._local import with_local_server
from ._options import RUN, settings_options
from ._question import read_question
from ._warnings import warn_many_rounds, warn_unknown_variables

T = TypeVar("T")

if TYPE_CHECKING:
    from ..results import RunEnd

app = typer.Typer(
    name="r3con", no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
    help="Answer questions whose evidence is scattered across many documents (R3CON).",
)


def _print_version(value: bool) -> None:
    if value:
        from .._version import __version__

        print(f"r3con {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit", is_eager=True,
                                          callback=_print_version)] = False,
) -> None:
    """Answer questions whose evidence is scattered across many documents (R3CON)."""


Exclude = Annotated[list[str] | None, typer.Option("--exclude", help="Leave out files and folders whose name (or path below a given folder) matches GLOB, e.g. '*.log' or 'drafts' (repeatable)", metavar="GLOB")]
IncludeHidden = Annotated[bool, typer.Option("--include-hidden", help="Read hidden files and folders too (run folders, .git, virtualenvs, node_modules stay out)")]


def print_result(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:  # a piece at a time: json.dumps's text, never one string (a large run's summary is tens of MB)
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


@app.command()
@settings_options(*RUN)
def run(
    question: Annotated[str | None, typer.Argument(help="The question to answer; - reads it from standard input, @FILE from a file.", show_default=False)] = None,
    paths: Annotated[list[str] | None, typer.Argument(help=f"Files, folders (recursive) or globs: {READABLE} (.docx .xlsx .epub need r3con\\[office])", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Folder for run folders (default ./r3con-runs)")] = None,
    resume: Annotated[Path | None, typer.Option("--resume", help="Continue the run in RUN_DIR (its question, documents and settings); finished calls come from the cache, and --max-cost counts what RUN_DIR already spent")] = None,
    question_file: Annotated[Path | None, typer.Option("--question-file", help="Read the question from this UTF-8 file")] = None,
    pdf_password: Annotated[str | None, typer.Option("--pdf-password", envvar="R3CON_PDF_PASSWORD", show_envvar=False, help="Password that opens encrypted PDFs (env R3CON_PDF_PASSWORD)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the answer")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr")] = False,
    exclude: Exclude = None,
    include_hidden: IncludeHidden = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 (after writing everything) when an input was skipped, unreadable or degraded")] = False,
    sample: Annotated[str | None, typer.Option("--sample", help="Try the run on N documents of PATHS (or a share, 0.1), chosen by content hash so the same files give the same sample; prints the estimate for all of them beside what the sample cost")] = None,
    flags: dict[str, Any] | None = None,
) -> None:
    """Answer QUESTION from the documents under PATHS (or continue a run with --resume RUN_DIR)."""
    flags = {**(flags or {}), "out_dir": out}
    warn_unknown_variables()
    if question_file is not None and question is not None:  # with --question-file every argument is a path...
        if not _names_input(question):  # ...unless it names nothing: then it was meant as the question
            raise InputError(f"the question is given twice: as the argument {question!r} and with --question-file "
                             f"{shown(question_file)}; give it one way (with --question-file every argument is a document path, "
                             "and this one names no file)")
        paths = [question, *(paths or [])]
        question = None
    question = read_question(question, question_file)
    plan = None
    if sample is not None and resume is not None:
        raise ConfigError("--sample picks the documents of a new run; continue a sample's run with --resume RUN_DIR "
                          "alone")
    if resume is not None:
        from ..pipeline.resume import check_question, check_settings, locate_sources, read_resume

        plan = read_resume(resume)
        question = check_question(plan, question)
        if not paths:
            paths, moved = locate_sources(plan)
            if moved and not quiet:
                print(f"r3con: {moved}", file=sys.stderr)
        check_settings(plan, flags)
        flags = {**plan.settings, **{k: v for k, v in flags.items() if v is not None and v != {}}}
    if not question or not paths:
        raise InputError("Missing argument QUESTION or PATHS: pass the question and the documents, or --resume RUN_DIR")
    settings = Settings.resolve(**flags)
    settings = with_local_server(settings, quiet=quiet)  # unless an endpoint or a pool file is set
    warn_many_rounds(settings.rounds)
    with ExitStack() as closing:
        store = open_store(settings.corpus_store, settings.corpus_dir)
        if store is not None:
            closing.callback(store.close)
        _run_loaded(question, paths, settings, plan, store, resume, exclude=exclude, include_hidden=include_hidden,
                    pdf_password=pdf_password, quiet=quiet, as_json=as_json, strict=strict, sample=sample)


def _run_loaded(question: str, paths: list[str], settings: Settings, plan: Any, store: CorpusStore | None,
                resume: Path | None, *, exclude: list[str] | None, include_hidden: bool, pdf_password: str | None,
                quiet: bool, as_json: bool, strict: bool, sample: str | None = None) -> None:
    """`run`'s work once the settings are resolved: load (through the corpus store), run, print."""
    from ..pipeline.method import run as run_pipeline

    # a resumed folder already holds calls: Ctrl-C while its documents are read names it and how to continue
    with interrupt_sends_nothing(*([interrupted_line(None, resumed=resume)] if resume is not None else [])):
        numbers = {str(d["source"]): int(d["doc"]) for d in plan.documents if "doc" in d} if plan is not None else None
        corpus = load_corpus(paths, exclude=exclude or (), include_hidden=include_hidden, pdf_password=pdf_password,
                             store=store, numbers=numbers)
    everything = corpus.documents
    if sample is not None:  # --sample: the run on part of the folder, the estimate for all of it after
        from ..pipeline.estimate import sample_documents

        corpus = dataclasses.replace(corpus, documents=sample_documents(everything, sample))
    if plan is not None:
        from ..pipeline.resume import carried_inputs, check_documents

        check_documents(plan, corpus.documents)
        corpus = dataclasses.replace(corpus, inputs=carried_inputs(plan, corpus.inputs))
    progress = make_progress(quiet)
    ends: list[RunEnd] = []  # how the run left off, if it raised
    stopped: BaseException | None = None
    try:
        with terminate_as_interrupt() as signals:
            result = run_stoppable(run_pipeline(question, corpus.documents, settings, progress=progress,
                                                run_folder=resume, inputs=corpus.inputs, on_end=ends.append,
                                                store=store, files=corpus.stored), signals)
    except (KeyboardInterrupt, Exception) as exc:
        stopped = exc  # said once the progress display is closed
    finally:
        if progress is not None:
            progress.close()
    end = ends[-1] if ends else None
    if isinstance(stopped, KeyboardInterrupt):
        print(interrupted_line(end, resumed=resume), file=sys.stderr)
        report_line(end, quiet=quiet)
        raise typer.Exit(143 if signal.SIGTERM in signals else 130)
    if stopped is not None:
        raise typer.Exit(failed(stopped, end, quiet=quiet))
    with interrupt_sends_nothing(f"r3con: interrupted; the run had finished: {result.run_dir} holds its answer"):
        _print_run(result, as_json, quiet, strict, settings.max_steps)
        if sample is not None:
            _print_projection(question, everything, corpus.documents, settings, result)


def _print_projection(question: str, everything: Any, sampled: Any, settings: Settings, result: Any) -> None:
    """After a --sample run: what it cost, beside the estimate for the whole folder with the window it used."""
    from ..pipeline.estimate import project

    endpoint = json.loads((Path(result.run_dir) / "manifest.json").read_text(encoding="utf-8"))["endpoint"]
    planned = dataclasses.replace(settings, context_window=settings.context_window or endpoint["context_window"])
    projection = asyncio.run(project(question, everything, sampled, planned, result.usage, endpoint["model"]))
    for line in projection.lines():
        print(wrapped(line), file=sys.stderr)


def _print_run(result: Any, as_json: bool, quiet: bool, strict: bool, max_steps: int) -> None:
    print_result(result.summary(lazy=as_json), as_json)
    if not quiet:  # the closing lines fit 80 columns; the folder and the report on lines of their own
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
    report_inputs(result.inputs, result.run_dir, quiet=quiet, strict=strict)
    if not quiet:
        print(path_lines("run folder", result.run_dir), file=sys.stderr)
    report_line(result, quiet=quiet)


def _names_input(spec: str) -> bool:
    """Whether `spec` names an existing path (a link too, even a broken one) or a glob that matches one."""
    if os.path.lexists(os.path.expanduser(spec)):
        return True
    return glob.has_magic(spec) and bool(glob.glob(os.path.expanduser(spec), recursive=True))


@app.command()
def show(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (r3con-runs/...)", show_default=False)],
    open_it: Annotated[bool, typer.Option("--open", help="Open the report in the web browser")] = False,
) -> None:
    """Write RUN_DIR/report.html again from the run folder, print its path, and open it with --open."""
    from ..corpus.walk import is_run_folder
    from ..report import write_report

    if not run_dir.is_dir() or not is_run_folder(run_dir):
        raise InputError(f"{shown(run_dir)} is not a run folder (no manifest.json written by r3con): show writes "
                         "report.html only into run folders; pass one, e.g. r3con-runs/<run>")
    path = write_report(run_dir)
    print(path)
    if open_it:
        import webbrowser

        if not webbrowser.open(path.resolve().as_uri()):
            print(f"r3con: warning: no web browser found; open {path} yourself", file=sys.stderr)


@contextmanager
def terminate_as_interrupt() -> Iterator[list[int]]:
    """SIGTERM ends a run as Ctrl-C does: the run is cancelled and saves what it did. Yields the
    signals received, so the exit code can say which one (130 for SIGINT, 143 for SIGTERM)."""
    received: list[int] = []
    try:
        previous = signal.signal(signal.SIGTERM, _on_terminate_handler(received))
    except ValueError:  # not the main thread (a library caller's): leave the signals alone
        yield received
        return
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def _on_terminate_handler(received: list[int]) -> Callable[[int, Any], None]:
    """SIGTERM outside the event loop: KeyboardInterrupt (SIGINT may be ignored, so it is not raised)."""
    def on_terminate(signum: int, frame: Any) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    return on_terminate


def run_stoppable(main: Coroutine[Any, Any, T], received: list[int]) -> T:
    """`asyncio.run(main)`, cancelled by SIGTERM as by Ctrl-C: KeyboardInterrupt (the run says where it
    left off through its `on_end`).

    SIGTERM goes straight to the event loop, which cancels `main`. Raising SIGINT instead is not
    enough: a shell without job control (`cmd &` in a script) starts its background jobs with SIGINT
    ignored, and asyncio then does not handle SIGINT at all."""
    async def stoppable() -> T:
        task = asyncio.current_task()

        def on_terminate() -> None:
            received.append(signal.SIGTERM)
            if task is not None:
                task.cancel()

        with suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_terminate)
        return await main

    try:
        return asyncio.run(stoppable())
    except asyncio.CancelledError as exc:
        if signal.SIGTERM not in received:
            raise
        raise KeyboardInterrupt from exc
    finally:
        with suppress(ValueError):  # the loop's handler is gone with the loop: SIGTERM is ours again
            signal.signal(signal.SIGTERM, _on_terminate_handler(received))


@contextmanager
def interrupt_sends_nothing(line: str = "r3con: interrupted before the run began; nothing was sent") -> Iterator[None]:
    """Ctrl-C while documents are read or split (before any call): `line` and exit 130, no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        print(line, file=sys.stderr)
        raise typer.Exit(130) from None


def interrupted_line(end: RunEnd | None, resumed: Path | None = None) -> str:
    """What an interrupted run says: where the run folder is, what it kept, and how to continue (a resumed
    folder is named even when the run had not said where it stopped)."""
    folder = end.run_dir if end is not None else resumed
    if folder is None:
        return "r3con: interrupted before the run began; nothing was sent"
    calls = Path(folder) / "calls.jsonl"
    count = calls.read_bytes().count(b"\n") if calls.is_file() else 0
    return (f"r3con: interrupted; the run folder {folder} keeps what was done ({count} calls in calls.jsonl): "
            f"continue with r3con run --resume {folder}")


@app.command()
def demo(
    out: Annotated[Path | None, typer.Option("--out", help="Folder for run folders (default ./r3con-runs)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the answer")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr")] = False,
) -> None:
    """Run the whole pipeline on a bundled example corpus against the bundled scripted (offline) model."""
    from ..demo import run_demo

    ends: list[RunEnd] = []  # how the run left off, if it raised: the error line names its folder
    try:
        run_demo(out_dir=out, as_json=as_json, quiet=quiet, on_end=ends.append)
    except Exception as exc:
        raise typer.Exit(failed(exc, ends[-1] if ends else None, quiet=quiet)) from exc


@app.command()
@settings_options(*RUN)
def estimate(
    question: Annotated[str, typer.Argument(help="The question the run would answer.")],
    paths: Annotated[list[str], typer.Argument(help="Files, folders (recursive) or globs")],
    note_tokens: Annotated[int, typer.Option("--note-tokens", help="Assumed tokens of one relevance note")] = 150,
    agent_steps: Annotated[int, typer.Option("--agent-steps", help="Assumed steps of the coding agent")] = 4,
    sample: Annotated[int, typer.Option("--sample", help="Measure notes, schema and records on N real relevance and population calls (needs the endpoint), and give a range")] = 0,
    confidence: Annotated[float, typer.Option("--confidence", help="With --sample: the share of runs the range is meant to hold (0.5 to 0.99)")] = 0.9,
    tokenize: Annotated[bool, typer.Option("--tokenize", help="Count tokens with the endpoint's /tokenize (vLLM) instead of estimating")] = False,
    tokenizer: Annotated[Path | None, typer.Option("--tokenizer", help="A Hugging Face tokenizer.json to count with (needs the tokenizers package)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table")] = False,
    exclude: Exclude = None,
    include_hidden: IncludeHidden = False,
    flags: dict[str, Any] | None = None,
) -> None:
    """Predict calls, tokens and USD per stage of a run, without calling the model (unless --sample N); it takes
    the options `run` takes, and plans for the endpoint, window and slots `run` would use."""
    from ..llm.tokenize import make_counter
    from ..pipeline.estimate import Assumptions

    warn_unknown_variables()
    settings = Settings.resolve(**(flags or {}))
    warn_many_rounds(settings.rounds)
    if sample < 0:
        raise ConfigError("--sample must be 0 (assume) or a number of documents to measure on")
    if not 0.5 <= confidence <= 0.99:
        raise ConfigError("--confidence must be between 0.5 and 0.99 (the share of runs the range should hold)")
    # the endpoint `run` would use: the local server found on its usual port when none is named (as run finds it)
    settings = with_local_server(settings, required=bool(sample))
    if tokenize and not (settings.base_url and settings.model):
        raise ConfigError("--tokenize needs the endpoint and model: pass --base-url and --model")
    with interrupt_sends_nothing():
        corpus = load_corpus(paths, exclude=exclude or (), include_hidden=include_hidden)
    counter = make_counter(tokenizer_file=tokenizer, base_url=settings.base_url if tokenize else None,
                           model=settings.model, api_key=settings.api_key)
    assumptions = Assumptions(note_tokens=note_tokens, agent_steps=agent_steps)
    with interrupt_sends_nothing("r3con: interrupted; the estimate was not finished and nothing was written"):
        result, planned = asyncio.run(_estimated(question, corpus.documents, settings, assumptions, counter, sample,
                                                 confidence))
    print(summary_line(corpus.inputs), file=sys.stderr)
    print(wrapped(f"r3con: {_planned_line(planned, settings)}"), file=sys.stderr)
    if as_json:
        print(json.dumps({**result.to_dict(), "endpoint": planned.to_dict() if planned else None,
                          "inputs": corpus.inputs.to_dict()}, ensure_ascii=False))
        return
    print_estimate(result)


async def _estimated(question: str, documents: Any, settings: Settings, assumptions: Any, counter: Any, sample: int,
                     confidence: float) -> tuple[Any, Any]:
    """The estimate (a range with `--sample`) and the endpoint it planned for (None: none named or found). One
    event loop: the endpoint's token counter is bound to it."""
    from ..pipeline.estimate import estimate_range, estimate_run, plan_endpoint
    from ..pipeline.estimate import sample as sample_calls

    planned, measured = None, settings
    try:
        if settings.base_url or settings.pool_file is not None:
            planned = await plan_endpoint(settings)
            measured = dataclasses.replace(settings, model=settings.model or planned.model,
                                           context_window=settings.context_window or planned.context_window,
                                           concurrency=settings.concurrency or planned.concurrency)
        if sample:
            assumptions, window = await sample_calls(question, documents, settings, sample, counter=counter,
                                                     base=assumptions)
            measured = dataclasses.replace(measured, context_window=window)
            return await estimate_range(question, documents, measured, assumptions, counter=counter,
                                        confidence=confidence), planned
        return await estimate_run(question, documents, measured, counter=counter, assumptions=assumptions), planned
    finally:
        close = getattr(counter, "aclose", None)  # the endpoint's counter holds a session
        if close is not None:
            await close()


def _planned_line(planned: Any, settings: Settings) -> str:
    """Which endpoint and window the estimate planned for."""
    from ..config import DEFAULT_CONTEXT_WINDOW

    if planned is not None:
        return str(planned.line())
    return (f"planned for no endpoint (none named, no local server found): window "
            f"{settings.context_window or DEFAULT_CONTEXT_WINDOW:,} tokens "
            f"({'--context-window' if settings.context_window else 'assumed'}); pass --base-url to plan "
            "for a server's own window and slots")


def print_estimate(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"estimate: {result.documents} documents ({result.parts} parts), model {result.model}")
    for column in ("stage", "calls", "input tokens", "of which cached", "output tokens", "USD"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    for s in (*result.stages, result.total):
        cost = "price unknown" if s.cost_usd is None else f"{s.cost_usd:.4f}"
        table.add_row(s.stage, f"{s.calls:,}", f"{s.input_tokens:,}", f"{s.cached_tokens:,}", f"{s.output_tokens:,}", cost)
    console = Console()
    console.print(table)
    if result.range is not None:
        for line in result.range.lines():
            console.print(line, markup=False)
    else:
        console.print("No range: the figures rest on assumed sizes; --sample N measures them and gives a range.",
                      markup=False)
    console.print("Assumptions:")
    for line in result.assumptions:
        console.print(f"- {line}", markup=False)


@app.command()
def sql(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (or an evaluation's report folder)", show_default=False)],
    query: Annotated[str, typer.Argument(help='SQL, e.g. "SELECT * FROM people WHERE unverified"', show_default=False)],
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV instead of a table")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of rows instead of a table")] = False,
) -> None:
    """Run an SQL query (DuckDB) over RUN_DIR's records: one table per record type."""
    from ..artifacts.tables import query as run_query
    from ..artifacts.tables import require_duckdb

    require_duckdb("r3con sql")
    columns, rows = run_query(run_dir, query)
    if as_json:
        print(json.dumps([dict(zip(columns, row, strict=True)) for row in rows], ensure_ascii=False, default=str))
    elif as_csv:
        import csv

        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(*columns, caption=f"{len(rows):,} rows")
        for row in rows:  # as Text: a record's "[b]" is its own text, not console markup
            table.add_row(*(Text("" if v is None else str(v)) for v in row))
        Console().print(table)


@app.command()
def servers(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON list instead of a table")] = False,
) -> None:
    """List the local servers on the usual ports (Ollama, llama.cpp, vLLM, SGLang, LM Studio) with their windows."""
    from ..llm.local import find_servers, window_hint
    from ._local import local_ports, servers_table

    ports = local_ports()
    found = asyncio.run(find_servers(ports))
    rows = servers_table(found)
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return
    if not found:
        looked = ", ".join(f"{port} ({kind})" for port, kind in ports)
        print(f"no local server answers on ports {looked}", file=sys.stderr)
        raise typer.Exit(1)
    for server in found:
        print(f"{server.kind} at {server.base_url}")
        for row in (r for r in rows if r["base_url"] == server.base_url):
            window = f"{row['window']:,} tokens ({row['window_source']})" if row["window"] else "window not reported"
            marks = ", ".join(m for m, on in (("loaded", row["loaded"]), ("used without --model", row["chosen"])) if on)
            print(f"  {row['model']}: {window}{f' [{marks}]' if marks else ''}")
        hint = next((h for m in server.models if (h := window_hint(server, m))), "")
        if hint:
            print(f"  ({hint})")


@app.command("fake-llm")
def fake_llm(
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (0 picks a free one)")] = 0,
    faults: Annotated[str | None, typer.Option("--faults", help="Fault spec: NAME=RATE for 429 500 hang drop truncate malformed empty reasoning, and seed= max= retry_after= hang_s= delay= only=STAGE+STAGE; invent=SHARE (records given a passage not in the document) and reword=SHARE (passages copied carelessly), both logged; e.g. 429=0.2,500=0.1,malformed=0.2,seed=7")] = None,
    max_model_len: Annotated[int, typer.Option("--max-model-len", help="Context window it reports")] = 32768,
    model: Annotated[str, typer.Option("--model", help="Model id it serves")] = "r3con-scripted",
    log: Annotated[Path | None, typer.Option("--log", help="Append every call as a JSON line to this file")] = None,
) -> None:
    """Start the scripted OpenAI-compatible server (prints PORT=<n> first)."""
    from ..testing import FaultPlan, serve

    plan = FaultPlan.parse(faults) if faults else None
    serve(port=port, faults=plan, max_model_len=max_model_len, model=model, log_path=log)


from .eval_cmd import eval_app  # noqa: E402 - the group is mounted after the top-level commands

app.add_typer(eval_app, name="eval")
from . import _mcp_cmd  # noqa: E402, F401 - adds `r3con mcp` to the app
