"""Box workloads: counting queries over axis-aligned boxes of a d-dimensional grid.

Ranges (d = 1), rectangles (d = 2), prefixes, the identity and marginals are all box workloads.
With the exclusive prefix-sum table P(x)[t] = Σ_{c < t} x_c on the grid padded by one cell per
axis (c < t componentwise), a box [lo, hi] sums to Σ over its 2^d corners t ∈ {lo, hi+1}^d of
(-1)^{#lo} P(x)[t] (inclusion–exclusion). So W = R·P with R the sparse m × ∏(k_i+1) corner
matrix, and W x, Wᵀ y and the Gram product cost O(K + m·2^d) (summed-area tables).

Rows may carry non-negative weights w_r (query w_r Σ_{c in box r} x_c), as hierarchical strategies
need; column norms then weigh each box by w_r (L1) or w_r² (squared L2).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._digest import digest
from .._grid import offset_pairs, positive_offsets, strides
from .._validation import MAX_DOMAIN_CELLS, as_array, check_index_array, check_real_array, check_shape
from .base import CHUNK_ENTRIES, MAX_ROW_NONZEROS, Workload, as_block, check_norm

#: Cap on non-zeros of sparse forms built on request.
MAX_SPARSE_NNZ = 2**26


def _corner_indices(padded: tuple[int, ...], lo: np.ndarray, hi: np.ndarray):
    """Yield (sign, flat index into the padded grid) for each of the 2^d corner choices."""
    d = len(padded)
    for bits in itertools.product((0, 1), repeat=d):
        coords = [lo[:, i] if b else hi[:, i] + 1 for i, b in enumerate(bits)]
        yield (-1) ** sum(bits), np.ravel_multi_index(coords, padded)


def _suffix_sums(table: np.ndarray, d: int) -> np.ndarray:
    """Σ over t ≥ s (componentwise) of table[t], on the first d axes."""
    for axis in range(d):
        table = np.flip(np.cumsum(np.flip(table, axis), axis=axis), axis)
    return table


def coverage(domain: tuple[int, ...], lo: np.ndarray, hi: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Number (or total weight) of the boxes [lo_r, hi_r] containing each cell, flat, in O(K + m·2^d)."""
    padded = tuple(k + 1 for k in domain)
    size = math.prod(padded)
    diff = np.zeros(size, dtype=np.int64 if weights is None else np.float64)
    for sign, idx in _corner_indices(padded, lo, hi):
        diff += sign * np.bincount(idx, weights=weights, minlength=size)
    table = _suffix_sums(diff.reshape(padded), len(domain))
    return table[(slice(1, None),) * len(domain)].reshape(-1)


