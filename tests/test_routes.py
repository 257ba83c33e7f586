"""Cyclic policies: tree embeddings at ε/ℓ, the exact route, the automatic choice, and an exact
privacy-loss check of every linear route on tiny domains."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blowfish_te as bt
from blowfish_te import Mechanism, answer, plan, policies, transform, trees
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import MECHANISMS, LinearMechanism, get_mechanism
from blowfish_te.testing import laplace_mse_sd, policy_routes, worst_case_loss

from tests.helpers import graphs

pytestmark = pytest.mark.core

TINY = [
    policies.line(4),
    policies.threshold(5, 2),
    policies.grid((2, 3)),
    policies.grid((3, 3), theta=2),
    policies.complete(4),
    policies.attribute((2, 3)),
    policies.partition([0, 0, 1, 1, 1]),
    policies.unbounded(3),
    policies.from_edges(4, [[0, 1], [1, 2], [0, 2], [2, 4], [3, 4]]),  # a cycle plus ⊥ (index 4)
]


#: Every registered linear mechanism, with the domains it takes (QuadTree: 2-D grids only).
LINEAR = sorted(name for name, cls in MECHANISMS.items() if issubclass(cls, LinearMechanism))


@pytest.mark.parametrize("policy, mechanism", [
    pytest.param(policy, mechanism, id=f"{mechanism}-{policy.name}") for policy in TINY for mechanism in LINEAR
    if mechanism != "quadtree" or policy.ndim == 2  # QuadTree partitions 2-D grids
])
@pytest.mark.slow
def test_every_linear_route_is_epsilon_blowfish_on_tiny_domains(policy, mechanism):
    """The exact coupling check: shifting the Laplace noise by μ(x) - μ(x') makes the outputs of
    neighbours x, x' identical at a cost of ‖μ(x) - μ(x')‖₁ / b, b the scale the release drew.
    Over all neighbour pairs that cost is at most ε, for the tree routes at ε/ℓ and the exact
    route, for every linear mechanism; some route attains ε, so the bound is tight."""
    eps = 0.7
    rng = np.random.default_rng(policy.size)
    k = policy.size
    workloads = [wl.prefix(policy.shape) if len(policy.shape) == 1 else wl.identity(policy.shape),
                 wl.from_matrix(rng.integers(-2, 3, (3, k)))]
    if MECHANISMS[mechanism].needs_marginals:  # the exact route only, on marginals
        workloads = [wl.marginals(policy.shape, [(a,) for a in range(policy.ndim)] + [()])]
    for workload in workloads:
        losses = {}
        for route, tree in policy_routes(policy):
            if MECHANISMS[mechanism].needs_marginals and route == "transform":
                continue
            losses[(route, tree)] = worst_case_loss(workload, policy, eps, mechanism, route, tree)
            assert losses[(route, tree)] <= eps * (1 + 1e-9), (route, tree, losses[(route, tree)])
        assert max(losses.values()) == pytest.approx(eps)


def test_the_check_catches_a_missing_stretch_factor():
    """Negative control: the hub tree at ε instead of ε/ℓ leaks more than ε."""
    loss = worst_case_loss(wl.prefix(9), policies.threshold(9, 2), 0.7, "identity", "transform", "hub", ignore_stretch=True)
    assert loss > 0.7 * 2.9


@settings(max_examples=40)
@given(graphs(max_cells=4), st.sampled_from(["identity", "laplace"]), st.integers(0, 2**32 - 1))
def test_linear_routes_on_random_small_graphs(case, mechanism, seed):
    k, edges = case
    policy = policies.from_edges(k, np.array(edges, dtype=int).reshape(-1, 2))
    workload = wl.from_matrix(np.random.default_rng(seed).integers(-2, 3, (2, k)))
    for route, tree in policy_routes(policy):
        assert worst_case_loss(workload, policy, 1.0, mechanism, route, tree) <= 1 + 1e-9


def test_tree_route_runs_the_mechanism_at_epsilon_over_stretch():
    class Probe(Mechanism):
        name = "probe"

        def run(self, workload, x, epsilon, rng=None):
            self._epsilon = epsilon
            return workload @ x

    probe = Probe()
    x = np.arange(20)
    release = answer(wl.prefix(20), x, policies.threshold(20, 4), 0.9, probe, rng=0, tree="hub")
    assert release.tree == "hub(20, theta=4)" and release.stretch == 3
    assert probe._epsilon == pytest.approx(0.3)
    assert np.array_equal(release.answers, wl.prefix(20) @ x)
    release = answer(wl.prefix(20), x, policies.threshold(20, 4), 0.9, probe, rng=0, tree=trees.line(20))
    assert release.stretch == 4 and probe._epsilon == pytest.approx(0.9 / 4)


def test_expected_error_scales_with_the_stretch_squared():
    w, policy = wl.random_ranges(200, 300, rng=1), policies.threshold(200, 8)
    for name in ["hub", "line", "stars"]:
        chosen = plan(w, policy, 1.0, "identity", tree=name).chosen
        tr = transform(policy, chosen.tree)
        unit = get_mechanism("identity").expected_error(tr.workload(w), 1.0) / w.num_queries
        assert chosen.expected_mse == pytest.approx(unit * tr.stretch**2)


def test_automatic_choice_takes_the_lowest_expected_error_and_says_why():
    w, x = wl.random_ranges(300, 500, rng=2), np.zeros(300, int)
    policy = policies.threshold(300, 16)
    the_plan = plan(w, policy, 1.0, "identity")
    errors = [c.expected_mse for c in the_plan.considered]
    assert errors == sorted(errors) and len(errors) == len(trees.candidates(policy)) + 1
    assert the_plan.chosen.tree.name == "hub(300, theta=16)"
    release = answer(w, x, policy, 1.0, "identity", rng=0)
    assert release.tree == "hub(300, theta=16)" and release.stretch == 3
    assert release.expected_mse == min(errors)
    assert release.choice.startswith("auto: lowest analytic expected error")
    for c in the_plan.considered:
        assert c.label in release.choice
    forced = answer(w, x, policy, 1.0, "identity", rng=0, route="exact")
    assert forced.route == "exact" and forced.tree is None and forced.expected_mse == pytest.approx(8 * w.frobenius_sq() / 500)


def test_forest_policies_compare_the_transform_with_the_exact_route():
    """Review finding: on a star-shaped forest the exact route can be far better for some workloads."""
    star = policies.from_edges(50, [[0, i] for i in range(1, 50)])
    w = wl.from_matrix(np.eye(50)[:1])
    release = answer(w, np.ones(50, int), star, 1.0, rng=0, mechanism="identity")
    assert release.route == "exact" and release.expected_mse == pytest.approx(8.0)
    assert "transform[" in release.choice and "98" in release.choice


def test_tree_arguments():
    w, policy = wl.prefix(10), policies.threshold(10, 3)
    with pytest.raises(ValueError, match="unknown tree 'ladder'.*known trees"):
        answer(w, np.zeros(10, int), policy, 1.0, tree="ladder", mechanism="identity")
    with pytest.raises(ValueError, match="transform route"):
        answer(w, np.zeros(10, int), policy, 1.0, route="exact", tree="hub")
    with pytest.raises(TypeError, match="tree"):
        answer(w, np.zeros(10, int), policy, 1.0, tree=3)


@pytest.mark.parametrize("policy", [policies.threshold(12, 3), policies.grid((3, 4)), policies.unbounded(12)])
def test_tree_names_are_one_table_for_errors_releases_and_arguments(policy):
    """The name an error suggests is accepted, and a release's tree name starts with the name that
    reproduces it."""
    x = np.arange(12) % 5
    for name in trees.TREES:
        try:
            tree = trees.named(policy, name)
        except ValueError:  # a tree that does not fit this domain (hub in 2-D, line without ⊥)
            continue
        release = answer(wl.prefix(policy.shape), x, policy, 1.0, "identity", rng=0, tree=name)
        assert release.tree == tree.name and release.tree.split("(")[0] == name
    if not policy.is_forest:
        class Probe(Mechanism):
            name = "probe_tree_names"

            def run(self, workload, x, epsilon, rng=None):
                return workload @ x

        with pytest.raises(bt.CyclicPolicyError) as refused:
            answer(wl.prefix(policy.shape), x, policy, 1.0, Probe(), rng=0)
        suggested = re.search(r"tree='(\w+)'", str(refused.value)).group(1)
        assert answer(wl.prefix(policy.shape), x, policy, 1.0, Probe(), rng=0, tree=suggested).route == "transform"


REFERENCE = {4: 72, 16: 180, 64: 600}


@pytest.mark.parametrize("theta", [4, 16, 64])
def test_hub_tree_reference_values_are_independent_of_k(theta):
    """Reference errors: threshold θ, hub tree + identity at ε/3, ε = 1, 3000 random ranges."""
    values = []
    for k in (1024, 4096):
        w = wl.random_ranges(k, 3000, rng=k)
        the_plan = plan(w, policies.threshold(k, theta), 1.0, "identity", tree="hub")
        values.append(the_plan.chosen.expected_mse)
        assert the_plan.chosen.expected_mse == pytest.approx(REFERENCE[theta], rel=0.05)
    assert values[0] == pytest.approx(values[1], rel=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("theta", [4, 16, 64])
def test_hub_tree_reference_values_by_monte_carlo(theta):
    k, trials = 1024, 400
    w, policy = wl.random_ranges(k, 3000, rng=k), policies.threshold(k, theta)
    x = np.random.default_rng(3).integers(0, 20, k)
    truth = w @ x
    mse = np.array([np.mean((answer(w, x, policy, 1.0, "identity", rng=t, tree="hub").answers - truth) ** 2) for t in range(trials)])
    tr = transform(policy, trees.candidates(policy)["hub"])
    w_t = tr.workload(w).dense()
    sd = laplace_mse_sd(w_t.T @ w_t, tr.stretch / 1.0, w.num_queries) / math.sqrt(trials)
    expected = plan(w, policy, 1.0, tree="hub").chosen.expected_mse
    assert abs(mse.mean() - expected) < 4 * sd
    assert 4 * sd < 0.05 * expected and mse.mean() == pytest.approx(REFERENCE[theta], rel=0.05)


def test_data_dependent_mechanisms_need_a_tree_on_cyclic_policies():
    class Probe(Mechanism):
        name = "probe"

        def run(self, workload, x, epsilon, rng=None):
            return workload @ x

    with pytest.raises(bt.CyclicPolicyError, match="spanning tree"):
        answer(wl.prefix(6), np.ones(6, int), policies.grid((2, 3)), 1.0, Probe(), rng=0)
    assert answer(wl.prefix(6), np.ones(6, int), policies.grid((2, 3)), 1.0, Probe(), rng=0, tree="snake").stretch == 5


def test_large_cliques_never_list_their_edges():
    """Review finding: candidate trees listed O(K²) clique pairs (complete(65536) ran out of memory)."""
    import tracemalloc

    tracemalloc.start()
    complete = policies.complete(65536)
    named = trees.candidates(complete)
    labels = np.arange(40_000) % 2  # two blocks of 20 000 cells: 4e8 edges
    the_plan = plan(wl.random_ranges(40_000, 50, rng=0), policies.partition(labels), 1.0, mechanism="identity")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 400 * 2**20
    assert set(named) == {"stars", "line", "hub"} and trees.stretch(complete, named["stars"], histogram=False).maximum == 2
    assert the_plan.chosen.stretch == 2 or the_plan.chosen.route == "exact"


def test_stars_follow_the_components():
    policy = policies.partition([0, 1, 0, 1, 2])
    tree = trees.stars(policy)
    assert tree.n_components == policy.n_components and trees.stretch(policy, tree).maximum == 1
    with_bottom = policies.from_edges(4, [[0, 1], [1, 4], [2, 3]])
    assert edge_pairs(trees.stars(with_bottom)) == {(0, 4), (1, 4), (2, 3)}


def edge_pairs(policy):
    return {(int(u), int(v)) for u, v in policy.edges}


def test_refusal_counts_the_separated_clique_edges():
    path = policies.from_edges(40, [[i, i + 1] for i in range(38)])  # cell 39 isolated
    with pytest.raises(ValueError, match="of 39 edges"):
        transform(policies.complete(40), path)


def test_an_isolated_bottom_node_is_no_bottom():
    import networkx as nx

    g = nx.cycle_graph(4)
    g.add_node(bt.BOTTOM)
    policy = policies.from_networkx(g)
    assert not policy.has_bottom
    assert answer(wl.identity(4), np.ones(4, int), policy, 1.0, rng=0, tree=trees.line(4), mechanism="identity").stretch == 3


def test_noiseless_releases_report_what_they_disclose():
    labels = np.array([0, 0, 1, 1])
    totals = wl.from_matrix([[1, 1, 0, 0], [0, 0, 1, 1.0]])
    x = np.array([3, 4, 5, 6])
    exact = answer(totals, x, policies.partition(labels), 1.0, "laplace", rng=0, route="exact")
    assert exact.noise_scale == 0 and exact.component_totals == {1: 7, 3: 11}
    through = answer(totals, x, policies.partition(labels), 1.0, "identity", rng=0, route="transform")
    assert through.noise_scale == 0 and through.sampler.startswith("none") and np.array_equal(through.answers, [7, 11])
