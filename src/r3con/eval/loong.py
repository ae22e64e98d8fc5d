"""Loong (MozerWang/Loong): tasks built from `loong.jsonl` and the `doc/` folder, as upstream builds them.

Upstream renders `prompt_template` with the documents in its `{docs}` slot. Here the documents are the
corpus and the task text is the same template without that slot (and without a heading such as
"#Papers:" that only introduces it). Document titles follow upstream: a paper's first Markdown heading,
a financial report's company name (or "company-period report" on level 4), "判决文书N" for legal cases.
Documents are shuffled as upstream shuffles them (`shuffle_doc`), with a seed fixed per task id.

`download` fetches the official files, for users with internet access: `loong.jsonl` from the upstream
repository (MozerWang/Loong, `data/loong.jsonl` on its main branch) and `doc.zip`, the documents of all
three domains, from the address upstream's README names
("wget -P data/ http://alibaba-research.oss-cn-beijing.aliyuncs.com/loong/doc.zip"). The other
benchmarks are not fetched: `download` says where their files come from.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import urllib.error
import urllib.request
import zipfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ..corpus.documents import Document
from ..errors import ConfigError, InputError
from .tasks import EvalTask, TaskFilter, TaskSet, gold_text, read_jsonl

DOMAINS = ("financial", "legal", "paper")
PAPER_SETS = (2, 3, 4)
LEVELS = {1: "spotlight locating", 2: "comparison", 3: "clustering", 4: "chain of reasoning"}
SET_LENGTHS = {1: "10K-50K", 2: "50K-100K", 3: "100K-200K", 4: "200K-250K"}

_FIELDS = ("id", "type", "level", "set", "language", "question", "instruction", "prompt_template", "doc", "answer")
_SLOT = re.compile(r"\{(docs|instruction|question)\}")
_DOCS_HEADING = re.compile(r"^#[^\n]*:[ \t]*\n(?=\{docs\})", flags=re.MULTILINE)
_LEGAL_NO_RESULT = "阅读以上判决文书，我将给你若干份判决结果："

SKIP_LEGAL = "legal documents absent (doc/legal/legal.json)"
SKIP_MISSING = "documents missing from doc/"


def task_text(row: Mapping[str, Any]) -> str:
    """The task as upstream words it, with the `{docs}` slot (and a heading that only introduces it) left out."""
    template = _DOCS_HEADING.sub("", str(row["prompt_template"]))
    values = {"docs": "", "instruction": str(row["instruction"]), "question": str(row["question"])}
    text = _SLOT.sub(lambda m: values[m.group(1)], template)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def judge_question(row: Mapping[str, Any]) -> str:
    """The question as Loong's `get_evaluate_prompts` shows it to the judge: the prompt template with
    `{question}` and `{instruction}` filled, and `{docs}` removed except in paper tasks (upstream keeps
    the literal slot there)."""
    template = str(row["prompt_template"])
    if row["type"] != "paper":
        template = template.replace("{docs}", "")
    return template.replace("{question}", str(row["question"])).replace("{instruction}", str(row["instruction"]))


class _Library:
    """Reads Loong's documents once each, resolving names the way upstream does."""

    def __init__(self, doc_dir: Path):
        self.doc_dir = doc_dir
        self._texts: dict[Path, str] = {}
        self._financial: list[str] | None = None
        self._resolved: dict[tuple[str, bool], Path | None] = {}
        self._legal: dict[str, Any] | None = None

    def legal_available(self) -> bool:
        return (self.doc_dir / "legal" / "legal.json").is_file()

    def _read(self, path: Path) -> str:
        if path not in self._texts:
            try:
                self._texts[path] = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
        return self._texts[path]

    def financial_file(self, name: str, level: int) -> Path | None:
        """Upstream's glob (`*2024-{name}*.txt`, level 4 `*{name}*.txt`); among several matches, the exact name."""
        key = (name, level == 4)
        if key not in self._resolved:
            self._resolved[key] = self._find_financial(name, level == 4)
        return self._resolved[key]

    def _find_financial(self, name: str, level4: bool) -> Path | None:
        if self._financial is None:
            folder = self.doc_dir / "financial"
            self._financial = sorted(p.stem for p in folder.glob("*.txt")) if folder.is_dir() else []
        # `*X*.txt` matches exactly the stems that contain X, so a substring test is the glob.
        needle = name if level4 else f"2024-{name}"
        matches = [stem for stem in self._financial if needle in stem]
        if not matches:
            return None
        exact = re.compile(rf"(?:^|-){re.escape(name)}$" if level4 else rf"2024-{re.escape(name)}(?:-[^-]*)?$")
        preferred = [stem for stem in matches if exact.search(stem)]
        return self.doc_dir / "financial" / f"{(preferred or matches)[0]}.txt"

    def document(self, row: Mapping[str, Any], name: str, index: int) -> tuple[str, str, str] | None:
        """(title, text, source) of the `index`-th document of a task, or None when it is absent."""
        domain = row["type"]
        if domain == "paper":
            path = self.doc_dir / "paper" / name
            if not path.is_file():
                return None
            text = self._read(path)
            title = text.split("\n", 1)[0].strip().strip("#").strip() or name
            return title, text, str(path)
        if domain == "financial":
            found = self.financial_file(name, int(row["level"]))
            if found is None:
                return None
            return name, self._read(found), str(found)
        if domain == "legal":
            cases = self._legal_cases()
            case = cases.get(name)
            if not isinstance(case, dict):
                return None
            text = str(case.get("content", ""))
            if not (int(row["level"]) == 4 and _LEGAL_NO_RESULT in str(row["instruction"])):
                text += str(case.get("result", ""))
            return f"判决文书{index + 1}", text, f"{self.doc_dir / 'legal' / 'legal.json'}#{name}"
        raise InputError(f"unknown Loong domain {domain!r} in task {row['id']}; use a loong.jsonl from upstream")

    def _legal_cases(self) -> dict[str, Any]:
        if self._legal is None:
            path = self.doc_dir / "legal" / "legal.json"
            try:
                self._legal = json.loads(self._read(path))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path} is not valid JSON ({exc.msg}); download doc.zip again") from exc
        return self._legal


