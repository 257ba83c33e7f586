"""Count constraints (He, Machanavajjhala, Ding, SIGMOD 2014, §8): the policy graph, its longest
cycle and path, the sensitivity against brute force over every database of tiny domains (Def. 4.1
read both ways), the closed forms and their errata, constrained inference and the auditor."""

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import blowfish_te as bt
from blowfish_te import audit
from blowfish_te import constraints as C
from blowfish_te import policies as P
from blowfish_te import workloads as W
from blowfish_te.errors import ConstraintError

pytestmark = pytest.mark.core


# -- brute force over databases of n records with ids (Def. 4.1) ---------------------------------
def _databases(policy, Q, n):
    k = policy.size
    values = k + (1 if policy.has_bottom else 0)  # ⊥ (index K): the id has no record
    member = np.zeros((values, Q.num_queries), dtype=np.int64)
    member[:k] = Q.matrix.toarray().T.astype(np.int64)
    dbs = np.array(list(itertools.product(range(values), repeat=n)), dtype=np.int64).reshape(-1, n)
    hist = np.zeros((len(dbs), values), dtype=np.int64)
    for i in range(n):
        np.add.at(hist, (np.arange(len(dbs)), dbs[:, i]), 1)
    edge = np.zeros((values, values), dtype=bool)
    for u, v in policy.edges.tolist():
        edge[u, v] = edge[v, u] = True
    return dbs, member[dbs].sum(axis=1), hist[:, :k], edge


def _neighbours(d1, cands, edge, moves):
    """Which candidate databases (same public counts as d1) are neighbours of d1 per Def. 4.1:
    condition 3 over the candidates themselves as D3 (a D3 must satisfy Q too). With moves="any"
    a neighbour may also change records off the policy's edges; with "edges" it may not."""
    changed = cands != d1
    disc = changed & edge[d1[None, :], cands]
    if moves == "edges":
        keep = (changed == disc).all(axis=1)
        cands, changed, disc = cands[keep], changed[keep], disc[keep]
    else:
        keep = np.ones(len(cands), dtype=bool)
    tv = np.where(disc, cands, -1)   # the discriminative pairs T(D1, ·), as targets per id
    cv = np.where(changed, cands, -1)  # every changed tuple Δ(·, D1)
    nonempty = disc.any(axis=1)
    sub = ((tv[:, None] == -1) | (tv[:, None] == tv[None, :])).all(axis=2)
    same = (tv[:, None] == tv[None, :]).all(axis=2)
    smaller_t = (sub & ~same & nonempty[:, None]).any(axis=0)                 # 3(a)
    csub = ((cv[:, None] == -1) | (cv[:, None] == cv[None, :])).all(axis=2)
    csame = (cv[:, None] == cv[None, :]).all(axis=2)
    smaller_delta = (same & csub & ~csame).any(axis=0)                      # 3(b)
    out = np.zeros(keep.size, dtype=bool)
    out[np.flatnonzero(keep)] = nonempty & ~smaller_t & ~smaller_delta
    return out


def brute_sensitivity(policy, Q, n, moves="any"):
    """max ‖h(D1) − h(D2)‖₁ over neighbours (D1, D2) ∈ N(P) of n-record databases."""
    dbs, counts, hist, edge = _databases(policy, Q, n)
    classes = {}
    for j, c in enumerate(map(tuple, counts)):
        classes.setdefault(c, []).append(j)
    best = 0
    for members in classes.values():
        idx = np.array(members)
        for j in idx:
            mask = _neighbours(dbs[j], dbs[idx], edge, moves)
            if mask.any():
                best = max(best, int(np.abs(hist[idx[mask]] - hist[j]).sum(axis=1).max()))
    return best


def is_neighbour(policy, Q, d1, d2, moves="any"):
    dbs, counts, _, edge = _databases(policy, Q, len(d1))
    d1, d2 = np.asarray(d1), np.asarray(d2)
    c1 = Q.matrix.toarray() @ np.bincount(d1, minlength=policy.size)[: policy.size]
    same = np.flatnonzero((counts == c1).all(axis=1))
    target = same[np.flatnonzero((dbs[same] == d2).all(axis=1))]
    if target.size == 0:
        return False
    return bool(_neighbours(d1, dbs[same], edge, moves)[np.flatnonzero(same == target[0])[0]])


