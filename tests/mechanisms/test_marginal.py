"""Releases of the mechanisms over marginals (:mod:`blowfish_te.mechanisms.marginal`) checked
against independent computations: the noise actually drawn against Laplace(Δ/ε) with Δ found by
brute force over the policy's neighbours, an exact coupling of the noise on neighbours (the
privacy loss is at most ε and reaches it), the answers against dense least squares, the
unit-change path (no policy), the notes on exact marginals, and the optimiser's parameters.

Laplace mechanism and its L1 sensitivity: Dwork, McSherry, Nissim, Smith (TCC 2006); policy
neighbours and Δ_G: He, Machanavajjhala, Ding (SIGMOD 2014, Thm 5.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import marginal as marginal_module
from blowfish_te.mechanisms.marginal import OptimizedMarginals, WorkloadMarginals
from blowfish_te.secure import SecureRandom, sampler_name
from blowfish_te.sensitivity import sensitivity
from blowfish_te.strategies.marginals import MAX_TABLE_CELLS, UNIT_CHANGES, marginal_table, move_patterns, optimize_weights
from blowfish_te.testing import added_records, assert_laplace_noise, close, policy_neighbours, replayed_runs
from blowfish_te.workloads import MarginalCounts, from_matrix

SHAPE = (3, 2, 4)
NOTE = "exact (sensitivity 0 under the policy: functions of the disclosed totals): marginals on attributes "


def _policy(kind: str, shape=SHAPE):
    if kind == "unbounded":
        return policies.unbounded(shape)
    if kind == "attribute":
        return policies.attribute(shape)
    if kind == "complete":
        return policies.complete(shape)
    if kind == "partition":  # blocks by attribute 0: its marginal is disclosed
        return policies.partition(np.broadcast_to(np.arange(shape[0]).reshape((-1,) + (1,) * (len(shape) - 1)), shape))
    raise AssertionError(kind)


def _mechanism(name: str):
    # three restarts find the same weights as the default twelve on these small workloads, faster
    return WorkloadMarginals() if name == "marginals" else OptimizedMarginals(restarts=3)


def _dense(strategy) -> np.ndarray:
    """The stacked weighted marginals w_S M_S of a strategy as a dense matrix (measured sets only)."""
    k = math.prod(strategy.domain)
    rows = [w * wl.marginals(strategy.domain, [s]).dense() for s, w in zip(strategy.subsets, strategy.weights)]
    return np.concatenate(rows) if rows else np.zeros((0, k))


def _histogram(seed: int = 0, shape=SHAPE) -> np.ndarray:
    # every cell holds records, so every move of every policy is possible from it
    return np.random.default_rng(seed).integers(1, 7, math.prod(shape))


class _Spy:
    """Wraps the module's ``add_laplace``: records the values, the scale and the noise added."""

    def __init__(self, real):
        self.real, self.values, self.noise, self.scales, self.integer = real, [], [], [], []

    def __call__(self, values, scale, rng, *, sensitivity, integer):
        out = self.real(values, scale, rng, sensitivity=sensitivity, integer=integer)
        self.values.append(np.array(values, dtype=np.float64))
        self.noise.append(np.asarray(out, dtype=np.float64) - self.values[-1])
        self.scales.append(scale)
        self.integer.append(integer)
        return out


def _spy(monkeypatch) -> _Spy:
    spy = _Spy(marginal_module.add_laplace)
    monkeypatch.setattr(marginal_module, "add_laplace", spy)
    return spy


# -- privacy: the noise drawn is Laplace(Δ/ε) with Δ the brute-force sensitivity -------------------

