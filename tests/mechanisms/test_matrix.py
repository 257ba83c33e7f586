"""The matrix mechanism and the non-negative reconstruction: the strategy actually measured (given,
built by a function, or a least-squares strategy used as is), its sensitivity against brute force,
unbiased reconstruction, the noise drawn, and the wrapper measuring exactly what the wrapped
mechanism measures (under a policy too) while answering the non-negative least-squares estimate."""

import math

import numpy as np
import pytest
from scipy.optimize import nnls

import blowfish_te as bt
import blowfish_te.mechanisms.base as base
from blowfish_te import mechanisms as M
from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import LinearMechanism
from blowfish_te.strategies import GeneralStrategy, hierarchical
from blowfish_te.testing import Replay, brute_sensitivity, edge_set, policy_neighbours

pytestmark = pytest.mark.core

EPSILONS = (0.3, 1.0, 3.5)


class _PolicyShaped(LinearMechanism, register=False):
    """Measures the identity for unit changes; under a policy, prefix sums unless the policy is
    unbounded DP (a stand-in for mechanisms that choose their strategy from the policy)."""

    name = "policy-shaped"

    def strategy(self, workload):
        return GeneralStrategy(wl.identity(workload.domain))

    def policy_strategy(self, workload, policy):
        return self.strategy(workload) if policy.is_unbounded_dp else GeneralStrategy(wl.prefix(workload.size))


def _spy(monkeypatch):
    """Record (A x, noisy A x, scale) of every Laplace measurement made through the base class."""
    calls = []
    real = base.add_laplace

    def spy(values, scale, rng, *, sensitivity, integer):
        out = real(values, scale, rng, sensitivity=sensitivity, integer=integer)
        calls.append((np.array(values, dtype=float), out.copy(), scale))
        return out

    monkeypatch.setattr(base, "add_laplace", spy)
    return calls



# -- MatrixMechanism --------------------------------------------------------------------------


def test_strategy_built_by_a_function_of_the_workload_is_measured_and_reconstructed_unbiased():
    k = 7
    mech = M.MatrixMechanism(lambda w: wl.all_ranges(w.size))
    w, x = wl.random_ranges(k, 12, rng=2), np.random.default_rng(0).integers(0, 20, k)
    a = mech.strategy(w)
    dense = a.dense()
    assert np.array_equal(dense, wl.all_ranges(k).dense())
    assert np.allclose(mech.reconstruct(w, a, dense @ x), w.dense() @ x, rtol=0, atol=1e-9)  # W A⁺ A x = W x
    delta = np.abs(dense).sum(0).max()
    assert delta == max((i + 1) * (k - i) for i in range(k))  # ranges through cell i
    for eps in EPSILONS:
        release = mech.release(w, x, eps, rng=1)
        assert release.sensitivity == delta and release.noise_scale == pytest.approx(delta / eps, rel=1e-15)


def test_matrix_mechanism_noise_drawn_is_laplace_of_the_column_norm_over_epsilon(monkeypatch):
    a = np.array([[1.0, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0], [0, 0, 1, 0], [0, 2, 0, 0]])
    mech, w, x = M.MatrixMechanism(a), wl.prefix(4), np.array([3, 0, 5, 1])
    delta = 4.0  # column 1: 1 + 1 + 2
    for eps in (0.5, 2.0):
        calls = _spy(monkeypatch)
        for seed in range(300):
            mech.release(w, x, eps, rng=seed)
        monkeypatch.undo()
        assert {c[2] for c in calls} == {delta / eps}
        noise = np.concatenate([out - values for values, out, _ in calls])
        scale = delta / eps
        assert abs(np.mean(noise**2) - 2 * scale**2) < 5 * math.sqrt(20 / noise.size) * scale**2
        assert all(np.array_equal(values, a @ x) for values, _, _ in calls)


