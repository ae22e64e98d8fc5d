"""The folder walk: os.walk's files, order and exclusions, from one listing per folder."""

from __future__ import annotations

import os
from pathlib import Path

from r3con.corpus.walk import WalkRules, file_rule, folder_rule, walk_paths


def _os_walk(root: Path, rules: WalkRules) -> tuple[list[Path], list[tuple[str, str]]]:
    """What the walk did before it read entries' kinds from the listing: os.walk, Path by Path."""
    found: list[Path] = []
    excluded: list[tuple[str, str]] = []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        kept = []
        for name in sorted(dirs):
            rule = folder_rule(here / name, root, rules) or ("link to a folder" if (here / name).is_symlink() else None)
            if rule:
                excluded.append((str(here / name), rule))
            else:
                kept.append(name)
        dirs[:] = kept
        for name in names:
            rule = file_rule(here / name, root, rules)
            if rule:
                excluded.append((str(here / name), rule))
            else:
                found.append(here / name)
    unique: dict[str, Path] = {}
    for path in sorted(found):  # a file reached twice (here b.txt, through a/link.txt first) is read once
        unique.setdefault(os.path.realpath(path), path)
    return list(unique.values()), excluded


def _tree(root: Path) -> None:
    for name in ("b.txt", "a.md", "a b.txt", "a-b.txt", "a.b/c.txt", "a/z.txt", "a/b/c.txt", "a/b/.hidden.txt",
                 "a0/x.txt", "A/y.txt", ".git/config.txt", "node_modules/m.txt", "deep/er/and/deeper/d.txt",
                 "r3con-runs/run/manifest.json", "excluded/e.txt", "keep/skip.log"):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "o.txt").write_text("other")
    (root / "a" / "to-elsewhere").symlink_to(root / "elsewhere")
    (root / "a" / "link.txt").symlink_to(root / "b.txt")
    (root / "a" / "dangling.txt").symlink_to(root / "gone.txt")
    os.mkfifo(root / "a" / "pipe.txt")


def test_the_walk_finds_what_os_walk_found_in_its_order_with_its_exclusions(tmp_path):
    root = tmp_path / "docs"
    _tree(root)
    rules = WalkRules(exclude=("excluded", "*.log"))
    walk = walk_paths([root], rules)
    files, excluded = _os_walk(root, rules)
    assert list(walk.files) == files
    assert sorted((e.source, e.rule) for e in walk.excluded) == sorted(excluded)
    assert [e.source for e in walk.excluded] == [s for s, _ in excluded]  # folders of a folder first, sorted


def test_each_file_carries_its_real_path_and_whether_it_is_plain(tmp_path):
    root = tmp_path / "docs"
    _tree(root)
    walk = walk_paths([root / "a" / ".." / "a"])  # a `..` in the folder named is resolved too
    by_name = {f.path.name: f for f in walk.found}
    assert len(walk.found) == 5  # a/: z, link, dangling, pipe; a/b/c.txt; not the link to a folder nor .hidden
    for f in walk.found:
        assert f.real == os.path.realpath(f.path), f
    assert by_name["z.txt"].plain and by_name["c.txt"].plain
    assert not by_name["link.txt"].plain and not by_name["pipe.txt"].plain and not by_name["dangling.txt"].plain
    assert by_name["link.txt"].real == str(root / "b.txt")


def test_a_file_reached_twice_is_read_once(tmp_path):
    root = tmp_path / "docs"
    _tree(root)
    walk = walk_paths([root, root / "b.txt", root / "a" / "link.txt"])
    assert [f.real for f in walk.found].count(str(root / "b.txt")) == 1
    assert len({f.real for f in walk.found}) == len(walk.found)
