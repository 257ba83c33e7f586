"""Sensitivity of the histogram under public count constraints (He, Machanavajjhala, Ding, SIGMOD
2014, §8; the corrections are derived in ``docs/constraints.md``).

A move of one record from value x to value y *lifts* a count query q when q(x) = 0 and q(y) = 1 and
*lowers* it when q(x) = 1 and q(y) = 0 (Def. 8.1); the constraints are *sparse* for a set of moves
when every move lifts at most one query and lowers at most one (Def. 8.2). Their policy graph G_P
(Def. 8.3) has a vertex per query plus v⁺ and v⁻, an edge q → q' for a move lowering q and lifting
q', v⁺ → q' for a move that only lifts q', q → v⁻ for a move that only lowers q, and v⁺ → v⁻.
With α the longest simple cycle and ξ the longest simple v⁺ → v⁻ path of G_P, two neighbours
differ in at most L = max{α, ξ} records, so S(h, P) ≤ 2L (Thm 8.2) and, for a linear strategy A,
S(A, P) ≤ L · max over moves ‖A(e_y − e_x)‖₁.

Which moves count depends on how neighbours are read (``moves``):

- ``"any"`` — He et al.'s Def. 4.1 as written: neighbours differ in a minimal set of discriminative
  pairs, and may also move other records *off* the policy's edges to keep the constraints. Their
  moves form a minimal zero-sum set, a simple cycle or v⁺ → v⁻ path of the policy graph of *every*
  move (all pairs of values, ⊥ included when the policy has it), so that graph gives L. The
  paper's bound with the policy's own edges fails for this reading (see ``docs/constraints.md``).
- ``"edges"`` — neighbours move records along policy edges only (the reading under which the proof
  of Thm 8.2 holds): G_P from the policy's edges, as in the paper.

Finding α and ξ is NP-hard in general (Thm 8.1); :func:`histogram_sensitivity` searches exactly
with a step limit, and uses the closed forms of Thm 8.4 (one marginal, every move) and Thm 8.5
(disjoint marginals under the attribute policy, policy edges) where they are exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from .._graph import csgraph_ready
from .._validation import check_int
from ..errors import ConstraintError
from ..policies import Policy, complete
from ..sensitivity import sensitivity
from ..workloads import Workload
from .queries import Constraints

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "MAX_SEARCH_STEPS",
    "MOVES",
    "ConstrainedSensitivity",
    "PolicyGraph",
    "check_sparse",
    "critical_queries",
    "histogram_sensitivity",
    "longest_cycle",
    "longest_path",
    "policy_graph",
    "scope_patterns",
    "strategy_sensitivity",
]

#: How neighbours may move records (see the module docstring).
MOVES = ("any", "edges")
#: Default budget of the exact search for α and ξ (vertices expanded) before it gives up.
MAX_SEARCH_STEPS = 1_000_000


def _check_moves(moves: str) -> str:
    if moves not in MOVES:
        raise ValueError(f"moves must be one of {MOVES}, got {moves!r}")
    return moves


def _check_pair(constraints: Constraints, policy: Policy) -> None:
    if not isinstance(constraints, Constraints):
        raise TypeError(f"constraints must be a Constraints object, got {type(constraints).__name__}")
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy, got {type(policy).__name__}")
    if constraints.shape != policy.shape:
        raise ValueError(f"constraints are over {constraints.shape} but the policy over {policy.shape}")


def _signatures(matrix: sp.csr_array, with_bottom: bool) -> tuple[np.ndarray, sp.csr_array, np.ndarray]:
    """Group the values (cells, then ⊥ if asked) by the set of queries (rows of ``matrix``)
    containing them: the group of every value, the group × query 0/1 matrix and one
    representative value per group."""
    members = matrix.T.tocsr()
    if with_bottom:
        members = sp.vstack([members, sp.csr_array((1, matrix.shape[0]))]).tocsr()
    members.sort_indices()
    index: dict[tuple, int] = {}
    group = np.empty(members.shape[0], dtype=np.int64)
    ptr, idx = members.indptr, members.indices
    for v in range(members.shape[0]):
        group[v] = index.setdefault(tuple(idx[ptr[v]: ptr[v + 1]].tolist()), len(index))
    rows = [np.fromiter(key, dtype=np.int64, count=len(key)) for key in index]
    r = np.repeat(np.arange(len(rows)), [a.size for a in rows])
    c = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    sig = sp.csr_array((np.ones(r.size), (r, c)), shape=(len(rows), matrix.shape[0]))
    first = np.full(len(rows), -1, dtype=np.int64)
    first[group[::-1]] = np.arange(group.size)[::-1]
    return group, sig, first


def scope_patterns(constraints: Constraints) -> list[np.ndarray]:
    """The sets of queries that count one record, over all record ids: a record in the scopes of
    queries J is counted by J and by every query without a scope. Records in no scope (assumed to
    exist) are counted by the unscoped queries only."""
    p = constraints.num_queries
    everyone = [j for j in range(p) if constraints.scopes[j] is None]
    if len(everyone) == p:
        return [np.arange(p)]
    owners: dict[object, list[int]] = {}
    for j, scope in enumerate(constraints.scopes):
        for record in scope or ():
            owners.setdefault(record, []).append(j)
    patterns = {tuple(everyone)} | {tuple(sorted(everyone + js)) for js in owners.values()}
    return [np.array(pat, dtype=np.int64) for pat in sorted(patterns)]


def _all_pairs(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g = np.unique(groups)
    i, j = np.triu_indices(g.size, k=1)
    return g[i], g[j]


def _group_pairs(policy: Policy, moves: str, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct unordered pairs of value groups joined by a move (a policy edge, or any pair)."""
    if moves == "any":
        return _all_pairs(group)
    a, b = [], []
    for cells in policy.cliques():
        ga, gb = _all_pairs(group[cells])
        a.append(ga)
        b.append(gb)
    for u, v in policy.edge_pairs():
        a.append(group[u])
        b.append(group[v])
    ga, gb = np.concatenate(a), np.concatenate(b)
    lo, hi = np.minimum(ga, gb), np.maximum(ga, gb)
    keep = lo != hi
    key = np.unique(lo[keep] * (group.max() + 1) + hi[keep])
    return key // (group.max() + 1), key % (group.max() + 1)


