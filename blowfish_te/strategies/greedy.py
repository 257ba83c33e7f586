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
from ..workloads import Workload, as_workload
from ..workloads.base import CHUNK_ENTRIES
from .hierarchy import Hierarchy, TreeStrategy

#: GreedyH works with the dense Gram matrix WᵀW: K² entries.
MAX_GREEDY_CELLS = 16384


def greedy_hierarchy(workload: Workload, branching: int = 2, grid: int = 100, rule: str = "dawa") -> TreeStrategy:
    """The GreedyH strategy for ``workload``: a ``branching``-ary hierarchy with greedy weights.

    The nodes of one level are independent given their children, so each level is one batch of
    array operations (its products with WᵀW in blocks of nodes, at most ``CHUNK_ENTRIES`` numbers).
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
    gram = workload.gram_matrix(max_entries=k * k)
    v = np.zeros(k)
    kk = np.zeros(h.num_nodes)
    score = np.zeros(h.num_nodes)
    spread = np.zeros(h.num_nodes)  # "dawa": ‖C_B v‖² of the node's final v
    share = np.ones(h.num_nodes)  # p: the part passed down to the children
    p_grid = 1.0 - np.arange(grid) / grid
    c_grid = (1.0 - p_grid) ** 2
    for level, owner in reversed(list(enumerate(_owners(h)))):
        nodes = np.arange(h.level_starts[level], h.level_starts[level + 1])
        covered = np.flatnonzero(owner >= 0)
        leaves = nodes[h.is_leaf[nodes]]
        cells = np.ravel_multi_index(tuple(h.lo[leaves].T), h.domain)
        v[cells] = 1.0
        kk[leaves] = 1.0
        score[leaves] = spread[leaves] = (gram[:, cells] ** 2).sum(axis=0) if rule == "dawa" else gram[cells, cells]
        inner = nodes[~h.is_leaf[nodes]]
        if inner.size == 0:
            continue
        local = np.full(h.num_nodes, -1)
        local[inner] = np.arange(inner.size)
        inside = covered[local[owner[covered]] >= 0]
        column = local[owner[inside]]
        m, own = _images(gram, v, inside, column, inner.size, rule)
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


def _images(gram: np.ndarray, v: np.ndarray, cells: np.ndarray, column: np.ndarray, count: int, rule: str):
    """Per node j: m_j = ‖C v_j‖² and own_j = v_jᵀ C v_j, v_j = v on node j's cells (else 0)."""
    m = np.zeros(count)
    own = np.zeros(count)
    order = np.argsort(column, kind="stable")
    cells, column = cells[order], column[order]
    bounds = np.searchsorted(column, np.arange(count + 1))
    step = max(1, CHUNK_ENTRIES // max(gram.shape[0], 1))
    for first in range(0, count, step):
        last = min(first + step, count)
        span = slice(bounds[first], bounds[last])
        block = sp.csr_array((v[cells[span]], (cells[span], column[span] - first)), shape=(gram.shape[0], last - first))
        image = np.asarray((block.T @ gram).T)  # C v_j for the nodes of this block (C is symmetric)
        if rule == "dawa":
            m[first:last] = (image**2).sum(axis=0)
        else:
            own[first:last] = np.bincount(column[span] - first, weights=v[cells[span]] * image[cells[span], column[span] - first],
                                          minlength=last - first)
    return m, own
