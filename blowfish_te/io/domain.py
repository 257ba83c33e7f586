"""Domains of records: how a column's values map to the cells of a histogram.

A domain is always given, never read from the data (reading it would disclose the data's range).
Each axis maps one column; :class:`Grid` combines axes into a multi-dimensional histogram (for
2-D policies and attribute policies), row-major as numpy orders cells.

Every value falls in exactly one class, the same for every engine:

==========  ==================================================================================
``ok``      in the domain: counted in its cell
``below``   a number below the domain: refused, or moved to the first cell with ``outside="clamp"``
``above``   a number above the domain: refused, or moved to the last cell with ``outside="clamp"``
``missing`` NULL, NaN, or text that is blank after trimming: always refused
``invalid`` text that is not a number, ±inf, or a fraction on an :class:`IntegerRange`: refused
``unknown`` a value that is not one of the :class:`Levels`: refused
==========  ==================================================================================

The binning is one SQL expression per axis, run by DuckDB or Spark, and the same rules in numpy
for in-memory data (:mod:`blowfish_te.io.memory`); the tests check the three agree.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["STATUSES", "Axis", "Bins", "Grid", "IntegerRange", "Levels", "as_grid"]

#: Classes of a value, by their code in the binning queries.
STATUSES = ("ok", "below", "above", "missing", "invalid", "unknown")
OK, BELOW, ABOVE, MISSING, INVALID, UNKNOWN = range(6)
_MAX = "1.7976931348623157e308"  # the largest double: |v| above it is ±inf


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL of DuckDB and of Spark."""

    text_type: str
    quote: str

    def ident(self, column: str) -> str:
        return self.quote + column.replace(self.quote, self.quote * 2) + self.quote


DUCKDB = Dialect("VARCHAR", '"')
SPARK = Dialect("STRING", "`")

#: What a column's type says about its values: ``"text"`` (parsed), ``"float"`` (a number that may
#: be NaN), ``"parsed"`` (a CSV field the reader parsed as a double: a number that may be NaN, with
#: no statistics that could fold ``isnan``) or ``"exact"`` (integers, decimals, booleans: numbers
#: that never are).
COLUMN_KINDS = ("text", "float", "parsed", "exact")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _number(value: float) -> str:
    return repr(float(value))


