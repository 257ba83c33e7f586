"""Hierarchical mechanisms (H2, HB, QuadTree, GreedyH): branching rules against exhaustive search
in exact arithmetic, the measured trees (root, level weights, sensitivity) read off the dense
strategies, the Laplace noise actually drawn at several ε, and the privacy cost replayed."""

import math
from fractions import Fraction

import numpy as np
import pytest

import blowfish_te.mechanisms.base as base
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te.testing import added_records, assert_laplace_noise, replayed_runs

pytestmark = pytest.mark.core

EPSILONS = (0.3, 1.0, 3.5)


def _height(n: int, b: int) -> int:
    """Number of b-ary levels below the root needed to reach n cells (⌈log_b n⌉, in integers)."""
    h, reach = 0, 1
    while reach < n:
        reach, h = reach * b, h + 1
    return h


def _branching_1d(n: int) -> int:
    """Exhaustive search over every b in 2..n of V(b) = (b - 1) h³ - 2 (b + 1) h² / 3, exactly;
    ties go to the smaller b."""
    def variance(b):
        h = _height(n, b)
        return (b - 1) * h**3 - Fraction(2 * (b + 1) * h**2, 3)

    return min(range(2, max(n, 2) + 1), key=lambda b: (variance(b), b))


def _branching_2d(side: int) -> int:
    """Exhaustive search over every b in 2..side of b·h², ties to the smaller b."""
    return min(range(2, max(side, 2) + 1), key=lambda b: (b * _height(side, b) ** 2, b))


def _levels(dense: np.ndarray) -> dict:
    """Rows of a dense tree strategy grouped by the number of cells they cover: {size: weights}."""
    by_size = {}
    for row in dense:
        support = np.flatnonzero(row)
        assert np.allclose(row[support], row[support[0]])  # a weighted indicator of a box
        by_size.setdefault(support.size, []).append(row[support[0]])
    return {size: np.array(weights) for size, weights in by_size.items()}


def _recorded_noise(monkeypatch, mech, workload, x, epsilon, releases):
    """The Laplace noise the mechanism adds to A x over ``releases`` seeded releases, and the scales."""
    draws, scales = [], []
    real = base.add_laplace

    def spy(values, scale, rng, *, sensitivity, integer):
        out = real(values, scale, rng, sensitivity=sensitivity, integer=integer)
        draws.append(out - values)
        scales.append(scale)
        return out

    monkeypatch.setattr(base, "add_laplace", spy)
    for seed in range(releases):
        mech.release(workload, x, epsilon, rng=seed)
    monkeypatch.undo()
    return np.concatenate(draws), set(scales)



# -- branching rules ------------------------------------------------------------------------------


def test_qardaji_branching_is_the_exact_minimiser_of_the_range_variance():
    # every n up to 300 covers ties of V (n = 213, 229), n = 16² + 1 (b = 17 has height 2, b = 16
    # height 3) and the ranges where V's two terms trade places (213..236)
    for n in list(range(1, 301)) + [1025, 2117, 4097]:
        assert M.qardaji_branching(n) == _branching_1d(n), n
    assert M.qardaji_branching(257) == 17 and M.qardaji_branching(213) == 15


def test_qardaji_branching_2d_is_the_exact_minimiser_of_b_h_squared():
    for side in range(1, 200):
        assert M.qardaji_branching_2d(side) == _branching_2d(side), side
    assert [M.qardaji_branching_2d(s) for s in (1, 2, 3)] == [2, 2, 3]


@pytest.mark.parametrize("rule, name", [(M.qardaji_branching, "n"), (M.qardaji_branching_2d, "side")])
def test_branching_rules_refuse_non_positive_sizes_naming_the_argument(rule, name):
    for bad in (0, -3):
        with pytest.raises(ValueError, match=f"^{name} must be an integer >= 1, got {bad}$"):
            rule(bad)
    with pytest.raises(TypeError, match=f"^{name} must be an integer"):
        rule(4.0)


# -- H2 and HB: which levels are measured, and Δ --------------------------------------------------


@pytest.mark.parametrize("k", [5, 16, 23])
def test_h2_measures_every_level_with_the_root(k):
    a = M.H2().strategy(wl.prefix(k)).dense()
    levels = _levels(a)
    assert k in levels and np.array_equal(levels[k], [1.0])  # the total is measured, weight 1
    assert all(np.all(w == 1.0) for w in levels.values()) and np.array_equal(levels[1], np.ones(k))
    delta = np.abs(a).sum(0).max()  # brute force: largest column L1 norm
    assert delta == math.ceil(math.log2(k)) + 1
    for eps in EPSILONS:
        release = M.H2().release(wl.prefix(k), np.arange(k), eps, rng=0)
        assert release.sensitivity == delta and release.noise_scale == pytest.approx(delta / eps, rel=1e-15)


