"""Exact transformational equivalence for forest policies (SPEC §4).

For a forest G, root each component (at ⊥ when present, else at its last cell) and orient every
edge child → parent. With P_G the signed incidence matrix (+1 at the child, -1 at the parent, no
row for ⊥):

- ``x_G[e]`` = number of records in the subtree below edge e (non-negative integers);
- ``W_G = W P_G``;
- ``offset(W) = Σ_C n_C W e_{r_C}`` over the components C without ⊥, n_C their record totals;

and then ``W x = W_G x_G + offset(W)`` exactly. Moving one record along edge e changes x_G by ±1
in coordinate e only (adding or removing a record under ⊥ likewise), so G-neighbours become the
unit-change neighbours of x_G: any ε-DP mechanism for W_G on x_G, plus the offset, is
(ε, G)-Blowfish private with the same output distribution (tree TE theorem). The totals n_C are
invariant under G-neighbours and are disclosed exactly.

Costs: the setup is one DFS plus O(K log depth) vectorised pointer jumping; afterwards x_G, the
totals and the reconstruction x = P_G x_G + Σ n_C e_r are O(K) array passes.
"""

from __future__ import annotations

import weakref

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ._graph import signed_incidence
from ._validation import check_histogram
from .policies import Policy
from .workloads import Workload, as_workload

__all__ = ["CyclicPolicyError", "TreeTransform", "TransformedWorkload", "transform"]


class CyclicPolicyError(ValueError):
    """The exact transform needs a forest; the policy graph has a cycle."""


def _subtree_intervals(order: np.ndarray, pred: np.ndarray, root: int) -> tuple[np.ndarray, np.ndarray]:
    """Preorder position and subtree end (exclusive) of every vertex of a rooted tree.

    In DFS preorder a subtree is contiguous; it ends where the vertex's next sibling starts, or,
    for a last child, where its parent's subtree ends. The inherited ends are resolved by pointer
    jumping, O(log depth) vectorised rounds, so path-like trees of depth K stay O(K log K).
    """
    n = order.size
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    parent = pred.astype(np.int64)
    parent[root] = root
    below = order[1:]  # preorder, so a stable sort by parent keeps siblings in visiting order
    siblings = below[np.argsort(parent[below], kind="stable")]
    same = parent[siblings[1:]] == parent[siblings[:-1]]
    end = np.full(n, -1, dtype=np.int64)
    end[siblings[:-1][same]] = pos[siblings[1:][same]]
    end[root] = n
    jump = parent
    todo = np.flatnonzero(end < 0)
    while todo.size:
        end[todo] = end[jump[todo]]
        jump[todo] = jump[jump[todo]]
        todo = todo[end[todo] < 0]
    return pos, end


