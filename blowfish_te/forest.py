"""Rooted forests as arrays: parents, DFS preorder with subtree intervals, depths, tree distances.

Everything is built without recursion and without per-vertex Python loops:

1. parents from one breadth-first search (linear, unlike scipy's depth-first order, which rescans
   a vertex's neighbours and costs O(deg²) on stars);
2. in BFS order parents precede their children and siblings are contiguous, so depths, subtree
   sizes and preorder positions each solve a unit-triangular sparse system in O(V):
   depth(c) = depth(p) + 1, size(p) = 1 + Σ size(children), pos(c) = pos(p) + 1 + Σ size(earlier siblings);
3. tree distances d(u, v) = depth(u) + depth(v) - 2 depth(lca), where for preorder positions
   p_u < p_v the LCA's depth is min(depth over positions p_u+1..p_v) - 1, answered in O(1) per pair
   from a sparse range-minimum table.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ._graph import csgraph_ready
from .errors import CyclicPolicyError
from .policies import Policy

__all__ = ["CyclicPolicyError", "RootedForest", "is_line"]


def is_line(policy: Policy) -> bool:
    """Whether ``policy`` is the line over a 1-D domain: edges (i, i + 1) and nothing else."""
    blocks = policy.edge_blocks
    return policy.ndim == 1 and not policy.has_bottom and len(blocks) == 1 and getattr(blocks[0], "offset", None) == (1,)


class RootedForest:
    """A forest policy with each component rooted at ⊥ where present, else at its last cell.

    Vertices are the cells 0..K-1, then ⊥ (K) if present, then a virtual super-root joined to every
    component root, which makes the forest one tree. Attributes: ``parent`` (super-root: -1),
    ``order`` (preorder; the super-root first), ``pos`` (preorder position), ``end`` (position just
    past the subtree), ``depth`` (super-root 0, component roots 1).
    """

    def __init__(self, forest: Policy):
        if not isinstance(forest, Policy):
            raise TypeError(f"expected a blowfish_te Policy, got {type(forest).__name__}")
        if not forest.is_forest:
            v, e = forest.num_vertices, forest.num_edges
            raise CyclicPolicyError(
                f"{forest.name} has cycles ({e} edges on {v} vertices; a forest has at most {v - 1}), "
                "so the exact transform does not apply. Embed the policy in a spanning tree T and run "
                "the mechanism at epsilon / stretch(T) (the tree-embedding route: "
                "transform(policy, tree=...), answer(..., tree=...)), or use a linear mechanism through "
                "the exact route (answer(..., route='exact')). A pseudo-inverse transform is never private."
            )
        self.policy = forest
        v = forest.num_vertices
        n = v + 1
        top = v  # the super-root
        roots = np.full(forest.n_components, -1, dtype=np.int64)
        np.maximum.at(roots, forest.component_labels, np.arange(v))  # ⊥ (= K) where present
        if is_line(forest):
            # the line: each cell's parent is the next one, the last cell the root — one chain
            parent = np.arange(1, n + 1, dtype=np.int64)
            parent[top] = -1
            bfs = np.concatenate([[top], np.arange(v - 1, -1, -1)])
            self._store(forest, parent, bfs, np.arange(n), n - np.arange(n), np.arange(n), roots)
            return
        edges = forest.edges
        adj = sp.csr_array(
            (np.ones(edges.shape[0] + roots.size, dtype=np.int8),
             (np.concatenate([edges[:, 0], roots]), np.concatenate([edges[:, 1], np.full(roots.size, top)]))),
            shape=(n, n),
        )
        from scipy.sparse import csgraph  # loads scipy.sparse.linalg: on first use only
        bfs, pred = csgraph.breadth_first_order(csgraph_ready(adj), top, directed=False, return_predecessors=True)
        parent = pred.astype(np.int64)
        parent[top] = -1

        # In BFS ranks, A[rank(c), rank(parent(c))] = 1 is strictly lower triangular.
        rank = np.empty(n, dtype=np.int64)
        rank[bfs] = np.arange(n)
        up = rank[parent[bfs[1:]]]  # non-decreasing: BFS enqueues each vertex's children together
        if np.array_equal(up, np.arange(n - 1)):
            # one chain from the super-root (a path policy, e.g. line): BFS order is the preorder,
            # depths count along it and each subtree is the rest of the chain — nothing to solve
            self._store(forest, parent, bfs, np.arange(n), n - np.arange(n), np.arange(n), roots)
            return
        lower = sp.csr_array(
            (np.concatenate([np.ones(n), -np.ones(n - 1)]),
             (np.concatenate([np.arange(n), np.arange(1, n)]), np.concatenate([np.arange(n), up]))),
            shape=(n, n),
        )

        def solve(matrix, rhs, is_lower):
            from scipy.sparse.linalg import spsolve_triangular  # on first use only
            out = spsolve_triangular(matrix, rhs, lower=is_lower, unit_diagonal=True)
            return np.rint(out).astype(np.int64)

        depth_r = solve(lower, np.concatenate([[0.0], np.ones(n - 1)]), True)
        size_r = solve(sp.csr_array(lower.T), np.ones(n), False)
        sizes = size_r[1:]
        group_start = np.concatenate([[True], up[1:] != up[:-1]])
        before = np.cumsum(sizes) - sizes  # sizes of all earlier vertices in BFS order
        earlier_siblings = before - np.maximum.accumulate(np.where(group_start, before, 0))
        pos_r = solve(lower, np.concatenate([[0.0], 1.0 + earlier_siblings]), True)

        self._store(forest, parent, bfs, depth_r, size_r, pos_r, roots)

    def _store(self, forest: Policy, parent, bfs, depth_r, size_r, pos_r, roots) -> None:
        """Keep the arrays, from depth, subtree size and preorder position by BFS rank."""
        n = parent.size
        pos, depth, size = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        pos[bfs], depth[bfs], size[bfs] = pos_r, depth_r, size_r
        order = np.empty(n, dtype=np.int64)
        order[pos] = np.arange(n)
        self.num_vertices = forest.num_vertices
        self.parent = parent
        self.order = order
        self.pos = pos
        self.end = pos + size
        self.depth = depth
        self.roots = roots
        for a in (self.parent, self.order, self.pos, self.end, self.depth, self.roots):
            a.flags.writeable = False
        self._table: np.ndarray | None = None

    def _range_min_table(self) -> np.ndarray:
        """table[j, i] = min depth over preorder positions i .. i + 2^j - 1."""
        if self._table is None:
            at = self.depth[self.order].astype(np.int32)
            levels = [at]
            span = 1
            while 2 * span <= at.size:
                prev = levels[-1]
                nxt = prev.copy()
                nxt[: at.size - span] = np.minimum(prev[: at.size - span], prev[span:])
                levels.append(nxt)
                span *= 2
            self._table = np.stack(levels)
        return self._table

    def distances(self, u: ArrayLike, v: ArrayLike) -> np.ndarray:
        """Tree distance between vertices u[i] and v[i] (cells, or K for ⊥); -1 when the forest does
        not connect them."""
        u = np.asarray(u, dtype=np.int64)
        v = np.asarray(v, dtype=np.int64)
        table = self._range_min_table()
        pu, pv = self.pos[u], self.pos[v]
        lo = np.minimum(pu, pv) + 1
        hi = np.maximum(pu, pv)
        span = np.maximum(hi - lo + 1, 1)
        level = np.floor(np.log2(span)).astype(np.int64)
        n = table.shape[1]
        flat = table.reshape(-1)
        first = flat[level * n + np.minimum(lo, n - 1)]
        second = flat[level * n + np.maximum(hi - (1 << level) + 1, 0)]
        lca_depth = np.minimum(first, second).astype(np.int64) - 1
        dist = self.depth[u] + self.depth[v] - 2 * lca_depth
        dist[pu == pv] = 0
        dist[(lca_depth == 0) & (pu != pv)] = -1  # the LCA is the super-root: different components
        return dist

    def subtree_cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Cells in preorder, and for every cell the [start, stop) range of its subtree in that order.

        A cell's subtree holds only cells (⊥ is always a root), so it is contiguous among them.
        """
        k = self.policy.size
        is_cell = self.order < k
        cells_before = np.concatenate([[0], np.cumsum(is_cell)])
        start = cells_before[self.pos[:k]]
        return self.order[is_cell], start, start + (self.end[:k] - self.pos[:k])
