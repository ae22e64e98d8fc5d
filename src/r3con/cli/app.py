"""Typer commands: run, demo, fake-llm, and the eval group."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..config import Settings
from ..corpus import load_documents
from ..errors import ConfigError
from ._progress import make_progress, usage_line

app = typer.Typer(
    name="r3con", no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
    help="Answer questions whose evidence is scattered across many documents (R3CON).",
)

BaseUrl = Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (env R3CON_BASE_URL, OPENAI_BASE_URL)")]
ApiKey = Annotated[str | None, typer.Option("--api-key", help="API key (env R3CON_API_KEY, OPENAI_API_KEY)")]
Model = Annotated[str | None, typer.Option("--model", help="Model id; default: the endpoint's first model (env R3CON_MODEL)")]
StageModel = Annotated[list[str] | None, typer.Option("--stage-model", help="STAGE=MODEL, e.g. relevance=qwen3.5-4b (repeatable)")]


def parse_stage_models(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values or []:
        stage, sep, model = value.partition("=")
        if not sep or not stage or not model:
            raise ConfigError(f"--stage-model {value!r} must look like STAGE=MODEL, e.g. relevance=qwen3.5-4b")
        out[stage.strip()] = model.strip()
    return out


def print_result(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        print(summary["answer"])


@app.command()
def run(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    paths: Annotated[list[str], typer.Argument(help="Files, folders (recursive) or globs: .txt .md .json .csv .html .pdf")],
    model: Model = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    stage_model: StageModel = None,
    rounds: Annotated[int | None, typer.Option("--rounds", help="Relevance rounds (0 skips the stage; default 2)")] = None,
    reasoning: Annotated[str | None, typer.Option("--reasoning", help="code (the coding agent, default) or direct")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Agent step bound (default 10)")] = None,
    context_window: Annotated[int | None, typer.Option("--context-window", help="Tokens; default: from /v1/models")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Requests in flight (default 8)")] = None,
    layout: Annotated[str | None, typer.Option("--layout", help="cache (document first, default) or paper")] = None,
    sandbox: Annotated[str | None, typer.Option("--sandbox", help="best (default) or strict: refuse to run without every isolation layer")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Folder for run folders (default ./r3con-runs)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the answer")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr")] = False,
) -> None:
    """Answer QUESTION from the documents under PATHS."""
    from ..pipeline import run as run_pipeline

    settings = Settings.resolve(
        base_url=base_url, api_key=api_key, model=model, stage_models=parse_stage_models(stage_model),
        rounds=rounds, reasoning=reasoning, max_steps=max_steps, context_window=context_window,
        concurrency=concurrency, layout=layout, sandbox_mode=sandbox, out_dir=out,
    )
    settings.require_endpoint()
    documents = load_documents(paths)
    progress = make_progress(quiet)
    try:
        result = asyncio.run(run_pipeline(question, documents, settings, progress=progress))
    finally:
        if progress is not None:
            progress.close()
    print_result(result.summary(), as_json)
    if not quiet:
        print(f"usage: {usage_line(result.usage)}", file=sys.stderr)
        print(f"run folder: {result.run_dir}", file=sys.stderr)


@app.command()
def demo(
    out: Annotated[Path | None, typer.Option("--out", help="Folder for run folders (default ./r3con-runs)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the answer")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr")] = False,
) -> None:
    """Run the whole pipeline on a bundled example corpus against the bundled scripted (offline) model."""
    from ..demo import run_demo

    run_demo(out_dir=out, as_json=as_json, quiet=quiet)


@app.command("fake-llm")
def fake_llm(
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (0 picks a free one)")] = 0,
    faults: Annotated[str | None, typer.Option("--faults", help="Fault spec, e.g. 429=0.2,500=0.1,seed=7")] = None,
    max_model_len: Annotated[int, typer.Option("--max-model-len", help="Context window it reports")] = 32768,
    model: Annotated[str, typer.Option("--model", help="Model id it serves")] = "r3con-scripted",
    log: Annotated[Path | None, typer.Option("--log", help="Append every call as a JSON line to this file")] = None,
) -> None:
    """Start the scripted OpenAI-compatible server (prints PORT=<n> first)."""
    from ..testing import FaultPlan, serve

    plan = FaultPlan.parse(faults) if faults else None
    serve(port=port, faults=plan, max_model_len=max_model_len, model=model, log_path=log)


try:
    from .eval_cmd import eval_app
except ImportError:  # the eval harness is optional while it is being built
    pass
else:
    app.add_typer(eval_app, name="eval")
