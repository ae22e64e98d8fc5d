"""Generic answers for the baselines' stages, computed from the request alone.

Dispatch rule: the server sends a request whose X-R3con-Stage is in `STAGES` here, whatever its mode.
Code stages (`codeagent`, `rlm`) answer mode "code" with Python over the variable their system prompt
binds (`documents`, `context`) and mode "final" with prose; the rest read the prompt by its shape
(`_reading`): the task, the labelled sections (documents, passages, pages, gists, texts) and the plain
ones (memory, structure). Nothing here is keyed to a corpus, a question or a template's wording.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from . import _text as t
from ._reading import Reading


def _evidence_answer(r: Reading, k: int = 5) -> str:
    """Sentences of the prompt (outside the task) that share words with the task, and the names in them."""
    rest = r.prompt.replace(r.task, " ") if r.task else r.prompt
    picked = t.related_sentences(rest, r.task, k=k)
    names = sorted(set(t.names(" ".join(picked))))[:10]
    summary = ", ".join(names) or (picked[0][:200] if picked else "no evidence found")
    return f"From {len(picked)} related passages: {' '.join(picked)[:600]}\nAnswer: {summary}"


def _keywords(r: Reading) -> list[str]:
    words = sorted(t.content_words(r.task))
    return [w for w in words if len(w) > 3 or re.match(r"[\u4e00-\u9fff]", w)][:12]


def codeagent(r: Reading) -> str:
    """Inspect `documents`, then search them for the task's words and answer with the matches (the code
    guards itself: a surprise in the data ends in an answer, not an error)."""
    if r.mode != "code":
        return _evidence_answer(r)
    if r.steps == 0:
        return ("First I look at the documents.\n```python\nprint(len(documents))\n"
                "for d in documents[:50]:\n    print(d['number'], d['title'], len(d['text']))\n```")
    words = json.dumps(_keywords(r), ensure_ascii=False)
    return ("Now I search the documents for the task's terms.\n```python\n"
            f"words = {words}\n"
            "try:\n"
            "    hits = []\n"
            "    for d in documents:\n"
            "        text = d['text'].lower()\n"
            "        score = sum(text.count(w) for w in words)\n"
            "        if score:\n"
            "            hits.append((score, d['number'], d['title']))\n"
            "    hits.sort(key=lambda h: (-h[0], h[1]))\n"
            "    print(hits[:10])\n"
            "    found = f'{len(hits)} of {len(documents)} documents mention the task: ' + ', '.join(h[2] for h in hits[:10])\n"
            "except Exception:\n"
            "    found = f'{len(documents)} documents'\n"
            "final_answer(found)\n```")


def rlm(r: Reading) -> str:
    """Inspect `context`, then ask the sub-model about batches of documents and combine the replies."""
    if r.mode != "code":
        return _evidence_answer(r)
    if r.steps == 0:
        return ("Let me look at the context.\n```python\nprint(type(context).__name__, len(context))\n"
                "for d in context[:50]:\n    print(d['number'], d['title'], len(d['text']))\n```")
    task = json.dumps(r.task, ensure_ascii=False)
    return ("I ask a sub-model about each batch of documents, then combine the findings.\n```python\n"
            f"task = {task}\n"
            "def block(d):\n"
            "    return f'<document number=\"{d[\"number\"]}\" title=\"{d[\"title\"]}\">\\n' + d['text'][:6000] + '\\n</document>'\n"
            "try:\n"
            "    batches = [context[i:i + 8] for i in range(0, len(context), 8)]\n"
            "    prompts = ['<task>\\n' + task + '\\n</task>\\n\\n' + '\\n'.join(block(d) for d in b) "
            "+ '\\n\\nQuote what these documents say that bears on the task, or reply NONE.' for b in batches]\n"
            "    found = [a for a in llm_query_batched(prompts) if a.strip() and a.strip() != 'NONE']\n"
            "    print(len(found), 'batches had evidence')\n"
            "    answer = llm_query('<task>\\n' + task + '\\n</task>\\n\\nFindings:\\n' + '\\n'.join(found) "
            "+ '\\n\\nAnswer the task from the findings.')\n"
            "except Exception:\n"
            "    answer = f'{len(context)} documents in the context'\n"
            "final_answer(answer)\n```")


def rlm_sub(r: Reading) -> str:
    if r.labelled and r.task:
        picked = [s for section in r.labelled for s in t.related_sentences(section.text, r.task, k=2)]
        return " ".join(picked) if picked else "NONE"
    return _evidence_answer(r)


def structrag_router(r: Reading) -> str:
    """The option (a `- name: description` line) whose description shares most words with the task."""
    task = t.content_words(r.task)
    options = re.findall(r"^- ([a-z]+): (.*)$", r.prompt, flags=re.MULTILINE)
    if not options:
        return "chunks"
    best = max(options, key=lambda o: (len(t.content_words(o[1]) & task), -options.index(o)))
    return f"{best[0]}\nThe task is best served by a {best[0]} structure."


def structrag_structurize(r: Reading) -> str:
    """The document's task-related sentences as the structure asked for (a one-word section: table, graph)."""
    kind = next((x.strip() for x in r.plain_sections[1:] if len(x.split()) == 1), "")
    picked = t.related_sentences(r.document, r.task, k=4)
    if not picked:
        return "NONE"
    if kind == "table":
        rows = [f"| {(t.names(s) or ['-'])[0]} | {s[:160]} |" for s in picked]
        return "| entity | detail |\n|---|---|\n" + "\n".join(rows)
    if kind == "graph":
        triples = []
        for s in picked:
            found = t.names(s)
            if len(found) >= 2:
                triples.append(f"({found[0]}; mentioned with; {found[1]})")
        return "\n".join(triples) or "\n".join(f"({(t.names(s) or ['-'])[0]}; said; {s[:120]})" for s in picked)
    return "\n".join(f"- {s}" for s in picked)


