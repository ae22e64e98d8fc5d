"""The MCP tools' work, apart from the protocol: each takes plain arguments and returns JSON-safe data, or
raises an `R3conError` whose one line the server hands to the client as the tool's error."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import otel
from ..config import Settings
from ..errors import ConfigError, InputError

Report = Callable[[float, float | None, str], Awaitable[None]]  # progress, total, message


def settings_for(base: Mapping[str, Any], **fields: Any) -> Settings:
    """The server's settings (its flags, the environment) with a tool call's own over them."""
    return Settings.resolve(**{**base, **{k: v for k, v in fields.items() if v is not None}})


def _paths(paths: Sequence[str]) -> list[str]:
    if isinstance(paths, str):
        paths = [paths]
    listed = [str(p) for p in paths if str(p).strip()]
    if not listed:
        raise InputError("no paths given: pass the files, folders or globs to read, as absolute paths")
    return listed


async def estimate(question: str, paths: Sequence[str], settings: Settings) -> dict[str, Any]:
    """The plan of a run of `question` over `paths`: documents, parts, and calls, tokens and USD per stage."""
    from ..corpus.documents import load_corpus
    from ..llm.discovery.local import local_ports, use_local_server
    from ..pipeline.planned import plan_for

    if not question.strip():
        raise InputError("the question is empty")
    corpus = await asyncio.to_thread(load_corpus, _paths(paths))
    if not corpus.documents:
        raise InputError("no documents found under the paths given; pass files, folders or globs that exist")
    settings = use_local_server(settings, local_ports(), required=False)[0]
    plan = await plan_for(question, corpus.documents, settings)  # what `r3con estimate --json` prints
    return {**plan.to_dict(), "inputs": corpus.inputs.to_dict()}


async def ask(question: str, paths: Sequence[str], settings: Settings, report: Report | None = None,
              traced: bool = False) -> dict[str, Any]:
    """Run r3con on `question` over `paths` and return the answer, its citations and the run folder; traced
    when `traced` (`--otel`) or the standard OTEL_* environment asks (`r3con.otel`).

    Each unit of work the run finishes is reported (`report`); if the caller is cancelled (the client cancels
    the tool call), so is the run, and this waits until its folder is left resumable."""
    from ..runs import start

    run = await start(question, _paths(paths), settings)
    if otel.wanted(flag=traced):  # --otel, or the OTEL_* environment the client started the server with
        otel.trace(run)  # ends by itself with the run's events, its spans flushed
    follower = asyncio.ensure_future(_follow(run, report)) if report is not None else None
    try:
        result = await _until_done(run)
    finally:
        if follower is not None:
            follower.cancel()
    summary = result.summary()
    return {"answer": result.answer, "citations": citations(summary.get("evidence") or []),
            "run_dir": str(result.run_dir), "usage": _usage(summary.get("usage") or {}),
            "degraded": summary.get("degraded") or [], "warnings": list(summary.get("warnings") or [])}


async def _until_done(run: Any) -> Any:
    """The run's result; cancelled, the run is cancelled and waited for (shielded: anyio cancels every await in
    a cancelled scope again, and the wait must end for the folder to be left as a resume expects)."""
    import anyio

    try:
        return await run.result()
    except (asyncio.CancelledError, anyio.get_cancelled_exc_class()):
        with anyio.CancelScope(shield=True):
            run.cancel()
            await run.wait()
        raise


async def _follow(run: Any, report: Report) -> None:
    """Each event that says work was done, as a progress notification: a count that only grows, and a line."""
    count = 0
    async for event in run.events():
        kind = event.kind
        if kind == "progress":
            count += 1
            await report(count, None, f"{event.stage}: {event.done} of {event.total}")
        elif kind == "stage" and event.state == "started":
            count += 1
            await report(count, None, f"{event.stage} started")
        elif kind in ("message", "warning"):
            count += 1
            await report(count, None, str(event.text))


def citations(evidence: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What the answer cites: each record's id, its document (number and title) and the passage it rests on."""
    return [{"record": e.get("id"), "document": e.get("title"), "doc": e.get("doc"), "passage": e.get("passage"),
             "match": e.get("match")} for e in evidence if e.get("kind", "record") == "record"]


def _usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    return {k: usage.get(k) for k in ("calls", "prompt_tokens", "completion_tokens", "cost_usd", "cache_hits")}


def out_dir(base: Mapping[str, Any]) -> Path:
    """Where the server's runs go (and `runs` looks): --out, else R3CON_OUT_DIR, else ./r3con-runs."""
    try:
        return Path(settings_for(base).out_dir)
    except ConfigError:  # no endpoint configured is no reason not to list the runs
        return Path(base.get("out_dir") or "r3con-runs")
