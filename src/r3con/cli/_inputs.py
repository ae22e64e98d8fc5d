"""What a command says of its inputs: the question as given (an argument, `-` for standard input, `@FILE`), warnings
before it works (settings that look wrong but are not errors), and the end-of-run account of the inputs on
stderr: one summary line, one warning line naming what was not used."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from ..config import unknown_variables
from ..corpus.inputs import Inputs
from ..display import wrapped
from ..errors import InputError, RunFailed

_NAMED = 3  # inputs a warning names; the rest are counted, and listed in manifest.json


def summary_line(inputs: Inputs) -> str:
    """'inputs: 7 read (8 parts; 1 decoded as cp1252), 2 skipped (1 unsupported .docx, 1 empty), ...'."""
    notes = []
    parts = sum(r.parts for r in inputs.read)
    if parts != len(inputs.read):
        notes.append(f"{parts} parts")
    notes += [f"{n} decoded as {enc}" for enc, n in sorted(Counter(r.encoding for r in inputs.read if r.encoding).items())]
    if warned := sum(1 for r in inputs.read if r.warning):
        notes.append(f"{warned} with a warning")
    line = f"inputs: {len(inputs.read)} read" + (f" ({'; '.join(notes)})" if notes else "")
    if inputs.skipped:
        line += f", {len(inputs.skipped)} skipped ({_counts(s.kind for s in inputs.skipped)})"
    if inputs.unreadable:
        line += f", {len(inputs.unreadable)} unreadable"
    if inputs.duplicates:
        line += f", {len(inputs.duplicates)} duplicate{'s' * (len(inputs.duplicates) > 1)} (read once)"
    if inputs.degraded:  # documents, not parts: a document is degraded once, however many of its parts failed
        stages = Counter(stage for _, stage in dict.fromkeys((_whole(d.doc), d.stage) for d in inputs.degraded))
        where = f"in {next(iter(stages))}" if len(stages) == 1 else f"({', '.join(f'{n} in {s}' for s, n in stages.items())})"
        line += f", {len({_whole(d.doc) for d in inputs.degraded})} degraded {where}"
    if inputs.excluded:
        line += f", {len(inputs.excluded)} excluded ({_counts(e.rule for e in inputs.excluded)})"
    return line


def issues_text(inputs: Inputs, run_dir: Path | None = None) -> str | None:
    """'3 inputs not fully used: documents 2, 5 degraded in populate (...), a.docx (...); full list: ...', or None."""
    files = [(what, why) for what, why in inputs.issues if not what.startswith("document ")]
    total = len(files) + len({_whole(d.doc) for d in inputs.degraded})  # documents, each once
    if not total:
        return None
    named = []
    for stage in dict.fromkeys(d.stage for d in inputs.degraded):
        group = [d for d in inputs.degraded if d.stage == stage]
        docs = list(dict.fromkeys(_whole(d.doc) for d in group))
        keys = ", ".join(docs[:5]) + (f" and {len(docs) - 5} more" if len(docs) > 5 else "")
        noun = "document" if len(docs) == 1 else "documents"
        named.append(f"{noun} {keys} degraded in {stage} ({_clip(_last_error(group[0].cause))})")
    named += [f"{Path(what).name} ({_clip(why)})" for what, why in files[:_NAMED]]
    more = f" and {len(files) - _NAMED} more" if len(files) > _NAMED else ""
    where = f"; full list: {run_dir / 'manifest.json'}" if run_dir is not None else ""
    noun = "input" if total == 1 else "inputs"
    return f"{total} {noun} not fully used: {', '.join(named)}{more}{where}"


def report_inputs(inputs: Inputs, run_dir: Path | None, *, quiet: bool = False, strict: bool = False) -> None:
    """Print the summary (unless quiet) and the warning; with `strict`, RunFailed instead of the warning."""
    if not quiet:
        print(wrapped(summary_line(inputs)), file=sys.stderr)
    text = issues_text(inputs, run_dir)
    if text is None:
        return
    if strict:
        raise RunFailed(f"--strict: {text}")
    print(wrapped(f"warning: {text}; --strict makes this an error"), file=sys.stderr)


def _whole(key: str) -> str:
    """The document a part's key ("4.2") belongs to ("4")."""
    return key.split(".")[0]


def _counts(kinds: Iterable[str]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in Counter(kinds).most_common())


def _last_error(cause: str) -> str:
    """The server's own words from a cause that wraps them ('giving up after 3 attempts; last error: ...')."""
    return cause.rpartition("last error: ")[2]


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_question(question: str | None, question_file: Path | None) -> str | None:
    """The question as given: `-` reads standard input, `@FILE` (or --question-file FILE) reads a file."""
    if question_file is not None:
        return _read_question_file(question_file)
    if question == "-":
        text = sys.stdin.read().strip()
        if not text:
            raise InputError("the question from standard input is empty; pipe the question in, e.g. "
                             "echo 'Who wrote to whom?' | r3con run - PATHS")
        return text
    if question is not None and question.startswith("@") and len(question) > 1 and not any(c.isspace() for c in question):
        return _read_question_file(Path(question[1:]))
    return question


def _read_question_file(path: Path) -> str:
    try:
        text = path.expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"cannot read the question from {path}: {reason}; pass a UTF-8 text file "
                         "(or the question itself, in quotes)") from exc
    if not text:
        raise InputError(f"the question file {path} is empty; write the question into it")
    return text


MANY_ROUNDS = 4  # the paper's runs use 2 rounds; notes settle by the third or fourth


def warn_many_rounds(rounds: int) -> None:
    """A warning for more relevance rounds than the method needs: each is one call per document part."""
    if rounds > MANY_ROUNDS:
        print(f"r3con: warning: --rounds {rounds} is more than the method needs (2 by default; notes settle by "
              f"round {MANY_ROUNDS}), and each round is one call per document part; running {rounds} as asked, "
              "Ctrl-C stops it and --resume continues", file=sys.stderr)


def warn_unknown_variables() -> None:
    """A warning line for each R3CON_* variable that r3con does not read."""
    for line in unknown_variables():
        print(f"r3con: warning: {line}", file=sys.stderr)
