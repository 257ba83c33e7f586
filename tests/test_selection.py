"""Structure read from a noisy release, DAWA's cost feature and the private choice built on them."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blowfish_te.partitions import dawa_cost, dawa_costs, dawa_partition
from blowfish_te.selection import HISTOGRAMS, RANGES, Rule, choose, choose_for_ranges, fit_share, total_share
from blowfish_te.smoothing import CellNoise, segment, smooth

# -- noise models ------------------------------------------------------------------------------------


def _covariance(noise: CellNoise) -> np.ndarray:
    """The dense covariance of the model, from its definition."""
    k = noise.size
    if noise.kind == "independent":
        return noise.variance * np.eye(k)
    diff = np.eye(k)[:, :-1] - np.eye(k, k - 1, -1)  # cell i carries d_i - d_{i-1}, d_{k-1} = 0
    return noise.variance * diff @ diff.T


@given(st.sampled_from(["independent", "path"]), st.integers(2, 12), st.data())
def test_noise_models_match_their_dense_covariance(kind, k, data):
    noise = CellNoise(kind, 3.0, k)
    cov = _covariance(noise)
    assert np.allclose(noise.cell_variances(), np.diag(cov))
    a = data.draw(st.integers(0, k - 1))
    b = data.draw(st.integers(a + 1, k))
    assert noise.sum_variances(np.array([a]), np.array([b]))[0] == pytest.approx(cov[a:b, a:b].sum())


def test_path_noise_telescopes_in_a_simulation():
    """The line transform's cells: Laplace on the cumulative counts, differences; a bucket's sum
    carries the noise of its two end counts only."""
    k, eps, trials = 10, 0.5, 40_000
    gen = np.random.default_rng(0)
    d = gen.laplace(0, 1 / eps, (trials, k - 1))
    cells = np.diff(np.concatenate([np.zeros((trials, 1)), d, np.zeros((trials, 1))], axis=1), axis=1)
    noise = CellNoise("path", 2 / eps**2, k)
    tolerance = 6 * math.sqrt(2 / trials) * 4 * noise.variance  # a few standard errors of a variance
    assert np.abs(cells.var(axis=0) - noise.cell_variances()).max() < tolerance
    assert abs(cells[:, 2:7].sum(axis=1).var() - noise.sum_variances(np.array([2]), np.array([7]))[0]) < tolerance


def test_noise_model_arguments():
    with pytest.raises(ValueError, match="kind"):
        CellNoise("gaussian", 1.0, 4)
    with pytest.raises(ValueError, match="variance"):
        CellNoise("independent", -1.0, 4)
    with pytest.raises(ValueError, match="CellNoise for 3 cells"):
        segment(np.zeros(3), CellNoise("independent", 1.0, 4))


# -- segmentation --------------------------------------------------------------------------------------


def _risk(y, noise, labels):
    """The module's bucket risk written from its docstring (κ = 0.8), summed over the buckets."""
    cov = _covariance(noise)
    total = 0.0
    for b in np.unique(labels):
        cells = np.flatnonzero(labels == b)
        part, block = y[cells], cov[np.ix_(cells, cells)]
        n = cells.size
        total += ((part - part.mean()) ** 2).sum() - 0.8 * (np.trace(block) - block.sum() / n) + block.sum() / n
    return total


@given(st.lists(st.integers(0, 40), min_size=2, max_size=9), st.sampled_from(["independent", "path"]))
def test_segment_returns_consecutive_dyadic_buckets(values, kind):
    y = np.array(values, dtype=float)
    labels = segment(y, CellNoise(kind, 4.0, y.size))
    assert labels[0] == 0 and set(np.diff(labels)) <= {0, 1}
    assert all(math.log2(n).is_integer() for n in np.bincount(labels))


def test_segment_minimises_the_penalised_risk_over_its_path():
    """For every per-bucket price of the path the tiling is the least penalised risk (brute force
    over dyadic tilings of 6 cells); the chosen one is the best of them by the Birgé–Massart
    criterion."""
    rng = np.random.default_rng(3)
    y = np.array([0, 0, 1, 30, 31, 29], dtype=float) + rng.normal(size=6)
    noise = CellNoise("independent", 2.0, 6)

    def tilings(start):
        if start == 6:
            yield []
            return
        for n in (1, 2, 4):
            if start + n <= 6:
                for rest in tilings(start + n):
                    yield [(start, n)] + rest

    def labels_of(t):
        out = np.empty(6, dtype=int)
        for b, (s, n) in enumerate(t):
            out[s : s + n] = b
        return out

    all_tilings = [labels_of(t) for t in tilings(0)]
    criteria = {}
    for price in (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0):
        best = min(all_tilings, key=lambda lab: _risk(y, noise, lab) + price * 2.0 * (lab.max() + 1))
        d = best.max() + 1
        criteria[tuple(best)] = _risk(y, noise, best) + 2.0 * d * (1 + 2 * math.log(6 / d))
    chosen = segment(y, noise)
    assert criteria[tuple(chosen)] == pytest.approx(min(criteria.values()))
    assert chosen[2] != chosen[3]  # the step is kept


