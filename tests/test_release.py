import dataclasses
import math
import re

import numpy as np
import pytest

import blowfish_te as bt
from blowfish_te import Mechanism, answer, policies, transform
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import DirectLaplace, Identity, get_mechanism
from blowfish_te.testing import Replay, close, laplace_mse_sd

pytestmark = pytest.mark.core

X64 = np.random.default_rng(0).integers(0, 50, 64)


def _monte_carlo(w, x, policy, epsilon, mechanism, trials, route="auto"):
    truth = w @ x
    return np.array(
        [np.mean((answer(w, x, policy, epsilon, mechanism, rng=t, route=route).answers - truth) ** 2) for t in range(trials)]
    )


@pytest.mark.parametrize("build, closed_form_mse", [
    (wl.prefix, lambda k: 2 * (k - 1) / k),
    (wl.all_ranges, lambda k: 4 - 8 / (k + 1)),
])
def test_transformed_laplace_error_matches_its_closed_form_and_monte_carlo(build, closed_form_mse):
    """Identity under line(k) has per-query MSE 2/ε²·(k-1)/k on prefixes and
    (4 - 8/(k+1))/ε² on all ranges, analytically and by a seeded Monte-Carlo test whose
    tolerance is 4 standard errors of the mean, from the exact variance of a Laplace quadratic form."""
    k, epsilon, trials = 64, 0.5, 400
    w, policy = build(k), policies.line(k)
    release = answer(w, X64, policy, epsilon, "identity", rng=0)
    assert release.expected_mse == pytest.approx(closed_form_mse(k) / epsilon**2, rel=1e-12)
    mse = _monte_carlo(w, X64, policy, epsilon, "identity", trials)
    w_g = transform(policy).workload(w).dense()
    sd = laplace_mse_sd(w_g.T @ w_g, 1 / epsilon, w.num_queries)
    assert 4 * sd / math.sqrt(trials) < 0.06 * release.expected_mse  # the check has power
    assert abs(mse.mean() - release.expected_mse) < 4 * sd / math.sqrt(trials)


def test_reference_values_for_other_routes():
    k, eps = 256, 1.0
    x = np.zeros(k, dtype=int)
    dp = answer(wl.all_ranges(k), x, policies.unbounded(k), eps, "identity", rng=0)
    assert dp.expected_mse == pytest.approx(2 * (k + 2) / 3)
    assert answer(wl.all_ranges(k), x, policies.line(k), eps, "identity", rng=0).expected_mse == pytest.approx(3.9689, abs=1e-4)
    direct = answer(wl.prefix(k), x, policies.threshold(k, 16), eps, "laplace", rng=0, route="exact")
    assert direct.route == "exact" and direct.sensitivity == 16
    assert direct.expected_mse == pytest.approx(2 * 16**2)


@pytest.mark.parametrize("w, policy, mechanism, delta", [
    (wl.identity(64), policies.complete(64), "identity", 2),  # exact route, bounded DP
    (wl.prefix(64), policies.threshold(64, 4), "laplace", 4),  # exact route, Thm 5.1
    (wl.prefix(64), policies.line(64), "laplace", 1),          # transform route
])
def test_calibrated_laplace_matches_its_expected_error(w, policy, mechanism, delta):
    """Monte-Carlo within 4 standard errors (about 6% here) of 2 (Δ/ε)² ‖R‖_F² / m."""
    eps, trials = 1.0, 300
    release = answer(w, X64, policy, eps, mechanism, rng=0)
    assert release.sensitivity == delta
    mse = _monte_carlo(w, X64, policy, eps, mechanism, trials)
    # i.i.d. Laplace(Δ/ε) on each answer (laplace) or on each cell (identity)
    a = np.eye(w.num_queries) if mechanism == "laplace" else w.dense().T @ w.dense()
    sd = laplace_mse_sd(a, delta / eps, w.num_queries)
    assert 4 * sd / math.sqrt(trials) < 0.07 * release.expected_mse
    assert abs(mse.mean() - release.expected_mse) < 4 * sd / math.sqrt(trials)


