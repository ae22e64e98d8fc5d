"""`r3con run --resume RUN_DIR`: the question, documents and settings of an earlier run, from its manifest.

Resuming is rerunning with the LLM cache: every call that had succeeded is answered from the cache,
so only what was left (or failed) costs anything. The run continues in the same folder.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Settings
from .errors import InputError

_NOT_RESUMED = {"api_key"}  # hidden in manifests; comes from the environment or --api-key again


@dataclass(frozen=True)
class ResumePlan:
    """What a resumed run needs: the task, the documents' sources, and the settings (as flags)."""

    run_dir: Path
    task: str
    sources: tuple[str, ...]
    settings: Mapping[str, Any]


def read_resume(run_dir: Path) -> ResumePlan:
    """Read RUN_DIR/manifest.json; InputError if it is missing, unreadable, or names in-memory documents."""
    path = Path(run_dir) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        task = str(manifest["task"])
        sources = tuple(str(d["source"]) for d in manifest["documents"])
        saved = dict(manifest.get("settings") or {})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot resume from {run_dir}: no readable manifest.json ({exc}); "
                         "pass a run folder that r3con wrote") from exc
    memory = [s for s in sources if s.startswith("<memory")]
    if memory:
        raise InputError(f"cannot resume {run_dir}: its documents were given in memory, not as files; rerun it "
                         "from the library with the same documents (the LLM cache makes that free)")
    known = {f.name for f in dataclasses.fields(Settings)} - _NOT_RESUMED
    settings = {k: v for k, v in saved.items() if k in known and v is not None
                and (isinstance(v, str | int | float | bool) or k == "stage_models")}
    return ResumePlan(run_dir=Path(run_dir), task=task, sources=sources, settings=settings)
