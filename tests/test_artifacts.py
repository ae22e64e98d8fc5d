"""The run folder: named for its task, private, written whole, and a full disk said plainly."""

import csv
import errno
import json
import os
import sqlite3
import stat

import pytest

from r3con.artifacts.folder import Later, NotRows, RunDir, disk_full, is_disk_full, json_rows
from r3con.errors import ConfigError, DiskFull, InputError, ProviderError


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_run_folder_is_named_for_its_task_and_made_only_when_the_run_starts(tmp_path):
    run = RunDir.allocate(tmp_path, "How many ships sank in 1628?!")
    assert not run.path.exists()
    stamp, rest = run.path.name[:15], run.path.name[16:]
    assert stamp[8] == "-" and stamp.replace("-", "").isdigit()
    assert rest.startswith("how-many-ships-sank-in-1628-")
    assert RunDir.allocate(tmp_path, "???").path.name[16:].startswith("run-"), "a task with no letters"
    assert run.path != RunDir.allocate(tmp_path, "How many ships sank in 1628?!").path, "two runs a second"
    run.open()
    assert run.path.is_dir() and mode(run.path) == 0o700


def test_a_folder_that_exists_is_not_taken_over_unless_resumed(tmp_path):
    run = RunDir.create(tmp_path, "task")
    with pytest.raises(InputError):
        RunDir(run.path).open()
    with pytest.raises(ConfigError, match=f"is in use by process {os.getpid()} "):
        RunDir(run.path).open(new=False)  # the folder's lock is held while `run` writes it
    run.unlock()
    assert RunDir(run.path).open(new=False).path == run.path


