"""Partition-then-transform: the ε shares handed to each partition and to the private selection,
the public record total, the bucket release (disclosed totals keyed by each bucket's last cell),
the cell-noise models of the plain release and its smoothing (1-D, Hilbert order on 2-D grids)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import HB, Identity
from blowfish_te.mechanisms import partition_then_transform as ptt
from blowfish_te.mechanisms.datadependent import SMOOTHING_COST
from blowfish_te.mechanisms.plain import CELLS_GAIN, best_plan_under
from blowfish_te.mechanisms.spatial import hilbert_order
from blowfish_te.routes import Candidate, Outcome, plan_routes
from blowfish_te.smoothing import MAX_SMOOTHING, CellNoise, monotone_running_sums

EPSILONS = (0.3, 1.0, 2.5)


def _recording_plan_routes(monkeypatch):
    """Replace the module's plan_routes by a recorder that delegates to the real one."""
    calls = []

    def recorder(*args, **kwargs):
        calls.append((args, kwargs))
        return plan_routes(*args, **kwargs)

    monkeypatch.setattr(ptt, "plan_routes", recorder)
    return calls


def _recording_smooth(monkeypatch):
    """A fake smoother that is not elementwise (a running sum), so the order of the cells shows."""
    calls = []

    def fake(y, noise, total=None):
        assert total is None  # no features: no record total to fit
        y = np.asarray(y, dtype=np.float64)
        calls.append((y.copy(), noise))
        return np.cumsum(y) + 0.5, np.zeros(y.size, dtype=np.int64)

    monkeypatch.setattr(ptt, "smooth", fake)
    return calls


def _decision(route, spent, cost=5.0):
    features = SimpleNamespace(describe=lambda: "features read", spent=spent, cost=cost, scale=1.0)
    return SimpleNamespace(route=route, spent=spent, reason="the reason", features=features)


def _patch_check(monkeypatch, route, spent, cost=5.0, seen=None):
    """The check measures (recorded in ``seen``) and decides ``route`` after spending ``spent``."""
    decision = _decision(route, spent, cost)

    def fake_measure(data, eps, gen, **kwargs):
        if seen is not None:
            seen.append((data, eps, gen, kwargs))
        return decision.features

    monkeypatch.setattr(ptt, "measure", fake_measure)
    monkeypatch.setattr(ptt, "decide", lambda features, model: decision)


def _line_with_bottom(k):
    """The line policy with one edge to ⊥ (from the last cell): ⊥ makes the total private, but a
    neighbour still moves a record along an edge."""
    return policies.from_edges(k, [(i, i + 1) for i in range(k)])


# -- cell_noise ------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.7, 3.0])
def test_cell_noise_exact_route_is_independent(scale):
    policy = policies.line(5)
    noise = ptt.cell_noise(policy, Candidate(route="exact"), scale)
    assert noise == CellNoise("independent", 2.0 * scale**2, 5)
    real = plan_routes(wl.identity(8), policies.unbounded(8), 1.0, Identity()).chosen
    assert real.route == "exact"
    assert ptt.cell_noise(policies.unbounded(8), real, scale) == CellNoise("independent", 2.0 * scale**2, 8)


@pytest.mark.parametrize("scale", [0.7, 3.0])
def test_cell_noise_along_a_line_is_a_path(scale):
    for k in (2, 6):
        policy = policies.line(k)
        chosen = plan_routes(wl.identity(k), policy, 1.0, Identity()).chosen
        assert chosen.route == "transform" and chosen.tree is policy
        assert ptt.cell_noise(policy, chosen, scale) == CellNoise("path", 2.0 * scale**2, k)


@pytest.mark.parametrize("scale", [0.7, 3.0])
def test_cell_noise_under_unbounded_dp_is_independent(scale):
    tree = policies.unbounded(6)
    noise = ptt.cell_noise(tree, Candidate(route="transform", tree=tree), scale)
    assert noise == CellNoise("independent", 2.0 * scale**2, 6)


