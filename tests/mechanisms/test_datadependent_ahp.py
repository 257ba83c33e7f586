"""AHP (noisy counts, threshold, sort, greedy clusters, re-measure): the two Laplace draws it makes
(values, scale, sensitivity, exact integer sampling), the threshold η·ln(max(K, 2))/ε₁ at its
boundary, the clusters against the greedy rule written from its definition, the estimate and the
answers, the privacy loss replayed over neighbours, argument checks, and the ε-share helper."""

import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import datadependent
from blowfish_te.mechanisms.datadependent import _best_starts, _greedy_clusters, _share
from blowfish_te.testing import added_records, worst_replayed_cost

from tests.helpers import Float32Rows


@dataclass
class Draw:
    values: np.ndarray
    scale: float
    sensitivity: object
    integer: object
    out: np.ndarray


def _recorder(monkeypatch, first=None, seed=0):
    """Record every add_laplace call of AHP. The first draw returns ``first`` when given (a chosen
    noisy vector); every other draw returns values + Laplace(scale) from a seeded generator."""
    calls = []
    gen = np.random.default_rng(seed)

    def record(values, scale, rng, *, sensitivity, integer):
        values = np.array(values, dtype=np.float64)
        if not calls and first is not None:
            out = np.array(first, dtype=np.float64)
        else:
            out = values + gen.laplace(0.0, scale, values.shape)
        calls.append(Draw(values, scale, sensitivity, integer, out.copy()))
        return out

    monkeypatch.setattr(datadependent, "add_laplace", record)
    return calls


def _cluster_spy(monkeypatch):
    """Record the sorted values and ε handed to the clustering, which still runs."""
    seen = []
    real = datadependent._greedy_clusters

    def spy(values, epsilon, *args, **kwargs):
        seen.append((np.array(values, dtype=np.float64), epsilon))
        return real(values, epsilon, *args, **kwargs)

    monkeypatch.setattr(datadependent, "_greedy_clusters", spy)
    return seen


def _brute_best_start(values, j, noise, window):
    """err*(j) = min over 1 <= L <= window, j + L <= n of (v_j - mean(v_j..v_{j+L-1}))² + noise/L²."""
    n = values.size
    return min(
        (values[j] - values[j : j + length].mean()) ** 2 + noise / length**2
        for length in range(1, min(window, n - j) + 1)
    )


def _brute_clusters(values, epsilon, window=4096):
    """The greedy rule from its definition: err(i..j) = Σ (v - mean)² + 2/(ε² (j-i+1)); a new
    cluster starts at j when extending grows err by at least err*(j)."""
    n, noise = values.size, 2.0 / epsilon**2

    def err(i, j):
        part = values[i : j + 1]
        return float(((part - part.mean()) ** 2).sum()) + noise / part.size

    labels, start = np.zeros(n, dtype=np.int64), 0
    for j in range(1, n):
        split = err(start, j) - err(start, j - 1) >= _brute_best_start(values, j, noise, window)
        if split:
            start = j
        labels[j] = labels[j - 1] + int(split)
    return labels


def _threshold(eta, k, ratio, epsilon):
    """η·ln(max(K, 2))/ε₁ with ε₁ = ratio·ε, evaluated in the same order as the definition so a
    value placed exactly on it is exactly on it."""
    return eta * np.log(max(k, 2)) / (ratio * epsilon)


def _expected_release(x, noisy, ratio, epsilon, eta):
    """Labels per cell, from the first noisy vector: threshold, stable sort, greedy clusters."""
    k = x.size
    kept = np.where(noisy <= _threshold(eta, k, ratio, epsilon), 0.0, noisy)
    order = np.argsort(kept, kind="stable")
    labels = np.empty(k, dtype=np.int64)
    labels[order] = _brute_clusters(kept[order], epsilon - ratio * epsilon)
    return kept, labels