# -- the paper's examples and errata -----------------------------------------------------------
def test_example_8_3_full_domain_marginal_has_sensitivity_8():
    shape = (2, 2, 3)
    Q = C.marginals(shape, (0, 1))
    policy = P.complete(shape)
    closed = C.histogram_sensitivity(Q, policy)
    assert closed.value == 8 and closed.method == "closed form (Thm 8.4)"
    graph = C.policy_graph(Q, policy)
    assert C.longest_cycle(graph)[0] == 4 and C.longest_path(graph)[0] == 1   # Example 8.2
    # the paper's pair: four records each moved to the next (A1, A2) cell — neighbours, ‖Δh‖₁ = 8
    cell = lambda a, b, c: int(np.ravel_multi_index((a, b, c), shape))  # noqa: E731
    d1 = [cell(0, 0, 0), cell(0, 1, 0), cell(1, 0, 0), cell(1, 1, 0)]
    d2 = [cell(0, 1, 1), cell(1, 0, 1), cell(1, 1, 1), cell(0, 0, 1)]
    assert is_neighbour(policy, Q, d1, d2)
    h1, h2 = (np.bincount(d, minlength=12) for d in (d1, d2))
    assert np.abs(h1 - h2).sum() == 8


def test_corollary_8_3_is_off_by_one():
    """Cor. 8.3 claims S(h, P) <= 2·max{|Q|, 1} = 2 for one range; it is 4 (ξ = |Q| + 1)."""
    Q = C.rectangles(4, [1], [2])
    for policy in (P.complete(4), P.line(4)):
        got = C.histogram_sensitivity(Q, policy, "edges")
        assert got.value == 4 == 2 * (len(Q) + 1)
        assert brute_sensitivity(policy, Q, 2, "edges") == 4 > 2 * max(len(Q), 1)


def test_theorem_8_6_equality_fails_when_rectangles_cover_the_domain():
    """Thm 8.6 claims S = 2(maxcomp + 1) = 6 for [0, 1], [2, 3] under line(4); covering leaves no
    v⁺/v⁻ edges, α = 2, ξ = 1, and no neighbours differ by more than 4."""
    Q = C.rectangles(4, [0, 2], [1, 3])
    maxcomp = 2
    got = C.histogram_sensitivity(Q, P.line(4), "edges")
    assert (got.alpha, got.xi, got.value) == (2, 1, 4)
    assert brute_sensitivity(P.line(4), Q, 3, "edges") <= 4 < 2 * (maxcomp + 1)


def test_definition_4_1_as_written_breaks_the_policy_edge_bound():
    """Def. 4.1 lets neighbours move records off the policy's edges to keep the constraints; then
    the paper's G_P (policy edges) bound 4 fails: a neighbour pair differs by 6. The bound from
    every move (moves="any") holds and is attained."""
    Q = C.rectangles(6, [0, 2, 4], [1, 3, 5])
    policy = P.line(6)
    assert C.histogram_sensitivity(Q, policy, "edges").value == 4
    assert brute_sensitivity(policy, Q, 3, "any") == 6 == C.histogram_sensitivity(Q, policy, "any").value
    assert is_neighbour(policy, Q, [0, 2, 5], [4, 1, 3], "any")


# -- brute force against the bound --------------------------------------------------------------
CASES = [
    (P.complete(4), C.rectangles(4, [1], [2])),
    (P.complete(4), C.count_queries(4, [[0], [1, 2]])),
    (P.line(4), C.count_queries(4, [[0, 1], [3]])),
    (P.threshold(4, 2), C.rectangles(4, [0, 2], [0, 3])),
    (P.unbounded(3), C.count_queries(3, [[0, 1]])),
    (P.unbounded(3), C.known_total(3)),
    (P.attribute((2, 2)), C.marginals((2, 2), (0,))),
    (P.grid((2, 2)), C.count_queries((2, 2), [[0], [3]])),
    (P.complete((2, 2)), C.marginals((2, 2), (1,))),
]


@pytest.mark.parametrize("moves", ["any", "edges"])
@pytest.mark.parametrize("policy,Q", CASES, ids=[f"{p.name}-{q.names}" for p, q in CASES])
def test_brute_force_never_exceeds_the_bound(policy, Q, moves):
    bound = C.histogram_sensitivity(Q, policy, moves).value
    assert brute_sensitivity(policy, Q, 3, moves) <= bound


