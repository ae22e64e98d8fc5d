"""The workspace's run folders: listed as a history, each reopened as it was (the report's own view of the
folder), and what the page needs beside it: the files the answer used, what was reused and what that saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from .security import OutsideWorkspace


def folder(runs: Path, name: str) -> Path:
    """The run folder `name` of the workspace (only a direct child of `runs/` that r3con wrote)."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise OutsideWorkspace(f"{name!r} is outside the workspace: name one of its runs")
    path = runs / name
    if not (path / "manifest.json").is_file():
        raise InputError(f"no run {name!r} in this workspace")
    return path


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def status(path: Path) -> str:
    """finished, cancelled (interrupted), failed, or running (no end written yet)."""
    if (path / "result.json").exists():
        return "finished"
    error = _json(path / "error.json")
    if error:
        return "cancelled" if error.get("kind") == "interrupted" else "failed"
    return "running"


def listed(runs: Path) -> list[dict[str, Any]]:
    """Every run of the workspace, newest first: name, question, status, when."""
    out = []
    for path in sorted((p for p in runs.iterdir() if (p / "manifest.json").is_file()), reverse=True):
        manifest = _json(path / "manifest.json")
        out.append({"name": path.name, "question": str(manifest.get("task", "")), "status": status(path),
                    "started": manifest.get("started")})
    return out


def details(path: Path) -> dict[str, Any]:
    """What the page shows beside a run's view: its status, the files it read and the ones its answer cites,
    its fallbacks in one sentence, what it reused and saved, its error if it ended on one."""
    manifest, result = _json(path / "manifest.json"), _json(path / "result.json")
    sources = {str(d.get("doc")): str(d.get("source", "")) for d in manifest.get("documents") or []
               if isinstance(d, dict)}
    cited = {str(e.get("doc")) for e in result.get("evidence") or [] if isinstance(e, dict)}
    error = _json(path / "error.json")
    return {
        "name": path.name, "question": str(manifest.get("task", "")), "status": status(path),
        "answer": result.get("answer"), "read": sorted(sources.values()),
        "used": sorted(sources[d] for d in cited if d in sources),
        "fallback": fallback_sentence(manifest.get("fallbacks") or result.get("fallbacks") or []),
        "reuse": reuse_summary(result.get("reuse") or manifest.get("reuse")),
        "usage": result.get("usage"),
        "error": plain_error(error) if error else None,
    }


def fallback_sentence(fallbacks: list[dict[str, Any]]) -> str | None:
    """One plain sentence for what failed and how the run went on without it, or None."""
    if not fallbacks:
        return None
    return " ".join(f"The {f.get('stage', 'a')} stage failed ({strip_class(str(f.get('failed', '')))}), so "
                    f"{str(f.get('fallback', 'the run went on without it')).rstrip('.')}." for f in fallbacks)


def reuse_summary(reuse: Any) -> dict[str, Any] | None:
    """What an earlier run of the question gave this one: the calls and tokens taken, per stage."""
    if not isinstance(reuse, dict) or not reuse.get("previous_run"):
        return None
    counts = reuse.get("counts") or {}
    return {"previous_run": Path(str(reuse["previous_run"])).name, "mode": reuse.get("mode"),
            "calls_reused": int(reuse.get("calls_reused") or 0),
            "prompt_tokens_reused": int(reuse.get("prompt_tokens_reused") or 0),
            "stages": {stage: {"reused": int(c.get("reused", 0)), "recomputed": int(c.get("recomputed", 0))}
                       for stage, c in counts.items() if isinstance(c, dict)}}


def strip_class(text: str) -> str:
    """`text` without a leading exception class name ("ValueError: ..."): a person reads the message."""
    head, sep, rest = text.partition(": ")
    name = head.rpartition(".")[2]
    if sep and head.replace(".", "").isidentifier() and name[:1].isupper() and not name.isupper() \
            and (name.endswith(("Error", "Exception", "Exceeded", "Cancelled", "Interrupt", "Exit", "Long"))
                 or "Error" in name):
        return rest
    return text


def plain_error(error: dict[str, Any]) -> str:
    stage = f" during {error['stage']}" if error.get("stage") else ""
    if error.get("kind") == "interrupted":
        return f"The run was stopped{stage}; what it did is kept, and Resume continues it."
    message = strip_class(str(error.get("error", ""))) or "no reason recorded"
    return f"The run failed{stage}: {message}"


def view(path: Path) -> str:
    """The run as report.html shows it (the same template and script), rendered from its folder now."""
    from ..report import render_report

    return render_report(path)
