"""`ask`: a run from start to answer in one blocking call, for scripts and notebooks.

Inside a running event loop (Jupyter's), `asyncio.run` cannot be called: the run then goes on in a thread
with a loop of its own, and the caller's thread waits for it."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import Settings
from ..corpus.documents import Document
from ..llm import Wrap
from ..llm.types import LLM
from ..pipeline.method import RunResult
from ._run import start

__all__ = ["ask"]


def ask(question: str, paths: Sequence[str | Path | Document] | str | Path, *, llm: LLM | None = None,
        layers: Sequence[Wrap] = (), settings: Settings | None = None, **fields: Any) -> RunResult:
    """Answer `question` over `paths` (files, folders, globs, or `Document`s) and return the `RunResult`.

    `fields` are settings (`Settings.resolve`'s names: `base_url`, `model`, `rounds`, `reuse`, `max_cost_usd`,
    ...) over the environment's; or pass `settings`. Works in a plain script and inside a running event loop
    (a notebook cell); in async code, `await r3con.start(...)` and `await run.result()` instead."""
    if settings is not None and fields:
        raise TypeError("pass either settings or setting fields, not both")
    resolved = settings or Settings.resolve(**fields)
    inputs = [paths] if isinstance(paths, str | Path) else list(paths)

    async def main() -> RunResult:
        run = await start(question, inputs, resolved, llm=llm, layers=layers)
        return await run.until_done()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="r3con-ask") as pool:
        return pool.submit(asyncio.run, main()).result()