def test_complete_graph_bound_is_attained():
    """Under G_full both readings agree, and Thm 8.2's equality holds when there are cells enough
    for the moved records not to cancel (for [0], [1, 2] of 4 cells the path v⁺ → q0 → q1 → v⁻
    needs 6 distinct cells, and the brute force finds 2 < 6)."""
    sparse = C.count_queries(4, [[0], [1, 2]])
    assert brute_sensitivity(P.complete(4), sparse, 3) == 2 < C.histogram_sensitivity(sparse, P.complete(4)).value
    for Q in (C.rectangles(4, [1], [2]), C.marginals((2, 2), (1,))):
        policy = P.complete(Q.shape)
        bound = C.histogram_sensitivity(Q, policy).value
        assert brute_sensitivity(policy, Q, 3, "any") == brute_sensitivity(policy, Q, 3, "edges") == bound


def test_known_total_without_bottom_changes_nothing():
    """Bounded DP already knows n: the constraint is never lifted or lowered (S = 2, Thm 4.2)."""
    got = C.histogram_sensitivity(C.known_total(4), P.line(4), "edges")
    assert (got.alpha, got.xi, got.value) == (0, 1, 2)
    assert not C.critical_queries(C.known_total(4), P.line(4)).any()
    assert C.critical_queries(C.known_total(4), P.unbounded(4)).all()


@st.composite
def sparse_instances(draw):
    k = draw(st.integers(2, 4))
    kind = draw(st.sampled_from(["complete", "line", "threshold", "unbounded", "star"]))
    policy = {"complete": P.complete(k), "line": P.line(k), "threshold": P.threshold(k, 2),
              "unbounded": P.unbounded(k), "star": P.from_edges(k, [(0, j) for j in range(1, k)])}[kind]
    sets = draw(st.lists(st.sets(st.integers(0, k - 1), min_size=1), min_size=1, max_size=3))
    return policy, C.count_queries(k, [sorted(s) for s in sets])


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sparse_instances(), st.sampled_from(["any", "edges"]))
def test_random_sparse_constraints_bound_brute_force(instance, moves):
    policy, Q = instance
    try:
        got = C.histogram_sensitivity(Q, policy, moves)
    except ConstraintError:
        assume(False)
    assert brute_sensitivity(policy, Q, 3, moves) <= got.value
    # the exact search agrees with networkx's enumeration of simple cycles and paths
    g = C.policy_graph(Q, policy, moves)
    ng = nx.DiGraph(g.edges.tolist())
    alpha = max((len(c) for c in nx.simple_cycles(ng)), default=0)
    xi = max(len(p) - 1 for p in nx.all_simple_paths(ng, g.source, g.sink))
    assert (C.longest_cycle(g)[0], C.longest_path(g)[0]) == (alpha, xi)


def test_search_witnesses_are_cycles_and_paths_of_the_graph():
    Q = C.rectangles(12, [0, 3, 6, 9], [1, 4, 7, 10])
    g = C.policy_graph(Q, P.threshold(12, 2), "edges")
    edges = set(map(tuple, g.edges.tolist()))
    alpha, cycle = C.longest_cycle(g)
    xi, path = C.longest_path(g)
    assert alpha == len(cycle) and all((cycle[i], cycle[(i + 1) % alpha]) in edges for i in range(alpha))
    assert xi == len(path) - 1 and path[0] == g.source and path[-1] == g.sink
    assert all((a, b) in edges for a, b in zip(path, path[1:]))
    assert (alpha, xi) == (2, 5)  # one chain of four rectangles: Thm 8.6's 2(maxcomp + 1) = 10 holds here


# -- closed forms as oracles -------------------------------------------------------------------
@pytest.mark.parametrize("shape,subsets", [((3, 2, 2), [(0,), (1,)]), ((2, 3, 2), [(0, 1)]), ((4, 2), [(0,)])])
def test_theorem_8_5_closed_form_equals_the_search(shape, subsets):
    Q = C.marginals(shape, subsets)
    closed = C.histogram_sensitivity(Q, P.attribute(shape), "edges")
    assert closed.method == "closed form (Thm 8.5)"
    g = C.policy_graph(Q, P.attribute(shape), "edges")
    assert (closed.alpha, closed.xi) == (C.longest_cycle(g)[0], C.longest_path(g)[0])
    names = {n: i for i, n in enumerate(Q.names)}
    edges = set(map(tuple, g.edges.tolist()))
    w = [names[n] for n in closed.witness]
    assert all(e in edges for e in zip(w, w[1:])) and w[0] == w[-1] and len(set(w)) == closed.alpha


