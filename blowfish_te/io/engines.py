"""The engines behind :func:`blowfish_te.io.histogram`: each returns the grouped rows
[status per axis, cell per axis, count] and a function giving example values of a refused axis.

The binning is the same SQL (:meth:`Axis.sql`) in DuckDB and Spark, and the same rules in numpy.
Only the grouped counts (at most a few rows per cell) leave the engine, never the records.
"""

from __future__ import annotations

import csv
import functools
import math
import pathlib
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .._csv import is_number
from .domain import DUCKDB, MISSING, SPARK, Axis, Dialect, Grid, as_grid
from .sources import RecordError, SqlQuery, check_unique_columns, csv_header, csv_lines, files_of, kind, suffix

__all__ = ["check_files", "duckdb_groups", "duckdb_marginals", "memory_groups", "memory_marginals", "spark_groups", "spark_marginals"]

_EXAMPLES = 3
_SPARK_FORMATS = "the Spark engine reads CSV and Parquet files; use DuckDB for Arrow IPC"
#: Seconds between two readings of DuckDB's query progress (the progress reporter rate-limits its lines).
POLL_SECONDS = 0.5
_DISTINCT_FIRST = 1 << 20  # group raw values before binning when valid records hold at most this many
#: Status codes fit in one base-6 digit per axis of the accounting key.
_STATUS_BASE = 6


def _query(grid: Grid, dialect: Dialect, kinds: dict[str, str], table: str, distinct: bool = False,
           status_key: bool = False) -> str:
    """The binning query over ``table``: columns s0.., c0.. (status and cell of every axis); each
    record's values are parsed once, in an inner query that keeps the raw columns.

    Every row carries its record count as column ``n``. ``distinct`` bins each distinct
    combination of raw values once: binning is a function of the raw values, so the counts are
    the same, and the text parsing (the expensive part on CSV) runs per distinct value instead of
    per record. That pays when the values are few (ages: 0.8 s -> 0.4 s for 10^7 CSV records)
    and costs when nearly every record differs (continuous values: 1.6 s -> 3.6 s).

    With ``status_key`` the statuses come as one column ``skey``, Σ s_a·6^a, which is 0 without
    evaluating any axis's status where every axis's cheap in-domain test holds (most records:
    about a third of the binning's time on 10^7 records of 12 columns)."""
    parse, binned, statuses = [], [], []
    for a, axis in enumerate(grid.axes):
        p, status, cell = axis.sql(dialect, kinds[axis.column], f"a{a}")
        parse += p
        statuses.append(status)
        binned.append(f"{cell} AS c{a}")
    if status_key:
        fast = " AND ".join(f"({axis.ok_sql(f'a{a}')})" for a, axis in enumerate(grid.axes))
        key = " + ".join(f"CAST({status} AS BIGINT) * {_STATUS_BASE**a}" for a, status in enumerate(statuses))
        binned.insert(0, f"CASE WHEN {fast} THEN 0 ELSE {key} END AS skey")
    else:
        binned = [f"{status} AS s{a}" for a, status in enumerate(statuses)] + binned
    columns = ", ".join(dialect.ident(c) for c in grid.columns)
    if distinct:
        table = f"(SELECT {columns}, count(*) AS n FROM {table} GROUP BY {columns})"
        columns, binned = f"{columns}, n", binned + ["n"]
    else:
        binned.append("1 AS n")
    return f"SELECT {', '.join(binned)} FROM (SELECT {', '.join(parse)}, {columns} FROM {table})"


def _few_values(grid: Grid) -> bool:
    """Whether in-domain records hold few distinct raw values (integer ranges, levels), so that
    grouping them first leaves little to bin; continuous bins are binned record by record."""
    return math.prod(axis.valid_values for axis in grid.axes) <= _DISTINCT_FIRST


def _check_columns(columns, grid: Grid, where: str) -> None:
    check_unique_columns(columns, where)
    missing = [c for c in grid.columns if c not in columns]
    if missing and columns and all(_number_like(c) for c in columns):
        raise ValueError(f"{where}: its first line ({', '.join(map(str, columns[:5]))}) holds values, not column names: "
                         f"a file of records needs a header line naming its columns (here {', '.join(map(repr, missing))})")
    if missing:
        raise ValueError(f"{where}: no column {', '.join(map(repr, missing))}; columns: {', '.join(map(str, columns))}")