def test_cell_noise_is_none_for_other_trees_and_routes():
    none_cases = [
        (policies.line(6), Candidate(route="native")),  # no tree
        (policies.unbounded((3, 3)), Candidate(route="transform", tree=policies.unbounded((3, 3)))),  # 2-D
        (policies.line(1), Candidate(route="transform", tree=policies.line(1))),  # K = 1
        (policies.from_edges((4,), [(0, 1), (1, 3), (2, 3)]), None),  # starts 0, 1, 2 but not consecutive
        (policies.from_edges((4,), [(0, 2), (2, 1), (1, 3)]), None),  # a path in shuffled order
        (policies.from_edges((5,), [(0, 1), (0, 2), (0, 3), (0, 4)]), None),  # a star
        (policies.from_edges((3,), [(0, 1), (1, 3)]), None),  # a tree through ⊥
        (policies.from_edges((4,), [(0, 1), (2, 3)]), None),  # a forest of two paths
    ]
    for policy, chosen in none_cases:
        chosen = chosen or Candidate(route="transform", tree=policy)
        assert ptt.cell_noise(policy, chosen, 1.5) is None, policy.name
    line = policies.line(6)
    assert ptt.cell_noise(line, Candidate(route="transform", tree=line), 1.5) is not None


# -- plain_release ---------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_plain_release_smooths_line_cells_along_the_path(monkeypatch, epsilon):
    k = 12
    policy = policies.line(k)
    x = np.array([5, 9, 0, 3, 3, 40, 41, 2, 0, 7, 1, 6])
    workload = wl.prefix(k)
    estimator = Identity()
    chosen = plan_routes(wl.identity(k), policy, 1.0, estimator).chosen
    routes, smooths = _recording_plan_routes(monkeypatch), _recording_smooth(monkeypatch)
    out = ptt.plain_release(workload, x, policy, epsilon, np.random.default_rng(3), estimator, chosen, True, "n")
    raw = plan_routes(wl.identity(k), policy, epsilon, Identity(), "transform").execute(x, np.random.default_rng(3))
    assert len(routes) == 1
    args, kwargs = routes[0]
    assert args[0].num_queries == k and args[1] is policy and args[2] == epsilon and args[3] is estimator
    assert args[4:] == ("transform", None) and not kwargs
    assert raw.noise_scale == pytest.approx(1.0 / epsilon)  # Identity's transform: Δ = 1
    assert len(smooths) == 1
    assert np.array_equal(smooths[0][0], raw.answers)
    assert smooths[0][1] == CellNoise("path", 2.0 * raw.noise_scale**2, k)
    cells = np.cumsum(raw.answers) + 0.5
    assert out.answers.dtype == np.float64
    assert np.allclose(out.answers, workload.matvec(cells))
    assert out.component_totals == raw.component_totals == {k - 1: int(x.sum())}
    assert out.sensitivity == raw.sensitivity == 1.0
    assert out.noise_scale == raw.noise_scale
    assert out.notes == "n; cells smoothed (post-processing); ran identity (transform)"


@pytest.mark.parametrize("shape", [(4, 4), (3, 5)])
def test_plain_release_smooths_a_grid_along_the_hilbert_curve(monkeypatch, shape):
    policy = policies.grid(shape)
    k = policy.size
    x = np.arange(k) % 7 * 3
    estimator = Identity()
    chosen = plan_routes(wl.identity(shape), policy, 1.0, estimator).chosen
    assert chosen.route == "exact"
    routes, smooths = _recording_plan_routes(monkeypatch), _recording_smooth(monkeypatch)
    out = ptt.plain_release(wl.identity(shape), x, policy, 0.8, np.random.default_rng(5), estimator, chosen, True, "g")
    raw = plan_routes(wl.identity(shape), policy, 0.8, Identity(), "exact").execute(x, np.random.default_rng(5))
    assert [c[0][4:] for c in routes] == [("exact", None)]
    order = hilbert_order(shape)
    assert not np.array_equal(order, np.arange(k))
    assert len(smooths) == 1
    assert np.array_equal(smooths[0][0], np.asarray(raw.answers)[order])
    assert smooths[0][1] == CellNoise("independent", 2.0 * raw.noise_scale**2, k)
    cells = np.empty(k)
    cells[order] = np.cumsum(np.asarray(raw.answers)[order]) + 0.5
    assert np.allclose(out.answers, cells)
    assert out.notes == "g; cells smoothed (post-processing); ran identity (exact)"
    assert out.sensitivity == raw.sensitivity and out.noise_scale == raw.noise_scale


