"""structrag: route the task to a structure type, structure each document, answer from the structures.

After Li et al. (2024, "StructRAG: Boosting Knowledge Intensive Reasoning of LLMs via Inference-time
Hybrid Information Structurization"): a hybrid structure router picks the knowledge structure that
suits the task (here `table`, `graph` or `chunks`, the types the brief names; the paper also has
algorithm and catalogue), a scattered-knowledge structurizer rewrites each document independently
into that structure, and a structured-knowledge utilizer decomposes the task into sub-questions and
answers from the structures. The paper trains its router with DPO; here the same model routes by
prompt. A document that fails to structure is left out (recorded as degraded); structures that do
not fit the window are cut fairly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..corpus.documents import Document
from ..llm.replies import final_answer_line, reply_text
from ..llm.types import ChatRequest
from ..prompts.render import render
from ..results import MethodFn, MethodOutcome
from ..stages.messages import document_messages
from ..stages.plan import Placement
from ..tokens import estimate_tokens
from ._common import (
    budget_for,
    check_options,
    fair_shares,
    head,
    method_run,
    split_to_parts,
)

NAME = "structrag"
DESCRIPTION = "StructRAG: a router picks table, graph or chunks; each document is structured alone; a utilizer answers"
ROUTER = "structrag-router"
STRUCTURIZE = "structrag-structurize"
UTILIZE = "structrag-utilize"
TYPES = ("table", "graph", "chunks")
_PURPOSES = {
    "table": "rows and columns of entities and their attributes, suited to statistics, comparison and aggregation "
             "of numbers across documents",
    "graph": "entity-relation-entity triples, suited to tracing relationships and chains of reasoning across documents",
    "chunks": "the relevant passages quoted as they are, suited to locating specific facts and detailed descriptions",
}


@dataclass(frozen=True)
class Options:
    """Parameters of the StructRAG baseline.

    structures: the structure types the router may choose from (a subset of table, graph, chunks).
    default_structure: used when the router's reply names none of them.
    router_max_tokens, structure_max_tokens, answer_max_tokens: output budgets of the three stages.
    max_titles: document titles shown to the router.
    """

    structures: tuple[str, ...] = TYPES
    default_structure: str = "chunks"
    router_max_tokens: int = 256
    structure_max_tokens: int = 2048
    answer_max_tokens: int = 4096
    max_titles: int = 200


def parse_route(reply: str, choices: tuple[str, ...], default: str) -> str:
    """The structure type the router named: first on its first line, else first anywhere, else `default`."""
    for text in (reply.strip().splitlines()[:1] or [""]) + [reply]:
        found = [(m.start(), m.group(1)) for m in re.finditer(r"\b(" + "|".join(choices) + r")\b", text.lower())]
        if found:
            return min(found)[1]
    return default


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)
    choices = tuple(s for s in options.structures if s in TYPES) or TYPES
    default = options.default_structure if options.default_structure in choices else choices[0]

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            titles = "\n".join(f"- Document {d.number}: {d.title}" for d in documents[:options.max_titles])
            reply = await mr.ask(ROUTER, render("structrag_router", task=task, count=len(documents), titles=titles,
                                             options=[(c, _PURPOSES[c]) for c in choices]),
                                 max_tokens=options.router_max_tokens)
            structure = parse_route(reply, choices, default)
            mr.log.update(router_reply=reply, structure=structure)

            parts = split_to_parts(documents, budget_for(mr.window, options.structure_max_tokens, len(task) // 3))
            instructions = render("structrag_structurize", task=task, structure=structure,
                                  where="above" if Placement(settings.layout).document_first else "below")

            async def structurize(doc: Document) -> str:
                completion = await mr.llm.complete(ChatRequest(
                    messages=document_messages(doc, instructions, settings.layout), stage=STRUCTURIZE,
                    doc=doc.number, part=doc.part if doc.parts > 1 else None,
                    max_tokens=options.structure_max_tokens, temperature=settings.temperature,
                    prompt_name=instructions.name, prompt_hash=instructions.hash,
                ))
                return reply_text(completion)

            built = await mr.each(STRUCTURIZE, parts, structurize, lambda d: d.key)
            mr.check_failures(STRUCTURIZE, len(parts))
            items = [{"doc": d.key, "title": d.title, "text": text} for d, text in zip(parts, built, strict=True)
                     if text and text.strip().strip(".").upper() != "NONE"]
            budget = budget_for(mr.window, options.answer_max_tokens, len(task) // 3, 30 * len(items))
            caps = fair_shares([estimate_tokens(i["text"]) for i in items], budget)
            truncated = [i["doc"] for i, cap in zip(items, caps, strict=True) if cap < estimate_tokens(i["text"])]
            shown = [{**i, "text": head(i["text"], cap)} for i, cap in zip(items, caps, strict=True) if cap > 0]
            mr.log.update(parts=len(parts), structured=[{"doc": i["doc"], "chars": len(i["text"])} for i in items],
                          truncated=truncated)
            mr.dir.write_json("structures.json", {"structure": structure, "items": items})
            prompt = render("structrag_utilize", task=task, structure=structure, items=shown,
                            truncated=", ".join(f"Document {k}" for k in truncated))
            answer = await mr.ask(UTILIZE, prompt, max_tokens=options.answer_max_tokens)
            mr.log["reply"] = answer
            return mr.finish(final_answer_line(answer))

    return run
