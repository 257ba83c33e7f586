"""The policy graph of public count constraints and the sensitivities built on it
(``blowfish_te.constraints.graph``; He, Machanavajjhala, Ding, SIGMOD 2014, §8 and
docs/constraints.md), each against an oracle written from the definitions on tiny domains:
lifts/lowers and sparsity (Def. 8.1, 8.2), the graph G_P (Def. 8.3), critical queries (§4.1), the
single-move sensitivity max ‖A(e_y − e_x)‖₁, the closed forms (Thm 8.4, 8.5) and the strategy bound
S(A, P) ≤ max{α, ξ}·Δ against every pair of neighbouring databases (Def. 4.1, read both ways)."""

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blowfish_te import constraints as C
from blowfish_te import policies as P
from blowfish_te import workloads as W
from blowfish_te.constraints import graph as G
from blowfish_te.errors import ConstraintError


# -- oracles from the definitions -----------------------------------------------------------------
def _num_values(policy):
    return policy.size + int(policy.has_bottom)  # ⊥ is the value K, in no query


def _membership(policy, Q):
    """values × queries 0/1: q(v) for every value (⊥ counted by none)."""
    m = np.zeros((_num_values(policy), Q.num_queries), dtype=np.int64)
    m[: policy.size] = Q.matrix.toarray().T.astype(np.int64)
    return m


def _edge_matrix(policy):
    v = _num_values(policy)
    e = np.zeros((v, v), dtype=bool)
    for a, b in policy.edges.tolist():
        e[a, b] = e[b, a] = True
    return e


def _moves(policy, moves):
    """Ordered moves x → y: along the policy's edges, or between any two values."""
    v = _num_values(policy)
    edge = _edge_matrix(policy)
    return [(x, y) for x in range(v) for y in range(v) if x != y and (moves == "any" or edge[x, y])]


def _lift_lower(member, x, y):
    d = member[y] - member[x]
    return np.flatnonzero(d > 0).tolist(), np.flatnonzero(d < 0).tolist()


def _is_sparse(policy, Q, moves):
    """Def. 8.2: every move lifts at most one query and lowers at most one."""
    member = _membership(policy, Q)
    return all(len(up) <= 1 and len(down) <= 1 for up, down in (_lift_lower(member, x, y) for x, y in _moves(policy, moves)))


def _hand_graph(policy, Q, moves):
    """Def. 8.3 by hand: q → q' for a move lowering q and lifting q', v⁺ → q' for a move only
    lifting q', q → v⁻ for a move only lowering q, and v⁺ → v⁻."""
    member = _membership(policy, Q)
    names = list(Q.names)
    g = nx.DiGraph()
    g.add_nodes_from(names + ["v+", "v-"])
    g.add_edge("v+", "v-")
    for x, y in _moves(policy, moves):
        up, down = _lift_lower(member, x, y)
        if up or down:
            g.add_edge(names[down[0]] if down else "v+", names[up[0]] if up else "v-")
    return g


def _brute_alpha_xi(g):
    alpha = max((len(c) for c in nx.simple_cycles(g)), default=0)
    xi = max(len(p) - 1 for p in nx.all_simple_paths(g, "v+", "v-"))
    return alpha, xi


def _brute_move_sensitivity(dense, policy, moves):
    """max over single moves of ‖A(e_y − e_x)‖₁, with e_⊥ = 0."""
    k = policy.size
    basis = np.vstack([np.eye(k), np.zeros((1, k))])
    return max((float(np.abs(dense @ (basis[y] - basis[x])).sum()) for x, y in _moves(policy, moves)), default=0.0)


