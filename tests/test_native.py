"""Blowfish-native mechanisms of He et al. (SIGMOD 2014) §7, against its Thm 7.1 and eqs. (13)-(15)."""

import math

import numpy as np
import pytest

import blowfish_te as bt
from blowfish_te import mechanisms as M
from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms.ordered import oh_constants, oh_optimal_split, oh_predicted_error

from conftest import laplace_mse_sd
from test_routes import neighbour_pairs


@pytest.mark.parametrize("theta", [1, 3, 8])
def test_ordered_mechanism_thm_7_1(theta):
    """Unconstrained: every range has error 2(Δ/ε)² per noisy end, Δ = θ computed from the edges;
    the average over all ranges is (4 - 8/(k+1)) θ²/ε², at most 4θ²/ε² per query (Thm 7.1)."""
    k, eps = 40, 0.5
    policy = policies.line(k) if theta == 1 else policies.threshold(k, theta)
    release = bt.answer(wl.all_ranges(k), np.ones(k, int), policy, eps, M.Ordered(constrained=False), rng=0)
    assert release.route == "native" and release.sensitivity == theta
    assert release.expected_mse == pytest.approx((4 - 8 / (k + 1)) * theta**2 / eps**2)
    assert release.component_totals == {k - 1: k}  # n is public under a connected policy


def test_constrained_inference_never_hurts_cumulative_counts():
    """Isotonic regression then clipping projects onto a convex set holding the truth: with the same
    noise, the error of the cumulative counts can only shrink."""
    k = 200
    x = np.random.default_rng(0).integers(0, 3, k)
    w, truth = wl.prefix(k), wl.prefix(k) @ x
    for seed in range(30):
        raw = bt.answer(w, x, policies.line(k), 0.2, M.Ordered(constrained=False), rng=seed).answers
        fit = bt.answer(w, x, policies.line(k), 0.2, M.Ordered(), rng=seed).answers
        assert np.sum((fit - truth) ** 2) <= np.sum((raw - truth) ** 2) + 1e-6
        assert (np.diff(fit) >= -1e-9).all() and 0 <= fit[0] and fit[-1] == x.sum()


@pytest.mark.parametrize("k, theta, fanout", [(64, 4, 4), (64, 16, 4), (100, 10, 3), (256, 16, 16), (256, 64, 16)])
def test_ordered_hierarchical_sensitivities_and_eq_15(k, theta, fanout):
    """Δ_S = 1 and Δ_H = 2⌈log_f θ⌉ from the edges, as the paper's proof counts them; the split is
    eq. (15)'s; the exact least-squares error stays below the paper's estimate (its eq. 15 sums the
    errors of single estimators, least squares combines all measurements)."""
    mech, policy = M.OrderedHierarchical(fanout=fanout), policies.threshold(k, theta)
    groups, _ = mech._plan(policy, 1.0)
    deltas = {label: delta for label, _, delta, _ in groups}
    height = math.ceil(round(math.log(theta, fanout), 9))
    assert deltas == {"S": 1.0, "H": 2.0 * height}
    c1, c2 = oh_constants(k, theta, fanout)
    assert oh_optimal_split(k, theta, fanout) == pytest.approx(c1 ** (1 / 3) / (c1 ** (1 / 3) + c2 ** (1 / 3)))
    scales = {label: scale for label, _, _, scale in groups}
    share = oh_optimal_split(k, theta, fanout)
    assert scales["S"] == pytest.approx(1 / share) and scales["H"] == pytest.approx(2 * height / (1 - share))
    exact = mech.expected_error_native(wl.all_ranges(k), 1.0, policy) / (k * (k + 1) / 2)
    assert exact <= oh_predicted_error(k, theta, fanout, 1.0)


def test_ordered_hierarchical_reduces_to_the_ordered_mechanism_at_theta_one():
    k = 50
    oh = M.OrderedHierarchical().expected_error_native(wl.all_ranges(k), 1.0, policies.line(k))
    ordered = M.Ordered(constrained=False).expected_error_native(wl.all_ranges(k), 1.0, policies.line(k))
    assert oh == pytest.approx(ordered) and oh / (k * (k + 1) / 2) == pytest.approx(oh_predicted_error(k, 1, 16, 1.0))


