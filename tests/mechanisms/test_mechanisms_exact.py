"""Calibration of the two Laplace mechanisms and of Uniform, checked on what they do: sensitivities
against brute force on small policies, the noise actually drawn at several ε, and the privacy cost
replayed on every neighbour."""

import math

import numpy as np
import pytest

from blowfish_te import mechanisms as M
from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.secure import SecureRandom, sampler_name
from blowfish_te.strategies import IdentityStrategy
from blowfish_te.testing import Replay, assert_laplace_noise, brute_sensitivity, edge_set, policy_neighbours

from tests.helpers import Float32Rows

pytestmark = pytest.mark.core

EPSILONS = (0.4, 2.5)




# -- Identity: Δ_G(I) on policies of every edge-block kind ------------------------------------------

IDENTITY_POLICIES = {
    "line": (lambda k: policies.line(k), 2.0),
    "complete": (lambda k: policies.complete(k), 2.0),
    "grid": (lambda k: policies.grid((2, k // 2)), 2.0),
    "partition": (lambda k: policies.partition(np.arange(k) // 3), 2.0),
    "unbounded": (lambda k: policies.unbounded(k), 1.0),
    "pairs-to-bottom": (lambda k: policies.from_edges(k, [[i, k] for i in range(0, k, 2)]), 1.0),
    "pairs-mixed": (lambda k: policies.from_edges(k, [[i, i + 1] for i in range(0, k - 1, 4)]
                                                  + [[i, k] for i in range(2, k, 4)]), 2.0),
    "edgeless": (lambda k: policies.from_edges(k, np.zeros((0, 2), dtype=np.int64)), 0.0),
}


@pytest.mark.parametrize("family", list(IDENTITY_POLICIES))
def test_identity_noise_is_calibrated_to_the_brute_force_policy_sensitivity(family):
    build, expected = IDENTITY_POLICIES[family]
    small = build(6)
    delta = brute_sensitivity(np.eye(6), edge_set(small), 6, max_records=1)
    assert delta == expected
    assert M.Identity().strategy_sensitivity(IdentityStrategy(6), small) == delta
    k = 3000  # the same edge kinds on a large domain: one release draws k noise values
    policy, x = build(k), np.random.default_rng(0).integers(0, 50, k)
    for seed, eps in enumerate(EPSILONS):
        out = M.Identity().release(wl.identity(k), x, eps, rng=seed, policy=policy)
        assert out.sensitivity == delta and out.noise_scale == delta / eps
        if delta == 0:
            assert np.array_equal(out.answers, x)  # no neighbours: nothing to hide
        else:
            assert_laplace_noise(out.answers - x, delta / eps)


def test_identity_for_unit_changes_draws_laplace_one_over_epsilon():
    k, x = 3000, np.random.default_rng(1).integers(0, 9, 3000)
    for seed, eps in enumerate(EPSILONS):
        out = M.Identity().release(wl.identity(k), x, eps, rng=seed)
        assert out.sensitivity == 1.0
        assert_laplace_noise(out.answers - x, 1.0 / eps)


# -- DirectLaplace: Δ_G(W) of marginals and of other workloads -----------------------------------

MARGINAL_SETS = {
    "one-way-2d": [(0,), (1,)],
    "one-way-3d": [(0,), (1,), (2,)],
    "both-orders": [(0, 1), (1, 0)],
    "repeated": [(0,), (1,), (0, 1), (1, 0), (0,)],
    "total-and-pair": [(), (0, 2), (1,)],
}


def _marginal_shape(subsets, sizes):
    d = 1 + max((a for s in subsets for a in s), default=0)
    return tuple(sizes[:d]) if d > 1 else (sizes[0], sizes[1])


MARGINAL_POLICIES = {
    "unit": lambda shape: None,
    "unbounded": policies.unbounded,
    "complete": policies.complete,
    "attribute": policies.attribute,
    "grid": policies.grid,
    "rows": lambda shape: policies.partition(np.arange(math.prod(shape)).reshape(shape) // shape[-1]),
    "mixed": lambda shape: policies.from_edges(shape, [[0, math.prod(shape) - 1], [1, math.prod(shape)]]),
}


def _brute_marginal_delta(workload, policy):
    k = workload.size
    edges = {(i, k) for i in range(k)} if policy is None else edge_set(policy)
    return brute_sensitivity(workload.dense(), edges, k, max_records=1)


@pytest.mark.parametrize("subsets", list(MARGINAL_SETS))
def test_marginal_sensitivity_matches_brute_force(subsets):
    sets = MARGINAL_SETS[subsets]
    shape = _marginal_shape(sets, (2, 3, 2))
    w = wl.marginals(shape, sets)
    seen = set()
    for name, build in MARGINAL_POLICIES.items():
        policy = build(shape)
        delta = _brute_marginal_delta(w, policy)
        seen.add(delta)
        assert M.DirectLaplace().strategy_sensitivity(w, policy) == delta, name
        out = M.DirectLaplace().release(w, np.ones(w.size, dtype=int), 1.0, rng=0, policy=policy)
        assert out.sensitivity == delta and out.noise_scale == delta, name
    assert len(seen) >= 2  # the policies really differ on this workload


@pytest.mark.parametrize("policy_name", ["unit", "unbounded", "complete", "attribute", "rows"])
def test_marginal_noise_drawn_at_several_epsilons(policy_name):
    """Δ read off the small table by brute force; the same subsets on a 30 × 40 table (Δ depends
    on the subsets and moves only) then draw noise of variance 2 (Δ/ε)² per answer."""
    sets = MARGINAL_SETS["repeated"]
    build = MARGINAL_POLICIES[policy_name]
    delta = _brute_marginal_delta(wl.marginals((2, 3), sets), build((2, 3)))
    w = wl.marginals((30, 40), sets)
    x = np.random.default_rng(2).integers(0, 5, w.size)
    truth = w @ x
    for seed, eps in enumerate(EPSILONS):
        out = M.DirectLaplace().release(w, x, eps, rng=seed, policy=build((30, 40)))
        assert out.sensitivity == delta
        assert_laplace_noise(out.answers - truth, delta / eps)


@pytest.mark.parametrize("workload, policy", [
    (wl.prefix(6), policies.line(6)),
    (wl.random_ranges(8, 12, rng=3), policies.threshold(8, 2)),
    (wl.prefix(6), policies.partition([0, 0, 1, 1, 1, 2])),
    (wl.random_ranges(7, 10, rng=4), policies.unbounded(7)),
], ids=["prefix-line", "ranges-threshold", "prefix-partition", "ranges-unbounded"])
def test_direct_laplace_uses_the_policy_sensitivity_of_the_workload(workload, policy):
    k = workload.size
    delta = brute_sensitivity(workload.dense(), edge_set(policy), k, max_records=1)
    unit = brute_sensitivity(workload.dense(), {(i, k) for i in range(k)}, k, max_records=1)
    assert M.DirectLaplace().strategy_sensitivity(workload, policy) == pytest.approx(delta)
    assert M.DirectLaplace().strategy_sensitivity(workload, None) == pytest.approx(unit)
    if policy.name != f"unbounded({k})":
        assert delta != unit  # otherwise the policy would not be tested


# -- the privacy cost, replayed ----------------------------------------------------------------------

REPLAY_CASES = [
    (M.Identity(), wl.identity(6), policies.line(6)),
    (M.Identity(), wl.identity(6), policies.unbounded(6)),
    (M.Identity(), wl.identity(6), policies.partition([0, 0, 1, 1, 1, 2])),
    (M.Identity(), wl.identity(6), policies.from_edges(6, [[0, 6], [3, 6]])),
    (M.DirectLaplace(), wl.prefix(6), policies.line(6)),
    (M.DirectLaplace(), wl.marginals((2, 3), MARGINAL_SETS["repeated"]), policies.complete((2, 3))),
    (M.DirectLaplace(), wl.marginals((2, 3), MARGINAL_SETS["repeated"]), policies.attribute((2, 3))),
    (M.DirectLaplace(), wl.marginals((2, 2, 2), MARGINAL_SETS["one-way-3d"]), policies.unbounded((2, 2, 2))),
    (M.DirectLaplace(), wl.marginals((2, 2, 2), MARGINAL_SETS["one-way-3d"]), policies.grid((2, 2, 2))),
]


@pytest.mark.parametrize("mech, workload, policy", REPLAY_CASES, ids=lambda v: getattr(v, "name", None))
def test_replayed_privacy_cost_is_exactly_epsilon_at_the_worst_neighbour(mech, workload, policy, monkeypatch):
    """Too little noise costs more than ε at some neighbour; too much leaves every neighbour below ε."""
    import blowfish_te.mechanisms.base as base

    x = np.random.default_rng(5).integers(1, 4, policy.size)
    for eps in (0.3, 1.7):
        worst = 0.0
        for y in policy_neighbours(x, policy):
            replay = Replay()
            monkeypatch.setattr(base, "add_laplace", replay)
            first = mech.release(workload, x, eps, rng=1, policy=policy)
            replay.replay()
            second = mech.release(workload, y, eps, rng=2, policy=policy)
            assert np.array_equal(first.answers, second.answers)
            worst = max(worst, replay.cost)
        assert worst == pytest.approx(eps, rel=1e-12)


# -- Uniform -------------------------------------------------------------------------------------------


def test_uniform_total_carries_laplace_one_over_epsilon_at_several_epsilons():
    k = 10
    x = np.random.default_rng(6).integers(0, 20, k)
    total = wl.ranges(k, [0], [k - 1])
    for seed, eps in enumerate(EPSILONS):
        gen = np.random.default_rng(seed)
        noisy = np.array([M.Uniform().run(total, x, eps, rng=gen)[0] for _ in range(3000)])
        assert_laplace_noise(noisy - x.sum(), 1.0 / eps)


def test_uniform_draws_from_the_given_generator_and_spreads_the_total_evenly():
    k, eps = 8, 0.05
    x = np.arange(k)
    ident, total = wl.identity(k), wl.ranges(k, [0], [k - 1])
    cells = M.Uniform().run(ident, x, eps, rng=4)
    assert np.array_equal(cells, M.Uniform().run(ident, x, eps, rng=4))  # the seed fixes the noise
    assert np.array_equal(cells, M.Uniform().run(ident, x, eps, rng=np.random.default_rng(4)))
    assert np.allclose(cells, cells[0]) and cells.sum() == pytest.approx(M.Uniform().run(total, x, eps, rng=4)[0])
    gen = np.random.default_rng(4)
    first, second = M.Uniform().run(total, x, eps, rng=gen)[0], M.Uniform().run(total, x, eps, rng=gen)[0]
    assert first == pytest.approx(cells.sum()) and second != first  # the generator moved on
    assert len({M.Uniform().run(total, x, eps, rng=s)[0] for s in range(5)}) == 5
    prefix = M.Uniform().run(wl.prefix(k), x, eps, rng=4)
    assert np.allclose(prefix, np.arange(1, k + 1) * cells[0])


def test_uniform_secure_path_draws_integer_discrete_laplace():
    k = 5
    x = np.array([3, 0, 7, 1, 2])
    total = wl.ranges(k, [0], [k - 1])
    gen = SecureRandom()
    noisy = np.array([M.Uniform().run(total, x, 0.7, rng=gen)[0] for _ in range(30)])
    assert np.array_equal(noisy, np.round(noisy))  # the total plus integer noise
    assert set(gen.tally()) == {sampler_name("integer", gen.backend)}


def test_uniform_answers_are_float64_whatever_the_workload_computes_in():
    w = Float32Rows([[1, 1, 0, 0], [0, 1, 1, 1]])
    answers = M.Uniform().run(w, [2, 0, 1, 5], 1.0, rng=0)
    assert answers.dtype == np.float64 and answers.shape == (2,)
    assert answers[1] == pytest.approx(1.5 * answers[0], rel=1e-6)  # 3 cells against 2, evenly spread


def test_uniform_refuses_a_bad_epsilon_by_name():
    with pytest.raises(ValueError, match="^epsilon must be a finite number > 0"):
        M.Uniform().run(wl.identity(3), [1, 2, 3], 0.0, rng=0)