@pytest.mark.slow
@pytest.mark.parametrize("kind", ["unbounded", "attribute", "complete", "partition"])
@pytest.mark.parametrize("name", ["marginals", "marginals_optimized"])
def test_the_noise_drawn_is_laplace_of_the_brute_force_sensitivity_over_epsilon(monkeypatch, kind, name):
    policy, mech = _policy(kind), _mechanism(name)
    workload = wl.marginals(SHAPE, [(), (0, 1), (2,)])
    x = _histogram(1)
    strategy = mech.policy_strategy(workload, policy)
    a = _dense(strategy)
    neighbours = policy_neighbours(x, policy)
    delta = max(float(np.abs(a @ x - a @ y).sum()) for y in neighbours)
    assert delta > 0
    # the generic Δ_G of the same stacked marginals agrees with the neighbour-by-neighbour maximum
    assert sensitivity(from_matrix(a, domain=SHAPE), policy) == pytest.approx(delta)
    # marginals released without noise are the same on every neighbour
    for e in strategy.exact:
        assert all(np.array_equal(marginal_table(x, SHAPE, e), marginal_table(y, SHAPE, e)) for y in neighbours)
    spy = _spy(monkeypatch)
    for epsilon, seed in ((0.5, 11), (2.0, 12), (0.25, 13)):
        spy.noise.clear()
        gen = np.random.default_rng(seed)
        for _ in range(120):
            out = mech.release(workload, x, epsilon, rng=gen, policy=policy)
            assert out.sensitivity == pytest.approx(delta, rel=1e-12)
            assert out.noise_scale == pytest.approx(delta / epsilon, rel=1e-12)
        # the values the noise was added to are the weighted marginals of x
        assert close(spy.values[-1], a @ x)
        assert_laplace_noise(np.concatenate(spy.noise), delta / epsilon)


@pytest.mark.parametrize("kind", ["unbounded", "attribute", "complete", "partition"])
@pytest.mark.parametrize("name", ["marginals", "marginals_optimized"])
def test_the_coupled_privacy_loss_over_the_policys_neighbours_is_exactly_epsilon(monkeypatch, kind, name):
    # shifting the recorded noise to replay the same output on a neighbour costs ‖Δv‖₁/b: at most ε,
    # and exactly ε on the worst neighbour (the noise is not larger than it needs to be)
    policy, mech = _policy(kind), _mechanism(name)
    workload = wl.marginals(SHAPE, [(), (0, 1), (2,)])
    x = _histogram(2)
    a = _dense(mech.policy_strategy(workload, policy))
    neighbours = policy_neighbours(x, policy)
    # the neighbours that shift the measured values the most, and a sample of the others
    shifts = np.array([float(np.abs(a @ x - a @ y).sum()) for y in neighbours])
    top = shifts >= shifts.max() * (1 - 1e-9)
    worst = np.flatnonzero(top)[:4]
    others = np.random.default_rng(0).permutation(np.flatnonzero(~top))[:24]
    chosen = [neighbours[i] for i in np.concatenate([worst, others])]
    for epsilon in (0.5, 2.0):
        run = lambda z, epsilon=epsilon: mech.release(workload, z, epsilon, rng=np.random.default_rng(5), policy=policy).answers
        costs = [r.cost for r in replayed_runs(monkeypatch, run, x, chosen, [marginal_module])]
        assert max(costs) == pytest.approx(epsilon, rel=1e-9)
        assert max(costs) <= epsilon * (1 + 1e-9)


def test_releases_of_different_workloads_on_one_mechanism_each_get_their_own_sensitivity():
    mech = WorkloadMarginals()
    x = _histogram(3)
    small, large = wl.marginals(SHAPE, [(0,)]), wl.marginals(SHAPE, [(0, 1), (2,), (1,)])
    policy = policies.unbounded(SHAPE)
    for epsilon in (0.5, 4.0):
        # unit changes (no policy) and the unbounded policy: one record moves each marginal by 1
        for workload, delta in ((small, 1.0), (large, 3.0)):
            for p in (None, policy):
                out = mech.release(workload, x, epsilon, rng=0, policy=p)
                assert (out.sensitivity, out.noise_scale) == (pytest.approx(delta), pytest.approx(delta / epsilon))
    # and in the other order, on a fresh mechanism
    mech = WorkloadMarginals()
    assert mech.release(large, x, 0.5, rng=0).sensitivity == pytest.approx(3.0)
    assert mech.release(small, x, 0.5, rng=0).sensitivity == pytest.approx(1.0)


