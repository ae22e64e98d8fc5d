"""What every baseline shares: the run folder and client, one-call helpers, chunking, fair truncation.

A baseline runs inside `method_run(...)`, which opens the same LLM stack as R3CON (limits,
accounting, call log) on the run folder, and `finish(...)` writes answer.txt, usage.json,
transcript.json and result.json and returns the `MethodOutcome` the eval harness records.
"""

from __future__ import annotations

import asyncio
import sys
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from .._version import __version__
from ..artifacts.folder import RunDir
from ..config import Settings
from ..corpus.documents import Document, cut_point, split_documents, split_text
from ..errors import ConfigError, InputError, R3conError
from ..llm import LLMStack, build_llm
from ..llm.replies import reply_text
from ..llm.types import ChatRequest, Message
from ..prompts.render import Rendered
from ..results import Failure, MethodOutcome
from ..stages.fanout import check_failed_share, fan_out
from ..tokens import estimate_tokens, longest_prefix_within

T = TypeVar("T")
R = TypeVar("R")

PROMPT_OVERHEAD = 600
"""Tokens reserved for a prompt's instructions, tags and the task, beside the text it carries."""


@dataclass
class MethodRun:
    """One baseline's run: its client (`llm`), folder (`dir`) and transcript (`log`, written at the end)."""

    method: str
    task: str
    settings: Settings
    llm: LLMStack
    dir: RunDir
    log: dict[str, Any] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    @property
    def window(self) -> int:
        return self.llm.endpoint.context_window

    async def ask(self, stage: str, prompt: Rendered, *, max_tokens: int, system: str | None = None,
                  doc: int | None = None, part: int | None = None, round: int | None = None,
                  mode: str | None = None) -> str:
        """One completion for `prompt` (a user message, after `system` if given); the reply's text."""
        messages = ((Message("system", system),) if system else ()) + (Message("user", prompt.text),)
        completion = await self.llm.complete(ChatRequest(
            messages=messages, stage=stage, doc=doc, part=part, round=round, mode=mode, max_tokens=max_tokens,
            temperature=self.settings.temperature, prompt_name=prompt.name, prompt_hash=prompt.hash,
        ))
        return reply_text(completion)

    async def each(self, stage: str, items: Sequence[T], fn: Callable[[T], Awaitable[R]],
                   label: Callable[[T], str]) -> list[R | None]:
        """Run `fn` on every item at once (the client bounds concurrency); an item's own provider or
        output failure becomes a Failure record and None, and the run goes on without it."""
        done = await fan_out(stage, items, fn, key=label)
        self.failures.extend(r for r in done if isinstance(r, Failure))
        return [None if isinstance(r, Failure) else r for r in done]

    def check_failures(self, stage: str, total: int) -> None:
        """Raise RunFailed when more than --max-failed-share of `total` items failed in `stage`."""
        check_failed_share(stage, self.failures, total, self.settings.max_failed_share, noun="items")

    def finish(self, answer: str, *, capped: bool = False) -> MethodOutcome:
        """Write the answer, usage and transcript; the outcome the harness records."""
        by_stage = self.llm.ledger.by_stage()
        total = self.llm.ledger.total()
        self.dir.write_text("answer.txt", answer + "\n")
        self.dir.write_json("transcript.json", {"method": self.method, "capped": capped, **self.log})
        _write_usage(self)
        usage = total.to_dict()
        usage["by_stage"] = {k: v.to_dict() for k, v in by_stage.items()}
        self.dir.write_json("result.json", {
            "answer": answer, "method": self.method, "run_dir": str(self.dir.path), "capped": capped,
            "degraded": [f.to_dict() for f in self.failures], "usage": usage,
        })
        return MethodOutcome(answer=answer, usage=total, by_stage=MappingProxyType(by_stage), capped=capped,
                             degraded=tuple(self.failures), run_dir=self.dir.path, model=self.llm.endpoint.model)


def _write_usage(run: MethodRun) -> None:
    total = run.llm.ledger.total().to_dict()
    total["by_stage"] = {k: v.to_dict() for k, v in run.llm.ledger.by_stage().items()}
    run.dir.write_json("usage.json", total)