# -- the two draws ---------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("ratio, eta", [(0.2, 0.0), (0.5, 0.35), (0.85, 1.0)])
def test_ahp_draws_counts_then_cluster_totals_and_spreads_them(monkeypatch, epsilon, ratio, eta):
    k = 24
    x = np.random.default_rng(7).integers(0, 30, k) * np.repeat([0, 1, 3], 8)
    calls = _recorder(monkeypatch, seed=3)
    seen = _cluster_spy(monkeypatch)
    answers = M.AHP(ratio=ratio, eta=eta).run(wl.prefix(k), x, epsilon, rng=11)

    assert len(calls) == 2 and len(seen) == 1
    counts, totals = calls
    eps1 = ratio * epsilon
    eps2 = epsilon - eps1
    # ε₁ buys the counts: sensitivity 1, exact integer sampling on the secure path
    assert np.array_equal(counts.values, x)
    assert counts.scale == pytest.approx(1.0 / eps1, rel=1e-12)
    assert counts.sensitivity == 1.0 and counts.integer is True

    # the clustering sees the thresholded noisy counts, sorted, and prices clusters with ε₂
    kept, labels = _expected_release(x, counts.out, ratio, epsilon, eta)
    sorted_values, cluster_epsilon = seen[0]
    assert np.array_equal(sorted_values, np.sort(kept))
    assert cluster_epsilon == pytest.approx(eps2, rel=1e-12)

    # ε₂ buys the true cluster totals (one per cluster)
    assert np.array_equal(totals.values, np.bincount(labels, weights=x))
    assert totals.scale == pytest.approx(1.0 / eps2, rel=1e-12)
    assert totals.sensitivity == 1.0 and totals.integer is True

    # each noisy total spread evenly over its cluster, then the workload
    estimate = totals.out[labels] / np.bincount(labels)[labels]
    assert np.allclose(answers, np.cumsum(estimate), rtol=1e-12, atol=1e-9)


def test_ahp_clusters_and_estimate_on_a_clear_layout(monkeypatch):
    """Two clear levels of counts: the cells of each level form one cluster whose noisy total is
    shared equally by its cells (so sizes matter, not only totals)."""
    x = np.array([0, 40, 0, 40, 0, 40, 0, 40, 0, 0])
    calls = _recorder(monkeypatch, first=x.astype(float), seed=5)
    answers = M.AHP(ratio=0.5, eta=0.0).run(wl.identity(10), x, 1.0, rng=0)
    low, high = x == 0, x == 40
    totals = calls[1]
    assert sorted(totals.values.tolist()) == [0.0, 160.0]
    noisy_low, noisy_high = (totals.out[0], totals.out[1]) if totals.values[0] == 0 else (totals.out[1], totals.out[0])
    assert np.allclose(answers[low], noisy_low / 6) and np.allclose(answers[high], noisy_high / 4)


def test_ahp_defaults_are_ratio_085_and_eta_035(monkeypatch):
    k, epsilon = 20, 1.0
    t = _threshold(0.35, k, 0.85, epsilon)
    first = np.linspace(0.5, 3.0, k) * t
    calls = _recorder(monkeypatch, first=first)
    seen = _cluster_spy(monkeypatch)
    M.AHP().run(wl.identity(k), np.arange(k), epsilon, rng=0)
    assert calls[0].scale == pytest.approx(1 / 0.85)
    assert calls[1].scale == pytest.approx(1 / 0.15)
    assert np.array_equal(seen[0][0], np.where(first <= t, 0.0, first))
    assert (seen[0][0] == 0).sum() == (first <= t).sum() > 0 and (first > t).sum() > 0


