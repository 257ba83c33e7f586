"""The Ordered and Ordered Hierarchical mechanisms (He, Machanavajjhala, Ding, SIGMOD 2014, §7):
the noise actually drawn against the policy sensitivity found by brute force, the samplers used
on the secure path, the post-processing (isotonic regression, clipping to [0, n]), the degenerate
one-cell release, the exact expected error and the tuning cost model."""

import math

import numpy as np
import pytest

import blowfish_te as bt
from blowfish_te import mechanisms as M
from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import ordered as ordered_module
from blowfish_te.mechanisms.ordered import _weighted_sensitivity, oh_predicted_error
from blowfish_te.secure import SecureRandom, sampler_name
from blowfish_te.testing import assert_laplace_noise, policy_neighbours

from tests.helpers import Float32Rows


def _line_to_bottom(k):
    """0 - 1 - ... - (K-1) - ⊥: connected, but n is not public (records enter at the last cell)."""
    return policies.from_edges(k, [[i, i + 1] for i in range(k)])


def _policy(kind, k):
    return {
        "line": lambda: policies.line(k),
        "threshold": lambda: policies.threshold(k, 3),
        "to_bottom": lambda: _line_to_bottom(k),
        "unbounded": lambda: policies.unbounded(k),
    }[kind]()


def _measured(x, public):
    """The cumulative counts the Ordered mechanism measures: s_0..s_{K-2} when n is public, else
    s_0..s_{K-1}."""
    s = np.cumsum(x)
    return s[:-1] if public else s


def _brute_delta(policy, public):
    """max L1 change of the measured cumulative counts over every neighbour of a histogram with
    records in every cell (the change does not depend on the histogram otherwise)."""
    x = np.full(policy.size, 2, dtype=np.int64)
    return max(np.abs(_measured(x, public) - _measured(y, public)).sum() for y in policy_neighbours(x, policy))


def _recorder(monkeypatch, replace=None):
    """Record every add_laplace call of the ordered module; the real sampler runs unless
    ``replace`` gives the noisy vector to return."""
    calls = []
    real = ordered_module.add_laplace

    def record(values, scale, rng, *, sensitivity, integer):
        values = np.array(values, dtype=np.float64)
        if replace is None:
            out = real(values, scale, rng, sensitivity=sensitivity, integer=integer)
        else:
            out = np.array(replace, dtype=np.float64)
        calls.append({"values": values, "scale": scale, "sensitivity": sensitivity, "integer": integer,
                      "out": np.array(out, dtype=np.float64)})
        return out

    monkeypatch.setattr(ordered_module, "add_laplace", record)
    return calls


# -- Ordered: privacy -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind, public", [("line", True), ("threshold", True), ("to_bottom", False),
                                          ("unbounded", False)])
@pytest.mark.slow
def test_ordered_draws_laplace_at_the_brute_force_sensitivity_over_epsilon(monkeypatch, kind, public):
    """Laplace(Δ_G/ε) on the cumulative counts, Δ_G the largest L1 change over every neighbour
    (He et al. Thm 5.1), at two ε other than 1; the sampler is told Δ_G and that the counts are
    integers; the release reports Δ_G and the scale."""
    k = 6
    policy = _policy(kind, k)
    delta = _brute_delta(policy, public)
    assert delta == {"line": 1, "threshold": 3, "to_bottom": 1, "unbounded": k}[kind]
    x = np.array([3, 0, 1, 4, 0, 2])
    mech = M.Ordered(constrained=False)
    for eps in (0.5, 3.0):
        calls = _recorder(monkeypatch)
        gen = np.random.default_rng(7)
        for _ in range(200):
            outcome = mech.measure(wl.identity(k), x, eps, gen, policy=policy)
        assert len(calls) == 200
        for call in calls:
            assert np.array_equal(call["values"], _measured(x, public))
            assert call["scale"] == pytest.approx(delta / eps, rel=1e-12)
            assert call["sensitivity"] == delta and call["integer"] is True
        assert_laplace_noise([c["out"] - c["values"] for c in calls], delta / eps)
        assert outcome.sensitivity == delta
        assert outcome.noise_scale == pytest.approx(delta / eps, rel=1e-12)
        assert outcome.component_totals == ({k - 1: int(x.sum())} if public else {})