def test_plain_release_does_not_smooth_three_dimensional_grids(monkeypatch):
    shape = (2, 2, 3)
    policy = policies.grid(shape)
    x = np.arange(12)
    workload = wl.prefix(12)
    estimator = Identity()
    chosen = Candidate(route="exact")
    routes, smooths = _recording_plan_routes(monkeypatch), _recording_smooth(monkeypatch)
    out = ptt.plain_release(workload, x, policy, 1.0, np.random.default_rng(2), estimator, chosen, True, "t")
    raw = plan_routes(wl.identity(shape), policy, 1.0, Identity(), "exact").execute(x, np.random.default_rng(2))
    assert [c[0][4:] for c in routes] == [("exact", None)]
    assert smooths == []
    assert out.answers.dtype == np.float64
    assert np.allclose(out.answers, workload.matvec(np.asarray(raw.answers)))
    assert out.notes == "t; ran identity (exact)"


def test_plain_release_does_not_smooth_path_noise_on_a_grid(monkeypatch):
    shape = (4, 4)
    policy = policies.grid(shape)
    x = np.arange(16)
    monkeypatch.setattr(ptt, "cell_noise", lambda policy, chosen, scale: CellNoise("path", 2.0 * scale**2, policy.size))
    smooths = _recording_smooth(monkeypatch)
    out = ptt.plain_release(wl.identity(shape), x, policy, 1.0, np.random.default_rng(2), Identity(),
                            Candidate(route="exact"), True, "p")
    raw = plan_routes(wl.identity(shape), policy, 1.0, Identity(), "exact").execute(x, np.random.default_rng(2))
    assert smooths == []
    assert np.allclose(out.answers, raw.answers)
    assert out.notes == "p; ran identity (exact)"


def test_plain_release_falls_back_to_the_cells_when_the_noise_has_no_model(monkeypatch):
    """Under a star tree the transform's noise is no model of the smoother: the released cells
    answer the workload unsmoothed."""
    k = 6
    policy = policies.from_edges((k,), [(0, j) for j in range(1, k)])
    x = np.array([4, 0, 9, 2, 2, 30])
    workload = wl.prefix(k)
    estimator = Identity()
    chosen = plan_routes(wl.identity(k), policy, 1.0, estimator, "transform").chosen
    assert chosen.tree is policy and ptt.cell_noise(policy, chosen, 1.0) is None
    routes, smooths = _recording_plan_routes(monkeypatch), _recording_smooth(monkeypatch)
    out = ptt.plain_release(workload, x, policy, 0.6, np.random.default_rng(9), estimator, chosen, True, "f")
    raw = plan_routes(wl.identity(k), policy, 0.6, Identity(), "transform").execute(x, np.random.default_rng(9))
    assert [c[0][4:] for c in routes] == [("transform", None)]
    assert smooths == []
    assert out.answers.dtype == np.float64
    assert np.allclose(out.answers, workload.matvec(np.asarray(raw.answers)))
    assert out.component_totals == raw.component_totals
    assert out.sensitivity == raw.sensitivity and out.noise_scale == raw.noise_scale
    assert out.notes == "f; ran identity (transform)"


def test_plain_release_of_a_given_tree_and_without_smoothing(monkeypatch):
    """Not smoothed (off, another estimator, too many cells): the estimator answers the workload
    itself along the chosen route, its tree passed on when it is not the policy."""
    k = 8
    policy = policies.threshold(k, 2)
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    workload = wl.prefix(k)
    candidates = plan_routes(workload, policy, 1.0, Identity(), "transform").considered
    chosen = min((c for c in candidates if c.expected_mse is not None), key=lambda c: c.expected_mse)
    assert chosen.tree is not policy
    for estimator, smoothed in ((HB(), False), (HB(), True)):
        routes, smooths = _recording_plan_routes(monkeypatch), _recording_smooth(monkeypatch)
        out = ptt.plain_release(workload, x, policy, 1.5, np.random.default_rng(4), estimator, chosen, smoothed, "w")
        assert [c[0][4:] for c in routes] == [("transform", chosen.tree)]
        assert routes[0][0][0] is workload
        raw = plan_routes(workload, policy, 1.5, type(estimator)(), "transform", chosen.tree).execute(x, np.random.default_rng(4))
        assert smooths == []
        assert np.allclose(out.answers, raw.answers)
        assert out.component_totals == raw.component_totals
        assert out.sensitivity == raw.sensitivity and out.noise_scale == raw.noise_scale
        assert out.notes == f"w; ran {estimator.name} (transform)"
    native = ptt.plain_release(workload, x, policies.line(k), 1.0, np.random.default_rng(0), ptt.PartitionThenTransform(),
                               Candidate(route="native"), False, "")
    assert native.answers.shape == (k,)