def _number_like(name) -> bool:
    """Whether a header field reads as a number (or is blank): a record's value, not a column's name."""
    text = str(name).strip()
    return text == "" or is_number(text)


def check_files(source: str | pathlib.Path | Iterable[str | pathlib.Path], domain: Axis | Sequence[Axis] | Grid,
                engine: str = "duckdb") -> list[str]:
    """The files of ``source`` (a path, a glob or a list of them), checked without reading a
    record: they exist, are of one format ``engine`` (``"duckdb"`` or ``"spark"``) reads, and each
    one's header (a CSV file's first line, a Parquet file's footer, an Arrow IPC file's schema)
    names every column of ``domain`` once. What is refused here depends on no record."""
    if engine not in ("duckdb", "spark"):
        raise ValueError(f"engine must be 'duckdb' or 'spark' (the engines that read files), got {engine!r}")
    grid = as_grid(domain)
    files = files_of(source)
    form = kind(suffix(files[0]))
    if engine == "spark":
        if form == "arrow":
            raise ValueError(_SPARK_FORMATS)
        _spark_session_class()
    elif form == "arrow":
        _arrow()
    for path in files:
        _check_columns(_header(path, form), grid, f"source {path}")
    return files


def _header(path: str, form: str) -> list[str]:
    """The column names of one file, from its header alone."""
    if form == "csv":
        try:
            return csv_header(path)
        except (UnicodeDecodeError, csv.Error) as err:
            raise ValueError(f"source {path}: its first line is not a CSV header in UTF-8 ({err})") from None
    duckdb = _duckdb()
    try:
        if form == "parquet":
            with duckdb.connect() as con:
                return list(con.read_parquet(path).columns)
        import pyarrow.dataset as ds

        return list(ds.dataset(path, format="ipc").schema.names)
    except (duckdb.Error, ValueError, OSError) as err:  # duckdb and pyarrow raise their own types
        raise ValueError(f"source {path}: cannot read its {form} schema ({str(err).strip().splitlines()[0]})") from None


def _with_skipped_lines(groups: np.ndarray, grid: Grid, files: list[str] | None) -> np.ndarray:
    """Add the blank lines of CSV ``files`` that the reader skipped as missing records: the
    file's lines after the header minus the rows read, at most its blank lines."""
    if not files:
        return groups
    lines = sum(csv_lines(f, blanks=False)[0] for f in files)
    skipped = lines - int(groups[:, -1].sum())
    if skipped == 0:
        return groups
    blanks = sum(csv_lines(f)[1] for f in files)
    if not 0 <= skipped <= blanks:
        raise RecordError(
            f"the CSV files hold {lines} line(s) after their headers ({blanks} blank) but the reader found "
            f"{int(groups[:, -1].sum())} record(s); quoted values with line breaks are not supported"
        )
    d = len(grid.axes)
    return np.concatenate([groups, np.array([[MISSING] * d + [0] * d + [skipped]], dtype=np.int64)])


# -- DuckDB -----------------------------------------------------------------------------------


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise ImportError("the DuckDB engine needs duckdb: pip install duckdb") from None
    return duckdb