def test_direct_laplace_routes_agree_on_forests():
    """On a forest, Laplace on W_G x_G plus offset is Laplace on W x with Δ_G(W)."""
    w, policy = wl.random_ranges(64, 30, rng=1), policies.line(64)
    a = answer(w, X64, policy, 0.7, "laplace", rng=5, route="transform")
    b = answer(w, X64, policy, 0.7, "laplace", rng=5, route="exact")
    assert a.sensitivity == b.sensitivity == bt.sensitivity(w, policy)
    assert np.allclose(a.answers, b.answers)


def test_same_seed_same_release_and_generators_are_accepted():
    w, policy = wl.prefix(64), policies.line(64)
    a = answer(w, X64, policy, 1.0, rng=3).answers
    assert np.array_equal(a, answer(w, X64, policy, 1.0, rng=3).answers)
    assert np.array_equal(a, answer(w, X64, policy, 1.0, rng=np.random.default_rng(3)).answers)
    assert not np.array_equal(a, answer(w, X64, policy, 1.0, rng=4).answers)


def test_release_metadata():
    x = np.array([3, 4, 5, 6, 7])
    release = answer(wl.identity(5), x, policies.partition([0, 0, 1, 1, 2]), 1.0, rng=0, mechanism="identity")
    assert release.component_totals == {1: 7, 3: 11, 4: 7}
    assert release.route == "transform" and release.mechanism == "identity"
    assert release.epsilon == 1.0 and release.workload == "identity(5)"
    assert "numpy" in release.sampler
    assert not release.answers.flags.writeable
    assert answer(wl.identity(5), x, policies.line(5), 1.0, rng=0).component_totals == {4: 25}
    assert answer(wl.identity(5), x, policies.unbounded(5), 1.0, rng=0).component_totals == {}
    assert answer(wl.identity(5), x, policies.complete(5), 1.0, rng=0).component_totals == {}


def test_a_policy_without_edges_releases_exact_answers():
    x = np.array([2, 0, 5])
    release = answer(wl.prefix(3), x, policies.partition([0, 1, 2]), 1.0, rng=0, mechanism="identity")
    assert np.array_equal(release.answers, [2, 2, 7]) and release.expected_mse == 0


class _Recorder(Mechanism, register=False):
    """A (non-private) plumbing probe: records its inputs and returns exact answers."""

    name = "recorder"

    def run(self, workload, x, epsilon, rng=None):
        self._seen = (workload, np.array(x), epsilon)
        return workload @ x


def test_custom_mechanisms_receive_the_transformed_pair():
    probe = _Recorder()
    policy = policies.line(64)
    w = wl.random_ranges(64, 10, rng=2)
    release = answer(w, X64, policy, 0.3, probe, rng=0)
    workload, x_g, eps = probe._seen
    assert isinstance(workload, bt.TransformedWorkload) and eps == 0.3
    assert np.array_equal(x_g, transform(policy).data(X64))
    assert np.array_equal(release.answers, w @ X64)
    assert release.expected_mse is None and release.sensitivity is None


def test_routes_that_would_not_be_private_are_refused():
    with pytest.raises(bt.CyclicPolicyError, match="spanning tree"):
        answer(wl.prefix(8), np.ones(8, int), policies.threshold(8, 2), 1.0, _Recorder(), rng=0)
    with pytest.raises(ValueError, match="not a linear") as info:
        answer(wl.prefix(8), np.ones(8, int), policies.line(8), 1.0, _Recorder(), rng=0, route="exact")
    assert not isinstance(info.value, bt.CyclicPolicyError)
    # a linear mechanism forced onto the transform route of a cyclic policy goes through a tree
    forced = answer(wl.prefix(8), np.ones(8, int), policies.threshold(8, 2), 1.0, "identity", rng=0, route="transform")
    assert forced.route == "transform" and forced.tree is not None and forced.stretch >= 2


