"""Blowfish-native mechanisms of He et al. (SIGMOD 2014) §7, against its Thm 7.1 and eqs. (13)-(15)."""

import math

import numpy as np
import pytest

import blowfish_te as bt
from blowfish_te import mechanisms as M
from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms.ordered import oh_constants, oh_optimal_split, oh_predicted_error
from blowfish_te.testing import all_neighbour_pairs, laplace_mse_sd

pytestmark = pytest.mark.core


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
    exact = mech.expected_error(wl.all_ranges(k), 1.0, policy=policy) / (k * (k + 1) / 2)
    assert exact <= oh_predicted_error(k, theta, fanout, 1.0)


def test_ordered_hierarchical_reduces_to_the_ordered_mechanism_at_theta_one():
    k = 50
    oh = M.OrderedHierarchical().expected_error(wl.all_ranges(k), 1.0, policy=policies.line(k))
    ordered = M.Ordered(constrained=False).expected_error(wl.all_ranges(k), 1.0, policy=policies.line(k))
    assert oh == pytest.approx(ordered) and oh / (k * (k + 1) / 2) == pytest.approx(oh_predicted_error(k, 1, 16, 1.0))


def test_ordered_hierarchical_monte_carlo():
    k, eps, trials = 48, 1.0, 300
    mech, policy, w = M.OrderedHierarchical(fanout=4), policies.threshold(48, 8), wl.random_ranges(48, 60, rng=3)
    x = np.random.default_rng(1).integers(0, 9, k)
    truth = w @ x
    mse = np.array([np.mean((bt.answer(w, x, policy, eps, mech, rng=t).answers - truth) ** 2) for t in range(trials)])
    expected = mech.expected_error(w, eps, policy=policy) / w.num_queries
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
    loss = max(np.abs(counts @ (x - y)).sum() for x, y in all_neighbour_pairs(policy)) / scale
    assert loss <= eps * (1 + 1e-9)
    for mech in (M.OrderedHierarchical(fanout=2), M.OrderedHierarchical(fanout=2, spacing=3, ramp=2)):
        _, weighted = mech._plan(policy, eps)  # unit noise after weighting
        loss = max(np.abs(weighted.dense() @ (x - y)).sum() for x, y in all_neighbour_pairs(policy))
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
    oh = M.OrderedHierarchical(16).expected_error(w, eps, policy=policies.unbounded(k)) / w.num_queries
    hb = bt.plan(w, policies.unbounded(k), eps, M.HB(16), route="exact").chosen.expected_mse
    assert oh < 2 * hb
    # the error cached at ε = 1 and scaled by 1/ε² equals the direct computation at ε = 0.25
    mech, policy = M.OrderedHierarchical(16), policies.threshold(k, 8)
    _, weighted = mech._plan(policy, 0.25)
    solver, tree = mech._solver(policy, weighted)
    direct = 2 * solver.lstsq_frobenius_sq(tree.workload(w))
    assert mech.expected_error(w, 0.25, policy=policy) == pytest.approx(direct, rel=1e-9)


# -- the tuned Ordered Hierarchical -------------------------------------------------------------


@pytest.mark.parametrize("k, theta, spacing", [(64, 8, 4), (64, 8, 2), (96, 12, 3), (64, 16, 4), (40, 6, 4)])
def test_s_nodes_every_b_cells_cost_the_block_ends_a_move_can_cross(k, theta, spacing):
    """Δ_S of cumulative counts every b cells under G^θ is ⌈θ/b⌉ (a move of up to θ cells crosses
    that many block ends), computed from the edges and checked against every edge's L1 change."""
    policy = policies.threshold(k, theta)
    groups, weighted = M.OrderedHierarchical(fanout=4, spacing=spacing)._plan(policy, 1.0)
    deltas = {label: delta for label, _, delta, _ in groups}
    assert deltas["S"] == math.ceil(theta / spacing)
    for _, rows, delta, _ in groups:
        dense = rows.dense()
        assert delta == max(np.abs(dense[:, u] - dense[:, v]).sum() for u, v in policy.edges)
    # the weighted rows' sensitivity is the composed ε (unit Laplace after weighting)
    assert bt.sensitivity(weighted, policy) <= 1.0 + 1e-9