@pytest.mark.parametrize("k", [8, 13])
def test_hb_leaves_the_root_out_unless_asked(k):
    w, x = wl.prefix(k), np.arange(k)
    without = M.HB(branching=2).strategy(w).dense()
    assert k not in _levels(without)
    with_root = M.HB(branching=2, root=True).strategy(w).dense()
    assert np.array_equal(_levels(with_root)[k], [1.0])
    h = _height(k, 2)
    assert np.abs(without).sum(0).max() == h and np.abs(with_root).sum(0).max() == h + 1
    for eps in EPSILONS:
        assert M.HB(branching=2).release(w, x, eps, rng=0).noise_scale == pytest.approx(h / eps, rel=1e-15)
        assert M.HB(branching=2, root=True).release(w, x, eps, rng=0).noise_scale == pytest.approx((h + 1) / eps, rel=1e-15)
    one_cell = M.HB().release(wl.identity(1), np.array([4]), 1.0, rng=0)  # only the root to measure
    assert one_cell.sensitivity == 1.0


def test_hb_branching_follows_the_rule_of_the_domain_dimension():
    assert M.HB().strategy(wl.prefix(64)).hierarchy.branching == _branching_1d(64) == 64
    assert M.HB().strategy(wl.prefix(300)).hierarchy.branching == _branching_1d(300) == 18
    assert M.HB().strategy(wl.identity((32, 8))).hierarchy.branching == _branching_2d(32) == 6
    assert M.HB(branching=5).strategy(wl.prefix(300)).hierarchy.branching == 5


def test_hb_and_h2_noise_drawn_is_laplace_of_the_tree_height_over_epsilon(monkeypatch):
    k, x = 16, np.random.default_rng(3).integers(0, 9, 16)
    for mech, delta in [(M.H2(), 5.0), (M.HB(branching=2), 4.0), (M.HB(branching=4, root=True), 3.0)]:
        for eps in (0.5, 2.0):
            noise, scales = _recorded_noise(monkeypatch, mech, wl.prefix(k), x, eps, 60)
            assert scales == {delta / eps}
            assert_laplace_noise(noise, delta / eps)


@pytest.mark.parametrize("mech", [lambda: M.H2(), lambda: M.HB(branching=3), lambda: M.QuadTree()], ids=["h2", "hb", "quadtree"])
def test_replayed_privacy_cost_is_epsilon_on_the_worst_neighbour(mech, monkeypatch):
    w = wl.prefix(9)
    x = np.random.default_rng(1).integers(0, 5, 9)
    for eps in (0.4, 2.5):
        mechanism = mech()
        scale = mechanism.release(w, x, eps, rng=0).noise_scale
        def answers(data, mechanism=mechanism, eps=eps):
            return mechanism.release(w, data, eps, rng=0).answers

        replays = replayed_runs(monkeypatch, answers, x, added_records(x), (base,))
        assert all(replay.scales == [scale] for replay in replays)
        assert max(replay.cost for replay in replays) == pytest.approx(eps, rel=1e-12)
        monkeypatch.undo()


def test_hb_argument_checks_name_the_argument():
    with pytest.raises(ValueError, match="^branching must be an integer >= 2, got 1$"):
        M.HB(branching=1)
    with pytest.raises(TypeError, match="^branching must be an integer"):
        M.HB(branching=2.0)


# -- QuadTree: geometric and uniform budgets ------------------------------------------------------


def test_quadtree_geometric_budget_grows_by_the_cube_root_of_two_per_level_and_sums_to_one():
    w = wl.identity((8, 8))
    for mech in (M.QuadTree(), M.QuadTree(budget="geometric")):
        a = mech.strategy(w).dense()
        levels = _levels(a)
        assert sorted(levels) == [1, 4, 16, 64]  # root, then quarters down to single cells
        per_level = [levels[s] for s in (64, 16, 4, 1)]
        assert [v.size for v in per_level] == [1, 4, 16, 64]
        assert all(np.ptp(v) == 0 for v in per_level)  # one weight per level
        weights = np.array([v[0] for v in per_level])
        assert np.allclose(weights[1:] / weights[:-1], 2 ** (1 / 3), rtol=1e-12, atol=0)
        assert np.allclose(np.abs(a).sum(0), 1.0, rtol=1e-12)  # every cell's path sums to 1: Δ = 1
        assert weights.sum() == pytest.approx(1.0, rel=1e-12)


