"""From records to a histogram: :func:`histogram` with the DuckDB, Spark or numpy engine."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..workloads.marginals import MarginalCounts
from .domain import ABOVE, BELOW, INVALID, MISSING, OK, UNKNOWN, Axis, Grid, as_grid
from .engines import duckdb_groups, duckdb_marginals, has_pyarrow, memory_groups, memory_marginals, spark_groups, spark_marginals
from .sources import RecordError, SqlQuery, csv_lines

__all__ = ["ENGINES", "HistogramResult", "MarginalCountsResult", "RecordError", "SqlQuery", "csv_lines", "histogram", "marginal_counts"]

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


def histogram(source: Any = None, domain: Axis | Sequence[Axis] | Grid | None = None, *, sql: str | None = None, outside: str = "error",
              engine: str | None = None, connection: Any = None, progress: Callable[[float], None] | None = None) -> HistogramResult:
    """Count records over an explicit ``domain`` and account for every one of them.

    Parameters
    ----------
    source : a CSV, Parquet or Arrow IPC file, a glob or a list of them (a string is always a
        path); a pandas or Polars DataFrame, a pyarrow Table or a dict of columns; a DuckDB
        relation; a Spark DataFrame. None when ``sql`` is given.
    domain : an :class:`IntegerRange`, :class:`Bins` or :class:`Levels` axis, a list of them, or
        a :class:`Grid` (never read from the data).
    sql : the text of a SQL query whose result holds the records, run on ``connection`` by the
        DuckDB or Spark engine — the only way a query is run (instead of ``source``). Trusted
        input: it runs as given, with the engine's full rights — in DuckDB, embedded here, the
        calling process's access to files (any statement, e.g. ``COPY ... TO`` or
        ``read_csv``); in Spark, the session's. Never build it from untrusted text.
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
    source, grid, engine = _checked(source, domain, sql, outside, engine)
    run = {"duckdb": duckdb_groups, "spark": spark_groups, "memory": memory_groups}[engine]
    groups, examples = run(source, grid, connection, progress)
    return _assemble(groups, examples, grid, outside, engine)


def _checked(source, domain, sql, outside: str, engine: str | None):
    """(the records — ``source``, or the query ``sql`` —, the domain's grid, the engine), checked
    as :func:`histogram` and :func:`marginal_counts` take them."""
    if (source is None) == (sql is None):
        raise TypeError("give the records as source= or a SQL query as sql=, exactly one of them")
    if sql is not None:
        source = SqlQuery(sql)
    if domain is None:
        raise TypeError("domain is required: the axes the records are counted over (never read from the data)")
    grid = as_grid(domain)
    if outside not in OUTSIDE:
        raise ValueError(f"outside must be one of {OUTSIDE}, got {outside!r}")
    return source, grid, _engine_of(source, engine)


def _assemble(groups: np.ndarray, examples, grid: Grid, outside: str, engine: str) -> HistogramResult:
    """The histogram from grouped rows [status_1..status_d, cell_1..cell_d, count]."""
    d = len(grid.axes)
    rows, below, above = _account(groups, examples, grid, outside)
    counts = np.zeros(grid.shape, dtype=np.int64)
    np.add.at(counts, tuple(groups[:, d + a] for a in range(d)), groups[:, 2 * d])
    return HistogramResult(counts, grid, rows, rows - below - above, below, above, engine)


def _account(groups: np.ndarray, examples, grid: Grid, outside: str, made: str = "no histogram was built") -> tuple[int, int, int]:
    """(records, clamped below, clamped above) from grouped rows [statuses, cells, count]; a
    RecordError naming every refused column when some record cannot be counted."""
    d = len(grid.axes)
    status, count = groups[:, :d], groups[:, 2 * d]
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
        if (status == INVALID).any():
            hint += ("; count a category column with io.Levels (--levels COLUMN=A,B,...) and real values with io.Bins "
                     "(--bins COLUMN=E0,E1,...)")
        raise RecordError(f"{rows} record(s) read, some cannot be counted, {made}: " + "; ".join(problems) + hint)
    out = (status != OK).any(axis=1)
    below = int(count[out & (status == BELOW).any(axis=1)].sum())
    return rows, below, int(count[out].sum()) - below