@pytest.mark.parametrize("k, theta, spacing, ramp", [(64, 8, 4, 3), (64, 16, 8, 6), (40, 6, 4, 3), (50, 12, 5, 4), (33, 9, 9, 7)])
def test_ramped_s_nodes_cost_no_more_than_steps(k, theta, spacing, ramp):
    """S nodes ramped over w <= b cells: Δ_S from the edges equals every edge's L1 change of the
    dense rows and is at most the steps' ⌈θ/b⌉; the weighted rows still cost ε; the plan's error
    is 2‖W A⁺‖_F² computed densely (n public: the line transform's least squares)."""
    policy, w = policies.threshold(k, theta), wl.prefix(k)
    mech = M.OrderedHierarchical(fanout=4, spacing=spacing, ramp=ramp)
    groups, weighted = mech._plan(policy, 1.0)
    deltas = {label: delta for label, _, delta, _ in groups}
    assert deltas["S"] <= math.ceil(theta / spacing) + 1e-12
    for _, rows, delta, _ in groups:
        dense = rows.dense()
        assert delta == pytest.approx(max(np.abs(dense[:, u] - dense[:, v]).sum() for u, v in policy.edges))
    assert bt.sensitivity(weighted, policy) <= 1.0 + 1e-9
    # n public: unknowns x_0..x_{K-2}, x_{K-1} = n - Σ; the error is that of A on the K - 1 free cells
    a, q = weighted.dense(), w.dense()
    reduce = np.vstack([np.eye(k - 1), -np.ones((1, k - 1))])
    direct = 2 * np.linalg.norm(q @ reduce @ np.linalg.pinv(a @ reduce)) ** 2
    assert mech.expected_error(w, 1.0, policy=policy) == pytest.approx(direct, rel=1e-8)


@pytest.mark.slow
@pytest.mark.parametrize("k, theta, kind", [(256, 32, "prefix"), (256, 8, "ranges"), (128, 4, "prefix"), (120, 30, "ranges")])
def test_tuned_ordered_hierarchical_is_never_worse_than_he_et_al(k, theta, kind):
    """The tuned plan is the best evaluated one, He et al.'s included, and its reported error is
    the exact error of the plan it runs."""
    policy = policies.threshold(k, theta)
    w = wl.prefix(k) if kind == "prefix" else wl.random_ranges(k, 80, rng=1)
    tuned, he = M.TunedOrderedHierarchical(), M.OrderedHierarchical()
    error = tuned.expected_error(w, 0.5, policy=policy)
    assert error <= he.expected_error(w, 0.5, policy=policy) * (1 + 1e-12)
    spacing, share, fanout, ramp = tuned._settings(w, policy)
    same = M.OrderedHierarchical(fanout or 16, spacing=spacing, split=share, ramp=ramp) if share is not None else he
    assert error == pytest.approx(same.expected_error(w, 0.5, policy=policy), rel=1e-12)


def test_tuned_spacing_and_ramps_lower_the_error_under_a_wide_threshold():
    """K = 512, θ = 64, prefixes: S nodes every θ/2 cells, their steps ramped over 3/4 of that,
    with single cells below them beat He et al.'s blocks of θ by more than 25 % (the docs' table:
    30 % at K = 4096), and the same plan with plain steps by more than 8 %."""
    k, theta = 512, 64
    policy, w = policies.threshold(k, theta), wl.prefix(k)
    tuned = M.TunedOrderedHierarchical()
    error = tuned.expected_error(w, 1.0, policy=policy)
    assert error < 0.75 * M.OrderedHierarchical().expected_error(w, 1.0, policy=policy)
    spacing, share, fanout, ramp = tuned._settings(w, policy)
    assert spacing == theta // 2 and fanout == spacing and ramp == 3 * spacing // 4
    steps = M.OrderedHierarchical(fanout, split=share, spacing=spacing)
    assert error < 0.92 * steps.expected_error(w, 1.0, policy=policy)


@pytest.mark.slow
def test_tuned_ordered_hierarchical_monte_carlo_and_seeds():
    k, eps, trials = 64, 1.0, 300
    mech, policy, w = M.TunedOrderedHierarchical(fanout=4), policies.threshold(k, 16), wl.prefix(k)
    x = np.random.default_rng(2).integers(0, 9, k)
    truth = w @ x
    spacing, share, fanout, ramp = mech._settings(w, policy)
    assert spacing is not None and ramp is not None  # a tuned plan, not He et al.'s, wins here
    releases = [bt.answer(w, x, policy, eps, mech, rng=t) for t in range(trials)]
    mse = np.array([np.mean((r.answers - truth) ** 2) for r in releases])
    expected = mech.expected_error(w, eps, policy=policy) / w.num_queries
    _, weighted = mech._plan(policy, eps, spacing, share, fanout, ramp)
    solver, tree = mech._solver(policy, weighted)
    r = np.column_stack([tree.workload(w) @ solver.pinv(e) for e in np.eye(weighted.num_queries)])
    assert expected == pytest.approx(2 * (r**2).sum() / w.num_queries)
    sd = laplace_mse_sd(r.T @ r, 1.0, w.num_queries) / math.sqrt(trials)
    assert abs(mse.mean() - expected) < 4 * sd
    # the plan reads the workload and policy, never the data; the same seed gives the same answers
    other = bt.answer(w, x[::-1].copy(), policy, eps, mech, rng=0)
    assert other.noise_scale == releases[0].noise_scale and other.sensitivity == releases[0].sensitivity
    assert np.array_equal(bt.answer(w, x, policy, eps, mech, rng=0).answers, releases[0].answers)