def test_unsmoothed_identity_along_a_path_has_its_running_sums_projected(monkeypatch):
    """Identity along a path tree releases noisy running sums whose last (the total) is exact:
    unsmoothed, the cells are projected onto nondecreasing running sums from 0 to the total, the
    same release otherwise (replayed from the same generator); a prefix workload's error is never
    larger than the raw release's."""
    k = 8
    policy = policies.line(k)
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    workload = wl.prefix(k)
    candidates = plan_routes(wl.identity(k), policy, 1.0, Identity(), "transform").considered
    chosen = min((c for c in candidates if c.expected_mse is not None), key=lambda c: c.expected_mse)
    assert ptt.cell_noise(policy, chosen, 1.0).kind == "path"
    for seed in range(20):
        smooths = _recording_smooth(monkeypatch)
        out = ptt.plain_release(workload, x, policy, 0.3, np.random.default_rng(seed), Identity(), chosen, False, "w")
        route, tree = ptt._route_of(chosen, policy)
        raw = plan_routes(wl.identity(k), policy, 0.3, Identity(), route, tree).execute(x, np.random.default_rng(seed))
        cells = np.asarray(raw.answers)
        assert smooths == []
        assert cells.sum() == pytest.approx(x.sum())
        assert np.allclose(out.answers, np.cumsum(monotone_running_sums(cells)))
        assert (np.diff(out.answers) >= -1e-9).all() and out.answers[0] >= -1e-9
        truth = np.cumsum(x)
        assert np.linalg.norm(out.answers - truth) <= np.linalg.norm(np.cumsum(cells) - truth) + 1e-9
        assert out.component_totals == raw.component_totals and out.noise_scale == raw.noise_scale
        assert out.notes == "w; running sums made nondecreasing (post-processing); ran identity (transform)"


def test_plain_release_smooths_up_to_max_smoothing_cells(monkeypatch):
    k = 10
    policy = policies.line(k)
    x = np.arange(k)
    chosen = plan_routes(wl.identity(k), policy, 1.0, Identity()).chosen
    assert MAX_SMOOTHING >= 2**10
    monkeypatch.setattr(ptt, "MAX_SMOOTHING", k)
    smooths = _recording_smooth(monkeypatch)
    out = ptt.plain_release(wl.identity(k), x, policy, 1.0, np.random.default_rng(1), Identity(), chosen, True, "")
    assert len(smooths) == 1 and "cells smoothed" in out.notes
    monkeypatch.setattr(ptt, "MAX_SMOOTHING", k - 1)
    out = ptt.plain_release(wl.identity(k), x, policy, 1.0, np.random.default_rng(1), Identity(), chosen, True, "")
    assert len(smooths) == 1 and "cells smoothed" not in out.notes


# -- selection of smoothing, public total, lumping gain ---------------------------------------------


def test_smooths_only_below_selection_gain(monkeypatch):
    mech = ptt.PartitionThenTransform()
    assert mech.smooths(wl.identity(64))
    assert not mech.smooths(wl.prefix(256))  # cached per workload
    for gain, expected in ((CELLS_GAIN, False), (np.nextafter(CELLS_GAIN, 0), True)):
        monkeypatch.setattr(ptt, "aggregation_gain", lambda workload, gain=gain: gain)
        assert bool(ptt.PartitionThenTransform().smooths(wl.identity(8))) is expected


def test_public_total_only_without_bottom():
    x = np.array([3, 0, 7, 11])
    assert ptt.public_total(policies.unbounded(4), x) is None
    for policy in (policies.line(4), policies.threshold(4, 2), policies.complete(4)):
        total = ptt.public_total(policy, x)
        assert total == 21 and type(total) is int