def _neighbour_pairs(policy, Q, n, moves):
    """Every pair (D1, D2) of n-record databases (ids 0..n−1, ⊥ for an absent record) with the same
    public counts that are neighbours per Def. 4.1: T(D1, D2), the changed records whose move is a
    policy edge, is non-empty, (a) no D3 satisfying Q has a non-empty T(D1, D3) ⊊ T(D1, D2) and
    (b) none has T(D1, D3) = T(D1, D2) with fewer changes. With moves="edges" every change must be a
    policy edge (for D2 and D3 alike)."""
    member, edge = _membership(policy, Q), _edge_matrix(policy)
    dbs = list(itertools.product(range(_num_values(policy)), repeat=n))
    classes = {}
    for d in dbs:
        classes.setdefault(tuple(member[list(d)].sum(axis=0)), []).append(d)
    for members in classes.values():
        for d1 in members:
            diffs = []
            for d in members:
                changed = frozenset((i, d[i]) for i in range(n) if d[i] != d1[i])
                t = frozenset((i, v) for i, v in changed if edge[d1[i], v])
                if moves == "edges" and t != changed:
                    continue
                diffs.append((d, t, changed))
            for d2, t2, c2 in diffs:
                if not t2:
                    continue
                if any(t3 and t3 < t2 for _, t3, _ in diffs):
                    continue
                if any(t3 == t2 and c3 < c2 for _, t3, c3 in diffs):
                    continue
                yield d1, d2


def _hist(d, k):
    return np.bincount([v for v in d if v < k], minlength=k)


# -- sparsity (Def. 8.2) -----------------------------------------------------------------------
def _policy(kind, k):
    return {"complete": P.complete(k), "line": P.line(k), "unbounded": P.unbounded(k),
            "star": P.from_edges(k, [(0, j) for j in range(1, k)]), "pair": P.from_edges(k, [(0, 1)]),
            "bottom-star": P.from_edges(k, [(0, k)] + [(0, j) for j in range(1, k)])}[kind]


@st.composite
def instances(draw):
    k = draw(st.integers(2, 4))
    policy = _policy(draw(st.sampled_from(["complete", "line", "unbounded", "star", "pair", "bottom-star"])), k)
    sets = draw(st.lists(st.sets(st.integers(0, k - 1), min_size=1), min_size=1, max_size=3))
    return policy, C.count_queries(k, [sorted(s) for s in sets])


@settings(max_examples=60, deadline=None)
@given(instances(), st.sampled_from(["any", "edges"]))
def test_check_sparse_agrees_with_the_definition(instance, moves):
    policy, Q = instance
    sparse = _is_sparse(policy, Q, moves)
    if sparse:
        assert G.check_sparse(Q, policy, moves) is None
    else:
        with pytest.raises(ConstraintError, match="not sparse"):
            G.check_sparse(Q, policy, moves)
    if moves == "edges":  # the default reads the policy's edges
        if sparse:
            assert G.check_sparse(Q, policy) is None
        else:
            with pytest.raises(ConstraintError, match="not sparse"):
                G.check_sparse(Q, policy)


_NOT_SPARSE = ("the constraints are not sparse for line(3) (He et al. Def. 8.2): moving a record from 0 to 1 ({what}) "
               "lifts 2 queries ['q1', 'q2'] and lowers 1 ['q0'], but each move may lift at most one and lower at most "
               "one. Their sensitivity has no closed bound (NP-hard in general, Thm 8.1); use fewer or disjoint constraints")


@pytest.mark.parametrize("moves, what, hint", [
    ("edges", "a policy edge", ""),
    ("any", "a move", ", or moves='edges' if neighbours move records along policy edges only"),
])
def test_the_refusal_names_the_move_and_exactly_the_queries_it_lifts_and_lowers(moves, what, hint):
    """Moving a record 0 → 1 lowers {0}, lifts {1} and {1, 2}, and leaves {0, 1} unchanged."""
    Q = C.count_queries(3, [[0], [1], [1, 2], [0, 1]])
    message = _NOT_SPARSE.format(what=what) + hint
    with pytest.raises(ConstraintError) as refused:
        C.policy_graph(Q, P.line(3), moves)
    assert str(refused.value) == message


@pytest.mark.parametrize("moves", ["edges", "any"])
def test_the_policy_graph_lists_each_edge_once_in_order_and_keeps_its_moves(moves):
    """Two disjoint queries over a line: a move inside one changes nothing (the edge v⁺ → v⁻, found
    again for every such move), a move between them lowers one and lifts the other (both directions)."""
    g = C.policy_graph(C.count_queries(4, [[0, 1], [2, 3]]), P.line(4), moves)
    assert g.edges.tolist() == [[0, 1], [1, 0], [2, 3]] and g.edges.dtype == np.int64
    assert g.moves == moves and g.names == ("q0", "q1")


