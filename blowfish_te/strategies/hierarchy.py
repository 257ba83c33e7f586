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

import math

import numpy as np
import scipy.sparse as sp

from .._grid import shape_label
from .._validation import check_int, check_real_array, check_shape
from ..workloads.base import Workload
from ..workloads.boxes import Boxes
from .base import LeastSquares, sparse_rows


def _split_axis(lo: np.ndarray, hi: np.ndarray, owner: np.ndarray, axis: int, b: int):
    """Split every box along ``axis`` into min(b, side) parts of near-equal size."""
    side = hi[:, axis] - lo[:, axis] + 1
    parts = np.minimum(b, side)
    box = np.repeat(np.arange(side.size), parts)
    j = np.arange(box.size) - np.repeat(np.cumsum(parts) - parts, parts)
    base, extra = side[box] // parts[box], side[box] % parts[box]
    start = lo[box, axis] + j * base + np.minimum(j, extra)
    new_lo, new_hi = lo[box].copy(), hi[box].copy()
    new_lo[:, axis] = start
    new_hi[:, axis] = start + base + (j < extra) - 1
    return new_lo, new_hi, owner[box]


class Hierarchy:
    """A b-ary (per axis) tree of boxes over ``domain``, down to single cells.

    Attributes: ``lo``, ``hi`` (N × d boxes), ``parent`` (root: -1), ``level_starts`` (nodes of
    level l are ``level_starts[l]:level_starts[l+1]``), ``leaf_of_cell`` (K,), ``is_leaf`` (N,).
    """

    def __init__(self, domain, branching: int):
        self.domain = check_shape(domain, "domain")
        self.branching = check_int(branching, "branching", minimum=2)
        d = len(self.domain)
        los = [np.zeros((1, d), dtype=np.int64)]
        his = [np.array([self.domain], dtype=np.int64) - 1]
        parents = [np.array([-1], dtype=np.int64)]
        starts = [0, 1]
        while True:
            lo, hi = los[-1], his[-1]
            split = np.flatnonzero((hi > lo).any(axis=1))
            if split.size == 0:
                break
            ids = starts[-2] + split
            c_lo, c_hi, owner = lo[split], hi[split], ids
            for axis in range(d):
                c_lo, c_hi, owner = _split_axis(c_lo, c_hi, owner, axis, self.branching)
            los.append(c_lo)
            his.append(c_hi)
            parents.append(owner)
            starts.append(starts[-1] + c_lo.shape[0])
        self.lo = np.concatenate(los)
        self.hi = np.concatenate(his)
        self.parent = np.concatenate(parents)
        self.level_starts = np.array(starts, dtype=np.int64)
        self.is_leaf = (self.lo == self.hi).all(axis=1)
        self.leaf_of_cell = np.empty(math.prod(self.domain), dtype=np.int64)
        leaves = np.flatnonzero(self.is_leaf)
        self.leaf_of_cell[np.ravel_multi_index(tuple(self.lo[leaves].T), self.domain)] = leaves
        for a in (self.lo, self.hi, self.parent, self.level_starts, self.is_leaf, self.leaf_of_cell):
            a.flags.writeable = False
        # child → parent aggregation, level by level
        self._gather = []
        for level in range(self.height - 1):
            first, last = self.level_starts[level], self.level_starts[level + 1]
            child = np.arange(self.level_starts[level + 1], self.level_starts[level + 2])
            local = self.parent[child] - first
            self._gather.append(
                sp.csr_array((np.ones(child.size), (local, np.arange(child.size))), shape=(last - first, child.size))
            )

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

    def __repr__(self) -> str:
        return f"<Hierarchy over {self.domain}: branching {self.branching}, {self.height} levels, {self.num_nodes} nodes>"