def test_lumping_gain_ratio_of_errors(monkeypatch):
    workload, policy = wl.identity(8), policies.line(8)
    for full, lumped, expected in ((3.0, 1.0, 3.0), (4.0, 0.0, np.inf), (None, 1.0, 1.0), (2.0, None, 1.0), (5.0, 2.0, 2.5)):
        answers = iter([full, lumped])
        monkeypatch.setattr(ptt, "best_plan", lambda w, p, answers=answers: (None, Candidate(expected_mse=next(answers))))
        assert ptt.lumping_gain(workload, policy) == expected


# -- partitions and the ε shares ------------------------------------------------------------------


def _fake_partition(monkeypatch, name, labels):
    calls = []

    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        return labels.copy()

    monkeypatch.setattr(ptt, name, fake)
    return calls


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("split", [None, 0.4])
def test_each_partition_gets_its_share(monkeypatch, epsilon, split):
    k = 12
    policy = policies.line(k)
    x = np.arange(k) * 3
    labels = np.array([5, 5, 5, 4, 4, 3, 2, 2, 1, 0, 0, 0])
    eps1 = (0.25 if split is None else split) * epsilon
    eps2 = epsilon - eps1
    for partition, name in (("dawa", "dawa_partition"), ("matching", "matching_partition"),
                            ("noisy_pairing", "noisy_pairing_partition")):
        calls = {n: _fake_partition(monkeypatch, n, labels)
                 for n in ("dawa_partition", "matching_partition", "noisy_pairing_partition")}
        mech = ptt.PartitionThenTransform(partition, epsilon_split=split, select=False)
        gen = np.random.default_rng(0)
        out = mech.measure(wl.identity(k), x, epsilon, gen, policy=policy)
        assert all(not c for n, c in calls.items() if n != name)
        (args, kwargs), = calls[name]
        assert args[0] is x and args[-1] is gen
        if partition == "dawa":
            assert args[1:3] == pytest.approx((eps1 / 2, eps2)) and kwargs == {"penalty": ptt.BUCKET_PRICE, "max_length": None}
            assert ptt.BUCKET_PRICE == 2.0
        elif partition == "matching":
            assert args[1:3] == pytest.approx((eps1 / 2, eps2)) and not kwargs and len(args) == 4
        else:
            assert args[1] is policy and args[2:4] == pytest.approx((eps1, eps2)) and not kwargs and len(args) == 5
        # the bucket totals: all of eps2, the record total disclosed at the root bucket's last cell
        assert out.noise_scale == pytest.approx(out.sensitivity / eps2)
        assert out.component_totals == {2: int(x.sum())}
        assert out.notes == ""


def test_bucket_totals_are_integer_counts_released_along_the_best_route(monkeypatch):
    k = 12
    policy = policies.line(k)
    x = np.arange(k) * 3
    labels = np.array([5, 5, 5, 4, 4, 3, 2, 2, 1, 0, 0, 0])
    _fake_partition(monkeypatch, "dawa_partition", labels)
    routes = _recording_plan_routes(monkeypatch)
    out = ptt.PartitionThenTransform(epsilon_split=0.5, select=False).measure(wl.identity(k), x, 3.0, np.random.default_rng(0), policy=policy)
    final = [c for c in routes if c[0][2] == 1.5]
    assert len(final) == 1
    best, chosen = ptt.best_plan(wl.BucketWorkload(wl.identity(k), labels), final[0][0][1])
    assert chosen.route == "transform" and chosen.tree is final[0][0][1]  # the quotient itself: no tree passed
    assert final[0][0][3] is best and final[0][0][4:] == ("transform", None)
    assert all(isinstance(v, (int, np.integer)) for v in out.component_totals.values())
    # with an estimator given it is planned afresh (no route) and used as it is
    routes.clear()
    est = HB()
    out = ptt.PartitionThenTransform(epsilon_split=0.5, estimator=est, select=False).measure(
        wl.identity(k), x, 3.0, np.random.default_rng(0), policy=policy)
    final = [c for c in routes if c[0][2] == 1.5]
    assert len(final) == 1 and final[0][0][3] is est and len(final[0][0]) == 4
    assert out.component_totals == {2: int(x.sum())}


