"""memagent: read the collection chunk by chunk into a bounded memory that each step overwrites.

After Yu et al. (2025, "MemAgent: Reshaping Long-Context LLM with Multi-Conv RL-based Memory
Agent"): the documents, in order, are cut into chunks (5,000 tokens in the paper); for each chunk
the model reads the problem, its previous memory and the chunk and writes the new memory, which
replaces the old; the answer comes from the problem and the final memory alone. The memory is
bounded by `memory_tokens` (1,024 in the paper): the reading call's output budget, and a cut of any
longer reply, so the prompt never grows with the collection. The paper's RL training is not part
of the baseline; the prompts are its templates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..corpus.documents import Document
from ..llm.replies import final_answer_line
from ..prompts.render import render
from ..results import MethodFn, MethodOutcome
from ..tokens import estimate_tokens
from ._common import budget_for, check_options, chunk_documents, head, method_run

NAME = "memagent"
DESCRIPTION = "MemAgent: chunks read in order into a bounded memory that each step overwrites; answer from the memory"
READ = "memagent-read"
ANSWER = "memagent-answer"
EMPTY_MEMORY = "No previous memory"


@dataclass(frozen=True)
class Options:
    """Parameters of the MemAgent baseline.

    chunk_tokens: size of each section read (capped so that the prompt fits the window).
    memory_tokens: the memory's bound, in tokens.
    answer_max_tokens: the answer's output budget.
    """

    chunk_tokens: int = 5000
    memory_tokens: int = 1024
    answer_max_tokens: int = 2048


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            size = min(options.chunk_tokens,
                       budget_for(mr.window, 2 * options.memory_tokens, len(task) // 3))
            chunks = chunk_documents(documents, size)
            memory = EMPTY_MEMORY
            trace = []
            words = max(20, options.memory_tokens * 3 // 4)
            for step, chunk in enumerate(chunks, start=1):
                prompt = render("memagent_read", task=task, memory=memory, chunk=chunk, memory_words=words)
                reply = await mr.ask(READ, prompt, max_tokens=options.memory_tokens, doc=chunk.doc, round=step)
                memory = head(reply, options.memory_tokens) or memory
                trace.append({"step": step, "doc": chunk.doc, "chunk_tokens": chunk.tokens,
                              "memory_tokens": estimate_tokens(memory), "memory": memory})
            mr.log.update(chunk_tokens=size, memory_bound=options.memory_tokens, steps=trace)
            reply = await mr.ask(ANSWER, render("memagent_answer", task=task, memory=memory),
                                 max_tokens=options.answer_max_tokens)
            mr.log["reply"] = reply
            return mr.finish(final_answer_line(reply))

    return run