@pytest.mark.parametrize("build", [C.policy_graph, C.critical_queries, G.check_sparse])
def test_the_pair_of_constraints_and_policy_is_checked_by_name(build):
    Q = C.count_queries(3, [[0, 1]])
    with pytest.raises(TypeError) as refused:
        build([[0, 1]], P.line(3))
    assert str(refused.value) == "constraints must be a Constraints object, got list"
    with pytest.raises(TypeError) as refused:
        build(Q, "line")
    assert str(refused.value) == "policy must be a Policy, got str"
    with pytest.raises(ValueError) as refused:
        build(Q, P.line(4))
    assert str(refused.value) == "constraints are over (3,) but the policy over (4,)"


def test_check_sparse_reads_the_moves_it_is_given():
    """[0, 1] and [1] under the single edge 0–1: that edge lifts or lowers one query, but the move
    1 → 2 (not an edge) lowers both."""
    Q = C.count_queries(3, [[0, 1], [1]])
    policy = P.from_edges(3, [(0, 1)])
    assert _is_sparse(policy, Q, "edges") and not _is_sparse(policy, Q, "any")
    assert G.check_sparse(Q, policy) is None
    assert G.check_sparse(Q, policy, "edges") is None
    with pytest.raises(ConstraintError, match=r"moving a record from 1 to 2 \(a move\) lifts 0 queries \[\] and lowers 2"):
        G.check_sparse(Q, policy, "any")


def test_non_sparse_messages_name_the_values_of_the_move():
    with pytest.raises(ConstraintError, match=r"moving a record from 0 to ⊥ \(a policy edge\) lifts 0 queries \[\] and lowers 2"):
        G.check_sparse(C.count_queries(2, [[0], [0, 1]]), P.unbounded(2))
    with pytest.raises(ConstraintError, match=r"moving a record from \(0, 0\) to \(1, 1\) \(a policy edge\) lifts 2"):
        G.check_sparse(C.marginals((3, 3), [(0,), (1,)]), P.complete((3, 3)))
    with pytest.raises(ConstraintError, match=r"moving a record from 0 to 1 \(a policy edge\) lifts 2 queries"):
        G.check_sparse(C.count_queries(3, [[1], [1, 2]]), P.line(3))


# -- the policy graph (Def. 8.3) ---------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(instances(), st.sampled_from(["any", "edges"]))
def test_policy_graph_is_definition_8_3(instance, moves):
    policy, Q = instance
    if not _is_sparse(policy, Q, moves):
        return
    graph = G.policy_graph(Q, policy, moves)
    got = graph.to_networkx()
    want = _hand_graph(policy, Q, moves)
    assert isinstance(got, nx.DiGraph)
    assert set(got.nodes) == set(want.nodes) and got.number_of_nodes() == Q.num_queries + 2
    assert set(got.edges) == set(want.edges)
    assert (G.longest_cycle(graph)[0], G.longest_path(graph)[0]) == _brute_alpha_xi(want)


def test_policy_graph_labels():
    Q = C.count_queries(4, [[0], [1, 2]], names=["a", "b"])
    graph = G.policy_graph(Q, P.complete(4), "any")
    assert [graph.label(v) for v in range(4)] == ["a", "b", "v+", "v-"]
    assert graph.label(graph.source) == "v+" and graph.label(graph.sink) == "v-"
    got = graph.to_networkx()
    assert sorted(got.nodes) == ["a", "b", "v+", "v-"]
    assert set(got.edges) == {("v+", "v-"), ("a", "b"), ("b", "a"), ("v+", "a"), ("a", "v-"),
                              ("v+", "b"), ("b", "v-")}


# -- critical queries (§4.1) -------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(instances())
def test_critical_queries_are_those_a_policy_edge_changes(instance):
    policy, Q = instance
    member = _membership(policy, Q)
    want = np.zeros(Q.num_queries, dtype=bool)
    for x, y in _moves(policy, "edges"):
        want |= member[x] != member[y]
    got = G.critical_queries(Q, policy)
    assert got.dtype == bool
    assert got.tolist() == want.tolist()


