"""From records to a histogram: :func:`histogram` with the DuckDB, Spark or numpy engine."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .domain import ABOVE, BELOW, INVALID, MISSING, OK, UNKNOWN, Grid, as_grid
from .engines import duckdb_groups, has_pyarrow, memory_groups, spark_groups
from .sources import RecordError, SqlQuery, csv_lines

__all__ = ["ENGINES", "HistogramResult", "RecordError", "SqlQuery", "csv_lines", "histogram"]

#: Engines: DuckDB (embedded, out of core; the default), Spark (distributed) and numpy (in memory).
ENGINES = ("duckdb", "spark", "memory")
#: What to do with numbers outside the domain.
OUTSIDE = ("error", "clamp")


@dataclass(frozen=True)
class HistogramResult:
    """The count vector of the records and the account of every record.

    ``rows`` = ``counted`` + ``clamped``: each record is in exactly one cell. ``below`` and
    ``above`` are the clamped records by side (zero unless ``outside="clamp"``). These
    counts are exact, not private: they are for the data owner.
    """

    counts: np.ndarray
    domain: Grid
    rows: int
    counted: int
    below: int
    above: int
    engine: str

    @property
    def clamped(self) -> int:
        return self.below + self.above

    def summary(self) -> str:
        text = f"{self.rows} record(s): {self.counted} counted"
        if self.clamped:
            text += f", {self.clamped} clamped to the domain ({self.below} below, {self.above} above)"
        return text


def _engine_of(source, engine: str | None) -> str:
    if engine is not None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        return engine
    module = type(source).__module__
    if module.startswith("pyspark"):
        return "spark"
    if (isinstance(source, dict) or module.startswith("polars")) and not has_pyarrow():
        return "memory"  # DuckDB scans these through Arrow; numpy counts them the same way
    return "duckdb"


def histogram(source=None, domain=None, *, sql: str | None = None, outside: str = "error", engine: str | None = None,
              connection=None, progress=None) -> HistogramResult:
    """Count records over an explicit ``domain`` and account for every one of them.

    Parameters
    ----------
    source : a CSV, Parquet or Arrow IPC file, a glob or a list of them (a string is always a
        path); a pandas or Polars DataFrame, a pyarrow Table or a dict of columns; a DuckDB
        relation; a Spark DataFrame. None when ``sql`` is given.
    domain : an :class:`IntegerRange`, :class:`Bins` or :class:`Levels` axis, a list of them, or
        a :class:`Grid` (never read from the data).
    sql : the text of a SQL query whose result holds the records, run on ``connection`` by the
        DuckDB or Spark engine — the only way a query is run (instead of ``source``).
    outside : ``"error"`` refuses numbers outside the domain; ``"clamp"`` moves them to the
        nearest cell and reports how many. Missing, invalid and unknown values are always refused.
    engine : ``"duckdb"`` (default; a GROUP BY over the binned columns, out of core), ``"spark"``
        (default for Spark DataFrames; ``pip install 'blowfish_te[spark]'``) or ``"memory"``
        (numpy, for in-memory sources: as fast as DuckDB on numbers, a few times slower on text
        columns; the default for a dict or a Polars DataFrame where pyarrow, which DuckDB reads
        them through, is not installed).
    connection : a DuckDB connection (default: a new in-memory one) or a SparkSession.
    progress : called with the fraction of the records scanned (0..1) while DuckDB counts them,
        about twice a second (from another thread); the other engines do not call it.

    Returns
    -------
    HistogramResult
        The counts and the account of every record. :class:`RecordError` (no histogram) is
        raised when a record cannot be counted, naming the column, how many and example values,
        and when two columns share a name.

    Missing values, the same rule for every source and engine: NULL (a missing value of the
    source's own type), NaN (a float, or the text in any case), an empty or blank field and a
    blank line of a CSV file are missing: refused, and counted as missing in the error. A
    byte-order mark at the start of a CSV file is not part of the first column's name. Histogram
    files follow the same rule (:func:`read_histogram`).
    """
    if (source is None) == (sql is None):
        raise TypeError("give the records as source= or a SQL query as sql=, exactly one of them")
    if sql is not None:
        source = SqlQuery(sql)
    if domain is None:
        raise TypeError("domain is required: the axes the records are counted over (never read from the data)")
    grid = as_grid(domain)
    if outside not in OUTSIDE:
        raise ValueError(f"outside must be one of {OUTSIDE}, got {outside!r}")
    engine = _engine_of(source, engine)
    run = {"duckdb": duckdb_groups, "spark": spark_groups, "memory": memory_groups}[engine]
    groups, examples = run(source, grid, connection, progress)
    return _assemble(groups, examples, grid, outside, engine)


def _assemble(groups: np.ndarray, examples, grid: Grid, outside: str, engine: str) -> HistogramResult:
    """The histogram from grouped rows [status_1..status_d, cell_1..cell_d, count]."""
    d = len(grid.axes)
    status, cells, count = groups[:, :d], groups[:, d : 2 * d], groups[:, 2 * d]
    rows = int(count.sum())
    problems = []
    for a, axis in enumerate(grid.axes):
        s = status[:, a]
        refused = {code: int(count[s == code].sum()) for code in (MISSING, INVALID, UNKNOWN)}
        sides = {code: int(count[s == code].sum()) for code in (BELOW, ABOVE)}
        parts = [f"{n} {_REASONS[code]}" for code, n in refused.items() if n]
        if outside == "error":
            parts += [f"{n} {_REASONS[code]} ({axis.describe()})" for code, n in sides.items() if n]
        if parts:
            # examples of the refused values only: clamped ones are counted, not refused
            codes = tuple(code for code, n in (*refused.items(), *(sides.items() if outside == "error" else ())) if n)
            shown = examples(a, codes) if examples else []
            problems.append(f"column {axis.column!r}: " + ", ".join(parts) + (f" (e.g. {', '.join(map(repr, shown))})" if shown else ""))
    if problems:
        outside_found = bool(np.isin(status, (BELOW, ABOVE)).any())
        hint = ""
        if outside == "error" and outside_found:
            hint = "; pass outside='clamp' (--outside clamp) to move numbers outside the domain to its edge"
        raise RecordError(f"{rows} record(s) read, some cannot be counted, no histogram was built: " + "; ".join(problems) + hint)
    counts = np.zeros(grid.shape, dtype=np.int64)
    np.add.at(counts, tuple(cells[:, a] for a in range(d)), count)
    out = (status != OK).any(axis=1)
    below = int(count[out & (status == BELOW).any(axis=1)].sum())
    above = int(count[out].sum()) - below
    return HistogramResult(counts, grid, rows, rows - below - above, below, above, engine)


_REASONS = {
    MISSING: "missing (NULL, NaN or blank)",
    INVALID: "not a number in the domain (text, ±inf, or a fraction for integers)",
    UNKNOWN: "not one of the levels",
    BELOW: "below the domain",
    ABOVE: "above the domain",
}
