"""`r3con estimate`: calls, tokens and USD a run would spend, as a range with what it assumes (registered on the
app by cli/app.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..config import DEFAULT_CONTEXT_WINDOW, Settings
from ..corpus.documents import load_corpus
from ..display import wrapped
from ..errors import ConfigError
from ..pipeline.planned import endpoint_plan, plan_of
from ..runs import ReadOptions
from ._ended import interrupt_sends_nothing
from ._inputs import summary_line, warn_many_rounds, warn_unknown_variables
from ._local import with_local_server
from ._options import READ_OPTIONS, RUN, option_group, settings_options

_ASSUMED = {
    "note_tokens": (Annotated[int, typer.Option("--note-tokens", help="Assumed tokens of one relevance note")], 150),
    "agent_steps": (Annotated[int, typer.Option("--agent-steps", help="Assumed steps of the coding agent")], 4),
}
_COUNTING = {
    "tokenize": (Annotated[bool | None, typer.Option("--tokenize/--no-tokenize", help="Count tokens with the endpoint's /tokenize (llama.cpp, vLLM, SGLang), or with r3con's own estimate (default: the endpoint's when one is named or found, the estimate when it has no /tokenize)")], None),
    "tokenizer": (Annotated[Path | None, typer.Option("--tokenizer", help="A Hugging Face tokenizer.json to count with (needs the tokenizers package)")], None),
}


def _assumed(note_tokens: int, agent_steps: int) -> Any:
    from ..pipeline.estimate import Assumptions

    return Assumptions(note_tokens=note_tokens, agent_steps=agent_steps)


@settings_options(*RUN)
@option_group("read", lambda exclude, include_hidden: ReadOptions(tuple(exclude or ()), include_hidden), READ_OPTIONS)
@option_group("counting", lambda tokenize, tokenizer: (tokenizer, tokenize), _COUNTING)
@option_group("assumptions", _assumed, _ASSUMED)
def estimate(
    question: Annotated[str, typer.Argument(help="The question the run would answer.")],
    paths: Annotated[list[str], typer.Argument(help="Files, folders (recursive) or globs")],
    sample: Annotated[int, typer.Option("--sample", help="Measure notes, schema and records on N real relevance and population calls (needs the endpoint), and give a range")] = 0,
    confidence: Annotated[float, typer.Option("--confidence", help="With --sample: the share of runs the range is meant to hold (0.5 to 0.99)")] = 0.9,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table")] = False,
    *, assumptions: Any, counting: tuple[Path | None, bool | None], read: ReadOptions,
    flags: dict[str, Any] | None = None,
) -> None:
    """Predict calls, tokens and USD per stage of a run, with a range and what it assumes, without calling the
    model (--sample N: measured on N documents' real calls, a narrower range); it takes the options `run` takes,
    and plans for the endpoint, window, slots and tokenizer `run` would use."""
    warn_unknown_variables()
    settings = Settings.resolve(**(flags or {}))
    warn_many_rounds(settings.rounds)
    if sample < 0:
        raise ConfigError("--sample must be 0 (assume) or a number of documents to measure on")
    if not 0.5 <= confidence <= 0.99:
        raise ConfigError("--confidence must be between 0.5 and 0.99 (the share of runs the range should hold)")
    # the endpoint `run` would use: the local server found on its usual port when none is named (as run finds it)
    settings = with_local_server(settings, required=bool(sample))
    tokenizer, tokenize = counting
    if tokenize and not settings.base_url:
        raise ConfigError("--tokenize needs the endpoint: pass --base-url (or start a local server)")
    with interrupt_sends_nothing():
        corpus = load_corpus(paths, exclude=read.exclude, include_hidden=read.include_hidden)
    with interrupt_sends_nothing("r3con: interrupted; the estimate was not finished and nothing was written"):
        result, planned = asyncio.run(_estimated(question, corpus.documents, settings, assumptions,
                                                 (tokenizer, tokenize is not False), sample, confidence))
    print(summary_line(corpus.inputs), file=sys.stderr)
    print(wrapped(f"r3con: {_planned_line(planned, settings)}"), file=sys.stderr)
    if as_json:  # the plan a run of these settings starts with (`run.plan`), and the account of the inputs
        window = settings.context_window or (planned.context_window if planned else DEFAULT_CONTEXT_WINDOW)
        plan = plan_of(result, settings, planned, window)
        print(json.dumps({**plan.to_dict(), "inputs": corpus.inputs.to_dict()}, ensure_ascii=False))
        return
    print_estimate(result)


async def _estimated(question: str, documents: Any, settings: Settings, assumptions: Any,
                     counting: tuple[Path | None, bool], sample: int, confidence: float) -> tuple[Any, Any]:
    """The estimate and its range (narrowed by `--sample`) and the endpoint it planned for (None: none named or
    found). `counting`: the tokenizer file, and whether to ask the endpoint's /tokenize. One event loop: the
    endpoint's token counter is bound to it."""
    from ..llm.transport.tokenize import make_counter
    from ..pipeline.estimate import estimate_range, estimate_run
    from ..pipeline.estimate import sample as sample_calls

    planned, measured = await endpoint_plan(settings)
    tokenizer, ask = counting
    counter = make_counter(tokenizer_file=tokenizer, base_url=planned.base_url if planned and ask else None,
                           model=measured.model, api_key=settings.api_key)
    try:
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
    console.print("Assumptions:")
    for line in result.assumptions:
        console.print(f"- {line}", markup=False)