def test_critical_queries_examples():
    # q0 holds every cell: no move changes it, though its cells are on edges changing q1
    got = G.critical_queries(C.count_queries(4, [[0, 1, 2, 3], [0]]), P.line(4))
    assert got.dtype == bool and got.tolist() == [False, True]
    assert (~got).tolist() == [True, False]
    # a query only ever lifted by the group order (cell 1 between two cells outside it)
    assert G.critical_queries(C.count_queries(3, [[1]]), P.line(3)).tolist() == [True]
    assert G.critical_queries(C.count_queries(3, [[2]]), P.from_edges(3, [(0, 1)])).tolist() == [False]


# -- one move: max ‖A(e_y − e_x)‖₁ ---------------------------------------------------------------
STRATEGIES = [
    np.eye(3),
    np.ones((1, 3)),
    np.array([[3.0, 3.0, 3.0]]),
    np.array([[1.0, 0.5, 0.0], [0.0, 0.5, 2.0]]),
    np.tril(np.ones((3, 3))),
]


@pytest.mark.parametrize("moves", ["any", "edges"])
@pytest.mark.parametrize("kind", ["complete", "line", "unbounded", "star", "bottom-star"])
@pytest.mark.parametrize("j", range(len(STRATEGIES)))
def test_move_sensitivity_is_the_largest_single_move(j, kind, moves):
    dense = STRATEGIES[j]
    policy = _policy(kind, 3)
    got = G.move_sensitivity(W.from_matrix(dense), policy, moves)
    assert isinstance(got, float)
    assert got == pytest.approx(_brute_move_sensitivity(dense, policy, moves))


def test_move_sensitivity_small_domains():
    # one cell: no move between cells; with ⊥ adding or removing the record moves ‖A e_0‖₁
    assert G.move_sensitivity(W.identity(1), P.complete(1), "any") == 0.0
    assert G.move_sensitivity(W.from_matrix(np.array([[2.0]])), P.unbounded(1), "any") == 2.0
    # two cells: the move 0 → 1 changes two counts
    assert G.move_sensitivity(W.identity(2), P.complete(2), "any") == 2.0
    assert G.move_sensitivity(W.identity(2), P.from_edges(2, [(0, 2)]), "any") == 2.0
    # the total over three cells: no move between cells changes it, adding a record does (by 3 here)
    assert G.move_sensitivity(W.from_matrix(np.array([[3.0, 3.0, 3.0]])), P.unbounded(3), "any") == 3.0
    assert G.move_sensitivity(W.from_matrix(np.array([[3.0, 3.0, 3.0]])), P.complete(3), "any") == 0.0


# -- closed forms (Thm 8.4, 8.5) and when they apply -------------------------------------------
def test_complete_policy_uses_theorem_8_4_under_both_readings():
    Q = C.marginals((2, 3), (0,))
    for moves in ("any", "edges"):
        got = C.histogram_sensitivity(Q, P.complete((2, 3)), moves)
        assert got.method == "closed form (Thm 8.4)" and (got.alpha, got.xi) == (2, 1)
    # a policy short of complete is searched
    got = C.histogram_sensitivity(Q, P.attribute((2, 3)), "any")
    assert got.method == "closed form (Thm 8.4)"
    got = C.histogram_sensitivity(Q, P.from_edges((2, 3), [(0, 3), (1, 4)]), "edges")
    assert got.method == "exact search"


def test_bottom_policy_with_as_many_edges_as_a_clique_is_not_complete():
    """unbounded((3, 1)) has 3 = 3·2/2 edges but they go to ⊥: each move lifts or lowers one cell
    of the marginal, α = 0 and ξ = 2 (not Thm 8.4's α = 3)."""
    Q = C.marginals((3, 1), (0,))
    policy = P.unbounded((3, 1))
    assert policy.num_edges == 3
    for moves in ("edges", "any"):
        got = C.histogram_sensitivity(Q, policy, moves)
        g = _hand_graph(policy, Q, moves)
        assert (got.alpha, got.xi) == _brute_alpha_xi(g)
        assert got.method == "exact search"
    assert C.histogram_sensitivity(Q, policy, "edges").value == 4