class Boxes(Workload):
    """Counting queries ``W[r] x = Σ_{lo_r <= c <= hi_r} x_c`` over m boxes of a grid (bounds inclusive).

    Parameters
    ----------
    domain : int or tuple of int
        Grid shape (k_1, ..., k_d).
    lo, hi : array of shape (m, d) (or (m,) when d = 1)
        Corners of the boxes, ``0 <= lo <= hi < k`` on every axis; both None (and no weights):
        one box per cell in row-major order (the identity workload).
    weights : array of shape (m,), optional
        Finite non-negative row weights; None means all ones (a 0/1 workload).
    """

    def __init__(self, domain, lo, hi, name: str | None = None, weights=None):
        domain = check_shape(domain, "domain", MAX_DOMAIN_CELLS)  # boxes are listed by corners, not cells
        if lo is None and hi is None and weights is None:  # one box per cell: valid by construction
            check_shape(domain, "domain")  # ... and a box per cell is an array of the domain's size
            self._init_trusted(domain, math.prod(domain), None, None, None, name or f"cells({domain})")
            self._counts["l1"] = np.broadcast_to(np.int64(1), (self.size,))  # all ones, held once
            self._cells = True  # W = I: products copy their argument
            return
        d = len(domain)
        lo, hi = as_array(lo, "lo"), as_array(hi, "hi")
        if lo.size == 0 or hi.size == 0:
            raise ValueError("lo and hi must describe at least one box (a workload needs at least one query), got 0 boxes")
        for arg, arr in (("lo", lo), ("hi", hi)):
            if arr.dtype == bool or arr.dtype.kind not in "iu":
                raise TypeError(f"{arg} must hold integer cell coordinates, got dtype {arr.dtype}")
        if d == 1 and lo.ndim == 1 and hi.ndim == 1:
            lo, hi = lo.reshape(-1, 1), hi.reshape(-1, 1)
        if lo.ndim != 2 or lo.shape[1] != d or lo.shape != hi.shape:
            raise ValueError(f"lo and hi must both have shape (m, {d}) for domain {domain}, got {lo.shape} and {hi.shape}")
        k = np.array(domain)
        bad = np.flatnonzero(((lo < 0) | (hi >= k) | (lo > hi)).any(axis=1))
        if bad.size:
            r = int(bad[0])
            raise ValueError(
                f"box {r} has lo={lo[r].tolist()}, hi={hi[r].tolist()}: bounds must satisfy "
                f"0 <= lo <= hi < {list(domain)} on every axis ({bad.size} invalid boxes)"
            )
        m = lo.shape[0]
        if weights is not None:
            weights = check_real_array(weights, "weights", minimum=0).reshape(-1)
            if weights.shape != (m,):
                raise ValueError(f"weights must be {m} finite non-negative numbers, one per box, got {weights.size}")
            weights.flags.writeable = False
            if (weights == 1).all():
                weights = None
        lo, hi = lo.astype(np.int64), hi.astype(np.int64)  # copies: never the caller's arrays
        lo.flags.writeable = False
        hi.flags.writeable = False
        self._init_trusted(domain, m, lo, hi, weights, name or f"boxes({domain}, m={m})")

    def _init_trusted(self, domain: tuple[int, ...], num_boxes: int, lo: np.ndarray | None, hi: np.ndarray | None,
                      weights: np.ndarray | None, name: str) -> None:
        """Boxes the library built valid: read-only int64 (m, d) corners, shared and not checked,
        and weights None (all ones) or read-only positive numbers. Corners None: made on request
        by :meth:`_made_corners` and never held."""
        self.weights = weights
        self.is_binary = weights is None
        self._lo, self._hi = lo, hi
        super().__init__(domain, num_boxes, name)
        self._padded = tuple(s + 1 for s in domain)
        self._counts: dict[str, np.ndarray] = {}
        self._cells = False

    def _made_corners(self) -> tuple[np.ndarray, np.ndarray]:
        """The corners of boxes that do not hold them: here one box per cell in row-major order."""
        cells = np.arange(self.size, dtype=np.int64).reshape(-1, 1) if len(self.domain) == 1 else \
            np.indices(self.domain).reshape(len(self.domain), -1).T.astype(np.int64)
        cells.flags.writeable = False
        return cells, cells

    @property
    def lo(self) -> np.ndarray:
        """Lower corners, read-only (m, d) int64."""
        return self._made_corners()[0] if self._lo is None else self._lo

    @property
    def hi(self) -> np.ndarray:
        """Upper corners (inclusive), read-only (m, d) int64."""
        return self._made_corners()[1] if self._hi is None else self._hi

    @functools.cached_property
    def _corners(self) -> sp.csr_array:
        """The signed corner matrix (m × padded cells): W x = corners @ (prefix table of x).
        Built on the first product, so strategies that never multiply through it (the identity)
        and workloads only planned with never pay for it."""
        m, weights = self.lo.shape[0], self.weights
        rows, cols, data = [], [], []
        for sign, idx in _corner_indices(self._padded, self.lo, self.hi):
            rows.append(np.arange(m))
            cols.append(idx)
            data.append(np.full(m, sign, dtype=np.int64) if weights is None else sign * weights)
        return sp.csr_array(
            (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
            shape=(m, math.prod(self._padded)),
        )

    # -- products -------------------------------------------------------------------------------
    def _prefix_table(self, x: np.ndarray) -> np.ndarray:
        d = len(self.domain)
        table = x.reshape(self.domain + (x.shape[1],))
        padded = np.zeros(self._padded + (x.shape[1],), dtype=np.result_type(x.dtype, np.int64))
        inner = padded[(slice(1, None),) * d]
        inner[...] = table
        for axis in range(d):
            np.cumsum(inner, axis=axis, out=inner)
        return padded.reshape(-1, x.shape[1])

    def _matmat(self, x):
        x = as_block(x)
        if self._cells:
            return np.array(x, dtype=np.result_type(x.dtype, np.int64))
        return self._corners @ self._prefix_table(x)

    def _rmatmat(self, y):
        y = as_block(y)
        if self._cells:
            return np.array(y, dtype=np.result_type(y.dtype, np.int64))
        d = len(self.domain)
        table = _suffix_sums((self._corners.T @ y).reshape(self._padded + (y.shape[1],)), d)
        return table[(slice(1, None),) * d].reshape(self.size, y.shape[1])

    def gram_matrix(self, max_entries: int = 2**26) -> np.ndarray:
        """WᵀW; in 1-D from the endpoint table: G[u, v] = Σ w_r² over boxes with lo <= u and
        hi >= v (u <= v), two cumulative sums over K² entries instead of K products."""
        k = self.size
        if len(self.domain) != 1:
            return super().gram_matrix(max_entries)
        if k * k > max_entries:
            raise ValueError(f"the Gram matrix of {self.name} would have {k * k} entries (limit {max_entries})")
        table = np.zeros((k, k))
        np.add.at(table, (self.lo[:, 0], self.hi[:, 0]), 1.0 if self.weights is None else self.weights**2)
        for row in range(1, k):  # cumulative sum down the rows, row by row (numpy's axis-0 cumsum is far slower)
            np.add(table[row], table[row - 1], out=table[row])
        np.cumsum(table[:, ::-1], axis=1, out=table[:, ::-1])  # and from the right, in place
        for row in range(1, k):  # mirror the upper triangle (u <= v) below the diagonal
            table[row, :row] = table[:row, row]
        return table

    def columns(self, cells: ArrayLike) -> np.ndarray:
        cells = check_index_array(cells, "cells", self.size - 1)
        coords = np.stack(np.unravel_index(cells, self.domain), axis=1)
        inside = self._inside(coords).T.astype(np.float64)
        return inside if self.weights is None else inside * self.weights[:, None]

    def _inside(self, coords: np.ndarray) -> np.ndarray:
        """Boolean (len(coords), m): whether each box contains each cell."""
        c = coords[:, None, :]
        return ((self.lo[None] <= c) & (c <= self.hi[None])).all(axis=2)

    def fingerprint(self) -> str:
        """Digest of the domain, corners and weights (one box per cell: the domain alone)."""
        if self._lo is None:
            return digest("cells", self.domain)
        weights = "ones" if self.weights is None else self.weights
        return digest("boxes", self.domain, self._lo, self._hi, weights)

    def query_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        return (self.lo, self.hi) if self.weights is None else None

    def max_abs_entry(self) -> float:
        return 1.0 if self.weights is None else float(self.weights.max())

    def frobenius_sq(self) -> float:
        """‖W‖_F² = Σ_r w_r² · volume_r, from the boxes alone (no pass over the cells)."""
        volumes = (self.hi - self.lo + 1).prod(axis=1).astype(np.float64)
        return float(volumes.sum() if self.weights is None else (self.weights**2 * volumes).sum())

    # -- column norms -----------------------------------------------------------------------
    def _norm_weights(self, norm: str) -> np.ndarray | None:
        """Per-box weight of a column entry under ``norm``: w (L1) or w² (squared L2); None for 0/1."""
        if self.weights is None:
            return None
        return self.weights if norm == "l1" else self.weights**2

    def cell_counts(self, norm: str = "l1") -> np.ndarray:
        """Column norms: the number (total weight, under ``norm``) of boxes containing each cell."""
        key = "l1" if self.weights is None else check_norm(norm)
        if key not in self._counts:
            counts = coverage(self.domain, self.lo, self.hi, self._norm_weights(key))
            counts.flags.writeable = False
            self._counts[key] = counts
        return self._counts[key]

    def _both(self, offset: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
        """For every cell u, the number (total weight) of boxes containing both u and u + offset."""
        lo = self.lo - np.minimum(offset, 0)
        hi = self.hi - np.maximum(offset, 0)
        keep = (lo <= hi).all(axis=1)
        return coverage(self.domain, lo[keep], hi[keep], None if weights is None else weights[keep])

    def _both_with(self, cell: int, weights: np.ndarray | None) -> np.ndarray:
        """For every cell u, the number (total weight) of boxes containing both u and ``cell``."""
        coord = np.array(np.unravel_index(cell, self.domain))
        keep = ((self.lo <= coord) & (coord <= self.hi)).all(axis=1)
        return coverage(self.domain, self.lo[keep], self.hi[keep], None if weights is None else weights[keep])

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        """Exact column-difference norms.

        ‖W e_u - W e_v‖ = c(u) + c(v) - 2 b(u, v), where c weighs the boxes containing a cell and
        b those containing both (weights w for L1, w² for squared L2; entries are 0 or w_r). Pairs
        are grouped so that b is one O(K + m·2^d) coverage table per group: by grid offset
        δ = v - u (b covers the boxes shrunk by δ), or by a shared endpoint (b covers the boxes
        containing it), whichever needs fewer tables. When every grouping is too fine, pairs are
        tested against every box directly (O(m·d) each).
        """
        u, v = self._check_pairs(u, v)
        check_norm(norm)
        bottom = v == self.size
        if not bottom.any():
            return self._cell_pair_norms(u, v, norm)
        out = np.empty(u.size)
        out[bottom] = self.cell_counts(norm)[u[bottom]]
        cells = np.flatnonzero(~bottom)
        if cells.size:
            out[cells] = self._cell_pair_norms(u[cells], v[cells], norm)
        return out

    def _cell_pair_norms(self, u: np.ndarray, v: np.ndarray, norm: str) -> np.ndarray:
        """:meth:`difference_norms` for pairs of cells (no ⊥)."""
        if len(self.domain) != 1:
            return self._pair_norms(u, v, norm)
        gap = u - v
        np.abs(gap, out=gap)
        if not (gap == 1).all():
            return self._pair_norms(u, v, norm)
        del gap
        # neighbouring cells a < a + 1 (a line's edges): the boxes holding exactly one of them
        # start at a + 1 or end at a — O(m + K), whatever the boxes' lengths
        weights = self._norm_weights(norm)
        table = np.bincount(self.hi[:, 0], weights=weights, minlength=self.size).astype(np.float64)
        table[:-1] += np.bincount(self.lo[:, 0], weights=weights, minlength=self.size)[1:]
        return table[np.minimum(u, v)]

    def _pair_norms(self, u: np.ndarray, v: np.ndarray, norm: str = "l1") -> np.ndarray:
        d = len(self.domain)
        k = np.array(self.domain)
        weights = self._norm_weights(norm)
        cu = np.stack(np.unravel_index(u, self.domain), axis=1)
        cv = np.stack(np.unravel_index(v, self.domain), axis=1)
        offsets = np.ravel_multi_index(tuple((cv - cu + k - 1).T), tuple(2 * k - 1))
        groupings = {"offset": offsets, "u": u, "v": v}
        constant = [name for name, key in groupings.items() if (key == key[0]).all()]
        if constant:  # the common cases: one offset block of a policy, or a star
            sizes = {constant[0]: 1}
        else:
            sizes = {"offset": np.unique(offsets).size}
            if sizes["offset"] > 16:  # only then can an endpoint grouping be worth its two sorts
                sizes.update(u=np.unique(u).size, v=np.unique(v).size)
        by = min(sizes, key=sizes.get)
        m = self.num_queries
        counts = self.cell_counts(norm)
        out = np.empty(u.size)
        if sizes[by] * (self.size + m * 2**d) <= u.size * m * d:
            keys, inverse = np.unique(groupings[by], return_inverse=True)
            order = np.argsort(inverse, kind="stable")
            groups = np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1)
            for key, group in zip(keys, groups):
                if by == "offset":
                    offset = np.array(np.unravel_index(key, tuple(2 * k - 1))) - (k - 1)
                    both = self._both(offset, weights)[u[group]]
                else:
                    both = self._both_with(int(key), weights)[(v if by == "u" else u)[group]]
                out[group] = counts[u[group]] + counts[v[group]] - 2 * both
            return out
        step = max(1, CHUNK_ENTRIES // (m * d))
        for start in range(0, u.size, step):
            sl = slice(start, start + step)
            differ = self._inside(cu[sl]) != self._inside(cv[sl])
            out[sl] = differ.sum(axis=1) if weights is None else differ @ weights
        return out

    def column_diameter(self, cells: ArrayLike | None = None) -> float:
        """Sensitivity under a clique. The whole grid: one coverage table per grid offset. A subset:
        cells with identical columns are merged first — per axis a column only changes at box
        boundaries, so 1-D ranges have at most 2m + 1 distinct columns — then branch and bound."""
        if cells is not None:
            cells = np.unique(check_index_array(cells, "cells", self.size - 1))
            if cells.size < 2:
                return 0.0
            if cells.size != self.size:
                return super().column_diameter(self._distinct_columns(cells))
        counts = self.cell_counts("l1")
        weights = self._norm_weights("l1")
        best = 0.0
        for offset in positive_offsets(self.domain, sum(self.domain)):
            pu, pv = offset_pairs(self.domain, offset)
            both = self._both(offset, weights)
            best = max(best, float((counts[pu] + counts[pv] - 2 * both[pu]).max()))
        return best

    def _distinct_columns(self, cells: np.ndarray) -> np.ndarray:
        """One cell per distinct column among ``cells``."""
        coords = np.unravel_index(cells, self.domain)
        classes = []
        for axis in range(len(self.domain)):
            bounds = np.unique(np.concatenate([self.lo[:, axis], self.hi[:, axis] + 1]))
            classes.append(np.searchsorted(bounds, coords[axis], side="right"))
        key = np.ravel_multi_index(tuple(classes), tuple(int(c.max()) + 1 for c in classes))
        return cells[np.unique(key, return_index=True)[1]]

    # -- sparse forms -----------------------------------------------------------------------
    def sparse_rows(self) -> sp.csr_array | None:
        """:meth:`tosparse` when the boxes' total volume is at most MAX_ROW_NONZEROS cells."""
        if float((self.hi - self.lo + 1).prod(axis=1).sum()) > MAX_ROW_NONZEROS:
            return None
        return sp.csr_array(self.tosparse(), dtype=np.float64)

    def rows(self, indices: ArrayLike) -> Boxes:
        """The boxes ``indices`` (their weights kept): boxes stay boxes, so closed forms apply."""
        indices = check_index_array(indices, "indices", self.num_queries - 1)
        weights = None if self.weights is None else self.weights[indices]
        return Boxes(self.domain, self.lo[indices], self.hi[indices], name=f"{self.name}[{indices.size} queries]",
                     weights=weights)

    def tosparse(self) -> sp.csr_array:
        """W as a CSR array with one non-zero per (box, cell inside it), built on first use and
        shared: its arrays are read-only (copy it to modify)."""
        return self._sparse_form

    @functools.cached_property
    def _sparse_form(self) -> sp.csr_array:
        sizes = self.hi - self.lo + 1
        volume = sizes.prod(axis=1)
        total = int(volume.sum())
        if total > MAX_SPARSE_NNZ:
            raise ValueError(
                f"{self.name} would have {total} non-zeros as a sparse matrix (limit {MAX_SPARSE_NNZ}); "
                "use the implicit products instead"
            )
        rows = np.repeat(np.arange(self.num_queries), volume)
        rem = np.arange(total) - np.repeat(np.cumsum(volume) - volume, volume)
        flat = np.zeros(total, dtype=np.int64)
        st = strides(self.domain)
        for axis in reversed(range(len(self.domain))):
            size = np.repeat(sizes[:, axis], volume)
            flat += (np.repeat(self.lo[:, axis], volume) + rem % size) * st[axis]
            rem //= size
        data = np.ones(total) if self.weights is None else np.repeat(self.weights, volume)
        form = sp.csr_array((data, (rows, flat)), shape=self.shape)
        for part in (form.data, form.indices, form.indptr):
            part.flags.writeable = False
        return form

    def times_incidence(self, child: np.ndarray, parent: np.ndarray) -> sp.csr_array:
        """Sparse W·P for the signed incidence P of edges child → parent (parent == K is ⊥).

        In 1-D, W = R·P_exclusive, and P_exclusive·P has, for edge (c → p), entries
        [c < t] - [p < t]: a run of ±1 over t ∈ (min, max]. Its non-zeros number the total edge
        length, so a path-like tree costs O(K + m) instead of O(nnz(W)).
        """
        if len(self.domain) != 1:
            return super().times_incidence(child, parent)
        length = np.abs(parent - child)
        total = int(length.sum())
        if total > MAX_SPARSE_NNZ:
            return super().times_incidence(child, parent)
        start = np.minimum(child, parent) + 1
        rows = np.repeat(start, length) + np.arange(total) - np.repeat(np.cumsum(length) - length, length)
        cols = np.repeat(np.arange(child.size), length)
        vals = np.repeat(np.where(child < parent, 1, -1), length)
        runs = sp.csr_array((vals, (rows, cols)), shape=(self.size + 1, child.size))
        out = sp.csr_array(self._corners @ runs, dtype=np.float64)
        out.eliminate_zeros()
        return out
