"""Structure read from a noisy release (NoiseFirst): the noise models, the segmentation and the smoothed estimate."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blowfish_te.smoothing import CellNoise, _IntervalRisks, consistent_prefix_answers, monotone_running_sums, nondecreasing, segment, smooth

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


@given(st.lists(st.integers(0, 40), min_size=2, max_size=40), st.sampled_from(["independent", "path"]))
def test_segment_returns_consecutive_dyadic_or_end_buckets(values, kind):
    """Every bucket has a dyadic length or reaches an end of the domain past its middle, so no
    interior bucket is flanked by two end buckets."""
    y = np.array(values, dtype=float)
    k = y.size
    labels = segment(y, CellNoise(kind, 4.0, k))
    assert labels[0] == 0 and set(np.diff(labels)) <= {0, 1}
    sizes = np.bincount(labels)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for start, n in zip(starts, sizes):
        end_bucket = (start == 0 or start + n == k) and 2 * n >= k
        assert math.log2(n).is_integer() or end_bucket, (start, n)


def _tilings(k: int, start: int = 0):
    """Every tiling of [start, k) by the segmentation's buckets: dyadic at any start, or an end
    bucket of at least ⌈k/2⌉ cells."""
    if start == k:
        yield []
        return
    for n in range(1, k - start + 1):
        end_bucket = (start == 0 or start + n == k) and 2 * n >= k
        if math.log2(n).is_integer() or end_bucket:
            for rest in _tilings(k, start + n):
                yield [(start, n)] + rest


@pytest.mark.parametrize("where", [0, -1])
def test_a_spike_at_an_end_stands_beside_one_bucket_for_the_rest(where):
    """A count far above the noise at either end of an empty domain: two buckets, the spike and the
    rest (dyadic buckets alone would need one per bit of K - 1, ten here)."""
    y = np.zeros(1024)
    y[where] = 60.0
    labels = segment(y, CellNoise("independent", 2.0, y.size))
    assert labels.max() == 1
    assert np.bincount(labels).tolist() == ([1, 1023] if where == 0 else [1023, 1])


def test_no_interior_cell_is_isolated_cheaply():
    """The largest Laplace draw among 4096 empty cells, placed mid-domain: end buckets cannot
    sandwich it, so it is averaged away (with end buckets of any length three buckets would keep it)."""
    k, scale = 4096, 10.0
    y = np.zeros(k)
    y[1500] = scale * math.log(k)  # the typical maximum of k Laplace(scale) draws
    labels = segment(y, CellNoise("independent", 2 * scale**2, k))
    assert np.bincount(labels)[labels[1500]] > 1


def test_a_count_far_below_zero_is_not_isolated_but_still_averaged():
    """Counts are non-negative, so a reading far below 0 is noise: the segmentation reads it at
    -ln(K)·σ/√2 and does not isolate it (with the buckets its dyadic tiling would force beside
    it), while the bucket's mean still averages the released value."""
    k, scale = 4096, 10.0
    y = np.zeros(k)
    y[1500] = -2.0 * scale * math.log(k)
    noise = CellNoise("independent", 2 * scale**2, k)
    labels = segment(y, noise)
    assert labels.max() == 0
    estimate, _ = smooth(y, noise)
    assert estimate == pytest.approx(np.zeros(k))  # the mean, -0.04, clipped at 0
    y[1500] = 2.0 * scale * math.log(k)  # the same size above 0 is a count the noise rarely reaches
    assert segment(y, noise).max() > 0
    up = smooth(y, noise)[0]
    assert up[1500] > scale * math.log(k)


def test_a_noisy_total_moves_the_bucket_sums_to_their_least_squares_estimate():
    """With a total T of variance τ² beside counts of independent noise σ², the bucket sums S_b
    move by n_b σ²/(Kσ² + τ²)·(T - ΣS): exact for τ² = 0 (the sums then add up to T), nothing
    for an infinitely noisy T; under path noise the counts' own sum is already exact."""
    rng = np.random.default_rng(0)
    k = 64
    x = np.r_[np.full(32, 5.0), np.full(32, 40.0)]
    noise = CellNoise("independent", 8.0, k)
    y = x + rng.laplace(0, 2.0, k)
    plain, labels = smooth(y, noise)
    assert labels.max() == 1  # the two halves
    sizes, sums = np.bincount(labels), np.bincount(labels, weights=y)
    for total, variance in ((1450.0, 0.0), (1450.0, 100.0), (1200.0, 1e300)):
        fitted, same = smooth(y, noise, (total, variance))
        assert np.array_equal(same, labels)
        moved = sums + sizes * 8.0 / (8.0 * k + variance) * (total - sums.sum())
        assert fitted == pytest.approx(np.maximum(moved / sizes, 0)[labels], rel=1e-12)
    assert smooth(y, noise, (1450.0, 0.0))[0].sum() == pytest.approx(1450.0, rel=1e-12)
    path = CellNoise("path", 8.0, k)
    assert np.array_equal(smooth(y, path, (1450.0, 0.0))[0], smooth(y, path)[0])
    with pytest.raises(TypeError, match="total must be a pair"):
        smooth(y, noise, 1450.0)
    with pytest.raises(ValueError, match="total variance"):
        smooth(y, noise, (1450.0, -1.0))