def has_pyarrow() -> bool:
    """Whether pyarrow can be imported (DuckDB reads dicts, Polars frames and IPC files through it)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _arrow():
    try:
        import pyarrow
    except ImportError:
        raise ImportError("the DuckDB engine reads dicts of columns, Polars DataFrames and Arrow IPC files through "
                          "pyarrow: pip install pyarrow (or 'blowfish_te[evaluation]'), or use engine='memory' for "
                          "records in memory") from None
    return pyarrow


def _duckdb_relation(source, con, doubles=()):
    """A relation over the records, the CSV files it reads (to find skipped blank lines), and a
    name; CSV columns named in ``doubles`` are parsed as DOUBLE by the reader, the others read as
    text."""
    duckdb = _duckdb()
    if isinstance(source, duckdb.DuckDBPyRelation):
        return source, None, "relation"
    if isinstance(source, SqlQuery):
        return con.sql(source.text), None, "query"
    if isinstance(source, (str, list, tuple)) or hasattr(source, "__fspath__"):
        if isinstance(source, (list, tuple)) and source and not isinstance(source[0], str) and not hasattr(source[0], "__fspath__"):
            raise TypeError(f"source: a list must hold file paths, got {type(source[0]).__name__}")
        files = files_of(source)
        form = kind(suffix(files[0]))
        if form == "csv":
            headers = [csv_header(path) for path in files]
            for path, header in zip(files, headers):
                check_unique_columns(header, f"source {path}")
            delim = "\t" if ".tsv" in files[0].lower() else ","
            # a column some file lacks is left to the columns' check, which names it
            types = {column: "DOUBLE" for column in doubles if all(column in header for header in headers)} or None
            rel = con.read_csv(files, header=True, all_varchar=True, null_padding=True, delimiter=delim, dtype=types)
            return rel, files, files[0]
        if form == "parquet":
            return con.read_parquet(files), None, files[0]
        _arrow()
        import pyarrow.dataset as ds

        return con.from_arrow(ds.dataset(files, format="ipc")), None, files[0]
    names = _column_names(source)
    if names is not None:  # readers rename or drop a repeated name: refuse it before they do
        check_unique_columns(names, f"source {type(source).__name__}")
    if isinstance(source, dict):
        source = _arrow().table({k: np.asarray(v) for k, v in source.items()})
    elif type(source).__module__.startswith("polars"):
        _arrow()
    try:
        if type(source).__module__.startswith("pandas"):
            return con.from_df(source), None, "DataFrame"
        return con.from_arrow(source.to_arrow() if hasattr(source, "to_arrow") else source), None, "table"
    except Exception as err:  # duckdb raises its own types for what it cannot scan
        raise TypeError(f"source: cannot read {type(source).__name__} as records ({err})") from None


def _kinds_duckdb(rel) -> dict[str, str]:
    """Each column's kind (:data:`~blowfish_te.io.domain.COLUMN_KINDS`) from its DuckDB type."""
    return {name: _column_kind(str(t).split("(")[0], _DUCKDB_EXACT, _DUCKDB_FLOATS) for name, t in zip(rel.columns, rel.types)}


def _column_kind(type_name: str, exact, floats) -> str:
    return "exact" if type_name in exact else "float" if type_name in floats else "text"


_DUCKDB_EXACT = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
                 "UHUGEINT", "DECIMAL", "BOOLEAN"}
_DUCKDB_FLOATS = {"FLOAT", "DOUBLE"}


def _reporting(con, run, progress):
    """``run()``, while a thread passes DuckDB's progress of the running query (a fraction) to
    ``progress`` twice a second.

    DuckDB measures a query's progress only while its progress bar is enabled (else
    ``query_progress()`` is -1): it is enabled for the query with its printing off (standard output
    belongs to the caller: the CLI prints JSON there), and a caller's connection gets its own
    settings back. A DuckDB without ``query_progress`` (1.1.0) runs the query without
    progress and says so once; an error while polling stops the polling, never the query."""
    if progress is None:
        return run()
    if not hasattr(con, "query_progress"):
        _say_no_progress_once()
        return run()
    restore = _show_progress(con)
    stop = threading.Event()

    def poll():
        while not stop.wait(POLL_SECONDS):
            try:
                percent = con.query_progress()
            except Exception:  # noqa: BLE001 - a reader's error must not print a thread's traceback
                return
            if percent >= 0:
                progress(min(percent, 100.0) / 100)

    thread = threading.Thread(target=poll, name="blowfish_te-progress", daemon=True)
    thread.start()
    try:
        return run()
    finally:
        stop.set()
        thread.join()
        restore()


def _show_progress(con):
    """Enable DuckDB's progress measure on ``con`` without its printed bar; returns what restores
    the two settings as they were."""
    names = ("enable_progress_bar", "enable_progress_bar_print")
    try:
        before = [con.execute(f"SELECT current_setting('{name}')").fetchall()[0][0] for name in names]
        con.execute("SET enable_progress_bar = true")
        con.execute("SET enable_progress_bar_print = false")
    except Exception:  # noqa: BLE001 - a connection that cannot say its settings: leave them alone
        return lambda: None

    def restore():
        for name, value in zip(names, before):
            con.execute(f"SET {name} = {'true' if value else 'false'}")

    return restore


@functools.cache
def _say_no_progress_once() -> None:
    sys.stderr.write(f"note: DuckDB {_duckdb().__version__} cannot report a query's progress (later versions "
                         "can): counting without progress\n")


