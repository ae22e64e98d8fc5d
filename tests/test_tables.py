"""Records as tables (tables.py): DataFrames, Parquet and records.duckdb in the run folder, and SQL over them."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from r3con.artifacts.tables import frames, query, write_tables
from r3con.errors import ConfigError, InputError

from .conftest import cli_in_process

TABLES = {
    "People (2025)": [
        {"name": "Ann Lee", "age": 34, "tags": ["a", "b"], "_id": "R1.1.1", "_doc": 1, "_title": "Registry",
         "_passage": "Ann Lee is 34", "_span": [0, 13], "_match": "exact"},
        {"name": "Bob [b]Stone[/b]", "age": "forty-one", "_id": "R2.1.1", "_doc": 2, "_title": "Letter",
         "_passage": "Bob, aged 41", "_span": None, "_match": "none"},
        {"name": "Cara Holm", "age": 30, "_id": "R3.1.1", "_doc": 3, "_title": "Census", "_passage": "Cara Holm, 29",
         "_span": [0, 13], "_match": "mismatch", "_mismatch": [{"field": "age", "record": "30", "passage": "29"}],
         "_ungrounded": ["age"]},
    ],
    "empty": [],
}


def test_frames_have_the_source_and_evidence_columns_and_one_type_per_column():
    (name, frame), = [(k, v) for k, v in frames(TABLES).items() if not v.empty]
    assert name == "people_2025"
    assert list(frame.columns) == ["name", "age", "tags", "_id", "_doc", "_title", "passage", "span_start",
                                   "span_end", "match", "unverified", "mismatch", "ungrounded"]
    assert frame["unverified"].tolist() == [False, True, True]  # not found, or a value differs
    assert frame["age"].tolist() == ["34", "forty-one", "30"]  # mixed: text, never a failed cast
    assert json.loads(frame["mismatch"][2])[0]["field"] == "age" and frame["ungrounded"][2] == '["age"]'
    assert frame["tags"][0] == '["a", "b"]' and frame["span_start"].tolist()[0] == 0


def test_record_types_whose_names_meet_as_identifiers_stay_apart():
    assert list(frames({"People": [{"a": 1}], "people": [{"a": 2}], "2025 data": [{"a": 3}]})) == [
        "people", "people_2", "t_2025_data"]


def test_parquet_and_duckdb_in_the_folder_answer_sql(tmp_path):
    written = write_tables(tmp_path, TABLES)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == ["records/people_2025.parquet", "records.duckdb"]
    import duckdb  # Parquet as any reader sees it (pandas would need pyarrow)

    parquet = str(tmp_path / "records" / "people_2025.parquet")
    assert duckdb.sql(f"SELECT _id FROM read_parquet('{parquet}')").fetchall() == [("R1.1.1",), ("R2.1.1",),
                                                                                   ("R3.1.1",)]
    columns, rows = query(tmp_path, "SELECT _id, passage FROM people_2025 WHERE unverified AND match = 'none'")
    assert columns == ["_id", "passage"] and rows == [("R2.1.1", "Bob, aged 41")]
    with pytest.raises(InputError, match="the query failed.*tables: people_2025"):
        query(tmp_path, "SELECT * FROM nowhere")


def test_a_folder_without_the_database_is_queried_from_records_json(tmp_path):
    (tmp_path / "records.json").write_text(json.dumps(TABLES))
    assert query(tmp_path, "SELECT count(*) FROM people_2025")[1] == [(3,)]


def test_a_run_writes_tables_the_report_links_and_sql_reads(fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old and lives in Oslo.")
    (docs / "b.txt").write_text("Letter\n\nBob Stone, aged 41, wrote to Ann Lee.")
    proc = cli_in_process("run", "How old are the people named?", str(docs), "--quiet", "--json",
                          "--base-url", fake_server.base_url, "--out", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    run_dir = json.loads(proc.stdout)["run_dir"]
    manifest = json.loads((tmp_path / "runs").glob("*/manifest.json").__next__().read_text())
    files = manifest["tables"]["files"]
    assert files[-1] == "records.duckdb" and all(f.endswith(".parquet") for f in files[:-1]) and files[:-1]
    table = files[0].split("/")[1].removesuffix(".parquet")
    report = (tmp_path / "runs").glob("*/report.html").__next__().read_text()
    assert '<a class="table-file" href="records.duckdb"><code>records.duckdb</code></a>' in report  # linked
    assert f'href="{files[0]}"' in report and f"r3con sql {run_dir}" in report
    as_json = cli_in_process("sql", run_dir, f"SELECT _id, _doc, match FROM {table} ORDER BY _id", "--json")
    assert as_json.returncode == 0, as_json.stderr
    rows = json.loads(as_json.stdout)
    assert rows and set(rows[0]) == {"_id", "_doc", "match"}
    as_csv = cli_in_process("sql", run_dir, f"SELECT _id FROM {table} ORDER BY _id", "--csv")
    assert as_csv.stdout.splitlines() == ["_id", *(r["_id"] for r in rows)]
    shown = cli_in_process("sql", run_dir, f"SELECT count(*) AS n FROM {table}")
    assert shown.returncode == 0 and str(len(rows)) in shown.stdout


def test_records_frame_gives_dataframes(fake_server, tmp_path):
    import asyncio

    import r3con
    from r3con.config import Settings

    settings = Settings.resolve(env={}, base_url=fake_server.base_url, out_dir=tmp_path, cache=False)
    result = asyncio.run(r3con.run("How old are the people named?", r3con.documents_from_texts(
        [("Registry", "Ann Lee is 34 years old."), ("Letter", "Bob Stone, aged 41, wrote to Ann Lee.")]), settings))
    dataframes = result.records_frame()
    assert dataframes and all(isinstance(f, pd.DataFrame) for f in dataframes.values())
    assert sum(len(f) for f in dataframes.values()) == sum(len(v) for v in result.records.values())


def test_without_duckdb_sql_says_so_before_any_work_and_a_run_still_finishes(fake_server, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "duckdb", None)
    proc = cli_in_process("sql", str(tmp_path / "no-such-run"), "SELECT 1")
    assert proc.returncode == 2 and "pip install 'r3con[sql]'" in proc.stderr
    assert write_tables(tmp_path, TABLES) == []
    with pytest.raises(ConfigError, match=r"r3con\[sql\]"):
        query(tmp_path, "SELECT 1")


@pytest.mark.parametrize("database", [True, False])
@pytest.mark.parametrize("sql", [
    "COPY people_2025 TO '{outside}/leak.csv'",
    "SELECT * FROM read_text('{secret}')",
    "SELECT * FROM read_csv('{secret}')",
    "ATTACH '{outside}/other.duckdb' AS other",
    "SET enable_external_access = true",
    "SELECT * FROM glob('{outside}/*')",
])
def test_sql_reads_and_writes_nothing_outside_the_run(tmp_path, sql, database):
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("the API key")
    write_tables(run, TABLES)
    if not database:  # a folder with Parquet files only: they are loaded before the query runs
        (run / "records.duckdb").unlink()
    with pytest.raises(InputError, match="the query failed: .*(Permission Error|Cannot change configuration)"):
        query(run, sql.format(outside=outside, secret=secret))
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert query(run, "SELECT count(*) FROM people_2025")[1] == [(3,)]


def test_a_table_made_a_column_at_a_time_is_the_frame_a_list_of_its_records_makes():
    import random

    from r3con.artifacts.tables import flat, table_frame

    def as_rows(rows):  # the frame as it was made: every record as a dict first, then one type a column
        frame = pd.DataFrame([flat(r) for r in rows])
        for column in frame.columns:
            kinds = {type(v) for v in frame[column].dropna()}
            if kinds and not kinds <= {int, float} and not kinds <= {bool} and kinds != {str}:
                frame[column] = frame[column].map(lambda v: None if v is None or v != v else str(v))
        return frame

    values = [1, -3, 2**70, 1.5, float("nan"), True, False, None, "a", "Ünï", "", "2024-01-02", [1, 2], {"a": 1}, 0.0]
    pools = [values, [1, 2, None], [True, False, None], ["x", None], [1.5, 2, None], [None]]
    rng = random.Random(7)
    for _ in range(400):  # records missing fields, fields of every JSON kind, mixed, empty, none at all
        rows = []
        for _ in range(rng.randint(0, 6)):
            fields = rng.sample(["a", "b", "_span", "_match", "_passage"], rng.randint(0, 5))
            rows.append({k: rng.choice([[1, 5], None, "x"]) if k == "_span" else rng.choice(rng.choice(pools))
                         for k in fields})
        pd.testing.assert_frame_equal(table_frame(rows), as_rows(rows), check_exact=True)


def _battery(rng, count):
    values = [1, -3, 2**70, 1.5, float("nan"), True, False, None, "a", "Ünï", "", "2024-01-02", [1, 2], {"a": 1}, 0.0]
    pools = [values, [1, 2, None], [1, 2], [True, False, None], [True, False], ["x", None], ["x", "y"],
             [1.5, 2, None], [None], [7, "7"]]
    names = ["a", "b", "A", "c d", 'q"t', "", "_span", "_match", "_passage"]
    chosen = rng.sample(names, rng.randint(1, 5))
    pool = {k: rng.choice(pools) for k in chosen}
    rows = []
    for _ in range(count):
        fields = [k for k in chosen if rng.random() < 0.9]
        rows.append({k: rng.choice([[1, 5], None, "x"]) if k == "_span" else rng.choice(pool[k]) for k in fields})
        if rng.random() < 0.02:
            rows.append("not a record")
    return rows


def test_a_table_in_chunks_holds_the_frame_the_whole_table_makes():
    import random

    from r3con.artifacts.tables import _Columns, table_frame

    rng = random.Random(11)
    chunked = 0
    for _ in range(300):
        rows = _battery(rng, rng.randint(1, 30))
        columns = _Columns.of(rows)
        if not columns.chunked or not columns.kinds:
            continue
        chunked += 1
        records = [r for r in rows if isinstance(r, dict)]
        parts = [columns.frame(records[at:at + 4]) for at in range(0, len(records), 4)]
        whole = pd.concat(parts, ignore_index=True)
        pd.testing.assert_frame_equal(whole, table_frame(rows), check_exact=True)
    assert chunked > 100  # most tables are written in chunks; the rest from one frame


def test_tables_written_in_chunks_are_the_tables_one_frame_writes(tmp_path, monkeypatch):
    import random

    import duckdb

    from r3con.artifacts import tables as module

    rng = random.Random(5)
    chunked = 0
    for n in range(120):
        rows = _battery(rng, rng.randint(0, 25))
        columns = module._Columns.of(rows)
        chunked += columns.chunked and bool(columns.kinds) and columns.count > 3
        seen = []
        for size in (10**9, 3):  # one frame; then 3 records at a time
            monkeypatch.setattr(module, "CHUNK_ROWS", size)
            folder = tmp_path / f"{n}-{size}"
            folder.mkdir()
            write_tables(folder, {"People": rows})
            with duckdb.connect(str(folder / "records.duckdb"), read_only=True) as con:
                names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
                seen.append([(con.execute(f'DESCRIBE "{t}"').fetchall(), con.execute(f'SELECT * FROM "{t}"').fetchall())
                             for t in names])
        assert repr(seen[0]) == repr(seen[1])  # the same columns, types and values (NaN included)
    assert chunked > 20  # most were written in chunks


def test_parquet_in_row_groups_holds_every_record_in_order(tmp_path, monkeypatch):
    import duckdb

    from r3con.artifacts import tables as module

    rows = [{"name": f"Person {i}", "age": i, "_doc": i, "_title": f"d{i}"} for i in range(5000)]
    monkeypatch.setattr(module, "ROW_GROUP", 2048)  # the copy writes a row group at a time, not the whole table
    monkeypatch.setattr(module, "CHUNK_ROWS", 1000)
    write_tables(tmp_path, {"People": rows})
    [parquet] = (tmp_path / "records").glob("*.parquet")
    with duckdb.connect() as con:
        groups = con.execute(f"SELECT count(DISTINCT row_group_id) FROM parquet_metadata('{parquet}')").fetchone()[0]
        read = con.execute(f"SELECT name, age, _doc FROM '{parquet}'").fetchall()
    assert groups >= 2  # DuckDB's row groups are whole vectors of 2,048 rows
    assert read == [(f"Person {i}", i, i) for i in range(5000)]