def test_ordered_hierarchical_monte_carlo():
    k, eps, trials = 48, 1.0, 300
    mech, policy, w = M.OrderedHierarchical(fanout=4), policies.threshold(48, 8), wl.random_ranges(48, 60, rng=3)
    x = np.random.default_rng(1).integers(0, 9, k)
    truth = w @ x
    mse = np.array([np.mean((bt.answer(w, x, policy, eps, mech, rng=t).answers - truth) ** 2) for t in range(trials)])
    expected = mech.expected_error_native(w, eps, policy) / w.num_queries
    # the estimate is linear in the noise: R maps the unit-scale noise to answer errors
    _, weighted = mech._plan(policy, eps)
    solver, tree = mech._solver(policy, weighted)
    r = np.column_stack([tree.workload(w) @ solver.pinv(e) for e in np.eye(weighted.num_queries)])
    assert expected == pytest.approx(2 * (r**2).sum() / w.num_queries)
    sd = laplace_mse_sd(r.T @ r, 1.0, w.num_queries) / math.sqrt(trials)
    assert abs(mse.mean() - expected) < 4 * sd


@pytest.mark.parametrize("policy", [policies.line(6), policies.threshold(6, 2), policies.threshold(7, 3),
                                    policies.from_edges(5, [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]])],
                         ids=lambda p: p.name)
def test_native_measurements_are_blowfish_private_on_tiny_domains(policy):
    """Worst-case privacy loss of each native mechanism's Laplace measurements over all neighbours."""
    eps = 0.9
    ordered = M.Ordered()
    counts = ordered._strategy(policy).dense()
    scale = bt.sensitivity(ordered._strategy(policy), policy) / eps
    loss = max(np.abs(counts @ (x - y)).sum() for x, y in neighbour_pairs(policy)) / scale
    assert loss <= eps * (1 + 1e-9)
    _, weighted = M.OrderedHierarchical(fanout=2)._plan(policy, eps)  # unit noise after weighting
    loss = max(np.abs(weighted.dense() @ (x - y)).sum() for x, y in neighbour_pairs(policy))
    assert loss <= eps * (1 + 1e-9)


def test_native_mechanisms_refuse_what_they_cannot_do():
    with pytest.raises(TypeError, match="needs the policy"):
        M.Ordered().run(wl.prefix(4), np.ones(4, int), 1.0)
    with pytest.raises(ValueError, match="1-D"):
        bt.answer(wl.identity((2, 2)), np.ones(4, int), policies.grid((2, 2)), 1.0, "ordered")
    with pytest.raises(ValueError, match="native"):
        bt.answer(wl.prefix(4), np.ones(4, int), policies.line(4), 1.0, "ordered", route="exact")
    with pytest.raises(ValueError, match="split"):
        M.OrderedHierarchical(split=1.5)


def test_ordered_hierarchical_under_unbounded_dp_is_one_hierarchy():
    """Regression: under unbounded DP θ came out as 1 (no cell-to-cell edge), so OH measured every
    prefix at sensitivity K. Now one block of K cells: the error is that of a hierarchy."""
    k, eps = 256, 1.0
    w = wl.all_ranges(k)
    oh = M.OrderedHierarchical(16).expected_error_native(w, eps, policies.unbounded(k)) / w.num_queries
    hb = bt.plan(w, policies.unbounded(k), eps, M.HB(16), route="exact").chosen.expected_mse
    assert oh < 2 * hb
    # the error cached at ε = 1 and scaled by 1/ε² equals the direct computation at ε = 0.25
    mech, policy = M.OrderedHierarchical(16), policies.threshold(k, 8)
    _, weighted = mech._plan(policy, 0.25)
    solver, tree = mech._solver(policy, weighted)
    direct = 2 * solver.lstsq_frobenius_sq(tree.workload(w))
    assert mech.expected_error_native(w, 0.25, policy) == pytest.approx(direct, rel=1e-9)
