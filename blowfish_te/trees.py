"""Spanning trees for policies with cycles, and their exact stretch (tree
embeddings: Haney, Machanavajjhala, Ding, PVLDB 2015).

A forest T on the same cells embeds a policy G with maximum stretch
ℓ = max over edges (u, v) of G of the tree distance d_T(u, v). Any (ε/ℓ, T)-Blowfish mechanism is
(ε, G)-Blowfish: moving a record along a G-edge is a chain of at most ℓ moves along T's path, and
the privacy loss of a chain adds up (group privacy). Every constructor here returns a forest
:class:`~blowfish_te.policies.Policy`, so a user's own forest policy is an equally valid tree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from ._graph import csgraph_ready
from ._grid import shape_label as _fmt
from ._validation import check_int, check_shape, check_size, is_int
from .forest import RootedForest
from .policies import BOTTOM, PairEdges, Policy, ShapeLike, check_policy

if TYPE_CHECKING:
    from .policies import _Bottom

__all__ = [
    "Stretch",
    "stretch",
    "line",
    "hub",
    "snake",
    "comb",
    "star",
    "stars",
    "bfs",
    "shortest_path",
    "mst",
    "candidates",
    "named",
    "TREES",
    "edge_span",
]


def _forest(shape: tuple[int, ...], u, v, name: str, has_bottom: bool = False) -> Policy:
    u, v = np.asarray(u, dtype=np.int64), np.asarray(v, dtype=np.int64)
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    order = np.lexsort((hi, lo))
    lo, hi = lo[order], hi[order]
    for a in (lo, hi):
        a.flags.writeable = False
    return Policy._trusted(shape, [PairEdges(lo, hi)], has_bottom=has_bottom, name=name)



def _centre(shape: tuple[int, ...], centre) -> int:
    if centre is None:
        return int(np.ravel_multi_index(tuple((k - 1) // 2 for k in shape), shape))
    if isinstance(centre, tuple):
        if len(centre) != len(shape) or not all(is_int(c) and 0 <= c < k for c, k in zip(centre, shape)):
            raise ValueError(f"centre {centre!r} is not a cell of the domain {shape}")
        return int(np.ravel_multi_index(centre, shape))
    index = check_int(centre, "centre", minimum=0)
    if index >= math.prod(shape):
        raise ValueError(f"centre {index} is outside the domain of {math.prod(shape)} cells")
    return index


# -- trees defined by the domain ----------------------------------------------------------------


def line(shape: ShapeLike) -> Policy:
    """The cells in row-major order, joined in a path (for 1-D threshold graphs, ℓ = θ)."""
    shape = check_shape(shape)
    k = math.prod(shape)
    return _forest(shape, np.arange(k - 1), np.arange(1, k), f"line({_fmt(shape)})")


def hub(k: int, theta: int) -> Policy:
    """The hub tree of a threshold graph G^θ_k: blocks of θ consecutive cells, each cell
    joined to its block's central hub (the lower middle cell), consecutive hubs joined. ℓ = 3 for θ >= 2."""
    k = check_size(k)
    theta = min(check_int(theta, "theta", minimum=1), k)  # θ >= k: one block
    starts = np.arange(0, k, theta)
    hubs = starts + (np.minimum(theta, k - starts) - 1) // 2
    cells = np.arange(k)
    block = cells // theta
    spoke = cells != hubs[block]
    u = np.concatenate([cells[spoke], hubs[:-1]])
    v = np.concatenate([hubs[block[spoke]], hubs[1:]])
    return _forest((k,), u, v, f"hub({k}, theta={theta})")


def _grid_index(shape, rows, cols):
    return np.ravel_multi_index((rows, cols), shape)


def _check_2d(shape) -> tuple[int, int]:
    shape = check_shape(shape)
    if len(shape) != 2:
        raise ValueError(f"shape must be 2-D for this tree, got {shape}")
    return shape


def snake(shape: Sequence[int]) -> Policy:
    """A boustrophedon path through a 2-D grid: row 0 left to right, row 1 right to left, ..."""
    k1, k2 = shape = _check_2d(shape)
    rows, cols = np.meshgrid(np.arange(k1), np.arange(k2 - 1), indexing="ij")
    u = [_grid_index(shape, rows, cols).ravel()]
    v = [_grid_index(shape, rows, cols + 1).ravel()]
    turn = np.arange(k1 - 1)
    side = np.where(turn % 2 == 0, k2 - 1, 0)
    u.append(_grid_index(shape, turn, side))
    v.append(_grid_index(shape, turn + 1, side))
    return _forest(shape, np.concatenate(u), np.concatenate(v), f"snake({shape})")