def test_bucket_estimator_is_the_given_one(monkeypatch):
    k = 16
    x = np.arange(k)
    labels = np.arange(k) // 2
    _fake_partition(monkeypatch, "dawa_partition", labels)
    for estimator in (HB(), Identity()):
        mech = ptt.PartitionThenTransform(epsilon_split=0.5, estimator=estimator, select=False)
        routes = _recording_plan_routes(monkeypatch)
        mech.measure(wl.identity(k), x, 1.0, np.random.default_rng(0), policy=policies.line(k))
        assert {id(c[0][3]) for c in routes} == {id(estimator)}
    # no partition (prefixes: buckets do not pay) with a given estimator
    mech = ptt.PartitionThenTransform(estimator=HB())
    assert mech.split(wl.prefix(k), policies.line(k)) == 0.0
    routes = _recording_plan_routes(monkeypatch)
    out = mech.measure(wl.prefix(k), x, 0.7, np.random.default_rng(0), policy=policies.line(k))
    final = [c for c in routes if c[0][2] == 0.7]
    assert final and all(len(c[0]) == 4 and c[0][3] is mech.estimator for c in final)
    assert out.notes == ""


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_selection_spends_first_and_steps_keep_their_shares(monkeypatch, epsilon):
    k = 16
    policy = policies.line(k)
    x = np.arange(k) * 2 + 1
    labels = np.arange(k) // 2
    spent = 0.1 * epsilon
    seen = []
    _patch_check(monkeypatch, "partition", spent, seen=seen)
    calls = _fake_partition(monkeypatch, "dawa_partition", labels)
    mech = ptt.PartitionThenTransform()
    assert mech.select and mech.selects(wl.identity(k), policy)
    gen = np.random.default_rng(1)
    out = mech.measure(wl.identity(k), x, epsilon, gen, policy=policy)
    (data, eps, g, kwargs), = seen
    assert data is x and eps == epsilon and g is gen
    assert kwargs == {"total": int(x.sum()), "record_moves": 2}
    rest = epsilon - spent
    (args, kw), = calls
    assert args[0] is x and args[3] is gen
    assert args[1:3] == pytest.approx((0.25 * rest / 2, 0.75 * rest))
    assert out.component_totals == {k - 1: int(x.sum())}
    assert out.noise_scale == pytest.approx(out.sensitivity / (0.75 * rest))
    assert out.notes == "partition_then_transform: features read; the reason"
    # with ⊥ the total is not public; under unbounded DP a neighbour adds or removes one record
    # (sensitivity 1), under any other policy it moves one along an edge (2), ⊥ or not
    seen.clear()
    mech.measure(wl.identity(k), x, epsilon, gen, policy=policies.unbounded(k))
    assert seen[0][3] == {"total": None, "record_moves": 1}
    for policy, total in ((policies.threshold(k, 3), int(x.sum())), (_line_with_bottom(k), None)):
        seen.clear()
        mech.measure(wl.identity(k), x, epsilon, gen, policy=policy)
        assert seen[0][3] == {"total": total, "record_moves": 2}


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_plain_routes_of_the_selection_get_the_rest(monkeypatch, epsilon):
    k = 16
    policy = policies.line(k)
    x = np.arange(k)
    spent = 0.2 * epsilon
    released = []

    def fake_plain(*args):
        released.append(args)
        return Outcome(np.zeros(k), notes="released")

    monkeypatch.setattr(ptt, "plain_release", fake_plain)
    for cost, gain, smoothed in ((SMOOTHING_COST, None, False), (SMOOTHING_COST * 0.99, None, True), (0.1, 5.0, False)):
        _patch_check(monkeypatch, "plain", spent, cost)
        if gain is not None:
            monkeypatch.setattr(ptt, "aggregation_gain", lambda w, gain=gain: gain)
        released.clear()
        mech = ptt.PartitionThenTransform()
        gen = np.random.default_rng(0)
        assert mech.measure(wl.identity(k), x, epsilon, gen, policy=policy).notes == "released"
        (w, data, pol, eps, g, estimator, chosen, smooth_flag, notes, features), = released
        assert data is x and pol is policy and g is gen
        assert features.describe() == "features read"  # the check's features, for their record total
        assert eps == pytest.approx(epsilon - spent)
        assert smooth_flag is smoothed
        assert notes == "partition_then_transform: features read; the reason"
        best = best_plan_under(wl.identity(k), policy)
        assert estimator.name == best[0].name and chosen == best[1]
    # with an estimator given, the plain release runs it along its own best route
    released.clear()
    est = HB()
    ptt.PartitionThenTransform(estimator=est).measure(wl.identity(k), x, epsilon, np.random.default_rng(0), policy=policy)
    assert released[0][5] is est and released[0][6] == plan_routes(wl.identity(k), policy, 1.0, HB()).chosen


