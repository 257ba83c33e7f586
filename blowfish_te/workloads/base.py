"""The workload interface: a linear query matrix W (m × K) as an implicit operator.

:class:`Workload` is a linear map with the interface of ``scipy.sparse.linalg.LinearOperator``
(products with vectors and matrices on both sides, ``.T``, scipy's solvers;
``as_linear_operator()`` for scipy's operator algebra) and what the rest of the library needs:
the domain grid, column access for sensitivities (:meth:`~Workload.difference_norms`,
:meth:`~Workload.column_diameter`), Frobenius norms for analytic errors, the Gram operator
and a sparse form where that is feasible. The generic implementations here work from products
alone; structured subclasses override them with exact closed forms, and every override is
tested against the dense twin.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._graph import signed_incidence
from .._operator import LinearMap
from .._validation import MAX_DOMAIN_CELLS, check_index_array, check_shape

#: Default cap on dense arrays built on request (entries), 512 MB of float64.
MAX_DENSE_ENTRIES = 2**26

#: Entries per temporary block in chunked computations.
CHUNK_ENTRIES = 2**22
#: Largest number of non-zeros of a workload's sparse rows (:meth:`Workload.sparse_rows`).
MAX_ROW_NONZEROS = 2**24


def unit_blocks(n: int, step: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The n × n identity in column blocks of at most ``step`` (at least 1) columns: yields each
    block's column indices and the block, one at a time."""
    step = max(1, step)
    for start in range(0, n, step):
        index = np.arange(start, min(start + step, n))
        unit = np.zeros((n, index.size))
        unit[index, np.arange(index.size)] = 1.0
        yield index, unit


NORMS = ("l1", "l2sq")


def as_block(x: ArrayLike) -> np.ndarray:
    """A product operand as int64 (integers, kept exact) or float64 (no float32 accumulation)."""
    x = np.asarray(x)
    if x.dtype.kind in "biu":
        return x.astype(np.int64, copy=False)
    if x.dtype.kind == "f":
        return x.astype(np.float64, copy=False)
    raise TypeError(f"workload products take real numbers, got dtype {x.dtype}")


def check_norm(norm: str) -> str:
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    return norm