def comb(shape: Sequence[int], spine: int | None = None) -> Policy:
    """A comb on a 2-D grid: every row is a path (a tooth), joined by the spine column ``spine``
    (default: the middle column, which halves the stretch of vertical grid edges)."""
    k1, k2 = shape = _check_2d(shape)
    spine = (k2 - 1) // 2 if spine is None else check_int(spine, "spine", minimum=0)
    if spine >= k2:
        raise ValueError(f"spine must be a column index below {k2}, got {spine}")
    rows, cols = np.meshgrid(np.arange(k1), np.arange(k2 - 1), indexing="ij")
    u = [_grid_index(shape, rows, cols).ravel(), _grid_index(shape, np.arange(k1 - 1), np.full(k1 - 1, spine))]
    v = [_grid_index(shape, rows, cols + 1).ravel(), _grid_index(shape, np.arange(1, k1), np.full(k1 - 1, spine))]
    return _forest(shape, np.concatenate(u), np.concatenate(v), f"comb({shape}, spine={spine})")


def star(shape: ShapeLike, centre: int | tuple[int, ...] | _Bottom | None = None) -> Policy:
    """Every cell joined to ``centre`` (default: the middle cell; :data:`BOTTOM` gives the star
    around ⊥). ℓ <= 2 for every connected policy: the embedding of bounded DP."""
    shape = check_shape(shape)
    k = math.prod(shape)
    if centre is BOTTOM:
        return _forest(shape, np.arange(k), np.full(k, k), f"star({_fmt(shape)}, centre=BOTTOM)", has_bottom=True)
    c = _centre(shape, centre)
    cells = np.delete(np.arange(k), c)
    return _forest(shape, cells, np.full(cells.size, c), f"star({_fmt(shape)}, centre={c})")