def test_select_flag_and_split():
    assert ptt.PartitionThenTransform().select is True
    assert ptt.PartitionThenTransform(select=np.bool_(True)).select is True
    assert ptt.PartitionThenTransform(select=False).select is False
    assert ptt.MIN_LUMPING_GAIN == 2.0 and ptt.DEFAULT_SPLIT == 0.25 and CELLS_GAIN == 2.0


def test_split_threshold_at_min_lumping_gain(monkeypatch):
    for gain, expected in ((ptt.MIN_LUMPING_GAIN, 0.25), (np.nextafter(ptt.MIN_LUMPING_GAIN, 0), 0.0)):
        monkeypatch.setattr(ptt, "lumping_gain", lambda w, p, gain=gain: gain)
        mech = ptt.PartitionThenTransform()
        assert mech.split(wl.identity(8), policies.line(8)) == expected
        assert mech.selects(wl.identity(8), policies.line(8)) is (expected > 0)
    assert not ptt.PartitionThenTransform(epsilon_split=0.3).selects(wl.identity(8), policies.line(8))


def test_plain_release_smooths_along_a_spanning_path_of_a_threshold_policy(monkeypatch):
    """The chosen tree (a path spanning threshold:2, stretch 2) is passed on to the cell release, so
    the noise is the path's at ε/2 (variance 2·(2/ε)²)."""
    k = 10
    policy = policies.threshold(k, 2)
    tree = policies.line(k)
    chosen = plan_routes(wl.identity(k), policy, 1.0, Identity(), "transform", tree).chosen
    assert chosen.tree is not policy and chosen.stretch == 2
    x = np.array([0, 4, 4, 9, 1, 1, 0, 12, 3, 3])
    routes, smooths = _recording_plan_routes(monkeypatch), _recording_smooth(monkeypatch)
    out = ptt.plain_release(wl.prefix(k), x, policy, 0.5, np.random.default_rng(8), Identity(), chosen, True, "s")
    assert [c[0][4:] for c in routes] == [("transform", chosen.tree)]
    raw = plan_routes(wl.identity(k), policy, 0.5, Identity(), "transform", tree).execute(x, np.random.default_rng(8))
    assert raw.noise_scale == pytest.approx(2 / 0.5)
    assert len(smooths) == 1 and np.array_equal(smooths[0][0], raw.answers)
    assert smooths[0][1] == CellNoise("path", 2.0 * raw.noise_scale**2, k)
    assert np.allclose(out.answers, wl.prefix(k).matvec(np.cumsum(raw.answers) + 0.5))
    assert out.noise_scale == raw.noise_scale and out.notes == "s; cells smoothed (post-processing); ran identity (transform)"


def test_arguments_are_checked():
    from blowfish_te.mechanisms import DAWA

    for bad in (0, -0.5, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"^epsilon_split "):
            ptt.PartitionThenTransform(epsilon_split=bad)
    with pytest.raises(TypeError, match="got DAWA$"):
        ptt.PartitionThenTransform(estimator=DAWA())
    with pytest.raises(TypeError, match=r"select must be True or False .*got 1$"):
        ptt.PartitionThenTransform(select=1)
    with pytest.raises(ValueError, match="partition must be one of"):
        ptt.PartitionThenTransform("kmeans")
    assert ptt.PartitionThenTransform("matching", epsilon_split=0.3).epsilon_split == 0.3


