"""Marginal workloads: for sets S of attributes of a product domain, the counts of every value
combination of S (the other attributes summed out). They are boxes, so every closed form of
:class:`~blowfish_te.workloads.Boxes` applies, and they remember their sets, so strategies that
keep the product structure (:mod:`blowfish_te.strategies.marginals`) can read them."""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterable, Sequence

import numpy as np

from .._digest import digest
from .._grid import shape_label as _fmt
from .._validation import MAX_DOMAIN_CELLS, check_int, check_shape
from .boxes import Boxes

__all__ = ["Marginals", "MarginalCounts", "marginals", "all_marginals"]


class Marginals(Boxes):
    """Boxes that are the marginals on ``subsets`` (tuples of attribute indices, in the order
    given; each marginal's rows run over its attributes' values in row-major order of that tuple).
    Held as their sets only: the (m, d) corners are made when a caller asks for them, so a
    workload of marginals over 10¹² cells costs its sets, not its m·d corners."""

    def __init__(self, shape, subsets, name: str | None = None):
        shape = check_shape(shape, "shape", MAX_DOMAIN_CELLS)
        d = len(shape)
        subsets = [tuple(s) for s in subsets]
        if not subsets:
            raise ValueError("axes must name at least one marginal")
        for subset in subsets:
            for a in subset:
                if isinstance(a, (bool, np.bool_)) or not isinstance(a, numbers.Integral) or not 0 <= a < d:
                    raise ValueError(f"axes entries must be attribute indices in [0, {d - 1}], got {a!r} in {subset!r}")
            if len(set(subset)) != len(subset):
                raise ValueError(f"marginal {subset!r} repeats an attribute")
        self.subsets = tuple(tuple(int(a) for a in s) for s in subsets)
        count = sum(math.prod(shape[a] for a in s) for s in self.subsets)
        self._init_trusted(shape, count, None, None, None, name or f"marginals({_fmt(shape)}, {subsets})")

    def _made_corners(self) -> tuple[np.ndarray, np.ndarray]:
        """The boxes' corners: per marginal, one box per value combination of its attributes
        (fixed there, the whole axis elsewhere); made on the first request, then held."""
        d = len(self.domain)
        los, his = [], []
        for subset in self.subsets:
            count = math.prod(self.domain[a] for a in subset)
            lo = np.zeros((count, d), dtype=np.int64)
            hi = np.tile(np.array(self.domain, dtype=np.int64) - 1, (count, 1))
            if subset:
                values = np.indices([self.domain[a] for a in subset]).reshape(len(subset), -1)
                for j, a in enumerate(subset):
                    lo[:, a] = hi[:, a] = values[j]
            los.append(lo)
            his.append(hi)
        lo, hi = np.concatenate(los), np.concatenate(his)
        lo.flags.writeable = False
        hi.flags.writeable = False
        self._lo, self._hi = lo, hi  # Boxes reads held corners from now on
        return lo, hi

    def fingerprint(self) -> str:
        """Digest of the domain and the corners, as for any boxes (the corners are made for it)."""
        return digest("boxes", self.domain, self.lo, self.hi, "ones")


def marginals(shape: int | Sequence[int], axes: Sequence[int] | Sequence[Sequence[int]] | None = None) -> Marginals:
    """Marginals of a multi-dimensional grid, as counting queries.

    ``axes`` is one tuple of attribute indices (one marginal), a list of such tuples, or None for
    every 1-way marginal. The marginal on attributes S has one query per value combination of S,
    summing over the other attributes; ``()`` is the total count.

    >>> marginals((2, 3), [(0,), (1,)]).shape
    (5, 6)
    """
    shape = check_shape(shape, "shape", MAX_DOMAIN_CELLS)
    if axes is None:
        subsets = [(i,) for i in range(len(shape))]
    elif isinstance(axes, tuple) and all(isinstance(a, numbers.Integral) for a in axes):
        subsets = [axes]
    elif isinstance(axes, (list, tuple)) and all(isinstance(s, (tuple, list)) for s in axes):
        subsets = [tuple(s) for s in axes]
    else:
        raise TypeError(
            f"axes must be a tuple of attribute indices (one marginal) or a list of such tuples, got {axes!r}"
        )
    return Marginals(shape, subsets)