def stars(policy: Policy) -> Policy:
    """One star per connected component of the policy, centred at ⊥ where the component has it,
    else at the component's middle cell. ℓ <= 2 for every policy; each component's total, invariant
    under the policy, is disclosed. Cliques (complete and partition policies) need no edge listing."""
    check_policy(policy)
    labels = policy.component_labels
    n = policy.num_vertices
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels)
    starts = np.cumsum(sizes) - sizes
    centre = order[starts + (sizes - 1) // 2]  # middle vertex by index; ⊥ (index K) is the last of its component
    if policy.has_bottom:
        centre[labels[policy.size]] = policy.size
    spokes = np.flatnonzero(centre[labels] != np.arange(n))
    return _forest(policy.shape, spokes, centre[labels[spokes]], f"stars({policy.name})", has_bottom=policy.has_bottom)


# -- trees of the policy graph ----------------------------------------------------------------


def _weighted(policy: Policy, weight: bool) -> sp.csr_array:
    """Symmetric adjacency with edge weights: 1, or the L1 distance of the cells (1 for ⊥ edges)."""
    e = policy.edges
    if weight:
        k = policy.size
        cu = np.stack(np.unravel_index(e[:, 0], policy.shape), axis=1)
        cv = np.stack(np.unravel_index(np.minimum(e[:, 1], k - 1), policy.shape), axis=1)
        w = np.where(e[:, 1] == k, 1, np.abs(cu - cv).sum(axis=1)).astype(np.float64)
    else:
        w = np.ones(e.shape[0])
    n = policy.num_vertices
    return sp.csr_array((w, (e[:, 0], e[:, 1])), shape=(n, n))


def _search_tree(policy: Policy, centre, name: str, weight: bool) -> Policy:
    """BFS or Dijkstra tree from ``centre``, and from the smallest vertex of every other component."""
    n = policy.num_vertices
    c = policy.vertex(centre) if centre is BOTTOM else _centre(policy.shape, centre)
    labels = policy.component_labels
    starts = np.full(policy.n_components, n, dtype=np.int64)
    np.minimum.at(starts, labels, np.arange(n))
    starts[labels[c]] = c
    adj = _weighted(policy, weight)
    hub_ = n  # a super-source joined to every start vertex
    graph = sp.csr_array(
        (np.concatenate([adj.data, np.ones(starts.size)]),
         (np.concatenate([adj.nonzero()[0], np.full(starts.size, hub_)]), np.concatenate([adj.nonzero()[1], starts]))),
        shape=(n + 1, n + 1),
    )
    from scipy.sparse import csgraph  # loads scipy.sparse.linalg: on first use only

    if weight:
        _, pred = csgraph.dijkstra(csgraph_ready(graph), directed=False, indices=hub_, return_predecessors=True)
    else:
        _, pred = csgraph.breadth_first_order(csgraph_ready(graph), hub_, directed=False, return_predecessors=True)
    child = np.flatnonzero((pred[:n] >= 0) & (pred[:n] != hub_))
    return _forest(policy.shape, child, pred[child], name, has_bottom=policy.has_bottom)


def bfs(policy: Policy, centre: int | tuple[int, ...] | _Bottom | None = None) -> Policy:
    """Breadth-first (fewest hops) tree of the policy graph from ``centre`` (default: middle cell)."""
    check_policy(policy)
    return _search_tree(policy, centre, f"bfs({policy.name}, centre={centre if centre is not None else 'middle'})", False)


def shortest_path(policy: Policy, centre: int | tuple[int, ...] | _Bottom | None = None) -> Policy:
    """Shortest-path tree of the policy graph from ``centre``, edges weighted by cell L1 distance."""
    check_policy(policy)
    return _search_tree(policy, centre, f"shortest_path({policy.name}, centre={centre if centre is not None else 'middle'})", True)


def mst(policy: Policy) -> Policy:
    """Minimum spanning forest of the policy graph, edges weighted by cell L1 distance (⊥ edges: 1)."""
    check_policy(policy)
    from scipy.sparse import csgraph  # loads scipy.sparse.linalg: on first use only
    tree = csgraph.minimum_spanning_tree(csgraph_ready(_weighted(policy, True))).tocoo()
    return _forest(policy.shape, tree.row, tree.col, f"mst({policy.name})", has_bottom=policy.has_bottom)


def candidates(policy: Policy) -> dict[str, Policy]:
    """The standard trees for a policy, by name: what the automatic route choice compares.

    Built once per policy (policies are immutable) and cached on it, so repeated releases reuse
    the same tree objects and their transforms.
    """
    check_policy(policy)
    if "tree_candidates" not in policy._cache:
        policy._cache["tree_candidates"] = _build_candidates(policy)
    return dict(policy._cache["tree_candidates"])


def _build_candidates(policy: Policy) -> dict[str, Policy]:
    """Structured trees for the domain, one star per component, and graph-search trees (BFS, MST)
    only for sparse graphs without cliques, where they can add something: on 1-D offset policies
    the MST is the line tree and the hub tree beats BFS, and on cliques the star is best."""
    shape = policy.shape
    one_d_offsets = len(shape) == 1 and policy.offset_steps() is not None
    cliques = bool(policy.cliques())
    sparse = policy.num_edges <= 16 * policy.size
    trees = {"stars": stars(policy)}
    if sparse and not (one_d_offsets or cliques):
        trees.update(bfs=bfs(policy), mst=mst(policy))
    if policy.touches_bottom:
        return trees
    trees["line"] = line(shape)
    if len(shape) == 1:
        theta = edge_span(policy)
        if theta >= 2:
            trees["hub"] = hub(shape[0], theta)
    if len(shape) == 2:
        trees["snake"] = snake(shape)
        trees["comb"] = comb(shape)
    return trees


def _line_of(policy: Policy) -> Policy:
    return line(policy.shape)


def _hub_of(policy: Policy) -> Policy:
    if policy.ndim != 1:
        raise ValueError(f"the hub tree is for 1-D policies; {policy.name} has shape {policy.shape}")
    return hub(policy.size, max(edge_span(policy), 1))


def _snake_of(policy: Policy) -> Policy:
    return snake(policy.shape)


def _comb_of(policy: Policy) -> Policy:
    return comb(policy.shape)


#: Spanning forests by name, built from a policy: the names ``tree=`` accepts, the prefixes of the
#: tree names releases report, and what errors suggest.
TREES = {
    "stars": stars, "bfs": bfs, "shortest_path": shortest_path, "mst": mst,
    "line": _line_of, "hub": _hub_of, "snake": _snake_of, "comb": _comb_of,
}


def named(policy: Policy, name: str) -> Policy:
    """The tree ``name`` of :data:`TREES` for ``policy``: the cached candidate when it is one (so
    releases share its transform), else built on demand."""
    check_policy(policy)
    if not isinstance(name, str) or name not in TREES:
        raise ValueError(f"unknown tree {name!r} for {policy.name}; known trees: {', '.join(TREES)}")
    tree = candidates(policy).get(name) or TREES[name](policy)
    if policy.touches_bottom and not tree.has_bottom:
        raise ValueError(f"tree {name!r} has no BOTTOM vertex, which {policy.name} needs; use 'stars', 'bfs' or 'mst'")
    return tree


def edge_span(policy: Policy) -> int:
    """Largest |u - v| over the cell edges of a 1-D policy (θ for a threshold graph), block by
    block without listing clique pairs; 0 when no edge joins two cells."""
    check_policy(policy)
    width = max((abs(offset[0]) for offset in policy.offsets()), default=0)
    width = max([width] + [int(cells[-1] - cells[0]) for cells in policy.cliques()])
    for u, v in policy.edge_pairs(offsets=False, bottom=False):
        width = max(width, int(np.max(v - u)))
    return width


# -- stretch ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stretch:
    """Tree distances of a policy's edges: ``maximum`` is ℓ (inf when the tree separates the two
    ends of some edge), ``histogram[d]`` counts the edges at tree distance d."""

    maximum: float
    mean: float
    histogram: np.ndarray
    disconnected: int


def _clique_diameter(rooted: RootedForest, cells: np.ndarray) -> int:
    """Largest tree distance between two of ``cells``, all in one tree component.

    Double sweep: in a tree metric the farthest cell from any cell of a set is an end of a
    diametral pair of that set, so two passes of O(|cells|) distances are exact.
    """
    first = rooted.distances(np.full(cells.size, cells[0]), cells)
    far = cells[int(np.argmax(first))]
    return int(rooted.distances(np.full(cells.size, far), cells).max())


def stretch(policy: Policy, tree: Policy, rooted: RootedForest | None = None, histogram: bool = True) -> Stretch:
    """Exact stretch of ``policy`` in the forest ``tree``: depths plus LCA by a range-minimum table
    over the DFS preorder, O(K log K + |E|). ``rooted`` may pass ``RootedForest(tree)`` if built.

    With ``histogram=False`` only ``maximum`` and ``disconnected`` are computed, and clique
    blocks cost O(clique size) by a double sweep instead of one distance per pair.
    """
    if not isinstance(policy, Policy) or not isinstance(tree, Policy):
        raise TypeError("policy and tree must both be blowfish_te Policy objects")
    if tree.size != policy.size:
        raise ValueError(f"tree {tree.name} has {tree.size} cells but policy {policy.name} has {policy.size}")
    if policy.touches_bottom and not tree.has_bottom:
        raise ValueError(f"policy {policy.name} has BOTTOM edges but tree {tree.name} has no BOTTOM vertex")
    rooted = RootedForest(tree) if rooted is None else rooted
    tree_labels = tree.component_labels
    hist = np.zeros(1, dtype=np.int64)
    total = 0.0
    disconnected = 0
    listed = list(policy.edge_pairs())
    for cells in policy.cliques():
        if histogram:  # every pair's distance
            i, j = np.triu_indices(cells.size, k=1)
            listed.append((cells[i], cells[j]))
            continue
        parts = np.bincount(np.unique(tree_labels[cells], return_inverse=True)[1])
        if parts.size > 1:  # pairs of the clique split between tree components
            disconnected += cells.size * (cells.size - 1) // 2 - int((parts * (parts - 1) // 2).sum())
            continue
        diameter = _clique_diameter(rooted, cells)
        if diameter >= hist.size:
            hist = np.concatenate([hist, np.zeros(diameter + 1 - hist.size, dtype=np.int64)])
        hist[diameter] = max(hist[diameter], 1)
    for u, v in listed:
        d = rooted.distances(u, v)
        gone = d < 0
        disconnected += int(gone.sum())
        d = d[~gone]
        total += float(d.sum())
        counts = np.bincount(d)
        if counts.size > hist.size:
            counts[: hist.size] += hist
            hist = counts
        else:
            hist[: counts.size] += counts
    n = policy.num_edges
    finite_max = int(np.flatnonzero(hist)[-1]) if hist.any() else 0
    return Stretch(
        maximum=math.inf if disconnected else finite_max,
        mean=total / max(n - disconnected, 1) if histogram else math.nan,
        histogram=hist if histogram else np.zeros(0, dtype=np.int64),
        disconnected=disconnected,
    )