def test_theorem_8_5_only_for_the_attribute_policy():
    shape = (2, 2)
    Q = C.marginals(shape, (0,))
    # pair edges within A0 = 0: nothing is ever lifted (α = 0, ξ = 1), by search
    policy = P.from_edges(shape, [(0, 1)])
    got = C.histogram_sensitivity(Q, policy, "edges")
    assert got.method == "exact search" and (got.alpha, got.xi, got.value) == (0, 1, 2)
    # ⊥ edges of offset-free unbounded DP: searched too
    got = C.histogram_sensitivity(Q, P.unbounded(shape), "edges")
    assert got.method == "exact search" and (got.alpha, got.xi) == (0, 2)
    # the attribute policy and the grid (same offsets on 2 × 2) use the closed form
    for policy in (P.attribute(shape), P.grid(shape)):
        got = C.histogram_sensitivity(Q, policy, "edges")
        assert got.method == "closed form (Thm 8.5)" and (got.alpha, got.xi) == (2, 1)
    # the grid on 3 × 2 lacks the attribute policy's offset (2, 0): searched
    Q = C.marginals((3, 2), (0,))
    got = C.histogram_sensitivity(Q, P.grid((3, 2)), "edges")
    assert got.method == "exact search" and (got.alpha, got.xi) == (2, 1)
    assert (got.alpha, got.xi) == _brute_alpha_xi(_hand_graph(P.grid((3, 2)), Q, "edges"))


def test_hamiltonian_order_is_a_cycle_of_the_hamming_graph():
    # the Gray path of the other coordinates at 0, then back along it through the first's other values
    assert G._hamiltonian_order((2, 3)) == [(0, 0), (0, 1), (0, 2), (1, 2), (1, 1), (1, 0)]
    assert G._hamiltonian_order((4, 2)) == [(0, 0), (0, 1), (1, 1), (2, 1), (3, 1), (3, 0), (2, 0), (1, 0)]
    assert G._hamiltonian_order((3, 3)) == [(0, 0), (0, 1), (0, 2), (1, 2), (2, 2), (2, 1), (1, 1), (1, 0), (2, 0)]
    assert G._hamiltonian_order((1, 3)) == [(0, 0), (0, 1), (0, 2)]
    assert G._hamiltonian_order(()) == [()]
    # every shape with sides 1-4 in up to three coordinates: each combination once, one coordinate
    # changing per step, the closing step included (the reflected Gray code alone fails on 3 × 3)
    shapes = [s for d in (1, 2, 3) for s in itertools.product(range(1, 5), repeat=d)]
    for shape in shapes:
        order = G._hamiltonian_order(shape)
        assert order[0] == (0,) * len(shape)
        assert sorted(order) == list(itertools.product(*map(range, shape)))
        if len(order) > 1:
            assert all(sum(a != b for a, b in zip(order[i], order[(i + 1) % len(order)])) == 1 for i in range(len(order)))


@pytest.mark.parametrize("shape,subsets", [((4, 2, 2), [(0, 1)]), ((2, 2, 2, 2), [(0, 1, 2)]), ((2, 4, 2), [(0, 1)]),
                                            ((3, 3, 2), [(0, 1)]), ((3, 2, 2, 2), [(0, 1, 2)]), ((3, 4, 2), [(0, 1)])])
def test_theorem_8_5_witness_is_a_cycle_of_the_graph(shape, subsets):
    Q = C.marginals(shape, subsets)
    policy = P.attribute(shape)
    got = C.histogram_sensitivity(Q, policy, "edges")
    assert got.method == "closed form (Thm 8.5)"
    edges = set(G.policy_graph(Q, policy, "edges").to_networkx().edges)
    w = got.witness
    assert w[0] == w[-1] and len(set(w)) == got.alpha == len(w) - 1
    assert w[0] == Q.names[0]
    assert all(e in edges for e in zip(w, w[1:]))


def test_str_names_the_witness():
    got = C.histogram_sensitivity(C.rectangles(4, [1], [2]), P.complete(4), "edges")
    assert " → ".join(got.witness) in str(got)
    assert str(got).endswith(f"witness {got.witness[0]} → {got.witness[1]} → {got.witness[2]})")
    assert got.witness[0] == "v+" and got.witness[-1] == "v-"