def all_marginals(shape: int | Sequence[int], order: int) -> Marginals:
    """Every marginal on ``order`` attributes of the grid ``shape`` (all k-way marginals).

    >>> all_marginals((2, 3, 4), 2).shape
    (26, 24)
    """
    shape = check_shape(shape, "shape", MAX_DOMAIN_CELLS)
    order = check_int(order, "order", minimum=0)
    if order > len(shape):
        raise ValueError(f"order must be at most the number of attributes {len(shape)}, got {order}")
    subsets = list(itertools.combinations(range(len(shape)), order))
    return Marginals(shape, subsets, name=f"all {order}-way marginals({_fmt(shape)})")


class MarginalCounts:
    """Exact counts of records over some marginals of a grid, without the grid itself: what a
    release that measures only marginals reads instead of the histogram (e.g. counted straight
    from records by :func:`blowfish_te.io.marginal_counts`).

    ``tables`` maps attribute tuples to count arrays, each with one axis per attribute in the
    tuple's order. Tables are checked on arrival: non-negative integers, the grid's sizes, and one
    record total across all of them (counts of the same records). :meth:`table` gives the
    marginal on any set inside a held one, summed from it.
    """

    def __init__(self, shape, tables: dict):
        shape = check_shape(shape, "shape", MAX_DOMAIN_CELLS)
        if not isinstance(tables, dict) or not tables:
            raise TypeError("tables must be a non-empty dict mapping attribute tuples to count arrays")
        held: dict[tuple[int, ...], np.ndarray] = {}
        totals = set()
        for subset, table in tables.items():
            if not isinstance(subset, tuple) or any(isinstance(a, bool) or not isinstance(a, numbers.Integral)
                                                    or not 0 <= a < len(shape) for a in subset) or len(set(subset)) != len(subset):
                raise ValueError(f"tables: key {subset!r} must be a tuple of distinct attribute indices in [0, {len(shape) - 1}]")
            arr = np.asarray(table)
            want = tuple(shape[a] for a in subset)
            if arr.shape != want:
                raise ValueError(f"tables[{subset}] has shape {arr.shape}, expected {want} (the sizes of attributes {subset})")
            if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
                raise ValueError(f"tables[{subset}] must hold integer counts, got dtype {arr.dtype}")
            if arr.size and arr.min() < 0:
                raise ValueError(f"tables[{subset}] holds negative counts (min {arr.min()})")
            order = np.argsort(subset)
            key = tuple(sorted(int(a) for a in subset))
            held[key] = np.transpose(arr.astype(np.int64), order)
            held[key].flags.writeable = False
            totals.add(int(held[key].sum()))
        if len(totals) > 1:
            raise ValueError(f"tables count different record totals {sorted(totals)}: they must count the same records")
        self.shape = shape
        self.total = totals.pop()
        self._tables = held

    @property
    def subsets(self) -> tuple[tuple[int, ...], ...]:
        """The held marginals (sorted attribute tuples)."""
        return tuple(self._tables)

    def covers(self, subset: Iterable[int]) -> bool:
        """Whether the marginal on ``subset`` is held or inside a held one."""
        want = set(subset)
        return any(want <= set(s) for s in self._tables)

    def table(self, subset: Iterable[int]) -> np.ndarray:
        """The marginal on ``subset`` (axes in ``subset``'s order), summed from the smallest held
        table that contains it; a ValueError names what is held when none does."""
        subset = tuple(int(a) for a in subset)
        sources = [s for s in self._tables if set(subset) <= set(s)]
        if not sources:
            raise ValueError(f"no counted marginal contains attributes {subset}; counted: {list(self._tables)}")
        source = min(sources, key=lambda s: self._tables[s].size)
        table = self._tables[source].sum(axis=tuple(j for j, a in enumerate(source) if a not in subset))
        kept = [a for a in source if a in subset]
        return np.transpose(table, [kept.index(a) for a in subset]) if subset else table

    def __repr__(self) -> str:
        return f"<MarginalCounts over {self.shape}: {self.total} records, marginals {list(self._tables)}>"