def test_smooth_recovers_flat_regions_and_steps():
    """Flat runs far below the noise average out; a step of 20 noise units is kept; the estimate
    is never negative. Error against Laplace on every cell: a tenth of it or less."""
    k, eps = 1024, 0.5
    x = np.repeat([0, 200, 3, 0], [300, 200, 300, 224])
    gen = np.random.default_rng(1)
    errors = []
    for _ in range(5):
        y = x + gen.laplace(0, 1 / eps, k)
        estimate, labels = smooth(y, CellNoise("independent", 2 / eps**2, k))
        assert (estimate >= 0).all()
        assert labels[299] != labels[300] and labels[499] != labels[500]
        errors.append(np.mean((estimate - x) ** 2))
    assert np.mean(errors) < 0.1 * 2 / eps**2


def test_smooth_never_merges_a_dense_uneven_histogram_much():
    """Cells 30 noise units apart: merging would only add bias, so the estimate stays within 10 %
    of Laplace on the cells (the credit κ < 1 and the penalty guard this)."""
    k, eps = 512, 1.0
    gen = np.random.default_rng(2)
    x = gen.integers(0, 60, k) * 10
    errors = [np.mean((smooth(x + gen.laplace(0, 1, k), CellNoise("independent", 2.0, k))[0] - x) ** 2) for _ in range(10)]
    assert np.mean(errors) < 1.1 * 2 / eps**2


# -- DAWA's cost feature --------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 6), min_size=2, max_size=12), st.data())
def test_dawa_cost_moves_by_at_most_one_per_record(values, data):
    """The feature's sensitivity: one record added to or removed from any cell moves the least
    score by at most 1 (with and without guards, any price)."""
    x = np.array(values)
    i = data.draw(st.integers(0, x.size - 1))
    y = x.copy()
    y[i] += 1
    for guard in (0.0, 1.0):
        for eps2 in (0.1, 1.0):
            assert abs(dawa_cost(x, 0.5, eps2, guard=guard) - dawa_cost(y, 0.5, eps2, guard=guard)) <= 1 + 1e-9


def test_dawa_cost_is_the_score_of_the_noiseless_partition(monkeypatch):
    """The least score is that of the partition dawa_partition releases without noise."""
    from blowfish_te import partitions

    x = np.random.default_rng(4).integers(0, 50, 64)
    monkeypatch.setattr(partitions, "_report_noisy_min_scores", lambda values, delta, epsilon, gen: values)
    labels = dawa_partition(x, 0.5, 0.2, rng=0, guard=0.0)
    starts = np.flatnonzero(np.r_[True, np.diff(labels) != 0])
    stops = np.r_[starts[1:], x.size]
    devs = sum(np.abs(x[a:b] - np.median(x[a:b])).sum() for a, b in zip(starts, stops))
    assert dawa_cost(x, 0.5, 0.2, guard=0.0) == pytest.approx(devs + starts.size / 0.2)
    assert dawa_cost(x, 0.5, 0.2, guard=1.0) > dawa_cost(x, 0.5, 0.2, guard=0.0)  # guards only add
    np.testing.assert_allclose(dawa_costs(x, 0.5, 0.2, guards=(0.0, 1.0, 0.5)),
                               [dawa_cost(x, 0.5, 0.2, guard=g) for g in (0.0, 1.0, 0.5)])  # one enumeration, same costs


# -- features and the rule ------------------------------------------------------------------------------


def test_feature_shares_follow_the_domain():
    assert total_share(64) == 0.01 and total_share(4096) == pytest.approx(40 / 4096) and total_share(2**20) == 0.002
    assert fit_share(64) == 0.015 and fit_share(4096) == pytest.approx(60 / 4096) and fit_share(2**20) == 0.005
    assert fit_share(4096, record_moves=2) == pytest.approx(1.5 * 60 / 4096)
    assert total_share(64) + 2 * fit_share(64) <= 0.04  # the check never costs more than 4 % of ε


def test_choose_spends_what_it_measures_and_is_seeded():
    gen = lambda: np.random.default_rng(7)  # noqa: E731
    tiny = np.zeros(4096, dtype=int)  # N·ε/K far below the low scale: only the total is measured
    low = choose(tiny, 0.5, gen())
    assert low.route == "partition" and low.spent == pytest.approx(total_share(4096) * 0.5) and low.features.fit is None
    dense = np.random.default_rng(5).integers(0, 20, 256)  # N·ε/K ≈ 5: both costs are measured
    a, b = choose(dense, 0.5, gen()), choose(dense, 0.5, gen())
    assert a == b and a.spent == pytest.approx((total_share(256) + 2 * fit_share(256)) * 0.5)
    large = choose(dense * 1000, 0.5, gen())  # N·ε/K ≈ 5000: no partition is tried, one cost decides smoothing
    assert large.route != "partition" and large.features.guarded_fit is None
    assert large.spent == pytest.approx((total_share(256) + fit_share(256)) * 0.5)
    public = choose(dense, 0.5, gen(), total=int(dense.sum()))
    assert public.features.total == dense.sum() and public.features.total_public
    assert public.spent == pytest.approx(2 * fit_share(256) * 0.5) and "record total" in public.features.describe()