def test_segment_minimises_the_penalised_risk_over_its_path():
    """For every per-bucket price of the path the tiling is the least penalised risk (brute force
    over the tilings of 6 cells by dyadic and end buckets); the chosen one is the best of them by the Birgé–Massart
    criterion."""
    rng = np.random.default_rng(3)
    y = np.array([0, 0, 1, 30, 31, 29], dtype=float) + rng.normal(size=6)
    noise = CellNoise("independent", 2.0, 6)

    def labels_of(t):
        out = np.empty(6, dtype=int)
        for b, (s, n) in enumerate(t):
            out[s : s + n] = b
        return out

    all_tilings = [labels_of(t) for t in _tilings(6)]
    criteria = {}
    read = np.maximum(y, -math.log(6) * 1.0)  # the segmentation reads counts floored at -ln(K)·σ/√2
    assert (read != y).any()  # the floor is exercised
    for price in (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0):
        best = min(all_tilings, key=lambda lab: _risk(read, noise, lab) + price * 2.0 * (lab.max() + 1))
        d = best.max() + 1
        criteria[tuple(best)] = _risk(read, noise, best) + 2.0 * d * (1 + 2 * math.log(6 / d))
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


# -- exact risks, refusals and edge cases ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["independent", "path"])
def test_bucket_risks_are_the_docstring_formula_for_every_dyadic_bucket(kind):
    """Every bucket [a, a + n), n = 1, 2, 4, 8, against the dense covariance (a zero and negative counts included)."""
    y = np.array([0.0, 3.0, -1.5, 7.0, 2.0, 0.0, 4.5, 1.0, 6.0, -2.0])
    noise = CellNoise(kind, 1.5, y.size)
    cov = _covariance(noise)
    risks = _IntervalRisks(y, noise).dyadic()
    assert sorted(risks) == [1, 2, 4, 8]
    for n, values in risks.items():
        assert values.size == y.size - n + 1
        for a, value in enumerate(values):
            part, block = y[a : a + n], cov[a : a + n, a : a + n]
            expected = ((part - part.mean()) ** 2).sum() - 0.8 * (np.trace(block) - block.sum() / n) + block.sum() / n
            assert value == pytest.approx(expected, rel=1e-12, abs=1e-12), (n, a)


