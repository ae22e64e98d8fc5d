"""The options `r3con run`, `r3con estimate` and `r3con eval run` share, defined once.

Each shared option sets one or more `Settings` fields; `settings_options(*names)` adds the named ones to a
command after its own parameters and hands the command the `Settings` overrides they make, as `flags`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from ..config import endpoint_flags, parse_stage_models


@dataclass(frozen=True)
class Shared:
    """One shared option: its type and typer's `Option`, its default, and the settings it makes."""

    annotation: Any
    settings: Callable[[Any], dict[str, Any]]
    default: Any = None


def _set(name: str) -> Callable[[Any], dict[str, Any]]:
    return lambda value: {name: value}


def _endpoint(_: Any) -> dict[str, Any]:  # --base-url, --pool and --routing-header make their settings together
    return {}


OPTIONS: dict[str, Shared] = {
    "model": Shared(Annotated[str | None, typer.Option("--model", help="Model id; default: the local server's only or only loaded model, else the endpoint's first (env R3CON_MODEL)")], _set("model")),
    "base_url": Shared(Annotated[list[str] | None, typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (env R3CON_BASE_URL, OPENAI_BASE_URL; default: the local server on a usual port, see r3con servers); repeat it for a pool of replicas (env R3CON_BASE_URLS)")], _endpoint),
    "pool": Shared(Annotated[Path | None, typer.Option("--pool", help="TOML or JSON pool file: \\[\\[endpoint]] tables with url, key (or key_env), model, weight, concurrency (env R3CON_POOL_FILE); see docs/scale.md")], _endpoint),
    "routing_header": Shared(Annotated[list[str] | None, typer.Option("--routing-header", help="Header that carries each document's routing key to a router (repeatable; default X-Session-ID, X-Correlation-ID, X-SMG-Routing-Key, X-Dynamo-Session-ID; 'none' sends none)")], _endpoint),
    "api_key": Shared(Annotated[str | None, typer.Option("--api-key", help="API key (env R3CON_API_KEY, OPENAI_API_KEY)")], _set("api_key")),
    "stage_model": Shared(Annotated[list[str] | None, typer.Option("--stage-model", help="STAGE=MODEL, e.g. relevance=qwen3.5-4b (repeatable)")], lambda v: {"stage_models": parse_stage_models(v)}),
    "rounds": Shared(Annotated[int | None, typer.Option("--rounds", help="Relevance rounds (0 skips the stage; default 2)")], _set("rounds")),
    "reasoning": Shared(Annotated[str | None, typer.Option("--reasoning", help="code (the coding agent, default) or direct")], _set("reasoning")),
    "max_steps": Shared(Annotated[int | None, typer.Option("--max-steps", help="Agent step bound (default 10)")], _set("max_steps")),
    "context_window": Shared(Annotated[int | None, typer.Option("--context-window", help="Tokens one request may take; default: what the endpoint serves (llama.cpp's /props, vLLM's max_model_len, Ollama's num_ctx, ...)")], _set("context_window")),
    "concurrency": Shared(Annotated[int | None, typer.Option("--concurrency", help="Requests in flight (default: the server's slots, else 8; per endpoint of a pool)")], _set("concurrency")),
    "layout": Shared(Annotated[str | None, typer.Option("--layout", help="cache (document first, default) or paper")], _set("layout")),
    "notes_budget": Shared(Annotated[int | None, typer.Option("--notes-budget", help="Tokens the other documents' notes may take in a call; beyond it the most relevant go in full, the rest as an index (0: all in full, as the paper; default: what the window leaves)")], _set("notes_budget_tokens")),
    "cache_breakpoints": Shared(Annotated[str | None, typer.Option("--cache-breakpoints", help="Anthropic-style cache_control marks after the document: auto (default: on for Anthropic models), on, off")], _set("cache_breakpoints")),
    "embedding_model": Shared(Annotated[str | None, typer.Option("--embedding-model", help="Model of the endpoint's /v1/embeddings to rank notes (and for rag and raptor); env R3CON_EMBEDDING_MODEL; default: BM25 only")], _set("embedding_model")),
    "max_cost": Shared(Annotated[float | None, typer.Option("--max-cost", help="Stop cleanly before the spend (USD, from the price table) would pass this; --resume RUN_DIR (or rerunning an evaluation) with a higher cap continues and pays only the rest")], _set("max_cost_usd")),
    "batch": Shared(Annotated[bool | None, typer.Option("--batch/--no-batch", help="Send relevance rounds and population through the endpoint's Batch API (/v1/files, /v1/batches): cheaper, slower")], _set("batch")),
    "prices": Shared(Annotated[Path | None, typer.Option("--prices", help='JSON price table {"model": {"input": .., "output": .., "cached_input": ..}} in USD per million tokens, on top of the maintained one')], _set("prices_file")),
    "sandbox": Shared(Annotated[str | None, typer.Option("--sandbox", help="best (default) or strict: refuse to run without every isolation layer")], _set("sandbox_mode")),
    "cache": Shared(Annotated[Path | None, typer.Option("--cache", help="LLM cache file (default $XDG_CACHE_HOME/r3con/llm.sqlite; env R3CON_CACHE_PATH)")], _set("cache_path")),
    "no_cache": Shared(Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the LLM cache (nor the reuse record beside it)")], lambda v: {"cache": False if v else None}, False),
    "corpus_dir": Shared(Annotated[Path | None, typer.Option("--corpus-dir", help="Corpus store folder: files' texts, parts, token counts and embeddings kept by content, so a second run reads only changed files (default: corpus/ beside the LLM cache; env R3CON_CORPUS_DIR)")], _set("corpus_dir")),
    "no_corpus_store": Shared(Annotated[bool, typer.Option("--no-corpus-store", help="Read every file afresh and keep nothing in the corpus store")], lambda v: {"corpus_store": False if v else None}, False),
    "log_calls": Shared(Annotated[str | None, typer.Option("--log-calls", help="What calls.jsonl keeps: compact (default: every reply, one full request per prompt template and every failed one), full (every request), meta (tokens, cost, timing only)")], _set("log_calls")),
    "retries": Shared(Annotated[int | None, typer.Option("--retries", help="Retries per call on 429, 5xx, timeouts, dropped connections (default 6)")], _set("retries")),
    "rpm": Shared(Annotated[int | None, typer.Option("--rpm", help="Requests per minute to the endpoint (default: no limit)")], _set("rpm")),
    "tpm": Shared(Annotated[int | None, typer.Option("--tpm", help="Estimated tokens per minute to the endpoint (default: no limit)")], _set("tpm")),
    "timeout": Shared(Annotated[float | None, typer.Option("--timeout", help="Seconds one request may take (default 600)")], _set("request_timeout_s")),
    "part_tokens": Shared(Annotated[int | None, typer.Option("--part-tokens", help="Tokens one document part may take; longer documents are split (default: what the window leaves)")], _set("part_tokens")),
    "max_failed_share": Shared(Annotated[float | None, typer.Option("--max-failed-share", help="Share of documents (0 to 1) that may fail in a stage before the run stops (default 0.5)")], _set("max_failed_share")),
    "unverified": Shared(Annotated[str | None, typer.Option("--unverified", help="Records whose passage is not in their document: reask (once, then keep them flagged; default), keep (flagged), drop (listed in dropped_records.json)")], _set("unverified")),
    "reuse": Shared(Annotated[str | None, typer.Option("--reuse", help="What to take from earlier runs of the question (recorded beside the LLM cache): exact (default: replies to identical requests; a fresh run's result), approximate (also skip reads no new note ranks among, populate only changed final notes, keep the schema), off")], _set("reuse")),
    "engine": Shared(Annotated[str | None, typer.Option("--engine", help="Where the per-document calls run: local (this process, default) or ray (Ray workers, each with r3con's own retries and output checks; needs r3con\\[ray]), e.g. r3con run Q docs/ --engine ray --pool pool.toml")], _set("engine")),
    "ray_address": Shared(Annotated[str | None, typer.Option("--ray-address", help="With --engine ray: the Ray cluster to join (default: RAY_ADDRESS, else a new local one)")], _set("ray_address")),
    "new_schema": Shared(Annotated[bool, typer.Option("--new-schema", help="With --reuse approximate: propose a new schema instead of keeping the earlier run's")], lambda v: {"new_schema": v or None}, False),
}

RUN = ("model", "base_url", "pool", "routing_header", "api_key", "stage_model", "rounds", "reasoning", "max_steps",
       "context_window", "concurrency", "layout", "notes_budget", "cache_breakpoints", "embedding_model", "max_cost",
       "batch", "prices", "sandbox", "cache", "no_cache", "corpus_dir", "no_corpus_store", "log_calls", "retries",
       "rpm", "tpm", "timeout", "part_tokens", "max_failed_share", "unverified", "reuse", "new_schema", "engine",
       "ray_address")
"""What `r3con run` takes: every shared option."""


def settings_flags(given: dict[str, Any]) -> dict[str, Any]:
    """The `Settings` overrides the shared options `given` (name -> value) make."""
    endpoint = {name: given.pop(name) for name in ("base_url", "pool", "routing_header") if name in given}
    out: dict[str, Any] = endpoint_flags(endpoint.get("base_url"), endpoint.get("pool"),
                                         endpoint.get("routing_header")) if endpoint else {}
    for name, value in given.items():
        out.update(OPTIONS[name].settings(value))
    return out


def settings_options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command that takes the shared options `names` after its own parameters; it gets the `Settings`
    overrides they make as its `flags` parameter."""
    unknown = [n for n in names if n not in OPTIONS]
    if unknown:
        raise TypeError(f"no shared option {unknown[0]!r}")

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "flags"]
        added = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=OPTIONS[n].default,
                                   annotation=OPTIONS[n].annotation) for n in names]

        @functools.wraps(command)
        def with_options(**kwargs: Any) -> Any:
            given = {n: kwargs.pop(n) for n in names}
            return command(**kwargs, flags=settings_flags(given))

        with_options.__signature__ = inspect.Signature([*own, *added])  # type: ignore[attr-defined]
        with_options.__annotations__ = {p.name: p.annotation for p in (*own, *added)}
        return with_options

    return wrap


def option_group(param: str, make: Callable[..., Any],
                 options: dict[str, tuple[Any, Any]]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command that takes `options` (name -> (annotation, default)) after its own parameters and gets one
    value for them all as its `param`: `make(**given)`. So a command's own signature names a few things
    (the question, the paths, how to read files, what to print), not every flag."""
    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != param]
        added = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
                 for n, (annotation, default) in options.items()]

        @functools.wraps(command)
        def with_group(**kwargs: Any) -> Any:
            given = {n: kwargs.pop(n) for n in options}
            return command(**kwargs, **{param: make(**given)})

        with_group.__signature__ = inspect.Signature([*own, *added])  # type: ignore[attr-defined]
        with_group.__annotations__ = {p.name: p.annotation for p in (*own, *added)}
        return with_group

    return wrap


READ_OPTIONS: dict[str, tuple[Any, Any]] = {
    "exclude": (Annotated[list[str] | None, typer.Option("--exclude", help="Leave out files and folders whose name (or path below a given folder) matches GLOB, e.g. '*.log' or 'drafts' (repeatable)", metavar="GLOB")], None),
    "include_hidden": (Annotated[bool, typer.Option("--include-hidden", help="Read hidden files and folders too (run folders, .git, virtualenvs, node_modules stay out)")], False),
}
"""How files are read (`runs.ReadOptions`), for `run` and `estimate`; `run` adds the PDF password."""

PDF_PASSWORD: dict[str, tuple[Any, Any]] = {
    "pdf_password": (Annotated[str | None, typer.Option("--pdf-password", envvar="R3CON_PDF_PASSWORD", show_envvar=False, help="Password that opens encrypted PDFs (env R3CON_PDF_PASSWORD)")], None),
}

SHOWN_OPTIONS: dict[str, tuple[Any, Any]] = {
    "as_json": (Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the answer")], False),
    "quiet": (Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr")], False),
    "strict": (Annotated[bool, typer.Option("--strict", help="Exit 1 (after writing everything) when an input was skipped, unreadable or degraded")], False),
    "otel": (Annotated[bool, typer.Option("--otel", help="Send the run's spans to an OpenTelemetry collector as the OTEL_* variables say (on by itself when OTEL_EXPORTER_OTLP_ENDPOINT is set; needs r3con\\[otel]; docs/tracing.md)")], False),
}
"""What `run` reports, and where (`Shown`)."""


@dataclass(frozen=True)
class Shown:
    """What a command reports, and where: one JSON object or the answer; progress or not; exit 1 for a degraded
    input; spans to an OpenTelemetry collector."""

    as_json: bool = False
    quiet: bool = False
    strict: bool = False
    otel: bool = False

