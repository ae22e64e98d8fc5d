#!/usr/bin/env python3
"""Bootstrap for a fresh machine with only Python >= 3.11 and pip.

    python3 dev.py demo    install r3con into ./.venv and run `r3con demo`
    python3 dev.py test    install r3con with its test extras into ./.venv, run ruff, mypy and pytest

Extra arguments after `test` go to pytest (e.g. `python3 dev.py test tests/stages -x`). The tests run on up to
four of the machine's cores (pytest-xdist, each file's tests in one worker); `-n 0` runs them in this process.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("R3CON_VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")


def ensure_env(extras: str) -> None:
    """Create the virtual environment and (re)install the package when pyproject.toml changed."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this script is what meets an old Python first
        sys.exit(f"r3con needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not (BIN / "python").exists():
        print(f"creating virtual environment in {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    stamp = VENV / f".r3con-installed-{extras or 'core'}"
    if stamp.exists() and stamp.read_text() == digest:
        return
    target = f".[{extras}]" if extras else "."
    print(f"installing r3con{f'[{extras}]' if extras else ''} into {VENV}", flush=True)
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "-q", "-e", target], check=True, cwd=ROOT)
    stamp.write_text(digest)


def workers(pytest_args: list[str]) -> list[str]:
    """pytest-xdist's arguments for the cores this process may use, at most four (the suite waits on servers
    and subprocesses as much as it computes: two workers on two cores take it from 15 to 8 minutes); none when
    the caller chose (`-n`), or with one core. `--dist loadfile`: a file's servers and clusters start once."""
    chosen = any(a in ("-n", "--numprocesses") or a.startswith(("-n", "--numprocesses=", "--dist")) or a == "no:xdist"
                 for a in pytest_args)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return [] if chosen or cores < 2 else ["-n", str(min(cores, 4)), "--dist", "loadfile"]


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "help"
    if command == "demo":
        ensure_env("")
        return subprocess.call([str(BIN / "r3con"), "demo", *argv[1:]], cwd=ROOT)
    if command == "test":
        ensure_env("test")
        for check in (["ruff", "check", "."], ["mypy"]):
            print("$", " ".join(check), flush=True)
            code = subprocess.call([str(BIN / check[0]), *check[1:]], cwd=ROOT)
            if code != 0:
                return code
        args = [*workers(argv[1:]), *argv[1:]]
        print("$ pytest", " ".join(args), flush=True)
        code = subprocess.call([str(BIN / "python"), "-m", "pytest", *args], cwd=ROOT)
        if code == 5:
            print("pytest collected no tests: that is a failure here", file=sys.stderr)
            return 1
        return code
    print(__doc__)
    return 0 if command in {"help", "-h", "--help"} else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