def check_options(options: Any) -> None:
    """Raise ConfigError for a numeric option that is not positive (every size and bound must be)."""
    for f in fields(options):
        value = getattr(options, f.name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value <= 0:
            raise ConfigError(f"{type(options).__module__.rsplit('.', 1)[-1]}.Options.{f.name} must be positive, "
                              f"not {value!r}")


def _options_json(options: Any) -> Any:
    return asdict(options) if is_dataclass(options) and not isinstance(options, type) else options


@asynccontextmanager
async def method_run(method: str, task: str, documents: Sequence[Document], settings: Settings, run_dir: Path,
                     options: Any) -> AsyncIterator[MethodRun]:
    """Open the run folder (under `run_dir`) and the LLM stack; on an r3con error, record it and re-raise."""
    if not task.strip():
        raise InputError("the question is empty; pass the question as the first argument")
    if not documents:
        raise InputError("no documents given; pass files, folders or globs")
    folder = RunDir.create(run_dir, task)
    async with build_llm(settings, calls_log=folder.calls_path) as stack:
        run = MethodRun(method=method, task=task, settings=settings, llm=stack, dir=folder)
        folder.write_json("manifest.json", {
            "task": task, "method": method, "options": _options_json(options), "r3con_version": __version__,
            "python": sys.version.split()[0], "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "endpoint": {"base_url": stack.endpoint.base_url, "model": stack.endpoint.model,
                         "context_window": stack.endpoint.context_window},
            "settings": settings.public(),
            "documents": [{"doc": d.number, "title": d.title, "chars": len(d.text),
                           "tokens_estimate": estimate_tokens(d.text)} for d in documents],
        })
        try:
            yield run
        except BaseException as exc:  # what ended it (a bug's traceback too), and the usage so far; never masks exc
            record: dict[str, Any] = {"method": method, "error": f"{type(exc).__name__}: {exc}", "transcript": run.log}
            if not isinstance(exc, R3conError | asyncio.CancelledError | KeyboardInterrupt):
                record["traceback"] = "".join(traceback.format_exception(exc))
            with suppress(OSError):
                folder.write_json("error.json", record)
                _write_usage(run)
            raise


# ---- text budgets ---------------------------------------------------------------------------------------

KEEP_MOST = (0.8, 0.8, 0.5)  # a break in the last fifth, or a space in the second half: a cut keeps most of its budget


def head(text: str, max_tokens: int) -> str:
    """The start of `text` within `max_tokens`, cut at a paragraph, sentence or word break where possible."""
    if max_tokens <= 0:
        return ""
    n = longest_prefix_within(text, max_tokens)
    if n >= len(text):
        return text
    return text[:cut_point(text, n, KEEP_MOST)]


def pieces(text: str, max_tokens: int) -> list[str]:
    """`text` cut into consecutive pieces of at most `max_tokens` each, at breaks where possible."""
    return [p for p in split_text(text, max_tokens, KEEP_MOST) if p.strip()] or [text]


@dataclass(frozen=True)
class Chunk:
    """A piece of one document: its document's number and title, its index in the collection, its text."""

    index: int
    doc: int
    title: str
    text: str
    tokens: int


def chunk_documents(documents: Sequence[Document], max_tokens: int) -> list[Chunk]:
    """Every document cut into chunks of at most `max_tokens`, in corpus order."""
    chunks: list[Chunk] = []
    for doc in documents:
        for text in pieces(doc.text, max_tokens):
            chunks.append(Chunk(index=len(chunks), doc=doc.number, title=doc.title, text=text,
                                tokens=estimate_tokens(text)))
    return chunks


def fair_shares(sizes: Sequence[int], budget: int) -> list[int]:
    """Per-item caps that fit `budget` in total: items below the common cap keep their size, the
    longer ones are all cut to the same cap (water-filling)."""
    if sum(sizes) <= budget:
        return list(sizes)
    caps = [0] * len(sizes)
    remaining = max(0, budget)
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    for position, i in enumerate(order):
        share = remaining // (len(order) - position)
        caps[i] = min(sizes[i], share)
        remaining -= caps[i]
    return caps


def fit_documents(documents: Sequence[Document], budget: int, policy: str) -> tuple[list[Document], list[dict[str, Any]]]:
    """The documents cut to fit `budget` tokens in total, and what was kept of each.

    `fair`: every document keeps its start, the shorter ones whole, the longer ones cut to a common
    cap (water-filling). `head`: documents in corpus order while they fit; the first that does not is
    cut, the rest are dropped.
    """
    sizes = [estimate_tokens(d.text) for d in documents]
    if policy == "fair":
        caps = fair_shares(sizes, budget)
    elif policy == "head":
        caps, left = [], budget
        for size in sizes:
            caps.append(max(0, min(size, left)))
            left -= caps[-1]
    else:
        raise ValueError(f"unknown truncation policy {policy!r}")
    kept: list[Document] = []
    report = []
    for doc, size, cap in zip(documents, sizes, caps, strict=True):
        text = doc.text if cap >= size else head(doc.text, cap)
        if text.strip():
            kept.append(Document(number=doc.number, title=doc.title, text=text, source=doc.source,
                                 part=doc.part, parts=doc.parts))
        report.append({"doc": doc.number, "tokens": size, "kept_tokens": estimate_tokens(text) if text else 0,
                       "truncated": cap < size})
    return kept, report


def budget_for(window: int, *reserved: int) -> int:
    """Tokens left in `window` for text after the reserved output and prompt tokens (at least 256)."""
    return max(256, window - sum(reserved) - PROMPT_OVERHEAD)


def describe(documents: Sequence[Document]) -> list[Mapping[str, Any]]:
    """The documents as the JSON-compatible dicts bound in a sandbox: number, title, text."""
    return [{"number": d.number, "title": d.title, "text": d.text} for d in documents]


def split_to_parts(documents: Sequence[Document], max_tokens: int) -> list[Document]:
    """Every document longer than `max_tokens` as numbered parts (same number, part 1..n), cut by `pieces`."""
    return list(split_documents(documents, max_tokens, split=pieces))