def test_mechanisms_by_name():
    assert isinstance(get_mechanism("identity"), Identity)
    assert isinstance(get_mechanism("laplace"), DirectLaplace)
    probe = _Recorder()
    assert get_mechanism(probe) is probe


GOOD = dict(workload=wl.prefix(4), x=np.array([1, 2, 3, 4]), policy=policies.line(4), epsilon=1.0, mechanism="identity")


@pytest.mark.parametrize(
    "change, exc, words",
    [
        (dict(x=[1, -2, 3, 4]), ValueError, "negative"),
        (dict(x=[1, np.nan, 3, 4]), ValueError, "NaN"),
        (dict(x=[1, 2.5, 3, 4]), ValueError, "fractional"),
        (dict(x=[1, 2, 3]), ValueError, "shape"),
        (dict(x=[[1, 2], [3, 4]]), ValueError, "shape"),
        (dict(x=[True, False, True, True]), TypeError, "boolean"),
        (dict(x=["a", "b", "c", "d"]), TypeError, "numeric"),
        (dict(epsilon=0), ValueError, "epsilon"),
        (dict(epsilon=-1.0), ValueError, "epsilon"),
        (dict(epsilon=float("nan")), ValueError, "epsilon"),
        (dict(epsilon=float("inf")), ValueError, "epsilon"),
        (dict(epsilon="1"), TypeError, "epsilon"),
        (dict(workload=wl.prefix(5)), ValueError, "cells"),
        (dict(policy="line"), TypeError, "policy"),
        (dict(mechanism="gaussian"), ValueError, "unknown mechanism 'gaussian'; known mechanisms: .*identity, laplace"),
        (dict(mechanism=3), TypeError, "mechanism"),
        (dict(route="tree"), ValueError, "route"),
        (dict(rng=-1), ValueError, "rng"),
        (dict(rng=1.5), TypeError, "rng"),
        (dict(rng=np.random.RandomState(0)), TypeError, "rng"),
    ],
)
def test_bad_input_is_named(change, exc, words):
    args = {**GOOD, **change}
    with pytest.raises(exc, match=words):
        answer(**args)


def test_good_inputs_in_other_forms():
    assert answer(np.eye(4), [1.0, 2.0, 3.0, 4.0], policies.line(4), 2, rng=0, mechanism="identity").answers.shape == (4,)
    x2d = np.arange(6).reshape(2, 3)
    assert answer(wl.identity((2, 3)), x2d, policies.grid((2, 3)), 1.0, "laplace", rng=0).answers.shape == (6,)


class _Shape(Mechanism, register=False):
    name = "bad-shape"

    def __init__(self, out):
        self.out = out

    def run(self, workload, x, epsilon, rng=None):
        return self.out


@pytest.mark.parametrize("out, words", [(np.array([1.0]), "shape"), (np.ones((5, 1)), "shape"), (np.full(5, np.nan), "non-finite")])
def test_mechanism_outputs_are_checked(out, words):
    with pytest.raises(ValueError, match=f"bad-shape.*{words}"):
        answer(wl.prefix(5), np.arange(5), policies.line(5), 1.0, _Shape(out), rng=0)


def test_extreme_inputs_are_refused():
    with pytest.raises(ValueError, match="epsilon"):
        answer(wl.prefix(3), np.array([1, 2, 3]), policies.line(3), 1e-320, rng=0)
    with pytest.raises(ValueError, match=r"2\*\*53"):
        answer(wl.prefix(5), np.array([2**62, 2**62, 0, 0, 0]), policies.line(5), 1.0, rng=0)


