"""The files that paths, folders and globs name, and what a folder walk leaves out by rule.

A walk leaves out r3con's own run folders (an earlier run's documents, notes and calls would become
documents of the next), hidden files and folders (`.env.txt`), version control, virtualenvs and
dependency folders, and whatever `--exclude GLOB` names; it does not follow links to folders. A file
named explicitly is always read, unless an `--exclude` glob names it. Every exclusion is counted: a
left-out folder once.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path, PurePath
from typing import NamedTuple

from ..errors import InputError
from .inputs import ExcludedInput, UnreadableInput
from .names import shown, special_kind

RUNS_FOLDER = "r3con-runs"  # the default --out
_VCS = frozenset({".git", ".hg", ".svn", ".bzr"})
_VIRTUALENVS = frozenset({".venv", "venv"})
_DEPENDENCIES = frozenset({"node_modules", "__pycache__", "site-packages"})


@dataclass(frozen=True)
class WalkRules:
    """What a walk leaves out beyond the defaults: `--exclude` globs; hidden files only without `--include-hidden`."""

    exclude: tuple[str, ...] = ()
    include_hidden: bool = False


class Found(NamedTuple):
    """A file to read: its path as named or walked; its `real` path (links and `..` resolved, what the
    corpus store knows it by); `plain` when the folder's listing said it is a regular file and no link,
    so there is nothing special about it to look up."""

    path: Path
    real: str
    plain: bool = False


@dataclass(frozen=True)
class Walk:
    """The files to read, in order, what was left out, and folders that could not be listed."""

    found: tuple[Found, ...]
    excluded: tuple[ExcludedInput, ...]
    unreadable: tuple[UnreadableInput, ...] = ()

    @property
    def files(self) -> tuple[Path, ...]:
        return tuple(f.path for f in self.found)


def _sort_key(path: str) -> str:
    """`path` as it sorts component by component (NUL, which no path holds, sorts before every character):
    one string a file, where a list of its components was six objects, which, dropped after the walk, left
    holes in Python's small-object memory that the run did not fill."""
    return path.replace(os.sep, "\0")


def walk_paths(specs: Sequence[str | Path], rules: WalkRules = WalkRules()) -> Walk:
    """Expand files, folders (recursively) and globs; InputError for a path or pattern that names nothing."""
    found: list[Found] = []
    excluded: dict[str, str] = {}
    unlisted: list[UnreadableInput] = []
    folders: dict[str, str] = {}  # a folder -> its real path: resolved once, not once per file in it
    for spec in specs:
        text = str(spec)
        path = Path(text).expanduser()
        if path.is_dir():
            found.extend(_walk_folder(path, rules, excluded, unlisted))
        elif path.is_file():
            rule = _user_rule(path, path.name, rules)
            if rule:
                excluded[shown(path)] = rule
            else:
                found.append(_named(path, folders))
        elif glob.has_magic(text):
            pattern = os.path.expanduser(text)
            matches = sorted(Path(m) for m in glob.glob(pattern, recursive=True, include_hidden=True))
            if not matches:
                raise InputError(f"no file matches {text!r}; check the pattern or quote it for your shell")
            found.extend(_named(m, folders) for m in _filter_matches(_literal_base(pattern), matches, rules, excluded))
        elif special := special_kind(path):
            raise InputError(special.refusal(text))
        else:
            raise InputError(f"no such file or folder: {shown(text)}; pass existing files, folders or globs")
    seen: set[str] = set()
    unique = []
    for f in found:
        if f.real not in seen:
            seen.add(f.real)
            unique.append(f)
    return Walk(found=tuple(unique), excluded=tuple(ExcludedInput(s, r) for s, r in excluded.items()),
                unreadable=tuple(unlisted))


def _named(path: Path, folders: dict[str, str]) -> Found:
    """A file named or matched (not walked): its real path looked up."""
    try:
        return Found(path, real_path(path, folders))
    except (OSError, RuntimeError):  # a link that loops: kept, for the reader to name
        return Found(path, os.path.abspath(path))


def real_path(path: Path, folders: dict[str, str] | None = None) -> str:
    """`path` with links and `..` resolved, as `Path.resolve` gives it; `folders` caches the folders' real
    paths, so that a large folder costs one look-up per file rather than one per path component."""
    if os.path.islink(path) or ".." in path.parts:
        return os.path.realpath(path)
    parent, name = os.path.split(os.path.abspath(path))
    if folders is None:
        return os.path.join(os.path.realpath(parent), name)
    if parent not in folders:
        folders[parent] = os.path.realpath(parent)
    return os.path.join(folders[parent], name)


