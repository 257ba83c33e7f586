"""A workload seen through a partition: the queries on bucket totals spread evenly over cells."""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._operator import FunctionMap, LinearMap
from .base import CHUNK_ENTRIES, MAX_ROW_NONZEROS, Workload, as_block, check_norm
from .boxes import Boxes

#: Boxes with at most this many (box, cell) pairs are multiplied out sparsely.
SPARSE_PAIRS = 2**22
#: W E is formed densely from box overlaps when it has at most this many entries.
DENSE_OVERLAPS = 2**24
#: The Gram matrix over the buckets is kept dense up to this many buckets (32 MB).
DENSE_GRAM_BUCKETS = 2048
#: (W E)ᵀ(W E) is formed as Eᵀ Wᵀ (W E) when K·d·TRANSPOSE_COST < queries·m, else by a dense
#: product: one pass of Wᵀ over the cells costs about as much per (cell, axis, bucket) as 400
#: multiply-adds of the product (measured: 1-D prefixes over 1,436 buckets 0.04 s against 0.16 s;
#: 2000 rectangles over 128² and 1,081 buckets 0.33 s against 0.04 s).
TRANSPOSE_COST = 400


class BucketWorkload(Workload):
    """W E over m buckets, E[i, b] = 1/|b| for the cells i of bucket b: the answers W x̂ when each
    bucket's total is spread evenly over its cells (DAWA's reduced workload); ``spread`` is E
    (sparse, K × m)."""

    def __init__(self, base: Workload, labels):
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        if labels.shape != (base.size,) or labels.min(initial=0) < 0:
            raise ValueError(f"labels must give one bucket in 0..m-1 for each of the {base.size} cells")
        sizes = np.bincount(labels)
        if (sizes == 0).any():
            raise ValueError("labels must number the buckets 0..m-1, each used")
        self.base = base
        self.labels = labels
        self.sizes = sizes
        self.spread = sp.csr_array((1.0 / sizes[labels], (np.arange(labels.size), labels)), shape=(labels.size, sizes.size))
        super().__init__((sizes.size,), base.num_queries, f"{base.name} on {sizes.size} buckets")

    def sparse_rows(self) -> sp.csr_array | None:
        """W E from the box overlaps where the buckets are boxes, else the base's sparse rows times
        E; None when neither is cheap."""
        dense = self.overlap_matrix()
        if dense is not None:
            return sp.csr_array(dense)
        rows = self.base.sparse_rows()
        if rows is None:
            return None
        rows = sp.csr_array(rows @ self.spread)
        return rows if rows.nnz <= MAX_ROW_NONZEROS else None

    def rows(self, indices: ArrayLike) -> BucketWorkload:
        """The partition's view of the base's queries ``indices``: it keeps its partition."""
        return BucketWorkload(self.base.rows(indices), self.labels)

    def expand(self, totals: np.ndarray) -> np.ndarray:
        """Cell estimates from bucket totals, uniform within each bucket."""
        return self.spread @ np.asarray(totals, dtype=np.float64)

    def _matmat(self, y):
        return self.base._matmat(self.expand(as_block(y)))

    def _rmatmat(self, z):
        return self.spread.T @ self.base._rmatmat(as_block(z))

    @functools.cached_property
    def bucket_boxes(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(lo, hi), inclusive corners of every bucket, when W is boxes and every bucket is a box
        of the grid (a tree's leaves, a grid's blocks); else None."""
        if not isinstance(self.base, Boxes):
            return None
        coords = np.unravel_index(np.arange(self.labels.size), self.base.domain)
        m = self.sizes.size
        lo = np.stack([np.full(m, self.labels.size) for _ in coords], axis=1)
        hi = np.zeros_like(lo)
        for axis, c in enumerate(coords):
            np.minimum.at(lo[:, axis], self.labels, c)
            np.maximum.at(hi[:, axis], self.labels, c)
        return (lo, hi) if np.array_equal((hi - lo + 1).prod(axis=1), self.sizes) else None

    def overlap_matrix(self) -> np.ndarray | None:
        """W E as a dense array when the buckets are boxes (:attr:`bucket_boxes`) and it has at
        most :data:`DENSE_OVERLAPS` entries: (W E)[q, b] = w_q·|box_q ∩ b|/|b|, the overlap a
        product of per-axis interval overlaps — O(queries × buckets), no pass over the cells.
        Built once per workload (a read-only array)."""
        return self._overlaps

    @functools.cached_property
    def _overlaps(self) -> np.ndarray | None:
        boxes = self.bucket_boxes
        if boxes is None or self.num_queries * self.size > DENSE_OVERLAPS:
            return None
        base, (lo, hi) = self.base, boxes
        out = None
        for axis in range(lo.shape[1]):  # in place over contiguous columns: one Q × m array per axis
            query_lo, query_hi, bucket_lo, bucket_hi = (np.ascontiguousarray(corner[:, axis], dtype=np.float64)
                                                        for corner in (base.lo, base.hi, lo, hi))
            overlap = np.minimum.outer(query_hi + 1, bucket_hi + 1)
            overlap -= np.maximum.outer(query_lo, bucket_lo)
            np.maximum(overlap, 0.0, out=overlap)
            out = overlap if out is None else np.multiply(out, overlap, out=out)
        out /= self.sizes
        if base.weights is not None:
            out *= base.weights[:, None]
        out.flags.writeable = False
        return out

    def frobenius_sq(self) -> float:
        """‖W E‖_F²: from :meth:`overlap_matrix` when the buckets are boxes, else from W's sparse
        rows when W is boxes, in groups of at most 2·SPARSE_PAIRS (box, cell) pairs (linear in
        the boxes' total volume); else from the columns."""
        base = self.base
        if not isinstance(base, Boxes):
            return super().frobenius_sq()
        dense = self.overlap_matrix()
        if dense is not None:
            return float((dense**2).sum())
        volumes = (base.hi - base.lo + 1).prod(axis=1)
        if volumes.max() > SPARSE_PAIRS:
            return super().frobenius_sq()
        groups = (np.cumsum(volumes) - 1) // SPARSE_PAIRS
        cuts = np.concatenate(([0], np.flatnonzero(np.diff(groups)) + 1, [volumes.size]))
        total = 0.0
        for start, end in zip(cuts[:-1], cuts[1:]):
            weights = None if base.weights is None else base.weights[start:end]
            group = base if (start, end) == (0, volumes.size) else Boxes(base.domain, base.lo[start:end], base.hi[start:end],
                                                                         weights=weights)
            total += float(((group.tosparse() @ self.spread).data ** 2).sum())
        return total

    @property
    def structured_gram(self) -> bool:
        """The Gram matrix is dense (up to :data:`DENSE_GRAM_BUCKETS` buckets): errors are then
        read through it, never through W over the cells."""
        return self.size <= DENSE_GRAM_BUCKETS

    def disjoint_queries(self) -> bool:
        """Read off the kept dense Gram matrix (no copy): no two buckets share a query."""
        if not self.structured_gram:
            return False
        gram = self._dense_gram
        return np.count_nonzero(gram) == np.count_nonzero(np.diagonal(gram))

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        """Norms of column differences of W E: squared L2 norms from the dense Gram matrix
        (‖W E(e_u - e_v)‖² = G_uu + G_vv - 2 G_uv), L1 norms from :meth:`overlap_matrix`, where
        they are built; else through W."""
        u, v = self._check_pairs(u, v)
        check_norm(norm)
        if norm == "l2sq" and self.structured_gram:
            gram = self._dense_gram
            diag = np.concatenate([np.diag(gram), [0.0]])
            cross = np.where(v < self.size, gram[u, np.minimum(v, self.size - 1)], 0.0)
            return np.maximum(diag[u] + diag[v] - 2.0 * cross, 0.0)
        dense = self.overlap_matrix()
        if dense is not None:
            padded = np.concatenate([dense, np.zeros((dense.shape[0], 1))], axis=1)
            out = np.empty(u.size)
            step = max(1, CHUNK_ENTRIES // dense.shape[0])
            for start in range(0, u.size, step):
                diff = padded[:, u[start : start + step]] - padded[:, v[start : start + step]]
                out[start : start + step] = np.abs(diff).sum(0) if norm == "l1" else (diff**2).sum(0)
            return out
        return super().difference_norms(u, v, norm)

    def gram(self) -> LinearMap:
        """(W E)ᵀ(W E) over the m buckets: dense up to :data:`DENSE_GRAM_BUCKETS` buckets (an
        optimiser's every product then costs O(m²), not a pass through W over the cells)."""
        if not self.structured_gram:
            return super().gram()
        dense = self._dense_gram
        return FunctionMap((self.size, self.size), lambda x: dense @ x, lambda y: dense @ y)

    @functools.cached_property
    def _dense_gram(self) -> np.ndarray:
        dense = self._build_gram()
        dense.flags.writeable = False
        return dense

    def gram_matrix(self, max_entries: int = 2**26) -> np.ndarray:
        """(W E)ᵀ(W E) as a dense m × m array (a copy of the kept one where :attr:`structured_gram`)."""
        m = self.size
        if m * m > max_entries:
            raise ValueError(f"the Gram matrix of {self.name} would have {m * m} entries (limit {max_entries})")
        return np.array(self._dense_gram) if self.structured_gram else self._build_gram()

    def _build_gram(self) -> np.ndarray:
        m = self.size
        dense = self.overlap_matrix()
        if dense is not None:
            if self.base.size * len(self.base.domain) * TRANSPOSE_COST < self.num_queries * m:
                return np.asarray(self.spread.T @ self.base.rmatmat(dense), dtype=np.float64)  # Eᵀ Wᵀ (W E)
            return dense.T @ dense
        spread = self.spread.toarray()
        if self.num_queries <= self.base.size:  # (W E)ᵀ (W E): one pass through W
            reduced = np.asarray(self.base.matmat(spread), dtype=np.float64)
            return reduced.T @ reduced
        return np.asarray(self.spread.T @ self.base.gram().matmat(spread), dtype=np.float64)
