"""Generic answers for the baselines' stages, computed from the request alone.

Dispatch rule: the server sends a request whose X-R3con-Stage is in `STAGES` here, whatever its mode.
Code stages (`codeagent`, `rlm`) answer mode "code" with Python over the variable their system prompt
binds (`documents`, `context`) and mode "final" with prose; the rest read the tags of their prompt
(<task>, <document>, <passage>, <memory>, <section>, <gist>, <options>, <text>). Nothing here is keyed to
a corpus or a question.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from . import _text as t

Messages = list[dict[str, Any]]


_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")
_SENTENCE = re.compile(r"(?<=[.!?。！？；])\s*|\n+")


def _words(text: str) -> set[str]:
    """Content words, and the character bigrams of CJK runs (single CJK characters match too much)."""
    out = {w for w in t.content_words(text) if not re.match(r"[\u4e00-\u9fff]", w)}
    for run in _CJK_RUN.findall(text):
        out.update(run[i:i + 2] for i in range(len(run) - 1))
    return out


def _related(text: str, query: str, k: int = 3) -> list[str]:
    """The `k` sentences of `text` sharing most words with `query`, in text order."""
    q = _words(query)
    sentences = [x.strip() for x in _SENTENCE.split(text) if len(x.strip()) > 3]
    scored = [(len(_words(x) & q), i, x) for i, x in enumerate(sentences)]
    best = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], x[1]))[:k]
    return [x for _, _, x in sorted(best, key=lambda x: x[1])]


def _all_text(messages: Messages) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def _task(text: str) -> str:
    return t.tag(text, "task") or t.tag(text, "problem")


def _evidence_answer(text: str, k: int = 5) -> str:
    """Sentences of the prompt (outside the task) that share words with the task, and the names in them."""
    task = _task(text)
    rest = text.replace(task, " ") if task else text
    picked = _related(rest, task, k=k)
    names = sorted(set(t.names(" ".join(picked))))[:10]
    summary = ", ".join(names) or (picked[0][:200] if picked else "no evidence found")
    return f"From {len(picked)} related passages: {' '.join(picked)[:600]}\nAnswer: {summary}"


def _answer(messages: Messages, schema: dict[str, Any] | None) -> str:
    return _evidence_answer(_all_text(messages))


def _steps(messages: Messages) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


def _last(messages: Messages) -> str:
    return str(messages[-1].get("content") or "") if messages else ""


def _failed(observation: str) -> bool:
    return "Traceback" in observation or "Error" in observation


def _keywords(messages: Messages) -> list[str]:
    words = sorted(_words(_task(_all_text(messages))))
    return [w for w in words if len(w) > 3 or re.match(r"[\u4e00-\u9fff]", w)][:12]


def codeagent(messages: Messages, mode: str) -> str:
    """Inspect `documents`, then search them for the task's words and answer with the matches."""
    if mode != "code":
        return _evidence_answer(_all_text(messages))
    if _steps(messages) == 0:
        return ("First I look at the documents.\n```python\nprint(len(documents))\n"
                "for d in documents[:50]:\n    print(d['number'], d['title'], len(d['text']))\n```")
    if _failed(_last(messages)):
        return "```python\nfinal_answer(f'{len(documents)} documents')\n```"
    words = json.dumps(_keywords(messages), ensure_ascii=False)
    return ("Now I search the documents for the task's terms.\n```python\n"
            f"words = {words}\n"
            "hits = []\n"
            "for d in documents:\n"
            "    text = d['text'].lower()\n"
            "    score = sum(text.count(w) for w in words)\n"
            "    if score:\n"
            "        hits.append((score, d['number'], d['title']))\n"
            "hits.sort(key=lambda h: (-h[0], h[1]))\n"
            "print(hits[:10])\n"
            "final_answer(f'{len(hits)} of {len(documents)} documents mention the task: ' "
            "+ ', '.join(h[2] for h in hits[:10]))\n```")


def rlm(messages: Messages, mode: str) -> str:
    """Inspect `context`, then ask the sub-model about batches of documents and combine the replies."""
    if mode != "code":
        return _evidence_answer(_all_text(messages))
    if _steps(messages) == 0:
        return ("Let me look at the context.\n```python\nprint(type(context).__name__, len(context))\n"
                "for d in context[:50]:\n    print(d['number'], d['title'], len(d['text']))\n```")
    if _failed(_last(messages)):
        return "```python\nfinal_answer(f'{len(context)} documents in the context')\n```"
    task = json.dumps(_task(_all_text(messages)), ensure_ascii=False)
    return ("I ask a sub-model about each batch of documents, then combine the findings.\n```python\n"
            f"task = {task}\n"
            "def block(d):\n"
            "    return f'<document number=\"{d[\"number\"]}\" title=\"{d[\"title\"]}\">\\n' + d['text'][:6000] + '\\n</document>'\n"
            "batches = [context[i:i + 8] for i in range(0, len(context), 8)]\n"
            "prompts = ['<task>\\n' + task + '\\n</task>\\n\\n' + '\\n'.join(block(d) for d in b) "
            "+ '\\n\\nQuote what these documents say that bears on the task, or reply NONE.' for b in batches]\n"
            "found = [a for a in llm_query_batched(prompts) if a.strip() and a.strip() != 'NONE']\n"
            "print(len(found), 'batches had evidence')\n"
            "final_answer(llm_query('<task>\\n' + task + '\\n</task>\\n\\nFindings:\\n' + '\\n'.join(found) "
            "+ '\\n\\nAnswer the task from the findings.'))\n```")