@pytest.mark.parametrize("k", [1, 2, 3, 17])
@pytest.mark.parametrize("epsilon, ratio, eta", [(0.3, 0.85, 0.35), (1.0, 0.4, 1.0), (2.5, 0.7, 0.1)])
def test_ahp_threshold_zeroes_counts_at_most_eta_ln_k_over_eps1(monkeypatch, k, epsilon, ratio, eta):
    """A noisy count exactly at η·ln(max(K, 2))/ε₁ becomes 0, the next float above it stays (K = 1
    uses ln 2); negative counts become 0 too."""
    t = _threshold(eta, k, ratio, epsilon)
    assert t > 0
    pattern = [t, np.nextafter(t, np.inf), -2.0, 0.5 * t, 1.5 * t, 4.0 * t]
    for shift in range(min(k, len(pattern))):
        first = np.resize(np.roll(pattern, -shift), k)
        calls = _recorder(monkeypatch, first=first)
        seen = _cluster_spy(monkeypatch)
        M.AHP(ratio=ratio, eta=eta).run(wl.identity(k), np.zeros(k, dtype=int), epsilon, rng=0)
        expected = np.sort(np.where(first <= t, 0.0, first))
        assert np.array_equal(seen[0][0], expected)
        assert len(calls) == 2


def test_ahp_answers_are_float64_for_a_float32_workload(monkeypatch):
    matrix = np.random.default_rng(2).integers(0, 2, (5, 12))
    x = np.random.default_rng(3).integers(0, 9, 12)
    calls = _recorder(monkeypatch)
    answers = M.AHP().run(Float32Rows(matrix), x, 1.0, rng=0)
    assert answers.dtype == np.float64 and answers.shape == (5,)
    kept, labels = _expected_release(x, calls[0].out, 0.85, 1.0, 0.35)
    estimate = calls[1].out[labels] / np.bincount(labels)[labels]
    assert np.allclose(answers, matrix @ estimate, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("epsilon, ratio", [(0.3, 0.85), (1.0, 0.5), (2.5, 0.2)])
def test_ahp_replayed_privacy_loss_is_epsilon(monkeypatch, epsilon, ratio):
    """Coupling the noise of a run on x with one on x + e_c: the counts move by one unit (ε₁) and
    exactly one cluster total by one unit (ε₂), so every neighbour costs ε₁ + ε₂ = ε."""
    x = np.array([0, 3, 9, 9, 0, 14, 2, 30, 30, 1, 0, 6])
    mech = M.AHP(ratio=ratio)
    cost = worst_replayed_cost(
        monkeypatch, lambda y: mech.run(wl.prefix(x.size), y, epsilon, rng=4), x, added_records(x), [datadependent]
    )
    assert cost == pytest.approx(epsilon, rel=1e-9)


def test_ahp_exact_sampler_on_the_secure_path():
    """With rng=None both draws are exact discrete Laplace on integers: cluster totals are integers,
    so every answer of the identity workload is an integer over its cluster size."""
    x = np.array([5, 5, 5, 60, 60, 0, 0, 0])
    answers = M.AHP(ratio=0.5, eta=0.0).run(wl.identity(8), x, 2.0, rng=None)
    assert answers.dtype == np.float64 and answers.shape == (8,)
    for value in np.unique(answers):
        size = int((answers == value).sum())
        assert abs(value * size - round(value * size)) < 1e-9


# -- arguments --------------------------------------------------------------------------------------


@pytest.mark.parametrize("ratio", [0, 0.0, 1, 1.0, 1.5, 2.0, -0.25])
def test_ahp_ratio_must_lie_strictly_between_0_and_1(ratio):
    with pytest.raises(ValueError, match=r"^ratio must be"):
        M.AHP(ratio=ratio)


@pytest.mark.parametrize("eta", [-1e-9, -0.5, -3])
def test_ahp_eta_must_be_non_negative(eta):
    with pytest.raises(ValueError, match=r"^eta must be"):
        M.AHP(eta=eta)


def test_ahp_arguments_are_checked_by_name_and_kept():
    with pytest.raises(TypeError, match=r"^ratio must be a real number"):
        M.AHP(ratio="0.5")
    with pytest.raises(TypeError, match=r"^eta must be a real number"):
        M.AHP(eta=None)
    mech = M.AHP(ratio=1e-6, eta=0)
    assert mech.ratio == 1e-6 and mech.eta == 0.0
    assert M.AHP(ratio=1 - 1e-9).ratio == 1 - 1e-9
    assert (M.AHP().ratio, M.AHP().eta) == (0.85, 0.35)


@pytest.mark.parametrize("value", [0, 0.0, 1, 1.0, 1.0001, 1.9, 2, 7, -1])
def test_share_refuses_values_outside_the_open_unit_interval(value):
    with pytest.raises(ValueError, match=r"^budget share must be"):
        _share(value, "budget share")


@pytest.mark.parametrize("value", [1e-12, 0.25, 0.5, 0.999999])
def test_share_accepts_values_inside_the_open_unit_interval(value):
    out = _share(value, "budget share")
    assert out == value and type(out) is float


# -- clustering -------------------------------------------------------------------------------------


@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=14),
    st.sampled_from([0.5, 1.0, 2.0, 0.37]),
    st.floats(0.01, 50.0),
    st.integers(1, 16),
)
def test_best_starts_equal_the_minimum_over_cluster_lengths(values, scale, noise, window):
    v = np.sort(np.array(values, dtype=np.float64)) * scale
    cum = np.concatenate([[0.0], np.cumsum(v)])
    expected = [_brute_best_start(v, j, noise, window) for j in range(v.size)]
    assert np.allclose(_best_starts(v, cum, noise, window), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "values, noise, window",
    [
        ([0, 0, 0, 0, 0], 2.0, 2),  # a run longer than the window: L stops at the window
        ([0, 0, 0, 0, 0], 2.0, 5),
        ([0, 1, 1, 1, 1], 100.0, 2),  # a longer cluster would be better, but lies beyond the window
        ([0, 1, 1, 1, 1], 100.0, 3),
        ([1, 1, 2, 2, 2, 9], 8.0, 6),  # runs: the whole run is best, never part of it
        ([3, 3, 3, 3], 1.0, 10),
    ],
)
def test_best_starts_at_runs_and_window_limits(values, noise, window):
    v = np.array(values, dtype=np.float64)
    cum = np.concatenate([[0.0], np.cumsum(v)])
    expected = [_brute_best_start(v, j, noise, window) for j in range(v.size)]
    assert np.allclose(_best_starts(v, cum, noise, window), expected, rtol=1e-12, atol=0)


