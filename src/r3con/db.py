"""The SQLite files r3con keeps beside its runs (the LLM cache, the reuse record, the corpus store)."""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

WAIT_S = 30.0  # how long opening waits for another process's lock before it fails


def open_private(path: Path, *, check_same_thread: bool = True,
                 setup: Callable[[sqlite3.Connection], None] | None = None) -> sqlite3.Connection:
    """A connection to the SQLite file `path` (created 0600 with its folder: the files quote the documents),
    in WAL mode, waiting up to WAIT_S for another process's lock; `setup(db)` (the schema: statements that
    may run again) under the same wait. OSError or sqlite3.Error on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():  # SQLite's -wal and -shm files follow the file's mode
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    db = sqlite3.connect(path, timeout=WAIT_S, check_same_thread=check_same_thread, isolation_level=None)
    try:
        db.execute(f"PRAGMA busy_timeout={int(WAIT_S * 1000)}")
        _until_unlocked(lambda: _settle(db, setup))
    except BaseException:
        db.close()
        raise
    return db


def _settle(db: sqlite3.Connection, setup: Callable[[sqlite3.Connection], None] | None) -> None:
    # a file that is WAL already is not switched again (the switch wants the file to itself)
    if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: durable against a killed process
    if setup is not None:
        setup(db)


def _until_unlocked(step: Callable[[], None]) -> None:
    """Run `step` again while SQLite says the file is locked, for up to WAIT_S. The busy timeout does not
    cover every lock: switching a new file to WAL, or a schema change that would deadlock with another
    process's, fail at once with "database is locked" while several processes open one fresh file."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            message = str(exc).lower()
            if ("locked" not in message and "busy" not in message) or time.monotonic() > deadline:
                raise
        time.sleep(random.uniform(0.005, 0.05))  # apart from the others that wait, so one gets the file