def test_ordered_strategy_measures_n_only_when_it_is_not_public():
    assert M.Ordered()._strategy(policies.line(5)).num_queries == 4
    assert M.Ordered()._strategy(policies.threshold(5, 2)).num_queries == 4
    assert M.Ordered()._strategy(_line_to_bottom(5)).num_queries == 5
    assert M.Ordered()._strategy(policies.unbounded(5)).num_queries == 5


def test_ordered_secure_release_draws_exact_discrete_laplace():
    """rng=None: the integer cumulative counts get exact discrete Laplace, recorded as hardened;
    the unconstrained prefix answers are then integers."""
    k = 6
    x = np.array([3, 0, 1, 4, 0, 2])
    release = bt.answer(wl.prefix(k), x, policies.line(k), 0.7, M.Ordered(constrained=False), rng=None)
    assert release.secure is True
    assert release.sampler == sampler_name("integer", SecureRandom().backend)
    assert np.array_equal(release.answers, np.round(release.answers)) and release.answers[-1] == x.sum()
    gen = SecureRandom()
    for eps in (0.5, 3.0):
        out = M.Ordered(constrained=False).measure(wl.prefix(k), x, eps, gen, policy=_line_to_bottom(k))
        assert np.array_equal(out.answers, np.round(out.answers))
    assert set(gen.tally()) == {sampler_name("integer", gen.backend)}


def test_ordered_refuses_an_overflowing_noise_scale():
    policy = policies.threshold(5, 3)
    with pytest.raises(ValueError, match=r"^epsilon=5e-324 is too small: the noise scale overflows$"):
        M.Ordered().measure(wl.prefix(5), np.ones(5, dtype=np.int64), 5e-324, np.random.default_rng(0), policy=policy)


# -- Ordered: the degenerate release and post-processing -------------------------------------------


@pytest.mark.parametrize("name", ["ordered", "ordered_hierarchical"])
def test_one_cell_with_a_public_total_is_answered_exactly(monkeypatch, name):
    def never(*args, **kwargs):
        raise AssertionError("nothing is measured")

    monkeypatch.setattr(ordered_module, "add_laplace", never)
    mech = M.get_mechanism(name)
    for w in (wl.prefix(1), wl.as_workload(np.array([[2], [3]]))):
        out = mech.measure(w, np.array([7]), 0.5, np.random.default_rng(0), policy=policies.threshold(1, 1))
        assert isinstance(out.answers, np.ndarray) and out.answers.dtype == np.float64
        assert np.array_equal(out.answers, w.matvec(np.array([7.0])))
        assert out.component_totals == {0: 7}
        assert out.sensitivity == 0.0 and out.noise_scale == 0.0
        assert isinstance(out.sensitivity, float) and isinstance(out.noise_scale, float)


def test_two_cells_are_not_the_one_cell_path(monkeypatch):
    calls = _recorder(monkeypatch, replace=[4.5])
    out = M.Ordered().measure(wl.identity(2), np.array([3, 5]), 0.5, np.random.default_rng(0), policy=policies.line(2))
    assert len(calls) == 1 and np.array_equal(calls[0]["values"], [3.0])
    assert np.allclose(out.answers, [4.5, 3.5])
    assert out.component_totals == {1: 8} and out.sensitivity == 1.0 and out.noise_scale == 2.0