def rlm_sub(messages: Messages, schema: dict[str, Any] | None) -> str:
    text = _all_text(messages)
    task = _task(text)
    docs = t.documents(text)
    if docs and task:
        picked = [s for _, _, body in docs for s in _related(body, task, k=2)]
        return " ".join(picked) if picked else "NONE"
    return _evidence_answer(text)


def structrag_router(messages: Messages, schema: dict[str, Any] | None) -> str:
    """The option whose description shares most words with the task (the first on ties)."""
    text = _all_text(messages)
    task = _words(_task(text))
    options = re.findall(r"^- ([a-z]+): (.*)$", t.tag(text, "options"), flags=re.MULTILINE)
    if not options:
        return "chunks"
    best = max(options, key=lambda o: (len(_words(o[1]) & task), -options.index(o)))
    return f"{best[0]}\nThe task is best served by a {best[0]} structure."


def structrag_structurize(messages: Messages, schema: dict[str, Any] | None) -> str:
    text = _all_text(messages)
    kind = t.tag(text, "structure").strip()
    docs = t.documents(text)
    body = docs[0][2] if docs else text
    picked = _related(body, _task(text), k=4)
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


def memagent_read(messages: Messages, schema: dict[str, Any] | None) -> str:
    """The previous memory plus the section's sentences that bear on the problem."""
    text = _all_text(messages)
    memory = t.tag(text, "memory").strip()
    memory = "" if memory == "No previous memory" else memory
    found = re.search(r"<section[^>]*>\n?(.*?)\n?</section>", text, flags=re.DOTALL)
    section = found.group(1) if found else ""
    picked = _related(section, _task(text), k=2)
    return "\n".join(x for x in [memory, *picked] if x) or "No relevant information yet."


def readagent_gist(messages: Messages, schema: dict[str, Any] | None) -> str:
    page = re.search(r"<page[^>]*>\n?(.*?)\n?</page>", _all_text(messages), flags=re.DOTALL)
    sentences = t.sentences(page.group(1) if page else "")
    return " ".join(sentences[:2])[:300] or "(empty page)"


def readagent_lookup(messages: Messages, schema: dict[str, Any] | None) -> str:
    """The pages whose gists share most words with the task (at most three)."""
    text = _all_text(messages)
    task = _words(_task(text))
    gists = re.findall(r'<gist page="(\d+)"[^>]*>\n?(.*?)\n?</gist>', text, flags=re.DOTALL)
    scored = sorted(((len(_words(g) & task), int(p)) for p, g in gists), key=lambda x: (-x[0], x[1]))
    pages = ([p for score, p in scored if score > 0][:3] or [int(gists[0][0])]) if gists else []
    return f"I want to look up Page {json.dumps(pages)} to answer the question."


def raptor_summarize(messages: Messages, schema: dict[str, Any] | None) -> str:
    texts = re.findall(r"<text[^>]*>\n?(.*?)\n?</text>", _all_text(messages), flags=re.DOTALL)
    firsts = [(t.sentences(x) or [x])[0][:200] for x in texts]
    return " ".join(firsts)[:800] or "(nothing to summarise)"


def _plain(fn: Callable[[Messages, dict[str, Any] | None], str]) -> Callable[[Messages, dict[str, Any] | None, str], str]:
    return lambda messages, schema, mode: fn(messages, schema)


RESPONDERS: dict[str, Callable[[Messages, dict[str, Any] | None, str], str]] = {
    "longcontext": _plain(_answer),
    "codeagent": lambda messages, schema, mode: codeagent(messages, mode),
    "rlm": lambda messages, schema, mode: rlm(messages, mode),
    "rlm-sub": _plain(rlm_sub),
    "structrag-router": _plain(structrag_router),
    "structrag-structurize": _plain(structrag_structurize),
    "structrag-utilize": _plain(_answer),
    "rag-answer": _plain(_answer),
    "memagent-read": _plain(memagent_read),
    "memagent-answer": _plain(_answer),
    "readagent-gist": _plain(readagent_gist),
    "readagent-lookup": _plain(readagent_lookup),
    "readagent-answer": _plain(_answer),
    "raptor-summarize": _plain(raptor_summarize),
    "raptor-answer": _plain(_answer),
    "hipporag-answer": _plain(_answer),
    "linearrag-answer": _plain(_answer),
}
STAGES = frozenset(RESPONDERS)


def respond(stage: str, mode: str, messages: Messages, schema: dict[str, Any] | None) -> str:
    """The scripted reply for a baseline stage."""
    return RESPONDERS[stage](messages, schema, mode)
