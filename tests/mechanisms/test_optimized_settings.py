"""Settings, cost model, store keys and bookkeeping of :class:`~blowfish_te.mechanisms.Optimized`
(HDMM's optimised templates: McKenna, Miklau, Hay, Machanavajjhala, PVLDB 2018).

Every test stays away from a real optimisation (tiny domains, recorders in place of the
optimisers), so the file runs in seconds; expected values come from the documented cost model and
parameter defaults, not from the code under test.
"""

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import Optimized
from blowfish_te.mechanisms import optimized as optimized_module
from blowfish_te.mechanisms.optimized import _template_seconds, axis_edges
from blowfish_te.sensitivity import sensitivity
from blowfish_te.strategies import IdentityStrategy, PIdentityStrategy
from blowfish_te.strategies.kronecker import KroneckerStrategy, optimize_kronecker
from blowfish_te.strategies.pidentity import optimize_pidentity
from blowfish_te.strategies.store import StrategyStore, strategy_key

# the documented cost model and defaults
CELL_ROW, EDGE_ROW, PREDICTED, KRON_ITER, POLICY_ITER, PID_ITER = 1.2e-9, 1e-7, 1200, 150, 150, 2000


def _rows(k):  # HDMM's K // 16, capped at 128, at least 1
    return max(1, min(k // 16, 128))


def _kron_rows(k):
    return min(max(k // 8, 1), 16)


def _restarts(k, p):
    return max(1, min(4, 2**21 // (k * p * (p + 32))))


def _template(starts, iterations, side, rows):
    return starts * iterations * CELL_ROW * side * rows * (rows + 32)


def _rects():
    return wl.random_rects((16, 8), 5, rng=0)


def _matrix_2d():
    """A 2-D workload that is not a box workload (so the p-Identity template applies)."""
    return wl.from_matrix(np.random.default_rng(0).integers(0, 2, (6, 16)).astype(float), domain=(4, 4))


def test_the_documented_constants():
    assert (optimized_module.SECONDS_PER_CELL_ROW, optimized_module.SECONDS_PER_EDGE_ROW) == (CELL_ROW, EDGE_ROW)
    assert (optimized_module.PREDICTED_ITERATIONS, optimized_module.KRONECKER_MAXITER) == (PREDICTED, KRON_ITER)
    assert (optimized_module.POLICY_MAXITER, optimized_module.MAX_EDGE_ENTRIES) == (POLICY_ITER, 2**24)
    assert _template_seconds(3, 7, 11, 5) == pytest.approx(3 * 7 * CELL_ROW * 11 * 5 * 37, rel=1e-12)


def test_parameters_and_their_defaults():
    assert Optimized().get_params() == {"p": None, "restarts": None, "maxiter": None, "seed": 0, "store": True}
    assert Optimized().store is True
    store = StrategyStore(None, shipped=False)
    mech = Optimized(p=1, restarts=1, maxiter=1, seed=0, store=store)
    assert mech.get_params() == {"p": 1, "restarts": 1, "maxiter": 1, "seed": 0, "store": store}
    assert mech.store is store
    mech = Optimized(p=np.int64(3), restarts=2, maxiter=7, seed=4, store=np.bool_(False))
    assert mech.get_params() == {"p": 3, "restarts": 2, "maxiter": 7, "seed": 4, "store": False}
    assert type(mech.p) is int and mech.store is False
    assert Optimized(store=np.bool_(True)).store is True


@pytest.mark.parametrize("name", ["p", "restarts", "maxiter"])
def test_counts_must_be_positive_integers(name):
    with pytest.raises(ValueError, match=rf"^{name} must be an integer >= 1, got 0$"):
        Optimized(**{name: 0})
    with pytest.raises(TypeError, match=rf"^{name} must be an integer, got 1\.5 \(float\)$"):
        Optimized(**{name: 1.5})
    with pytest.raises(TypeError, match=rf"^{name} must be an integer, got True \(bool\)$"):
        Optimized(**{name: True})


def test_seed_and_store_are_checked():
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got -1$"):
        Optimized(seed=-1)
    with pytest.raises(TypeError, match=r"^seed must be an integer, got None \(NoneType\)$"):
        Optimized(seed=None)
    with pytest.raises(TypeError, match=r"^store must be True, False or a StrategyStore, got 'yes'$"):
        Optimized(store="yes")
    with pytest.raises(TypeError, match=r"^store must be True, False or a StrategyStore, got None$"):
        Optimized(store=None)


def test_settings_per_template():
    rects, prefix, matrix = _rects(), wl.prefix(64), _matrix_2d()
    line = policies.line(64)
    grid = policies.grid((16, 8), 1)
    default = Optimized(store=False)
    assert default._settings(rects, None) == ("kronecker", (2, 1), 1, KRON_ITER)
    assert default._settings(rects, grid) == ("kronecker", (2, 1), 1, KRON_ITER)
    assert default._settings(prefix, None) == ("p-identity", 4, 4, PID_ITER)
    assert default._settings(prefix, line) == ("p-identity", 4, 1, POLICY_ITER)
    assert default._settings(wl.prefix(512), None) == ("p-identity", 32, 2, PID_ITER)  # 512·32·64 = 2²⁰
    assert default._settings(matrix, None) == ("p-identity", 1, 4, PID_ITER)
    assert default._settings(wl.prefix((4, 4)), None) == ("kronecker", (1, 1), 1, KRON_ITER)
    assert default._settings(wl.prefix((2, 3, 4)), None) == ("kronecker", (1, 1, 1), 1, KRON_ITER)
    assert default._settings(wl.identity(48), None) == ("p-identity", 3, 4, PID_ITER)
    set_ = Optimized(p=3, restarts=2, maxiter=9, store=False)
    assert set_._settings(rects, None) == ("kronecker", (3, 3), 2, 9)
    assert set_._settings(rects, grid) == ("kronecker", (3, 3), 2, 9)
    assert set_._settings(prefix, None) == ("p-identity", 3, 2, 9)
    assert set_._settings(prefix, line) == ("p-identity", 3, 2, 9)


def test_store_key_names_the_workload_the_policy_and_every_parameter():
    prefix, line = wl.prefix(64), policies.line(64)
    mech = Optimized(store=False)
    assert mech.store_key(prefix) == strategy_key("optimized", prefix, None, ("p-identity", 4, 4, PID_ITER, 0))
    # a policy-aware search also keeps to the bound on the column scales: 2**17
    assert mech.store_key(prefix, line) == strategy_key("optimized", prefix, line, ("p-identity", 4, 1, POLICY_ITER, 0, 2.0**17))
    rects = _rects()
    assert mech.store_key(rects) == strategy_key("optimized", rects, None, ("kronecker", (2, 1), 1, KRON_ITER, 0))
    grid = policies.grid(rects.domain, 1)
    assert mech.store_key(rects, grid) == strategy_key("optimized", rects, grid, ("kronecker", (2, 1), 1, KRON_ITER, 0, 2.0**17))
    keys = {Optimized(**kw).store_key(prefix, pol) for kw in ({}, {"p": 3}, {"restarts": 2}, {"maxiter": 9}, {"seed": 1})
            for pol in (None, line, policies.threshold(64, 2))}
    assert len(keys) == 15 and None not in keys
    assert mech.store_key(wl.from_matrix(np.eye(4)), None) is not None


def test_store_in_use(monkeypatch, tmp_path):
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", str(tmp_path))
    store = Optimized()._store()
    assert isinstance(store, StrategyStore) and store.directory == tmp_path and store.shipped
    assert Optimized(store=False)._store() is None
    mine = StrategyStore(tmp_path / "mine", shipped=False)
    assert Optimized(store=mine)._store() is mine


def test_policy_aware_only_within_the_edge_budget(monkeypatch):
    mech = Optimized(store=False)
    assert not mech._policy_aware(policies.unbounded(8))  # Δ = 1 already
    assert not mech._policy_aware(policies.unbounded((4, 4)))
    assert mech._policy_aware(policies.from_edges((8,), [[0, 1], [2, 8]]))  # ⊥ edges and others
    assert mech._policy_aware(policies.line(8))
    assert not mech._policy_aware(policies.from_edges((4,), np.zeros((0, 2), dtype=np.int64)))  # no edges
    assert Optimized(p=1)._policy_aware(policies.from_edges((4,), [[0, 1]]))  # one entry
    # line(64): 63 edges × default_rows(64) = 4 rows = 252 entries; with p = 2, 126
    monkeypatch.setattr(optimized_module, "MAX_EDGE_ENTRIES", 252)
    assert mech._policy_aware(policies.line(64))
    assert Optimized(p=2)._policy_aware(policies.line(64))
    monkeypatch.setattr(optimized_module, "MAX_EDGE_ENTRIES", 251)
    assert not mech._policy_aware(policies.line(64))
    monkeypatch.setattr(optimized_module, "MAX_EDGE_ENTRIES", 126)
    assert Optimized(p=2)._policy_aware(policies.line(64))
    monkeypatch.setattr(optimized_module, "MAX_EDGE_ENTRIES", 125)
    assert not Optimized(p=2)._policy_aware(policies.line(64))
    # the rows are those of the widest axis: grid (16, 8) has 232 edges, default_rows(16) = 1
    monkeypatch.setattr(optimized_module, "MAX_EDGE_ENTRIES", 232)
    assert mech._policy_aware(policies.grid((16, 8), 1))
    monkeypatch.setattr(optimized_module, "MAX_EDGE_ENTRIES", 231)
    assert not mech._policy_aware(policies.grid((16, 8), 1))


def test_predicted_seconds_of_one_dimensional_workloads():
    prefix = wl.prefix(64)
    unit = _template(4, PREDICTED, 64, 4)
    default = Optimized(store=False)
    assert default.predicted_seconds(prefix) == pytest.approx(unit, rel=1e-12)
    assert default.predicted_seconds(prefix, policies.unbounded(64)) == pytest.approx(unit, rel=1e-12)
    assert default.predicted_transform_seconds(64) == pytest.approx(unit, rel=1e-12)
    assert default._seconds(64, False) == pytest.approx(unit, rel=1e-12)
    # threshold(64, 2): 63 + 62 edges; the policy-aware search takes one start of 150 iterations
    aware = _template(1, POLICY_ITER, 64, 4) + 1 * POLICY_ITER * EDGE_ROW * 125 * 4
    assert default.predicted_seconds(prefix, policies.threshold(64, 2)) == pytest.approx(unit + aware, rel=1e-12)
    set_ = Optimized(p=3, restarts=2, maxiter=50, store=False)
    unit = _template(2, 50, 64, 3)
    aware = _template(2, 50, 64, 3) + 2 * 50 * EDGE_ROW * 125 * 3
    assert set_.predicted_seconds(prefix) == pytest.approx(unit, rel=1e-12)
    assert set_.predicted_seconds(prefix, policies.threshold(64, 2)) == pytest.approx(unit + aware, rel=1e-12)
    assert set_.predicted_transform_seconds(64) == pytest.approx(unit, rel=1e-12)
    # unit changes never predict beyond PREDICTED_ITERATIONS; the policy-aware search runs maxiter
    long = Optimized(p=3, restarts=2, maxiter=5000, store=False)
    assert long.predicted_transform_seconds(64) == pytest.approx(_template(2, PREDICTED, 64, 3), rel=1e-12)
    aware = _template(2, 5000, 64, 3) + 2 * 5000 * EDGE_ROW * 125 * 3
    assert long.predicted_seconds(prefix, policies.threshold(64, 2)) == pytest.approx(
        _template(2, PREDICTED, 64, 3) + aware, rel=1e-12)


def test_predicted_seconds_of_a_two_dimensional_workload_that_is_not_boxes():
    matrix, grid = _matrix_2d(), policies.grid((4, 4), 1)  # 24 edges of 16 cells
    unit = _template(4, PREDICTED, 16, 1)
    aware = _template(1, POLICY_ITER, 16, 1) + POLICY_ITER * EDGE_ROW * 24 * 1
    mech = Optimized(store=False)
    assert mech.predicted_seconds(matrix) == pytest.approx(unit, rel=1e-12)
    assert mech.predicted_seconds(matrix, grid) == pytest.approx(unit + aware, rel=1e-12)


def test_predicted_seconds_of_kronecker_products():
    rects, grid = _rects(), policies.grid((16, 8), 1)  # 15 + 7 distinct pairs along the axes
    kron = {16: _template(5, KRON_ITER, 16, 2), 8: _template(5, KRON_ITER, 8, 1)}  # 3 rounds + 2 warm starts
    default = Optimized(store=False)
    assert default._seconds(16, True) == pytest.approx(kron[16], rel=1e-12)
    assert default.predicted_seconds(rects) == pytest.approx(kron[16] + kron[8], rel=1e-12)
    assert default.predicted_seconds(rects, policies.unbounded((16, 8))) == pytest.approx(kron[16] + kron[8], rel=1e-12)
    # the policy-aware rounds: rows of the widest axis (kronecker_rows(16) = 2) on every axis
    aware = _template(5, KRON_ITER, 16, 2) + _template(5, KRON_ITER, 8, 2) + 5 * KRON_ITER * EDGE_ROW * 22 * 2
    assert default.predicted_seconds(rects, grid) == pytest.approx(kron[16] + kron[8] + aware, rel=1e-12)
    set_ = Optimized(p=3, restarts=2, maxiter=9, store=False)  # 3·2 + 2 = 8 starts
    kron = _template(8, 9, 16, 3) + _template(8, 9, 8, 3)
    assert set_._seconds(8, True) == pytest.approx(_template(8, 9, 8, 3), rel=1e-12)
    assert set_.predicted_seconds(rects) == pytest.approx(kron, rel=1e-12)
    aware = _template(8, 9, 16, 3) + _template(8, 9, 8, 3) + 8 * 9 * EDGE_ROW * 22 * 3
    assert set_.predicted_seconds(rects, grid) == pytest.approx(kron + aware, rel=1e-12)
    restarts = Optimized(restarts=2, store=False)
    assert restarts._seconds(16, True) == pytest.approx(_template(8, KRON_ITER, 16, 2), rel=1e-12)
    assert Optimized(maxiter=9, store=False)._seconds(16, True) == pytest.approx(_template(5, 9, 16, 2), rel=1e-12)
    # a 1-D box workload takes the p-Identity template, as a 3-D one the Kronecker product
    assert default.predicted_seconds(wl.prefix((64,))) == pytest.approx(_template(4, PREDICTED, 64, 4), rel=1e-12)
    cube = wl.prefix((8, 16, 8))
    expected = _template(5, KRON_ITER, 8, 1) * 2 + _template(5, KRON_ITER, 16, 2)
    assert default.predicted_seconds(cube) == pytest.approx(expected, rel=1e-12)


def test_predicted_seconds_are_zero_once_the_strategies_are_stored(tmp_path):
    prefix, line, dp = wl.prefix(64), policies.line(64), policies.unbounded(64)
    store = StrategyStore(tmp_path, shipped=False)
    mech = Optimized(store=store)
    unit = _template(4, PREDICTED, 64, 4)
    aware = _template(1, POLICY_ITER, 64, 4) + POLICY_ITER * EDGE_ROW * 63 * 4
    assert mech.predicted_seconds(prefix) == pytest.approx(unit, rel=1e-12)
    assert mech.predicted_seconds(prefix, line) == pytest.approx(unit + aware, rel=1e-12)
    store.save(mech.store_key(prefix, line), IdentityStrategy((64,)))  # the policy's alone
    assert mech.predicted_seconds(prefix) == pytest.approx(unit, rel=1e-12)
    assert mech.predicted_seconds(prefix, line) >= unit  # the unit-change optimisation still runs
    other = StrategyStore(tmp_path / "other", shipped=False)
    keeper = Optimized(store=other)
    other.save(keeper.store_key(prefix), IdentityStrategy((64,)))  # the unit-change strategy alone
    assert keeper.predicted_seconds(prefix) == 0.0
    assert keeper.predicted_seconds(prefix, dp) == 0.0  # unbounded DP measures the stored unit strategy
    assert keeper.predicted_seconds(prefix, line) >= aware  # the policy-aware search still runs
    other.save(keeper.store_key(prefix, line), IdentityStrategy((64,)))
    assert keeper.predicted_seconds(prefix, line) == 0.0
    assert keeper.predicted_seconds(prefix, policies.threshold(64, 2)) > 0.0
    assert Optimized(store=other, seed=1).predicted_seconds(prefix) == pytest.approx(unit, rel=1e-12)


def _fake_pidentity(monkeypatch, make):
    """Replace the module's p-Identity optimiser by a recorder: the bound arguments of each call."""
    calls = []
    signature = inspect.signature(optimize_pidentity)

    def fake(*args, **kwargs):
        calls.append((args, kwargs, signature.bind(*args, **kwargs).arguments))
        return make(args[0], kwargs.get("edges"))

    monkeypatch.setattr(optimized_module, "optimize_pidentity", fake)
    return calls


def test_stored_strategies_are_read_and_new_ones_written(monkeypatch, tmp_path):
    prefix = wl.prefix(16)
    store = StrategyStore(tmp_path, shipped=False)
    mech = Optimized(p=2, restarts=1, maxiter=5, store=store)
    theta = np.arange(32, dtype=float).reshape(2, 16) / 7
    store.save(mech.store_key(prefix), PIdentityStrategy(theta, (16,)))
    calls = _fake_pidentity(monkeypatch, lambda w, edges: PIdentityStrategy(np.zeros((2, w.size)), w.domain))
    loaded = mech.strategy(prefix)
    assert isinstance(loaded, PIdentityStrategy) and np.array_equal(loaded.theta, theta) and calls == []
    assert mech.strategy(prefix) is loaded
    # a strategy not stored yet is computed once, written, and read back by a new mechanism
    ranges = wl.random_ranges(16, 40, rng=3)
    computed = Optimized(p=2, restarts=1, maxiter=5, store=store).strategy(ranges)
    assert len(calls) == 1 and store.contains(mech.store_key(ranges))
    again = Optimized(p=2, restarts=1, maxiter=5, store=store).strategy(ranges)
    assert len(calls) == 1 and np.array_equal(again.theta, computed.theta)
    # without a store every new mechanism computes it
    Optimized(p=2, restarts=1, maxiter=5, store=False).strategy(ranges)
    Optimized(p=2, restarts=1, maxiter=5, store=False).strategy(ranges)
    assert len(calls) == 3


def test_the_pidentity_optimiser_gets_every_setting_and_the_unit_start(monkeypatch):
    total = wl.from_matrix(np.ones((5, 8)))  # Θ = 2·1ᵀ: ‖W A⁺‖_F² = 120/11 < ‖W‖_F² = 40
    line = policies.line(8)
    made = []

    def make(w, edges):
        made.append(PIdentityStrategy(np.full((1, 8), 2.0 if edges is None else 5.0), (8,)))
        return made[-1]

    calls = _fake_pidentity(monkeypatch, make)
    mech = Optimized(p=1, restarts=3, maxiter=7, seed=5, store=False)
    unit = mech.strategy(total)
    assert unit is made[0]
    args, kwargs, bound = calls[0]
    assert args == (total, 1, 3, 5, 7) and kwargs == {"edges": None, "start": None}
    mech.policy_strategy(total, line)
    args, kwargs, bound = calls[1]
    assert args == (total, 1, 3, 5, 7) and set(kwargs) == {"edges", "start"}
    assert kwargs["start"] is unit.theta
    u, v = kwargs["edges"]
    assert np.array_equal(u, np.arange(7)) and np.array_equal(v, np.arange(1, 8))
    # defaults: one start and POLICY_MAXITER for the policy-aware search
    calls.clear()
    made.clear()
    default = Optimized(seed=2, store=False)
    default.policy_strategy(total, line)
    assert [c[0] for c in calls] == [(total, 1, 4, 2, PID_ITER), (total, 1, 1, 2, POLICY_ITER)]
    assert calls[1][1]["start"] is made[0].theta
    assert all(c[2]["rng"] == 2 for c in calls)


def test_the_identity_is_kept_when_it_is_better(monkeypatch):
    prefix = wl.prefix(8)  # ‖W‖_F² = 36
    theta = {"value": np.full((1, 8), 0.5)}  # ‖W A⁺‖_F² = 42.75 > 36
    calls = _fake_pidentity(monkeypatch, lambda w, edges: PIdentityStrategy(theta["value"], (8,)))
    assert isinstance(Optimized(p=1, store=False).strategy(prefix), IdentityStrategy)
    theta["value"] = np.zeros((1, 8))  # Θ = 0 ties with the identity: the optimised strategy stays
    tie = Optimized(p=1, store=False).strategy(prefix)
    assert isinstance(tie, PIdentityStrategy) and tie.lstsq_frobenius_sq(prefix) == prefix.frobenius_sq()
    # the identity fallback is for unit changes only: against a policy the aware strategy comes back
    poor = PIdentityStrategy(np.full((1, 8), 0.5), (8,))
    monkeypatch.setattr(optimized_module, "optimize_pidentity", lambda *args, **kwargs: poor)
    assert Optimized(p=1, store=False)._optimize(prefix, policies.line(8), None) is poor
    assert len(calls) == 2


def test_the_kronecker_optimiser_gets_every_setting_and_the_axis_edges(monkeypatch):
    rects, grid = _rects(), policies.grid((16, 8), 1)
    calls = []

    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        factors = [PIdentityStrategy(np.full((p, k), 0.5), (k,)) for p, k in zip(args[1], rects.domain)]
        return KroneckerStrategy(factors)

    monkeypatch.setattr(optimized_module, "optimize_kronecker", fake)
    mech = Optimized(restarts=2, maxiter=4, seed=3, store=False)
    mech.strategy(rects)
    args, kwargs = calls[0]
    assert args == (rects, [2, 1]) and type(args[1]) is list
    assert kwargs == {"restarts": 2, "rng": 3, "maxiter": 4, "axis_edges": None}
    mech.policy_strategy(rects, grid)
    args, kwargs = calls[1]
    assert args == (rects, [2, 1]) and set(kwargs) == {"restarts", "rng", "maxiter", "axis_edges"}
    assert (kwargs["restarts"], kwargs["rng"], kwargs["maxiter"]) == (2, 3, 4)
    for (u, v), side in zip(kwargs["axis_edges"], (16, 8)):
        assert np.array_equal(u, np.arange(side - 1)) and np.array_equal(v, np.arange(1, side))
    calls.clear()
    Optimized(p=3, store=False).strategy(rects)
    assert calls[0] == ((rects, [3, 3]), {"restarts": 1, "rng": 0, "maxiter": KRON_ITER, "axis_edges": None})


def _pid(values):
    values = np.asarray(values, dtype=float)
    return PIdentityStrategy(values.reshape(1, -1), (values.size,))


def _brute_error(strategy, workload, policy):
    """Δ_G² ‖W A⁺‖_F² from the dense matrices."""
    dense = strategy.dense()
    delta = max(np.abs(dense[:, u] - dense[:, v]).sum() for u, v in policy.edges)
    return delta**2 * np.linalg.norm(workload.dense() @ np.linalg.pinv(dense)) ** 2


@pytest.mark.parametrize("case", ["aware same delta", "aware larger delta", "unit better", "tie"])
def test_the_exact_route_keeps_the_strategy_with_the_lower_policy_error(monkeypatch, case):
    prefix, line = wl.prefix(8), policies.line(8)
    low = [0, 0, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2]  # Δ_G = 2, ‖W A⁺‖_F² = 41.01
    high = [0, 0, 1, 1, 1, 1, 1, 1]  # Δ_G = 2, 47
    rough = [8, 6, 9.5, 3.5, 5.5, 6, 8.5, 1.5]  # Δ_G = 0.8, 556.2
    unit, aware = {"aware same delta": (_pid(high), _pid(low)), "aware larger delta": (_pid(rough), _pid(low)),
                   "unit better": (_pid(low), _pid(high)), "tie": (_pid(low), _pid(low))}[case]
    monkeypatch.setattr(Optimized, "strategy", lambda self, workload: unit)
    calls = _fake_pidentity(monkeypatch, lambda w, edges: aware)
    errors = [sensitivity(s, line) ** 2 * s.lstsq_frobenius_sq(prefix) for s in (unit, aware)]
    assert errors == pytest.approx([_brute_error(s, prefix, line) for s in (unit, aware)], rel=1e-9)
    deltas = [sensitivity(s, line) for s in (unit, aware)]
    if case == "aware larger delta":  # Δ³·F would keep the unit strategy
        assert deltas[1] > deltas[0] and deltas[1] ** 3 * aware.lstsq_frobenius_sq(prefix) > deltas[0] ** 3 * unit.lstsq_frobenius_sq(prefix)
    if case == "aware same delta":
        assert deltas[0] == deltas[1] == 2.0
    chosen = Optimized(p=1, store=False).policy_strategy(prefix, line)
    assert chosen is (aware if errors[1] < errors[0] else unit)
    assert chosen is (aware if case.startswith("aware") else unit)
    assert len(calls) == 1


def test_the_unit_strategy_serves_policies_that_are_not_policy_aware(monkeypatch):
    prefix = wl.prefix(8)
    unit = _pid([0.5] * 8)
    monkeypatch.setattr(Optimized, "strategy", lambda self, workload: unit)
    calls = _fake_pidentity(monkeypatch, lambda w, edges: _pid([1.0] * 8))
    assert Optimized(p=1, store=False).policy_strategy(prefix, policies.unbounded(8)) is unit
    assert calls == []


def test_policy_strategies_are_cached_per_workload_and_policy(monkeypatch):
    made = []

    def fake(self, workload, policy):
        made.append((workload, policy))
        return object()

    monkeypatch.setattr(Optimized, "_for_policy", fake)
    mech = Optimized(store=False)
    w1, w2 = wl.prefix(8), wl.prefix(8)
    p1, p2 = policies.line(8), policies.line(8)
    first = mech.policy_strategy(w1, p1)
    assert mech.policy_strategy(w1, p1) is first and made == [(w1, p1)]
    second = mech.policy_strategy(w2, p1)
    third = mech.policy_strategy(w1, p2)
    assert len({id(first), id(second), id(third)}) == 3
    assert made[1][0] is w2 and made[1][1] is p1 and made[2][0] is w1 and made[2][1] is p2
    assert mech.policy_strategy(w2, p1) is second and mech.policy_strategy(w1, p2) is third


def _brute_axis_edges(shape, edges, k):
    out = []
    for axis, side in enumerate(shape):
        pairs = set()
        for u, v in edges:
            cu = np.unravel_index(u, shape)[axis]
            if v == k:
                pairs.add((int(cu), side))
            else:
                cv = np.unravel_index(v, shape)[axis]
                if cu != cv:
                    pairs.add((int(min(cu, cv)), int(max(cu, cv))))
        pairs = sorted(pairs)
        out.append(([p[0] for p in pairs], [p[1] for p in pairs]))
    return out


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_axis_edges_match_a_brute_force(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    k = int(np.prod(shape))
    pair = st.tuples(st.integers(0, k), st.integers(0, k)).filter(lambda e: e[0] != e[1] and min(e) < k)
    edges = data.draw(st.lists(pair, min_size=1, max_size=12)) if k > 1 else [(0, 1)]
    policy = policies.from_edges(shape, np.array(edges, dtype=np.int64))
    got = axis_edges(policy)
    assert len(got) == len(shape)
    for (u, v), (bu, bv) in zip(got, _brute_axis_edges(shape, policy.edges, k)):
        assert u.tolist() == bu and v.tolist() == bv


def test_optimize_kronecker_is_the_real_default():
    """The module's optimisers are the strategies package's own (the recorders above replace them)."""
    assert optimized_module.optimize_kronecker is optimize_kronecker
    assert optimized_module.optimize_pidentity is optimize_pidentity