def test_ordered_unconstrained_reads_n_from_the_last_noisy_count(monkeypatch):
    """n not public: the K noisy cumulative counts give the cells as successive differences, the
    last one is the noisy n; nothing is disclosed exactly."""
    k, x = 5, np.array([1, 0, 2, 0, 1])
    calls = _recorder(monkeypatch, replace=[3.0, 1.0, 4.0, 1.5, 9.0])
    out = M.Ordered(constrained=False).measure(wl.identity(k), x, 2.0, np.random.default_rng(0), policy=_line_to_bottom(k))
    assert np.array_equal(calls[0]["values"], [1, 1, 3, 3, 4])
    assert np.allclose(out.answers, [3.0, -2.0, 3.0, -2.5, 7.5])
    assert out.component_totals == {} and out.sensitivity == 1.0 and out.noise_scale == 0.5


def test_ordered_constrained_is_isotonic_and_clipped_to_zero_and_n(monkeypatch):
    """Pool-adjacent-violators on the noisy cumulative counts, then clipping to [0, n]."""
    k, x = 5, np.array([1, 0, 2, 0, 1])
    mech, gen = M.Ordered(), np.random.default_rng(0)
    # n public (4): [-3, 0.5, 6, 2] -> isotonic [-3, 0.5, 4, 4] -> clipped [0, 0.5, 4, 4]
    _recorder(monkeypatch, replace=[-3.0, 0.5, 6.0, 2.0])
    out = mech.measure(wl.identity(k), x, 1.0, gen, policy=policies.line(k))
    assert np.allclose(out.answers, [0.0, 0.5, 3.5, 0.0, 0.0])
    # n = 0: everything is clipped to 0
    _recorder(monkeypatch, replace=[-1.0, 0.5, 0.25, 0.75])
    out = mech.measure(wl.identity(k), np.zeros(k, dtype=np.int64), 1.0, gen, policy=policies.line(k))
    assert np.array_equal(out.answers, np.zeros(k))
    # n measured (9): [3, 1, 4, 1.5] -> isotonic [2, 2, 2.75, 2.75], inside [0, 9]
    _recorder(monkeypatch, replace=[3.0, 1.0, 4.0, 1.5, 9.0])
    out = mech.measure(wl.identity(k), x, 1.0, gen, policy=_line_to_bottom(k))
    assert np.allclose(out.answers, [2.0, 0.0, 0.75, 0.0, 6.25])
    # a noisy n below 0: the cumulative counts are clipped to [0, 0]
    _recorder(monkeypatch, replace=[0.5, 0.25, 2.0, 3.0, -2.0])
    out = mech.measure(wl.identity(k), x, 1.0, gen, policy=_line_to_bottom(k))
    assert np.allclose(out.answers, [0.0, 0.0, 0.0, 0.0, -2.0])
    # a noisy n in (0, 1): the upper bound is n itself
    _recorder(monkeypatch, replace=[0.1, 0.2, 0.9, 0.95, 0.5])
    out = mech.measure(wl.identity(k), x, 1.0, gen, policy=_line_to_bottom(k))
    assert np.allclose(out.answers, [0.1, 0.1, 0.3, 0.0, 0.0])


@pytest.mark.parametrize("name", ["ordered", "ordered_hierarchical"])
def test_answers_are_float64_whatever_the_workload_computes_in(name):
    k = 6
    w = Float32Rows(np.tril(np.ones((k, k))))
    policy = policies.threshold(k, 2)
    out = M.get_mechanism(name).measure(w, np.arange(k), 1.0, np.random.default_rng(0), policy=policy)
    assert out.answers.dtype == np.float64 and out.answers.shape == (k,)


# -- Ordered: expected error ------------------------------------------------------------------------


