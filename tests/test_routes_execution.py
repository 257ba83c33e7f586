"""What a planned route runs and hands back (``blowfish_te.routes``): the ε each route passes to
its mechanism (ε/ℓ through a tree of stretch ℓ, ε itself under unbounded DP), replayed with the
same seed at several ε; the component totals an exact route discloses when its answers are exact;
the checks on what a mechanism returns; the plan cache's keys; the ranking and the reasons; and
the refusals, matched word for word (Haney, Machanavajjhala, Ding, PVLDB 2015; He,
Machanavajjhala, Ding, SIGMOD 2014)."""

from __future__ import annotations

import numpy as np
import pytest

import blowfish_te as bt
from blowfish_te import policies, routes, transform, trees
from blowfish_te import workloads as wl
from blowfish_te.forest import CyclicPolicyError
from blowfish_te.mechanisms import MECHANISMS
from blowfish_te.routes import Candidate, Outcome, plan_routes, rank_key
from blowfish_te.strategies.marginals import marginal_table
from blowfish_te.testing import close

from tests.helpers import exactly


def _mech(name, **kwargs):
    """A fresh instance (its own plan cache) of a registered mechanism."""
    return MECHANISMS[name](**kwargs)


# -- the ε a route runs its mechanism at ------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [0.25, 1.0, 3.0])
def test_under_unbounded_dp_the_transform_route_runs_the_mechanism_on_the_data_at_epsilon(epsilon):
    w, x = wl.prefix(5), np.array([3, 0, 2, 7, 1])
    release = bt.answer(w, x, policies.unbounded(5), epsilon, _mech("identity"), rng=11, route="transform")
    replay = _mech("identity").measure(w, x, epsilon, np.random.default_rng(11))
    assert release.route == "transform" and release.stretch == 1
    assert np.array_equal(release.answers, replay.answers)
    assert release.noise_scale == replay.noise_scale == pytest.approx(1.0 / epsilon)
    assert release.component_totals == {}


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_a_tree_of_stretch_l_runs_the_mechanism_at_epsilon_over_l(epsilon):
    policy = policies.grid((3, 3))
    w, x = wl.prefix(9), np.arange(9) % 4
    for name in ("bfs", "snake"):
        tree = trees.named(policy, name)
        tr = transform(policy, tree)
        release = bt.answer(w, x, policy, epsilon, _mech("identity"), rng=5, route="transform", tree=name)
        assert release.stretch == tr.stretch
        x_t, totals = tr.data_and_totals(x)
        replay = _mech("identity").measure(tr.workload(w), x_t, epsilon / tr.stretch, np.random.default_rng(5))
        assert close(release.answers, replay.answers + tr.offset(w, totals))
        assert release.noise_scale == pytest.approx(release.sensitivity * tr.stretch / epsilon)
    assert {transform(policy, trees.named(policy, n)).stretch for n in ("bfs", "snake")} != {1}


# -- exact answers from the exact route disclose the component totals --------------------------------
def test_an_exact_route_with_sensitivity_zero_discloses_the_component_totals():
    policy = policies.from_edges(4, [[0, 1], [2, 3]])  # two components, no ⊥
    x = np.array([3, 4, 0, 2])
    w = wl.from_matrix(np.array([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]))  # functions of the totals
    release = bt.answer(w, x, policy, 1.0, _mech("laplace"), rng=0, route="exact")  # measures W itself
    assert release.sensitivity == 0
    assert release.component_totals == {1: 7, 3: 2}
    assert release.answers.tolist() == [7.0, 9.0]
    assert release.sampler == "none (sensitivity 0: exact answers)"


def test_an_exact_route_with_noise_discloses_no_totals():
    # cell 0 moves to ⊥ (Δ = 1 for the identity strategy), cells 1 and 2 are components on their own
    policy = policies.from_edges(3, [[0, 3]])
    release = bt.answer(wl.identity(3), np.array([5, 2, 9]), policy, 1.0, _mech("identity"), rng=0, route="exact")
    assert release.sensitivity == 1.0
    assert release.component_totals == {}


# -- what a mechanism returns is checked -------------------------------------------------------------
class _Returns(MECHANISMS["identity"], register=False):
    """An exact-route plug-in whose measure returns a fixed outcome."""

    name = "returns"
    routes = ("exact",)

    def __init__(self, outcome: Outcome, source: str | None = None):
        self.outcome = outcome
        self.source = source

    def measure(self, workload, x, epsilon, rng=None, policy=None):
        return self.outcome

    def total_source(self):
        return self.source


