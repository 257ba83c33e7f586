"""Hierarchical strategies: a tree of boxes over the domain, each node measured with a weight, and
its exact weighted least squares (Hay et al. 2010; Qardaji, Yang, Li 2013).

A :class:`Hierarchy` splits the domain box recursively: on every axis a side of length s becomes
c = min(b, s) parts whose sizes differ by at most one (the first s mod c parts one cell longer),
until single cells. Nodes are stored level by level, root first, so the children of level l
are exactly the nodes of level l + 1.

A :class:`TreeStrategy` measures node n as w_n · (sum of its box) (w_n = 0: not measured). With
Laplace noise of equal scale on every row, the measurement of node n's total has variance
∝ 1/w_n², and the best linear unbiased estimate is two passes over the tree:

- bottom up: ẑ_n combines the node's own measurement (precision w_n²) with the sum of its
  children's ẑ (precision 1/Σ V_c): ẑ_n = α_n z_n + (1 - α_n) Σ_c ẑ_c, V_n = 1/(w_n² + 1/Σ V_c);
- top down: x̄_root = ẑ_root, and each child takes its share of the parent's discrepancy in
  proportion to its variance, x̄_c = ẑ_c + (V_c / Σ_siblings V)(x̄_parent - Σ_siblings ẑ).

Both passes are linear with data-independent coefficients, so they are A⁺ itself; their adjoint
(the passes reversed and transposed) gives (A⁺)ᵀ. Cost O(#nodes) per right-hand side.

The error has a closed form. Write e_n for the error of the estimated total of node n. Given the
parent's total, the children's subtree estimates are independent with variances V_c, so
e_c = β_c e_p + r_c, where the r of one family are independent of everything above and of other
families, with Cov(r_c, r_c') = V_c δ_cc' - V_c V_c' / Σ_siblings V (the Gaussian conditioned on
its sum). A query q's error is then a sum of independent terms: with its load
L(n) = Σ_{cells i} q_i π_n(i) on every node, π_n(i) the product of β from leaf i up to n (so
L(parent) = Σ_c β_c L(c), and L = 1 on nodes inside a box, 0 outside),

    Var(q x̂) = V_root L(root)² + Σ_{c ≠ root} V_c (L(c) - L(parent c))²

(an unmeasured child, V_c = ∞, has β_c = 1 and its term is 0). Only nodes cut by a query's
boundary contribute, which gives ‖W A⁺‖_F² in O(m·h) for 1-D ranges and through sparse loads for
workloads with sparse rows.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._grid import shape_label
from .._validation import check_int, check_real_array, check_shape
from ..workloads.base import CHUNK_ENTRIES, Workload, as_block, check_norm
from ..workloads.boxes import Boxes
from .base import LeastSquares


def _index_dtype(n: int) -> type:
    """int32 for node and cell indices when they fit (half the memory of int64), else int64."""
    return np.int32 if n < 2**31 else np.int64


def _split_axis(lo: list, hi: list, axis: int, b: int) -> tuple[list, list]:
    """Split every box (per-axis corner columns ``lo``, ``hi``) along ``axis`` into
    c = min(b, side) parts of near-equal size, the first side mod c parts one cell longer; the
    parts of a box are consecutive. Part j of every box is written in one strided pass, so no
    temporary is as large as the result."""
    side = hi[axis] - lo[axis] + 1
    parts = np.minimum(b, side)
    base, extra = side // parts, side % parts
    first = np.cumsum(parts) - parts
    total = int(first[-1] + parts[-1])
    start, stop = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
    for j in range(int(parts.max())):
        has = slice(None) if j < parts.min() else np.flatnonzero(parts > j)
        at, size, longer = first[has] + j, base[has], j < extra[has]
        start[at] = lo[axis][has] + j * size + np.minimum(j, extra[has])
        stop[at] = start[at] + size + longer - 1
    new_lo = [start if a == axis else np.repeat(c, parts) for a, c in enumerate(lo)]
    new_hi = [stop if a == axis else np.repeat(c, parts) for a, c in enumerate(hi)]
    return new_lo, new_hi


def _levels(domain: tuple[int, ...], b: int):
    """The hierarchy level by level, root first: (lo, hi, split, counts) with ``lo``, ``hi`` the
    per-axis corner columns of the level's boxes, ``split`` the positions of the previous
    level's nodes that have children here and ``counts`` how many each (None at the root)."""
    lo, hi = [np.zeros(1, dtype=np.int64) for _ in domain], [np.array([s - 1], dtype=np.int64) for s in domain]
    yield lo, hi, None, None
    while True:
        split = np.flatnonzero(np.any([h > l for l, h in zip(lo, hi)], axis=0))
        if split.size == 0:
            return
        lo, hi = [c[split] for c in lo], [c[split] for c in hi]
        counts = np.prod([np.minimum(b, h - l + 1) for l, h in zip(lo, hi)], axis=0)
        for axis in range(len(domain)):
            lo, hi = _split_axis(lo, hi, axis, b)
        yield lo, hi, split, counts