class Workload(LinearMap):
    """A linear counting workload W with ``shape == (m, K)`` over a domain grid ``domain``.

    Subclasses implement ``_matmat`` and ``_rmatmat`` (dense blocks in, dense blocks out).
    ``is_binary`` is True when every entry is 0 or 1; ``structured_gram`` when :meth:`gram` applies
    WᵀW without touching the m rows (then errors of strategies are computed through it).
    """

    is_binary: bool = False
    structured_gram: bool = False

    def __init__(self, domain: int | Sequence[int], num_queries: int, name: str) -> None:
        self.domain = check_shape(domain, "domain", MAX_DOMAIN_CELLS)  # constructors that build K-sized arrays check K themselves
        self.name = name
        super().__init__((int(num_queries), math.prod(self.domain)))

    def __repr__(self) -> str:
        m, k = self.shape
        return f"<{type(self).__name__} {self.name}: {m} queries × {k} cells>"

    # products: inputs checked with this workload's message, vectors through the blocks.
    def _check_rows(self, x: ArrayLike, what: str, matrix: bool) -> None:
        rows, unit = (self.shape[0], "query") if what.startswith("r") else (self.shape[1], "cell")
        shape = np.shape(x)
        if (len(shape) != 2 or shape[0] != rows) if matrix else shape not in ((rows,), (rows, 1)):
            kind = f"a ({rows}, n) block, one row per {unit}" if matrix else f"a vector of {rows} entries, one per {unit}"
            raise ValueError(f"{what} of {self.name} needs {kind}; got shape {shape}")

    def matvec(self, x: ArrayLike) -> np.ndarray:
        self._check_rows(x, "matvec", False)
        return super().matvec(x)

    def rmatvec(self, y: ArrayLike) -> np.ndarray:
        self._check_rows(y, "rmatvec", False)
        return super().rmatvec(y)

    def matmat(self, x: ArrayLike) -> np.ndarray:
        self._check_rows(x, "matmat", True)
        return super().matmat(x)

    def rmatmat(self, y: ArrayLike) -> np.ndarray:
        self._check_rows(y, "rmatmat", True)
        return super().rmatmat(y)

    @property
    def num_queries(self) -> int:
        return self.shape[0]

    @property
    def size(self) -> int:
        """Number of cells K."""
        return self.shape[1]

    # -- dense and sparse forms -------------------------------------------------------------
    def dense(self, max_entries: int = MAX_DENSE_ENTRIES) -> np.ndarray:
        """W as a dense ``(m, K)`` array; refused above ``max_entries`` entries.

        Built from blocks of unit vectors on the smaller side (rows through Wᵀ when m < K), so the
        temporary memory stays within the result's size.
        """
        m, k = self.shape
        if m * k > max_entries:
            raise ValueError(
                f"{self.name} as a dense array would have {m * k} entries (limit {max_entries}); "
                "use products, tosparse() or pass a larger max_entries"
            )
        out = np.empty((m, k))
        if m < k:
            for rows, unit in unit_blocks(m, CHUNK_ENTRIES // k):
                out[rows] = np.asarray(self.rmatmat(unit), dtype=np.float64).T
        else:
            for cols, unit in unit_blocks(k, CHUNK_ENTRIES // m):
                out[:, cols] = np.asarray(self.matmat(unit), dtype=np.float64)
        return out

    def tosparse(self) -> sp.csr_array:
        """W as a sparse CSR array (generic version: through the dense form)."""
        return sp.csr_array(self.dense())

    def sparse_rows(self) -> sp.csr_array | None:
        """W as a CSR array when it has a cheap sparse form with at most :data:`MAX_ROW_NONZEROS`
        entries (boxes, explicit matrices, and such workloads seen through a transform or a
        partition say so); None by default."""
        return None

    def disjoint_queries(self) -> bool:
        """True when it is known cheaply that no cell is summed by two queries with weights that
        overlap (the columns are orthogonal: a diagonal Gram matrix); False when it is not known."""
        return False

    def rows(self, indices: ArrayLike) -> Workload:
        """The queries ``indices`` (in that order) as a workload over the same domain; by default
        a :class:`~blowfish_te.workloads.QueryRows` view, and a workload whose closed forms survive
        a subset of its queries (boxes, a partition's view) gives one of its own kind."""
        return QueryRows(self, indices)

    def times_incidence(self, child: np.ndarray, parent: np.ndarray) -> sp.csr_array:
        """Sparse W·P, P the signed incidence of edges child → parent (+1 at child, -1 at parent; K is ⊥)."""
        return sp.csr_array(self.tosparse() @ signed_incidence(child, parent, self.size))

    def columns(self, cells: ArrayLike) -> np.ndarray:
        """Dense columns ``W[:, cells]`` as an ``(m, len(cells))`` array."""
        cells = check_index_array(cells, "cells", self.size - 1)
        e = np.zeros((self.size, cells.size))
        e[cells, np.arange(cells.size)] = 1.0
        return np.asarray(self.matmat(e), dtype=np.float64)

    # -- Gram matrix --------------------------------------------------------------------------
    def gram(self) -> LinearMap:
        """The Gram matrix WᵀW as an implicit K × K operator."""
        return _Gram(self)

    def gram_matrix(self, max_entries: int = MAX_DENSE_ENTRIES) -> np.ndarray:
        """WᵀW as a dense K × K array."""
        k = self.size
        if k * k > max_entries:
            raise ValueError(f"the Gram matrix of {self.name} would have {k * k} entries (limit {max_entries})")
        return np.asarray(self.gram().matmat(np.eye(k)), dtype=np.float64)

    # -- column norms (sensitivity and analytic error) --------------------------------------
    def _check_pairs(self, u: ArrayLike, v: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        u = check_index_array(u, "u", self.size - 1)
        v = check_index_array(v, "v", self.size)
        if u.shape != v.shape:
            raise ValueError(f"u and v must have the same length, got {u.size} and {v.size}")
        return u, v

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        """Norms of column differences ``W[:, u[i]] - W[:, v[i]]``; ``v[i] == K`` means a zero column (⊥).

        ``norm="l1"`` gives L1 norms (policy sensitivities, He et al. Def. 5.1); ``"l2sq"`` squared L2 norms
        (analytic errors). Generic version: products with blocks of signed unit vectors.
        """
        u, v = self._check_pairs(u, v)
        check_norm(norm)
        m, k = self.shape
        out = np.empty(u.size)
        step = max(1, CHUNK_ENTRIES // max(m, k))
        for start in range(0, u.size, step):
            cu, cv = u[start : start + step], v[start : start + step]
            block = np.zeros((k + 1, cu.size))
            cols = np.arange(cu.size)
            block[cu, cols] += 1.0
            block[cv, cols] -= 1.0
            diff = np.asarray(self.matmat(block[:k]), dtype=np.float64)
            out[start : start + step] = np.abs(diff).sum(0) if norm == "l1" else (diff**2).sum(0)
        return out

    def column_norms(self, norm: str = "l1") -> np.ndarray:
        """Norm of every column ``W[:, j]``; the max L1 norm is the unit-change (unbounded) sensitivity."""
        k = self.size
        return self.difference_norms(np.arange(k), np.full(k, k), norm)

    def fingerprint(self) -> str | None:
        """A digest of what defines the rows (equal for equal workloads, in any process), or None
        when the workload cannot give one; results computed for a workload alone (optimised
        strategies) are kept on disk under it."""
        return None

    def query_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The inclusive cell bounds (lo, hi), each of shape (m, d), when every query counts one box
        of cells (ranges, prefixes, rectangles); None for other workloads."""
        return None

    def max_abs_entry(self) -> float:
        """max |W[q, i]|: the unit-change sensitivity of any single query (generic: by columns)."""
        m, k = self.shape
        best = 0.0
        step = max(1, CHUNK_ENTRIES // max(m, 1))
        for start in range(0, k, step):
            best = max(best, float(np.abs(self.columns(np.arange(start, min(start + step, k)))).max()))
        return best

    def frobenius_sq(self) -> float:
        """‖W‖_F², the sum of squared entries."""
        return float(self.column_norms("l2sq").sum())

    def column_diameter(self, cells: ArrayLike | None = None) -> float:
        """Largest L1 distance ``‖W[:, u] - W[:, v]‖₁`` over pairs of ``cells`` (all cells if None).

        This is the sensitivity under a clique policy (complete graph, a partition block).
        Generic version, exact branch and bound: ‖a - b‖₁ <= ‖a‖₁ + ‖b‖₁, so with the cells sorted
        by column norm, row i only needs the partners whose bound beats the best distance found,
        and the search stops once no pair can (one row for the identity workload).
        """
        cells = np.arange(self.size) if cells is None else np.unique(check_index_array(cells, "cells", self.size - 1))
        if cells.size < 2:
            return 0.0
        norms = self.column_norms("l1")[cells]
        order = np.argsort(-norms, kind="stable")
        cells, norms = cells[order], norms[order]
        best = 0.0
        step = max(1, CHUNK_ENTRIES // max(self.num_queries, 1))
        for i in range(cells.size - 1):
            if norms[i] + norms[i + 1] <= best:
                break
            # partners j > i with norms[j] > best - norms[i]: a prefix of the descending norms
            stop = i + 1 + int(np.searchsorted(-norms[i + 1 :], norms[i] - best, side="left"))
            for start in range(i + 1, stop, step):
                partners = cells[start : min(start + step, stop)]
                values = self.difference_norms(np.full(partners.size, cells[i]), partners)
                best = max(best, float(values.max()))
        return best


class _Gram(LinearMap):
    """WᵀW applied as Wᵀ(W x)."""

    def __init__(self, workload: Workload):
        self.workload = workload
        super().__init__((workload.size, workload.size))

    def _matmat(self, x: ArrayLike) -> np.ndarray:
        return self.workload._rmatmat(self.workload._matmat(np.asarray(x)))

    _rmatmat = _matmat

    def _adjoint(self) -> _Gram:
        return self


class QueryRows(Workload):
    """The rows ``rows`` of ``base`` as a workload over the same domain (W_S = S W); they are kept
    as ``picked``."""

    def __init__(self, base: Workload, rows: ArrayLike) -> None:
        rows = check_index_array(rows, "rows", base.num_queries - 1)
        if rows.size == 0:
            raise ValueError("rows must select at least one query")
        self.base = base
        self.picked = rows
        super().__init__(base.domain, rows.size, f"{base.name}[{rows.size} queries]")

    def _matmat(self, x: ArrayLike) -> np.ndarray:
        return np.asarray(self.base._matmat(as_block(x)))[self.picked]

    def _rmatmat(self, z: ArrayLike) -> np.ndarray:
        z = as_block(z)
        full = np.zeros((self.base.num_queries, z.shape[1]))
        np.add.at(full, self.picked, z)
        return self.base._rmatmat(full)

    def frobenius_sq(self) -> float:
        """‖W_S‖_F² from the selected rows (Wᵀ on unit vectors), not from the K columns."""
        m, k = self.shape
        total = 0.0
        for _, unit in unit_blocks(m, CHUNK_ENTRIES // max(k, 1)):
            total += float((np.asarray(self._rmatmat(unit)) ** 2).sum())
        return total