def test_answers_of_the_wrong_shape_are_refused_naming_the_mechanism():
    mech = _Returns(Outcome(np.zeros(3), sensitivity=1.0))
    with pytest.raises(ValueError, match=exactly("mechanism 'returns' returned an array of shape (3,), expected (4,)")):
        bt.answer(wl.identity(4), np.ones(4, dtype=int), policies.line(4), 1.0, mech, rng=0)
    mech = _Returns(Outcome(np.array([1.0, np.nan, 0.0, 0.0]), sensitivity=1.0))
    with pytest.raises(ValueError, match=exactly("mechanism 'returns' returned non-finite answers")):
        bt.answer(wl.identity(4), np.ones(4, dtype=int), policies.line(4), 1.0, mech, rng=0)


def test_integer_answers_become_read_only_floats():
    mech = _Returns(Outcome([1, 2, 3, 4], sensitivity=1.0, unconstrained_answers=[4, 3, 2, 1]))
    release = bt.answer(wl.identity(4), np.ones(4, dtype=int), policies.line(4), 1.0, mech, rng=0)
    assert release.answers.dtype == np.float64 and release.answers.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert not release.answers.flags.writeable
    assert release.unconstrained_answers.dtype == np.float64 and release.unconstrained_answers.tolist() == [4.0, 3.0, 2.0, 1.0]
    assert not release.unconstrained_answers.flags.writeable


def test_the_choice_lists_the_candidates_then_the_total_source_then_the_notes():
    mech = _Returns(Outcome(np.zeros(2), sensitivity=1.0, notes="the notes"), source="the source")
    release = bt.answer(wl.identity(2), np.ones(2, dtype=int), policies.line(2), 1.0, mech, rng=0)
    assert release.choice == "auto: lowest analytic expected error; considered: exact 8; the source; the notes"
    both = _mech("identity")
    plan = plan_routes(wl.identity(2), policies.line(2), 1.0, both)
    labels = "; ".join(f"{c.label} {c.outcome_text}" for c in plan.considered)
    assert len(plan.considered) == 2
    assert plan.release(np.ones(2, dtype=int), 0).choice == f"auto: lowest analytic expected error; considered: {labels}"


# -- plans are cached per workload, policy, ε, route and tree -----------------------------------------
def test_the_plan_cache_keeps_every_request_apart():
    mech = _mech("identity")
    line, grid = policies.line(6), policies.grid((2, 3))
    prefix, ident = wl.prefix(6), wl.identity(6)
    first = plan_routes(prefix, line, 1.0, mech)
    assert plan_routes(prefix, line, 1.0, mech) is first
    assert plan_routes(prefix, grid, 1.0, mech).policy is grid
    assert plan_routes(ident, line, 1.0, mech).workload is ident
    assert plan_routes(prefix, line, 0.5, mech).epsilon == 0.5
    assert plan_routes(prefix, line, 1.0, mech, route="transform").chosen.route == "transform"
    bfs = plan_routes(prefix, grid, 1.0, mech, route="transform", tree="bfs")
    snake = plan_routes(prefix, grid, 1.0, mech, route="transform", tree="snake")
    assert bfs.chosen.tree.name != snake.chosen.tree.name
    assert plan_routes(prefix, line, 1.0, mech).chosen is first.chosen


def test_a_tree_that_is_neither_a_policy_nor_a_name_is_refused():
    with pytest.raises(TypeError, match=exactly("tree must be a forest Policy or a tree name, got int")):
        plan_routes(wl.prefix(4), policies.line(4), 1.0, _mech("identity"), tree=3)


@pytest.mark.parametrize("tree", ["bfs", "forest"])
def test_a_tree_with_the_exact_route_is_refused(tree):
    policy = policies.grid((2, 2))
    given = trees.named(policy, "bfs") if tree == "forest" else tree
    with pytest.raises(ValueError, match=exactly("tree= applies to the transform route, not to route='exact'")):
        plan_routes(wl.prefix(4), policy, 1.0, _mech("identity"), route="exact", tree=given)


# -- reasons and ranking -----------------------------------------------------------------------------
def test_the_reasons_of_the_exact_route():
    w = wl.prefix(4)
    assert plan_routes(w, policies.line(4), 1.0, _mech("identity"), route="exact").reason == "route='exact' requested"
    assert plan_routes(w, policies.unbounded(4), 1.0, _mech("identity")).reason == (
        "auto: under unbounded DP the transform is the identity, so both routes have this error; exact publishes no totals")

    class _ExactOnly(MECHANISMS["identity"], register=False):
        name = "exact_only"
        routes = ("exact",)

    assert plan_routes(w, policies.line(4), 1.0, _ExactOnly()).reason == "auto: lowest analytic expected error"


def test_with_more_than_one_route_the_reason_is_the_ranking():
    class _TransformFirst(MECHANISMS["identity"], register=False):
        name = "transform_first"
        routes = ("transform", "exact")

    plan = plan_routes(wl.prefix(4), policies.line(4), 1.0, _TransformFirst())
    assert {c.route for c in plan.considered} == {"transform", "exact"}
    assert plan.reason == "auto: lowest analytic expected error"


