"""`r3con run --resume RUN_DIR`: the question, documents and settings of an earlier run, from its manifest.

Resuming is rerunning with the LLM cache: every call that had succeeded is answered from the cache,
so only what was left (or failed) costs anything. The run continues in the same folder, so a resume
must compute the same run: another question, other documents (or changed files) or a setting that
changes what the run computes are refused, and nothing of the earlier run is overwritten by another.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..config import Settings
from ..corpus.documents import Document
from ..corpus.inputs import DuplicateInput, ExcludedInput, Inputs, SkippedInput, UnreadableInput
from ..corpus.names import from_name_bytes, shown
from ..errors import ConfigError, InputError

T = TypeVar("T")

_NOT_RESUMED = {"api_key"}  # hidden in manifests; comes from the environment or --api-key again
# Settings a resume may change: how the run reaches the endpoint and what it may spend, not what it computes
# (the role "operational", declared on each field: `config.ROLES`).
OPERATIONAL = frozenset(name for name, role in Settings.roles().items() if role == "operational")


@dataclass(frozen=True)
class ResumePlan:
    """What a resumed run needs: the task, the documents' sources, and the settings (as flags)."""

    run_dir: Path
    task: str
    sources: tuple[str, ...]
    settings: Mapping[str, Any]
    documents: tuple[Mapping[str, Any], ...] = ()  # the manifest's entries: source, path, chars, sha256
    inputs: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # the manifest's account of every input


def read_resume(run_dir: Path) -> ResumePlan:
    """Read RUN_DIR/manifest.json; InputError if it is missing, unreadable, or names in-memory documents."""
    path = Path(run_dir) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        task = str(manifest["task"])
        entries = tuple(dict(d) for d in manifest["documents"])
        sources = tuple(str(d["source"]) for d in entries)
        saved = dict(manifest.get("settings") or {})
        inputs = dict(manifest.get("inputs") or {})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot resume from {run_dir}: no readable manifest.json ({exc}); "
                         "pass a run folder that r3con wrote") from exc
    memory = [s for s in sources if s.startswith("<memory")]
    if memory:
        raise InputError(f"cannot resume {run_dir}: its documents were given in memory, not as files; rerun it "
                         "from the library with the same documents (the LLM cache makes that free)")
    known = {f.name for f in dataclasses.fields(Settings)} - _NOT_RESUMED
    settings = {k: v for k, v in saved.items() if k in known and v is not None
                and (isinstance(v, str | int | float | bool) or k == "stage_models"
                     or (k in ("base_urls", "routing_headers") and isinstance(v, list)))}
    return ResumePlan(run_dir=Path(run_dir), task=task, sources=sources, settings=settings, documents=entries,
                      inputs=inputs)


def _new_run_hint(plan: ResumePlan) -> str:
    return (f"start a new run instead (r3con run QUESTION PATHS, without --resume); calls it shares with "
            f"{plan.run_dir} come from the LLM cache")


def check_question(plan: ResumePlan, question: str | None) -> str:
    """The question to resume with: the saved one; ConfigError if another was given."""
    if question is not None and question.strip() != plan.task.strip():
        raise ConfigError(f"--resume {plan.run_dir} continues the question {plan.task!r}, not {question!r}; "
                          f"drop the question to continue it, or {_new_run_hint(plan)}")
    return plan.task


def check_settings(plan: ResumePlan, given: Mapping[str, Any]) -> None:
    """ConfigError if a flag given with --resume changes what the saved run computes."""
    for name, value in given.items():
        if value is None or value == {} or name in OPERATIONAL or name not in plan.settings:
            continue
        saved = plan.settings[name]
        if _same(saved, value):
            continue
        flag = "--" + name.replace("_usd", "").replace("_tokens", "").replace("_", "-")
        raise ConfigError(f"--resume {plan.run_dir} ran with {name}={saved!r}; {flag} {value!r} would compute "
                          f"another run over its artifacts: drop the flag to continue it, or {_new_run_hint(plan)}")


def _same(saved: Any, value: Any) -> bool:
    if isinstance(value, Mapping) and isinstance(saved, Mapping):
        return dict(value) == dict(saved)
    return str(saved) == str(value) or saved == value