def test_split_is_decided_per_policy(monkeypatch):
    """The rule depends on the policy as well as the workload: one mechanism, two policies."""
    monkeypatch.setattr(ptt, "lumping_gain", lambda w, p: 3.0 if p.name.startswith("line") else 1.0)
    mech, workload = ptt.PartitionThenTransform(), wl.identity(8)
    assert mech.split(workload, policies.line(8)) == 0.25
    assert mech.split(workload, policies.unbounded(8)) == 0.0
    assert mech.split(workload, policies.line(8)) == 0.25


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_noise_drawn_on_the_buckets_has_the_second_share(monkeypatch, epsilon):
    """With singleton buckets under unbounded DP, Identity adds Laplace(1/ε₂) per cell, ε₂ = (1 - s)·ε:
    the mean absolute noise over K cells is 1/ε₂ within 5 standard errors (|Laplace(b)| has sd b)."""
    k, share = 2000, 0.4
    _fake_partition(monkeypatch, "dawa_partition", np.arange(k))
    x = np.full(k, 50)
    mech = ptt.PartitionThenTransform(epsilon_split=share, estimator=Identity(), select=False)
    out = mech.measure(wl.identity(k), x, epsilon, np.random.default_rng(11), policy=policies.unbounded(k))
    scale = 1.0 / ((1 - share) * epsilon)
    assert out.noise_scale == pytest.approx(scale) and out.sensitivity == 1.0
    assert abs(np.mean(np.abs(out.answers - x)) - scale) < 5 * scale / np.sqrt(k)


def test_plain_plan_is_kept_per_workload_and_policy(monkeypatch):
    """One mechanism serving several workloads and policies plans the plain release for each pair."""
    k = 16
    x = np.arange(k)
    released = []
    monkeypatch.setattr(ptt, "plain_release", lambda *args: released.append(args) or Outcome(np.zeros(k)))
    _patch_check(monkeypatch, "plain", 0.1)
    monkeypatch.setattr(ptt, "lumping_gain", lambda w, p: 3.0)
    mech = ptt.PartitionThenTransform()
    histogram, line = wl.identity(k), policies.line(k)  # the same objects in several pairs
    pairs = [(histogram, line), (histogram, policies.unbounded(k)), (wl.prefix(k), line), (histogram, line)]
    for workload, policy in pairs:
        mech.measure(workload, x, 1.0, np.random.default_rng(0), policy=policy)
    for (workload, policy), args in zip(pairs, released):
        best = best_plan_under(workload, policy)
        assert args[5].name == best[0].name and args[6] == best[1]
    assert released[0][6] != released[1][6] and released[0][6] != released[2][6]


def test_best_plan_lowest_analytic_error_at_unit_epsilon(monkeypatch):
    k = 16
    policy = policies.line(k)
    mechanism, chosen = ptt.best_plan(wl.identity(k), policy)
    plans = {cls.name: plan_routes(wl.identity(k), policy, 1.0, cls()).chosen for cls in ptt.BUCKET_STRATEGIES}
    assert chosen == plans[mechanism.name]
    assert chosen.expected_mse == min(c.expected_mse for c in plans.values())
    # a strategy without an analytic error is never preferred
    errors = {"identity": None, "hb": 2.0, "privelet": 1.0}
    monkeypatch.setattr(ptt, "plan_routes", lambda w, p, eps, mech: SimpleNamespace(
        chosen=Candidate(route="exact", expected_mse=errors[mech.name])))
    assert ptt.best_plan(wl.identity(k), policy)[0].name == "privelet"
    errors.update(privelet=None, hb=None)
    assert ptt.best_plan(wl.identity(k), policy)[0].name == "identity"


def test_without_a_partition_prefixes_under_line_are_the_projected_plain_release():
    """Prefix sums under line: the split is 0, nothing is checked, and the release is auto's plain
    release (Identity along the line's transform) with its running sums projected — replayed from
    the same generator."""
    k, epsilon = 64, 0.2
    x = np.random.default_rng(3).poisson(2.0, k)
    policy, workload = policies.line(k), wl.prefix(k)
    mechanism = ptt.PartitionThenTransform()
    assert mechanism.split(workload, policy) == 0 and mechanism.check(workload, x, epsilon, np.random.default_rng(0), policy) is None
    estimator, chosen = best_plan_under(workload, policy)
    assert estimator.name == "identity"
    out = mechanism.release(workload, x, epsilon, np.random.default_rng(5), policy=policy)
    raw = plan_routes(wl.identity(k), policy, epsilon, estimator, *ptt._route_of(chosen, policy)).execute(x, np.random.default_rng(5))
    assert np.allclose(out.answers, np.cumsum(monotone_running_sums(np.asarray(raw.answers))))