def test_an_unwritable_out_folder_says_what_to_pass(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(InputError, match="pass a writable --out"):
        RunDir.create(blocker, "task")


def test_files_are_private_whole_and_in_their_subfolders(tmp_path):
    run = RunDir.create(tmp_path, "task")
    run.write_json("notes/round-1.json", {"1": "Ann Lee is 34 — née Stone"})
    run.write_text("answer.txt", "first")
    run.write_text("answer.txt", "second")
    assert json.loads((run.path / "notes" / "round-1.json").read_text()) == {"1": "Ann Lee is 34 — née Stone"}
    assert (run.path / "answer.txt").read_text() == "second"
    assert mode(run.path / "notes") == 0o700 and mode(run.path / "answer.txt") == 0o600
    assert [p.name for p in run.path.rglob(".*")] == [], "no temporary file is left behind"


def test_a_write_that_fails_leaves_the_previous_file(tmp_path, monkeypatch):
    run = RunDir.create(tmp_path, "task")
    run.write_text("result.json", "old")

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        run.write_text("result.json", "new")
    assert (run.path / "result.json").read_text() == "old" and [p.name for p in run.path.iterdir()] == ["result.json"]


def test_a_table_is_one_csv_with_every_field_and_nested_values_as_json(tmp_path):
    run = RunDir.create(tmp_path, "task")
    rows = [{"name": "Ann", "tags": ["a", "b"]}, {"name": "Bob", "age": 41, "where": {"city": "Oslo"}}]
    path = run.write_table_csv("People / 2024", rows)
    assert path == run.path / "records" / "people-2024.csv" and mode(path) == 0o600
    with path.open(newline="", encoding="utf-8") as fh:
        read = list(csv.DictReader(fh))
    assert list(read[0]) == ["name", "tags", "age", "where"]
    assert json.loads(read[0]["tags"]) == ["a", "b"] and json.loads(read[1]["where"]) == {"city": "Oslo"}
    assert read[1]["age"] == "41" and read[0]["age"] == ""


def test_a_large_table_and_a_large_manifest_are_written_as_they_would_be_whole(tmp_path):
    """Written a piece at a time (a large run's CSV and manifest are never one string), they are the text that
    csv over all rows, and json.dumps on one line, give."""
    run = RunDir.create(tmp_path, "task")
    rows = [{"n": i, "text": f"line {i}, \"quoted\"\nand é 中"} | ({"tags": [i]} if i % 3 else {}) for i in range(2500)]
    path = run.write_table_csv("big", rows)
    with path.open(newline="", encoding="utf-8") as fh:
        read = list(csv.DictReader(fh))
    assert len(read) == 2500 and list(read[0]) == ["n", "text", "tags"] and read[1]["tags"] == "[1]"
    assert read[2499]["text"] == rows[2499]["text"]
    manifest = {"task": "é 中", "documents": [{"doc": i, "title": f"t{i}", "x": [1.5, None, True]} for i in range(6000)],
                "settings": {"a": 1}, "path": tmp_path}
    path = run.write_json("manifest.json", manifest)
    assert path.read_text(encoding="utf-8") == json.dumps(manifest, ensure_ascii=False, default=str) + "\n"
    small = {"documents": [{"doc": 1}]}  # still indented for reading
    assert run.write_json("small.json", small).read_text() == json.dumps(small, indent=1) + "\n"
    notes = [{"doc": str(i), "note": f"n {i}", "refs": []} for i in range(6000)]  # a round's notes, as a generator
    assert run.write_json("round.json", iter(notes)).read_text() == json.dumps(notes, ensure_ascii=False) + "\n"
    reuse = {"mode": "exact", "documents": {str(i): {"relevance-1": {"reused": False}} for i in range(6000)}}
    assert run.write_json("reuse.json", reuse).read_text() == json.dumps(reuse, ensure_ascii=False) + "\n"
    assert run.write_json("few.json", iter(notes[:2])).read_text() == json.dumps(notes[:2], indent=1) + "\n"


def test_entries_are_written_as_the_list_they_make_each_time_the_file_is_written(tmp_path):
    """The manifest's entry per document is made as the manifest is written (`Later`), not held: the file
    has the list, made again at each write (a re-plan changes the parts), top-level or nested, from an
    iterator or as any JSON value."""
    run = RunDir.create(tmp_path, "task")
    parts = {1: 1, 2: 1}
    entries = Later(lambda: ({"doc": d, "parts": n} for d, n in parts.items()))
    manifest = {"task": "t", "documents": entries, "nested": {"again": entries}, "made": Later(lambda: {"n": len(parts)})}
    assert json.loads(run.write_json("manifest.json", manifest).read_text())["documents"] == [
        {"doc": 1, "parts": 1}, {"doc": 2, "parts": 1}]
    parts[2] = 3
    written = json.loads(run.write_json("manifest.json", manifest).read_text())
    assert written["documents"][1] == {"doc": 2, "parts": 3} and written["nested"]["again"] == written["documents"]
    assert written["made"] == {"n": 2}
    assert run.write_json("manifest.json", manifest).read_text().startswith("{\n")  # short: indented for reading
    parts.update((d, 1) for d in range(3, 5002))
    text = run.write_json("manifest.json", manifest).read_text()  # long: one line, an item at a time
    assert "\n" not in text[:-1] and len(json.loads(text)["documents"]) == 5001


def test_a_folder_without_calls_is_discarded_and_one_with_calls_kept(tmp_path):
    empty = RunDir.create(tmp_path, "a")
    assert empty.discard_if_unused() and not empty.path.exists()
    used = RunDir.create(tmp_path, "b")
    used.calls_path.write_text("{}\n")
    assert not used.discard_if_unused() and used.path.is_dir()


def test_seal_makes_what_others_wrote_private(tmp_path):
    run = RunDir.create(tmp_path, "task")
    (run.scratch_root / "out").mkdir(parents=True)
    loose = run.scratch_root / "out" / "data.csv"
    loose.write_text("x")
    os.chmod(loose, 0o644)
    run.seal()
    assert mode(loose) == 0o600 and mode(run.scratch_root) == 0o700


def test_a_full_disk_is_recognised_through_the_errors_it_caused(tmp_path):
    enospc = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "records.json"))
    assert is_disk_full(enospc) and is_disk_full(sqlite3.OperationalError("database or disk is full"))
    wrapped = ProviderError("could not write")
    wrapped.__cause__ = enospc
    assert is_disk_full(wrapped)
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied")) and not is_disk_full(ValueError("x"))
    error = disk_full(tmp_path, enospc)
    assert isinstance(error, DiskFull) and str(tmp_path / "records.json") in str(error)
    assert error.run_dir == tmp_path and disk_full(tmp_path, enospc, "populate").stage == "populate"
    assert str(error).endswith("free some space")
    assert "the LLM cache" in str(disk_full(tmp_path, sqlite3.OperationalError("database or disk is full")))
    assert f"the run folder {tmp_path}" in str(disk_full(tmp_path, OSError(errno.EDQUOT, "Disk quota exceeded")))


def test_json_rows_are_one_row_a_line_and_read_back_a_row_at_a_time(tmp_path):
    """`write_json_rows` writes JSON any parser reads, one row a line; `json_rows` reads it back row by row,
    tables with no rows included, and refuses another layout (NotRows), so the caller parses it whole."""
    tables = {"People": [{"name": "Ann\nLee", "quote": 'said "no"'}, {"name": "李"}], "Empty": [], "T, 2": [{"x": 1}]}
    run_dir = RunDir(tmp_path)
    path = run_dir.write_json_rows("records.json", tables)
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == tables and '{"name": "李"}' in text.splitlines()
    with path.open(encoding="utf-8") as lines:
        read = list(json_rows(lines))
    assert read == [("People", None), ("People", tables["People"][0]), ("People", tables["People"][1]),
                    ("Empty", None), ("T, 2", None), ("T, 2", {"x": 1})]
    for other in (json.dumps(tables), json.dumps(tables, indent=1), text[: len(text) // 2]):
        with pytest.raises(NotRows):
            list(json_rows(other.splitlines()))
