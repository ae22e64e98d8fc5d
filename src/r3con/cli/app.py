"""Typer commands: run, show, demo, estimate, servers, sql, fake-llm, and the eval group."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..corpus.names import shown
from ..errors import InputError
from ._ended import failed
from ._estimate import estimate
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


app.command()(estimate)


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
from ._app_cmd import app_command  # noqa: E402 - `r3con app`, the browser app, in its own module

app.command("app")(app_command)
from ._mcp_cmd import mcp  # noqa: E402 - `r3con mcp` (cli/_mcp_cmd.py), mounted after the commands above

app.command()(mcp)
