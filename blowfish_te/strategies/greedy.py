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

from .._validation import check_int
from ..workloads import Workload, as_workload
from .hierarchy import Hierarchy, TreeStrategy

#: GreedyH works with the dense Gram matrix WᵀW: K² entries.
MAX_GREEDY_CELLS = 16384


def greedy_hierarchy(workload: Workload, branching: int = 2, grid: int = 100, rule: str = "dawa") -> TreeStrategy:
    """The GreedyH strategy for ``workload``: a ``branching``-ary hierarchy with greedy weights."""
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
    cells = np.arange(k).reshape(workload.domain)
    one_d = len(workload.domain) == 1  # boxes are contiguous index ranges
    v = np.zeros(k)
    kk = np.zeros(h.num_nodes)
    score = np.zeros(h.num_nodes)
    spread = np.zeros(h.num_nodes)  # "dawa": ‖C_B v‖² of the node's final v
    share = np.ones(h.num_nodes)  # p: the part passed down to the children
    p_grid = 1.0 - np.arange(grid) / grid
    c_grid = (1.0 - p_grid) ** 2
    for level in range(h.height - 1, -1, -1):
        discount = branching ** (-level / 2) if rule == "dawa" else 1.0
        for n in range(h.level_starts[level], h.level_starts[level + 1]):
            box = cells[tuple(slice(a, b + 1) for a, b in zip(h.lo[n], h.hi[n]))].reshape(-1)
            columns = gram[:, box[0] : box[-1] + 1] if one_d else gram[:, box]
            if h.is_leaf[n]:
                v[box] = 1.0
                kk[n] = 1.0
                score[n] = spread[n] = float(columns[:, 0] @ columns[:, 0]) if rule == "dawa" else gram[box[0], box[0]]
                continue
            children = _children(h, n, level)
            block = v[box]
            total_s, total_k = score[children].sum(), kk[children].sum()
            if rule == "dawa":
                image = columns @ block
                m = float(image @ image)
                weight = discount * (discount * (m - spread[children].sum()) + spread[children].sum())
            else:
                m = weight = float(block @ columns[box[0] : box[-1] + 1] @ block) if one_d else float(block @ gram[np.ix_(box, box)] @ block)
            values = (total_s - c_grid * weight / (p_grid**2 + discount * c_grid * total_k)) / p_grid**2
            j = int(np.argmin(values))
            denom = p_grid[j] ** 2 + c_grid[j] * total_k  # the exact Sherman–Morrison update
            share[n], score[n] = p_grid[j], values[j]
            v[box] = block / denom
            kk[n] = total_k / denom
            spread[n] = m / denom**2
    # path products: a node's subtree carries the product of its ancestors' shares
    scale = np.ones(h.num_nodes)
    for level in range(1, h.height):
        nodes = h.level(level)
        scale[nodes] = scale[h.parent[nodes]] * share[h.parent[nodes]]
    weights = np.where(h.is_leaf, scale, scale * (1.0 - share))
    strategy = TreeStrategy(h, weights, name=f"greedyh({workload.name}, b={branching})")
    strategy.selection_score = float(score[0])  # with rule "exact": ‖W A⁺‖_F² of this strategy
    return strategy


def _children(h: Hierarchy, node: int, level: int) -> np.ndarray:
    """Children of ``node``: a run of the next level, which is sorted by parent."""
    kids = h.level(level + 1)
    first = np.searchsorted(h.parent[kids], node, side="left")
    last = np.searchsorted(h.parent[kids], node, side="right")
    return np.arange(kids.start + first, kids.start + last)