def test_an_epsilon_whose_noise_scale_overflows_is_refused_with_a_message_naming_it():
    mech = WorkloadMarginals()
    workload = wl.marginals(SHAPE, [(0,)])
    with pytest.raises(ValueError, match=r"^epsilon=1e-320 is too small: the noise scale Δ/ε = 1\.0/1e-320 overflows$"):
        mech.measure(workload, _histogram(), 1e-320, np.random.default_rng(0))


# -- the unit-change path: no policy ------------------------------------------------------------

def test_the_unit_change_strategy_is_the_workloads_own_marginals_per_workload():
    mech = WorkloadMarginals()
    w1, w2 = wl.marginals(SHAPE, [(1, 0), (2,)]), wl.marginals(SHAPE, [(2, 1), ()])
    s1, s2 = mech.strategy(w1), mech.strategy(w2)
    assert s1.subsets == ((0, 1), (2,)) and s2.subsets == ((1, 2), ())
    assert list(s1.weights) == [1.0, 1.0] and list(s2.weights) == [1.0, 1.0]
    assert s1.exact == () and s2.exact == ()  # a record can be added or removed: nothing is exact
    assert s1.domain == SHAPE and s2.domain == SHAPE
    assert mech.strategy(w1) is s1 and mech.strategy(w2) is s2
    # the unit-change Δ is the largest column L1 norm of the stacked marginals, by brute force
    x = _histogram(4)
    for s in (s1, s2):
        a = _dense(s)
        brute = max(float(np.abs(a @ (y - x)).sum()) for y in added_records(x))
        assert mech.strategy_sensitivity(s) == brute == 2.0
    with pytest.raises(ValueError, match="marginal workloads only"):
        mech.strategy(wl.prefix(8))


def test_the_optimised_unit_change_strategy_is_the_optimisers_and_never_worse_than_the_own_marginals():
    mech = OptimizedMarginals()
    workload = wl.marginals(SHAPE, [(0, 1), (2,)])
    chosen = mech.strategy(workload)
    direct = optimize_weights(SHAPE, workload.subsets, UNIT_CHANGES)
    assert chosen.subsets == direct.subsets and np.allclose(chosen.weights, direct.weights)
    assert mech.strategy(workload) is chosen
    own = WorkloadMarginals().strategy(workload)
    score = lambda m, s: m.strategy_sensitivity(s) ** 2 * m.reconstruction_frobenius_sq(workload, s)
    assert score(mech, chosen) <= score(mech, own) * (1 + 1e-12)
    assert not chosen.is_binary  # the optimiser re-weights the tables here


@pytest.mark.parametrize("name", ["marginals", "marginals_optimized"])
def test_unit_change_releases_are_dense_least_squares_over_the_noisy_marginals(monkeypatch, name):
    mech = _mechanism(name)
    workload = wl.marginals(SHAPE, [(0, 1), (2,), (1, 2)])
    x = _histogram(5)
    strategy = mech.strategy(workload)
    a, w = _dense(strategy), workload.dense()
    delta = max(float(np.abs(a @ (y - x)).sum()) for y in added_records(x))
    spy = _spy(monkeypatch)
    for epsilon in (0.5, 3.0):
        out = mech.release(workload, x, epsilon, rng=np.random.default_rng(7))
        assert out.sensitivity == pytest.approx(delta) and out.noise_scale == pytest.approx(delta / epsilon)
        assert out.notes == ""
        y = spy.values[-1] + spy.noise[-1]
        assert np.allclose(spy.values[-1], a @ x)
        assert np.allclose(out.answers, w @ np.linalg.pinv(a) @ y, rtol=0, atol=1e-8)
        assert np.array_equal(mech.run(workload, x, epsilon, rng=np.random.default_rng(7)), out.answers)
        # the analytic error 2 (Δ/ε)² ‖W A⁺‖_F², from the dense pseudo-inverse
        frob = float(((w @ np.linalg.pinv(a)) ** 2).sum())
        assert mech.expected_error(workload, epsilon) == pytest.approx(2 * (delta / epsilon) ** 2 * frob, rel=1e-9)