def test_zero_sensitivity_releases_say_no_noise_was_drawn():
    labels = np.repeat(np.arange(3), 4)
    totals = wl.from_matrix((labels[None, :] == np.arange(3)[:, None]).astype(float))
    release = answer(totals, np.arange(12), policies.partition(labels), 1.0, "laplace", rng=0, route="exact")
    assert release.sensitivity == 0 and release.sampler.startswith("none")
    assert np.array_equal(release.answers, [6, 22, 38])


def test_releases_pickle_and_have_a_json_form():
    import json
    import pickle

    x = np.arange(8) % 3
    release = answer(wl.prefix(8), x, policies.threshold(8, 2), 1.0, "hb", rng=3)
    clone = pickle.loads(pickle.dumps(release))
    assert np.array_equal(clone.answers, release.answers) and clone.policy.name == release.policy.name
    assert clone.choice == release.choice and clone.tree == release.tree
    data = json.loads(json.dumps(release.to_dict()))
    assert data["answers"] == release.answers.tolist() and data["policy"] == "threshold(8, theta=2)"
    assert data["component_totals"] == {str(k): v for k, v in release.component_totals.items()}
    assert set(data) == {f.name for f in dataclasses.fields(release)}


def test_a_plan_is_decided_before_the_data_and_executes_like_answer():
    k = 64
    x = np.arange(k) % 7
    w, policy = wl.prefix(k), policies.threshold(k, 4)
    the_plan = bt.plan(w, policy, 0.5, "hb")
    text = the_plan.summary()
    assert the_plan.chosen.label in text and "threshold(64, theta=4)" in text and "ε = 0.5" in text
    assert all(c.label in text for c in the_plan.considered)
    first, second = the_plan.release(x, rng=4), answer(w, x, policy, 0.5, "hb", rng=4)
    assert np.array_equal(first.answers, second.answers) and first.choice == second.choice
    assert bt.plan(w, policy, 0.5, "hb") is the_plan  # planned once per (mechanism, W, G, ε, route, tree)
    with pytest.raises(ValueError, match="x"):
        the_plan.release(np.ones(k + 1, int), rng=0)


def test_every_route_object_executes_to_one_outcome_type():
    from blowfish_te.routes import ExactRoute, NativeRoute, Outcome, TransformRoute

    k, x = 16, np.arange(16) % 3
    cases = [(policies.line(k), "identity", "transform", TransformRoute), (policies.threshold(k, 3), "hb", "exact", ExactRoute),
             (policies.line(k), "ordered", "auto", NativeRoute)]
    for policy, mechanism, route, cls in cases:
        chosen = bt.plan(wl.prefix(k), policy, 1.0, mechanism, route=route).chosen
        assert isinstance(chosen, cls)
        outcome = chosen.execute(x, np.random.default_rng(0))
        assert isinstance(outcome, Outcome) and outcome.answers.shape == (k,)


def test_unbounded_dp_plans_one_route_with_the_error_of_both():
    """Under unbounded DP the transform is the identity: the exact route has the transform's error
    (so only it is computed, and it publishes no totals)."""
    k = 128
    for mechanism in ("hb", "privelet", "identity", "h2"):
        w, policy = wl.random_ranges(k, 50, rng=1), policies.unbounded(k)
        auto = bt.plan(w, policy, 1.0, mechanism)
        assert [c.route for c in auto.considered] == ["exact"]
        forced = bt.plan(w, policy, 1.0, mechanism, route="transform").chosen
        assert forced.expected_mse == pytest.approx(auto.chosen.expected_mse, rel=1e-9)


# -- releases under public count constraints ---------------------------------------------------
def _constrained_prefix_case():
    """prefix(16) under line(16) with the public count of cells 0..7 (16 records in all, 7 in it)."""
    from blowfish_te import constraints

    k = 16
    x = np.bincount([0, 0, 1, 2, 3, 5, 7, 8, 8, 9, 11, 12, 12, 13, 15, 15], minlength=k)
    return wl.prefix(k), x, policies.line(k), constraints.rectangles(k, [0], [7])