def _duckdb_connection(connection):
    if connection is None:
        # DuckDB draws its own progress bar on standard output for long queries: ours goes through
        # ``progress``, and standard output belongs to the caller (the CLI prints JSON there)
        connection = _duckdb().connect()
        connection.execute("SET enable_progress_bar_print = false")
    return connection


def _is_csv(source) -> bool:
    if isinstance(source, (list, tuple)) and source and not isinstance(source[0], str) and not hasattr(source[0], "__fspath__"):
        return False
    return (isinstance(source, (str, list, tuple)) or hasattr(source, "__fspath__")) and kind(suffix(files_of(source)[0])) == "csv"


def _counted_duckdb(source, grid: Grid, connection, count, progress=None):
    """``count(con, view, kinds, csv_files, examples)`` over the records in DuckDB.

    CSV columns that an axis reads as numbers are first parsed as DOUBLE by DuckDB's reader: that
    takes about half the time of parsing their text in SQL (10⁷ records of 12 columns counted into
    all 2-way marginals: 7.9 s before, 4.3 s after). The reader either refuses a field (a conversion
    error: the count then runs again over the text) or reads the double that
    ``TRY_CAST(TRIM(field) AS DOUBLE)`` reads, an empty field as NULL, so every record falls in the
    class the text rules give it (the tests check this on tricky fields, DuckDB 1.1 to 2.0).
    Refused values are shown from their text."""
    con = _duckdb_connection(connection)
    doubles = [axis.column for axis in grid.axes if axis.reads_numbers] if _is_csv(source) else []
    if doubles:
        duckdb = _duckdb()
        try:
            typed = _duckdb_records(source, grid, con, doubles)
            return count(*typed[:4], _text_examples(source, grid, con))
        except (duckdb.ConversionException, duckdb.InvalidInputException):
            if progress is not None:  # the progress restarts: say why
                sys.stderr.write("note: a field is not a number DuckDB's CSV reader parses: counting again from the text\n")
    return count(*_duckdb_records(source, grid, con))


def _text_examples(source, grid: Grid, con):
    """Example values of a refused axis, read from the records' text (a view built on first use)."""

    @functools.cache
    def text():
        return _duckdb_records(source, grid, con)[4]

    return lambda a, codes: text()(a, codes)


def _duckdb_records(source, grid: Grid, con, doubles=()):
    """(connection, view of the records, column kinds, CSV files read, examples function)."""
    rel, csv_files, where = _duckdb_relation(source, con, doubles)
    _check_columns(rel.columns, grid, f"source {where}")
    view = f"records_{id(rel)}"
    rel.create_view(view, replace=True)
    kinds = _kinds_duckdb(rel)
    for column in doubles:  # the reader's DOUBLEs (every other CSV column reads as text)
        if kinds[column] == "float":
            kinds[column] = "parsed"
    binning = _query(grid, DUCKDB, kinds, view)

    def examples(a: int, codes: tuple[int, ...]) -> list:
        column = DUCKDB.ident(grid.axes[a].column)
        query = binning.replace("SELECT ", f"SELECT CAST({column} AS VARCHAR) AS raw, ", 1)
        found = con.sql(f"SELECT DISTINCT raw FROM ({query}) WHERE s{a} IN ({', '.join(map(str, codes))}) LIMIT {_EXAMPLES}").fetchall()
        return [r[0] for r in found]

    return con, view, kinds, csv_files, examples


def duckdb_groups(
    source: Any, grid: Grid, connection: Any = None, progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, Callable[[int, tuple[int, ...]], list] | None]:
    """GROUP BY the binned columns in DuckDB (out of core, parallel); ``progress`` gets the
    fraction of the scan done as it runs."""
    d = len(grid.axes)
    keys = ", ".join([f"s{a}" for a in range(d)] + [f"c{a}" for a in range(d)])

    def count(con, view, kinds, csv_files, examples):
        counted = _query(grid, DUCKDB, kinds, view, distinct=_few_values(grid))
        rows = _reporting(con, con.sql(f"SELECT {keys}, sum(n) FROM ({counted}) GROUP BY ALL").fetchall, progress)
        return _with_skipped_lines(np.array(rows, dtype=np.int64).reshape(-1, 2 * d + 1), grid, csv_files), examples

    return _counted_duckdb(source, grid, connection, count, progress)


