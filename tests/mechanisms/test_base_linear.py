"""The release path every linear mechanism shares (:class:`blowfish_te.mechanisms.LinearMechanism`):
Δ cached per (workload, policy), the policy's strategy measured under a policy, the caller's
generator used, and the arguments that calibrate the noise handed to the sampler."""

from __future__ import annotations

import numpy as np
import pytest

import blowfish_te.mechanisms.base as base
from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import H2, Identity, LinearMechanism, Ordered
from blowfish_te.sensitivity import sensitivity


def test_sensitivity_is_cached_per_policy_in_any_order():
    """One mechanism, one workload, releases under several policies in turn: each gets the Δ a
    fresh mechanism computes (a Δ cached for one policy must never serve another)."""
    workload, x = wl.prefix(16), np.arange(16)
    neighbours = {"unit": None, "line": policies.line(16), "complete": policies.complete(16),
                  "unbounded": policies.unbounded(16)}
    fresh = {name: H2().release(workload, x, 2.0, rng=0, policy=p).sensitivity for name, p in neighbours.items()}
    assert fresh["line"] != fresh["unbounded"]
    h2 = H2()
    strategy = h2.strategy(workload)
    for name in ["line", "unit", "complete", "line", "unbounded", "unit", "complete"]:
        policy = neighbours[name]
        got = h2.release(workload, x, 2.0, rng=0, policy=policy).sensitivity
        assert got == fresh[name]
        expected = strategy.column_norms("l1").max() if policy is None else sensitivity(strategy, policy)
        assert got == pytest.approx(float(expected))


class _Doubled(Identity, register=False):
    """A plug-in whose strategy under a policy is 2·I (its unit-change strategy is I)."""

    name = "doubled_under_a_policy"

    def policy_strategy(self, workload, policy):
        return wl.from_matrix(2.0 * np.eye(workload.size))

    def strategy_sensitivity(self, strategy, policy=None):
        return LinearMechanism.strategy_sensitivity(self, strategy, policy)  # Δ_G of the strategy itself

    def reconstruct(self, workload, strategy, y):
        return workload.matvec(np.asarray(y) / (2.0 if strategy.size and not strategy.is_binary else 1.0))


def test_under_a_policy_the_policy_strategy_is_measured(monkeypatch):
    calls = []

    def record(values, scale, rng, *, sensitivity, integer):
        calls.append((np.array(values, dtype=np.float64), scale, sensitivity, integer))
        return np.asarray(values, dtype=np.float64)

    monkeypatch.setattr(base, "add_laplace", record)
    x = np.array([3, 0, 5, 1])
    mech = _Doubled()
    outcome = mech.release(wl.identity(4), x, 0.5, rng=0, policy=policies.line(4))
    values, scale, delta, integer = calls[-1]
    np.testing.assert_array_equal(values, 2.0 * x)
    assert delta == outcome.sensitivity == 4.0 and scale == outcome.noise_scale == 8.0
    assert integer is True  # 2·I has integer entries
    outcome = mech.release(wl.identity(4), x, 0.5, rng=0)
    values, scale, delta, integer = calls[-1]
    np.testing.assert_array_equal(values, x)
    assert delta == 1.0 and scale == 2.0 and integer is True


def test_the_sampler_is_told_the_sensitivity_and_whether_the_answers_are_integers(monkeypatch):
    calls = []

    def record(values, scale, rng, *, sensitivity, integer):
        calls.append((scale, sensitivity, integer))
        return np.asarray(values, dtype=np.float64)

    monkeypatch.setattr(base, "add_laplace", record)
    x = np.arange(8)
    Identity().release(wl.prefix(8), x, 0.25, rng=0, policy=policies.line(8))
    assert calls[-1] == (8.0, 2.0, True)
    weighted = wl.from_matrix(np.diag(np.linspace(0.5, 1.5, 8)))

    class Weighted(Identity, register=False):
        name = "weighted_cells"

        def strategy(self, workload):
            return weighted

        def strategy_sensitivity(self, strategy, policy=None):
            return 1.5

        def reconstruct(self, workload, strategy, y):
            return workload.matvec(np.asarray(y) / np.linspace(0.5, 1.5, 8))

    Weighted().release(wl.identity(8), x, 3.0, rng=0)
    assert calls[-1] == (0.5, 1.5, False)


def test_the_callers_generator_draws_the_noise():
    x = np.arange(10)
    for mech in (Identity(), H2()):
        first = mech.run(wl.prefix(10), x, 0.7, rng=3)
        np.testing.assert_array_equal(first, mech.run(wl.prefix(10), x, 0.7, rng=3))
        np.testing.assert_array_equal(first, mech.run(wl.prefix(10), x, 0.7, np.random.default_rng(3)))
        np.testing.assert_array_equal(first, mech.release(wl.prefix(10), x, 0.7, rng=3).answers)
        assert not np.array_equal(first, mech.run(wl.prefix(10), x, 0.7, rng=4))


def test_answers_are_float_whatever_the_reconstruction_returns():
    class Rounded(Identity, register=False):
        name = "rounded_cells"

        def reconstruct(self, workload, strategy, y):
            return [int(v) for v in np.round(workload.matvec(y))]

    answers = Rounded().release(wl.identity(5), np.arange(5), 1e6, rng=0).answers
    assert answers.dtype == np.float64
    np.testing.assert_array_equal(answers, np.arange(5.0))


def test_an_overflowing_noise_scale_is_refused_with_its_numbers():
    class Huge(Identity, register=False):
        name = "huge_weights"

        def strategy_sensitivity(self, strategy, policy=None):
            return 1e250

    with pytest.raises(ValueError, match=r"^epsilon=1e-100 is too small: the noise scale Δ/ε = 1e\+250/1e-100 overflows$"):
        Huge().release(wl.identity(4), np.arange(4), 1e-100, rng=0)


def test_a_native_mechanism_asks_for_the_policy():
    with pytest.raises(TypeError, match=r"^mechanism 'ordered' needs the policy: use answer\(workload, x, policy, \.\.\.\)$"):
        Ordered().run(wl.prefix(4), np.arange(4), 1.0, rng=0)
