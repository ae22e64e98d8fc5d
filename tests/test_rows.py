"""artifacts.rows: a table's records on disk, read back as the same records, held as 16 bytes each."""

import json
import pickle
import tracemalloc

import pytest

from r3con.artifacts.jsonstream import json_pieces
from r3con.artifacts.rows import SpooledRows
from r3con.corpus.spool import TextSpool
from r3con.errors import ConfigError
from r3con.sandbox._sandbox import _once

RECORDS = [
    {"_id": "r1", "name": "Ann Lee", "age": 41, "_span": [3, 19], "_match": "exact", "score": 0.5},
    {"_id": "r2", "name": "Zoë \u201cquoted\u201d \\ back", "age": None, "tags": ["a", {"b": [1, 2.25]}]},
    {"_id": "r3", "name": "\U0001f600, a lone \udc80 and \\udc80 as text", "big": 10**30, "neg": -7},
]


def test_records_read_back_as_they_were_written_each_time_a_fresh_dict():
    rows = SpooledRows(TextSpool("the records"), RECORDS)
    assert len(rows) == 3
    assert list(rows) == RECORDS and rows[0] == RECORDS[0] and rows[-1] == RECORDS[-1]
    assert rows[1:] == RECORDS[1:] and list(rows[0]) == list(RECORDS[0]), "the fields keep their order"
    first = rows[0]
    first["name"] = "changed"
    assert rows[0]["name"] == "Ann Lee", "a reader's change to what it was given is not kept"
    with pytest.raises(IndexError):
        rows[3]


def test_a_table_equals_any_sequence_of_the_same_records_and_pickles_as_a_tuple():
    rows = SpooledRows(TextSpool(), RECORDS)
    assert rows == RECORDS and rows == tuple(RECORDS) and tuple(RECORDS) == rows
    assert rows != RECORDS[:2] and rows != [*RECORDS[:2], {"_id": "r3"}] and rows != "abc"
    assert SpooledRows(TextSpool()) == () and not SpooledRows(TextSpool())
    copy = pickle.loads(pickle.dumps(rows))
    assert type(copy) is tuple and copy == tuple(RECORDS)
    assert repr(rows) == "SpooledRows(3 records)"


def test_tables_of_one_spool_take_each_record_where_it_was_written():
    spool = TextSpool()
    where = [SpooledRows.write(spool, r) for r in RECORDS]
    kept, other = SpooledRows(spool), SpooledRows(spool)
    kept.adopt(*where[2])
    kept.adopt(*where[0])
    other.adopt(*where[1])
    assert list(kept) == [RECORDS[2], RECORDS[0]] and list(other) == [RECORDS[1]]


def test_a_table_holds_where_its_records_are_not_the_records():
    spool = TextSpool()
    record = {"_id": "x", "passage": "p" * 900, "values": list(range(20))}
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        rows = SpooledRows(spool, (dict(record, _id=str(i)) for i in range(5_000)))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(rows) == 5_000 and rows[4_321]["_id"] == "4321"
    assert held < 250_000, f"{held:,} B for 5,000 records of 1 KB: the records were kept"  # 16 B each, and arrays


def test_written_as_json_an_item_at_a_time_and_sent_to_the_sandbox_once():
    rows = SpooledRows(TextSpool(), RECORDS)
    whole = "".join(json_pieces({"people": rows}, lambda value, top: True))
    assert json.loads(whole) == {"people": RECORDS}
    assert "".join(json_pieces({"people": rows}, lambda value, top: top)) == json.dumps(
        {"people": RECORDS}, ensure_ascii=False), "not split: as json.dumps writes the list"
    frame = _once({"records": {"people": rows}, "people": rows}, {"people": rows})
    assert frame["aliases"] == {"people": ["records", "people"]}
    assert frame["dataframes"] == {"people": {"at": ["records", "people"]}}


def test_an_unwritable_tmpdir_names_what_could_not_be_written(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="could not write the records to a temporary file in .*TMPDIR"):
        TextSpool("the records")


def test_a_full_disk_while_records_are_written_is_a_one_line_error_that_names_them(monkeypatch):
    import errno
    import os

    from r3con.errors import DiskFull

    rows = SpooledRows(TextSpool("the records"), RECORDS[:1])

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(DiskFull, match="could not write the records to a temporary file in .*: No space left on "
                                       "device; free space there or point TMPDIR at a disk with room"):
        rows.append(RECORDS[1])
    assert list(rows) == RECORDS[:1], "what was written before stays"
