"""Typer commands: run, show, demo, estimate, servers, sql, fake-llm, and the eval group."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..config import Settings
from ..corpus.documents import load_corpus
from ..corpus.names import shown
from ..display import wrapped
from ..errors import ConfigError, InputError
from ._ended import failed, interrupt_sends_nothing
from ._inputs import summary_line, warn_many_rounds, warn_unknown_variables
from ._local import with_local_server
from ._options import RUN, settings_options
from ._run import run

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


app.command("run")(run)


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
    from ..llm.transport.tokenize import make_counter
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
    from ..llm.discovery.local import find_servers, window_hint
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
from ._mcp_cmd import mcp  # noqa: E402 - `r3con mcp` (cli/_mcp_cmd.py), mounted after the commands above

app.command()(mcp)
