"""Neighbouring histograms for the auditor (He, Machanavajjhala, Ding, SIGMOD 2014).

A pair (x, y) moves one record from u to v: y = x - e_u + e_v, where ⊥ (index K) stands for "no
record", so u = ⊥ adds a record and v = ⊥ removes one. For an edge (u, v) of the policy G the pair
is a G-neighbour pair and an (ε, G)-Blowfish mechanism keeps every event's probability ratio
below e^ε; for vertices at graph distance d the bound is e^{ε·d} (group privacy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csgraph

from .._graph import csgraph_ready
from .._validation import check_histogram, check_int, check_shape
from ..forest import RootedForest
from ..noise import RNGLike, check_rng
from ..policies import BOTTOM, Policy

__all__ = ["KINDS", "NeighbourPair", "default_histogram", "make_pair", "neighbour_pairs"]

#: Pair generators of :func:`neighbour_pairs`, in the order they are tried.
KINDS = ("boundary", "tree", "partition", "mass", "single", "random", "scale")
#: The "scale" pairs put log-uniform counts up to this many records on the two moved cells.
MAX_SCALE_COUNT = 2**20

#: Largest number of vertices for which pairs at distance >= 2 are listed (all-pairs BFS).
MAX_DISTANCE_VERTICES = 4096

#: Records piled on one cell by the ``"mass"`` generator.
MASS = 100


@dataclass(frozen=True, eq=False)
class NeighbourPair:
    """Histograms x and y = x - e_u + e_v (index K = ⊥: no record), d_G(u, v) and the generator."""

    x: np.ndarray
    y: np.ndarray
    u: int
    v: int
    distance: float
    kind: str

    @property
    def move(self) -> str:
        """The move as text, e.g. ``"3 → 4"`` or ``"5 → ⊥"`` (a removal)."""
        k = self.x.size
        return " → ".join("⊥" if a == k else str(a) for a in (self.u, self.v))


def _vertex(policy: Policy, index: int):
    return BOTTOM if index == policy.size else index


def make_pair(policy: Policy, x: np.ndarray, u: int, v: int, kind: str = "custom") -> NeighbourPair:
    """The pair (x, x - e_u + e_v) with its policy distance d_G(u, v); u or v = K is ⊥."""
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a blowfish_te Policy, got {type(policy).__name__}")
    x = check_histogram(x, policy.shape)
    k = policy.size
    top = k if policy.has_bottom else k - 1
    u, v = check_int(u, "u", minimum=0), check_int(v, "v", minimum=0)
    for name, value in (("u", u), ("v", v)):
        if value > top:
            raise ValueError(
                f"{name}={value} is not a vertex of {policy.name}: cells are 0..{k - 1}"
                + (f" and {k} is BOTTOM" if policy.has_bottom else " (no BOTTOM vertex)")
            )
    if u == v:
        raise ValueError(f"u and v must differ, got u = v = {u}: a record moving to its own value is not a change")
    if u < k and x[u] < 1:
        raise ValueError(f"x[{u}] = 0: there is no record at cell u={u} to move")
    y = x.copy()
    if u < k:
        y[u] -= 1
    if v < k:
        y[v] += 1
    for arr in (x, y):
        arr.flags.writeable = False
    distance = policy.distance(_vertex(policy, u), _vertex(policy, v))
    return NeighbourPair(x, y, u, v, float(distance), kind)


def default_histogram(shape: int | tuple[int, ...], rng: RNGLike = 0) -> np.ndarray:
    """A histogram with runs of 1-3 equal counts drawn from {0, 1, 4, 16, 64}: jumps and empty
    cells, where data-dependent partitions put their bucket boundaries. Flat, int64."""
    gen = check_rng(rng)
    k = math.prod(check_shape(shape))
    levels = np.array([0, 1, 4, 16, 64])
    lengths = gen.integers(1, 4, size=k)
    values = np.repeat(gen.choice(levels, size=k), lengths)[:k]
    values[gen.integers(k)] = 0  # at least one empty cell
    values[gen.integers(k)] = 16  # and at least one cell with records
    return values.astype(np.int64)


def _candidates(policy: Policy, distance: int) -> tuple[np.ndarray, np.ndarray]:
    """Vertex pairs (a < b, ⊥ = K) at policy distance ``distance``: the edges when it is 1."""
    if distance == 1:
        e = policy.edges
        return e[:, 0].copy(), e[:, 1].copy()
    if policy.num_vertices > MAX_DISTANCE_VERTICES:
        raise ValueError(
            f"pairs at distance {distance} need all-pairs distances; {policy.name} has {policy.num_vertices} "
            f"vertices (limit {MAX_DISTANCE_VERTICES})"
        )
    dist = csgraph.shortest_path(csgraph_ready(policy.adjacency()), method="D", unweighted=True)
    a, b = np.nonzero(np.triu(dist == distance, k=1))
    return a.astype(np.int64), b.astype(np.int64)


def _oriented(x: np.ndarray, a: int, b: int, k: int) -> tuple[np.ndarray, int, int]:
    """(x, u, v) moving a record between a and b (b may be ⊥) that x can make: from a if it has
    one, else from b, else add one (from ⊥) or first place a record at a."""
    if x[a] >= 1:
        return x, a, b
    if b < k and x[b] >= 1:
        return x, b, a
    if b == k:
        return x, k, a
    placed = x.copy()
    placed[a] += 1
    return placed, a, b


def _round_robin(lists: list[np.ndarray]) -> list[int]:
    """Distinct indices, taken in turn from the front of each list."""
    chosen: dict[int, None] = {}
    for depth in range(max((len(li) for li in lists), default=0)):
        for li in lists:
            if depth < len(li):
                chosen.setdefault(int(li[depth]))
    return list(chosen)


def neighbour_pairs(
    policy: Policy,
    x: np.ndarray | None = None,
    *,
    kinds: Sequence[str] = KINDS,
    per_kind: int = 1,
    distance: int = 1,
    tree: Policy | None = None,
    rng: RNGLike = 0,
) -> list[NeighbourPair]:
    """Pairs of histograms one record move apart, across vertex pairs of G at ``distance``
    (1: the edges), chosen where a mechanism is most likely to leak; ``per_kind`` of each kind:

    - ``"boundary"``: moves at the domain's corners (first and last cell in 1-D);
    - ``"tree"``: with a spanning ``tree`` T of a cyclic policy, the moves of largest tree distance
      d_T (the stretch ℓ) and moves along T's edges at its highest-degree vertex (the hub);
    - ``"partition"``: moves across the largest jumps |x_a - x_b| of x, where data-dependent
      partitions put bucket boundaries (for (a, ⊥): the jump from a to the next cell);
    - ``"mass"``: ``MASS`` records on one cell, all other cells empty, one record moved off it;
    - ``"single"``: one record alone, moved (or removed, under ⊥);
    - ``"random"``: uniformly chosen moves on x;
    - ``"scale"``: moves on x whose two cells first get log-uniform counts up to
      :data:`MAX_SCALE_COUNT`, so that pairs cross count thresholds at every scale (a mechanism
      that behaves differently above some count is seen there, not on small histograms).

    ``x`` defaults to :func:`default_histogram`. Identical pairs are listed once, under the first
    kind that finds them; later kinds take their next candidates.
    """
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a blowfish_te Policy, got {type(policy).__name__}")
    kinds = tuple(kinds)
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown or not kinds:
        raise ValueError(f"kinds must be a non-empty selection of {KINDS}, got {kinds!r}")
    per_kind = check_int(per_kind, "per_kind", minimum=1)
    distance = check_int(distance, "distance", minimum=1)
    if tree is not None and (not isinstance(tree, Policy) or not tree.is_forest or tree.size != policy.size):
        raise ValueError(f"tree must be a forest Policy over the {policy.size} cells of {policy.name}")
    gen = check_rng(rng)
    k = policy.size
    base = default_histogram(policy.shape, gen) if x is None else check_histogram(x, policy.shape)
    a, b = _candidates(policy, distance)
    if a.size == 0:
        return []
    order = np.arange(a.size)

    def ranked(kind: str) -> list[int]:
        """Candidate indices for ``kind``, best first."""
        if kind == "boundary":
            ends = np.meshgrid(*[[0, s - 1] for s in policy.shape], indexing="ij")
            corners = np.ravel_multi_index(tuple(e.ravel() for e in ends), policy.shape)
            return _round_robin([order[(a == c) | (b == c)] for c in dict.fromkeys(corners.tolist())])
        if kind == "tree":
            if tree is None or tree is policy:
                return []
            d_tree = RootedForest(tree).distances(a, b)
            degree = np.bincount(tree.edges.reshape(-1), minlength=tree.num_vertices)
            hub = int(np.argmax(degree))
            spokes = order[(d_tree == 1) & ((a == hub) | (b == hub))]
            return _round_robin([order[np.argsort(-d_tree, kind="stable")], spokes])
        if kind == "partition":
            successor = np.where(a + 1 < k, a + 1, a - 1).clip(0, k - 1)
            other = np.where(b < k, base[np.minimum(b, k - 1)], base[successor])
            return order[np.argsort(-np.abs(base[a] - other), kind="stable")].tolist()
        return gen.permutation(a.size).tolist()

    pairs: list[NeighbourPair] = []
    seen: set[tuple[bytes, bytes]] = set()
    for kind in kinds:
        added = 0
        for i in ranked(kind):
            hist = base
            if kind in ("mass", "single"):  # a histogram built around the moved record
                hist = np.zeros(k, dtype=np.int64)
                hist[a[i]] = MASS if kind == "mass" else 1
            elif kind == "scale":
                hist = base.copy()
                for cell in (a[i], b[i]):
                    if cell < k:
                        hist[cell] = int(np.exp(gen.uniform(0.0, math.log(MAX_SCALE_COUNT))))
            hist, u, v = _oriented(hist, int(a[i]), int(b[i]), k)
            pair = make_pair(policy, hist, u, v, kind)
            key = (pair.x.tobytes(), pair.y.tobytes())
            if key not in seen:
                seen.add(key)
                pairs.append(pair)
                added += 1
                if added == per_kind:
                    break
    return pairs
