"""From records to a histogram: :func:`histogram` with the DuckDB, Spark or numpy engine."""

from __future__ import annotations

import glob
import gzip
import pathlib
from dataclasses import dataclass

import numpy as np

from .domain import ABOVE, BELOW, INVALID, MISSING, OK, UNKNOWN, Grid, as_grid

__all__ = ["ENGINES", "HistogramResult", "RecordError", "csv_lines", "histogram"]

#: Engines: DuckDB (embedded, out of core; the default), Spark (distributed) and numpy (in memory).
ENGINES = ("duckdb", "spark", "memory")
#: What to do with numbers outside the domain.
OUTSIDE = ("error", "clamp")
_CSV = (".csv", ".tsv", ".csv.gz", ".tsv.gz")
_PARQUET = (".parquet", ".pq")
_ARROW = (".arrow", ".feather", ".ipc")


class RecordError(ValueError):
    """Records that cannot be counted: no histogram is built. The message depends on the data
    without noise (counts and example values): it is for the data owner, never for release."""


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


def _suffix(path: str) -> str:
    name = path.lower()
    for suffix in (*_CSV, *_PARQUET, *_ARROW):
        if name.endswith(suffix):
            return suffix
    raise ValueError(f"source {path!r}: records must be CSV ({', '.join(_CSV)}), Parquet ({', '.join(_PARQUET)}) "
                     f"or Arrow IPC ({', '.join(_ARROW)}) files")


def _files(source) -> list[str]:
    """The files of a path, a glob or a list of them; all of one format."""
    items = [source] if isinstance(source, (str, pathlib.Path)) else list(source)
    files: list[str] = []
    for item in items:
        item = str(item)
        found = sorted(glob.glob(item)) if glob.has_magic(item) else [item]
        if not found:
            raise ValueError(f"source {item!r}: no file matches")
        for path in found:
            if not pathlib.Path(path).is_file():
                raise ValueError(f"source {path!r}: no such file")
        files += found
    kinds = {_kind(_suffix(f)) for f in files}
    if len(kinds) > 1:
        raise ValueError(f"source: files of one format only, got {sorted(kinds)}")
    return files


def _kind(suffix: str) -> str:
    return "csv" if suffix in _CSV else "parquet" if suffix in _PARQUET else "arrow"


def csv_lines(path: str, blanks: bool = True, chunk: int = 1 << 24) -> tuple[int, int | None]:
    """(records, blank lines) of a CSV file by its lines: every line after the header is one
    record, an empty one ("\\n\\n", "\\n\\r\\n") a record with blank values, as pandas reads it
    with ``skip_blank_lines=False``. CSV readers skip some blank lines; :func:`histogram` compares
    these counts with the rows it read and counts each skipped line as a missing record.
    ``blanks=False`` only counts the lines (a byte count, no numpy pass) and gives None for blanks."""
    opener = gzip.open if path.endswith(".gz") else open
    newlines, empty = 0, 0
    carry, header, last = b"", True, b"\n"
    with opener(path, "rb") as f:
        while block := f.read(chunk):
            if header:  # newlines before the header are not records, nor is the header
                block = (carry + block).lstrip(b"\r\n")
                end = block.find(b"\n")
                if end < 0:
                    carry = block
                    continue
                block, carry, header = block[end:], b"", False
            newlines += block.count(b"\n")
            if blanks:
                a = np.frombuffer(carry + block, dtype=np.uint8)
                lf = a == 10
                pairs = np.flatnonzero(lf[:-1] & lf[1:])
                triples = np.flatnonzero(lf[:-2] & (a[1:-1] == 13) & lf[2:])
                # patterns that lie inside the carried bytes were counted with the previous block
                empty += int((pairs >= len(carry) - 1).sum() + (triples >= len(carry) - 2).sum())
                carry = block[-2:] if len(block) >= 2 else (carry + block)[-2:]
            last = block[-1:]
    if header:
        return 0, 0 if blanks else None
    # the header's newline is not a record's; a last line without a newline is one
    return newlines - 1 + (last != b"\n"), empty if blanks else None


def _is_sql(source) -> bool:
    return isinstance(source, str) and source.lstrip()[:7].lower().startswith(("select ", "with ", "from ", "select\n", "(select"))


def _engine_of(source, engine: str | None) -> str:
    if engine is not None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        return engine
    module = type(source).__module__
    if module.startswith("pyspark"):
        return "spark"
    return "duckdb"


def histogram(source, domain, *, outside: str = "error", engine: str | None = None, connection=None) -> HistogramResult:
    """Count records over an explicit ``domain`` and account for every one of them.

    Parameters
    ----------
    source : a CSV, Parquet or Arrow IPC file, a glob or a list of them; a pandas or Polars
        DataFrame, a pyarrow Table or a dict of columns; a DuckDB relation or a SQL query (text
        starting with SELECT, WITH or FROM, run on ``connection``); a Spark DataFrame.
    domain : an :class:`IntegerRange`, :class:`Bins` or :class:`Levels` axis, a list of them, or
        a :class:`Grid` (never read from the data).
    outside : ``"error"`` refuses numbers outside the domain; ``"clamp"`` moves them to the
        nearest cell and reports how many. Missing, invalid and unknown values are always refused.
    engine : ``"duckdb"`` (default; a GROUP BY over the binned columns, out of core), ``"spark"``
        (default for Spark DataFrames; ``pip install 'blowfish_te[spark]'``) or ``"memory"``
        (numpy, for in-memory sources).
    connection : a DuckDB connection (default: a new in-memory one) or a SparkSession.

    Returns
    -------
    HistogramResult
        The counts and the account of every record. :class:`RecordError` (no histogram) is
        raised when a record cannot be counted, naming the column, how many and example values.
    """
    grid = as_grid(domain)
    if outside not in OUTSIDE:
        raise ValueError(f"outside must be one of {OUTSIDE}, got {outside!r}")
    engine = _engine_of(source, engine)
    if engine == "duckdb":
        from .engines import duckdb_groups as run
    elif engine == "spark":
        from .engines import spark_groups as run
    else:
        from .engines import memory_groups as run
    groups, examples = run(source, grid, connection)
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
