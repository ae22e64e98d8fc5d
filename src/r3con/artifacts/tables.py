"""Records as tables: pandas DataFrames, Parquet files and a DuckDB database in the run folder, and SQL over them.

One table per record type, its model-given fields first, then `_id`, `_doc`, `_part`, `_title`,
`passage`, `span_start`, `span_end`, `match`, and the flags: `mismatch` (the values that differ from the
passage's, as JSON), `ungrounded` (the fields whose value is not in the document, as JSON) and
`unverified` (the passage was not found, or differs in a value). Parquet and the database need DuckDB
(`pip install 'r3con[sql]'`); the DataFrames only pandas.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, InputError

if TYPE_CHECKING:
    import pandas as pd

DATABASE = "records.duckdb"
FLAGGED = ("none", "mismatch")  # the passage outcomes that are not evidence (stages/_evidence.py)
NEEDS_DUCKDB = "needs DuckDB, which is not installed: pip install 'r3con[sql]'"


def require_duckdb(what: str) -> Any:
    """The duckdb module, or a ConfigError saying `what` needs it (before any work is done)."""
    try:
        import duckdb
    except ImportError:
        raise ConfigError(f"{what} {NEEDS_DUCKDB}") from None
    return duckdb


def table_name(name: str) -> str:
    """A record type's name as an SQL identifier (and a file name): lower case letters, digits and _."""
    slug = re.sub(r"[^0-9a-z_]+", "_", name.lower()).strip("_")[:60] or "records"
    return f"t_{slug}" if slug[0].isdigit() else slug


def flat(row: Mapping[str, Any]) -> dict[str, Any]:
    """One record as a table row: the span in two columns, the passage and match named plainly, nested values as JSON."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key == "_span":
            span = value if isinstance(value, list | tuple) and len(value) == 2 else (None, None)
            out["span_start"], out["span_end"] = span
        elif key in ("_passage", "_match", "_mismatch", "_ungrounded"):
            out[key[1:]] = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
        else:
            out[key] = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
    if "_match" in row:
        out["unverified"] = row.get("_match") in FLAGGED
    return out


def frames(tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, pd.DataFrame]:
    """{table name: DataFrame} of the records, one row per record, columns as in the module's docstring."""
    return dict(_each_frame(tables))


def _each_frame(tables: Mapping[str, Iterable[Mapping[str, Any]]]) -> Iterator[tuple[str, pd.DataFrame]]:
    """`frames`' tables one at a time, each made when it is asked for."""
    taken: list[str] = []
    for name, rows in tables.items():
        taken.append(unique_name(table_name(name), taken))
        yield taken[-1], table_frame(rows)


def table_frame(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One table's records as a DataFrame, as `pd.DataFrame([flat(r) for r in rows])` makes it (a column a field
    in the order first seen, NaN where a record lacks it), then one type a column: numbers stay numbers,
    anything mixed becomes text. Made a column at a time as the records are read, each record's values kept
    and not the record, so the records' dicts are never all held at once beside the frame (docs/scale.md)."""
    import numpy as np
    import pandas as pd

    columns: dict[str, list[Any]] = {}
    count = 0
    for record in rows:
        if not isinstance(record, Mapping):
            continue
        for key, value in flat(record).items():
            column = columns.get(key)
            if column is None:
                column = columns[key] = [np.nan] * count
            column.append(value)
        count += 1
        for column in columns.values():
            if len(column) < count:
                column.append(np.nan)
    # no record with a field (or none at all): a row each and no column, as the list of dicts gives
    frame = pd.DataFrame(columns, index=pd.RangeIndex(count)) if columns else pd.DataFrame([{}] * count)
    columns.clear()
    for column in frame.columns:
        values = frame[column].dropna()
        kinds = {type(v) for v in values}
        if kinds and not kinds <= {int, float} and not kinds <= {bool} and kinds != {str}:
            frame[column] = frame[column].map(lambda v: None if v is None or v != v else str(v))
    return frame


def unique_name(name: str, taken: Collection[str]) -> str:
    """`name`, or `name_2`, `name_3`... the first not in `taken` ("People" and "people" both become people: the
    second is people_2)."""
    key, n = name, 2
    while key in taken:
        key, n = f"{name}_{n}", n + 1
    return key


