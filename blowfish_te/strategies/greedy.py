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

Images C v are held in cell space (length K, from the Gram matrix C, sparse when W's rows are
short) or, when K is larger than the number of queries m and C would be dense, in query space as
u = W v (length m, C v = Wᵀ u) with G = W Wᵀ: ‖C v‖² = uᵀ G u and vᵀ C v = ‖u‖². For boxes,
the cells' own ‖C e_i‖² = Σ over pairs of boxes holding i of G_qq' w_q w_q' come from painting
the pairwise intersections, O(m² + K), never a K × K matrix.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import check_int
from ..workloads import Boxes, Workload, as_workload
from ..workloads.base import unit_blocks
from ..workloads.boxes import coverage
from .hierarchy import Hierarchy, TreeStrategy

#: GreedyH holds a dense min(K, m) × min(K, m) matrix (WᵀW, or W Wᵀ in query space).
MAX_GREEDY_CELLS = 16384
#: A dense Gram matrix WᵀW up to this many entries is held as it is (cell space) ...
DENSE_GRAM_ENTRIES = 2**24
#: ... and up to this many without looking for a sparse one.
SMALL_GRAM_ENTRIES = 2**20
#: Rows of query-space images multiplied by G at a time.
_CHUNK_ENTRIES = 2**22


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
    space = _image_space(workload)
    h = Hierarchy(workload.domain, branching)
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
            level_images = space.unit(None)
        else:
            parts = [space.unit(cells), (h.gather(level) @ images)[inner - h.level_starts[level]] if inner.size else None]
            level_images = _stack_rows(parts, np.flatnonzero(is_leaf), np.flatnonzero(~is_leaf))
        score[leaves] = spread[leaves] = space.unit_energy(cells) if rule == "dawa" else space.unit_quadratic(cells)
        images = level_images
        if inner.size == 0:
            continue
        local = np.full(h.num_nodes, -1)
        local[inner] = np.arange(inner.size)
        inside = covered[local[owner[covered]] >= 0]
        column = local[owner[inside]]
        rows = inner - h.level_starts[level]
        if rule == "dawa":
            m = space.energy(images, rows)
        else:
            own = space.quadratic(images, rows, v, inside, column)
        gather = h.gather(level)
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


def _image_space(workload: Workload):
    """Cell space when WᵀW is sparse and cheap, small, or no larger than W Wᵀ; else query space."""
    k, m = workload.size, workload.num_queries
    if k * k <= SMALL_GRAM_ENTRIES:
        return _CellSpace(workload.gram_matrix(max_entries=k * k))
    budget = k * k / 8
    short = not isinstance(workload, Boxes) or float(((workload.hi - workload.lo + 1).prod(axis=1) ** 2.0).sum()) <= budget
    rows = workload.sparse_rows() if short else None
    if rows is not None and float((np.diff(rows.indptr).astype(np.float64) ** 2).sum()) <= budget:
        return _CellSpace(sp.csr_array(rows.T @ rows))
    if min(k, m) > MAX_GREEDY_CELLS:
        raise ValueError(f"GreedyH holds a dense matrix of min(cells, queries)² entries; up to {MAX_GREEDY_CELLS} "
                         f"cells or queries, got {k} cells and {m} queries")
    if k * k <= DENSE_GRAM_ENTRIES or k <= m:
        return _CellSpace(workload.gram_matrix(max_entries=k * k))
    rows = rows if rows is not None else workload.sparse_rows()
    if rows is None:
        raise ValueError(f"GreedyH on {workload.name}: {k} cells need the workload's sparse rows (boxes or an explicit "
                         f"matrix, at most 2^24 non-zeros) to work in query space")
    return _QuerySpace(workload, rows)


class _CellSpace:
    """Images C v (length K) from the Gram matrix C = WᵀW (dense, or sparse CSR)."""

    def __init__(self, gram):
        self.gram = gram
        self._cell_energy = None

    def unit(self, cells):
        """Images of the unit vectors e_i of ``cells`` (None: every cell, in order)."""
        return self.gram if cells is None else self.gram[cells]

    def unit_energy(self, cells) -> np.ndarray:
        if self._cell_energy is None:  # every row once: levels ask for their leaves in turn
            self._cell_energy = _row_energy(self.gram, np.arange(self.gram.shape[0]))
        return self._cell_energy[cells]

    def unit_quadratic(self, cells) -> np.ndarray:
        return _entries(self.gram, cells, cells)

    def energy(self, images, rows) -> np.ndarray:
        """‖C v_j‖² of the images ``rows``."""
        return _row_energy(images, rows)

    def quadratic(self, images, rows, v, inside, column) -> np.ndarray:
        """v_jᵀ C v_j, v_j the entries of v on the cells ``inside`` owned by node ``column``."""
        return np.bincount(column, weights=v[inside] * _entries(images, rows[column], inside), minlength=rows.size)