# -- marginals: one scan, one grouping set per marginal -----------------------------------------



def _marginal_query(grid: Grid, dialect: Dialect, kinds: dict[str, str], table: str, subsets) -> str:
    """One scan of the binning query grouped by GROUPING SETS: the record's statuses (the account
    of the records, one base-6 key per record: one grouping column instead of one per axis), then
    the cells of each marginal. Each row: the grouping id, the status key, the cells as one
    row-major key over the grid, the record count."""
    d = len(grid.axes)
    distinct = _few_values(grid)
    counted = _query(grid, dialect, kinds, table, distinct=distinct, status_key=True)
    total = "sum(n)" if distinct else "count(*)"  # a record per row: counting rows is cheaper than summing ones
    strides = np.cumprod((1,) + grid.shape[::-1])[:-1][::-1]
    grouped = sorted({a for s in subsets for a in s})  # a cell column in no marginal is in no grouping set
    cell_key = " + ".join([f"CAST(coalesce(c{a}, 0) AS BIGINT) * {int(strides[a])}" for a in grouped] or ["0"])
    sets = ["(skey)"] + [f"({', '.join(f'c{a}' for a in s)})" for s in subsets]
    # the grouping id: bit d set when the status key is summed out, bit d-1-a when cell a is (one
    # grouping() per column: Spark's grouping_id needs the grouping columns in their order of appearance)
    bits = [f"grouping(skey) * {1 << d}"] + [f"grouping(c{a}) * {1 << (d - 1 - a)}" for a in grouped]
    bits.append(str(sum(1 << (d - 1 - a) for a in range(d) if a not in grouped)))
    return (f"SELECT {' + '.join(bits)} AS g, coalesce(skey, 0) AS skey, {cell_key} AS ckey, {total} AS n "
            f"FROM ({counted}) GROUP BY GROUPING SETS ({', '.join(sets)})")


def _marginal_tables(g, skey, ckey, n, grid: Grid, subsets) -> tuple[np.ndarray, dict]:
    """The accounting rows [statuses, zero cells, count] and the table of each marginal from the
    rows of :func:`_marginal_query`."""
    d = len(grid.axes)
    g, skey, ckey, n = (np.asarray(a, dtype=np.int64) for a in (g, skey, ckey, n))
    full = (1 << d) - 1
    account = g == full  # the status key kept, every cell summed out
    statuses = np.unravel_index(skey[account], (_STATUS_BASE,) * d)[::-1]
    groups = np.column_stack([*statuses, np.zeros((int(account.sum()), d), dtype=np.int64), n[account]]).astype(np.int64)
    tables = {}
    for subset in subsets:
        gid = (1 << d) | sum(1 << (d - 1 - a) for a in range(d) if a not in subset)
        rows = g == gid
        coords = np.unravel_index(ckey[rows], grid.shape)
        table = np.zeros(tuple(grid.shape[a] for a in subset), dtype=np.int64)
        if subset:
            np.add.at(table, tuple(coords[a] for a in subset), n[rows])
        else:
            table[...] = n[rows].sum()
        tables[subset] = table
    return groups, tables


def duckdb_marginals(
    source: Any, grid: Grid, subsets: list[tuple[int, ...]], connection: Any = None, progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, dict[tuple[int, ...], np.ndarray], Callable[[int, tuple[int, ...]], list]]:
    """The account of the records and the marginals ``subsets`` in one DuckDB scan."""

    def count(con, view, kinds, csv_files, examples):
        found = _reporting(con, con.sql(_marginal_query(grid, DUCKDB, kinds, view, subsets)).fetchnumpy, progress)
        groups, tables = _marginal_tables(found["g"], found["skey"], found["ckey"], found["n"], grid, subsets)
        return _with_skipped_lines(groups, grid, csv_files), tables, examples

    return _counted_duckdb(source, grid, connection, count, progress)


# -- Spark ------------------------------------------------------------------------------------


#: Spark's log configuration for a session blowfish_te starts: warnings and errors only.
SPARK_LOG_CONFIG = pathlib.Path(__file__).resolve().parents[1] / "data" / "spark-log4j2.properties"


def _spark_session_class():
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ImportError("the Spark engine needs PySpark: pip install 'blowfish_te[spark]'") from None
    return SparkSession