# -- the strategy bound against every pair of neighbours (Def. 4.1) ------------------------------
BRUTE_CASES = [
    (P.complete(4), C.rectangles(4, [1], [2])),
    (P.line(4), C.count_queries(4, [[0, 1], [3]])),
    (P.unbounded(3), C.count_queries(3, [[0, 1]])),
    (P.unbounded(2), C.count_queries(2, [[0]])),
    (P.line(5), C.rectangles(5, [0, 3], [1, 4])),
    (P.from_edges(3, [(0, 1), (1, 3)]), C.count_queries(3, [[1]])),
]
BRUTE_STRATEGIES = [np.eye(5), np.tril(np.ones((5, 5))), np.array([[3.0, 0.5, 1.0, 2.0, 1.0]])]


@pytest.mark.parametrize("moves", ["any", "edges"])
@pytest.mark.parametrize("policy,Q", BRUTE_CASES, ids=[f"{p.name}-{q.names}" for p, q in BRUTE_CASES])
def test_strategy_sensitivity_bounds_every_neighbour_pair(policy, Q, moves):
    k = policy.size
    pairs = list(_neighbour_pairs(policy, Q, 3, moves))
    assert pairs
    for full in BRUTE_STRATEGIES:
        dense = full[:, :k]
        bound, hist = G.strategy_sensitivity(W.from_matrix(dense), Q, policy, moves)
        true = max(float(np.abs(dense @ (_hist(d1, k) - _hist(d2, k))).sum()) for d1, d2 in pairs)
        assert true <= bound + 1e-9
        assert bound == pytest.approx(hist.records * _brute_move_sensitivity(dense, policy, moves))
        if moves == "any":  # the definition as written is the default
            default, _ = G.strategy_sensitivity(W.from_matrix(dense), Q, policy)
            assert default == bound
    # the histogram: at most records = max{α, ξ} moves, each changing h by at most 2
    true_h = max(int(np.abs(_hist(d1, k) - _hist(d2, k)).sum()) for d1, d2 in pairs)
    assert true_h <= C.histogram_sensitivity(Q, policy, moves).value


def test_strategy_sensitivity_default_reads_every_move():
    """Under line(6) with [0, 1], [2, 3], [4, 5] the readings differ (docs/constraints.md, erratum 1):
    the default is the definition as written, moves="any"."""
    Q = C.rectangles(6, [0, 2, 4], [1, 3, 5])
    policy = P.line(6)
    ident = W.identity(6)
    got, hist = G.strategy_sensitivity(ident, Q, policy)
    assert hist.moves == "any" and got == 6.0 == G.strategy_sensitivity(ident, Q, policy, "any")[0]
    assert G.strategy_sensitivity(ident, Q, policy, "edges")[0] == 4.0


# -- the exact search's budget -----------------------------------------------------------------
def test_longest_path_step_budget():
    g = G.policy_graph(C.known_total(4), P.line(4), "edges")  # no move lifts or lowers the total
    assert G.longest_path(g, max_steps=1) == (1, [g.source, g.sink])
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"^max_steps must be an integer >= 1, got"):
            G.longest_path(g, max_steps=bad)
    # q1 reaches v⁻ but v⁺ does not reach it, v⁺ reaches q2 but q2 does not reach v⁻: no v⁺ → v⁻
    # path passes them, so v⁺ → q0 → v⁻ passes every query that may be on one and the search stops
    # there, after two steps
    g = _graph(3, [[3, 0], [3, 4], [0, 4], [1, 4], [3, 2]])
    assert G.longest_path(g, max_steps=2) == (2, [3, 0, 4])
    g = G.PolicyGraph(2, np.array([[0, 3], [1, 3], [2, 0], [2, 3]]), ("a", "b"), "edges")
    assert G.longest_path(g) == (2, [2, 0, 3])


def _graph(p, edges):
    """A PolicyGraph built by hand: queries 0..p−1, v⁺ = p, v⁻ = p + 1."""
    return G.PolicyGraph(p, np.array(edges, dtype=np.int64).reshape(-1, 2), tuple(f"q{i}" for i in range(p)), "edges")