@pytest.mark.parametrize("moves, per_move", [("edges", 1), ("any", 15)])
def test_constrained_release_draws_laplace_at_moves_times_the_largest_change_per_move(moves, per_move):
    """Under the constraint, two records move at most (ξ = 2). Along line edges a move changes one
    prefix by 1; moving any record anywhere changes up to 15 prefixes (cell 0 to cell 15). The
    noise drawn, the reported scale and the public count follow, at every ε."""
    w, x, policy, q = _constrained_prefix_case()
    for eps, seed in [(0.25, 1), (1.0, 2), (4.0, 3)]:
        release = answer(w, x, policy, eps, "laplace", rng=seed, constraints=q, moves=moves)
        assert release.route == "constrained" and release.epsilon == eps and not release.secure
        assert release.sensitivity == 2 * per_move
        assert release.noise_scale == pytest.approx(2 * per_move / eps, rel=1e-12)
        drawn = release.unconstrained_answers - w @ x
        assert close(drawn, np.random.default_rng(seed).laplace(0.0, 2 * per_move / eps, 16), release.unconstrained_answers)
        assert release.public_counts == {"[0..7]": 7}
        assert release.answers[7] == pytest.approx(7, abs=1e-4)  # the prefix of x̂ over cells 0..7 fits the public count


def test_constrained_release_defaults_to_any_moves_in_answer_and_plan():
    w, x, policy, q = _constrained_prefix_case()
    default = answer(w, x, policy, 0.5, "laplace", rng=0, constraints=q)
    explicit = answer(w, x, policy, 0.5, "laplace", rng=0, constraints=q, moves="any")
    assert default.sensitivity == explicit.sensitivity == 30 and default.noise_scale == 60
    assert np.array_equal(default.answers, explicit.answers)
    planned = bt.plan(w, policy, 0.5, "laplace", constraints=q)
    assert planned.chosen.route == "constrained" and planned.chosen.sensitivity == 30
    assert "moves='any'" in planned.summary()
    edges = bt.plan(w, policy, 0.5, "laplace", constraints=q, moves="edges")
    assert edges.chosen.sensitivity == 2 and "moves='edges'" in edges.summary()


def test_constrained_release_privacy_cost_replayed_on_neighbours(monkeypatch):
    """Replaying the drawn noise on a neighbour costs ‖A x − A x'‖₁ / scale, within ε: one record
    moved along an edge (both readings), and two records moved off the edges keeping the public
    count (cells 0 → 15 and 8 → 7, 14 prefixes change) under moves='any'."""
    import blowfish_te.constraints.inference as inference

    w, x, policy, q = _constrained_prefix_case()
    along_edge = x.copy()
    along_edge[[3, 4]] += [-1, 1]
    off_edges = x.copy()
    off_edges[[0, 15, 8, 7]] += [-1, 1, -1, 1]
    assert q.evaluate(along_edge).tolist() == q.evaluate(off_edges).tolist() == q.evaluate(x).tolist()
    cases = [("edges", along_edge, 1 / 2), ("any", along_edge, 1 / 30), ("any", off_edges, 14 / 30)]
    for eps in (0.5, 2.0):
        for moves, neighbour, fraction in cases:
            replay = Replay()
            monkeypatch.setattr(inference, "add_laplace", replay)
            the_plan = bt.plan(w, policy, eps, "laplace", constraints=q, moves=moves)
            first = the_plan.release(x, rng=7)
            replay.replay()
            second = the_plan.release(neighbour, rng=8)
            assert np.array_equal(first.unconstrained_answers, second.unconstrained_answers)
            assert replay.scales == [the_plan.chosen.sensitivity / eps] == [first.noise_scale]
            assert replay.cost == pytest.approx(fraction * eps, rel=1e-12) and replay.cost <= eps