def _spark_session(connection):
    """``connection``, or the active Spark session, or a new local one whose log is kept to
    warnings and which draws no progress bars on standard error."""
    SparkSession = _spark_session_class()
    if connection is not None:
        return connection
    with warnings.catch_warnings():  # PySpark's notes on the pandas version are not the user's concern
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\.")
        return (SparkSession.builder
                .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={SPARK_LOG_CONFIG.as_uri()}")
                .config("spark.ui.showConsoleProgress", "false")
                .getOrCreate())


def _spark_records(source, grid: Grid, connection):
    """(DataFrame, view of the records, column kinds, CSV files read, examples function)."""
    csv_files = None
    if type(source).__module__.startswith("pyspark"):
        df = source
    elif isinstance(source, SqlQuery):
        spark = _spark_session(connection)
        df = spark.sql(source.text)
    elif isinstance(source, (str, list, tuple)) or hasattr(source, "__fspath__"):
        spark = _spark_session(connection)
        files = files_of(source)
        form = kind(suffix(files[0]))
        if form == "csv":
            for path in files:
                check_unique_columns(csv_header(path), f"source {path}")
            sep = "\t" if ".tsv" in files[0].lower() else ","
            df = spark.read.csv(files, header=True, sep=sep, inferSchema=False, mode="PERMISSIVE", ignoreLeadingWhiteSpace=False,
                                ignoreTrailingWhiteSpace=False)
            csv_files = files
        elif form == "parquet":
            df = spark.read.parquet(*files)
        else:
            raise ValueError(_SPARK_FORMATS)
    else:
        raise TypeError(f"the Spark engine reads Spark DataFrames, SQL and files, got {type(source).__name__}")
    _check_columns(df.columns, grid, "source")
    exact = ("ByteType", "ShortType", "IntegerType", "LongType", "DecimalType", "BooleanType")
    kinds = {f.name: _column_kind(type(f.dataType).__name__, exact, ("FloatType", "DoubleType")) for f in df.schema.fields}
    view = f"records_{id(df)}"
    df.createOrReplaceTempView(view)
    binning = _query(grid, SPARK, kinds, view)

    def examples(a: int, codes: tuple[int, ...]) -> list:
        column = SPARK.ident(grid.axes[a].column)
        query = binning.replace("SELECT ", f"SELECT CAST({column} AS STRING) AS raw, ", 1)
        found = df.sparkSession.sql(f"SELECT DISTINCT raw FROM ({query}) WHERE s{a} IN ({', '.join(map(str, codes))}) LIMIT {_EXAMPLES}").collect()
        return [r["raw"] for r in found]

    return df, view, kinds, csv_files, examples


def spark_groups(
    source: Any, grid: Grid, connection: Any = None, progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, Callable[[int, tuple[int, ...]], list] | None]:
    """The same binning as a Spark job; only the grouped counts are collected."""
    df, view, kinds, csv_files, examples = _spark_records(source, grid, connection)
    d = len(grid.axes)
    keys = [f"s{a}" for a in range(d)] + [f"c{a}" for a in range(d)]
    counted = _query(grid, SPARK, kinds, view, distinct=_few_values(grid))
    rows = df.sparkSession.sql(f"SELECT {', '.join(keys)}, sum(n) AS n FROM ({counted}) GROUP BY {', '.join(keys)}").collect()
    groups = np.array([[int(r[k]) for k in keys] + [int(r["n"])] for r in rows], dtype=np.int64).reshape(-1, 2 * d + 1)
    return _with_skipped_lines(groups, grid, csv_files), examples


def spark_marginals(
    source: Any, grid: Grid, subsets: list[tuple[int, ...]], connection: Any = None, progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, dict[tuple[int, ...], np.ndarray], Callable[[int, tuple[int, ...]], list]]:
    """The account of the records and the marginals ``subsets`` in one Spark job; only the
    grouped counts are collected."""
    df, view, kinds, csv_files, examples = _spark_records(source, grid, connection)
    rows = df.sparkSession.sql(_marginal_query(grid, SPARK, kinds, view, subsets)).collect()
    columns = [np.array([r[k] for r in rows], dtype=np.int64) for k in ("g", "skey", "ckey", "n")]
    groups, tables = _marginal_tables(*columns, grid, subsets)
    return _with_skipped_lines(groups, grid, csv_files), tables, examples