class _QuerySpace:
    """Images u = W v (length m), with G = W Wᵀ: ‖C v‖² = uᵀ G u, vᵀ C v = ‖u‖²."""

    def __init__(self, workload: Workload, rows: sp.csr_array):
        self.columns = sp.csr_array(rows.T)  # row i: W e_i
        if isinstance(workload, Boxes):
            self.query_gram, self.cell_energy = _box_overlaps(workload)
        else:
            self.query_gram = _query_gram(workload, rows)
            self.cell_energy = self.energy(self.columns, np.arange(workload.size))

    def unit(self, cells):
        return self.columns if cells is None else self.columns[cells]

    def unit_energy(self, cells) -> np.ndarray:
        return self.cell_energy[cells]

    def unit_quadratic(self, cells) -> np.ndarray:
        return _row_energy(self.columns, cells)

    def energy(self, images, rows) -> np.ndarray:
        out = np.empty(rows.size)
        step = max(1, _CHUNK_ENTRIES // self.query_gram.shape[0])
        for start in range(0, rows.size, step):
            block = images[rows[start : start + step]]
            block = block.toarray() if sp.issparse(block) else block
            out[start : start + step] = np.einsum("ij,ij->i", block @ self.query_gram, block)
        return out

    def quadratic(self, images, rows, v, inside, column) -> np.ndarray:
        return _row_energy(images, rows)


#: The sparse product W Wᵀ is used while it costs at most this many times m (K + m), the work of
#: forming G through the workload's own products instead.
SPARSE_GRAM_RATIO = 4.0


def _query_gram(workload: Workload, rows: sp.csr_array) -> np.ndarray:
    """G = W Wᵀ as a dense m × m array: from the sparse rows when that product is cheap (it costs
    Σ_i c_i² for c_i the rows meeting column i), else column blocks W (Wᵀ E) through the workload's
    own products, O(m (K + m)) for boxes and their tree transforms. DPBench's 2,000 rectangles on
    the star tree of a 128² grid meet 4,216 edges a row: 16 s sparse, about a second by products."""
    m, k = workload.num_queries, workload.size
    counts = np.bincount(rows.indices, minlength=k).astype(np.float64)
    if float(counts @ counts) <= SPARSE_GRAM_RATIO * m * (k + m):
        return (rows @ rows.T).toarray()
    gram = np.empty((m, m))
    for index, unit in unit_blocks(m, _CHUNK_ENTRIES // max(k, m)):
        gram[:, index] = np.asarray(workload.matmat(np.asarray(workload.rmatmat(unit), dtype=np.float64)), dtype=np.float64)
    return gram


def _box_overlaps(workload: Boxes) -> tuple[np.ndarray, np.ndarray]:
    """(G = W Wᵀ, ‖C e_i‖² for every cell i) of weighted boxes: G_qq' = w_q w_q' |q ∩ q'|, and
    ‖C e_i‖² = Σ_{q, q' ∋ i} w_q w_q' G_qq', each pair's weight painted over its intersection."""
    m, d = workload.lo.shape
    w = np.ones(m) if workload.weights is None else workload.weights
    gram = np.empty((m, m))
    energy = np.zeros(workload.size)
    step = max(1, _CHUNK_ENTRIES // (m * d))
    for start in range(0, m, step):
        q = slice(start, min(start + step, m))
        lo = np.maximum(workload.lo[q, None, :], workload.lo[None, :, :])
        hi = np.minimum(workload.hi[q, None, :], workload.hi[None, :, :])
        volume = np.clip(hi - lo + 1, 0, None).prod(axis=2).astype(np.float64)
        pair = np.outer(w[q], w)
        gram[q] = pair * volume
        keep = volume > 0
        energy += coverage(workload.domain, lo[keep], hi[keep], (pair**2 * volume)[keep])
    return gram, energy


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
    block = a if np.array_equal(rows, np.arange(a.shape[0])) else a[rows]
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