def test_constrained_release_on_the_secure_path():
    w, x, policy, q = _constrained_prefix_case()
    release = answer(w, x, policy, 1.0, "laplace", constraints=q, moves="edges")
    assert release.secure and release.route == "constrained" and release.noise_scale == 2
    assert release.public_counts == {"[0..7]": 7}


@pytest.mark.parametrize("route, tree", [("exact", None), ("transform", None), ("auto", "stars")])
def test_constraints_need_the_auto_route_without_a_tree(route, tree):
    w, x, policy, q = _constrained_prefix_case()
    words = "a release under constraints measures the strategy on x itself: leave route='auto' and tree=None"
    with pytest.raises(ValueError, match="^" + re.escape(words) + "$"):
        answer(w, x, policy, 1.0, "laplace", rng=0, route=route, tree=tree, constraints=q)
    with pytest.raises(ValueError, match="^" + re.escape(words) + "$"):
        bt.plan(w, policy, 1.0, "laplace", route=route, tree=tree, constraints=q)


def test_make_plan_has_the_defaults_of_plan():
    from blowfish_te.release import make_plan

    w, x, policy, q = _constrained_prefix_case()
    plain = make_plan(w, policy, 0.5)
    assert plain.mechanism.name == "auto" and plain.summary() == bt.plan(w, policy, 0.5, "auto").summary()
    constrained = make_plan(w, policy, 0.5, constraints=q)
    assert constrained.chosen.mechanism.name == "identity" and constrained.chosen.route == "constrained"
    assert constrained.summary() == bt.plan(w, policy, 0.5, constraints=q).summary()
    assert make_plan(w, policy, 0.5, "laplace", constraints=q).chosen.sensitivity == 30  # moves='any'


def test_a_parallel_part_fits_only_the_public_counts_of_its_own_records():
    """Scoped constraints: the north part's release fits the count scoped to its records and
    ignores the south's; each part is calibrated to every constraint."""
    from blowfish_te import constraints

    k, north, south = 8, {0, 1, 2}, {3, 4, 5}
    q = constraints.count_queries(k, [[0, 1], [5]], names=["n-low", "s-high"], scopes=[north, south])
    acct = bt.BudgetAccountant(1.0, policies.line(k), constraints=q)
    group = acct.parallel({"north": north, "south": south})
    x = np.bincount([0, 1, 6], minlength=k)
    release = group.answer("north", wl.identity(k), x, 0.5, rng=0, mechanism="identity")
    assert release.route == "constrained" and release.public_counts == {"n-low": 2}
    assert release.answers[:2].sum() == pytest.approx(2, abs=1e-4)
    assert not np.allclose(release.answers, release.unconstrained_answers)
    drawn = release.unconstrained_answers - x
    assert close(drawn, np.random.default_rng(0).laplace(0.0, release.noise_scale, k), release.unconstrained_answers)
    assert release.noise_scale == release.sensitivity / 0.5 and acct.spent == 0.5


def test_the_default_mechanism_is_auto_and_identity_under_constraints():
    """With no mechanism named, a release runs auto's choice (it names the mechanism that ran);
    under constraints, where only a linear mechanism has a known sensitivity, Laplace on the cells."""
    w, x, policy, q = _constrained_prefix_case()
    default = bt.plan(w, policy, 0.5)
    assert default.mechanism.name == "auto" and default.summary() == bt.plan(w, policy, 0.5, "auto").summary()
    assert default.chosen.expected_mse <= bt.plan(w, policy, 0.5, "identity").chosen.expected_mse
    release = answer(w, x, policy, 0.5, rng=0)
    assert release.mechanism == default.chosen.mechanism.name and release.expected_mse == default.chosen.expected_mse
    constrained = bt.plan(w, policy, 0.5, constraints=q)
    assert constrained.chosen.mechanism.name == "identity" and constrained.chosen.route == "constrained"
    with pytest.raises(ValueError, match="'auto' is not linear"):
        bt.plan(w, policy, 0.5, "auto", constraints=q)
