"""The app's workspace: the folders a person added (read, never written), the files dropped on the page
(copied into the workspace's `files/`), and the run folders (`runs/`). Everything the app reads is under
these; everything it writes is under the workspace's own folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..corpus.documents import Corpus, load_corpus
from ..errors import InputError
from ..files import write_atomic
from .security import within

STATE = "workspace.json"


@dataclass(frozen=True)
class Limits:
    """What one upload may hold: a file's bytes and the files the workspace may hold in all."""

    file_bytes: int = 64 * 1024 * 1024
    files: int = 2000


class TooLarge(InputError):
    """An upload over the limits (answered 413)."""


class Workspace:
    """The folders added, the files uploaded, the runs made; kept in `root/workspace.json` between starts."""

    def __init__(self, root: Path, limits: Limits | None = None):
        self.root = root.resolve()
        self.limits = limits or Limits()
        self.root.mkdir(parents=True, exist_ok=True)
        self.files.mkdir(exist_ok=True)
        self.runs.mkdir(exist_ok=True)
        state = self.root / STATE
        saved = json.loads(state.read_text(encoding="utf-8")) if state.exists() else {}
        self.folders: list[Path] = [Path(p) for p in saved.get("folders", []) if Path(p).is_dir()]
        self._loaded: tuple[list[Path], Corpus] | None = None  # the sources as last read, and what they held

    @property
    def files(self) -> Path:
        return self.root / "files"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    def add_folder(self, given: str) -> Path:
        """Add a folder (or a single file's folder is refused: add folders) by its path on this machine."""
        path = Path(os.path.expanduser(given.strip())) if given.strip() else None
        if path is None:
            raise InputError("type the path of a folder on this machine")
        if not path.is_dir():
            raise InputError(f"{given.strip()}: no such folder on this machine (give a folder's full path)")
        path = path.resolve()
        if path == self.root or path.is_relative_to(self.root):
            raise InputError("that folder is the app's own workspace; add a folder of documents")
        if path not in self.folders:
            self.folders.append(path)
            self._save()
        return path

    def remove_folder(self, given: str) -> None:
        self.folders = [f for f in self.folders if str(f) != given]
        self._save()

    def _save(self) -> None:
        write_atomic(self.root / STATE, json.dumps({"folders": [str(f) for f in self.folders]}, indent=1))

    def sources(self) -> list[Path]:
        """What a run reads: every added folder, and the uploaded files if there are any."""
        uploaded = any(p.is_file() for p in self.files.rglob("*"))
        return [*self.folders, *([self.files] if uploaded else [])]

    def readable_roots(self) -> list[Path]:
        return [*self.folders, self.files, self.runs]

    def upload_path(self, name: str) -> Path:
        """Where an uploaded file named `name` (a relative path, as a dropped folder gives it) is kept."""
        given = PurePosixPath(name.replace("\\", "/"))
        parts = [p for p in given.parts if p not in ("", ".")]
        if given.is_absolute() or not parts or any(p == ".." or p.startswith(".") or ":" in p for p in parts):
            raise InputError(f"{name!r} is not a file name the workspace keeps")
        if sum(1 for p in self.files.rglob("*") if p.is_file()) >= self.limits.files:
            raise TooLarge(f"the workspace holds {self.limits.files:,} uploaded files already; add a folder by path")
        target = self.files.joinpath(*parts)
        return within(target, [self.files])

    async def save_upload(self, name: str, chunks: AsyncIterator[bytes]) -> Path:
        """Write an uploaded file into `files/`, refused (and removed) past the size limit."""
        target = self.upload_path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        size = 0
        try:
            with partial.open("wb") as out:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > self.limits.file_bytes:
                        raise TooLarge(f"{name} is over {self.limits.file_bytes // (1024 * 1024)} MB: add its "
                                       "folder by path instead")
                    out.write(chunk)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
        return target

    def load(self, *, fresh: bool = False) -> Corpus:
        """The documents of every source, with the account of each file (read, skipped and why); read again
        when `fresh` or the sources changed, else as the tree last read them (a plan per keystroke reads no file)."""
        sources = self.sources()
        if not sources:
            raise InputError("add a folder (its path) or drop files on the page first")
        if fresh or self._loaded is None or self._loaded[0] != sources:
            self._loaded = (sources, load_corpus([str(s) for s in sources]))
        return self._loaded[1]

    def tree(self) -> dict[str, Any]:
        """Each source folder and each of its files with what became of it (read as document N, skipped, ...),
        read afresh."""
        roots = self.sources()
        try:
            corpus = self.load(fresh=True)
        except InputError as exc:
            return {"roots": [_root(r, self) for r in roots], "files": [], "error": str(exc)}
        return {"roots": [_root(r, self) for r in roots], "files": [
            _file(entry, kind, roots) for kind, entries in corpus.inputs.to_dict().items() for entry in entries
            if kind != "degraded"], "error": None}


def _root(path: Path, workspace: Workspace) -> dict[str, Any]:
    return {"path": str(path), "name": "files dropped on the page" if path == workspace.files else path.name or str(path),
            "uploads": path == workspace.files}


REASON_KEYS = ("reason", "rule", "same_as", "warning")


def _file(entry: dict[str, Any], kind: str, roots: list[Path]) -> dict[str, Any]:
    source = Path(str(entry.get("source", "")))
    root = next((r for r in roots if source == r or source.is_relative_to(r)), None)
    why = next((str(entry[k]) for k in REASON_KEYS if entry.get(k)), "")
    if kind == "duplicates":
        why = f"the same text as {Path(why).name}"
    return {"source": str(source), "root": str(root) if root else "",
            "path": str(source.relative_to(root)) if root and source != root else source.name,
            "status": kind, "doc": entry.get("doc"), "why": why}