def load_loong(data_dir: Path, filters: TaskFilter = TaskFilter(), *, shuffle: bool = True) -> TaskSet:
    """Load Loong tasks from a folder holding `loong.jsonl` and `doc/` (or from the .jsonl file itself).

    Tasks whose documents are not in the folder (the legal domain, in the copy this project ships) are
    skipped and counted in `TaskSet.skipped`; asking for legal tasks only, without them, is an InputError.
    """
    jsonl = data_dir if data_dir.is_file() else data_dir / "loong.jsonl"
    root = jsonl.parent
    if not jsonl.is_file():
        raise InputError(f"no loong.jsonl in {data_dir}; pass --data with the folder that holds loong.jsonl and doc/")
    filters.check_applies("loong", ("sets", "levels", "domains", "languages"))
    for domain in filters.domains or ():
        if domain not in DOMAINS:
            raise ConfigError(f"unknown Loong domain {domain!r}; use {', '.join(DOMAINS)}")
    library = _Library(root / "doc")
    if filters.domains == ("legal",) and not library.legal_available():
        raise InputError(
            f"the legal domain's documents ({root / 'doc' / 'legal' / 'legal.json'}) are absent; "
            "fetch the full doc.zip with `r3con eval download --benchmark loong --to DIR`"
        )

    tasks: list[EvalTask] = []
    skipped: Counter[str] = Counter()
    for number, row in read_jsonl(jsonl):
        missing = [f for f in _FIELDS if f not in row]
        if missing:
            raise InputError(f"{jsonl}:{number} lacks {', '.join(missing)}; use the loong.jsonl from upstream")
        task_id = str(row["id"])
        meta = {
            "level": int(row["level"]),
            "set": int(row["set"]),
            "domain": str(row["type"]),
            "language": str(row["language"]),
            "length": row.get("length"),
        }
        if not filters.keeps(task_id, meta):
            continue
        if filters.limit is not None and len(tasks) >= filters.limit:
            break
        if meta["domain"] == "legal" and not library.legal_available():
            skipped[SKIP_LEGAL] += 1
            continue
        found = [library.document(row, str(name), i) for i, name in enumerate(row["doc"])]
        if any(item is None for item in found):
            skipped[SKIP_MISSING] += 1
            continue
        items = [item for item in found if item is not None]
        if shuffle and row.get("shuffle_doc", True):
            random.Random(task_id).shuffle(items)
        documents = tuple(
            Document(number=i, title=title, text=text, source=source)
            for i, (title, text, source) in enumerate(items, start=1)
        )
        tasks.append(
            EvalTask(
                id=task_id,
                benchmark="loong",
                task_text=task_text(row),
                documents=documents,
                gold=gold_text(row["answer"]),
                meta=meta,
                judge_question=judge_question(row),
                judge_gold=str(row["answer"]),  # upstream's str.format shows lists and dicts as Python writes them
            )
        )
    return TaskSet(benchmark="loong", tasks=tuple(tasks), skipped=dict(skipped), data_dir=root, filters=filters)