def memagent_read(r: Reading) -> str:
    """The previous memory (the plain section after the task) plus the section's sentences on the task."""
    memory = r.plain_sections[1].strip() if len(r.plain_sections) > 1 else ""
    memory = "" if memory == "No previous memory" else memory
    picked = t.related_sentences(r.document, r.task, k=2)
    return "\n".join(x for x in [memory, *picked] if x) or "No relevant information yet."


def readagent_gist(r: Reading) -> str:
    sentences = t.sentences(r.document)
    return " ".join(sentences[:2])[:300] or "(empty page)"


def readagent_lookup(r: Reading) -> str:
    """The pages (labelled sections, by their first attribute) whose gists share most words with the task."""
    task = t.content_words(r.task)
    gists = [(s.label, s.text) for s in r.labelled if s.label.isdigit()]
    scored = sorted(((len(t.content_words(g) & task), int(p)) for p, g in gists), key=lambda x: (-x[0], x[1]))
    pages = ([p for score, p in scored if score > 0][:3] or [int(gists[0][0])]) if gists else []
    return f"I want to look up Page {json.dumps(pages)} to answer the question."


def raptor_summarize(r: Reading) -> str:
    firsts = [(t.sentences(s.text) or [s.text])[0][:200] for s in r.labelled]
    return " ".join(firsts)[:800] or "(nothing to summarise)"


RESPONDERS: dict[str, Callable[[Reading], str]] = {
    "longcontext": _evidence_answer,
    "codeagent": codeagent,
    "rlm": rlm,
    "rlm-sub": rlm_sub,
    "structrag-router": structrag_router,
    "structrag-structurize": structrag_structurize,
    "structrag-utilize": _evidence_answer,
    "rag-answer": _evidence_answer,
    "memagent-read": memagent_read,
    "memagent-answer": _evidence_answer,
    "readagent-gist": readagent_gist,
    "readagent-lookup": readagent_lookup,
    "readagent-answer": _evidence_answer,
    "raptor-summarize": raptor_summarize,
    "raptor-answer": _evidence_answer,
    "hipporag-answer": _evidence_answer,
    "linearrag-answer": _evidence_answer,
}
STAGES = frozenset(RESPONDERS)


def respond(r: Reading) -> str:
    """The scripted reply for a baseline stage."""
    return RESPONDERS[r.stage](r)