def test_longest_path_searches_only_queries_between_the_ends():
    # q0 is reached from v⁺ but reaches nothing: no v⁺ → v⁻ path passes it, so one step suffices
    assert G.longest_path(_graph(1, [[1, 0], [1, 2]]), max_steps=1) == (1, [1, 2])
    # q0 → v⁻ and v⁺ → q0: the path through q0 is the longest possible, found in two steps
    g = _graph(1, [[1, 0], [1, 2], [0, 2]])
    assert G.longest_path(g, max_steps=2) == (2, [1, 0, 2])
    with pytest.raises(ConstraintError, match="max_steps=1 steps"):
        G.longest_path(g, max_steps=1)
    # without the edge v⁺ → v⁻ and nothing else, ξ is still reported as that edge
    assert G.longest_path(_graph(1, []), max_steps=1) == (1, [1, 2])


def test_search_limit_message():
    g = G.policy_graph(C.count_queries(8, [[i] for i in range(7)]), P.line(8), "edges")
    tail = ("steps (longest simple cycles and paths are NP-hard, He et al. Thm 8.1). Pass a larger max_steps, or use "
            "constraints with a closed form (one marginal with every move; disjoint marginals under the attribute "
            "policy with moves='edges')")
    with pytest.raises(ConstraintError) as info:
        G.longest_path(g, max_steps=3)
    assert str(info.value) == ("the exact search for the longest v+ → v- path (ξ) of the constraints' policy graph "
                               "stopped after max_steps=3 " + tail)
    with pytest.raises(ConstraintError) as info:
        G.longest_cycle(g, max_steps=3)
    assert str(info.value) == ("the exact search for the longest cycle (α) of the constraints' policy graph "
                               "stopped after max_steps=3 " + tail)


def test_longest_path_keeps_the_first_of_equal_paths():
    assert G.longest_path(_graph(2, [[2, 0], [2, 1], [0, 3], [1, 3], [2, 3]])) == (2, [2, 0, 3])


def test_longest_cycle_searches_strong_components_largest_first():
    # the 2-cycle q0 ⇄ q1 is a strong component; q0's edges to and from v± are in no cycle
    assert G.longest_cycle(_graph(2, [[0, 1], [1, 0], [0, 3], [2, 0], [2, 3]]), max_steps=2) == (2, [0, 1])
    # a 2-cycle and a 3-clique: the larger component first, and then nothing can beat it
    g = _graph(5, [[0, 1], [1, 0], [2, 3], [3, 2], [3, 4], [4, 3], [2, 4], [4, 2], [5, 6]])
    assert G.longest_cycle(g, max_steps=3) == (3, [2, 3, 4])
    # no cycle: nothing to search
    assert G.longest_cycle(_graph(1, [[1, 2]]), max_steps=1) == (0, [])
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"^max_steps must be an integer >= 1, got"):
            G.longest_cycle(g, max_steps=bad)


def test_longest_cycle_avoiding_the_first_vertex():
    """q0 ⇄ q1 and the 3-clique q1, q2, q3 form one strong component; its longest cycle avoids q0
    (α = 3, not the 2 through q0), and once α = 3 no search from q2 (two vertices left) can beat it."""
    g = _graph(4, [[0, 1], [1, 0], [1, 2], [2, 1], [2, 3], [3, 2], [1, 3], [3, 1], [4, 5]])
    want = max(len(c) for c in nx.simple_cycles(nx.DiGraph([(a, b) for a, b in g.edges.tolist() if a < 4])))
    assert want == 3
    assert G.longest_cycle(g) == (3, [1, 2, 3])
    assert G.longest_cycle(g, max_steps=14) == (3, [1, 2, 3])


def test_longest_cycle_stops_when_the_rest_cannot_beat_it():
    """The triangle q0, q1, q2 and q0 ⇄ q3: α = 3 through q0, and the three vertices after q0 cannot
    hold a longer cycle, so the search ends after q0's."""
    g = _graph(4, [[0, 1], [1, 0], [1, 2], [2, 1], [2, 0], [0, 2], [0, 3], [3, 0], [4, 5]])
    assert G.longest_cycle(g, max_steps=11) == (3, [0, 1, 2])