def test_matrix_mechanism_replayed_cost_is_epsilon(monkeypatch):
    mech, w = M.MatrixMechanism(lambda w: wl.prefix(w.size)), wl.identity(5)
    x = np.array([2, 0, 1, 4, 0])
    worst = 0.0
    for cell in range(5):
        replay = Replay()
        monkeypatch.setattr(base, "add_laplace", replay)
        first = mech.release(w, x, 0.7, rng=0)
        replay.replay()
        y = x.copy()
        y[cell] += 1
        assert np.array_equal(first.answers, mech.release(w, y, 0.7, rng=1).answers)
        worst = max(worst, replay.cost)
    assert worst == pytest.approx(0.7, rel=1e-12)


def test_a_least_squares_strategy_is_used_as_given():
    k, w = 16, wl.prefix(16)
    tree = hierarchical(k, 2)
    mech = M.MatrixMechanism(tree)
    assert mech.strategy(w) is tree
    x = np.arange(k)
    for eps in EPSILONS:  # the same measurement and the tree's own exact reconstruction as H2
        assert np.array_equal(mech.release(w, x, eps, rng=4).answers, M.H2().release(w, x, eps, rng=4).answers)
    assert mech.expected_error(w, 1.0) == M.H2().expected_error(w, 1.0)
    built = M.MatrixMechanism(lambda w: hierarchical(w.domain, 2))
    assert np.array_equal(built.release(w, x, 1.0, rng=4).answers, M.H2().release(w, x, 1.0, rng=4).answers)


def test_get_params_round_trip_and_repr():
    a = np.array([[1.0, 0], [1, 1], [0, 1]])
    mech = M.MatrixMechanism(a)
    params = mech.get_params()
    assert list(params) == ["strategy"] and np.array_equal(params["strategy"].dense(), a)
    again = M.MatrixMechanism(**params)
    w, x = wl.prefix(2), np.array([4, 1])
    assert np.array_equal(again.release(w, x, 1.0, rng=3).answers, mech.release(w, x, 1.0, rng=3).answers)
    assert repr(mech).startswith("MatrixMechanism(strategy=")


def test_matrix_mechanism_argument_checks_name_the_strategy():
    for bad in ("not a matrix", 3, {"a": 1}):
        with pytest.raises(TypeError, match="^strategy must be a blowfish_te Workload or a 2-D matrix"):
            M.MatrixMechanism(bad)
    returns_junk = M.MatrixMechanism(lambda w: "junk")
    with pytest.raises(TypeError, match="^strategy must be a blowfish_te Workload or a 2-D matrix"):
        returns_junk.strategy(wl.prefix(4))
    with pytest.raises(ValueError, match="^strategy has 3 columns but the workload has 4 cells$"):
        M.MatrixMechanism(np.eye(3)).strategy(wl.prefix(4))
    with pytest.raises(ValueError, match="^strategy has 5 columns but the workload has 4 cells$"):
        M.MatrixMechanism(lambda w: np.eye(5)).strategy(wl.prefix(4))


# -- NonNegative ------------------------------------------------------------------------------


def test_nonnegative_answers_a_nonnegative_least_squares_estimate(monkeypatch):
    k = 12
    w = wl.identity(k)  # answers are the estimate itself
    x = np.zeros(k, dtype=int)
    x[[1, 5, 6]] = [40, 3, 1]
    a = M.H2().strategy(w).dense()
    for seed, eps in enumerate(EPSILONS):
        calls = _spy(monkeypatch)
        estimate = M.NonNegative(M.H2()).release(w, x, eps, rng=seed).answers
        plain = M.H2().release(w, x, eps, rng=seed).answers
        monkeypatch.undo()
        (values, y, _), (_, y_plain, _) = calls
        assert np.array_equal(values, a @ x) and np.array_equal(y, y_plain)  # the same measurement
        assert (estimate >= 0).all()
        best = nnls(a, y)[0]
        cost = np.sum((a @ estimate - y) ** 2)
        assert cost <= np.sum((a @ best - y) ** 2) * (1 + 1e-3)  # (near) the constrained minimum
    # counts far above the noise: the least-squares estimate is feasible, hence the answer
    big = np.full(k, 200)
    for seed, eps in enumerate(EPSILONS):
        plain = M.H2().release(w, big, eps, rng=seed).answers
        assert (plain > 0).all()
        assert np.allclose(M.NonNegative(M.H2()).release(w, big, eps, rng=seed).answers, plain, rtol=0, atol=1e-6)