@given(
    st.lists(st.integers(0, 12), min_size=1, max_size=24),
    st.sampled_from([0.1, 0.5, 1.0, 3.0]),
    st.integers(1, 30),
)
def test_greedy_clusters_follow_the_rule_written_from_its_definition(values, epsilon, window):
    v = np.sort(np.array(values, dtype=np.float64) ** 1.5)
    labels = _greedy_clusters(v, epsilon, window)
    assert labels.dtype.kind == "i"
    assert np.array_equal(labels, _brute_clusters(v, epsilon, window))


def test_greedy_clusters_close_a_cluster_on_a_tie():
    """The rule extends a cluster only while its error grows by less than err*(j): with ε = 0.5
    (noise 8), v = 0, 3, 3, 3, 3 extending by the first 3 grows err from 8 to 8.5, and err*(1) =
    8/4² = 0.5, exactly the growth, so the 3s start a cluster of their own."""
    v = np.array([0.0, 3.0, 3.0, 3.0, 3.0])
    labels = _greedy_clusters(v, 0.5)
    assert labels.tolist() == [0, 1, 1, 1, 1] and labels.dtype == np.int64
    assert labels.tolist() == _brute_clusters(v, 0.5).tolist()


def test_greedy_clusters_default_window_is_4096():
    """0 followed by 4097 equal values c: err*(1) is 2/4096² with the window of 4096 and 2/4097²
    with one more value. c² lies between the two split points, so the labels tell the windows apart."""
    noise = 2.0  # ε = 1
    c = math.sqrt(noise + noise * (1 / 4096**2 + 1 / 4097**2))
    v = np.concatenate([[0.0], np.full(4097, c)])
    default = _greedy_clusters(v, 1.0)
    assert np.array_equal(default, _greedy_clusters(v, 1.0, 4096))
    assert not np.array_equal(default, _greedy_clusters(v, 1.0, 4097))


def test_greedy_clusters_of_one_value():
    labels = _greedy_clusters(np.array([5.0]), 1.0)
    assert labels.tolist() == [0] and labels.dtype == np.int64
