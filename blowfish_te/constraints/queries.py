"""Public count constraints: count queries whose answers an adversary knows (He, Machanavajjhala,
Ding, SIGMOD 2014, §8).

A constraint q_φ counts the records whose value satisfies φ; over a histogram x it is the 0/1 row
vector of the cells satisfying φ, so a set Q of p constraints is a p × K 0/1 matrix and its public
answers are c = Q x. Builders: :func:`count_queries` (any cell sets), :func:`marginals` (the
marginals of a multi-attribute grid, He et al. Def. 8.4), :func:`rectangles` (disjoint or not),
:func:`known_total` (the record count n).
"""

from __future__ import annotations

import numbers
from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._validation import as_array, check_histogram, check_index_array, check_shape
from ..errors import ConstraintError
from ..workloads import marginals as marginal_queries
from ..workloads import rects

if TYPE_CHECKING:
    from ..policies import ShapeLike

__all__ = ["Constraints", "count_queries", "known_total", "marginals", "rectangles"]


def _query_matrix(shape: tuple[int, ...], queries) -> sp.csr_array:
    """The p × K 0/1 matrix of ``queries``: a 0/1 matrix, or a sequence of cell sets (flat cell
    indices, or boolean masks of ``shape``)."""
    k = int(np.prod(shape))
    if sp.issparse(queries) or (isinstance(queries, np.ndarray) and queries.ndim == 2 and queries.shape[1] == k):
        matrix = sp.csr_array(queries, dtype=np.float64, copy=True)
        if matrix.shape[1] != k:
            raise ValueError(f"queries must have one column per cell ({k}), got shape {matrix.shape}")
        if matrix.shape[0] == 0:
            raise ValueError("queries must hold at least one count query")
        values = matrix.data
        if values.size and not np.all((values == 0) | (values == 1)):
            raise ValueError("queries must be 0/1: a count query counts each record once or not at all")
        matrix.eliminate_zeros()
        return matrix
    if isinstance(queries, (str, bytes)) or not isinstance(queries, Iterable):
        raise TypeError(f"queries must be a 0/1 matrix or a sequence of cell sets, got {type(queries).__name__}")
    rows, cols = [], []
    for i, cells in enumerate(queries):
        arr = np.asarray(cells)
        if arr.dtype == bool:
            if arr.shape not in (shape, (k,)):
                raise ValueError(f"queries[{i}] is a boolean mask of shape {arr.shape}; masks must have the domain's shape {shape}")
            idx = np.flatnonzero(arr.ravel())
        else:
            if arr.size and not np.issubdtype(arr.dtype, np.integer):
                raise TypeError(f"queries[{i}] must hold integer cell indices or be a boolean mask, got dtype {arr.dtype}")
            idx = np.unique(arr.ravel().astype(np.int64))
            if idx.size and (idx[0] < 0 or idx[-1] >= k):
                bad = idx[0] if idx[0] < 0 else idx[-1]
                raise ValueError(f"queries[{i}] holds cell {int(bad)}, outside the domain's cells 0..{k - 1}")
        rows.append(np.full(idx.size, i))
        cols.append(idx)
    p = len(rows)
    if p == 0:
        raise ValueError("queries must hold at least one count query")
    r, c = np.concatenate(rows), np.concatenate(cols)
    return sp.csr_array((np.ones(r.size), (r, c)), shape=(p, k))