class Axis:
    """One column mapped to ``size`` cells."""

    column: str
    size: int
    #: Whether the axis reads its values as numbers (a text's number, by the rules above), so
    #: that a CSV reader may parse the column as doubles for it.
    reads_numbers: bool = False

    @property
    def valid_values(self) -> float:
        """How many distinct values an in-domain record can hold (inf for continuous bins)."""
        return self.size

    def sql(self, dialect: Dialect, kind: str, name: str) -> tuple[list[str], str, str]:
        """SQL of the column's binning: the parsing step (``expr AS alias`` items, aliases
        prefixed with ``name``, computed once per record), then the status and the cell
        expressions over them; ``kind`` is what the column's type says (:data:`COLUMN_KINDS`)."""
        raise NotImplementedError

    def ok_sql(self, name: str) -> str:
        """A condition over :meth:`sql`'s parsed aliases (prefixed ``name``) that holds only where
        the status is ``ok``: a cheap test that lets a query skip the status of in-domain records
        (where it is false or NULL, the status expression decides)."""
        raise NotImplementedError

    def bin(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(status, cell) of an array of values, in numpy: the same rules as :meth:`sql`."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def label(self, lo: int, hi: int) -> str:
        """The values of cells lo..hi (inclusive), as a query label."""
        raise NotImplementedError

    def cells_of(self, lo: str, hi: str) -> tuple[int, int]:
        """The cells (first, last) that hold exactly the values from ``lo`` to ``hi``, given as text
        (the inverse of :meth:`label`); a ValueError when the values cut through a cell."""
        raise NotImplementedError


def _check_column(column) -> str:
    if not isinstance(column, str) or not column:
        raise TypeError(f"column must be a non-empty column name (str), got {column!r}")
    return column


def _finite(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


class _Numeric(Axis):
    """Axes over numbers: parse, classify missing/invalid/below/above, then bin."""

    reads_numbers = True
    lower: float
    upper: float
    integer = False

    def _cell_sql(self, v: str) -> str:
        raise NotImplementedError

    def _cell(self, v: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def sql(self, dialect: Dialect, kind: str, name: str) -> tuple[list[str], str, str]:
        c = dialect.ident(self.column)
        v, blank = f"{name}_v", f"{name}_blank"
        if kind == "exact":  # no NaN to look for: the text of every value is never built
            parse = [f"CAST({c} AS DOUBLE) AS {v}", f"({c} IS NULL) AS {blank}"]
        elif kind == "parsed":  # the reader's doubles: NaN read off the value, no text built
            parse = [f"{c} AS {v}", f"({c} IS NULL OR isnan({c})) AS {blank}"]
        elif kind == "float":
            # NaN is read off the value's text: DuckDB folds isnan() to false from Parquet statistics,
            # which leave NaN out, and would count a NaN as a number above every other
            nan = f"lower(CAST({c} AS {dialect.text_type})) IN ('nan', '-nan')"
            # NaN becomes NULL before any arithmetic: the optimiser also bounds the cell by the statistics
            parse = [f"CASE WHEN {nan} THEN NULL ELSE CAST({c} AS DOUBLE) END AS {v}", f"({c} IS NULL OR {nan}) AS {blank}"]
        else:
            text = f"TRIM(CAST({c} AS {dialect.text_type}))"
            parse = [f"TRY_CAST({text} AS DOUBLE) AS {v}", f"({c} IS NULL OR {text} = '') AS {blank}"]
        fraction = f" OR {v} <> floor({v})" if self.integer else ""
        status = (
            f"CASE WHEN {blank} OR isnan({v}) THEN {MISSING} WHEN {v} IS NULL OR abs({v}) > {_MAX}{fraction} THEN {INVALID} "
            f"WHEN {v} < {_number(self.lower)} THEN {BELOW} WHEN {v} > {_number(self.upper)} THEN {ABOVE} ELSE {OK} END"
        )
        clamped = f"least(greatest({v}, {_number(self.lower)}), {_number(self.upper)})"
        return parse, status, self._cell_sql(clamped)

    def ok_sql(self, name: str) -> str:
        # the bounds are finite: a value between them is a finite number, neither NULL nor NaN
        v = f"{name}_v"
        whole = f" AND {v} = floor({v})" if self.integer else ""
        return (f"NOT {name}_blank AND NOT isnan({v}) AND {v} >= {_number(self.lower)} AND {v} <= {_number(self.upper)}"
                f"{whole}")

    def bin(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.asarray(values)
        v, missing = _parse(values)
        status = np.full(v.shape, OK, dtype=np.int8)
        bad = ~np.isfinite(v)
        if self.integer:
            bad |= np.isfinite(v) & (v != np.floor(np.where(np.isfinite(v), v, 0)))
        with np.errstate(invalid="ignore"):
            status[v < self.lower] = BELOW
            status[v > self.upper] = ABOVE
        status[bad] = INVALID
        status[missing] = MISSING
        clamped = np.clip(np.where(np.isfinite(v), v, self.lower), self.lower, self.upper)
        return status, self._cell(clamped)


def _parse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(numbers, missing) of an array: numeric dtypes as they are (NaN is missing), text trimmed
    and parsed (blank is missing, text that is not a number is NaN and not missing)."""
    if values.dtype.kind in "iub":
        return values.astype(np.float64), np.zeros(values.shape, dtype=bool)
    if values.dtype.kind == "f":
        v = values.astype(np.float64)
        return v, np.isnan(v)
    if values.dtype.kind == "O" and values.size and set(map(type, values.ravel())) <= {bool, np.bool_, type(None)}:
        # booleans with nulls (a nullable boolean column): numbers, as DuckDB reads them
        missing = np.array([x is None for x in values.ravel()]).reshape(values.shape)
        return np.array([0.0 if x is None else float(x) for x in values.ravel()]).reshape(values.shape), missing
    uniques, inverse = _unique_texts(values)
    parsed = np.full(len(uniques), np.nan)
    blank = np.zeros(len(uniques), dtype=bool)
    for i, text in enumerate(uniques):
        if text == "":
            blank[i] = True
            continue
        try:
            parsed[i] = float(text)
        except ValueError:
            continue
        blank[i] = math.isnan(parsed[i])
    v = parsed[inverse].reshape(values.shape)
    missing = blank[inverse].reshape(values.shape)
    v[missing] = 0.0  # a placeholder: missing wins over every other class
    v[~missing & np.isnan(v)] = np.inf  # not a number: invalid
    return v, missing


def _unique_texts(values) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct trimmed texts, the index of each value's text) of an array: :func:`_text`
    once per distinct value where equal values have equal texts (numpy text, integer and boolean
    arrays, and object arrays of str only), else once per value."""
    flat = np.asarray(values).ravel()
    if flat.dtype.kind in "USiub" or (flat.dtype.kind == "O" and set(map(type, flat)) <= {str}):
        distinct, inverse = np.unique(flat, return_inverse=True)
        texts, merged = np.unique(np.array([_text(x) for x in distinct], dtype=object), return_inverse=True)
        return texts, merged[inverse.ravel()]  # " a" and "a" are one text
    return np.unique(np.array([_text(x) for x in flat], dtype=object), return_inverse=True)


def _text(value) -> str:
    """The trimmed text of a value; "" for None and NaN (missing)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


@dataclass(frozen=True)
class IntegerRange(_Numeric):
    """Integer values ``lower..upper`` (inclusive) in cells of ``width`` values:
    cell = ⌊(v − lower) / width⌋, ⌈(upper − lower + 1) / width⌉ cells; fractions are invalid."""

    column: str
    lower: int
    upper: int
    width: int = 1
    integer = True

    def __post_init__(self):
        _check_column(self.column)
        for name in ("lower", "upper", "width"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{name} must be an integer, got {value!r}")
        if self.upper < self.lower:
            raise ValueError(f"upper ({self.upper}) must be >= lower ({self.lower})")
        if self.width < 1:
            raise ValueError(f"width must be a positive integer, got {self.width}")

    @property
    def size(self) -> int:
        return -(-(self.upper - self.lower + 1) // self.width)

    @property
    def valid_values(self) -> float:
        return self.upper - self.lower + 1

    def _cell_sql(self, v: str) -> str:
        return f"CAST(floor(({v} - {self.lower}) / {self.width}) AS BIGINT)"

    def _cell(self, v: np.ndarray) -> np.ndarray:
        return np.floor((v - self.lower) / self.width).astype(np.int64)

    def label(self, lo: int, hi: int) -> str:
        a, b = self.lower + lo * self.width, min(self.lower + (hi + 1) * self.width - 1, self.upper)
        return f"{self.column}={a}" if a == b else f"{self.column}={a}..{b}"

    def describe(self) -> str:
        return f"{self.column}: integers {self.lower}..{self.upper}" + (f" in bins of {self.width}" if self.width > 1 else "")

    def cells_of(self, lo: str, hi: str) -> tuple[int, int]:
        """Integers lo..hi (inclusive) inside lower..upper, lo the first value of a cell and hi the last."""
        try:
            a, b = int(lo), int(hi)
        except ValueError:
            raise ValueError(f"{self.column}: the range {lo}..{hi} must be two integers") from None
        if not self.lower <= a <= b <= self.upper:
            raise ValueError(f"{self.column}: the range {a}..{b} must lie in {self.lower}..{self.upper} with its ends in order")
        if (a - self.lower) % self.width or not (b == self.upper or (b - self.lower + 1) % self.width == 0):
            raise ValueError(f"{self.column}: the range {a}..{b} cuts through a cell of {self.width} values "
                             f"(cells start at {self.lower} + a multiple of {self.width})")
        return (a - self.lower) // self.width, (b - self.lower) // self.width


@dataclass(frozen=True)
class Bins(_Numeric):
    """Numbers in the bins [e₀, e₁), [e₁, e₂), …, [e_{k−1}, e_k] of increasing ``edges`` (the last
    bin holds its upper edge), as ``numpy.histogram`` counts."""

    column: str
    edges: tuple[float, ...]

    def __post_init__(self):
        _check_column(self.column)
        edges = tuple(_finite(e, "edges") for e in self.edges)
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
            raise ValueError(f"edges must be at least two strictly increasing numbers, got {list(self.edges)}")
        object.__setattr__(self, "edges", edges)

    @property
    def lower(self) -> float:
        return self.edges[0]

    @property
    def upper(self) -> float:
        return self.edges[-1]

    @property
    def size(self) -> int:
        return len(self.edges) - 1

    @property
    def valid_values(self) -> float:
        return math.inf

    def _cell_sql(self, v: str) -> str:
        def search(lo: int, hi: int) -> str:  # the bin in lo..hi holding v: a balanced CASE tree
            if lo == hi:
                return str(lo)
            mid = (lo + hi + 1) // 2
            return f"CASE WHEN {v} < {_number(self.edges[mid])} THEN {search(lo, mid - 1)} ELSE {search(mid, hi)} END"

        return search(0, self.size - 1)

    def _cell(self, v: np.ndarray) -> np.ndarray:
        return np.clip(np.searchsorted(np.asarray(self.edges), v, side="right") - 1, 0, self.size - 1).astype(np.int64)

    def label(self, lo: int, hi: int) -> str:
        close = "]" if hi == self.size - 1 else ")"
        return f"{self.column} in [{self.edges[lo]:g}, {self.edges[hi + 1]:g}{close}"

    def describe(self) -> str:
        return f"{self.column}: {self.size} bins from {self.lower:g} to {self.upper:g}"

    def cells_of(self, lo: str, hi: str) -> tuple[int, int]:
        """The values [lo, hi) (closed at the last edge), lo and hi two edges with lo < hi."""
        try:
            a, b = float(lo), float(hi)
        except ValueError:
            raise ValueError(f"{self.column}: the range [{lo}, {hi}) must be two numbers") from None
        if a not in self.edges or b not in self.edges or not a < b:
            raise ValueError(f"{self.column}: the range [{lo}, {hi}) must run from one bin edge to a later one; "
                             f"edges: {', '.join(f'{e:g}' for e in self.edges)}")
        return self.edges.index(a), self.edges.index(b) - 1


@dataclass(frozen=True)
class Levels(Axis):
    """Categorical values: one cell per level, in the given order. Values match a level by their
    text, trimmed (an integer column's 3 matches "3", a float column's 3.0 matches "3.0")."""

    column: str
    levels: tuple[str, ...]

    def __post_init__(self):
        _check_column(self.column)
        levels = tuple(str(level).strip() for level in self.levels)
        if not levels or len(set(levels)) != len(levels) or "" in levels:
            raise ValueError(f"levels must be distinct non-blank values, got {list(self.levels)}")
        object.__setattr__(self, "levels", levels)

    @property
    def size(self) -> int:
        return len(self.levels)

    def sql(self, dialect: Dialect, kind: str, name: str) -> tuple[list[str], str, str]:
        c = dialect.ident(self.column)
        text, blank, cell = f"TRIM(CAST({c} AS {dialect.text_type}))", f"{name}_blank", f"{name}_cell"
        nan = f" OR isnan(CAST({c} AS DOUBLE))" if kind in ("float", "parsed") else ""
        match = f"CASE {text} " + " ".join(f"WHEN {_literal(level)} THEN {i}" for i, level in enumerate(self.levels)) + " END"
        parse = [f"{match} AS {cell}", f"({c} IS NULL OR {text} = ''{nan}) AS {blank}"]
        status = f"CASE WHEN {blank} THEN {MISSING} WHEN {cell} IS NULL THEN {UNKNOWN} ELSE {OK} END"
        return parse, status, f"coalesce({cell}, 0)"

    def ok_sql(self, name: str) -> str:
        return f"NOT {name}_blank AND {name}_cell IS NOT NULL"

    def bin(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        index = {level: i for i, level in enumerate(self.levels)}
        texts, inverse = _unique_texts(values)
        status = np.array([MISSING if t == "" else (OK if t in index else UNKNOWN) for t in texts], dtype=np.int8)
        cell = np.array([index.get(t, 0) for t in texts], dtype=np.int64)
        return status[inverse], cell[inverse]

    def label(self, lo: int, hi: int) -> str:
        return f"{self.column}={self.levels[lo]}" if lo == hi else f"{self.column} in {self.levels[lo]}..{self.levels[hi]}"

    def describe(self) -> str:
        return f"{self.column}: {self.size} levels"

    def cells_of(self, lo: str, hi: str) -> tuple[int, int]:
        """The levels from ``lo`` to ``hi`` in the domain's order."""
        index = {level: i for i, level in enumerate(self.levels)}
        missing = [t for t in (lo.strip(), hi.strip()) if t not in index]
        if missing:
            raise ValueError(f"{self.column}: no level {missing[0]!r}; levels: {', '.join(self.levels[:10])}"
                             f"{', ...' if self.size > 10 else ''}")
        a, b = index[lo.strip()], index[hi.strip()]
        if a > b:
            raise ValueError(f"{self.column}: the range {lo}..{hi} runs backwards in the levels' order")
        return a, b


@dataclass(frozen=True)
class Grid:
    """Several axes: a histogram of shape (axis sizes), cells in row-major order."""

    axes: tuple[Axis, ...]

    def __init__(self, *axes: Axis):
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        if not axes or not all(isinstance(a, Axis) for a in axes):
            raise TypeError(f"a domain is IntegerRange, Bins or Levels axes, given explicitly and never read from the data; got {axes!r}")
        columns = [a.column for a in axes]
        if len(set(columns)) != len(columns):
            raise ValueError(f"each column may appear on one axis only, got {columns}")
        object.__setattr__(self, "axes", tuple(axes))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.axes)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(a.column for a in self.axes)

    def describe(self) -> str:
        return "; ".join(a.describe() for a in self.axes)

    def label(self, lo: Sequence[int] | np.ndarray, hi: Sequence[int] | np.ndarray) -> str:
        """The values of the box of cells lo..hi (one bound per axis, inclusive)."""
        return " & ".join(a.label(int(l), int(h)) for a, l, h in zip(self.axes, lo, hi))


def as_grid(domain: Axis | Sequence[Axis] | Grid) -> Grid:
    """An axis, a sequence of axes or a Grid, as a Grid."""
    if isinstance(domain, Grid):
        return domain
    if isinstance(domain, Axis):
        return Grid(domain)
    if isinstance(domain, (list, tuple)):
        return Grid(*domain)
    raise TypeError(
        f"domain must be an IntegerRange, Bins or Levels axis, a list of them, or a Grid, got {type(domain).__name__}; "
        "it is never read from the data"
    )
