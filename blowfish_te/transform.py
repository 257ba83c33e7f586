"""Exact transformational equivalence for forest policies (Haney, Machanavajjhala, Ding, PVLDB 2015).

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

For a policy with cycles, ``transform(policy, tree=T)`` uses the transform of a spanning forest T
instead and carries T's maximum stretch ℓ (the tree-embedding route): a mechanism that is ε/ℓ-DP on x_T is
(ε, G)-Blowfish, since a G-move is a chain of at most ℓ T-moves.

Costs: the setup is a BFS plus O(K log K) vectorised pointer jumping (:mod:`blowfish_te.forest`);
afterwards x_G, the totals and the reconstruction x = P_G x_G + Σ n_C e_r are O(K) array passes.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ._cache import IdentityCache
from ._digest import digest
from ._graph import signed_incidence
from ._operator import FunctionMap, LinearMap
from ._validation import check_histogram, check_real_array
from .forest import CyclicPolicyError, RootedForest, is_line
from .policies import Policy
from .sensitivity import check_compatible
from .trees import stretch as tree_stretch
from .workloads import Workload, as_workload
from .workloads.base import MAX_ROW_NONZEROS

__all__ = ["CyclicPolicyError", "TreeTransform", "TransformedWorkload", "transform"]


def _index_range(start: int, stop: int) -> np.ndarray:
    out = np.arange(start, stop)
    out.flags.writeable = False
    return out


class TreeTransform:
    """The transform of a forest: x ↦ x_G, W ↦ W_G, offsets and reconstruction.

    ``policy`` is the policy protected; ``tree`` the forest whose transform is used (the policy
    itself when it is a forest) and ``stretch`` its maximum stretch ℓ (1 for the policy itself):
    mechanisms must run at ε/ℓ on x_G. Coordinates of x_G are the tree edges, one per non-root
    cell, ordered by that child cell: ``child[e] → parent[e]`` (``parent[e] == K`` is ⊥).
    ``roots`` are the root cells of the tree components without ⊥, whose totals are disclosed.
    Build it with :func:`transform`.
    """

    def __init__(self, policy: Policy, tree: Policy | None = None):
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a blowfish_te Policy, got {type(policy).__name__}")
        forest = policy if tree is None else tree
        if not isinstance(forest, Policy):
            raise TypeError(f"tree must be a blowfish_te Policy (a forest), got {type(forest).__name__}")
        self.policy = policy
        self.tree = forest
        self.stretch = 1
        self._workloads = IdentityCache()
        k = policy.size
        #: whether the policy is the line itself: edge e joins e → e + 1 and x_G is the running sum of x
        self.is_line = forest is policy and is_line(policy)
        if self.is_line:  # edge e = (e → e + 1), its subtree the cells 0..e: x_G is the running sum
            self.roots = np.array([k - 1])
            self.roots.flags.writeable = False
            return
        rooted = RootedForest(forest)
        if forest is not policy:
            measured = tree_stretch(policy, forest, rooted, histogram=False)
            if measured.disconnected:
                raise ValueError(
                    f"tree {forest.name} does not connect the two ends of {measured.disconnected} edges of "
                    f"{policy.name}: a tree must span every component of the policy"
                )
            self.stretch = max(1, int(measured.maximum))
        top = rooted.num_vertices
        cell_order, start, stop = rooted.subtree_cells()
        self._child = np.flatnonzero(rooted.parent[:k] != top)
        self._parent = rooted.parent[self._child].copy()
        self.roots = np.sort(rooted.roots[rooted.roots < k])
        for a in (self._child, self._parent, self.roots):
            a.flags.writeable = False
        self._edge_start, self._edge_stop = start[self._child], stop[self._child]
        self._root_start, self._root_stop = start[self.roots], stop[self.roots]
        if np.array_equal(cell_order, np.arange(k)):
            self._cell_order = slice(None)
        elif np.array_equal(cell_order, np.arange(k)[::-1]):
            self._cell_order = slice(None, None, -1)
        else:
            self._cell_order = cell_order
        self._inner = self._parent < k  # edges between two cells (the others end at ⊥)

    @property
    def child(self) -> np.ndarray:
        """The child cell of every edge (read-only)."""
        return _index_range(0, self.policy.size - 1) if self.is_line else self._child

    @property
    def parent(self) -> np.ndarray:
        """The parent of every edge: a cell, or K for ⊥ (read-only)."""
        return _index_range(1, self.policy.size) if self.is_line else self._parent

    def __repr__(self) -> str:
        via = "" if self.tree is self.policy else f" via {self.tree.name} (stretch {self.stretch})"
        return f"<TreeTransform of {self.policy.name}{via}: {self.num_edges} edges, {self.roots.size} disclosed totals>"

    @property
    def num_edges(self) -> int:
        """Length of x_G: one coordinate per tree edge."""
        return self.policy.size - 1 if self.is_line else int(self._child.size)

    @functools.cached_property
    def _incidence(self) -> sp.csc_array:
        return signed_incidence(self.child, self.parent, self.policy.size)

    def incidence(self) -> sp.csc_array:
        """P_G (K × edges): +1 at each edge's child, -1 at its parent (no row for ⊥)."""
        return self._incidence.copy()

    def spread(self, y: np.ndarray) -> np.ndarray:
        """P_G y for a (edges, c) block: each edge's value added at its child and subtracted at
        its parent, by index arithmetic for one column (no K × edges matrix is built)."""
        y = np.asarray(y)
        if y.ndim != 2 or y.shape[1] != 1:
            return self._incidence @ y
        values = y[:, 0]
        out = np.zeros(self.policy.size, dtype=np.result_type(values.dtype, np.int64))
        if self.is_line:
            out[:-1] = values
            out[1:] -= values
            return out[:, None]
        out[self._child] = values  # each cell is the child of at most one edge
        inner = self._inner
        parents = np.bincount(self._parent[inner], weights=values[inner], minlength=self.policy.size)
        out = out - (parents if out.dtype.kind == "f" else np.rint(parents).astype(out.dtype))
        return out[:, None]

    def gather(self, z: np.ndarray) -> np.ndarray:
        """P_Gᵀ z for a (K, c) block: every edge's child row minus its parent row (⊥ rows are 0)."""
        z = np.asarray(z)
        if self.is_line:
            return z[:-1] - z[1:]
        below = np.concatenate([z, np.zeros((1,) + z.shape[1:], dtype=z.dtype)])
        return below[self._child] - below[self._parent]

    def _prefix(self, x) -> np.ndarray:
        x = check_histogram(x, self.policy.shape)
        return np.concatenate([[0], np.cumsum(x[self._cell_order])])

    def data_and_totals(self, x: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """(x_G, n_C) from one pass over x: for every tree edge the number of records in the
        subtree below it (int64), and the totals of the components without ⊥, aligned with
        :attr:`roots` (disclosed exactly)."""
        if self.is_line:
            x_g = np.cumsum(check_histogram(x, self.policy.shape))
            return x_g[:-1], x_g[-1:]
        cs = self._prefix(x)
        return cs[self._edge_stop] - cs[self._edge_start], cs[self._root_stop] - cs[self._root_start]

    def data(self, x: ArrayLike) -> np.ndarray:
        """x_G (see :meth:`data_and_totals`)."""
        return self.data_and_totals(x)[0]

    def totals(self, x: ArrayLike) -> np.ndarray:
        """n_C for the components without ⊥ (see :meth:`data_and_totals`)."""
        return self.data_and_totals(x)[1]

    def _root_vector(self, totals) -> np.ndarray:
        """Σ_C n_C e_{r_C}; ``totals`` are record counts, one per root (:attr:`roots`)."""
        totals = check_histogram(totals, self.roots.shape, "totals")
        vector = np.zeros(self.policy.size, dtype=np.int64)
        vector[self.roots] = totals
        return vector

    def offset(self, workload: Workload | ArrayLike, totals: ArrayLike) -> np.ndarray:
        """offset(W) = W Σ_C n_C e_{r_C}, so that W x = W_G x_G + offset(W)."""
        workload = as_workload(workload)
        check_compatible(workload, self.policy)
        return workload.matvec(self._root_vector(totals))

    def workload(self, workload: Workload | ArrayLike) -> TransformedWorkload:
        """W_G = W P_G as an implicit workload over the tree edges. The last few are kept on the
        transform, so planning and releasing share one object and its cached strategies and norms."""
        workload = as_workload(workload)
        return self._workloads.get(workload, lambda: TransformedWorkload(workload, self))

    def reconstruct(self, x_g: ArrayLike, totals: ArrayLike) -> np.ndarray:
        """x = P_G x_G + Σ_C n_C e_{r_C}: the histogram whose transform is (x_G, totals).

        Applied to a noisy estimate of x_G it gives the estimate of x used for post-processing.
        """
        x_g = check_real_array(x_g, "x_g")
        if x_g.shape != (self.num_edges,):
            raise ValueError(f"x_g must have shape ({self.num_edges},), got {x_g.shape}")
        return self.spread(x_g[:, None])[:, 0] + self._root_vector(totals)


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
        self._column_norms: dict[str, np.ndarray] = {}
        super().__init__((tree.num_edges,), base.num_queries, f"{base.name} under {tree.policy.name}")

    def _matmat(self, y):
        return self.base._matmat(self.tree.spread(np.asarray(y)))

    def _rmatmat(self, z):
        return self.tree.gather(self.base._rmatmat(np.asarray(z)))

    def column_norms(self, norm: str = "l1") -> np.ndarray:
        """Column norms of W_G: norms of W's column differences along the tree edges (cached;
        for a 0/1 workload the entries of W_G are in {-1, 0, 1}, so L1 equals squared L2)."""
        key = "l1" if self.base.is_binary else norm
        if key not in self._column_norms:
            values = self.base.difference_norms(self.tree.child, self.tree.parent, key)
            values.flags.writeable = False
            self._column_norms[key] = values
        return self._column_norms[key]

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        u, v = self._check_pairs(u, v)
        if np.all(v == self.size):
            return self.column_norms(norm)[u].copy()
        return super().difference_norms(u, v, norm)

    def tosparse(self) -> sp.csr_array:
        return self.base.times_incidence(self.tree.child, self.tree.parent)

    def sparse_rows(self) -> sp.csr_array | None:
        """W P_G when W has cheap sparse rows: a row is non-zero only on the edges that cross its
        query's boundary."""
        base = self.base.sparse_rows()
        if base is None:
            return None
        rows = sp.csr_array(base @ signed_incidence(self.tree.child, self.tree.parent, self.base.size), dtype=np.float64)
        return rows if rows.nnz <= MAX_ROW_NONZEROS else None

    def fingerprint(self) -> str | None:
        """The base workload's digest with the tree's edges (None when the base has none)."""
        base = self.base.fingerprint()
        if base is None:
            return None
        return digest("transformed", base, self.tree.policy.size, self.tree.child, self.tree.parent)

    @property
    def structured_gram(self) -> bool:
        """W_Gᵀ W_G = P_Gᵀ (WᵀW) P_G is structured when WᵀW is."""
        return self.base.structured_gram

    def gram(self) -> LinearMap:
        """P_Gᵀ (WᵀW) P_G through the base workload's Gram operator when it is structured."""
        if not self.base.structured_gram:
            return super().gram()
        incidence, base = self.tree._incidence, self.base.gram()
        product = lambda y: incidence.T @ base.matmat(incidence @ y)  # noqa: E731 (symmetric)
        return FunctionMap((self.size, self.size), product, product)

    def gram_matrix(self, max_entries: int = 2**26) -> np.ndarray:
        """W_Gᵀ W_G = P_Gᵀ (WᵀW) P_G, by rows and columns of the base workload's Gram matrix."""
        edges, k = self.size, self.base.size
        if edges * edges > max_entries:
            raise ValueError(f"the Gram matrix of {self.name} would have {edges * edges} entries (limit {max_entries})")
        child, parent = self.tree.child, self.tree.parent
        real = np.flatnonzero(parent < k)  # edges to ⊥ subtract nothing
        gram = self.base.gram_matrix(max_entries=k * k)
        half = gram[child]  # P_Gᵀ C: row child minus row parent
        half[real] -= gram[parent[real]]
        del gram
        out = half[:, child]
        out[:, real] -= half[:, parent[real]]
        return out

    def max_abs_entry(self) -> float:
        """A 0/1 workload's differences of two columns lie in {-1, 0, 1}."""
        if self.base.is_binary:
            return 1.0 if self.column_norms().max() > 0 else 0.0
        return super().max_abs_entry()


def transform(policy: Policy, tree: Policy | None = None) -> TreeTransform:
    """The exact transform of a forest policy, or of a spanning forest ``tree`` of a cyclic policy
    (then with its stretch ℓ). Cyclic policies without a tree raise :class:`CyclicPolicyError`.

    Transforms are cached on the policy object (policies are immutable).
    """
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a blowfish_te Policy, got {type(policy).__name__}")
    if tree is not None and not isinstance(tree, Policy):
        raise TypeError(f"tree must be a blowfish_te Policy (a forest), got {type(tree).__name__}")
    cache = policy._cache.setdefault("transforms", {})
    key = policy if tree is None else tree
    if key not in cache:
        cache[key] = TreeTransform(policy, tree)
    return cache[key]