def locate_sources(plan: ResumePlan) -> tuple[list[str], str | None]:
    """The saved run's document files, found as the run named them or else at the absolute paths the manifest
    keeps (a resume from another working directory), and a line saying so when the absolute ones were used;
    ConfigError if one is in neither place."""
    found: list[str] = []
    moved: list[str] = []
    gone: list[str] = []
    for source, entry in zip(plan.sources, plan.documents or [{}] * len(plan.sources), strict=True):
        named = from_name_bytes(entry.get("source_b64")) or source  # the very name, where it is shown escaped
        absolute = from_name_bytes(entry.get("path_b64")) or str(entry.get("path") or "")
        if Path(named).exists() and (not absolute or os.path.abspath(named) == absolute or not Path(absolute).exists()):
            found.append(named)
        elif absolute and Path(absolute).exists():
            found.append(absolute)
            moved.append(shown(absolute))
        else:
            gone.append(source)
    if gone:
        raise ConfigError(f"--resume {plan.run_dir}: its document {gone[0]} is gone"
                          f"{f' (and {len(gone) - 1} more)' if len(gone) > 1 else ''}; put it back to continue "
                          f"the run, or {_new_run_hint(plan)}")
    note = None
    if moved:
        note = (f"the run was started in another folder: its documents are read at the absolute paths it kept "
                f"({moved[0]}{f' and {len(moved) - 1} more' if len(moved) > 1 else ''}), checked against their "
                "content hashes")
    return found, note


def carried_inputs(plan: ResumePlan, inputs: Inputs) -> Inputs:
    """`inputs` (the account of the files read again) with what the saved run had skipped, found unreadable,
    read once as a duplicate or excluded: a resume reads only the documents, but the account survives it."""
    saved = plan.inputs

    def entries(key: str, build: Callable[[Mapping[str, Any]], T], have: Sequence[T]) -> tuple[T, ...]:
        known = {getattr(x, "source", None) for x in have}
        extra = [build(e) for e in saved.get(key) or [] if isinstance(e, Mapping) and e.get("source") not in known]
        return (*have, *extra)

    try:
        return dataclasses.replace(
            inputs,
            skipped=entries("skipped", lambda e: SkippedInput(str(e["source"]), str(e.get("reason", "")),
                                                               str(e.get("kind", ""))), inputs.skipped),
            unreadable=entries("unreadable", lambda e: UnreadableInput(str(e["source"]), str(e.get("reason", ""))),
                               inputs.unreadable),
            duplicates=entries("duplicates", lambda e: DuplicateInput(str(e["source"]), str(e.get("same_as", ""))),
                               inputs.duplicates),
            excluded=entries("excluded", lambda e: ExcludedInput(str(e["source"]), str(e.get("rule", ""))),
                             inputs.excluded),
        )
    except (KeyError, TypeError):  # a hand-edited manifest: the account of this attempt stands alone
        return inputs


def check_documents(plan: ResumePlan, documents: Sequence[Document]) -> None:
    """ConfigError if the documents differ from the saved run's (other files, or files changed since)."""
    moved = {str(e.get("path")): str(e.get("source")) for e in plan.documents if e.get("path")}
    now = [(moved.get(d.source, d.source), d.chars, d.sha256) for d in documents]
    saved = [(str(e.get("source")), e.get("chars"), e.get("sha256")) for e in plan.documents]
    if [s for s, _, _ in now] != [s for s, _, _ in saved]:
        gone = sorted(set(s for s, _, _ in saved) - set(s for s, _, _ in now))
        added = sorted(set(s for s, _, _ in now) - set(s for s, _, _ in saved))
        what = (f"{len(added)} new ({added[0]}{', ...' if len(added) > 1 else ''})" if added else "") + \
               (", " if added and gone else "") + \
               (f"{len(gone)} missing ({gone[0]}{', ...' if len(gone) > 1 else ''})" if gone else "")
        raise ConfigError(f"--resume {plan.run_dir}: the documents differ from its run's ({what or 'another order'}); "
                          f"pass no paths (or the same ones) to continue it, or {_new_run_hint(plan)}")
    for (source, chars, digest), (_, saved_chars, saved_digest) in zip(now, saved, strict=True):
        if (saved_digest is not None and digest != saved_digest) or (saved_chars is not None and chars != saved_chars):
            raise ConfigError(f"--resume {plan.run_dir}: {source} changed since its run; {_new_run_hint(plan)}")