def test_quadtree_uniform_budget_splits_evenly_over_the_levels():
    a = M.QuadTree(budget="uniform").strategy(wl.identity((8, 8))).dense()
    levels = _levels(a)
    assert sorted(levels) == [1, 4, 16, 64]
    assert all(np.allclose(v, 0.25, rtol=1e-12) for v in levels.values())


def test_quadtree_on_uneven_domains_keeps_the_root_and_unit_sensitivity():
    for budget in ("geometric", "uniform"):
        a = M.QuadTree(budget=budget).strategy(wl.identity((5, 3))).dense()
        assert 15 in _levels(a)  # the root
        assert np.abs(a).sum(0).max() == pytest.approx(1.0, rel=1e-12)


def test_quadtree_noise_drawn_is_laplace_one_over_epsilon(monkeypatch):
    w = wl.identity((4, 4))
    x = np.random.default_rng(2).integers(0, 9, 16)
    for budget in ("geometric", "uniform"):
        for eps in EPSILONS:
            release = M.QuadTree(budget=budget).release(w, x, eps, rng=0)
            assert release.sensitivity == pytest.approx(1.0, rel=1e-12)
            noise, scales = _recorded_noise(monkeypatch, M.QuadTree(budget=budget), w, x, eps, 80)
            assert len(scales) == 1 and scales.pop() == pytest.approx(1.0 / eps, rel=1e-12)
            assert_laplace_noise(noise, 1.0 / eps)


def test_quadtree_budget_argument_check():
    with pytest.raises(ValueError, match="^budget must be 'geometric' or 'uniform', got 'linear'$"):
        M.QuadTree(budget="linear")


# -- GreedyH --------------------------------------------------------------------------------------


def test_greedyh_defaults_are_binary_on_a_grid_of_100():
    w = wl.all_ranges(16)
    default = M.GreedyH().strategy(w)
    explicit = M.GreedyH(branching=2, grid=100, rule="dawa").strategy(w)
    assert default.hierarchy.branching == 2
    assert np.array_equal(default.node_weights, explicit.node_weights)
    root = default.node_weights[0]  # 1 - p for the root's share p on the grid 1 - j/100
    assert 0 < root < 1 and root * 100 == pytest.approx(round(root * 100), abs=1e-9)
    assert not np.allclose(default.node_weights, M.GreedyH(grid=101).strategy(w).node_weights)


def test_greedyh_exact_rule_optimises_the_true_error():
    """With rule "exact" the greedy score at the root is ‖W A⁺‖_F² of the chosen strategy; Δ = 1
    so the expected error is 2 score / ε²."""
    w = wl.random_ranges(24, 30, rng=3)
    exact, dawa = M.GreedyH(rule="exact"), M.GreedyH(rule="dawa")
    score = exact.strategy(w).selection_score
    for eps in EPSILONS:
        assert exact.expected_error(w, eps) == pytest.approx(2 * score / eps**2, rel=1e-9)
    assert dawa.strategy(w).selection_score != pytest.approx(dawa.strategy(w).lstsq_frobenius_sq(w), rel=1e-3)
    assert not np.allclose(exact.strategy(w).node_weights, dawa.strategy(w).node_weights)


def test_greedyh_noise_is_calibrated_to_unit_sensitivity(monkeypatch):
    w, x = wl.prefix(16), np.arange(16)
    for mech in (M.GreedyH(), M.GreedyH(branching=3, grid=2), M.GreedyH(rule="exact")):
        a = mech.strategy(w).dense()
        assert np.abs(a).sum(0).max() == pytest.approx(1.0, rel=1e-12)
        for eps in EPSILONS:
            assert mech.release(w, x, eps, rng=0).noise_scale == pytest.approx(1.0 / eps, rel=1e-12)
    coarse = M.GreedyH(grid=2).strategy(w).node_weights
    assert set(np.round(coarse[coarse > 0] * 2 ** 10, 9)) <= {float(2**j) for j in range(11)}  # shares 1 or 1/2


def test_greedyh_argument_checks_name_the_argument():
    with pytest.raises(ValueError, match="^branching must be an integer >= 2, got 1$"):
        M.GreedyH(branching=1)
    with pytest.raises(TypeError, match="^branching must be an integer"):
        M.GreedyH(branching=None)
    with pytest.raises(ValueError, match="^grid must be an integer >= 2, got 1$"):
        M.GreedyH(grid=1)
    with pytest.raises(TypeError, match="^grid must be an integer"):
        M.GreedyH(grid=None)
    with pytest.raises(ValueError, match="^rule must be 'dawa' or 'exact', got 'other'$"):
        M.GreedyH(rule="other")
    assert M.GreedyH(rule="exact").rule == "exact" and M.GreedyH(grid=2).grid == 2
