"""readagent: paginate, gist every page, look pages up again for the task, answer.

After Lee et al. (2024, "A Human-Inspired Reading Agent with Gist Memory of Very Long Contexts"):
(1) episode pagination: the documents are cut into pages, here at paragraph breaks by size
(`page_tokens`) rather than at pause points the model chooses; (2) memory gisting: each page is
shortened on its own, without the task; (3) interactive look-up: from the task and the numbered gists
the model names up to `max_lookups` pages to read again ("ReadAgent-P", parallel look-up); (4) the
answer comes from the gists with the chosen pages restored in full. Gists that do not fit the window
are cut fairly; looked-up pages are restored while they fit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Settings
from ..corpus.documents import Document
from ..llm.replies import final_answer_line
from ..prompts.render import render
from ..results import MethodFn, MethodOutcome
from ..tokens import estimate_tokens
from ._common import (
    Chunk,
    budget_for,
    check_options,
    chunk_documents,
    fair_shares,
    head,
    method_run,
)

NAME = "readagent"
DESCRIPTION = "ReadAgent: pages gisted without the task, the model looks pages up again, answers from gists and pages"
GIST = "readagent-gist"
LOOKUP = "readagent-lookup"
ANSWER = "readagent-answer"


@dataclass(frozen=True)
class Options:
    """Parameters of the ReadAgent baseline.

    page_tokens: size of a page.
    gist_max_tokens: output budget of a gist.
    max_lookups: most pages the model may read again.
    lookup_max_tokens, answer_max_tokens: output budgets of the look-up and the answer.
    """

    page_tokens: int = 1024
    gist_max_tokens: int = 256
    max_lookups: int = 5
    lookup_max_tokens: int = 256
    answer_max_tokens: int = 4096


def parse_pages(reply: str, pages: int, limit: int) -> list[int]:
    """Page numbers the reply asks for (after 'look up', else anywhere), valid and unique, at most `limit`."""
    at = reply.lower().rfind("look up")
    text = reply[at:] if at >= 0 else reply
    found = []
    for raw in re.findall(r"\d+", text):
        n = int(raw)
        if 1 <= n <= pages and n not in found:
            found.append(n)
    return found[:limit]


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            size = min(options.page_tokens, budget_for(mr.window, options.gist_max_tokens))
            pages = chunk_documents(documents, size)

            async def gist(page: Chunk) -> str:
                view = {"number": page.index + 1, "doc": page.doc, "title": page.title, "text": page.text}
                return await mr.ask(GIST, render("readagent_gist", page=view), max_tokens=options.gist_max_tokens,
                                    doc=page.doc, part=page.index + 1)

            made = await mr.each(GIST, pages, gist, lambda p: f"{p.doc} (page {p.index + 1})")
            mr.check_failures(GIST, len(pages))
            gists = [g if g is not None else head(p.text, options.gist_max_tokens) for p, g in zip(pages, made, strict=True)]
            budget = budget_for(mr.window, max(options.lookup_max_tokens, options.answer_max_tokens),
                                len(task) // 3, 25 * len(pages))
            caps = fair_shares([estimate_tokens(g) for g in gists], budget)
            shown = [head(g, cap) for g, cap in zip(gists, caps, strict=True)]
            entries = [{"number": p.index + 1, "doc": p.doc, "title": p.title, "gist": g}
                       for p, g in zip(pages, shown, strict=True)]
            reply = await mr.ask(LOOKUP, render("readagent_lookup", gists=entries, task=task,
                                                max_pages=options.max_lookups), max_tokens=options.lookup_max_tokens)
            wanted = parse_pages(reply, len(pages), options.max_lookups)
            left = budget - sum(estimate_tokens(g) for g in shown)
            restored: list[int] = []
            for n in wanted:
                extra = pages[n - 1].tokens - estimate_tokens(shown[n - 1])
                if extra <= left:
                    restored.append(n)
                    left -= extra
            view: list[dict[str, Any]] = [
                {"number": e["number"], "doc": e["doc"], "title": e["title"], "full": e["number"] in restored,
                 "text": pages[e["number"] - 1].text if e["number"] in restored else e["gist"]}
                for e in entries
            ]
            mr.log.update(pages=len(pages), page_tokens=size, lookup_reply=reply, looked_up=wanted, restored=restored,
                          gists=[{"page": e["number"], "doc": e["doc"], "gist": e["gist"]} for e in entries])
            answer = await mr.ask(ANSWER, render("readagent_answer", pages=view, task=task),
                                  max_tokens=options.answer_max_tokens)
            mr.log["reply"] = answer
            return mr.finish(final_answer_line(answer))

    return run
