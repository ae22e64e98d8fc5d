"""Dracula: Stoker's novel split into 46 documents, with one question judged on a strict and a lenient gold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..corpus.documents import Document
from ..errors import InputError
from .tasks import EvalTask, TaskFilter, TaskSet


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}; pass --data with the dracula folder") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg}); restore the file") from exc


def _lenient(question: dict[str, Any]) -> str | None:
    """The lenient gold, with the strict one it is phrased against ("as the strict answer but ...")."""
    lenient = question.get("answer_lenient")
    if not lenient:
        return None
    return f"{lenient}\n(The strict answer it refers to: {question['answer']})"


def load_dracula(data_dir: Path, filters: TaskFilter = TaskFilter()) -> TaskSet:
    """Load the Dracula corpus (`docs/`, titles from `manifest.json`) and its questions (`questions.json`)."""
    filters.check_applies("dracula", ())
    manifest = _read_json(data_dir / "manifest.json")
    questions = _read_json(data_dir / "questions.json")
    documents = []
    for i, entry in enumerate(sorted(manifest, key=lambda e: int(e["doc"])), start=1):
        path = data_dir / "docs" / entry["file"]
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}; restore the dracula folder") from exc
        # Each file is: title line, blank line, text. The title comes from the manifest.
        body = raw.split("\n", 1)[1].lstrip("\n") if "\n" in raw else ""
        documents.append(Document(number=i, title=str(entry["title"]), text=body, source=str(path)))
    corpus = tuple(documents)
    tasks: list[EvalTask] = []
    for q in questions:
        task_id = str(q["id"])
        if not filters.keeps(task_id, {}):
            continue
        if filters.limit is not None and len(tasks) >= filters.limit:
            break
        tasks.append(
            EvalTask(
                id=task_id,
                benchmark="dracula",
                task_text=str(q["question"]),
                documents=corpus,
                gold=str(q["answer"]),
                gold_lenient=_lenient(q),
            )
        )
    return TaskSet(benchmark="dracula", tasks=tuple(tasks), data_dir=data_dir, filters=filters)