def test_unit_change_noise_has_the_laplace_variance_at_several_epsilons(monkeypatch):
    mech = OptimizedMarginals()
    workload = wl.marginals(SHAPE, [(0, 1), (2,)])
    x = _histogram(6)
    a = _dense(mech.strategy(workload))
    delta = max(float(np.abs(a @ (y - x)).sum()) for y in added_records(x))
    spy = _spy(monkeypatch)
    for epsilon in (0.5, 2.0):
        spy.noise.clear()
        gen = np.random.default_rng(21)
        for _ in range(150):
            mech.release(workload, x, epsilon, rng=gen)
        assert_laplace_noise(np.concatenate(spy.noise), delta / epsilon)


# -- what a release reads, and releases from counted marginals -------------------------------------

def test_the_marginals_read_are_the_measured_then_the_exact_ones():
    mech = WorkloadMarginals()
    workload = wl.marginals(SHAPE, [(0, 1), (2,), (0,), ()])
    assert mech.marginals_read(workload) == ((0, 1), (2,), (0,), ())
    # under a partition by attribute 0 its marginal (and the total) are disclosed: read, not measured
    assert mech.marginals_read(workload, _policy("partition")) == ((0, 1), (2,), (0,))
    assert mech.marginals_read(workload, _policy("attribute")) == ((0, 1), (2,), (0,), ())


@pytest.mark.parametrize("kind", [None, "attribute", "partition"])
@pytest.mark.parametrize("name", ["marginals", "marginals_optimized"])
def test_a_release_from_the_marginals_read_is_the_release_from_the_histogram(kind, name):
    mech = _mechanism(name)
    policy = None if kind is None else _policy(kind)
    workload = wl.marginals(SHAPE, [(0, 1), (2,), ()])
    x = _histogram(8)
    counts = MarginalCounts(SHAPE, {s: marginal_table(x, SHAPE, s).astype(np.int64) for s in mech.marginals_read(workload, policy)})
    for epsilon in (0.5, 2.0):
        from_counts = mech.measure(workload, counts, epsilon, np.random.default_rng(9), policy=policy)
        from_x = mech.measure(workload, x, epsilon, np.random.default_rng(9), policy=policy)
        assert np.array_equal(from_counts.answers, from_x.answers)
        assert (from_counts.sensitivity, from_counts.noise_scale) == (from_x.sensitivity, from_x.noise_scale)


@pytest.mark.parametrize("name", ["marginals", "marginals_optimized"])
def test_counts_in_any_numeric_form_give_the_same_release(name):
    # counts a caller tallies from records may be int64 arrays, nested lists of ints, or object
    # arrays of exact Python integers: all are the same counts
    mech = _mechanism(name)
    workload = wl.marginals(SHAPE, [(0, 1), (2,)])
    x = _histogram(10)
    strategy = mech.strategy(workload)
    floats = strategy.tables(x)
    forms = [floats, [t.astype(np.int64) for t in floats], [t.astype(int).tolist() for t in floats],
             [np.array(t.astype(int).tolist(), dtype=object) for t in floats]]
    releases = [mech.measure_tables(workload, tables, [], 0.5, np.random.default_rng(3)) for tables in forms]
    for out in releases[1:]:
        assert np.array_equal(out.answers, releases[0].answers)


def test_binary_strategies_draw_exact_discrete_laplace_and_weighted_ones_lattice_laplace():
    workload = wl.marginals(SHAPE, [(0, 1), (2,)])
    x = _histogram(11)
    for mech, kind in ((WorkloadMarginals(), "integer"), (OptimizedMarginals(), "lattice")):
        assert mech.strategy(workload).is_binary == (kind == "integer")
        gen = SecureRandom()
        before = gen.tally()
        out = mech.measure(workload, x, 0.5, gen)
        assert gen.summary(before) == (sampler_name(kind, gen.backend), True)
        assert np.isfinite(out.answers).all()


