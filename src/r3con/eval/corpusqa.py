"""CorpusQA (Tongyi-Zhiwen/CorpusQA), 1M split: 329 questions over four fixed corpora.

Each row bakes its corpus into one prompt: an optional preamble, then `# Document N:` sections, then a
`# Question:` marker followed by the question and its output requirements. The sections become the
documents; the question block (requirements included) becomes the task; the preamble, which only
introduces the documents, is dropped. The gold answer is compared with
what a method's answer says after "The answer is:" (the whole answer when that phrase is absent).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..corpus.documents import Document
from ..errors import InputError
from .tasks import EvalTask, TaskFilter, TaskSet, gold_text, read_jsonl

FILE_NAME = "1m_4domains.jsonl"
DOMAINS = ("financial_zh", "financial_en", "education_en", "real_estate_en")

_DOCUMENT = re.compile(r"^#[ \t]*Document[ \t]+(\d+)[ \t]*:?[ \t]*(.*)$", flags=re.MULTILINE)
_QUESTION = re.compile(r"^#[ \t]*Question[ \t]*:[ \t]*", flags=re.MULTILINE)
_ANSWER_IS = re.compile(r"the answer is\s*[:：]", flags=re.IGNORECASE)
_EXTRA_META = ("difficulty", "level", "category", "type")


def extract_final_answer(answer: str) -> str:
    """What follows the last "The answer is:" in `answer`, or all of it when the phrase is absent."""
    matches = list(_ANSWER_IS.finditer(answer))
    text = answer[matches[-1].end() :] if matches else answer
    return text.strip().strip("*").strip()


def prompt_text(prompt: Any) -> str:
    """The baked prompt's text: a string, or the user messages of a chat prompt joined."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        parts = [str(m.get("content", "")) for m in prompt if isinstance(m, dict) and m.get("role", "user") == "user"]
        return "\n\n".join(parts)
    raise ValueError("prompt is neither text nor a list of messages")


def split_prompt(text: str) -> tuple[str, list[tuple[int, str, str]], str]:
    """(preamble, [(number, title, text)], question block) of a baked CorpusQA prompt."""
    questions = list(_QUESTION.finditer(text))
    if not questions:
        raise ValueError("no '# Question:' marker")
    marker = questions[-1]
    body, question = text[: marker.start()], text[marker.end() :].strip()
    headers = list(_DOCUMENT.finditer(body))
    if not headers:
        raise ValueError("no '# Document N:' header")
    preamble = body[: headers[0].start()].strip()
    sections = []
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(body)
        number = int(header.group(1))
        title = header.group(2).strip() or f"Document {number}"
        sections.append((number, title, body[header.end() : end].strip()))
    return preamble, sections, question


def _domain(task_id: str, row: Mapping[str, Any]) -> str:
    for domain in DOMAINS:
        if task_id.startswith(domain):
            return domain
    return str(row.get("domain") or "unknown")


def load_corpusqa(data: Path, filters: TaskFilter = TaskFilter()) -> TaskSet:
    """Load CorpusQA tasks from `1m_4domains.jsonl` (the file, or a folder that holds it)."""
    path = data / FILE_NAME if data.is_dir() else data
    if not path.is_file():
        raise InputError(f"no {FILE_NAME} in {data}; pass --data with the CorpusQA file or its folder")
    filters.check_applies("corpusqa", ("domains", "languages"))
    corpora: dict[str, tuple[Document, ...]] = {}
    tasks: list[EvalTask] = []
    for number, row in read_jsonl(path):
        missing = [f for f in ("id", "prompt", "answer") if f not in row]
        if missing:
            raise InputError(f"{path}:{number} lacks {', '.join(missing)}; use the CorpusQA release file")
        task_id = str(row["id"])
        domain = _domain(task_id, row)
        meta: dict[str, Any] = {"domain": domain, "language": domain.rsplit("_", 1)[-1] if "_" in domain else None}
        meta.update({k: row[k] for k in _EXTRA_META if isinstance(row.get(k), str | int)})
        if not filters.keeps(task_id, meta):
            continue
        if filters.limit is not None and len(tasks) >= filters.limit:
            break
        try:
            _preamble, sections, question = split_prompt(prompt_text(row["prompt"]))
        except ValueError as exc:
            raise InputError(f"{path}:{number} (task {task_id}) is not a CorpusQA prompt: {exc}") from exc
        key = hashlib.sha256("\x00".join(f"{n}\x01{t}\x01{x}" for n, t, x in sections).encode()).hexdigest()
        if key not in corpora:  # the 1M split has four corpora; share their documents across questions
            corpora[key] = tuple(
                Document(number=i, title=title, text=text, source=f"{path}#{domain}/document-{n}")
                for i, (n, title, text) in enumerate(sections, start=1)
            )
        tasks.append(
            EvalTask(
                id=task_id,
                benchmark="corpusqa",
                task_text=question or str(row.get("question", "")),
                documents=corpora[key],
                gold=gold_text(row["answer"]),
                meta=meta,
                # upstream's judge sees the row's `question` field and its answer through str.format
                judge_question=str(row.get("question") or question),
                judge_gold=str(row["answer"]),
            )
        )
    return TaskSet(benchmark="corpusqa", tasks=tuple(tasks), data_dir=path.parent, filters=filters)
