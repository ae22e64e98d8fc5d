"""`r3con demo`: the whole pipeline on a bundled corpus, against the bundled scripted offline model.

The corpus needs a join no single document holds: recalls (bulletin) x deliveries (two Rotterdam logs)
x a supplier's change of name (a memo), with a distractor plant.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Settings
from ..corpus.documents import load_documents

if TYPE_CHECKING:
    from ..pipeline.method import RunResult
    from ..results import RunEnd

NOTICE = ("r3con demo: the answers below come from a scripted offline model (r3con.testing), "
          "not a real LLM; they show the pipeline and its artifacts, not answer quality.")


def corpus_dir() -> Path:
    return Path(str(resources.files("r3con.demo").joinpath("corpus")))


def question() -> str:
    return resources.files("r3con.demo").joinpath("question.txt").read_text(encoding="utf-8").strip()


def run_demo(out_dir: Path | None = None, as_json: bool = False, quiet: bool = False,
             on_end: Callable[[RunEnd], None] | None = None) -> None:
    """Start the scripted server, run the pipeline on the bundled corpus, print the answer and the run folder;
    `on_end` is told how a run that raised left off (as `r3con.run`'s)."""
    from ..display import make_progress, path_lines, usage_line, wrapped
    from ..runs import start
    from ..testing import FakeLLMServer

    print(NOTICE, file=sys.stderr)
    task = question()
    documents = load_documents([corpus_dir()])

    async def main(settings: Settings) -> RunResult:
        run = await start(task, documents, settings)
        if progress is not None:
            run.listen(progress)
        try:
            return await run.until_done()
        except BaseException:
            if run.end is not None and on_end is not None:
                on_end(run.end)
            raise

    with FakeLLMServer(port=0) as server:
        progress = make_progress(quiet)
        try:
            result = asyncio.run(main(Settings.resolve(env={}, base_url=server.base_url, api_key="scripted",
                                                       out_dir=out_dir)))
        finally:
            if progress is not None:
                progress.close()
    if as_json:
        summary = result.summary()
        summary["notice"] = NOTICE
        print(json.dumps(summary, ensure_ascii=False))
        return
    print(wrapped(f"Question: {task}"))
    print(wrapped(f"Documents: {len(documents)} (in {corpus_dir()})"))
    print(wrapped(f"Answer (scripted model): {result.answer}"))
    print(wrapped(f"Usage: {usage_line(result.usage)}"))
    print(path_lines("Run folder", result.run_dir))
    if result.report is not None:
        print(path_lines("Report (open it in a browser)", result.report))