@pytest.mark.parametrize("kind", ["independent", "path"])
@pytest.mark.parametrize("k", [9, 10])
def test_end_bucket_risks_are_the_formula_from_half_the_domain_on(kind, k):
    """[0, stop) and [start, K) score the docstring's risk when they hold at least ⌈K/2⌉ cells, and
    cannot be chosen (infinite) when shorter."""
    y = np.array([0.0, 3.0, -1.5, 7.0, 2.0, 0.0, 4.5, 1.0, 6.0, -2.0])[:k]
    noise = CellNoise(kind, 1.5, k)
    cov = _covariance(noise)
    prefix, suffix = _IntervalRisks(y, noise).ends()

    def formula(lo, hi):
        part, block = y[lo:hi], cov[lo:hi, lo:hi]
        n = hi - lo
        return ((part - part.mean()) ** 2).sum() - 0.8 * (np.trace(block) - block.sum() / n) + block.sum() / n

    half = -(-k // 2)
    for stop in range(1, k + 1):
        expected = formula(0, stop) if stop >= half else np.inf
        assert prefix[stop - 1] == pytest.approx(expected, rel=1e-12, abs=1e-12), stop
    for start in range(k):
        expected = formula(start, k) if k - start >= half else np.inf
        assert suffix[start] == pytest.approx(expected, rel=1e-12, abs=1e-12), start


def test_one_path_cell_carries_no_noise():
    """A domain of one cell under the line transform: its count is the public total."""
    noise = CellNoise("path", 2.0, 1)
    assert np.array_equal(noise.cell_variances(), [0.0])
    assert np.array_equal(noise.sum_variances(np.array([0]), np.array([1])), [0.0])
    assert np.array_equal(segment(np.array([5.0]), noise), [0])
    assert np.array_equal(CellNoise("independent", 2.0, 1).cell_variances(), [2.0])


def test_noise_and_counts_are_refused_by_name():
    def refusal(call, exc=ValueError):
        with pytest.raises(exc) as info:
            call()
        return str(info.value)

    assert refusal(lambda: CellNoise("independent", -1.0, 4)) == "variance must be >= 0, got -1.0"
    assert refusal(lambda: CellNoise("independent", "a", 4), TypeError) == "variance must be a real number, got 'a' (str)"
    assert refusal(lambda: CellNoise("independent", 1.0, 0)) == "size must be an integer >= 1, got 0"
    assert refusal(lambda: CellNoise("independent", 1.0, 2.0), TypeError) == "size must be an integer, got 2.0 (float)"
    assert refusal(lambda: CellNoise("laplace", 1.0, 4)) == "kind must be 'independent' or 'path', got 'laplace'"
    four = CellNoise("independent", 1.0, 4)
    for call in (segment, smooth):
        assert refusal(lambda c=call: c(np.zeros((2, 2)), four)) == "y must be a 1-D array, got shape (2, 2)"
        assert refusal(lambda c=call: c(["a"], CellNoise("independent", 1.0, 1)), TypeError) == "y must hold real numbers, got an array of dtype <U1"
        assert refusal(lambda c=call: c(np.zeros(3), four)) == "noise must be a CellNoise for 3 cells"
        assert refusal(lambda c=call: c(np.zeros(3), "independent")) == "noise must be a CellNoise for 3 cells"


def test_the_largest_domain_is_smoothed_and_one_more_cell_refused():
    """Noise of variance 0 leaves every cell its own bucket (the largest domain at no cost)."""
    k = 2**16
    labels = segment(np.zeros(k), CellNoise("independent", 0.0, k))
    assert labels.dtype == np.int64 and np.array_equal(labels, np.arange(k))
    with pytest.raises(ValueError) as info:
        segment(np.zeros(k + 1), CellNoise("independent", 0.0, k + 1))
    assert str(info.value) == "smoothing handles up to 65536 cells, got 65537"
    assert np.array_equal(segment(np.array([3.0, 3.0, 3.0, 3.0]), CellNoise("path", 0.0, 4)), [0, 1, 2, 3])


def test_ties_between_tilings_go_to_the_first_found_along_the_path():
    """y = 0 0 0 0 3 3 3 with unit variance: [0, 4) [4, 5) [5, 7) and [0, 4) [4, 6) [6, 7) have the
    same penalised risk (the buckets {3} and {3, 3} swap places; [4, 7) is too short for an end
    bucket); the lower price's tiling, found first, is kept."""
    y = np.array([0.0, 0.0, 0.0, 0.0, 3.0, 3.0, 3.0])
    noise = CellNoise("independent", 1.0, 7)
    kept, other = np.array([0, 0, 0, 0, 1, 2, 2]), np.array([0, 0, 0, 0, 1, 1, 2])
    penalty = 3 * (1 + 2 * math.log(7 / 3))
    assert _risk(y, noise, kept) + penalty == pytest.approx(_risk(y, noise, other) + penalty)
    assert np.array_equal(segment(y, noise), kept)


def test_smooth_is_the_bucket_means_clipped_at_zero_under_independent_noise():
    y = np.array([0.3, 0.5, 0.2, 0.4, 9.0, 9.5, -3.0, -2.5])
    estimate, labels = smooth(y, CellNoise("independent", 1.0, 8))
    assert np.array_equal(labels, [0, 0, 0, 0, 1, 1, 2, 2])
    assert estimate == pytest.approx([0.35] * 4 + [9.25] * 2 + [0.0] * 2, abs=1e-12)
    assert (estimate[6:] == 0.0).all()


def test_smooth_projects_the_running_sums_under_path_noise():
    """The same buckets; their means' running sums .35 .7 1.05 1.4 10.65 19.9 17.15 | 14.4 pool
    19.9 and 17.15 to 18.525, which the exact total 14.4 caps: the counts keep the total."""
    y = np.array([0.3, 0.5, 0.2, 0.4, 9.0, 9.5, -3.0, -2.5])
    estimate, labels = smooth(y, CellNoise("path", 1.0, 8))
    assert np.array_equal(labels, [0, 0, 0, 0, 1, 1, 2, 2])
    assert estimate == pytest.approx([0.35] * 4 + [9.25, 3.75, 0.0, 0.0], abs=1e-12)
    assert estimate.sum() == pytest.approx(y.sum(), abs=1e-12)
    assert monotone_running_sums(np.array([5.0])) == pytest.approx([5.0])
    with pytest.raises(ValueError, match="at least one count"):
        monotone_running_sums(np.array([]))
    with pytest.raises(ValueError, match="cells"):
        monotone_running_sums(np.ones((2, 2)))


@given(st.lists(st.integers(0, 30), min_size=2, max_size=80), st.data())
def test_the_projection_never_moves_the_running_sums_away_from_the_truth(counts, data):
    """For counts x >= 0 and any cells v with the same total (what the bucket means of a path
    release are), the projected running sums are nondecreasing from >= 0 to the total and no
    further from x's running sums than v's are (the projection onto a convex set holding them)."""
    x = np.asarray(counts, dtype=np.float64)
    noise = np.asarray(data.draw(st.lists(st.floats(-50, 50), min_size=x.size - 1, max_size=x.size - 1)))
    v = x + np.diff(np.concatenate([[0.0], noise, [0.0]]))  # path noise: the total is exact
    out = monotone_running_sums(v)
    running = np.cumsum(out)
    assert running[0] >= -1e-9 and (np.diff(running) >= -1e-9).all()
    assert running[-1] == pytest.approx(x.sum(), abs=1e-6)
    truth = np.cumsum(x)
    assert np.linalg.norm(running - truth) <= np.linalg.norm(np.cumsum(v) - truth) + 1e-6


def test_a_large_path_draw_is_pooled_back_not_left_at_its_cell():
    """A draw D on the running sum at cell j reads as +D at j and -D at j + 1: the segmentation
    isolates both, and clipping the -D alone would leave +D at j; the projection pools the +D
    with the cells after it, spread thin (the running sums rise by 1/8 a cell: about √(2D·8)
    cells share it)."""
    k, scale = 4096, 10.0
    x = np.zeros(k)
    x[::8] = 1.0
    draws = np.zeros(k)
    draws[2000] = 40 * scale
    y = x + np.diff(np.concatenate([[0.0], draws[:-1], [0.0]]))
    noise = CellNoise("path", 2 * scale**2, k)
    estimate, labels = smooth(y, noise)
    assert labels[2000] != labels[2001]  # both readings isolated
    means = np.bincount(labels, weights=y) / np.bincount(labels)
    clipped = np.maximum(means[labels], 0.0)
    assert clipped[2000] - x[2000] > 0.9 * draws[2000]
    assert np.linalg.norm(estimate - x) < 0.1 * draws[2000]
    assert np.abs(estimate - x).max() < 0.05 * draws[2000]
    assert estimate.sum() == pytest.approx(x.sum())


@given(st.lists(st.integers(0, 20), min_size=1, max_size=40), st.data())
def test_consistent_prefix_answers_are_never_further_from_the_truth(counts, data):
    """Prefix queries in any order (repeats included): the answers become nondecreasing in the
    queries' ends, at least 0 (at most a public total when given), and no further from the true
    prefix sums than they were."""
    x = np.asarray(counts, dtype=np.float64)
    k = x.size
    ends = np.asarray(data.draw(st.lists(st.integers(0, k - 1), min_size=1, max_size=60)))
    bounds = (np.zeros((ends.size, 1), dtype=np.int64), ends[:, None])
    truth = np.cumsum(x)[ends]
    noisy = truth + np.asarray(data.draw(st.lists(st.floats(-30, 30), min_size=ends.size, max_size=ends.size)))
    for total in (None, float(x.sum())):
        out = consistent_prefix_answers(bounds, noisy, total)
        order = np.argsort(ends, kind="stable")
        assert (np.diff(out[order]) >= -1e-9).all() and out.min() >= 0
        if total is not None:
            assert out.max() <= total + 1e-9
        assert np.linalg.norm(out - truth) <= np.linalg.norm(noisy - truth) + 1e-6


def test_only_1d_prefix_workloads_are_made_consistent():
    from blowfish_te import workloads as wl

    y = np.array([3.0, -1.0, 2.0, 5.0])
    assert np.array_equal(consistent_prefix_answers(wl.identity(4).query_bounds(), y), y)
    assert np.array_equal(consistent_prefix_answers(None, y), y)
    assert np.allclose(consistent_prefix_answers(wl.prefix(4).query_bounds(), y), [1.0, 1.0, 2.0, 5.0])
    assert np.allclose(consistent_prefix_answers(wl.prefix(4).query_bounds(), y, total=4.0), [1.0, 1.0, 2.0, 4.0])
    ranges = wl.prefix((2, 2)).query_bounds()
    assert np.array_equal(consistent_prefix_answers(ranges, y), y)  # 2-D: no order to keep


def test_nondecreasing_pools_violators_then_clips_to_the_box():
    assert nondecreasing(np.array([3.0, 1.0, 2.0])) == pytest.approx([2.0, 2.0, 2.0])
    assert nondecreasing(np.array([3.0, 1.0, 2.0]), upper=1.5) == pytest.approx([1.5, 1.5, 1.5])
    assert nondecreasing(np.array([-4.0, -2.0, 5.0])) == pytest.approx([0.0, 0.0, 5.0])
    assert nondecreasing(np.array([1.0, 2.0]), upper=-3.0) == pytest.approx([0.0, 0.0])  # a negative bound reads as 0
