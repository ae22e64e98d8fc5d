"""The MCP server: r3con's tools, described for an agent, on the official SDK's `MCPServer`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from .._version import __version__
from ..errors import R3conError
from . import _folders, _tools

INSTRUCTIONS = (
    "r3con answers questions whose evidence is scattered across many documents (a folder of reports, filings, "
    "papers): it reads every document, keeps relevance notes over rounds, extracts structured records and has a "
    "coding agent answer over them, citing records. Use `estimate` first for a large folder (it costs nothing); "
    "`ask` runs it (minutes, and the model's cost); `records` and `passage` read a finished run's records and "
    "cited passages; `runs` lists recent runs.")


class Citation(BaseModel):
    record: str | None = Field(description="The record's id (R<doc>.<part>.<n>): pass it to `passage`")
    document: str | None = Field(description="The title of the record's document")
    doc: int | None = Field(description="The document's number in the run")
    passage: str | None = Field(description="The document's text the record rests on")
    match: str | None = Field(description="How the passage was found in the document: exact, fuzzy, or none")


class Answer(BaseModel):
    answer: str = Field(description="r3con's answer to the question")
    citations: list[Citation] = Field(description="The records the answer cites, each with its passage")
    run_dir: str = Field(description="The run folder: pass it to `records` and `passage`")
    usage: dict[str, Any] = Field(description="Calls, tokens and USD the run spent")
    degraded: list[Any] = Field(description="Documents that failed a stage (the answer was made without them)")
    warnings: list[str] = Field(description="What the run noticed that may affect the answer")


def _failed(exc: Exception) -> ToolError:
    """r3con's one-line message as the tool's error; anything else is our bug, said so in one line too."""
    if isinstance(exc, R3conError):
        return ToolError(str(exc))
    return ToolError(f"internal error (a bug in r3con: please report it): {type(exc).__name__}: {exc}")


def build(flags: Mapping[str, Any] | None = None, traced: bool = False) -> MCPServer:
    """The server; `flags` are settings (as `r3con run`'s options make them) every run starts from; `traced`:
    every run `ask` starts is traced (`r3con.otel`), as the OTEL_* environment would ask."""
    base = dict(flags or {})
    server = MCPServer("r3con", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    _run_tools(server, base, traced)
    _folder_tools(server, base)
    return server


def _run_tools(server: MCPServer, base: dict[str, Any], traced: bool) -> None:
    """`ask` and `estimate`: a run, and its plan."""

    @server.tool(description=(
        "Answer a question from the documents under the given paths with r3con, and return the answer, the "
        "records it cites (each with its document and passage) and the run folder. Takes minutes and spends "
        "model calls (see `estimate`); sends progress as it goes; cancelling it stops the run, whose folder "
        "can be resumed later (`r3con run --resume RUN_DIR`)."))
    async def ask(
        question: Annotated[str, Field(description="The question, in plain language")],
        paths: Annotated[list[str], Field(description="Absolute paths of files, folders (read recursively) or globs")],
        ctx: Context,
        rounds: Annotated[int | None, Field(description="Relevance rounds (default 2; 0 skips them)", ge=0, le=10)] = None,
        reuse: Annotated[str | None, Field(description="Reuse an earlier run of the same question: off, exact or "
                                                       "approximate (default: the server's setting)")] = None,
        max_cost: Annotated[float | None, Field(description="Stop before the run would spend more than this many USD",
                                                gt=0)] = None,
    ) -> Answer:
        async def report(progress: float, total: float | None, message: str) -> None:
            await ctx.report_progress(progress, total, message)

        try:
            settings = _tools.settings_for(base, rounds=rounds, reuse=reuse, max_cost_usd=max_cost)
            return Answer(**await _tools.ask(question, paths, settings, report, traced))
        except Exception as exc:
            raise _failed(exc) from exc

    @server.tool(description=(
        "Predict what `ask` would do for a question over the given paths, without calling the model: documents, "
        "parts, and calls, input and output tokens and USD per stage (relevance, schema, populate, reason)."))
    async def estimate(
        question: Annotated[str, Field(description="The question `ask` would answer")],
        paths: Annotated[list[str], Field(description="Absolute paths of files, folders (read recursively) or globs")],
    ) -> dict[str, Any]:
        try:
            return await _tools.estimate(question, paths, _tools.settings_for(base))
        except Exception as exc:
            raise _failed(exc) from exc



def _folder_tools(server: MCPServer, base: dict[str, Any]) -> None:
    """`runs`, `records` and `passage`: what run folders hold."""

    @server.tool(description="List the most recent r3con runs (newest first): run folder, question, status "
                             "(finished, failed, cancelled, running, interrupted), cost in USD and calls.")
    def runs(limit: Annotated[int, Field(description="How many runs to list", ge=1, le=200)] = 20) -> dict[str, Any]:
        try:
            return {"runs": _folders.runs(_tools.out_dir(base), limit)}
        except Exception as exc:
            raise _failed(exc) from exc

    @server.tool(description=(
        "Read-only SQL (DuckDB) over a run's records: one table per record type, each row a record with its "
        "fields and _id (the record id), _doc, _title, passage, match and unverified. `SELECT table_name FROM information_schema.tables` lists the "
        f"tables. At most {_folders.ROWS} rows come back; no file can be read or written."))
    def records(
        run: Annotated[str, Field(description="A run folder (run_dir from `ask` or `runs`)")],
        sql: Annotated[str, Field(description="One SQL query, e.g. SELECT * FROM suppliers WHERE amount > 100")],
        limit: Annotated[int, Field(description="Rows to return at most", ge=1, le=_folders.ROWS)] = _folders.ROWS,
    ) -> dict[str, Any]:
        try:
            return _folders.records(Path(run), sql, limit)
        except Exception as exc:
            raise _failed(exc) from exc

    @server.tool(description=(
        "The passage a record rests on, with its document's title and source and the text just before and "
        "after it: to check a citation of `ask`'s answer."))
    def passage(
        run: Annotated[str, Field(description="A run folder (run_dir from `ask` or `runs`)")],
        record: Annotated[str, Field(description="A record id from the answer's citations, e.g. R12.1.3")],
    ) -> dict[str, Any]:
        try:
            return _folders.passage(Path(run), record)
        except Exception as exc:
            raise _failed(exc) from exc