@pytest.mark.parametrize("kind, k", [("line", 2), ("line", 5), ("threshold", 5), ("to_bottom", 5), ("unbounded", 5)])
def test_ordered_expected_error_is_exact(monkeypatch, kind, k):
    """The unconstrained estimate is linear in the noise: R e_i is the answers' change for a unit
    noise on count i, and E‖R η‖² = 2 (Δ/ε)² ‖R‖_F² for i.i.d. Laplace(Δ/ε) η. A workload with
    entries other than 0 and 1 (L1 and squared L2 norms differ)."""
    rng = np.random.default_rng(3)
    matrix = rng.choice([0.0, 0.5, 1.0, 2.0, 3.0], size=(4, k))
    matrix[:, -1] = [0.0, 2.0, 1.0, 3.0]
    w = wl.as_workload(matrix)
    policy = _policy(kind, k)
    public = kind in ("line", "threshold")
    delta = _brute_delta(policy, public)
    x = np.arange(k)
    mech = M.Ordered(constrained=False)
    size = k - 1 if public else k
    truth = matrix @ x
    columns = []
    for i in range(size):
        monkeypatch.setattr(ordered_module, "add_laplace",
                            lambda v, s, g, *, sensitivity, integer, i=i: np.asarray(v, float) + np.eye(size)[i])
        columns.append(mech.measure(w, x, 1.0, None, policy=policy).answers - truth)
    r = np.column_stack(columns)
    for eps in (0.5, 3.0):
        assert mech.expected_error(w, eps, policy=policy) == pytest.approx(2 * (delta / eps) ** 2 * (r**2).sum(), rel=1e-12)
    assert M.Ordered().expected_error(w, 0.5, policy=policy) is None


def test_ordered_expected_error_of_one_cell_and_refusals(monkeypatch):
    mech = M.Ordered(constrained=False)
    assert mech.expected_error(wl.prefix(1), 0.5, policy=policies.threshold(1, 1)) == 0.0
    with pytest.raises(ValueError, match=r"^ordered needs a 1-D ordered domain"):
        mech.expected_error(wl.identity((2, 2)), 1.0, policy=policies.grid((2, 2)))
    monkeypatch.setattr(ordered_module, "check_epsilon", float)  # a caller that skipped validation
    with pytest.raises(ValueError, match=r"^epsilon=5e-324 is too small: the noise scale overflows$"):
        mech.expected_error(wl.prefix(4), 5e-324, policy=policies.line(4))


def test_serves_refusals_name_the_mechanism():
    w, grid = wl.identity((2, 2)), policies.grid((2, 2))
    with pytest.raises(ValueError, match=r"^ordered needs a 1-D ordered domain, got policy"):
        M.Ordered().serves(w, grid)
    with pytest.raises(ValueError, match=r"^ordered_hierarchical needs a 1-D ordered domain, got policy"):
        M.OrderedHierarchical().serves(w, grid)
    assert M.Ordered().serves(wl.prefix(4), policies.line(4)) is True
    assert M.OrderedHierarchical().serves(wl.prefix(4), policies.line(4)) is True


# -- Ordered Hierarchical ---------------------------------------------------------------------------


def test_weighted_sensitivity_sums_delta_over_scale_of_the_measured_groups():
    groups = [("S", None, 1.0, 0.5), ("H", None, 6.0, 4.0), ("Z", None, 0.0, 0.0)]
    assert _weighted_sensitivity(groups) == 3.5
    assert _weighted_sensitivity([("S", None, 3.0, 2.0)]) == 1.5
    assert _weighted_sensitivity([]) == 0.0


def test_ordered_hierarchical_draws_unit_laplace_calibrated_to_epsilon(monkeypatch):
    """All groups at unit scale on the weighted rows, whose L1 sensitivity Σ_g Δ_g/scale_g is the
    composed ε; the largest Δ_g and scale_g are reported; the weighted rows are not integral."""
    k = 32
    policy, mech, x = policies.threshold(k, 4), M.OrderedHierarchical(fanout=4), np.arange(k)
    for eps in (0.5, 3.0):
        calls = _recorder(monkeypatch)
        out = mech.measure(wl.prefix(k), x, eps, np.random.default_rng(1), policy=policy)
        (call,) = calls
        assert call["scale"] == 1.0
        assert call["sensitivity"] == pytest.approx(eps, rel=1e-9)
        assert call["integer"] is False
        groups, _ = mech._plan(policy, eps)
        assert out.sensitivity == max(d for _, _, d, _ in groups) == 2.0
        assert out.noise_scale == pytest.approx(max(s for *_, s in groups))
    # one group of prefixes at weight 1 (θ = 1, ε = 1): integer rows
    calls = _recorder(monkeypatch)
    mech.measure(wl.prefix(8), np.arange(8), 1.0, np.random.default_rng(1), policy=policies.line(8))
    assert calls[0]["integer"] is True and calls[0]["sensitivity"] == 1.0