class Constraints:
    """Count queries q_1..q_p over the cells of ``shape`` whose answers are public.

    Parameters
    ----------
    shape : the domain
    queries : a p × K 0/1 matrix, or p cell sets (flat indices or boolean masks of ``shape``)
    names : a name per query (default ``q0``, ``q1``, ...), used in every error and report
    counts : the public answers c, if known in advance; a release then refuses data with Q x ≠ c.
        Without them the release discloses Q x exactly, as public knowledge.
    scopes : per query, the record ids it counts (None: every record). Only parallel composition
        reads them (He et al. Thm 4.3): a query counts the records of its scope whose value is in
        its cell set.

    The answers of the queries are not protected: everything the mechanisms hide is what Q x does
    not already say, with the sensitivity of :func:`~blowfish_te.constraints.histogram_sensitivity`.
    """

    def __init__(self, shape, queries, *, names: Sequence[str] | None = None, counts=None, scopes=None, structure=None):
        self.shape = check_shape(shape)
        self.matrix = _query_matrix(self.shape, queries)
        p = self.matrix.shape[0]
        if names is None:
            names = [f"q{i}" for i in range(p)]
        names = list(names)
        if len(names) != p or not all(isinstance(n, str) for n in names):
            raise ValueError(f"names must be {p} strings, one per query, got {names!r}")
        if len(set(names)) != p:
            raise ValueError("names must be distinct")
        self.names = tuple(names)
        self.counts = None if counts is None else self._check_counts(counts)
        self.scopes = self._check_scopes(scopes, p)
        self.structure = structure

    def _check_counts(self, counts) -> np.ndarray:
        values = as_array(counts, "counts").astype(np.float64, copy=False).ravel()
        if values.size != self.num_queries:
            raise ValueError(f"counts must hold one answer per query ({self.num_queries}), got {values.size}")
        if not np.all(np.isfinite(values)) or np.any(values < 0) or np.any(values != np.round(values)):
            raise ValueError(f"counts must be non-negative integers (answers of count queries), got {values.tolist()}")
        return values.astype(np.int64)

    @staticmethod
    def _check_scopes(scopes, p: int) -> tuple:
        if scopes is None:
            return (None,) * p
        scopes = list(scopes)
        if len(scopes) != p:
            raise ValueError(f"scopes must give one record-id set (or None) per query ({p}), got {len(scopes)}")
        out = []
        for i, scope in enumerate(scopes):
            if scope is None:
                out.append(None)
                continue
            if isinstance(scope, (str, bytes)) or not isinstance(scope, Iterable):
                raise TypeError(f"scopes[{i}] must be a collection of record ids or None, got {type(scope).__name__}")
            members = frozenset(scope.ravel().tolist() if isinstance(scope, np.ndarray) else scope)
            if not members:
                raise ValueError(f"scopes[{i}] is empty: a query that counts nobody constrains nothing")
            out.append(members)
        return tuple(out)

    @property
    def num_queries(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def size(self) -> int:
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return self.num_queries

    def __repr__(self) -> str:
        what = f"{self.structure[0]} " if self.structure else ""
        return f"<Constraints: {self.num_queries} {what}count queries over {self.shape}>"

    def __add__(self, other: Constraints) -> Constraints:
        """Both sets of queries (names must stay distinct); closed forms no longer apply."""
        if not isinstance(other, Constraints):
            return NotImplemented
        if other.shape != self.shape:
            raise ValueError(f"cannot combine constraints over {self.shape} and {other.shape}")
        counts = None
        if self.counts is not None and other.counts is not None:
            counts = np.concatenate([self.counts, other.counts])
        elif (self.counts is None) != (other.counts is None):
            raise ValueError("combine constraints that both give their counts, or neither")
        return Constraints(self.shape, sp.vstack([self.matrix, other.matrix]).tocsr(), names=self.names + other.names,
                           counts=counts, scopes=self.scopes + other.scopes)

    def cells(self, i: int) -> np.ndarray:
        """The flat cells counted by query ``i``."""
        return self.matrix.indices[self.matrix.indptr[i]: self.matrix.indptr[i + 1]].copy()

    def evaluate(self, x: ArrayLike) -> np.ndarray:
        """Q x: the answers of the queries on histogram x (exact integers)."""
        counts = check_histogram(x, self.shape)
        return np.rint(self.matrix @ counts.astype(np.float64)).astype(np.int64)

    def subset(self, rows: ArrayLike) -> Constraints:
        """The queries ``rows`` (indices) as their own constraints (no closed-form structure)."""
        rows = check_index_array(rows, "rows", self.num_queries - 1)
        if rows.size == 0:
            raise ValueError("rows must name at least one query")
        return Constraints(self.shape, self.matrix[rows], names=[self.names[i] for i in rows],
                           counts=None if self.counts is None else self.counts[rows],
                           scopes=[self.scopes[i] for i in rows])

    def applicable(self, records: Iterable[Hashable] | None = None) -> np.ndarray:
        """Indices of the queries whose answer a histogram determines: those without a scope for the
        whole dataset (``records`` None), or those whose scope lies in ``records`` for the histogram
        of those records only."""
        if records is None:
            return np.array([j for j, s in enumerate(self.scopes) if s is None], dtype=np.int64)
        records = frozenset(records)
        return np.array([j for j, s in enumerate(self.scopes) if s is not None and s <= records], dtype=np.int64)

    def public_counts(self, x: ArrayLike) -> np.ndarray:
        """The public answers for histogram x: ``counts`` after checking that x satisfies them, or Q x.

        Raises :class:`~blowfish_te.errors.ConstraintError` naming the first violated query: a
        release on data outside I_Q would claim a guarantee the policy does not give.
        """
        answers = self.evaluate(x)
        if self.counts is not None:
            bad = np.flatnonzero(answers != self.counts)
            if bad.size:
                i = int(bad[0])
                raise ConstraintError(
                    f"x does not satisfy the public constraint {self.names[i]!r}: it counts {int(answers[i])} records, "
                    f"the constraint says {int(self.counts[i])} ({bad.size} of {self.num_queries} constraints differ)"
                )
        return answers


def count_queries(shape: ShapeLike, queries: sp.sparray | sp.spmatrix | ArrayLike | Iterable[ArrayLike], *,
                  names: Sequence[str] | None = None, counts: ArrayLike | None = None,
                  scopes: Iterable[Iterable[Hashable] | None] | None = None) -> Constraints:
    """Arbitrary count queries (see :class:`Constraints`)."""
    return Constraints(shape, queries, names=names, counts=counts, scopes=scopes)


def _marginal_axes(shape: tuple[int, ...], axes) -> list[tuple[int, ...]]:
    d = len(shape)
    if isinstance(axes, tuple) and all(isinstance(a, numbers.Integral) for a in axes):
        axes = [axes]
    subsets = []
    for a in axes:
        sub = tuple(sorted(int(i) for i in a))
        if any(i < 0 or i >= d for i in sub) or len(set(sub)) != len(sub):
            raise ValueError(f"marginal axes must be distinct attribute indices in 0..{d - 1}, got {a!r}")
        subsets.append(sub)
    if not subsets:
        raise ValueError("axes must name at least one marginal")
    return subsets


def marginals(shape: ShapeLike, axes: tuple[int, ...] | Iterable[Iterable[int]], *,
              counts: ArrayLike | None = None) -> Constraints:
    """The marginals of a multi-attribute grid on the attribute sets ``axes`` (one tuple, or a list
    of tuples): a count query per value combination of each set (He et al. Def. 8.4)."""
    shape = check_shape(shape)
    subsets = _marginal_axes(shape, axes)
    names = []
    for sub in subsets:
        for combo in np.ndindex(*[shape[i] for i in sub]):
            names.append(",".join(f"A{a}={v}" for a, v in zip(sub, combo)) or "total")
    matrix = marginal_queries(shape, subsets).tosparse()
    return Constraints(shape, matrix, names=names, counts=counts, structure=("marginals", tuple(subsets)))


def rectangles(shape: ShapeLike, lo: ArrayLike, hi: ArrayLike, *, counts: ArrayLike | None = None) -> Constraints:
    """Range count queries on the boxes [lo[i], hi[i]] (inclusive; (p, d) arrays, or (p,) in 1-D)."""
    shape = check_shape(shape)
    lo_arr, hi_arr = as_array(lo, "lo"), as_array(hi, "hi")
    if lo_arr.ndim == 1 and len(shape) == 1:
        lo_arr, hi_arr = lo_arr[:, None], hi_arr[:, None]
    boxes = rects(shape, lo_arr, hi_arr)
    names = ["[" + "×".join(f"{a}..{b}" for a, b in zip(low, high)) + "]" for low, high in zip(boxes.lo.tolist(), boxes.hi.tolist())]
    return Constraints(shape, boxes.tosparse(), names=names, counts=counts,
                       structure=("rectangles", boxes.lo.copy(), boxes.hi.copy()))


def known_total(shape: ShapeLike, *, count: int | None = None) -> Constraints:
    """The single constraint "there are n records" (n public): Blowfish's bounded setting I_n."""
    shape = check_shape(shape)
    k = int(np.prod(shape))
    return Constraints(shape, [np.arange(k)], names=["total"], counts=None if count is None else [count],
                       structure=("marginals", ((),)))
