"""The SQLite files r3con keeps beside its runs (the LLM cache, the reuse record, the corpus store)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


def open_private(path: Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection to the SQLite file `path` (created 0600 with its folder: the files quote the documents),
    in WAL mode, waiting up to 30 s for another process's write lock; OSError or sqlite3.Error on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():  # SQLite's -wal and -shm files follow the file's mode
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    db = sqlite3.connect(path, timeout=30, check_same_thread=check_same_thread, isolation_level=None)
    db.execute("PRAGMA busy_timeout=30000")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: durable against a killed process
    return db