def write_tables(folder: Path, tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[Path]:
    """records/<table>.parquet for each record type and records.duckdb holding them; [] without DuckDB."""
    try:
        import duckdb
    except ImportError:
        return []
    written: list[Path] = []
    database = folder / DATABASE
    database.unlink(missing_ok=True)
    (folder / "records").mkdir(exist_ok=True)
    # on one thread: DuckDB's copy to Parquet on more than one holds more batches at once, and one thread
    # writes the tables no slower (docs/scale.md)
    with duckdb.connect(str(database), config={"threads": 1}) as con:
        taken: list[str] = []
        for name, rows in tables.items():
            taken.append(unique_name(table_name(name), taken))
            if not _write_table(con, taken[-1], rows):
                continue
            target = folder / "records" / f"{taken[-1]}.parquet"
            con.execute("CHECKPOINT")  # the table to the file first, its memory freed: the copy reads it from there
            con.execute(f"COPY \"{taken[-1]}\" TO '{_quoted(target)}' (FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP})")
            written.append(target)
    return [*written, database]


CHUNK_ROWS = 5_000  # records a table is written from at a time (`_write_table`)
# records a Parquet row group holds: the copy keeps one in memory as it writes (DuckDB's default, 122,880, is a
# whole table of a large run's records); with the checkpoint before it, the table is read from its file
ROW_GROUP = 10_000


def _write_table(con: Any, name: str, rows: Iterable[Mapping[str, Any]]) -> bool:
    """Table `name` in `con` holding `rows` as `table_frame(rows)` does; False (and no table) when it has no
    column. Written `CHUNK_ROWS` records at a time, each column of the type the whole table's frame gives it
    (`_Columns`): one frame of a large run's records would be the stage's largest holder (docs/scale.md)."""
    columns = _Columns.of(rows)
    if not columns.kinds:
        return False
    if columns.count <= CHUNK_ROWS or not columns.chunked:  # small, or a column whose type only the whole frame tells
        _over(con, table_frame(rows), f'CREATE TABLE "{name}" AS SELECT * FROM frame')
        return True
    con.execute(f'CREATE TABLE "{name}" ({", ".join(f"{_ident(c)} {columns.sql(c)}" for c in columns.kinds)})')
    chunk: list[Mapping[str, Any]] = []
    for record in rows:
        if isinstance(record, Mapping):
            chunk.append(record)
        if len(chunk) == CHUNK_ROWS:
            _over(con, columns.frame(chunk), f'INSERT INTO "{name}" SELECT * FROM frame')
            chunk.clear()
    if chunk:
        _over(con, columns.frame(chunk), f'INSERT INTO "{name}" SELECT * FROM frame')
    return True


def _over(con: Any, frame: pd.DataFrame, sql: str) -> None:
    """`sql` run with `frame` as the table `frame`."""
    con.register("frame", frame)
    con.execute(sql)
    con.unregister("frame")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_SQL = {"int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN", "bool?": "BOOLEAN", "str": "VARCHAR", "text": "VARCHAR"}


class _Columns:
    """A table's columns as `table_frame` types them, from one pass over its records: for each (in the order
    first seen) the kinds of its values and whether a record lacks it or holds null, which decide its type:
    "int" (whole numbers, none missing), "float" (numbers), "bool" (none missing), "bool?" (booleans and
    nulls), "str" (strings), "text" (anything mixed, written as text). A column of nulls alone, whole numbers
    past 64 bits, an empty name or two names DuckDB takes for one leave the table to be written from one frame (`chunked`)."""

    def __init__(self) -> None:
        self.kinds: dict[str, set[type]] = {}
        self.missing: set[str] = set()
        self.count = 0
        self.chunked = True

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> _Columns:
        columns = cls()
        seen: dict[str, int] = {}
        for record in rows:
            if not isinstance(record, Mapping):
                continue
            columns.count += 1
            for key, value in flat(record).items():
                seen[key] = seen.get(key, 0) + 1
                kinds = columns.kinds.setdefault(key, set())
                if value is None or isinstance(value, float) and value != value:
                    columns.missing.add(key)
                elif type(value) is int and not -2**63 <= value < 2**63:
                    columns.chunked = False
                else:
                    kinds.add(type(value))
        columns.missing.update(k for k, n in seen.items() if n < columns.count)
        folded = {k.lower() for k in columns.kinds}
        if len(folded) < len(columns.kinds) or not all(columns.kinds) or not all(columns.kinds.values()):
            columns.chunked = False
        return columns

    def kind(self, column: str) -> str:
        kinds, missing = self.kinds[column], column in self.missing
        if kinds <= {int}:
            return "float" if missing else "int"
        if kinds <= {int, float}:
            return "float"
        if kinds <= {bool}:
            return "bool?" if missing else "bool"
        return "str" if kinds == {str} else "text"

    def sql(self, column: str) -> str:
        return _SQL[self.kind(column)]

    def frame(self, records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
        """`records`' columns, each of the type the whole table gives it (its values as `table_frame` holds them)."""
        import numpy as np
        import pandas as pd

        rows = [flat(r) for r in records]
        text = pd.Series(["", None]).dtype  # what pandas makes of strings: `str` (NaN for null) from pandas 3, else object
        data: dict[str, Any] = {}
        for column in self.kinds:
            kind = self.kind(column)
            values = [row.get(column, np.nan) for row in rows]
            if kind == "int":
                data[column] = np.array(values, dtype=np.int64)
            elif kind == "float":
                data[column] = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
            elif kind == "bool":
                data[column] = np.array(values, dtype=bool)
            elif kind == "text":
                data[column] = pd.Series([None if v is None or v != v else str(v) for v in values], dtype=text)
            elif kind == "str":
                data[column] = pd.Series(values, dtype=text)
            else:  # "bool?": the values as they are, nulls as None or NaN
                data[column] = pd.Series(values, dtype=object)
        return pd.DataFrame(data, index=pd.RangeIndex(len(rows)))


def write_parquet(target: Path, rows: Sequence[Mapping[str, Any]]) -> Path | None:
    """`rows` as one Parquet file (an evaluation's summary); None without DuckDB or without rows."""
    try:
        import duckdb
    except ImportError:
        return None
    (frame,) = frames({"rows": rows}).values()
    if frame.empty:
        return None
    with duckdb.connect() as con:
        con.register("frame", frame)
        con.execute(f"COPY frame TO '{_quoted(target)}' (FORMAT parquet)")
    return target


def load_records(run_dir: Path) -> dict[str, pd.DataFrame]:
    """The DataFrames of a run folder's records (from records.json)."""
    path = Path(run_dir) / "records.json"
    if not path.is_file():
        raise InputError(f"{run_dir} holds no records.json: pass a run folder whose population stage finished")
    try:
        tables = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} cannot be read ({exc}); the run folder is damaged") from None
    return frames({str(k): v for k, v in tables.items() if isinstance(v, list)})


def query(folder: Path, sql: str, limit: int | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run `sql` over a run folder's records (records.duckdb, else its Parquet files or records.json) or
    an evaluation's results (every .parquet file under `folder`, each a table by its file name); with `limit`,
    at most that many rows are fetched (one more says there were more)."""
    duckdb = require_duckdb("r3con sql")
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder} is no folder: pass a run folder (r3con-runs/...) or an evaluation's report folder")
    database = folder / DATABASE
    con = duckdb.connect(str(database), read_only=True) if database.is_file() else duckdb.connect()
    try:
        if not database.is_file():
            parquet = sorted(folder.glob("*.parquet")) + sorted(folder.glob("records/*.parquet"))
            for path in parquet:
                # a table, not a view: the query runs with file access off, so the files are read now
                con.execute(f"CREATE TABLE \"{table_name(path.stem)}\" AS SELECT * FROM read_parquet('{_quoted(path)}')")
            if not parquet and (folder / "records.json").is_file():
                for name, frame in load_records(folder).items():
                    if not frame.empty:
                        con.register(name, frame)
            if not parquet and not (folder / "records.json").is_file():
                raise InputError(f"{folder} holds no records or results to query: pass a run folder or an "
                                 "evaluation's report folder")
        # the query reads nothing but these tables: no file (COPY ... TO, read_text, ATTACH), no extension, no
        # setting changed back (docs/records.md)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        try:
            cursor = con.execute(sql)
            columns = [d[0] for d in cursor.description or []]
            return columns, cursor.fetchall() if limit is None else cursor.fetchmany(limit + 1)
        except duckdb.Error as exc:
            tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
            raise InputError(f"the query failed: {str(exc).splitlines()[0]} (tables: {', '.join(tables)})") from None
    finally:
        con.close()


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