# -- numpy ------------------------------------------------------------------------------------


def _column_names(source) -> list[str] | None:
    """The column names of an in-memory table, repeats included (None for other sources)."""
    module = type(source).__module__
    if module.startswith(("pandas", "polars")):
        return [str(c) for c in source.columns]
    if module.startswith("pyarrow") and hasattr(source, "column_names"):
        return list(source.column_names)
    return None


def _columns(source) -> dict[str, np.ndarray]:
    names = _column_names(source)
    if names is not None:
        check_unique_columns(names, f"source {type(source).__name__}")
    module = type(source).__module__
    if isinstance(source, dict):
        return {k: np.asarray(v) for k, v in source.items()}
    if module.startswith(("pandas", "polars")):
        return {c: source[c].to_numpy() for c in source.columns}
    if module.startswith("pyarrow"):
        return {c: source.column(c).to_numpy(zero_copy_only=False) for c in source.column_names}
    raise TypeError(f"the memory engine reads pandas or Polars DataFrames, pyarrow Tables and dicts of columns, got {type(source).__name__}")


def _unique_rows(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of non-negative integer columns, sorted, and how often each occurs: one
    mixed-radix key per row and a 1-D unique where the keys fit in int64 (far faster than a
    unique over rows), else a unique over rows."""
    sizes = [int(c.max()) + 1 for c in columns]
    if min(int(c.min()) for c in columns) >= 0 and math.prod(sizes) < 2**62:
        keys, counts = np.unique(np.ravel_multi_index(columns, sizes), return_counts=True)
        return np.stack(np.unravel_index(keys, sizes), axis=1).astype(np.int64), counts
    return np.unique(np.stack(columns, axis=1), axis=0, return_counts=True)


def _binned(source, grid: Grid):
    """(the source's columns, (status, cell) of every axis) for records in memory."""
    columns = _columns(source)
    _check_columns(list(columns), grid, "source")
    lengths = {len(columns[c]) for c in grid.columns}
    if len(lengths) > 1:
        raise ValueError(f"source: the domain's columns have different lengths {sorted(lengths)}")
    return columns, [axis.bin(columns[axis.column]) for axis in grid.axes]


def _memory_examples(columns, binned, grid: Grid):
    def examples(a: int, codes: tuple[int, ...]) -> list:
        values = columns[grid.axes[a].column][np.isin(binned[a][0], codes)]
        return [None if v is None else str(v) for v in list(dict.fromkeys(values.tolist()))[:_EXAMPLES]]

    return examples


def memory_groups(
    source: Any, grid: Grid, connection: Any = None, progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, Callable[[int, tuple[int, ...]], list] | None]:
    """The same rules in numpy, for records already in memory."""
    columns, binned = _binned(source, grid)
    stacked = [s.astype(np.int64) for s, _ in binned] + [c for _, c in binned]
    if len(stacked[0]) == 0:
        return np.zeros((0, 2 * len(grid.axes) + 1), dtype=np.int64), None
    keys, counts = _unique_rows(stacked)
    return np.concatenate([keys, counts[:, None]], axis=1), _memory_examples(columns, binned, grid)


def memory_marginals(
    source: Any, grid: Grid, subsets: list[tuple[int, ...]], connection: Any = None, progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, dict[tuple[int, ...], np.ndarray], Callable[[int, tuple[int, ...]], list]]:
    """The account of the records and the marginals ``subsets``, in numpy."""
    columns, binned = _binned(source, grid)
    d, n = len(grid.axes), len(binned[0][1])
    tables = {}
    for subset in subsets:
        dims = tuple(grid.shape[a] for a in subset)
        flat = np.ravel_multi_index([binned[a][1] for a in subset], dims) if subset and n else np.zeros(n, dtype=np.int64)
        tables[subset] = np.bincount(flat, minlength=int(np.prod(dims))).astype(np.int64).reshape(dims)
    if n == 0:
        groups = np.zeros((0, 2 * d + 1), dtype=np.int64)
    else:
        keys, counts = _unique_rows([s.astype(np.int64) for s, _ in binned])
        groups = np.column_stack([keys, np.zeros((keys.shape[0], d), dtype=np.int64), counts]).astype(np.int64)
    return groups, tables, _memory_examples(columns, binned, grid)
