"""Plans of the routes checked to their exact contents: the public component totals a route
discloses (against a brute force over the policy's components), the error floor that skips
transform trees, the native and chooser candidates and their refusals, :meth:`Plan.summary`,
:meth:`Plan.to_dict`, :meth:`Plan.marginals_read` and :meth:`Release.to_dict`."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

import blowfish_te as bt
from blowfish_te import constraints, policies, transform, trees
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import MECHANISMS, Auto
from blowfish_te.routes import STRUCTURED_CELLS, plan_routes, policy_totals, transform_floor


def _mech(name, **kwargs):
    """A fresh instance (its own plan cache) of a registered mechanism."""
    return MECHANISMS[name](**kwargs)


# -- the disclosed component totals ---------------------------------------------------------------
def _brute_totals(policy, x):
    """Totals of the connected components of the policy graph (⊥ is the node ``size``) that hold
    no ⊥, keyed by their largest cell."""
    k = policy.size
    graph = nx.Graph()
    graph.add_nodes_from(range(k))
    graph.add_edges_from((int(u), int(v)) for u, v in policy.edges)
    totals = {}
    for comp in nx.connected_components(graph):
        if k in comp:
            continue
        totals[max(comp)] = int(sum(int(x[c]) for c in comp))
    return totals


def _policies_with_components():
    return [
        policies.line(5),
        policies.grid((2, 3)),
        policies.attribute((2, 2)),
        policies.complete(3),
        policies.unbounded(3),  # every cell reaches ⊥: nothing disclosed
        policies.partition([0, 1, 1, 2, 2, 2]),  # cell 0 alone
        policies.from_edges(4, []),  # every cell alone, cell 0 included
        policies.from_edges(4, [[1, 4], [2, 3]]),  # {0} free, {1, ⊥}, {2, 3} free
        policies.from_edges(6, [[0, 1], [1, 2], [0, 2], [2, 6], [3, 4]]),  # a cycle with ⊥, {3, 4}, {5}
        policies.from_edges(5, [[0, 5], [1, 2], [3, 4]]),  # ⊥ holds cell 0 only
    ]


def test_policy_totals_are_the_totals_of_the_components_without_bottom():
    rng = np.random.default_rng(7)
    for policy in _policies_with_components():
        for _ in range(3):
            x = rng.integers(0, 9, size=policy.size)
            got = policy_totals(policy, x)
            assert got == _brute_totals(policy, x), policy.name
            assert all(type(k) is int and type(v) is int for k, v in got.items())


def test_policy_totals_of_small_policies_by_hand():
    x = np.array([5, 1, 2, 3])
    assert policy_totals(policies.from_edges(4, []), x) == {0: 5, 1: 1, 2: 2, 3: 3}
    assert policy_totals(policies.from_edges(4, [[1, 4], [2, 3]]), x) == {0: 5, 3: 5}
    assert policy_totals(policies.from_edges(4, [[0, 4], [1, 2]]), x) == {2: 3, 3: 3}
    assert policy_totals(policies.unbounded(4), x) == {}
    assert policy_totals(policies.line(4), x) == {3: 11}


def test_the_transform_route_discloses_exactly_the_component_totals_and_adds_their_offset():
    rng = np.random.default_rng(3)
    for policy in [policies.from_edges(4, [[0, 1], [2, 4]]), policies.partition([0, 1, 1, 2, 2, 2]),
                   policies.line(5), policies.from_edges(5, [[0, 5], [1, 2], [3, 4]])]:
        x = rng.integers(0, 6, size=policy.size)
        release = bt.answer(wl.prefix(policy.size), x, policy, 1.0, _mech("identity"), rng=0, route="transform")
        assert release.component_totals == _brute_totals(policy, x)
        assert release.route == "transform"


def test_a_transform_with_no_edges_answers_from_the_totals_alone():
    # every cell its own component without ⊥: W_T = 0, all cells disclosed, no noise
    policy = policies.from_edges(4, [])
    x = np.array([3, 0, 2, 7])
    the_plan = plan_routes(wl.prefix(4), policy, 1.0, _mech("identity"), route="transform")
    assert the_plan.chosen.expected_mse == 0.0
    release = the_plan.release(x, 0)
    assert release.answers.dtype == np.float64
    assert release.answers.tolist() == [3.0, 3.0, 5.0, 12.0]
    assert release.component_totals == {0: 3, 1: 0, 2: 2, 3: 7}
    assert release.noise_scale == 0.0 and release.sensitivity == 0.0


def test_a_forest_policy_runs_its_own_transform():
    # the transform route through the policy itself: the same answers as a release through the
    # forest given as the tree
    policy = policies.from_edges(5, [[0, 1], [1, 2], [3, 5]])
    x = np.array([2, 0, 4, 1, 3])
    w = wl.prefix(5)
    own = bt.answer(w, x, policy, 1.0, _mech("identity"), rng=4, route="transform")
    given = bt.answer(w, x, policy, 1.0, _mech("identity"), rng=4, route="transform", tree=policy)
    assert own.answers.tolist() == given.answers.tolist()
    assert own.component_totals == given.component_totals == {2: 6, 4: 3}


# -- the error floor of a transform route -----------------------------------------------------------
def _brute_floor(workload, tr, epsilon):
    dense = np.asarray(tr.workload(workload).dense(), dtype=np.float64)
    peaks = np.abs(dense).max(axis=1)
    return 2.0 * (tr.stretch / epsilon) ** 2 * float(np.mean(peaks**2))


def test_transform_floor_is_two_stretch_squared_over_epsilon_squared_times_the_mean_squared_peak():
    rng = np.random.default_rng(11)
    policy = policies.grid((3, 3))
    matrix = rng.choice([0.0, 0.5, 2.0, -3.0], size=(5, 9))
    w = wl.from_matrix(matrix)
    stretches = set()
    for tree in trees.candidates(policy).values():
        tr = transform(policy, tree)
        stretches.add(tr.stretch)
        for eps in (0.5, 3.0):
            assert transform_floor(w, tr, eps) == pytest.approx(_brute_floor(w, tr, eps), rel=1e-12)
    assert stretches >= {2, 3, 5}
    # one edge, stretch 1: a single-edge policy still has a floor
    single = transform(policies.from_edges(2, [[0, 1]]))
    assert single.num_edges == 1
    w2 = wl.from_matrix(np.array([[2.0, 0.0], [0.5, 3.0], [1.0, 1.0]]))
    assert transform_floor(w2, single, 0.25) == pytest.approx(_brute_floor(w2, single, 0.25), rel=1e-12)
    assert transform_floor(w2, single, 0.25) > 0


def test_transform_floor_is_none_without_edges_or_without_a_sparse_form():
    empty = transform(policies.from_edges(3, []))
    assert empty.num_edges == 0
    assert transform_floor(wl.identity(3), empty, 1.0) is None
    near = policies.threshold(6, 2)
    tr = transform(near, trees.named(near, "bfs"))
    assert tr.num_edges == 5
    assert transform_floor(wl.all_ranges(6), tr, 1.0) is None  # no cheap sparse form
    assert transform_floor(wl.prefix(6), tr, 1.0) == pytest.approx(_brute_floor(wl.prefix(6), tr, 1.0))


def test_a_skipped_tree_carries_its_floor_which_bounds_its_error():
    w = wl.identity(9)
    policy = policies.grid((3, 3))
    the_plan = plan_routes(w, policy, 0.5, _mech("identity"), route="transform")
    skipped = [c for c in the_plan.considered if c.floor is not None]
    assert skipped
    for c in skipped:
        tr = transform(policy, c.tree)
        assert c.floor == pytest.approx(_brute_floor(w, tr, 0.5))
        assert c.expected_mse is None
    best = the_plan.chosen.expected_mse
    assert all(c.floor > best for c in skipped)


# -- native candidates ------------------------------------------------------------------------------
def test_a_native_candidate_reports_its_per_query_error():
    # unconstrained ordered under line(k): prefix counts but the last (public total), Δ = 1;
    # 2 (1/ε)² Σ_j ‖e_j - e_{j+1}‖² / k = 4 (k - 1) / (k ε²) per query of the identity
    k, eps = 5, 0.5
    the_plan = plan_routes(wl.identity(k), policies.line(k), eps, _mech("ordered", constrained=False))
    assert [c.route for c in the_plan.considered] == ["native"]
    assert the_plan.chosen.expected_mse == pytest.approx(4 * (k - 1) / (k * eps**2))
    prefix = plan_routes(wl.prefix(k), policies.line(k), eps, _mech("ordered", constrained=False))
    mech = prefix.mechanism
    assert prefix.chosen.expected_mse == pytest.approx(mech.expected_error(wl.prefix(k), eps, policy=policies.line(k)) / k)
    assert prefix.reason == "ordered is a Blowfish-native mechanism for this policy"


def test_a_native_mechanism_refuses_a_route_or_a_tree():
    policy = policies.line(4)
    message = "mechanism 'ordered' is Blowfish-native: it picks its own measurements (route 'auto', no tree)"
    for route, tree in [("transform", None), ("exact", None), ("auto", policy), ("auto", "bfs"), ("transform", policy)]:
        with pytest.raises(ValueError) as err:
            plan_routes(wl.identity(4), policy, 1.0, _mech("ordered"), route, tree)
        assert str(err.value) == message
    with pytest.raises(ValueError, match="ordered needs a 1-D ordered domain"):
        plan_routes(wl.identity(4), policies.grid((2, 2)), 1.0, _mech("ordered"))


# -- transform candidates ---------------------------------------------------------------------------
class _LargeMarginals(MECHANISMS["laplace"], register=False):
    """The Laplace mechanism that claims to plan every workload without domain-sized arrays."""

    name = "large_marginals"

    def handles_large_domain(self, workload):
        return True


def test_a_marginal_workload_over_a_large_domain_gets_the_exact_route_only():
    big, edge = STRUCTURED_CELLS + 1, STRUCTURED_CELLS
    the_plan = plan_routes(wl.marginals((big,), [(0,)]), policies.line(big), 1.0, _mech("laplace"))
    assert [c.label for c in the_plan.considered] == ["exact"]
    # at exactly STRUCTURED_CELLS cells the transform is still planned
    the_plan = plan_routes(wl.marginals((edge,), [(0,)]), policies.line(edge), 1.0, _mech("laplace"))
    assert [c.label for c in the_plan.considered] == ["exact", f"transform[line({edge}), stretch 1]"]
    # asked for, or through a given tree, the transform is planned on the large domain too
    asked = plan_routes(wl.marginals((big,), [(0,)]), policies.line(big), 1.0, _mech("laplace"), route="transform")
    assert [c.label for c in asked.considered] == [f"transform[line({big}), stretch 1]"]
    line = policies.line(big)
    given = plan_routes(wl.marginals((big,), [(0,)]), line, 1.0, _mech("laplace"), tree=line)
    assert [c.label for c in given.considered] == [f"transform[line({big}), stretch 1]"]


def test_a_small_domain_gets_the_transform_even_when_the_mechanism_handles_large_ones():
    w = wl.marginals((2, 3), [(0,), (1,)])
    the_plan = plan_routes(w, policies.grid((2, 3)), 1.0, _mech("laplace"))
    assert {c.route for c in the_plan.considered} == {"exact", "transform"}
    fake = plan_routes(wl.identity(6), policies.line(6), 1.0, _LargeMarginals())
    assert sorted(c.route for c in fake.considered) == ["exact", "transform"]


def test_a_mechanism_modelling_records_runs_under_dp_policies_only():
    works = ", ".join(sorted(name for name, cls in MECHANISMS.items() if not cls.models_records))
    assert "identity" in works and "uniform" not in works
    for policy in [policies.line(4), policies.grid((2, 2))]:
        with pytest.raises(ValueError) as err:
            plan_routes(wl.identity(4), policy, 1.0, _mech("uniform"))
        assert str(err.value) == (
            f"mechanism 'uniform' models the data as records spread over the cells, but under {policy.name} it "
            "would run on the transformed counts x_G, which are not records, and answer no better than the uniform "
            f"estimate; run it under a DP policy (complete or unbounded), or use one of: {works}")
    the_plan = plan_routes(wl.identity(4), policies.unbounded(4), 1.0, _mech("uniform"))
    assert [c.label for c in the_plan.considered] == ["transform[unbounded(4), stretch 1]"]


# -- chooser candidates -----------------------------------------------------------------------------
def test_a_chooser_lists_every_candidate_of_every_mechanism_and_names_the_skipped_ones():
    w, policy = wl.prefix(4), policies.grid((2, 2))
    chooser = Auto(budget=0, candidates=("ordered", "identity", "uniform", "hb"))
    _, note = chooser.choices(w, policy, "auto")
    the_plan = plan_routes(w, policy, 1.0, chooser)
    expected = []
    for name in ("identity", "hb"):
        expected += [(name, c.label, c.expected_mse, c.floor) for c in plan_routes(w, policy, 1.0, _mech(name)).considered]
    got = [(c.mechanism.name, c.label, c.expected_mse, c.floor) for c in the_plan.considered]
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert len(got) == 14
    assert the_plan.reason == (
        "auto: lowest analytic expected error over ordered, identity, uniform, hb; " + note + "; not applicable: "
        "ordered (ordered needs a 1-D ordered domain, got policy grid((2, 2), theta=1) of shape (2, 2)), "
        "uniform (mechanism 'uniform' models the data as records spread over the cells, but under "
        "grid((2, 2), theta=1) it would run on the transformed counts x_G, which are not records, and answer no "
        "better than the uniform estimate)")
    assert note.startswith("optimized skipped (predicted ") and note.endswith(" s > budget 0 s)")
    assert the_plan.chosen.mechanism.name == "identity"
    assert the_plan.chosen.label == "transform[line((2, 2)), stretch 2]"
    assert the_plan.chosen.expected_mse == pytest.approx(6.0)


def test_a_chooser_without_skipped_candidates_gives_its_note_only():
    w, policy = wl.identity(4), policies.line(4)
    chooser = Auto(budget=0, candidates=("identity", "ordered_hierarchical_tuned"))
    _, note = chooser.choices(w, policy, "auto")
    assert "ordered_hierarchical_tuned skipped (predicted " in note
    the_plan = plan_routes(w, policy, 2.0, chooser)
    assert the_plan.reason == "auto: lowest analytic expected error over identity; " + note
    assert [(c.mechanism.name, c.label) for c in the_plan.considered] == [
        ("identity", "transform[line(4), stretch 1]"), ("identity", "exact")]
    # the exact route of the identity under line: Δ_G = 2, so 2 (2/ε)² per cell
    assert the_plan.considered[1].expected_mse == pytest.approx(2 * (2 / 2.0) ** 2)
    assert {c.epsilon for c in the_plan.considered} == {2.0}


def test_a_chooser_passes_the_route_and_tree_to_its_candidates():
    w, policy = wl.prefix(4), policies.grid((2, 2))
    exact = plan_routes(w, policy, 1.0, Auto(budget=0, candidates=("identity", "hb")), "exact")
    assert [(c.mechanism.name, c.label) for c in exact.considered] == [("identity", "exact"), ("hb", "exact")]
    assert exact.reason.startswith("auto: lowest analytic expected error over identity, hb; optimized ")
    tree = trees.named(policy, "bfs")
    through = plan_routes(w, policy, 1.0, Auto(budget=0, candidates=("identity", "hb")), "auto", "bfs")
    assert [c.mechanism.name for c in through.considered] == ["identity", "hb"]
    assert [c.route for c in through.considered] == ["transform", "transform"]
    assert {c.tree.name for c in through.considered} == {tree.name}


def test_a_chooser_with_no_applicable_candidate_names_itself_and_every_reason():
    chooser = Auto(budget=0, candidates=("ordered", "uniform"))
    with pytest.raises(ValueError) as err:
        plan_routes(wl.prefix(4), policies.grid((2, 2)), 1.0, chooser)
    assert str(err.value) == (
        "no candidate mechanism of auto applies here: "
        "ordered (ordered needs a 1-D ordered domain, got policy grid((2, 2), theta=1) of shape (2, 2)); "
        "uniform (mechanism 'uniform' models the data as records spread over the cells, but under "
        "grid((2, 2), theta=1) it would run on the transformed counts x_G, which are not records, and answer no "
        "better than the uniform estimate)")


# -- Plan.summary and Plan.to_dict ------------------------------------------------------------------
def test_the_summary_of_an_exact_plan_with_skipped_trees():
    the_plan = plan_routes(wl.identity(9), policies.grid((3, 3)), 1.0, _mech("identity"))
    g = "grid((3, 3), theta=1)"
    assert the_plan.summary() == "\n".join([
        f"identity on identity(9) under {g} at ε = 1",
        "spends: ε = 1 per release",
        "route: exact",
        "expected per-query error: MSE 8, RMSE 2.82843",
        "why: auto: lowest analytic expected error",
        "candidates (expected per-query MSE):",
        "  * exact: 8",
        f"    transform[stars({g}), stretch 2]: 14.2222",
        f"    transform[bfs({g}, centre=middle), stretch 3]: skipped (per-query MSE >= 18)",
        "    transform[line((3, 3)), stretch 3]: skipped (per-query MSE >= 18)",
        "    transform[comb((3, 3), spine=1), stretch 3]: skipped (per-query MSE >= 18)",
        f"    transform[mst({g}), stretch 5]: skipped (per-query MSE >= 50)",
        "    transform[snake((3, 3)), stretch 5]: skipped (per-query MSE >= 50)",
    ])
    assert the_plan.to_dict() == {
        "mechanism": "identity", "workload": "identity(9)", "policy": g, "epsilon": 1.0, "route": "exact",
        "tree": None, "stretch": None, "expected_mse": 8.0, "expected_rmse": math.sqrt(8.0),
        "reason": "auto: lowest analytic expected error",
        "candidates": [
            {"candidate": "exact", "expected_mse": 8.0, "skipped_above": None},
            {"candidate": f"transform[stars({g}), stretch 2]", "expected_mse": pytest.approx(128 / 9), "skipped_above": None},
            {"candidate": f"transform[bfs({g}, centre=middle), stretch 3]", "expected_mse": None, "skipped_above": 18.0},
            {"candidate": "transform[line((3, 3)), stretch 3]", "expected_mse": None, "skipped_above": 18.0},
            {"candidate": "transform[comb((3, 3), spine=1), stretch 3]", "expected_mse": None, "skipped_above": 18.0},
            {"candidate": f"transform[mst({g}), stretch 5]", "expected_mse": None, "skipped_above": 50.0},
            {"candidate": "transform[snake((3, 3)), stretch 5]", "expected_mse": None, "skipped_above": 50.0},
        ],
    }


def test_the_summary_of_a_transform_plan_names_the_epsilon_the_mechanism_runs_at():
    the_plan = plan_routes(wl.identity(9), policies.grid((3, 3)), 0.5, _mech("identity"), route="transform")
    g = "grid((3, 3), theta=1)"
    mse = 4 * 128 / 9
    lines = the_plan.summary().split("\n")
    assert lines[:7] == [
        f"identity on identity(9) under {g} at ε = 0.5",
        "spends: ε = 0.5 per release",
        f"route: transform[stars({g}), stretch 2] (the mechanism runs at ε/2)",
        f"expected per-query error: MSE {mse:.6g}, RMSE {math.sqrt(mse):.6g}",
        "why: route='transform': the candidate tree with the lowest analytic expected error",
        "candidates (expected per-query MSE):",
        f"  * transform[stars({g}), stretch 2]: {mse:.6g}",
    ]
    assert lines[7] == f"    transform[bfs({g}, centre=middle), stretch 3]: skipped (per-query MSE >= 72)"
    assert len(lines) == 12
    d = the_plan.to_dict()
    assert (d["route"], d["tree"], d["stretch"]) == ("transform", f"stars({g})", 2)
    assert d["expected_mse"] == pytest.approx(mse) and d["expected_rmse"] == pytest.approx(math.sqrt(mse))
    assert d["epsilon"] == 0.5


def test_the_summary_of_a_plan_without_an_analytic_error():
    the_plan = plan_routes(wl.prefix(8), policies.line(8), 1.0, _mech("dawa"))
    assert the_plan.summary() == "\n".join([
        "dawa on prefix(8) under line(8) at ε = 1",
        "spends: ε = 1 per release",
        "route: transform[line(8), stretch 1] (the mechanism runs at ε/1)",
        "expected per-query error: n/a (no analytic error)",
        "why: the policy is a forest: its exact transform",
        "candidates (expected per-query MSE):",
        "  * transform[line(8), stretch 1]: n/a",
    ])
    assert the_plan.to_dict() == {
        "mechanism": "dawa", "workload": "prefix(8)", "policy": "line(8)", "epsilon": 1.0, "route": "transform",
        "tree": "line(8)", "stretch": 1, "expected_mse": None, "expected_rmse": None,
        "reason": "the policy is a forest: its exact transform",
        "candidates": [{"candidate": "transform[line(8), stretch 1]", "expected_mse": None, "skipped_above": None}],
    }


def test_the_summary_of_a_native_plan():
    the_plan = plan_routes(wl.identity(5), policies.line(5), 0.5, _mech("ordered", constrained=False))
    assert the_plan.summary() == "\n".join([
        "ordered on identity(5) under line(5) at ε = 0.5",
        "spends: ε = 0.5 per release",
        "route: native",
        "expected per-query error: MSE 12.8, RMSE 3.57771",
        "why: ordered is a Blowfish-native mechanism for this policy",
        "candidates (expected per-query MSE):",
        "  * native: 12.8",
    ])
    assert the_plan.to_dict() == {
        "mechanism": "ordered", "workload": "identity(5)", "policy": "line(5)", "epsilon": 0.5, "route": "native",
        "tree": None, "stretch": None, "expected_mse": pytest.approx(12.8), "expected_rmse": pytest.approx(math.sqrt(12.8)),
        "reason": "ordered is a Blowfish-native mechanism for this policy",
        "candidates": [{"candidate": "native", "expected_mse": pytest.approx(12.8), "skipped_above": None}],
    }


def test_the_summary_of_a_chooser_names_the_mechanism_of_every_candidate():
    w, policy = wl.identity(4), policies.line(4)
    chooser = Auto(budget=0, candidates=("identity", "laplace"))
    the_plan = plan_routes(w, policy, 1.0, chooser)
    _, note = chooser.choices(w, policy, "auto")
    reason = f"auto: lowest analytic expected error over identity, laplace; {note}"
    assert the_plan.summary() == "\n".join([
        "auto on identity(4) under line(4) at ε = 1",
        "spends: ε = 1 per release",
        "route: identity: transform[line(4), stretch 1] (the mechanism runs at ε/1)",
        "expected per-query error: MSE 3, RMSE 1.73205",
        f"why: {reason}",
        "candidates (expected per-query MSE):",
        "  * identity: transform[line(4), stretch 1]: 3",
        "    identity: exact: 8",
        "    laplace: exact: 8",
        "    laplace: transform[line(4), stretch 1]: 8",
    ])
    d = the_plan.to_dict()
    assert d == {
        "mechanism": "auto", "workload": "identity(4)", "policy": "line(4)", "epsilon": 1.0, "route": "transform",
        "tree": "line(4)", "stretch": 1, "expected_mse": pytest.approx(3.0), "expected_rmse": pytest.approx(math.sqrt(3.0)),
        "reason": reason,
        "candidates": [
            {"candidate": "identity: transform[line(4), stretch 1]", "expected_mse": pytest.approx(3.0), "skipped_above": None},
            {"candidate": "identity: exact", "expected_mse": pytest.approx(8.0), "skipped_above": None},
            {"candidate": "laplace: exact", "expected_mse": pytest.approx(8.0), "skipped_above": None},
            {"candidate": "laplace: transform[line(4), stretch 1]", "expected_mse": pytest.approx(8.0), "skipped_above": None},
        ],
    }
    assert list(d) == ["mechanism", "workload", "policy", "epsilon", "route", "tree", "stretch", "expected_mse",
                       "expected_rmse", "reason", "candidates"]


# -- Plan.marginals_read ------------------------------------------------------------------------------
def test_marginals_read_is_the_chosen_exact_routes_marginals_or_none():
    shape = (3, 2, 4)
    blocks = policies.partition(np.broadcast_to(np.arange(3).reshape((-1, 1, 1)), shape))
    w = wl.marginals(shape, [(0, 1), (2,)])
    mech = _mech("marginals")
    the_plan = plan_routes(w, blocks, 1.0, mech)
    assert the_plan.chosen.route == "exact"
    assert the_plan.marginals_read() == ((0, 1), (2,), (0,))
    assert the_plan.marginals_read() == mech.marginals_read(w, blocks)
    attribute = plan_routes(w, policies.attribute(shape), 1.0, _mech("marginals"))
    assert attribute.marginals_read() == ((0, 1), (2,), ())
    # chosen through a chooser: the marginals of the mechanism that runs
    chooser = plan_routes(w, blocks, 1.0, Auto(budget=0, candidates=("marginals",)))
    assert chooser.chosen.mechanism.name == "marginals"
    assert chooser.marginals_read() == ((0, 1), (2,), (0,))
    # the histogram is needed: a mechanism without marginals, or a transform route
    assert plan_routes(w, blocks, 1.0, _mech("identity"), route="exact").marginals_read() is None
    assert plan_routes(w, blocks, 1.0, _mech("identity"), route="transform").marginals_read() is None


def test_marginals_read_is_none_for_a_transform_route_of_a_marginal_mechanism():
    class _TransformMarginals(MECHANISMS["identity"], register=False):
        name = "transform_marginals"
        routes = ("transform",)

        def marginals_read(self, workload, policy=None):
            raise AssertionError("a transform route reads the histogram")

    w = wl.marginals((2, 3), [(0,)])
    the_plan = plan_routes(w, policies.grid((2, 3)), 1.0, _TransformMarginals())
    assert the_plan.chosen.route == "transform"
    assert the_plan.marginals_read() is None


# -- Release.to_dict ----------------------------------------------------------------------------------
def test_release_to_dict_of_a_transform_release():
    policy = policies.from_edges(4, [[0, 1], [2, 4]])
    release = bt.answer(wl.prefix(4), np.array([1, 2, 0, 3]), policy, 1.0, _mech("identity"), rng=3, route="transform")
    d = release.to_dict()
    assert d == {
        "answers": release.answers.tolist(), "epsilon": 1.0, "policy": "from_edges(4, 2 edges)", "mechanism": "identity",
        "route": "transform", "tree": "from_edges(4, 2 edges)", "stretch": 1, "workload": "prefix(4)",
        "component_totals": {"1": 3, "3": 3}, "sampler": release.sampler, "secure": False, "expected_mse": 1.5,
        "sensitivity": 1.0, "noise_scale": 1.0,
        "choice": "the policy is a forest: its exact transform; considered: transform[from_edges(4, 2 edges), stretch 1] 1.5",
        "public_counts": None, "unconstrained_answers": None,
    }


def test_release_to_dict_of_a_constrained_release_holds_the_unconstrained_answers():
    x = np.array([1, 0, 2, 1, 3, 0, 1, 2])
    release = bt.answer(wl.prefix(8), x, policies.line(8), 1.0, "laplace", rng=3,
                        constraints=constraints.rectangles(8, [0], [3]), moves="edges")
    d = release.to_dict()
    assert release.unconstrained_answers is not None
    assert d["unconstrained_answers"] == release.unconstrained_answers.tolist()
    assert len(d["unconstrained_answers"]) == 8
    assert d["public_counts"] == {"[0..3]": 4}
    assert d["answers"] == release.answers.tolist()


def _protocol_members(protocol) -> set[str]:
    """The attributes and methods a routes Protocol (and the Protocols it extends) asks for."""
    members = set()
    for base in protocol.__mro__:
        if base is object or base.__name__ in ("Protocol", "Generic"):
            continue
        members |= set(getattr(base, "__annotations__", {}))
        members |= {name for name, value in vars(base).items()
                    if (callable(value) or isinstance(value, property)) and not name.startswith("__")}
    return members


def test_every_registered_mechanism_offers_what_its_route_tags_ask_for():
    """The routes know a mechanism only through the Protocols of blowfish_te.routes: every
    registered class has every member of RoutedMechanism (one contract for every kind), and a
    chooser the members of Chooser (a member missing would fail only when that route is planned)."""
    from blowfish_te import routes
    from blowfish_te.mechanisms import MECHANISMS

    every = _protocol_members(routes.RoutedMechanism)
    assert {"name", "tags", "measure", "expected_error", "serves"} <= every
    for name, cls in MECHANISMS.items():
        tags = routes.MechanismTags.of(cls)
        assert set(tags.routes) <= set(routes.ROUTE_CLASSES), (name, tags.routes)
        wanted = every | (_protocol_members(routes.Chooser) if "choice" in tags.routes else set())
        missing = {m for m in wanted if not hasattr(cls, m)}
        assert not missing, f"{name} lacks {sorted(missing)}"
        assert not getattr(cls, "__abstractmethods__", None), f"{name} leaves {sorted(cls.__abstractmethods__)} abstract"


def test_the_tags_are_one_frozen_object_declared_along_the_class_hierarchy():
    """A mechanism's tags are read from one frozen object; a subclass declares only what differs
    and inherits the rest; the smoothable and linear releases are told by their tags."""
    import dataclasses

    from blowfish_te import mechanisms as M
    from blowfish_te.routes import MechanismTags

    tags = M.Identity().tags
    assert isinstance(tags, MechanismTags) and tags.linear and tags.laplace_on_cells and tags.routes == ("exact", "transform")
    with pytest.raises(dataclasses.FrozenInstanceError):
        tags.linear = False
    assert M.HB().tags.linear and not M.HB().tags.laplace_on_cells
    assert not M.DAWA().tags.linear and M.DAWA().tags.routes == ("transform",)

    class Quiet(M.Identity, register=False):
        sampler = "quiet"

    assert Quiet().tags == dataclasses.replace(tags, sampler="quiet")
    # the analytic candidates auto compares: linear strategies and the natives that compute their error
    from blowfish_te.mechanisms.auto import analytic_mechanisms

    names = analytic_mechanisms()
    assert {"identity", "hb", "ordered", "ordered_hierarchical"} <= set(names) and "dawa" not in names