def test_ordered_hierarchical_secure_samplers():
    x = np.arange(32)
    gen = SecureRandom()
    release = bt.answer(wl.prefix(32), x, policies.threshold(32, 4), 0.7, M.OrderedHierarchical(4), rng=gen)
    assert release.secure is True and release.sampler == sampler_name("lattice", gen.backend)
    gen = SecureRandom()
    release = bt.answer(wl.prefix(8), np.arange(8), policies.line(8), 1.0, M.OrderedHierarchical(4), rng=gen)
    assert release.secure is True and release.sampler == sampler_name("integer", gen.backend)


def test_oh_predicted_error_by_hand():
    # K = 63, θ = 4, f = 2: c1 = 4·59/64, h = 2, c2 = 8·1·2³·63/64
    c1, c2 = 4 * 59 / 64, 8 * 8 * 63 / 64
    assert oh_predicted_error(63, 4, 2, 0.5) == pytest.approx((c1 ** (1 / 3) + c2 ** (1 / 3)) ** 3 / 0.25, rel=1e-12)
    # K = 100, θ = 10, f = 3: c1 = 4·90/101, h = 3, c2 = 8·2·3³·100/101
    c1, c2 = 4 * 90 / 101, 8 * 2 * 27 * 100 / 101
    assert oh_predicted_error(100, 10, 3, 2.0) == pytest.approx((c1 ** (1 / 3) + c2 ** (1 / 3)) ** 3 / 4, rel=1e-12)
    assert oh_predicted_error(63, 4, 2, 3.0) == pytest.approx(oh_predicted_error(63, 4, 2, 1.0) / 9, rel=1e-12)


def test_tuned_predicted_seconds_cost_model():
    """(3 + 2c) exact evaluations of K·q cell-queries (q = min(m, K) when the Gram is structured)
    plus (2 + c) sensitivity passes over the edges, c the number of candidate plans."""
    tuned = M.TunedOrderedHierarchical()
    policy = policies.threshold(64, 16)  # 3 candidates, Σ_{d=1}^{16} (64 - d) = 888 edges
    assert len(tuned._candidates(policy)) == 3 and policy.num_edges == 888
    assert tuned.predicted_seconds(wl.all_ranges(64), policy) == pytest.approx(
        9 * 5e-8 * 64 * 64 + 5 * 3e-7 * 888, rel=1e-12)
    ranges = wl.random_ranges(64, 100, rng=1)
    assert tuned.predicted_seconds(ranges, policy) == pytest.approx(9 * 5e-8 * 64 * 100 + 5 * 3e-7 * 888, rel=1e-12)
    small = policies.threshold(32, 2)  # 2 candidates, 31 + 30 edges
    assert len(tuned._candidates(small)) == 2 and small.num_edges == 61
    assert tuned.predicted_seconds(wl.prefix(32), small) == pytest.approx(7 * 5e-8 * 32 * 32 + 4 * 3e-7 * 61, rel=1e-12)
    matrix = np.ones((3, 32))
    assert tuned.predicted_seconds(matrix, small) == pytest.approx(7 * 5e-8 * 32 * 3 + 4 * 3e-7 * 61, rel=1e-12)
    assert math.isfinite(tuned.predicted_seconds(wl.prefix(16), policies.unbounded(16)))