def test_feature_noise_has_the_calibrated_scale():
    """Laplace noise of scale record_moves / (fit_share(K, record_moves) · ε) on each cost (in units of K/ε), and
    record_moves / (total_share · ε) on the total, measured over draws."""
    x = np.random.default_rng(6).integers(0, 100, 128)
    eps = 1.0
    exact = dawa_cost(x, 0.25, 0.75, guard=0.0) / (128 / eps)
    for moves in (1, 2):
        draws = [choose(x, eps, np.random.default_rng(s), record_moves=moves).features for s in range(3000)]
        fits = np.array([f.fit for f in draws])
        totals = np.array([f.total for f in draws])
        assert np.mean(np.abs(fits - exact)) == pytest.approx(moves / (fit_share(128, moves) * eps) / 128, rel=0.08)  # E|Lap(b)| = b
        assert np.mean(np.abs(totals - x.sum())) == pytest.approx(moves / (total_share(128) * eps), rel=0.08)


def _decided(rule, total, fit, guarded, monkeypatch):
    """choose() on a histogram whose costs are replaced by the given values (noise off)."""
    from blowfish_te import selection as module

    monkeypatch.setattr(module, "dawa_costs", lambda x, e1, e2, guards: np.array([guarded if g else fit for g in guards]) * x.size / (e1 + e2))
    monkeypatch.setattr(module, "add_laplace", lambda values, scale, gen, sensitivity, integer: np.asarray(values, dtype=float))
    return choose(np.zeros(100, dtype=int), 1.0, None, total=total, rule=rule)


def test_choose_rule(monkeypatch):
    def route(rule, total, fit, guarded):
        return _decided(rule, total, fit, guarded, monkeypatch).route

    assert route(HISTOGRAMS, 10, 0.5, 5.0) == "partition"  # N·ε/K = 0.1 < 0.15: no costs needed
    assert route(HISTOGRAMS, 100, 0.2, 0.3) == "partition"
    assert route(HISTOGRAMS, 100 * 30, 0.2, 0.3) == "smooth"  # too large against the noise
    assert route(HISTOGRAMS, 100, 0.2, 0.96) == "smooth"  # the guarded cost is too high
    assert route(HISTOGRAMS, 100, 0.2, 0.6) == "smooth"  # the guards give too much away: 0.72/0.32 > 1.7
    assert route(HISTOGRAMS, 100, 1.3, 1.4) == "plain"  # nothing to merge
    # the allowance shrinks with the scale: excess 1.6 passes at N·ε/K = 1 (1.7), not at 20 (1.5)
    assert route(HISTOGRAMS, 100, 0.25, 0.472) == "partition" and route(HISTOGRAMS, 2000, 0.25, 0.472) == "smooth"
    # the cost cap grows with it: 0.9 is too much at N·ε/K = 1 (0.84), not at 20 (0.97)
    assert route(HISTOGRAMS, 100, 0.85, 0.9) == "smooth" and route(HISTOGRAMS, 2000, 0.85, 0.9) == "partition"
    assert route(RANGES, 2999, 5.0, 5.0) == "partition" and route(RANGES, 3000, 0.2, 0.25) == "partition"
    assert route(RANGES, 3000, 0.2, 0.5) == "plain"  # never smoothed: 0.65/0.35 > 1.5
    assert route(RANGES, 3000, 0.7, 0.85) == "plain"  # the guarded cost is above 0.8
    with pytest.raises(TypeError, match="Rule"):
        choose(np.zeros(4, dtype=int), 1.0, np.random.default_rng(0), rule="histograms")
    assert isinstance(HISTOGRAMS, Rule)


def test_choose_for_ranges(monkeypatch):
    from blowfish_te import selection as module

    monkeypatch.setattr(module, "add_laplace", lambda values, scale, gen, sensitivity, integer: np.asarray(values, dtype=float))
    x = np.zeros(100, dtype=int)
    assert choose_for_ranges(x, 1.0, None, fit_max=0.1, total=0).route == "partition"  # below the low scale
    monkeypatch.setattr(module, "dawa_costs", lambda x, e1, e2, guards: np.array([0.3 if g else 0.05 for g in guards]) * x.size / (e1 + e2))
    assert choose_for_ranges(x, 1.0, None, fit_max=0.1, total=50).route == "partition"
    assert choose_for_ranges(x, 1.0, None, fit_max=0.04, total=50).route == "plain"
    assert choose_for_ranges(x, 1.0, None, fit_max=0.1, excess_max=1.5, total=50).route == "plain"  # (0.35)/(0.1) > 1.5