def _walk_folder(root: Path, rules: WalkRules, excluded: dict[str, str],
                 unlisted: list[UnreadableInput]) -> list[Found]:
    def unlistable(exc: OSError) -> None:  # os.walk would skip such a folder without a word
        unlisted.append(UnreadableInput(shown(exc.filename), f"cannot list the folder: {exc.strerror or exc}; "
                                                           "check its permissions"))

    # os.walk's order and choices, from one listing per folder: what each entry is (a folder, a regular
    # file, a link) comes with the listing, so a plain file costs no system call here
    found: list[tuple[str, Found]] = []  # each with its path as it sorts (`_sort_key`)
    folders: dict[str, str] = {}
    pending = [str(root)]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as exc:
            unlistable(exc)
            continue
        here = Path(folder)
        real = None
        dirs: list[os.DirEntry[str]] = []
        files: list[os.DirEntry[str]] = []
        for entry in entries:
            try:
                (dirs if entry.is_dir() else files).append(entry)
            except OSError:
                files.append(entry)
        kept = []
        for entry in sorted(dirs, key=lambda e: e.name):
            # a link to a folder is not followed (it may loop, or lead out of the tree): counted, not entered
            rule = folder_rule(here / entry.name, root, rules) or ("link to a folder" if entry.is_symlink() else None)
            if rule:
                excluded[shown(here / entry.name)] = rule
            else:
                kept.append(entry.path)
        for entry in files:
            path = here / entry.name
            rule = file_rule(path, root, rules)
            if rule:
                excluded[shown(path)] = rule
                continue
            if entry.is_file(follow_symlinks=False):
                real = real or os.path.realpath(folder)
                found.append((_sort_key(entry.path), Found(path, os.path.join(real, entry.name), plain=True)))
            else:  # a link, a pipe...
                found.append((_sort_key(entry.path), _named(path, folders)))
        pending.extend(reversed(kept))
    found.sort(key=lambda item: item[0])
    return [f for _, f in found]


def _filter_matches(base: Path, matches: list[Path], rules: WalkRules, excluded: dict[str, str]) -> list[Path]:
    """The files among a glob's matches that the folder rules keep (the glob's literal base is the root)."""
    found = []
    for match in matches:
        if match.is_dir():  # a dangling link stays in: it is reported as unreadable, not dropped
            continue
        rule = None
        for parent in reversed(match.parents):
            if parent != base and parent.is_relative_to(base) and (rule := folder_rule(parent, base, rules)):
                excluded.setdefault(shown(parent), rule)
                break
        if rule is None and (rule := file_rule(match, base, rules)):
            excluded[shown(match)] = rule
        if rule is None:
            found.append(match)
    return found


def folder_rule(path: Path, root: Path, rules: WalkRules) -> str | None:
    """Why a walk does not enter the folder `path` (below `root`), or None."""
    name = path.name
    if rule := _user_rule(path.relative_to(root), name, rules):
        return rule
    if name in _VCS:
        return "version control"
    if name in _VIRTUALENVS or (path / "pyvenv.cfg").is_file():
        return "virtualenv"
    if name in _DEPENDENCIES:
        return "dependencies"
    if name == RUNS_FOLDER or is_run_folder(path):
        return "r3con runs"
    if name.startswith(".") and not rules.include_hidden:
        return "hidden"
    return None


def file_rule(path: Path, root: Path, rules: WalkRules) -> str | None:
    """Why a walk does not read the file `path` (below `root`), or None."""
    if rules.exclude and (rule := _user_rule(path.relative_to(root), path.name, rules)):
        return rule
    if path.name.startswith(".") and not rules.include_hidden:
        return "hidden"
    if is_report(path):
        return "r3con report"
    return None


def is_report(path: Path) -> bool:
    """An HTML page r3con wrote (`r3con show`, a run's report.html): a later walk must not read it as a document."""
    if path.suffix.lower() not in (".html", ".htm") or not path.is_file():  # is_file: never open a pipe
        return False
    try:
        with path.open("rb") as f:
            head = f.read(2048)
    except OSError:
        return False
    return b'<meta name="generator" content="r3con">' in head or (
        b"<title>r3con: " in head and b"Content-Security-Policy" in head)  # reports written before the tag


def is_run_folder(path: Path) -> bool:
    """A folder r3con wrote a run into: its manifest.json beside calls.jsonl, or naming r3con's version."""
    manifest = path / "manifest.json"
    if not manifest.is_file():
        return False
    if (path / "calls.jsonl").exists():
        return True
    try:
        with manifest.open("rb") as f:
            return b'"r3con_version"' in f.read(4096)
    except OSError:
        return False


def _user_rule(relative: PurePath, name: str, rules: WalkRules) -> str | None:
    for pattern in rules.exclude:
        bare = pattern.rstrip("/")
        if fnmatch(name, bare) or fnmatch(relative.as_posix(), bare) or fnmatch(str(relative), bare):
            return f"--exclude {pattern}"
    return None


def _literal_base(pattern: str) -> Path:
    """The folder a glob pattern starts in: its components before the first wildcard."""
    parts = Path(pattern).parts
    literal = []
    for part in parts[:-1]:
        if glob.has_magic(part):
            break
        literal.append(part)
    return Path(*literal) if literal else Path(".")