class Hierarchy:
    """A b-ary (per axis) tree of boxes over ``domain``, down to single cells.

    Attributes: ``lo``, ``hi`` (N × d boxes, made on first use: the passes over the tree never
    need them), ``parent`` (root: -1), ``level_starts`` (nodes of level l are
    ``level_starts[l]:level_starts[l+1]``), ``leaf_of_cell`` (K,), ``is_leaf`` (N,). The children
    of a node are consecutive nodes of the next level, so passes over the tree are segment sums
    (:meth:`child_sums`) and repeats (:meth:`to_children`), never index scatters.
    """

    def __init__(self, domain, branching: int):
        self.domain = check_shape(domain, "domain")
        self.branching = check_int(branching, "branching", minimum=2)
        k = math.prod(self.domain)
        index = _index_dtype(2 * k)  # a hierarchy has fewer than 2K nodes (every internal node has two children or more)
        self.leaf_of_cell = np.empty(k, dtype=index)
        parents, leaf_flags, starts = [], [], [0]
        self._families: list[tuple[np.ndarray, np.ndarray]] = []  # per level: parents' positions, first children
        self._child_counts: list[np.ndarray] = []
        for lo, hi, split, counts in _levels(self.domain, self.branching):
            if split is None:
                parents.append(np.array([-1], dtype=index))
            else:
                self._families.append((split, np.cumsum(counts) - counts))
                self._child_counts.append(counts)
                parents.append(np.repeat((split + starts[-2]).astype(index), counts))
            leaf = np.all([l == h for l, h in zip(lo, hi)], axis=0)
            size = leaf.size
            if leaf.all():  # (the last level): no index arrays
                local, nodes = slice(None), np.arange(starts[-1], starts[-1] + size, dtype=index)
            else:
                local = np.flatnonzero(leaf)
                nodes = (local + starts[-1]).astype(index)
            cells = lo[0][local] if len(lo) == 1 else np.ravel_multi_index(tuple(c[local] for c in lo), self.domain)
            self.leaf_of_cell[cells] = nodes
            del lo, hi, cells, nodes
            leaf_flags.append(leaf)
            starts.append(starts[-1] + size)
        self.parent = np.concatenate(parents)
        self.level_starts = np.array(starts, dtype=np.int64)
        self.is_leaf = np.concatenate(leaf_flags)
        for a in (self.parent, self.level_starts, self.is_leaf, self.leaf_of_cell):
            a.flags.writeable = False

    @functools.cached_property
    def _boxes(self) -> tuple[np.ndarray, np.ndarray]:
        levels = list(_levels(self.domain, self.branching))
        lo, hi = (np.stack([np.concatenate([level[side][axis] for level in levels]) for axis in range(len(self.domain))],
                           axis=1) for side in (0, 1))
        lo.flags.writeable = False
        hi.flags.writeable = False
        return lo, hi

    @property
    def lo(self) -> np.ndarray:
        """Lower corners of the nodes' boxes, (N, d), read-only."""
        return self._boxes[0]

    @property
    def hi(self) -> np.ndarray:
        """Upper corners (inclusive) of the nodes' boxes, (N, d), read-only."""
        return self._boxes[1]

    @property
    def num_nodes(self) -> int:
        return int(self.parent.size)

    @property
    def height(self) -> int:
        """Number of levels (the root is level 0)."""
        return int(self.level_starts.size - 1)

    @property
    def depth(self) -> np.ndarray:
        """Level of every node."""
        return np.repeat(np.arange(self.height), np.diff(self.level_starts))

    def level(self, l: int) -> slice:
        return slice(int(self.level_starts[l]), int(self.level_starts[l + 1]))

    def child_sums(self, level: int, values: np.ndarray) -> np.ndarray:
        """For every node of ``level``, the sum over its children of ``values`` (one row per node
        of level + 1); 0 on leaves."""
        inner, first = self._families[level]
        sums = np.add.reduceat(values, first, axis=0)
        size = self.level_starts[level + 1] - self.level_starts[level]
        if inner.size == size:
            return sums
        out = np.zeros((size,) + sums.shape[1:], dtype=sums.dtype)
        out[inner] = sums
        return out

    def to_children(self, level: int, values: np.ndarray) -> np.ndarray:
        """Every node of level + 1 takes its parent's row of ``values`` (one row per node of ``level``)."""
        inner = self._families[level][0]
        size = self.level_starts[level + 1] - self.level_starts[level]
        return np.repeat(values if inner.size == size else values[inner], self._child_counts[level], axis=0)

    def gather(self, level: int) -> sp.csr_array:
        """The child → parent aggregation of ``level`` as a sparse matrix (nodes of ``level`` ×
        nodes of level + 1): :meth:`child_sums` for callers that multiply by it."""
        first, last = self.level_starts[level], self.level_starts[level + 1]
        local = self.parent[self.level(level + 1)] - first
        return sp.csr_array((np.ones(local.size), (local, np.arange(local.size))), shape=(last - first, local.size))

    def __repr__(self) -> str:
        return f"<Hierarchy over {self.domain}: branching {self.branching}, {self.height} levels, {self.num_nodes} nodes>"