# -- exact marginals and the notes ------------------------------------------------------------------

def test_notes_are_empty_when_nothing_is_exact():
    mech = WorkloadMarginals()
    workload = wl.marginals(SHAPE, [(), (0, 1), (2,)])
    x = _histogram(12)
    assert mech.release(workload, x, 0.5, rng=0).notes == ""
    assert mech.release(workload, x, 0.5, rng=0, policy=_policy("unbounded")).notes == ""


def test_notes_stay_empty_when_only_the_total_is_exact():
    # without ⊥ the total is disclosed: exact, but not a marginal on attributes worth a note
    workload = wl.marginals(SHAPE, [(), (0, 1), (2,)])
    x = _histogram(13)
    for kind in ("attribute", "complete"):
        mech = WorkloadMarginals()
        policy = _policy(kind)
        assert mech.policy_strategy(workload, policy).exact == ((),)
        out = mech.release(workload, x, 0.5, rng=0, policy=policy)
        assert out.notes == ""
        assert out.answers[0] == x.sum()


def test_notes_name_every_exact_marginal_and_those_answers_carry_no_noise():
    shape = SHAPE
    labels = np.broadcast_to((np.arange(3)[:, None] * 2 + np.arange(2)[None, :])[:, :, None], shape)
    policy = policies.partition(labels)  # blocks by attributes 0 and 1: both marginals disclosed
    workload = wl.marginals(shape, [(0,), (1,), (2,)])
    x = _histogram(14)
    for mech in (WorkloadMarginals(), OptimizedMarginals()):
        assert mech.policy_strategy(workload, policy).exact == ((0,), (1,))
        out = mech.release(workload, x, 0.5, rng=0, policy=policy)
        assert out.notes == NOTE + "(0,), (1,)"
        truth = workload.dense() @ x
        assert np.array_equal(out.answers[:5], truth[:5])
        assert not np.allclose(out.answers[5:], truth[5:])
    one = WorkloadMarginals().release(wl.marginals(shape, [(0,), (2,)]), x, 0.5, rng=0, policy=_policy("partition"))
    assert one.notes == NOTE + "(0,)"


def test_a_workload_entirely_exact_is_released_without_noise():
    shape = SHAPE
    labels = np.broadcast_to((np.arange(3)[:, None] * 2 + np.arange(2)[None, :])[:, :, None], shape)
    policy = policies.partition(labels)
    workload = wl.marginals(shape, [(0, 1), (1,)])
    x = _histogram(15)
    mech = WorkloadMarginals()
    gen = np.random.default_rng(0)
    out = mech.release(workload, x, 0.5, rng=gen, policy=policy)
    assert out.sensitivity == 0 and out.noise_scale == 0
    assert np.array_equal(out.answers, workload.dense() @ x)
    assert out.notes == NOTE + "(0, 1)"
    assert gen.bit_generator.state == np.random.default_rng(0).bit_generator.state  # nothing drawn


# -- the policy strategies are cached per workload and per policy ----------------------------------

def test_each_workload_gets_its_own_strategy_under_one_policy():
    mech = WorkloadMarginals()
    policy = _policy("attribute")
    w1, w2 = wl.marginals(SHAPE, [(0, 1)]), wl.marginals(SHAPE, [(2,)])
    assert mech.policy_strategy(w1, policy).subsets == ((0, 1),)
    assert mech.policy_strategy(w2, policy).subsets == ((2,),)
    x = _histogram(16)
    assert mech.release(w2, x, 0.5, rng=0, policy=policy).answers.shape == (4,)
    assert mech.policy_strategy(w1, policy) is mech.policy_strategy(w1, policy)