def test_tuned_ordered_hierarchical_tunes_only_the_split_for_one_block_and_refuses_bad_input():
    k = 64
    tuned = M.TunedOrderedHierarchical()
    assert tuned._candidates(policies.unbounded(k)) == [(k, 16, None)]
    assert tuned._candidates(policies.threshold(4 * k, 64)) == [(64, 16, 45), (32, 16, 24), (32, 32, 24), (16, 16, 12)]
    assert tuned._candidates(policies.threshold(k, 16)) == [(16, 16, 12), (8, 8, 6), (4, 4, 3)]
    assert tuned._candidates(policies.threshold(k, 2)) == [(2, 2, None), (1, 2, None)]
    with pytest.raises(ValueError, match="fanout"):
        M.TunedOrderedHierarchical(fanout=1)
    with pytest.raises(ValueError, match="spacing"):
        M.OrderedHierarchical(spacing=0)
    with pytest.raises(ValueError, match="ramp"):
        M.OrderedHierarchical(ramp=0)
    with pytest.raises(ValueError, match="1-D"):
        tuned.expected_error(wl.identity((2, 2)), 1.0, policy=policies.grid((2, 2)))


@pytest.mark.slow
def test_measurements_are_the_rows_a_release_measures_at_unit_noise():
    """Weighted by ε_g/Δ_g, the measured rows have sensitivity at most ε; with n measured (no
    public total) the error is exactly 2‖W A⁺‖_F² of them; the tuned plan's S nodes are where it
    put them."""
    k, eps = 64, 0.5
    w = wl.prefix(k)
    for mech in (M.OrderedHierarchical(fanout=4), M.TunedOrderedHierarchical(fanout=4)):
        policy = policies.unbounded(k)
        rows = mech.measurements(w, policy, eps)
        assert bt.sensitivity(rows, policy) == pytest.approx(eps)
        dense = rows.dense()
        direct = 2 * np.linalg.norm(w.dense() @ np.linalg.pinv(dense)) ** 2
        assert mech.expected_error(w, eps, policy=policy) == pytest.approx(direct, rel=1e-9)
    policy = policies.threshold(512, 64)
    tuned = M.TunedOrderedHierarchical()
    rows = tuned.measurements(wl.prefix(512), policy, 2.0)
    assert bt.sensitivity(rows, policy) <= 2.0 * (1 + 1e-12)
    spacing, _, _, ramp = tuned._settings(wl.prefix(512), policy)
    s_nodes = rows.parts[0]  # ramps centred on the block ends
    assert np.all(s_nodes.widths == ramp)
    assert np.array_equal(s_nodes.starts + ramp // 2, np.arange(spacing - 1, 511, spacing))
    assert M.OrderedHierarchical().measurements(wl.prefix(1), policies.threshold(1, 1), 1.0) is None
    with pytest.raises(ValueError, match="epsilon"):
        tuned.measurements(wl.prefix(512), policy, 0.0)


@pytest.mark.parametrize("name", ["ordered_hierarchical", "ordered_hierarchical_tuned"])
def test_native_releases_report_their_largest_noise_scale(name):
    """The scale a release reports is the largest one drawn: 1 / the smallest weight of the rows
    it measures at unit scale (the S nodes' and the blocks' scales differ)."""
    k, epsilon = 64, 0.5
    pol, w = policies.threshold(k, 4), wl.prefix(k)
    mech = M.get_mechanism(name)
    rows = mech.measurements(w, pol, epsilon)
    scales = 1.0 / np.unique(np.round(rows.weights, 12))
    assert scales.size > 1
    release = bt.answer(w, np.arange(k), pol, epsilon, mech, rng=0)
    assert release.noise_scale == pytest.approx(scales.max())