class TreeStrategy(LeastSquares, Boxes):
    """Strategy measuring node n of a hierarchy as w_n · (sum of its box); w_n = 0 skips the node.

    Full column rank is checked: the root total must be estimable and no node may have two
    children whose subtrees are entirely unmeasured.
    """

    def __init__(self, hierarchy: Hierarchy, weights, name: str | None = None):
        if not isinstance(hierarchy, Hierarchy):
            raise TypeError(f"hierarchy must be a Hierarchy, got {type(hierarchy).__name__}")
        weights = check_real_array(weights, "weights", minimum=0).reshape(-1)  # a copy: never the caller's array
        if weights.shape != (hierarchy.num_nodes,):
            raise ValueError(f"weights must be {hierarchy.num_nodes} finite non-negative numbers, one per node, got {weights.size}")
        measured = np.flatnonzero(weights > 0)
        if measured.size == 0:
            raise ValueError("weights must measure at least one node of a hierarchical strategy (some weight > 0)")
        Boxes.__init__(
            self, hierarchy.domain, hierarchy.lo[measured], hierarchy.hi[measured],
            name=name or f"tree({shape_label(hierarchy.domain)}, b={hierarchy.branching})", weights=weights[measured],
        )
        self.hierarchy = hierarchy
        self.node_weights = weights
        self.node_weights.flags.writeable = False
        self._measured = measured
        self._coefficients()

    def _coefficients(self) -> None:
        """α (own share in the bottom-up pass) and β (share of the parent's discrepancy)."""
        h = self.hierarchy
        own = self.node_weights**2
        variance = np.full(h.num_nodes, np.inf)
        alpha = np.zeros(h.num_nodes)
        beta = np.zeros(h.num_nodes)
        child_var = np.full(h.num_nodes, np.inf)  # variance of Σ children's estimates
        for l in range(h.height - 1, -1, -1):
            nodes = h.level(l)
            if l < h.height - 1:
                kids = h.level(l + 1)
                kid_var = variance[kids]
                unknown = np.isinf(kid_var)
                local = h.parent[kids] - h.level_starts[l]
                gather = h._gather[l]
                sums = gather @ np.where(unknown, 0.0, kid_var)
                n_unknown = gather @ unknown.astype(np.float64)
                internal = ~h.is_leaf[nodes]
                child_var[nodes] = np.where(internal & (n_unknown == 0), sums, np.inf)
                share_known = np.where(unknown, 0.0, kid_var) / np.where(sums[local] > 0, sums[local], 1.0)
                beta[kids] = np.where(n_unknown[local] > 0, unknown / np.maximum(n_unknown[local], 1), share_known)
                if (n_unknown[internal] > 1).any():
                    raise ValueError(
                        "hierarchical strategy is rank deficient: a node has two or more children whose "
                        "subtrees are never measured"
                    )
            precision = own[nodes] + np.where(np.isinf(child_var[nodes]), 0.0, 1.0 / child_var[nodes])
            variance[nodes] = np.where(precision > 0, 1.0 / np.where(precision > 0, precision, 1.0), np.inf)
            alpha[nodes] = np.where(precision > 0, own[nodes] / np.where(precision > 0, precision, 1.0), 0.0)
        if np.isinf(variance[0]):
            raise ValueError("hierarchical strategy is rank deficient: the total is never measured, even indirectly")
        self._alpha, self._beta, self._variance = alpha, beta, variance

    # -- the analytic error in closed form (module docstring) ---------------------------------
    def lstsq_frobenius_sq(self, workload: Workload) -> float:
        """‖W A⁺‖_F² = Σ_q Var(q x̂) by the closed form of the module docstring: O(m·h) on 1-D
        boxes, sparse loads on workloads with sparse rows; otherwise the generic blocks."""
        if workload.domain == self.domain:
            if isinstance(workload, Boxes) and len(self.domain) == 1:
                return self._ranges_error(workload)
            rows = sparse_rows(workload)
            if rows is not None:
                return self._sparse_error(rows)
        return super().lstsq_frobenius_sq(workload)

    def _omega(self) -> np.ndarray:
        """V_c where finite (an unmeasured subtree contributes no term)."""
        return np.where(np.isfinite(self._variance), self._variance, 0.0)

    def _sparse_error(self, rows) -> float:
        """Loads L = Q Π (Π[i, n] = π_n(i), only for the cells Q uses), then the family sums
        Σ_c ω_c (L_c - L_p)² = Σ_c ω_c L_c² - 2 L_p Σ_c ω_c L_c + L_p² Σ_c ω_c."""
        h = self.hierarchy
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
            position, share, node = position[up], share[up] * self._beta[node[up]], h.parent[node[up]]
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
        """1-D ranges [lo, hi]: per level, only the families holding lo or hi have children with
        different loads, and a node's load is a difference of prefix sums of the cells' π."""
        h = self.hierarchy
        k = h.domain[0]
        lo, hi = workload.lo[:, 0], workload.hi[:, 0]
        node_lo, node_hi = h.lo[:, 0], h.hi[:, 0]
        omega = self._omega()
        omega_sum = np.concatenate([[0.0], np.cumsum(omega)])
        first_child = np.searchsorted(h.parent, np.arange(h.num_nodes), side="left")
        end_child = np.searchsorted(h.parent, np.arange(h.num_nodes), side="right")

        def holder(level: int, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """The node of ``level`` containing each cell, and whether there is one."""
            sl = h.level(level)
            idx = np.maximum(np.searchsorted(node_lo[sl], cell, side="right") - 1, 0)
            return sl.start + idx, (node_lo[sl][idx] <= cell) & (cell <= node_hi[sl][idx])

        def load(prefix: np.ndarray, nodes: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
            a, b = np.maximum(a, node_lo[nodes]), np.minimum(b, node_hi[nodes])
            return prefix[np.maximum(a, b + 1)] - prefix[a]

        def weight(start: np.ndarray, stop: np.ndarray) -> np.ndarray:
            """Σ ω over the sibling indices [start, stop)."""
            return omega_sum[np.maximum(start, stop)] - omega_sum[start]

        def families(level, parent, a, b, lo_in, hi_in, prefix, child_prefix) -> np.ndarray:
            """Σ_c ω_c (L_c - L_p)² over the children of ``parent``: L_c = 0 before lo and after
            hi, 1 strictly between, computed for the (at most two) children holding lo or hi."""
            first, end = first_child[parent], end_child[parent]
            c_lo, c_hi = holder(level + 1, a)[0], holder(level + 1, b)[0]
            own = load(prefix, parent, a, b)
            outside = np.where(lo_in, weight(first, c_lo), 0.0) + np.where(hi_in, weight(c_hi + 1, end), 0.0)
            inside = weight(np.where(lo_in, c_lo + 1, first), np.where(hi_in, c_hi, end))
            term = outside * own**2 + inside * (1.0 - own) ** 2
            term += np.where(lo_in, omega[c_lo] * (load(child_prefix, c_lo, a, b) - own) ** 2, 0.0)
            hi_alone = hi_in & ~(lo_in & (c_hi == c_lo))
            return term + np.where(hi_alone, omega[c_hi] * (load(child_prefix, c_hi, a, b) - own) ** 2, 0.0)

        profile = np.ones(k)  # π of every cell within its ancestor at the current level
        cells = np.arange(k)
        total = np.zeros(lo.size)
        child_prefix = None
        for level in range(h.height - 1, -1, -1):
            if child_prefix is not None:  # one level up: times the β of the node below
                kids = h.level(level + 1)
                which = np.cumsum(np.bincount(node_lo[kids], minlength=k)) - 1
                covered = np.flatnonzero((which >= 0) & (cells <= node_hi[kids][np.maximum(which, 0)]))
                profile[covered] *= self._beta[kids][which[covered]]
            prefix = np.concatenate([[0.0], np.cumsum(profile)])
            if child_prefix is not None:
                p_lo, has_lo = holder(level, lo)
                p_hi, has_hi = holder(level, hi)
                has_lo &= ~h.is_leaf[p_lo]
                has_hi &= ~h.is_leaf[p_hi] & ~(has_lo & (p_hi == p_lo))
                q = np.flatnonzero(has_lo)
                total[q] += families(level, p_lo[q], lo[q], hi[q], True, hi[q] <= node_hi[p_lo[q]], prefix, child_prefix)
                q = np.flatnonzero(has_hi)
                total[q] += families(level, p_hi[q], lo[q], hi[q], False, True, prefix, child_prefix)
            child_prefix = prefix
        total += self._variance[0] * (child_prefix[hi + 1] - child_prefix[lo]) ** 2
        weights = 1.0 if workload.weights is None else workload.weights**2
        return max(float((weights * total).sum()), 0.0)

    # -- least squares: two passes and their adjoint ------------------------------------------
    def _pinv_matmat(self, y: np.ndarray) -> np.ndarray:
        h = self.hierarchy
        y = np.asarray(y, dtype=np.float64)
        z = np.zeros((h.num_nodes, y.shape[1]))
        z[self._measured] = y / self.node_weights[self._measured, None]
        est = np.empty_like(z)
        sums = np.zeros_like(z)
        for l in range(h.height - 1, -1, -1):
            nodes = h.level(l)
            if l < h.height - 1:
                sums[nodes] = h._gather[l] @ est[h.level(l + 1)]
            a = self._alpha[nodes, None]
            est[nodes] = a * z[nodes] + (1 - a) * sums[nodes]
        out = est.copy()
        for l in range(h.height - 1):
            kids = h.level(l + 1)
            parent = h.parent[kids]
            out[kids] = est[kids] + self._beta[kids, None] * (out[parent] - sums[parent])
        return out[h.leaf_of_cell]

    def _pinv_rmatmat(self, x: np.ndarray) -> np.ndarray:
        h = self.hierarchy
        x = np.asarray(x, dtype=np.float64)
        out_bar = np.zeros((h.num_nodes, x.shape[1]))
        out_bar[h.leaf_of_cell] = x
        est_bar = np.zeros_like(out_bar)
        sums_bar = np.zeros_like(out_bar)
        for l in range(h.height - 2, -1, -1):  # the top-down pass, reversed
            kids = h.level(l + 1)
            est_bar[kids] += out_bar[kids]
            pushed = h._gather[l] @ (self._beta[kids, None] * out_bar[kids])
            out_bar[h.level(l)] += pushed
            sums_bar[h.level(l)] -= pushed
        est_bar[0] += out_bar[0]
        z_bar = np.zeros_like(out_bar)
        for l in range(h.height):  # the bottom-up pass, reversed
            nodes = h.level(l)
            a = self._alpha[nodes, None]
            z_bar[nodes] += a * est_bar[nodes]
            sums_bar[nodes] += (1 - a) * est_bar[nodes]
            if l < h.height - 1:
                est_bar[h.level(l + 1)] += h._gather[l].T @ sums_bar[nodes]
        return z_bar[self._measured] / self.node_weights[self._measured, None]


def hierarchical(domain, branching: int, root: bool = True, level_weights=None, name: str | None = None) -> TreeStrategy:
    """A hierarchy strategy with one weight per level (uniform budget by default: all ones).

    ``root=False`` leaves the total unmeasured; ``level_weights[l]`` weighs every node of level l.
    """
    h = Hierarchy(domain, branching)
    weights = np.ones(h.height) if level_weights is None else check_real_array(level_weights, "level_weights")
    if weights.shape != (h.height,):
        raise ValueError(f"level_weights must have one entry per level ({h.height}), got shape {weights.shape}")
    node_weights = weights[h.depth]
    if not root:
        node_weights = node_weights.copy()
        node_weights[0] = 0.0
    return TreeStrategy(h, node_weights, name=name)