LOONG_JSONL_URL = "https://raw.githubusercontent.com/MozerWang/Loong/main/data/loong.jsonl"
LOONG_DOC_URL = "http://alibaba-research.oss-cn-beijing.aliyuncs.com/loong/doc.zip"
CORPUSQA_URL = "https://huggingface.co/datasets/Tongyi-Zhiwen/CorpusQA"


class DownloadError(InputError):
    """A benchmark file could not be fetched (offline, moved, or refused)."""


def fetch(url: str, target: Path, *, timeout_s: float = 60.0) -> Path:
    """Download `url` to `target` (through a temporary file, so a broken download leaves nothing behind)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response, partial.open("wb") as fh:
            shutil.copyfileobj(response, fh, length=1 << 20)
    except urllib.error.HTTPError as exc:
        partial.unlink(missing_ok=True)
        raise DownloadError(
            f"cannot download {url} (HTTP {exc.code} {exc.reason}); it may have moved: fetch it by hand into {target.parent}"
        ) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        reason = getattr(exc, "reason", None) or exc
        raise DownloadError(
            f"cannot download {url} ({reason}); check the internet connection, or fetch it by hand into {target.parent}"
        ) from exc
    partial.replace(target)
    return target


def _extract(archive: Path, to: Path) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                parts = PurePosixPath(name).parts
                if name.startswith("/") or ".." in parts:
                    raise DownloadError(f"{archive} holds an unsafe path {name!r}; not extracting it")
            zf.extractall(to)
    except zipfile.BadZipFile as exc:
        raise DownloadError(f"{archive} is not a zip file; delete it and download again") from exc


def download_loong(
    to: Path, *, jsonl_url: str = LOONG_JSONL_URL, doc_url: str = LOONG_DOC_URL, timeout_s: float = 60.0
) -> Path:
    """Fetch what `to` lacks of Loong (`loong.jsonl`; `doc/` with all three domains, from doc.zip), ready
    for `--data`; return `to`. A copy without the legal domain's `doc/legal/legal.json` gets doc.zip."""
    to.mkdir(parents=True, exist_ok=True)
    if not (to / "loong.jsonl").is_file():
        fetch(jsonl_url, to / "loong.jsonl", timeout_s=timeout_s)
    doc = to / "doc"
    if (doc / "financial").is_dir() and (doc / "paper").is_dir() and (doc / "legal" / "legal.json").is_file():
        return to
    archive = fetch(doc_url, to / "doc.zip", timeout_s=timeout_s)
    _extract(archive, to)
    archive.unlink()
    if not (to / "doc").is_dir():
        raise DownloadError(f"doc.zip from {doc_url} holds no doc/ folder; look into {to} and arrange it as doc/<domain>/")
    return to


def download(benchmark: str, to: Path, *, timeout_s: float = 60.0) -> Path:
    """Fetch the official files of `benchmark` into `to`."""
    if benchmark == "loong":
        return download_loong(to, timeout_s=timeout_s)
    if benchmark == "corpusqa":
        raise ConfigError(
            f"CorpusQA is not fetched by r3con; download 1m_4domains.jsonl from {CORPUSQA_URL} and pass --data FILE"
        )
    if benchmark == "dracula":
        raise ConfigError("the Dracula corpus ships with the project data (shared/data/dracula); pass --data PATH")
    raise ConfigError(f"unknown benchmark {benchmark!r}; use loong, corpusqa or dracula")