def test_each_policy_gets_its_own_strategy_for_one_workload():
    workload = wl.marginals(SHAPE, [(), (0, 1)])
    x = _histogram(17)
    for order in (("unbounded", "attribute"), ("attribute", "unbounded")):
        mech = WorkloadMarginals()
        for kind in order:
            policy = _policy(kind)
            strategy = mech.policy_strategy(workload, policy)
            # a record added or removed changes the total; moves between cells do not
            assert strategy.exact == (() if kind == "unbounded" else ((),))
            out = mech.release(workload, x, 0.5, rng=0, policy=policy)
            assert out.sensitivity == 2.0
            assert (out.answers[0] == x.sum()) == (kind == "attribute")


def test_the_moves_of_a_policy_give_the_strategys_sensitivity():
    mech = WorkloadMarginals()
    workload = wl.marginals(SHAPE, [(0,), (1,), (2,)])
    x = _histogram(18)
    for kind in ("unbounded", "attribute", "complete"):
        policy = _policy(kind)
        strategy = mech.policy_strategy(workload, policy)
        a = _dense(strategy)
        brute = max(float(np.abs(a @ x - a @ y).sum()) for y in policy_neighbours(x, policy))
        assert mech.strategy_sensitivity(strategy, policy) == pytest.approx(brute)
        assert strategy.sensitivity(move_patterns(policy)) == pytest.approx(brute)


# -- OptimizedMarginals: its parameters --------------------------------------------------------------

def test_the_optimisers_defaults():
    mech = OptimizedMarginals()
    assert mech.max_cells == MAX_TABLE_CELLS
    assert mech.restarts == 12
    assert mech.get_params() == {"max_cells": MAX_TABLE_CELLS, "restarts": 12}
    assert repr(mech) == f"OptimizedMarginals(max_cells={MAX_TABLE_CELLS}, restarts=12)"


def test_the_optimisers_parameters_are_checked_by_name_at_their_least_values():
    assert OptimizedMarginals(max_cells=1).max_cells == 1
    assert OptimizedMarginals(restarts=2).restarts == 2
    assert OptimizedMarginals(max_cells=np.int64(5), restarts=np.int32(3)).get_params() == {"max_cells": 5, "restarts": 3}
    with pytest.raises(ValueError, match=r"^max_cells must be an integer >= 1, got 0$"):
        OptimizedMarginals(max_cells=0)
    with pytest.raises(ValueError, match=r"^max_cells must be an integer >= 1, got -3$"):
        OptimizedMarginals(max_cells=-3)
    with pytest.raises(TypeError, match=r"^max_cells must be an integer"):
        OptimizedMarginals(max_cells=2.5)
    with pytest.raises(ValueError, match=r"^restarts must be an integer >= 2, got 1$"):
        OptimizedMarginals(restarts=1)
    with pytest.raises(TypeError, match=r"^restarts must be an integer"):
        OptimizedMarginals(restarts="12")


def test_max_cells_bounds_the_tables_the_optimiser_measures():
    # binary attributes, all 2-way marginals: without a bound the full 8-cell table is measured
    shape = (2, 2, 2)
    workload = wl.all_marginals(shape, 2)
    unbounded = OptimizedMarginals(restarts=2).strategy(workload)
    assert max(math.prod(shape[a] for a in s) for s in unbounded.subsets) == 8
    bounded = OptimizedMarginals(max_cells=4, restarts=2).strategy(workload)
    # only the workload's own tables may exceed the bound (here they have 4 cells)
    assert all(math.prod(shape[a] for a in s) <= 4 for s in bounded.subsets)
    assert bounded.subsets == ((0, 1), (0, 2), (1, 2))


def test_the_number_of_restarts_reaches_the_optimiser():
    # 1-way marginals of four binary attributes under unit changes: the random restarts matter
    shape = (2, 2, 2, 2)
    workload = wl.all_marginals(shape, 1)
    two, three = OptimizedMarginals(restarts=2).strategy(workload), OptimizedMarginals(restarts=3).strategy(workload)
    direct = optimize_weights(shape, [(0,), (1,), (2,), (3,)], UNIT_CHANGES, restarts=2)
    assert two.subsets == direct.subsets and np.allclose(two.weights, direct.weights)
    assert two.subsets != three.subsets  # so the test can tell the number of restarts apart