def test_closed_forms_take_the_largest_marginal_and_a_single_cell_one():
    # Thm 8.5 with marginals of 2 and 3 cells: α = 3, the larger (second) one
    Q = C.marginals((2, 3), [(0,), (1,)])
    policy = P.attribute((2, 3))
    got = C.histogram_sensitivity(Q, policy, "edges")
    g = _hand_graph(policy, Q, "edges")
    assert got.method == "closed form (Thm 8.5)" and (got.alpha, got.xi) == _brute_alpha_xi(g) == (3, 1)
    assert set(got.witness) == {"A1=0", "A1=1", "A1=2"} and got.moves == "edges"
    # a marginal over an attribute of one value: one query, never lifted or lowered
    for policy, moves, theorem in ((P.complete((1, 3)), "any", "Thm 8.4"), (P.attribute((1, 2, 2)), "edges", "Thm 8.5")):
        got = C.histogram_sensitivity(C.marginals(policy.shape, (0,)), policy, moves)
        assert got == G.ConstrainedSensitivity(0, 1, moves, f"closed form ({theorem})", ("v+", "v-"))
        assert got.value == 2.0


def test_histogram_sensitivity_search_budget_and_witness():
    # seven singletons under line(8): the cycle search needs more than 20 steps
    Q = C.count_queries(8, [[i] for i in range(7)])
    with pytest.raises(ConstraintError, match=r"longest cycle \(α\) .* max_steps=20 steps"):
        C.histogram_sensitivity(Q, P.line(8), "edges", max_steps=20)
    # under unbounded DP no move lowers one query and lifts another: no cycle, and the path search
    # must try every query
    Q = C.count_queries(5, [[i] for i in range(4)])
    with pytest.raises(ConstraintError, match=r"v\+ → v- path \(ξ\) .* max_steps=2 steps"):
        C.histogram_sensitivity(Q, P.unbounded(5), "edges", max_steps=2)
    got = C.histogram_sensitivity(Q, P.unbounded(5), "edges")
    assert (got.alpha, got.xi) == (0, 2) and got.witness in {("v+", f"q{i}", "v-") for i in range(4)}
    # α ≥ ξ: the witness is the cycle, closed once
    got = C.histogram_sensitivity(C.count_queries(3, [[0], [1]]), P.line(3), "edges")
    assert (got.alpha, got.xi, got.witness) == (2, 2, ("q0", "q1", "q0"))
    got = C.histogram_sensitivity(C.rectangles(4, [0, 2], [1, 3]), P.line(4), "edges")
    assert (got.alpha, got.xi, got.witness) == (2, 1, ("[0..1]", "[2..3]", "[0..1]"))


def test_scoped_queries_change_only_with_their_records():
    """Record 0 is counted by "a" only and record 1 by "b" only (scopes): no move of one record
    lowers one and lifts the other, so G_P is the union of the graphs of {a} and {b} (no a ⇄ b)."""
    Q = C.count_queries(4, [[0, 1], [2, 3]], names=["a", "b"], scopes=[{0}, {1}])
    assert [p.tolist() for p in G.scope_patterns(Q)] == [[], [0], [1]]
    assert all(p.dtype == np.int64 for p in G.scope_patterns(Q))  # row indices, the empty one too
    got = G.policy_graph(Q, P.complete(4), "any").to_networkx()
    assert set(got.edges) == {("v+", "v-"), ("v+", "a"), ("a", "v-"), ("v+", "b"), ("b", "v-")}
    unscoped = G.policy_graph(C.count_queries(4, [[0, 1], [2, 3]], names=["a", "b"]), P.complete(4), "any")
    assert {("a", "b"), ("b", "a")} <= set(unscoped.to_networkx().edges)
    both = C.count_queries(4, [[0, 1], [2, 3], [3]], names=["a", "b", "c"], scopes=[{0}, {1}, None])
    assert [p.tolist() for p in G.scope_patterns(both)] == [[0, 2], [1, 2], [2]]


def test_unknown_moves_are_refused():
    with pytest.raises(ValueError, match=r"^moves must be one of \('any', 'edges'\), got 'all'$"):
        G.policy_graph(C.known_total(3), P.line(3), "all")