@dataclass(frozen=True)
class PolicyGraph:
    """G_P: vertices 0..p−1 are the queries, p is v⁺ and p+1 is v⁻; ``edges`` is an (E, 2) array
    of distinct directed edges (v⁺ → v⁻ included). ``moves`` says which moves built it."""

    num_queries: int
    edges: np.ndarray
    names: tuple[str, ...]
    moves: str

    @property
    def source(self) -> int:
        return self.num_queries

    @property
    def sink(self) -> int:
        return self.num_queries + 1

    def label(self, v: int) -> str:
        return "v+" if v == self.source else "v-" if v == self.sink else self.names[v]

    def successors(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.num_queries + 2)]
        for s, t in self.edges.tolist():
            out[s].append(t)
        return out

    def to_networkx(self) -> nx.DiGraph:
        """The graph as a ``networkx.DiGraph`` whose nodes are the query names, ``"v+"`` and ``"v-"``."""
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(self.label(v) for v in range(self.num_queries + 2))
        g.add_edges_from((self.label(s), self.label(t)) for s, t in self.edges.tolist())
        return g


def _lift_lower(sig: sp.csr_array, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For moves from group a to group b: how many queries each lifts and lowers, and which
    (−1 for none; meaningful where the count is 1)."""
    diff = (sig[b] - sig[a]).tocoo()
    n = a.size
    up, down = diff.data > 0, diff.data < 0
    lifts = np.bincount(diff.row[up], minlength=n)
    lowers = np.bincount(diff.row[down], minlength=n)
    lifted = np.full(n, -1, dtype=np.int64)
    lowered = np.full(n, -1, dtype=np.int64)
    lifted[diff.row[up]] = diff.col[up]
    lowered[diff.row[down]] = diff.col[down]
    return lifts, lowers, lifted, lowered


def _value_name(policy: Policy, v: int) -> str:
    if v == policy.size:
        return "⊥"
    return str(v) if policy.ndim == 1 else str(tuple(int(c) for c in np.unravel_index(v, policy.shape)))


def check_sparse(constraints: Constraints, policy: Policy, moves: str = "edges") -> None:
    """Raise :class:`~blowfish_te.errors.ConstraintError` unless every move (policy edges, or every
    pair of values with ``moves="any"``) lifts at most one query and lowers at most one
    (He et al. Def. 8.2); the message names a move that breaks it and the queries it changes."""
    policy_graph(constraints, policy, moves)


def policy_graph(constraints: Constraints, policy: Policy, moves: str = "edges") -> PolicyGraph:
    """The policy graph G_P of Def. 8.3, built from the policy's edges (``moves="edges"``) or from
    every move between values (``"any"``); refuses constraints that are not sparse for those moves.

    With record scopes, a move of a record changes only the queries that count that record: the
    graph is the union over the records' query sets (:func:`scope_patterns`).
    Values with the same queries behave alike, so the work is over pairs of such groups: O(|E|)
    for policy edges (a clique block costs its distinct groups squared), groups squared for any move.
    """
    _check_pair(constraints, policy)
    moves = _check_moves(moves)
    p = constraints.num_queries
    plus, minus = p, p + 1
    edges = [np.array([[plus, minus]], dtype=np.int64)]
    for rows in scope_patterns(constraints):
        if rows.size == 0:
            continue
        group, sig, first = _signatures(constraints.matrix[rows], policy.has_bottom)
        a, b = _group_pairs(policy, moves, group)
        lifts, lowers, lifted, lowered = _lift_lower(sig, a, b)
        bad = np.flatnonzero((lifts > 1) | (lowers > 1))
        if bad.size:
            i = int(bad[0])
            x, y = int(first[a[i]]), int(first[b[i]])
            row = (sig[b[i : i + 1]] - sig[a[i : i + 1]]).tocoo()
            up = [constraints.names[rows[c]] for c, d in zip(row.col, row.data) if d > 0]
            down = [constraints.names[rows[c]] for c, d in zip(row.col, row.data) if d < 0]
            what = "a policy edge" if moves == "edges" else "a move"
            raise ConstraintError(
                f"the constraints are not sparse for {policy.name} (He et al. Def. 8.2): moving a record from "
                f"{_value_name(policy, x)} to {_value_name(policy, y)} ({what}) lifts {len(up)} queries {up} and lowers "
                f"{len(down)} {down}, but each move may lift at most one and lower at most one. Their sensitivity has "
                "no closed bound (NP-hard in general, Thm 8.1); use fewer or disjoint constraints"
                + ("" if moves == "edges" else ", or moves='edges' if neighbours move records along policy edges only")
            )
        lifted = np.where(lifted >= 0, rows[np.maximum(lifted, 0)], -1)
        lowered = np.where(lowered >= 0, rows[np.maximum(lowered, 0)], -1)
        edges.append(np.stack([np.where(lowered >= 0, lowered, plus), np.where(lifted >= 0, lifted, minus)], axis=1))
        edges.append(np.stack([np.where(lifted >= 0, lifted, plus), np.where(lowered >= 0, lowered, minus)], axis=1))
    return PolicyGraph(p, np.unique(np.concatenate(edges), axis=0), constraints.names, moves)


def critical_queries(constraints: Constraints, policy: Policy) -> np.ndarray:
    """Which queries some policy edge changes — the queries with critical secret pairs (He et al.
    §4.1: a discriminative pair whose single change breaks the query). Needs no sparsity."""
    _check_pair(constraints, policy)
    group, sig, _ = _signatures(constraints.matrix, policy.has_bottom)
    a, b = _group_pairs(policy, "edges", group)
    changed = np.zeros(constraints.num_queries, dtype=bool)
    diff = (sig[b] - sig[a]).tocoo()
    changed[diff.col[diff.data != 0]] = True
    return changed


class _Search:
    """Depth-first search for the longest simple cycle / v⁺ → v⁻ path with a step budget; it
    stops as soon as the best reaches its upper bound (every allowed vertex), which is immediate on
    the dense graphs of marginals and disjoint queries."""

    def __init__(self, succ: list[list[int]], max_steps: int, what: str):
        self.succ, self.max_steps, self.what, self.steps = succ, max_steps, what, 0

    def _tick(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise ConstraintError(
                f"the exact search for {self.what} of the constraints' policy graph stopped after "
                f"max_steps={self.max_steps} steps (longest simple cycles and paths are NP-hard, He et al. Thm 8.1). "
                "Pass a larger max_steps, or use constraints with a closed form (one marginal with every move; "
                "disjoint marginals under the attribute policy with moves='edges')"
            )

    def longest(self, start: int, allowed: set[int], closes, bound: int, best: int) -> tuple[int, list[int]]:
        """Longest walk start → ... → (a vertex ``closes`` accepts) through distinct ``allowed``
        vertices, counted in edges including the closing one; only results above ``best`` are kept."""
        best_path: list[int] = []
        path, on_path = [start], {start}
        stack = [iter(self.succ[start])]
        while stack:
            self._tick()
            v = path[-1]
            if closes(v) and len(path) > best:
                best, best_path = len(path), list(path)
                if best >= bound:
                    break
            advanced = False
            for w in stack[-1]:
                if w in allowed and w not in on_path:
                    path.append(w)
                    on_path.add(w)
                    stack.append(iter(self.succ[w]))
                    advanced = True
                    break
            if not advanced:
                stack.pop()
                on_path.discard(path.pop())
        return best, best_path


def _strong_components(graph: PolicyGraph) -> list[np.ndarray]:
    n = graph.num_queries + 2
    adj = sp.csr_array((np.ones(len(graph.edges)), (graph.edges[:, 0], graph.edges[:, 1])), shape=(n, n))
    count, labels = csgraph.connected_components(csgraph_ready(adj), directed=True, connection="strong")
    comps = [np.flatnonzero(labels == c) for c in range(count)]
    return sorted((c for c in comps if c.size > 1), key=len, reverse=True)


def longest_cycle(graph: PolicyGraph, max_steps: int = MAX_SEARCH_STEPS) -> tuple[int, list[int]]:
    """α(G_P): the number of edges of a longest simple directed cycle (0 if there is none) and its
    vertices; exact, by search inside each strongly connected component."""
    max_steps = check_int(max_steps, "max_steps", minimum=1)
    succ = graph.successors()
    search = _Search(succ, max_steps, "the longest cycle (α)")
    best, cycle = 0, []
    for comp in _strong_components(graph):
        if comp.size <= best:
            break
        members = comp.tolist()
        for i, s in enumerate(members):
            allowed = set(members[i:])
            if len(allowed) <= best:
                break
            length, walk = search.longest(s, allowed, lambda v, s=s: s in succ[v], len(allowed), best)
            if length > best:
                best, cycle = length, walk
            if best == comp.size:
                break
    return best, cycle


def longest_path(graph: PolicyGraph, max_steps: int = MAX_SEARCH_STEPS) -> tuple[int, list[int]]:
    """ξ(G_P): the number of edges of a longest simple v⁺ → v⁻ path and its vertices (at least 1,
    the edge v⁺ → v⁻); exact, by search over the queries reachable from v⁺ that reach v⁻."""
    max_steps = check_int(max_steps, "max_steps", minimum=1)
    n = graph.num_queries + 2
    adj = sp.csr_array((np.ones(len(graph.edges)), (graph.edges[:, 0], graph.edges[:, 1])), shape=(n, n))
    ahead = csgraph.breadth_first_order(csgraph_ready(adj), graph.source, directed=True, return_predecessors=False)
    behind = csgraph.breadth_first_order(csgraph_ready(adj.T), graph.sink, directed=True, return_predecessors=False)
    allowed = (set(ahead.tolist()) & set(behind.tolist())) - {graph.source, graph.sink}
    succ = graph.successors()
    search = _Search(succ, max_steps, "the longest v+ → v- path (ξ)")
    sink = graph.sink
    # a path of j queries has j + 1 edges; "closing" means the last vertex has an edge into v⁻
    length, walk = search.longest(graph.source, allowed, lambda v: sink in succ[v], len(allowed) + 1, 0)
    return max(length, 1), (walk + [sink] if walk else [graph.source, sink])


@dataclass(frozen=True)
class ConstrainedSensitivity:
    """The bound of Thm 8.2: neighbours under the constraints move at most ``records`` = max{α, ξ}
    records, so the histogram's L1 sensitivity is at most ``value`` = 2·max{α, ξ}.

    ``method`` says how α and ξ were found (exact search or a closed form), ``witness`` a longest
    cycle or path as query names, ``moves`` the reading of the neighbour relation."""

    alpha: int
    xi: int
    moves: str
    method: str
    witness: tuple[str, ...]

    @property
    def records(self) -> int:
        return max(self.alpha, self.xi)

    @property
    def value(self) -> float:
        return 2.0 * self.records

    def __str__(self) -> str:
        return (f"S(h, P) <= 2·max(α={self.alpha}, ξ={self.xi}) = {self.value:g} ({self.method}; moves={self.moves!r}; "
                f"witness {' → '.join(self.witness)})")


def _gray_path(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every value combination of ``shape``, one coordinate changing per step (the reflected
    mixed-radix Gray code): a Hamiltonian path of the Hamming graph, not always a cycle."""
    order = [()]
    for k in shape:
        nxt = []
        for j, prefix in enumerate(order):
            values = range(k) if j % 2 == 0 else range(k - 1, -1, -1)
            nxt.extend(prefix + (v,) for v in values)
        order = nxt
    return order


def _hamiltonian_order(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """A cycle through every value combination of ``shape`` changing one coordinate per step,
    from (0, …, 0). With k > 1 values in the first coordinate: the others along the Gray path R
    with the first at 0, then back along R visiting the first coordinate's values 1 … k−1 at each
    stop (any two values of one coordinate differ in one step), so the last combination (v, R₀)
    closes to (0, R₀) in one step. (The Gray code alone does not close: on 3 × 3 it ends at (2, 2).)"""
    if not shape:
        return [()]
    k, rest = shape[0], shape[1:]
    if k == 1:
        return [(0,) + combination for combination in _hamiltonian_order(rest)]
    path = _gray_path(rest)
    order = [(0,) + combination for combination in path]
    values = list(range(1, k))
    for j, combination in enumerate(reversed(path)):
        order.extend((v,) + combination for v in (values if j % 2 == 0 else values[::-1]))
    return order


def _closed_form(constraints: Constraints, policy: Policy, moves: str) -> ConstrainedSensitivity | None:
    """Thm 8.4 (one marginal [C] ⊊ A, every move between cells: G_P is the complete digraph on the
    size(C) queries, α = size(C), ξ = 1) and Thm 8.5 (disjoint marginals under G_attr along its
    edges: G_P is a union of Hamming graphs, each with a Hamiltonian cycle, α = max size(C_i),
    ξ = 1). Both give 2·max{α, ξ} exactly as the search would; None where neither applies."""
    if constraints.structure is None or constraints.structure[0] != "marginals":
        return None
    subsets = constraints.structure[1]
    shape = constraints.shape
    if any(len(s) == len(shape) for s in subsets):
        return None
    every_move = moves == "any" and not policy.has_bottom or policy.is_complete
    if every_move and len(subsets) == 1:
        theorem, sizes = "Thm 8.4", [math.prod(shape[i] for i in subsets[0])]
    elif moves == "edges" and policy.is_attribute and len({a for s in subsets for a in s}) == sum(map(len, subsets)):
        theorem, sizes = "Thm 8.5", [math.prod(shape[i] for i in s) for s in subsets]
    else:
        return None
    j = int(np.argmax(sizes))
    if sizes[j] < 2:
        return ConstrainedSensitivity(0, 1, moves, f"closed form ({theorem})", ("v+", "v-"))
    offset = sum(sizes[:j])
    sub = subsets[j]
    order = _hamiltonian_order(tuple(shape[i] for i in sub))
    # query index of a value combination: row-major over the marginal's axes, after earlier marginals
    cycle = [constraints.names[offset + int(np.ravel_multi_index(c, tuple(shape[i] for i in sub)))] for c in order]
    return ConstrainedSensitivity(sizes[j], 1, moves, f"closed form ({theorem})", tuple(cycle + cycle[:1]))


def histogram_sensitivity(
    constraints: Constraints, policy: Policy, moves: str = "any", max_steps: int = MAX_SEARCH_STEPS
) -> ConstrainedSensitivity:
    """S(h, P) ≤ 2·max{α(G_P), ξ(G_P)} for the histogram under ``policy`` with the public
    ``constraints`` (He et al. Thm 8.2, with G_P built from the moves of ``moves``; see the module
    docstring). Closed forms where they are exact, else exact search (at most ``max_steps``)."""
    graph = policy_graph(constraints, policy, moves)
    closed = _closed_form(constraints, policy, moves)
    if closed is not None:
        return closed
    alpha, cycle = longest_cycle(graph, max_steps)
    xi, path = longest_path(graph, max_steps)
    witness = cycle + cycle[:1] if alpha >= xi else path
    return ConstrainedSensitivity(alpha, xi, moves, "exact search", tuple(graph.label(v) for v in witness))


def move_sensitivity(strategy: Workload, policy: Policy, moves: str) -> float:
    """max over single moves of ‖A(e_y − e_x)‖₁: the policy's edges (Δ_G(A)), or every pair of
    values (bounded DP's Δ, and ‖A e_x‖₁ too when the policy has ⊥)."""
    if moves == "edges":
        return float(sensitivity(strategy, policy))
    delta = float(sensitivity(strategy, complete(policy.shape))) if policy.size > 1 else 0.0
    if policy.has_bottom:
        delta = max(delta, float(strategy.column_norms("l1").max()))
    return delta


def strategy_sensitivity(
    strategy: Workload, constraints: Constraints, policy: Policy, moves: str = "any", max_steps: int = MAX_SEARCH_STEPS
) -> tuple[float, ConstrainedSensitivity]:
    """L1 sensitivity of a linear strategy A under the constraints: neighbours differ by at most
    L = max{α, ξ} moves, each changing A h by at most Δ_moves(A), so S(A, P) ≤ L·Δ_moves(A)
    (for A = I, Δ = 2 and this is Thm 8.2). Returns the bound and the histogram analysis."""
    hist = histogram_sensitivity(constraints, policy, moves, max_steps)
    return hist.records * move_sensitivity(strategy, policy, moves), hist