class TreeTransform:
    """The transform of a forest policy: x ↦ x_G, W ↦ W_G, offsets and reconstruction (SPEC §4).

    Coordinates of x_G are the tree edges, one per non-root cell, ordered by that child cell:
    ``child[e] → parent[e]`` (``parent[e] == K`` is ⊥). ``roots`` are the root cells of the
    components without ⊥, whose totals are disclosed. Build it with :func:`transform`.
    """

    def __init__(self, policy: Policy):
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a blowfish_te Policy, got {type(policy).__name__}")
        if not policy.is_forest:
            v, e = policy.num_vertices, policy.num_edges
            raise CyclicPolicyError(
                f"{policy.name} has cycles ({e} edges on {v} vertices; a forest has at most {v - 1}), "
                "so the exact transform does not apply. Embed the policy in a spanning tree T and run "
                "the mechanism at epsilon / stretch(T) (the tree-embedding route of SPEC §5), or use a "
                "linear mechanism through the exact route (answer(..., route='exact'), Laplace noise "
                "calibrated to the policy sensitivity). A pseudo-inverse transform is never private."
            )
        self.policy = policy
        k, v = policy.size, policy.num_vertices
        labels = policy.component_labels
        roots = np.full(policy.n_components, -1, dtype=np.int64)
        np.maximum.at(roots, labels, np.arange(v))  # largest vertex: ⊥ (= K) where present
        edges = policy.edges
        hub = v  # a super-root joined to every component root
        rows = np.concatenate([edges[:, 0], roots])
        cols = np.concatenate([edges[:, 1], np.full(roots.size, hub)])
        adj = sp.csr_array((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(v + 1, v + 1))
        order, pred = csgraph.depth_first_order(adj, hub, directed=False, return_predecessors=True)
        pos, end = _subtree_intervals(order, pred, hub)
        is_cell = order < k
        cells_before = np.concatenate([[0], np.cumsum(is_cell)])  # cells among the first p vertices
        start = cells_before[pos[:k]]
        stop = start + (end[:k] - pos[:k])  # a cell's subtree holds only cells

        self.child = np.flatnonzero(pred[:k] != hub)
        self.parent = pred[self.child].astype(np.int64)
        self.roots = np.sort(roots[roots < k])
        for a in (self.child, self.parent, self.roots):
            a.flags.writeable = False
        self._edge_start, self._edge_stop = start[self.child], stop[self.child]
        self._root_start, self._root_stop = start[self.roots], stop[self.roots]
        cell_order = order[is_cell]
        if np.array_equal(cell_order, np.arange(k)):
            self._cell_order = slice(None)
        elif np.array_equal(cell_order, np.arange(k)[::-1]):
            self._cell_order = slice(None, None, -1)
        else:
            self._cell_order = cell_order
        self._incidence = signed_incidence(self.child, self.parent, k)

    def __repr__(self) -> str:
        return f"<TreeTransform of {self.policy.name}: {self.num_edges} edges, {self.roots.size} disclosed totals>"

    @property
    def num_edges(self) -> int:
        """Length of x_G: one coordinate per tree edge."""
        return int(self.child.size)

    def incidence(self) -> sp.csc_array:
        """P_G (K × edges): +1 at each edge's child, -1 at its parent (no row for ⊥)."""
        return self._incidence.copy()

    def _prefix(self, x) -> np.ndarray:
        x = check_histogram(x, self.policy.shape)
        return np.concatenate([[0], np.cumsum(x[self._cell_order])])

    def data(self, x) -> np.ndarray:
        """x_G: for every tree edge, the number of records in the subtree below it (int64)."""
        cs = self._prefix(x)
        return cs[self._edge_stop] - cs[self._edge_start]

    def totals(self, x) -> np.ndarray:
        """n_C for the components without ⊥, aligned with :attr:`roots` (disclosed exactly)."""
        cs = self._prefix(x)
        return cs[self._root_stop] - cs[self._root_start]

    def _root_vector(self, totals) -> np.ndarray:
        totals = np.asarray(totals)
        if totals.shape != self.roots.shape or totals.dtype.kind not in "iuf":
            raise ValueError(f"totals must be numbers, one per root: shape {self.roots.shape}, got {totals.shape}")
        vector = np.zeros(self.policy.size, dtype=np.result_type(totals.dtype, np.int64))
        vector[self.roots] = totals
        return vector

    def offset(self, workload, totals) -> np.ndarray:
        """offset(W) = W Σ_C n_C e_{r_C}, so that W x = W_G x_G + offset(W)."""
        return as_workload(workload).matvec(self._root_vector(totals))

    def workload(self, workload) -> "TransformedWorkload":
        """W_G = W P_G as an implicit workload over the tree edges."""
        return TransformedWorkload(as_workload(workload), self)

    def reconstruct(self, x_g, totals) -> np.ndarray:
        """x = P_G x_G + Σ_C n_C e_{r_C}: the histogram whose transform is (x_G, totals).

        Applied to a noisy estimate of x_G it gives the estimate of x used for post-processing.
        """
        x_g = np.asarray(x_g)
        if x_g.shape != (self.num_edges,):
            raise ValueError(f"x_g must have shape ({self.num_edges},), got {x_g.shape}")
        return self._incidence @ x_g + self._root_vector(totals)


class TransformedWorkload(Workload):
    """W_G = W P_G, the workload on x_G (one column per tree edge), applied implicitly."""

    def __init__(self, base: Workload, tree: TreeTransform):
        if base.size != tree.policy.size:
            raise ValueError(
                f"workload {base.name} has {base.size} cells but policy {tree.policy.name} has {tree.policy.size}"
            )
        if tree.num_edges == 0:
            raise ValueError(f"{tree.policy.name} has no edges: it protects nothing and W x = offset(W) exactly")
        self.base = base
        self.tree = tree
        super().__init__((tree.num_edges,), base.num_queries, f"{base.name} under {tree.policy.name}")

    def _matmat(self, y):
        return self.base._matmat(self.tree._incidence @ np.asarray(y))

    def _rmatmat(self, z):
        return self.tree._incidence.T @ self.base._rmatmat(np.asarray(z))

    def difference_norms(self, u, v, norm: str = "l1") -> np.ndarray:
        """Column norms of W_G are column-difference norms of W along the tree edges."""
        u, v = self._check_pairs(u, v)
        if np.all(v == self.size):
            return self.base.difference_norms(self.tree.child[u], self.tree.parent[u], norm)
        return super().difference_norms(u, v, norm)

    def tosparse(self) -> sp.csr_array:
        return self.base.times_incidence(self.tree.child, self.tree.parent)


_CACHE: "weakref.WeakKeyDictionary[Policy, TreeTransform]" = weakref.WeakKeyDictionary()


def transform(policy: Policy) -> TreeTransform:
    """The exact transform of a forest policy (cached per policy); cyclic policies raise
    :class:`CyclicPolicyError`."""
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a blowfish_te Policy, got {type(policy).__name__}")
    if policy not in _CACHE:
        _CACHE[policy] = TreeTransform(policy)
    return _CACHE[policy]