def test_a_mechanism_without_the_requested_route_is_refused_with_its_routes():
    with pytest.raises(ValueError, match=exactly(
            "mechanism 'dawa' has no exact route: it gets the routes transform (the exact route is for linear "
            "data-independent mechanisms; this one is not a linear data-independent mechanism)")):
        plan_routes(wl.prefix(4), policies.line(4), 1.0, _mech("dawa"), route="exact")


def test_a_data_dependent_mechanism_on_a_cyclic_policy_needs_a_tree():
    with pytest.raises(CyclicPolicyError, match=exactly(
            "grid((2, 2), theta=1) has cycles and mechanism 'dawa' is data-dependent (no exact route, no analytic error "
            "to choose a tree by): pass a spanning tree, e.g. tree='bfs' or a forest policy, to run it at epsilon / "
            "stretch (an (ε/ℓ, T)-Blowfish mechanism is (ε, G)-Blowfish for ℓ the stretch)")):
        plan_routes(wl.prefix(4), policies.grid((2, 2)), 1.0, _mech("dawa"))


def test_rank_key_orders_by_error_then_exact_then_stretch():
    assert rank_key(Candidate(route="exact", expected_mse=2.0)) == (2.0, False, 0)
    assert rank_key(Candidate(route="native", expected_mse=2.0)) == (2.0, True, 0)
    assert rank_key(Candidate(route="transform", expected_mse=2.0, stretch=3)) == (2.0, True, 3)
    assert rank_key(Candidate(route="transform")) == (np.inf, True, 0)
    tied = [Candidate(route="transform", expected_mse=1.0, stretch=1), Candidate(route="exact", expected_mse=1.0 + 1e-12)]
    assert sorted(tied, key=rank_key)[0].route == "exact"


# -- the error floor -------------------------------------------------------------------------------------
def test_a_tree_whose_floor_equals_the_best_error_so_far_is_still_built(monkeypatch):
    w, policy, mech = wl.identity(9), policies.grid((3, 3)), _mech("identity")
    names = list(trees.candidates(policy))
    monkeypatch.setattr(routes, "transform_floor", lambda *args: None)
    built = plan_routes(w, policy, 0.5, _mech("identity"), route="transform")
    first = transform(policy, trees.candidates(policy)[names[0]]).tree.name
    first_mse = next(c.expected_mse for c in built.considered if c.tree.name == first)
    boundary = first_mse * (1 + 1e-9)
    monkeypatch.setattr(routes, "transform_floor", lambda *args: boundary)
    plan = plan_routes(w, policy, 0.5, mech, route="transform")
    second = transform(policy, trees.candidates(policy)[names[1]]).tree.name
    candidate = next(c for c in plan.considered if c.tree.name == second)
    assert candidate.floor is None and candidate.expected_mse is not None


def test_a_skipped_tree_holds_what_it_would_run():
    w, policy, mech = wl.identity(9), policies.grid((3, 3)), _mech("identity")
    plan = plan_routes(w, policy, 0.5, mech, route="transform")
    skipped = [c for c in plan.considered if c.floor is not None]
    assert skipped
    for c in skipped:
        assert c.mechanism is mech and c.workload is w and c.policy is policy and c.epsilon == 0.5


# -- marginal counts instead of a histogram --------------------------------------------------------------
def test_marginal_counts_are_checked_against_the_plan():
    shape = (2, 3)
    x = np.arange(6).reshape(shape)
    w = wl.marginals(shape, [(0,), (1,)])
    policy = policies.attribute(shape)
    plan = plan_routes(w, policy, 1.0, _mech("marginals"))
    needed = plan.marginals_read()
    counts = wl.MarginalCounts(shape, {s: marginal_table(x, shape, s) for s in needed})
    assert plan.check(counts) is counts
    with pytest.raises(ValueError, match=exactly(f"the marginal counts lack [(1,)], which this plan reads; count {list(needed)}")):
        plan.check(wl.MarginalCounts(shape, {s: marginal_table(x, shape, s) for s in needed if s != (1,)}))
    with pytest.raises(ValueError, match=exactly("the marginal counts are over (3, 2), the policy over (2, 3)")):
        plan.check(wl.MarginalCounts((3, 2), {(0,): np.full(3, 2), (1,): np.full(2, 3)}))
    exact = plan_routes(w, policy, 1.0, _mech("identity"), route="exact")
    with pytest.raises(ValueError, match=exactly(
            "route exact needs the histogram, not marginal counts: give x, or plan a mechanism that measures marginals "
            "only (marginals, marginals_optimized)")):
        exact.check(counts)