class TreeStrategy(LeastSquares, Boxes):
    """Strategy measuring node n of a hierarchy as w_n · (sum of its box); w_n = 0 skips the node.

    Full column rank is checked: the root total must be estimable and no node may have two
    children whose subtrees are entirely unmeasured. Only the node variances V are held (and
    the weights, as one number when they are all equal); α and β are formed level by level.
    """

    def __init__(self, hierarchy: Hierarchy, weights, name: str | None = None):
        if not isinstance(hierarchy, Hierarchy):
            raise TypeError(f"hierarchy must be a Hierarchy, got {type(hierarchy).__name__}")
        weights = check_real_array(weights, "weights", minimum=0).reshape(-1)  # a copy: never the caller's array
        if weights.shape != (hierarchy.num_nodes,):
            raise ValueError(f"weights must be {hierarchy.num_nodes} finite non-negative numbers, one per node, got {weights.size}")
        per_level = weights[hierarchy.level_starts[:-1]]
        if np.array_equal(weights, np.repeat(per_level, np.diff(hierarchy.level_starts))):
            self._setup(hierarchy, per_level, None, name)  # as `hierarchical` makes them: held per level
        else:
            weights.flags.writeable = False
            self._setup(hierarchy, None, weights, name)

    @classmethod
    def per_level(cls, hierarchy: Hierarchy, level_weights: ArrayLike, name: str | None = None) -> TreeStrategy:
        """The strategy weighing every node of level l by ``level_weights[l]`` (no per-node array)."""
        if not isinstance(hierarchy, Hierarchy):
            raise TypeError(f"hierarchy must be a Hierarchy, got {type(hierarchy).__name__}")
        weights = check_real_array(level_weights, "level_weights", minimum=0).reshape(-1)
        if weights.shape != (hierarchy.height,):
            raise ValueError(f"level_weights must have one entry per level ({hierarchy.height}), got {weights.size}")
        strategy = cls.__new__(cls)
        strategy._setup(hierarchy, weights, None, name)
        return strategy

    def _setup(self, h: Hierarchy, by_level: np.ndarray | None, by_node: np.ndarray | None, name: str | None) -> None:
        """The measured nodes (a range when they are consecutive), the boxes' weights and V."""
        self.hierarchy = h
        self._by_level, self._by_node = by_level, by_node
        positive = np.repeat(by_level > 0, np.diff(h.level_starts)) if by_node is None else by_node > 0
        if not positive.any():
            raise ValueError("weights must measure at least one node of a hierarchical strategy (some weight > 0)")
        first, last = int(np.argmax(positive)), positive.size - int(np.argmax(positive[::-1]))
        self._measured = slice(first, last) if positive[first:last].all() else np.flatnonzero(positive)
        del positive
        measured = by_level[by_level > 0] if by_node is None else by_node[self._measured]
        if (measured == measured[0]).all():  # one weight: held once
            box_weights = None if measured[0] == 1 else np.broadcast_to(measured[0], (self._count(),))
        else:
            box_weights = self.node_weights[self._measured].copy()
            box_weights.flags.writeable = False
        self._init_trusted(h.domain, self._count(), None, None, box_weights,
                           name or f"tree({shape_label(h.domain)}, b={h.branching})")
        self._variance = self._variances()

    def _count(self) -> int:
        """Number of measured nodes."""
        m = self._measured
        return m.stop - m.start if isinstance(m, slice) else int(m.size)

    def _made_corners(self) -> tuple[np.ndarray, np.ndarray]:
        """The measured nodes' boxes, from the hierarchy (whose passes never need them)."""
        return self.hierarchy.lo[self._measured], self.hierarchy.hi[self._measured]

    @property
    def node_weights(self) -> np.ndarray:
        """w_n of every node (read-only; weights constant on every level are held per level)."""
        if self._by_node is not None:
            return self._by_node
        weights = np.repeat(self._by_level, np.diff(self.hierarchy.level_starts))
        weights.flags.writeable = False
        return weights

    def _squared_weights(self, level: int) -> np.ndarray:
        """w_n² of the nodes of ``level``, as a new array."""
        nodes = self.hierarchy.level(level)
        if self._by_node is None:
            return np.full(nodes.stop - nodes.start, self._by_level[level] ** 2)
        return self._by_node[nodes] ** 2

    def _variances(self) -> np.ndarray:
        """V_n = 1/(w_n² + 1/Σ_c V_c), bottom up (∞: the node's total is not estimable from its
        subtree); raises when the strategy is rank deficient."""
        h = self.hierarchy
        variance = np.empty(h.num_nodes)
        for l in range(h.height - 1, -1, -1):
            nodes = h.level(l)
            precision = self._squared_weights(l)
            if l < h.height - 1:
                kid_var = variance[h.level(l + 1)]
                unknown = np.isinf(kid_var)
                n_unknown = h.child_sums(l, unknown.astype(np.int64))
                if (n_unknown > 1).any():
                    raise ValueError(
                        "hierarchical strategy is rank deficient: a node has two or more children whose "
                        "subtrees are never measured"
                    )
                sums = h.child_sums(l, np.where(unknown, 0.0, kid_var))
                known = ~h.is_leaf[nodes] & (n_unknown == 0)
                precision[known] += 1.0 / sums[known]
            with np.errstate(divide="ignore"):
                variance[nodes] = 1.0 / precision
        if np.isinf(variance[0]):
            raise ValueError("hierarchical strategy is rank deficient: the total is never measured, even indirectly")
        variance.flags.writeable = False
        return variance

    def _alpha(self, level: int) -> np.ndarray:
        """α_n = w_n² V_n of the nodes of ``level``: each node's own share of its bottom-up
        estimate (0 when unmeasured)."""
        own = self._squared_weights(level)
        return np.multiply(own, self._variance[self.hierarchy.level(level)], out=own, where=own > 0)

    def _times_alpha(self, level: int, values: np.ndarray) -> None:
        """``values`` (one row per node of ``level``) times α, in place; with one weight on the
        level, as V times that weight squared, so no array of the level's size is formed."""
        if self._by_node is not None:
            values *= self._alpha(level)[:, None]
        elif self._by_level[level] == 0:
            values[...] = 0.0
        else:
            values *= self._variance[self.hierarchy.level(level)][:, None]
            values *= self._by_level[level] ** 2

    def _beta(self, level: int) -> np.ndarray:
        """β_c of the nodes of level + 1: V_c / Σ_siblings V, or, in a family with an unmeasured
        subtree c*, 1 on c* and 0 on its siblings."""
        h = self.hierarchy
        kid_var = self._variance[h.level(level + 1)]
        unknown = np.isinf(kid_var)
        if not unknown.any():
            total = h.to_children(level, h.child_sums(level, kid_var))
            return np.divide(kid_var, total, out=total)
        known = np.where(unknown, 0.0, kid_var)
        n_unknown = h.to_children(level, h.child_sums(level, unknown.astype(np.float64)))
        sums = h.to_children(level, h.child_sums(level, known))
        return np.where(n_unknown > 0, unknown / np.maximum(n_unknown, 1), known / np.where(sums > 0, sums, 1.0))

    def _node_beta(self) -> np.ndarray:
        """β of every node (the root's is 0)."""
        h = self.hierarchy
        beta = np.zeros(h.num_nodes)
        for l in range(h.height - 1):
            beta[h.level(l + 1)] = self._beta(l)
        return beta

    def _omega(self) -> np.ndarray:
        """V_c where finite (an unmeasured subtree contributes no term)."""
        return np.where(np.isfinite(self._variance), self._variance, 0.0)

    # -- products and column norms by passes over the tree --------------------------------------
    def _matmat(self, x):
        """A x: node totals bottom up (segment sums of the children), times the weights."""
        x = as_block(x)
        h = self.hierarchy
        totals = np.zeros((h.num_nodes, x.shape[1]), dtype=np.result_type(x.dtype, np.int64))
        totals[h.leaf_of_cell] = x
        for l in range(h.height - 2, -1, -1):
            totals[h.level(l)] += h.child_sums(l, totals[h.level(l + 1)])
        out = totals[self._measured]
        return out if self.weights is None else out * self.weights[:, None]

    def _rmatmat(self, y):
        """Aᵀ y: every cell sums w_n y_n over the nodes above it, top down."""
        y = as_block(y)
        h = self.hierarchy
        values = np.zeros((h.num_nodes, y.shape[1]), dtype=np.result_type(y.dtype, np.float64))
        values[self._measured] = y if self.weights is None else y * self.weights[:, None]
        for l in range(h.height - 1):
            values[h.level(l + 1)] += h.to_children(l, values[h.level(l)])
        return values[h.leaf_of_cell]

    def cell_counts(self, norm: str = "l1") -> np.ndarray:
        """Column norms: Σ w_n (L1) or Σ w_n² (squared L2) over the nodes holding each cell, by
        one pass down the tree (not kept: it is as large as the domain)."""
        key = "l1" if self.weights is None else check_norm(norm)
        h = self.hierarchy
        values = self.node_weights.astype(np.float64)
        if key != "l1":
            values **= 2
        for l in range(h.height - 1):
            values[h.level(l + 1)] += h.to_children(l, values[h.level(l)])
        return values[h.leaf_of_cell]

    # -- the analytic error in closed form (module docstring) ---------------------------------
    def lstsq_frobenius_sq(self, workload: Workload) -> float:
        """‖W A⁺‖_F² = Σ_q Var(q x̂) by the closed form of the module docstring: on boxes from the
        nodes their boundaries cut (1-D: O(m·h·b)), sparse loads on workloads with sparse rows;
        otherwise the generic blocks."""
        if workload.domain == self.domain:
            if isinstance(workload, Boxes):
                return self._ranges_error(workload) if len(self.domain) == 1 else self._boxes_error(workload)
            rows = workload.sparse_rows()
            if rows is not None:
                return self._sparse_error(rows)
        return super().lstsq_frobenius_sq(workload)

    def _sparse_error(self, rows) -> float:
        """Loads L = Q Π (Π[i, n] = π_n(i), only for the cells Q uses), then the family sums
        Σ_c ω_c (L_c - L_p)² = Σ_c ω_c L_c² - 2 L_p Σ_c ω_c L_c + L_p² Σ_c ω_c."""
        h = self.hierarchy
        beta = self._node_beta()
        cells = np.flatnonzero(np.bincount(rows.indices, minlength=self.size))
        node = h.leaf_of_cell[cells]
        share = np.ones(cells.size)
        entry_rows, entry_cols, entry_vals = [], [], []
        position = np.arange(cells.size)
        while position.size:  # climb from every used leaf to the root
            entry_rows.append(position)
            entry_cols.append(node)
            entry_vals.append(share)
            up = h.parent[node] >= 0
            position, share, node = position[up], share[up] * beta[node[up]], h.parent[node[up]]
        profile = sp.csr_array(
            (np.concatenate(entry_vals), (np.concatenate(entry_rows), np.concatenate(entry_cols))),
            shape=(cells.size, h.num_nodes),
        )
        if cells.size < self.size:  # Π only for the cells Q uses
            position = np.zeros(self.size, dtype=np.int64)
            position[cells] = np.arange(cells.size)
            rows = sp.csr_array((rows.data, position[rows.indices], rows.indptr), shape=(rows.shape[0], cells.size))
        loads = sp.csr_array(rows @ profile)
        # where every child is measured, Σ_c ω_c L_c = S_p L_p (β_c = ω_c / S_p), so the family
        # sum is Σ_c ω_c L_c² - S_p L_p²: one weight per node on the squared loads
        omega = self._omega()
        child = np.arange(1, h.num_nodes)
        family = np.bincount(h.parent[child], weights=omega[child], minlength=h.num_nodes)
        weight = omega - family
        weight[0] = self._variance[0] - family[0]
        total = float((loads.data**2 * weight[loads.indices]).sum())
        # a family with an unmeasured child c* has L_p = L_c*: add -2 L_p Σ_c ω_c (L_c - L_p)
        special = np.flatnonzero(np.bincount(h.parent[child], weights=np.isinf(self._variance[child]),
                                             minlength=h.num_nodes))
        if special.size:
            column = np.full(h.num_nodes, -1)
            column[special] = np.arange(special.size)
            kids = child[column[h.parent[child]] >= 0]
            pick = sp.csr_array((np.ones(special.size), (special, np.arange(special.size))), shape=(h.num_nodes, special.size))
            gather = sp.csr_array((omega[kids], (kids, column[h.parent[kids]])), shape=(h.num_nodes, special.size))
            parent_loads = sp.csr_array(loads @ pick)
            sums = sp.csr_array(loads @ gather)
            cross = float(parent_loads.multiply(sums).sum())
            own = float((parent_loads.data**2 * family[special][parent_loads.indices]).sum())
            total -= 2.0 * (cross - own)
        return max(total, 0.0)

    def _ranges_error(self, workload: Boxes) -> float:
        """1-D ranges [lo, hi] by walking up from the leaves of lo and hi. A node's load is 1
        inside the range and 0 outside; only the nodes on the two paths are cut, and such a node
        p has L_p = Σ_{inside children} β_c + Σ_{cut children} β_c L_c. Its family adds
        Σ_c ω_c (L_c - L_p)²: ω_c L_p² outside, ω_c (1 - L_p)² inside, and the cut children's own
        terms. Each step reads one family per query (its children are consecutive nodes), so the
        cost is O(m·h·b) and nothing as large as the tree is formed."""
        h = self.hierarchy
        width = max((int(c.max()) for c in h._child_counts), default=1)
        step = max(1, CHUNK_ENTRIES // width)  # queries per pass: (queries × family) arrays stay bounded
        lo, hi = workload.lo[:, 0], workload.hi[:, 0]
        variances = np.concatenate([self._range_variances(lo[s : s + step], hi[s : s + step])
                                    for s in range(0, lo.size, step)])
        weights = 1.0 if workload.weights is None else workload.weights**2
        return max(float((weights * variances).sum()), 0.0)

    def _range_variances(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Var(q x̂) of the ranges [lo, hi] (:meth:`_ranges_error`)."""
        h = self.hierarchy
        parent, starts = h.parent, h.level_starts
        a = h.leaf_of_cell[lo].astype(np.int64)  # the cut node on lo's path, and its load
        b = h.leaf_of_cell[hi].astype(np.int64)
        load_a, load_b = np.ones(a.size), np.ones(b.size)
        total = np.zeros(a.size)
        while True:  # one family per query and step: the parent of the deeper path's node
            busy = np.flatnonzero((a != 0) | (b != 0))
            if busy.size == 0:
                break
            qa, qb, la, lb = a[busy], b[busy], load_a[busy], load_b[busy]
            da, db = np.searchsorted(starts, qa, side="right"), np.searchsorted(starts, qb, side="right")
            merged = qa == qb  # above the range's lowest common node: one cut child
            both = ~merged & (da == db) & (parent[qa] == parent[qb])  # siblings: one family, two cuts
            lo_up = ~merged & ~both & (da >= db)  # the family holds lo but not hi
            hi_up = ~merged & ~both & ~lo_up  # ... hi but not lo
            p = np.where(hi_up, parent[qb], parent[qa])  # parent's dtype: searchsorted then copies nothing
            first, end = np.searchsorted(parent, p, side="left"), np.searchsorted(parent, p, side="right")
            child = first[:, None] + np.arange(int((end - first).max()))  # the family, padded
            present = child < end[:, None]
            child = np.where(present, child, first[:, None])
            var = self._variance[child]
            unknown = np.isinf(var) & present
            omega = np.where(present & ~unknown, var, 0.0)
            n_unknown, family = unknown.sum(axis=1), omega.sum(axis=1)
            beta = np.where((n_unknown > 0)[:, None], unknown / np.maximum(n_unknown, 1)[:, None],
                            omega / np.where(family > 0, family, 1.0)[:, None])
            cut, cut_load = np.where(hi_up, qb, qa), np.where(hi_up, lb, la)
            start, stop = np.where(hi_up, first, qa + 1), np.where(lo_up, end, qb)  # children inside the range
            inside = (child >= start[:, None]) & (child < stop[:, None]) & present
            at_cut, at_second = child == cut[:, None], (child == qb[:, None]) & both[:, None]
            load = (beta * (inside + at_cut * cut_load[:, None] + at_second * lb[:, None])).sum(axis=1)
            # Σ_c ω_c (L_c - L_p)² with L_c = 1 inside, the path's load at a cut, 0 elsewhere
            own = np.where(inside, 1.0, np.where(at_cut, cut_load[:, None], np.where(at_second, lb[:, None], 0.0)))
            total[busy] += (omega * (own - load[:, None]) ** 2).sum(axis=1)
            rise_a, rise_b = busy[~hi_up], busy[~lo_up]
            a[rise_a], load_a[rise_a] = p[~hi_up], load[~hi_up]
            b[rise_b], load_b[rise_b] = p[~lo_up], load[~lo_up]
        return total + self._variance[0] * load_a**2

    def _boxes_error(self, workload: Boxes) -> float:
        """Boxes in d dimensions by the nodes their boundaries cut, level by level from the
        bottom. Every level's nodes are the products of one partition per axis (a node splits
        each side into near-equal parts), so the nodes a box cuts are read off per axis — the
        parts it meets but does not cover. A node's children form a grid (row-major, consecutive
        nodes), so over the children a box covers, Σ β and Σ ω are one corner sum of per-family
        prefix sums; the children it cuts bring the loads found one level down. A cut node p then
        has L_p = Σ_covered β + Σ_cut β_c L_c and its family adds ω_out L_p² + ω_covered (1 - L_p)²
        + Σ_cut ω_c (L_c - L_p)². Nothing proportional to the boxes' areas or to the families'
        sizes per box is formed: O(N + m · the parts its boundary cuts)."""
        h = self.hierarchy
        d, n = len(self.domain), h.num_nodes
        beta, omega = self._node_beta(), self._omega()
        parts = self._axis_parts()
        beta_sum, omega_sum = self._family_prefix(parts, beta, omega)
        ranges = [self._meets_and_covers(level_parts, workload.lo, workload.hi) for level_parts in parts]
        first_child = np.zeros(n, dtype=np.int64)
        for level, (inner, first_local) in enumerate(h._families):
            first_child[h.level_starts[level] + inner] = h.level_starts[level + 1] + first_local
        total = np.zeros(workload.num_queries)
        below = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))  # (query, node, load)
        for level in range(h.height - 2, -1, -1):
            nodes = slice(h.level_starts[level], h.level_starts[level + 1])
            level_lo, level_hi = h.lo[nodes], h.hi[nodes]
            place = tuple(np.searchsorted(parts[level][a], level_lo[:, a]) for a in range(d))
            grid = np.full(tuple(s.size for s in parts[level]), -1, dtype=np.int64)
            grid[place] = np.arange(nodes.start, nodes.stop)
            query, node = self._cut_nodes(ranges[level], grid)
            if node.size == 0:
                below = (query, node, np.zeros(0))
                continue
            # the children's parts on every axis, and the parts the box covers among them
            kids, local = parts[level + 1], node - nodes.start
            first = np.stack([np.searchsorted(kids[a], level_lo[local, a]) for a in range(d)], axis=1)
            count = np.stack([np.searchsorted(kids[a], level_hi[local, a], side="right") for a in range(d)], axis=1) - first
            s_in, e_in = ranges[level + 1][2][query], ranges[level + 1][3][query]
            lo, hi = np.maximum(s_in, first) - first, np.minimum(e_in, first + count - 1) - first
            start = first_child[node]
            covered_beta = self._corner_sum(beta_sum, start, count, lo, hi)
            covered_omega = self._corner_sum(omega_sum, start, count, lo, hi)
            family = omega_sum[start + count.prod(axis=1) - 1]  # the last child's prefix: all of it
            # the cut children's sums, gathered per (box, parent) from the level below
            b_query, b_node, b_load = below
            at = np.searchsorted(query * n + node, b_query * n + h.parent[b_node].astype(np.int64))
            sums = [np.bincount(at, weights=v, minlength=node.size) for v in (
                beta[b_node] * b_load, omega[b_node], omega[b_node] * b_load, omega[b_node] * b_load**2)]
            load = covered_beta + sums[0]
            outside = family - covered_omega - sums[1]
            term = outside * load**2 + covered_omega * (1.0 - load) ** 2 + sums[3] - 2 * load * sums[2] + load**2 * sums[1]
            total += np.bincount(query, weights=term, minlength=total.size)
            below = (query, node, load)
        root = np.ones(workload.num_queries)  # a box that covers everything has load 1 at the root
        root[below[0]] = below[2]  # the boxes that cut it
        total += self._variance[0] * root**2
        weights = 1.0 if workload.weights is None else workload.weights**2
        return max(float((weights * total).sum()), 0.0)

    def _family_prefix(self, parts: list[list[np.ndarray]], *values: np.ndarray) -> list[np.ndarray]:
        """Inclusive prefix sums of each of ``values`` over every family's grid of children
        (children are consecutive and row-major; ``parts`` from :meth:`_axis_parts`), stored at
        each child; the root keeps its value."""
        h = self.hierarchy
        outs = [v.astype(np.float64).copy() for v in values]
        for level in range(h.height - 1):
            inner, first_local = h._families[level]
            parents = h.level_starts[level] + inner
            first = h.level_starts[level + 1] + first_local
            kids = parts[level + 1]
            shape = np.stack([np.searchsorted(kids[a], h.hi[parents, a], side="right") - np.searchsorted(kids[a], h.lo[parents, a])
                              for a in range(len(self.domain))], axis=1)
            key = np.ravel_multi_index(tuple(shape.T), tuple(int(m) + 1 for m in shape.max(axis=0)))
            for code in np.unique(key):
                grid_shape = tuple(int(s) for s in shape[np.argmax(key == code)])
                which = first[key == code]
                index = which[:, None] + np.arange(math.prod(grid_shape))
                for out in outs:
                    block = out[index].reshape((which.size,) + grid_shape)
                    for axis in range(1, block.ndim):
                        np.cumsum(block, axis=axis, out=block)
                    out[index] = block.reshape(which.size, -1)
        return outs

    @staticmethod
    def _corner_sum(prefix: np.ndarray, first_child: np.ndarray, count: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Σ over the children in the local box lo..hi (per axis; empty where lo > hi) of each
        family starting at ``first_child`` with ``count`` children per axis, from its prefix sums:
        2^d corners, axis by axis on columns."""
        d = count.shape[1]
        strides = [np.ones(count.shape[0], dtype=np.int64)]  # row-major within the family
        for axis in range(d - 1, 0, -1):
            strides.insert(0, strides[0] * count[:, axis])
        empty = np.zeros(count.shape[0], dtype=bool)
        for axis in range(d):
            empty |= lo[:, axis] > hi[:, axis]
        out = np.zeros(count.shape[0])
        for corner in itertools.product((False, True), repeat=d):
            index, valid = first_child.astype(np.int64), ~empty
            for axis, before in enumerate(corner):  # True: the cell just before lo on this axis
                pick = lo[:, axis] - 1 if before else hi[:, axis]
                valid = valid & (pick >= 0)
                index = index + pick * strides[axis]
            out[valid] += (-1.0 if sum(corner) % 2 else 1.0) * prefix[index[valid]]
        return out

    def _meets_and_covers(self, starts: list[np.ndarray], q_lo: np.ndarray, q_hi: np.ndarray):
        """Per box and axis, the parts it meets (s..e) and those it covers (s_in..e_in)."""
        d = len(starts)
        s = np.stack([np.searchsorted(starts[a], q_lo[:, a], side="right") - 1 for a in range(d)], axis=1)
        e = np.stack([np.searchsorted(starts[a], q_hi[:, a], side="right") - 1 for a in range(d)], axis=1)
        last = [np.append(starts[a][1:], self.domain[a]) - 1 for a in range(d)]  # each part's last cell
        s_in = s + np.stack([starts[a][s[:, a]] < q_lo[:, a] for a in range(d)], axis=1)
        e_in = e - np.stack([last[a][e[:, a]] > q_hi[:, a] for a in range(d)], axis=1)
        return s, e, s_in, e_in

    def _axis_parts(self) -> list[list[np.ndarray]]:
        """Per level, per axis, the first cells of the parts that level's nodes take on that axis
        (parts of one cell carry down unchanged)."""
        h = self.hierarchy
        axes = [([np.zeros(1, dtype=np.int64)], [np.array([k - 1], dtype=np.int64)]) for k in self.domain]
        parts = []
        for _ in range(h.height):
            parts.append([lo[0] for lo, _ in axes])
            axes = [_split_axis(lo, hi, 0, h.branching) for lo, hi in axes]
        return parts

    @staticmethod
    def _cut_nodes(ranges, grid: np.ndarray):
        """(query, node), sorted, for every node of a level that a box meets but does not cover,
        from the parts each box meets (s..e) and covers (s_in..e_in) per axis (``ranges``): a
        node is cut when one of its parts is s < s_in or e > e_in — enumerated axis by axis,
        earlier axes kept to the covered parts so that no node comes twice."""
        s, e, s_in, e_in = ranges
        m, d = s.shape
        queries, nodes = [], []
        for a in range(d):
            sides = [(s[:, a], s[:, a] < s_in[:, a]), (e[:, a], (e[:, a] > e_in[:, a]) & ((e[:, a] != s[:, a]) | (s[:, a] == s_in[:, a])))]
            earlier = np.arange(d) < a
            for value, partial in sides:
                lo, hi = np.where(earlier, s_in, s), np.where(earlier, e_in, e)
                lo[:, a], hi[:, a] = value, value
                sizes = np.where(partial[:, None], np.maximum(hi - lo + 1, 0), 0)
                count = sizes.prod(axis=1)
                if count.sum() == 0:
                    continue
                query = np.repeat(np.arange(m), count)
                rank = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
                index = []
                for b in range(d - 1, -1, -1):  # mixed radix, last axis fastest
                    size = sizes[query, b]
                    index.append(lo[query, b] + rank % size)
                    rank //= size
                queries.append(query)
                nodes.append(grid[tuple(index[::-1])])
        if not queries:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        query, node = np.concatenate(queries), np.concatenate(nodes)
        order = np.lexsort((node, query))  # sorted by (box, node): the level above looks them up
        return query[order], node[order]

    # -- least squares: two passes and their adjoint ------------------------------------------
    def _pinv_matmat(self, y: np.ndarray) -> np.ndarray:
        """Bottom up ẑ_n = s_n + α_n (z_n - s_n) (s_n: the children's ẑ summed), then top down
        x̄_c = ẑ_c + β_c (x̄_p - s_p), both in place on one array of node values."""
        h = self.hierarchy
        y = np.asarray(y, dtype=np.float64)
        if self.weights is not None and isinstance(self._measured, slice) and self._measured == slice(0, h.num_nodes):
            est = y / self.weights[:, None]
        else:
            est = np.zeros((h.num_nodes, y.shape[1]))
            est[self._measured] = y if self.weights is None else y / self.weights[:, None]
        sums = []  # per level, s of the nodes with children
        for l in range(h.height - 1, -1, -1):
            nodes = est[h.level(l)]
            if l == h.height - 1:
                self._times_alpha(l, nodes)
                continue
            s = h.child_sums(l, est[h.level(l + 1)])
            sums.append(s)
            nodes -= s
            self._times_alpha(l, nodes)
            nodes += s
        sums.reverse()
        for l in range(h.height - 1):
            kids = h.level(l + 1)
            kid_var = self._variance[kids]
            gap = est[h.level(l)] - sums[l]
            if np.isinf(kid_var).any():  # a family with an unmeasured subtree
                shares = h.to_children(l, gap)
                shares *= self._beta(l)[:, None]
            else:  # β_c = V_c / Σ_siblings V: the parent's gap over its children's total, then × V_c
                totals = h.child_sums(l, kid_var)[:, None]  # 0 at leaves, which have no children
                shares = h.to_children(l, np.divide(gap, totals, out=np.zeros_like(gap), where=totals > 0))
                shares *= kid_var[:, None]
            est[kids] += shares
        return est[h.leaf_of_cell]

    def _pinv_rmatmat(self, x: np.ndarray) -> np.ndarray:
        """The adjoint of :meth:`_pinv_matmat`: its steps transposed, in reverse order."""
        h = self.hierarchy
        x = np.asarray(x, dtype=np.float64)
        out_bar = np.zeros((h.num_nodes, x.shape[1]))
        out_bar[h.leaf_of_cell] = x
        est_bar = np.zeros_like(out_bar)
        sums_bar = np.zeros_like(out_bar)
        for l in range(h.height - 2, -1, -1):  # the top-down pass, reversed
            kids = h.level(l + 1)
            est_bar[kids] += out_bar[kids]
            pushed = h.child_sums(l, self._beta(l)[:, None] * out_bar[kids])
            out_bar[h.level(l)] += pushed
            sums_bar[h.level(l)] -= pushed
        est_bar[0] += out_bar[0]
        z_bar = np.zeros_like(out_bar)
        for l in range(h.height):  # the bottom-up pass, reversed
            nodes = h.level(l)
            a = self._alpha(l)[:, None]
            z_bar[nodes] += a * est_bar[nodes]
            sums_bar[nodes] += (1 - a) * est_bar[nodes]
            if l < h.height - 1:
                est_bar[h.level(l + 1)] += h.to_children(l, sums_bar[nodes])
        return z_bar[self._measured] if self.weights is None else z_bar[self._measured] / self.weights[:, None]


def hierarchical(domain: int | Sequence[int], branching: int, root: bool = True, level_weights: ArrayLike | None = None,
                 name: str | None = None) -> TreeStrategy:
    """A hierarchy strategy with one weight per level (uniform budget by default: all ones).

    ``root=False`` leaves the total unmeasured; ``level_weights[l]`` weighs every node of level l.
    """
    h = Hierarchy(domain, branching)
    weights = np.ones(h.height) if level_weights is None else check_real_array(level_weights, "level_weights")
    if weights.shape != (h.height,):
        raise ValueError(f"level_weights must have one entry per level ({h.height}), got shape {weights.shape}")
    if not root:
        weights[0] = 0.0  # the root is level 0, alone
    return TreeStrategy.per_level(h, weights, name=name)
