"""GreedyH: hierarchy weights chosen for the workload (Li, Hay, Miklau, Wang, DAWA, PVLDB 2014).

Bottom up, every node splits its subtree's budget: a share 1 - p measures the node's own total and
p scales its children's (already chosen) strategies, so weights along every root-to-leaf path sum
to 1 (L1 sensitivity 1). For the children, let M_i = (A_iᵀA_i)⁻¹, v = blockdiag(M_i)·1 and k = 1ᵀv;
Sherman–Morrison gives the node's inverse Gram with c = (1 - p)²,

    (AᵀA)⁻¹ = (1/p²) [blockdiag(M_i) - c v vᵀ / (p² + c k)],

so the node's own v and k become v / (p² + c k) and k / (p² + c k): only vectors are stored.
p is chosen on the grid 1 - j/G, j = 0..G-1, by one of two rules:

- ``"dawa"`` (default), DAWA's published rule: minimise [S - δ c M' / (p² + δ c k)] / p² with
  S the children's scores, δ = b^(-depth/2), M' = δ(m - m₁) + m₁, m = ‖C_B v‖², m₁ = Σ‖C_{B_i} v_i‖²
  and C = WᵀW (so the scores weigh WᵀW twice). The depth discount counters the myopia of the
  bottom-up choice: deep blocks are also informed by their ancestors' measurements.
- ``"exact"``: minimise the subtree's own error tr(C_B (AᵀA)⁻¹) = [S - c vᵀC_B v / (p² + c k)] / p²,
  which is exact locally but over-measures small blocks for prefix-like workloads.

Either way the resulting strategy's error is computed exactly afterwards (least squares).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import check_int
from ..workloads import Boxes, Workload, as_workload
from .base import sparse_rows
from .hierarchy import Hierarchy, TreeStrategy

#: GreedyH works with the dense Gram matrix WᵀW: K² entries.
MAX_GREEDY_CELLS = 16384


def greedy_hierarchy(workload: Workload, branching: int = 2, grid: int = 100, rule: str = "dawa") -> TreeStrategy:
    """The GreedyH strategy for ``workload``: a ``branching``-ary hierarchy with greedy weights.

    The nodes of one level are independent given their children, so each level is one batch of
    array operations. A node's image C v_j is the sum of its children's (rescaled), so the images
    of a level come from the level below in one sparse pass: O(K·#nodes) after the Gram matrix,
    which stays sparse when the workload's rows are short (e.g. ranges moved onto a line's edges).
    """
    if rule not in ("dawa", "exact"):
        raise ValueError(f"rule must be 'dawa' or 'exact', got {rule!r}")
    workload = as_workload(workload)
    branching = check_int(branching, "branching", minimum=2)
    grid = check_int(grid, "grid", minimum=1)
    k = workload.size
    if k > MAX_GREEDY_CELLS:
        raise ValueError(f"GreedyH needs the dense Gram matrix; domains up to {MAX_GREEDY_CELLS} cells, got {k}")
    h = Hierarchy(workload.domain, branching)
    gram = _gram(workload)
    v = np.zeros(k)
    kk = np.zeros(h.num_nodes)
    score = np.zeros(h.num_nodes)
    spread = np.zeros(h.num_nodes)  # "dawa": ‖C_B v‖² of the node's final v
    share = np.ones(h.num_nodes)  # p: the part passed down to the children
    p_grid = 1.0 - np.arange(grid) / grid
    c_grid = (1.0 - p_grid) ** 2
    images = None  # C v_j of every node j of the level below, one row each (C is symmetric)
    for level, owner in reversed(list(enumerate(_owners(h)))):
        nodes = np.arange(h.level_starts[level], h.level_starts[level + 1])
        covered = np.flatnonzero(owner >= 0)
        is_leaf = h.is_leaf[nodes]
        leaves = nodes[is_leaf]
        cells = np.ravel_multi_index(tuple(h.lo[leaves].T), h.domain)
        v[cells] = 1.0
        kk[leaves] = 1.0
        inner = nodes[~is_leaf]
        # a parent's image is the sum of its children's: one pass over the level below
        if inner.size == 0 and np.array_equal(cells, np.arange(k)):
            level_images = gram
        else:
            parts = [gram[cells], (h._gather[level] @ images)[inner - h.level_starts[level]] if inner.size else None]
            level_images = _stack_rows(parts, np.flatnonzero(is_leaf), np.flatnonzero(~is_leaf))
        if rule == "dawa":
            score[leaves] = spread[leaves] = _row_energy(level_images, np.flatnonzero(is_leaf))
        else:
            score[leaves] = spread[leaves] = _entries(gram, cells, cells)
        images = level_images
        if inner.size == 0:
            continue
        local = np.full(h.num_nodes, -1)
        local[inner] = np.arange(inner.size)
        inside = covered[local[owner[covered]] >= 0]
        column = local[owner[inside]]
        rows = inner - h.level_starts[level]
        if rule == "dawa":
            m = _row_energy(images, rows)
        else:
            own = np.bincount(column, weights=v[inside] * _entries(images, rows[column], inside), minlength=inner.size)
        gather = h._gather[level]
        offset = h.level_starts[level]
        total_s = (gather @ score[h.level(level + 1)])[inner - offset]
        total_k = (gather @ kk[h.level(level + 1)])[inner - offset]
        discount = branching ** (-level / 2) if rule == "dawa" else 1.0
        if rule == "dawa":
            kids = (gather @ spread[h.level(level + 1)])[inner - offset]
            weight = discount * (discount * (m - kids) + kids)
        else:
            m = weight = own
        values = (total_s[:, None] - c_grid * weight[:, None] / (p_grid**2 + discount * c_grid * total_k[:, None])) / p_grid**2
        j = np.argmin(values, axis=1)
        denom = p_grid[j] ** 2 + c_grid[j] * total_k  # the exact Sherman–Morrison update
        share[inner], score[inner] = p_grid[j], values[np.arange(inner.size), j]
        v[inside] /= denom[column]
        factor = np.ones(images.shape[0])
        factor[rows] = 1.0 / denom
        images = _scale_rows(images, factor)
        kk[inner] = total_k / denom
        spread[inner] = m / denom**2
    # path products: a node's subtree carries the product of its ancestors' shares
    scale = np.ones(h.num_nodes)
    for level in range(1, h.height):
        nodes = h.level(level)
        scale[nodes] = scale[h.parent[nodes]] * share[h.parent[nodes]]
    weights = np.where(h.is_leaf, scale, scale * (1.0 - share))
    strategy = TreeStrategy(h, weights, name=f"greedyh({workload.name}, b={branching})")
    strategy.selection_score = float(score[0])  # with rule "exact": ‖W A⁺‖_F² of this strategy
    return strategy


def _gram(workload: Workload):
    """WᵀW: sparse (CSR) when W has short sparse rows whose product costs less than K² (an
    upper bound on its non-zeros), else dense."""
    k = workload.size
    budget = k * k / 8
    short = not isinstance(workload, Boxes) or float(((workload.hi - workload.lo + 1).prod(axis=1) ** 2.0).sum()) <= budget
    rows = sparse_rows(workload) if short else None
    if rows is not None and float((np.diff(rows.indptr).astype(np.float64) ** 2).sum()) <= budget:
        return sp.csr_array(rows.T @ rows)
    return workload.gram_matrix(max_entries=k * k)


def _stack_rows(parts: list, first: np.ndarray, second: np.ndarray):
    """Rows ``parts[0]`` at positions ``first`` and ``parts[1]`` (may be None) at ``second``."""
    if sp.issparse(parts[0]):
        blocks = [p for p in parts if p is not None]
        order = np.argsort(np.concatenate([first, second]), kind="stable")
        return sp.csr_array(sp.vstack(blocks, format="csr")[order])
    out = np.empty((first.size + second.size, parts[0].shape[1]))
    out[first] = parts[0]
    if parts[1] is not None:
        out[second] = parts[1]
    return out


def _row_energy(a, rows: np.ndarray) -> np.ndarray:
    """Σ_j a[r, j]² for each of ``rows`` (without copying a dense ``a`` holding just those rows)."""
    if sp.issparse(a):
        a = sp.csr_array(a)
        per_row = np.bincount(np.repeat(np.arange(a.shape[0]), np.diff(a.indptr)), weights=a.data**2, minlength=a.shape[0])
        return per_row[rows]
    block = a if rows.size == a.shape[0] else a[rows]
    return np.einsum("ij,ij->i", block, block)


def _entries(a, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """a[rows[i], cols[i]] for every i."""
    return np.asarray(sp.csr_array(a)[rows, cols]).ravel() if sp.issparse(a) else a[rows, cols]


def _scale_rows(a, factor: np.ndarray):
    """Row r of ``a`` times factor[r] (in place for a dense array, unless ``a`` is shared)."""
    if sp.issparse(a):
        a = sp.csr_array(a, copy=True)
        a.data *= np.repeat(factor, np.diff(a.indptr))
        return a
    a *= factor[:, None]
    return a


def _owners(h: Hierarchy) -> list[np.ndarray]:
    """Per level, the node of that level whose box holds each cell (-1 where a shallower leaf does)."""
    owners = []
    node = h.leaf_of_cell.copy()
    depth = h.depth[node]
    for level in range(h.height - 1, -1, -1):
        owner = np.where(depth == level, node, -1)
        owners.append(owner)
        up = depth == level
        node[up & (level > 0)] = h.parent[node[up & (level > 0)]]
        depth[up] -= 1
    return owners[::-1]
