"""The question of `r3con run`: as an argument, from standard input (`-`) or from a file (`@FILE`, --question-file)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import InputError


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