@dataclass(frozen=True)
class MarginalCountsResult(HistogramResult):
    """Marginal counts of the records (:class:`~blowfish_te.workloads.MarginalCounts`, what a
    plan that reads marginals only releases from) and the account of every record, as
    :class:`HistogramResult` gives it: ``rows`` = ``counted`` + ``clamped``, and every marginal
    counts all ``rows`` records."""

    counts: MarginalCounts

    def summary(self) -> str:
        return super().summary() + f"; {len(self.counts.subsets)} marginal(s) counted"


def marginal_counts(source: Any = None, domain: Axis | Sequence[Axis] | Grid | None = None, marginals: Sequence[Sequence[int | str]] | None = None, *,
                    sql: str | None = None, outside: str = "error", engine: str | None = None, connection: Any = None,
                    progress: Callable[[float], None] | None = None) -> MarginalCountsResult:
    """Count the records over some marginals of ``domain``, never over its full grid: one scan,
    one GROUP BY per marginal (GROUPING SETS in DuckDB and Spark, bincounts in numpy), and the
    account of every record as :func:`histogram` keeps it (a record refused in any column refuses
    the whole count, so every marginal counts the same records).

    ``marginals`` lists the marginals as tuples of axes of ``domain`` — axis indices or column
    names — e.g. ``plan.marginals_read()`` of a :class:`~blowfish_te.routes.Plan` that reads
    marginals only. The other arguments are those of :func:`histogram`: ``sql`` too is trusted
    input, run as given with the calling process's rights. Only the counts leave the engine: at
    most Σ_S N_S rows for marginals of N_S cells.
    """
    source, grid, engine = _checked(source, domain, sql, outside, engine)
    subsets = _marginal_axes(marginals, grid)
    run = {"duckdb": duckdb_marginals, "spark": spark_marginals, "memory": memory_marginals}[engine]
    groups, tables, examples = run(source, grid, subsets, connection, progress)
    rows, below, above = _account(groups, examples, grid, outside, "no marginal was counted")
    counts = MarginalCounts(grid.shape, {s: tables[s] for s in subsets})
    return MarginalCountsResult(counts, grid, rows, rows - below - above, below, above, engine)


def _marginal_axes(marginals, grid: Grid) -> list[tuple[int, ...]]:
    """The marginals as sorted tuples of axis indices, each once."""
    if marginals is None or isinstance(marginals, (str, int)) or not all(isinstance(m, (tuple, list)) for m in marginals):
        raise TypeError("marginals must be a list of tuples of axes (indices or column names), e.g. [(0, 1), (2,)] "
                        f"or plan.marginals_read(); got {marginals!r}")
    if not marginals:
        raise ValueError("marginals must name at least one marginal")
    names = list(grid.columns)
    out: list[tuple[int, ...]] = []
    for m in marginals:
        axes = []
        for a in m:
            if isinstance(a, str):
                if a not in names:
                    raise ValueError(f"marginals: no axis named {a!r}; axes: {', '.join(names)}")
                axes.append(names.index(a))
            elif isinstance(a, (int, np.integer)) and not isinstance(a, bool) and 0 <= a < len(names):
                axes.append(int(a))
            else:
                raise ValueError(f"marginals: {a!r} is neither an axis index in [0, {len(names) - 1}] nor a column name")
        if len(set(axes)) != len(axes):
            raise ValueError(f"marginals: {m!r} repeats an axis")
        key = tuple(sorted(axes))
        if key not in out:
            out.append(key)
    return out


_REASONS = {
    MISSING: "missing (NULL, NaN or blank)",
    INVALID: "not a number in the domain (text, ±inf, or a fraction for integers)",
    UNKNOWN: "not one of the levels",
    BELOW: "below the domain",
    ABOVE: "above the domain",
}