def test_nonnegative_recovers_zero_cells_when_the_noise_is_negligible():
    k = 10
    x = np.array([0, 7, 0, 0, 2, 0, 5, 0, 0, 1])
    for inner in (M.HB(branching=3), M.Identity(), M.Privelet()):
        answers = M.NonNegative(inner).run(wl.identity(k), x, 1e7, rng=0)
        assert np.allclose(answers, x, rtol=0, atol=1e-4)
        prefix = M.NonNegative(inner).run(wl.prefix(k), x, 1e7, rng=0)
        assert np.allclose(prefix, np.cumsum(x), rtol=0, atol=1e-3)


def test_nonnegative_measures_what_the_wrapped_mechanism_measures(monkeypatch):
    w, x = wl.prefix(8), np.array([0, 3, 0, 1, 9, 0, 0, 2])
    for inner in (M.HB(branching=2), M.QuadTree(), M.MatrixMechanism(lambda w: wl.all_ranges(w.size))):
        wrapped = M.NonNegative(inner)
        assert wrapped.strategy(w) is inner.strategy(w)
        for eps in EPSILONS:
            calls = _spy(monkeypatch)
            ours = wrapped.release(w, x, eps, rng=5)
            theirs = inner.release(w, x, eps, rng=5)
            monkeypatch.undo()
            assert ours.sensitivity == theirs.sensitivity and ours.noise_scale == theirs.noise_scale
            assert np.array_equal(calls[0][1], calls[1][1])  # the same noisy measurement
        assert wrapped.expected_error(w, 1.0) is None


@pytest.mark.slow
def test_nonnegative_under_a_policy_uses_the_wrapped_policy_strategy(monkeypatch):
    k = 6
    w, x = wl.prefix(k), np.array([1, 0, 2, 0, 0, 3])
    inner = _PolicyShaped()
    wrapped = M.NonNegative(inner)
    for policy, delta in [(policies.line(k), 1.0), (policies.complete(k), 5.0), (policies.unbounded(k), 1.0)]:
        chosen = wrapped.policy_strategy(w, policy)
        assert np.array_equal(chosen.dense(), inner.policy_strategy(w, policy).dense())
        assert brute_sensitivity(chosen.dense(), edge_set(policy), k) == delta
        for eps in EPSILONS:
            release = wrapped.release(w, x, eps, rng=0, policy=policy)
            assert release.sensitivity == delta and release.noise_scale == pytest.approx(delta / eps, rel=1e-15)
        if policy.is_unbounded_dp:
            continue  # no moves between cells: the replay below follows moves along edges
        worst = 0.0
        for y in policy_neighbours(x, policy):
            replay = Replay()
            monkeypatch.setattr(base, "add_laplace", replay)
            first = wrapped.release(w, x, 0.9, rng=0, policy=policy)
            replay.replay()
            assert np.array_equal(first.answers, wrapped.release(w, y, 0.9, rng=1, policy=policy).answers)
            monkeypatch.undo()
            worst = max(worst, replay.cost)
        assert worst == pytest.approx(0.9, rel=1e-12)
    # without a policy the unit-change strategy (identity) is measured
    assert np.array_equal(wrapped.strategy(w).dense(), np.eye(k))


def test_nonnegative_name_and_argument_check():
    assert M.NonNegative(M.HB()).name == "nonnegative(hb)"
    release = bt.answer(wl.prefix(8), np.arange(8), policies.line(8), 1.0, M.NonNegative(M.H2()), rng=0)
    assert release.mechanism == "nonnegative(h2)"
    with pytest.raises(TypeError, match="^NonNegative wraps a LinearMechanism, got Uniform$"):
        M.NonNegative(M.Uniform())
    with pytest.raises(TypeError, match="^NonNegative wraps a LinearMechanism, got str$"):
        M.NonNegative("hb")