def test_theorem_8_4_closed_form_equals_the_search():
    Q = C.marginals((3, 2, 2), (0, 1))
    closed = C.histogram_sensitivity(Q, P.complete((3, 2, 2)))
    g = C.policy_graph(Q, P.complete((3, 2, 2)))
    assert closed.value == 12 == 2 * max(C.longest_cycle(g)[0], C.longest_path(g)[0])


# -- refusals ------------------------------------------------------------------------------------
def test_non_sparse_constraints_are_refused_with_the_move():
    Q = C.marginals((3, 3), [(0,), (1,)])
    with pytest.raises(ConstraintError, match=r"not sparse .* lifts 2 queries"):
        C.histogram_sensitivity(Q, P.complete((3, 3)))


def test_search_limit_raises():
    Q = C.count_queries(8, [[i] for i in range(7)])
    with pytest.raises(ConstraintError, match="max_steps=3"):
        C.histogram_sensitivity(Q, P.line(8), "edges", max_steps=3)


@pytest.mark.parametrize("bad,match", [
    (dict(queries=[[0, 9]]), "outside the domain"),
    (dict(queries=np.array([[0.5, 1, 0, 0]])), "0/1"),
    (dict(queries=[[0]], counts=[-1]), "non-negative integers"),
    (dict(queries=[[0]], names=["a", "b"]), "names"),
    (dict(queries=[[0]], scopes=[[]]), "empty"),
])
def test_bad_constraints(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        C.Constraints(4, **bad)


# -- the release ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_constrained_release_fits_the_public_counts_and_beats_the_unconstrained():
    k, reps = 32, 60
    gen = np.random.default_rng(0)
    x = gen.poisson(5, size=k)
    Q = C.rectangles(k, [0, 8, 16, 24], [7, 15, 23, 31])
    policy, eps = P.complete(k), 1.0
    ident = W.identity(k)
    errs, plain = [], []
    for seed in range(reps):
        r = bt.answer(ident, x, policy, eps, rng=seed, constraints=Q)
        assert r.route == "constrained" and r.sensitivity == 8 and r.noise_scale == 8
        np.testing.assert_allclose(Q.matrix @ r.answers, Q.evaluate(x), rtol=1e-6, atol=1e-4)
        assert r.answers.min() >= 0
        errs.append(np.mean((r.answers - x) ** 2))
        plain.append(np.mean((r.unconstrained_answers - x) ** 2))
    expected = 2 * 8.0**2  # Laplace(8) on every cell
    assert r.expected_mse == pytest.approx(expected)
    # mean of 60 × 32 squared Laplace(8) draws: relative sd sqrt(5/1920) ≈ 5%; 4 sd tolerance
    assert np.mean(plain) == pytest.approx(expected, rel=0.21)
    assert np.mean(errs) < 0.8 * np.mean(plain)
    assert r.public_counts == dict(zip(Q.names, Q.evaluate(x).tolist()))


def test_data_outside_the_constraints_is_refused_before_noise():
    Q = C.rectangles(8, [0], [3], counts=[5])
    gen = np.random.default_rng(1)
    state = gen.bit_generator.state
    with pytest.raises(ConstraintError, match=r"counts 4 records, the constraint says 5"):
        bt.answer(W.prefix(8), np.ones(8, int), P.line(8), 1.0, rng=gen, constraints=Q)
    assert gen.bit_generator.state == state


def test_constrained_hierarchy_uses_moves_times_strategy_sensitivity():
    Q = C.rectangles(16, [0], [7])
    r = bt.answer(W.prefix(16), np.ones(16, int), P.line(16), 1.0, "hb", rng=0, constraints=Q, moves="edges")
    hb = bt.mechanisms.get_mechanism("hb")
    delta = bt.sensitivity(hb.strategy(W.prefix(16)), P.line(16))
    assert r.sensitivity == 2 * delta  # ξ = 2 moves, each at most Δ_G(A)
    with pytest.raises(ValueError, match="not linear"):
        bt.answer(W.prefix(16), np.ones(16, int), P.line(16), 1.0, "dawa", rng=0, constraints=Q)


def _laplace_sampler(scale):
    def sample(h, n, gen):
        return h[None, :] + gen.laplace(0.0, scale, size=(n, h.size))
    return sample


def test_auditor_passes_the_constrained_release_and_fails_the_corollary():
    """One range [1, 2] of 4 cells under G_full: neighbours (0, 2) and (1, 3) differ by 4 in h.
    Noise at S = 4 holds ε; noise at Cor. 8.3's 2 does not."""
    Q = C.rectangles(4, [1], [2])
    policy, eps = P.complete(4), 1.0
    assert is_neighbour(policy, Q, [0, 2], [1, 3])
    x, y = np.bincount([0, 2], minlength=4), np.bincount([1, 3], minlength=4)
    ours = C.histogram_sensitivity(Q, policy).value
    kwargs = dict(n_select=2000, n_detect=20000, rng=3)
    assert audit.audit_histograms(_laplace_sampler(ours / eps), x, y, eps, **kwargs).passed
    paper = audit.audit_histograms(_laplace_sampler(2 * max(len(Q), 1) / eps), x, y, eps, **kwargs)
    assert not paper.passed  # true loss 4/2 = 2 > ε = 1


@pytest.mark.slow
def test_auditor_on_the_library_release():
    Q = C.rectangles(4, [1], [2])
    policy = P.complete(4)
    x, y = np.bincount([0, 2], minlength=4), np.bincount([1, 3], minlength=4)

    the_plan = bt.plan(W.identity(4), policy, 1.0, constraints=Q)  # data-independent: one plan for both

    def sample(h, n, gen):  # the library's release, constrained inference included
        return np.stack([the_plan.release(h, gen).answers for _ in range(n)])

    assert audit.audit_histograms(sample, x, y, 1.0, n_select=300, n_detect=1500, rng=4).passed


# -- composition -----------------------------------------------------------------------------
def test_parallel_composition_under_theorem_4_2_and_4_3():
    k = 8
    north, south = {0, 1, 2}, {3, 4, 5}
    acct = bt.BudgetAccountant(1.0, P.line(k), constraints=C.known_total(k))
    group = acct.parallel({"north": north, "south": south})     # n known, no ⊥: Thm 4.2
    x = np.zeros(k, int)
    x[[1, 2, 6]] = 1
    group.answer("north", W.prefix(k), x, 0.5, rng=0)
    group.answer("south", W.prefix(k), x, 0.5, rng=1)
    assert acct.spent == 0.5
    scoped = C.count_queries(k, [[0, 1], [5]], names=["n-low", "s-high"], scopes=[north, south])
    acct = bt.BudgetAccountant(1.0, P.line(k), constraints=scoped)
    acct.parallel({"north": north, "south": south})           # each constraint inside one part: Thm 4.3


@pytest.mark.parametrize("policy,Q,match", [
    (P.unbounded(8), C.known_total(8), "'total' counts records of parts"),
    (P.line(8), C.count_queries(8, [[0, 1]], names=["low"]), "'low' counts records of parts"),
    (P.line(8), C.count_queries(8, [[0, 1]], names=["low"], scopes=[{0, 1, 3, 9}]), "'low' counts records of parts"),
    (P.line(8), C.count_queries(8, [[0, 1]], names=["low"], scopes=[{0, 9}]), "outside every part"),
])
def test_parallel_composition_refused_naming_the_constraint(policy, Q, match):
    acct = bt.BudgetAccountant(1.0, policy, constraints=Q)
    with pytest.raises(ConstraintError, match=match):
        acct.parallel({"north": {0, 1, 2}, "south": {3, 4, 5}})
    assert acct.spent == 0 and not acct.history


def test_accountant_releases_are_calibrated_to_its_constraints():
    k = 8
    Q = C.rectangles(k, [0], [3])
    acct = bt.BudgetAccountant(1.0, P.complete(k), constraints=Q)
    r = acct.answer(W.identity(k), np.ones(k, int), 0.5, rng=0)
    assert r.route == "constrained" and r.sensitivity == 4
    assert acct.spent == 0.5
    strict = bt.BudgetAccountant(1.0, P.complete(k), constraints=C.rectangles(k, [0], [3], counts=[3]))
    with pytest.raises(ConstraintError, match="does not satisfy"):
        strict.answer(W.identity(k), np.ones(k, int), 0.5, rng=0)
    assert strict.spent == 0
