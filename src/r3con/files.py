"""Writing files so that a reader (or a killed run) never sees half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

PRIVATE_FILE = 0o600  # run folders hold the user's documents and the model's replies about them
PRIVATE_DIR = 0o700


def write_atomic(path: Path, text: str | Iterable[str], *, newline: str | None = None) -> Path:
    """Write `text` (or its pieces, as they come) to `path` through a temporary file in the same folder and a
    rename; the file is private."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as fh:
            if isinstance(text, str):
                fh.write(text)
            else:
                fh.writelines(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def make_private(root: Path) -> None:
    """Folders 0700 and files 0600 under `root` (and `root` itself), whoever wrote them."""
    for folder, _dirs, files in os.walk(root):
        os.chmod(folder, PRIVATE_DIR)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, PRIVATE_FILE)
