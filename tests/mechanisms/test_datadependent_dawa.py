"""DAWA's budget flow and decisions: the ε each stage receives after the private check (the
partition's and the totals' shares of the rest, the plain release's rest), the check's features
and model, the split of ε and the bucket price (priced up by the noisy total), the cell layout,
the smoothed plain release (its Laplace draw and noise model), the argument checks, and the
privacy of a whole release by replaying its Laplace draws at every neighbour."""

import math
from dataclasses import replace

import numpy as np
import pytest

from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import datadependent as dd
from blowfish_te.mechanisms import privtree
from blowfish_te.mechanisms.privtree import leaf_order
from blowfish_te.mechanisms.spatial import hilbert_order
from blowfish_te.partitions import price_factor
from blowfish_te.selection import Decision, ErrorModel, Features, error_model
from blowfish_te.smoothing import MAX_SMOOTHING, CellNoise
from blowfish_te.testing import added_records, replayed_runs, worst_replayed_cost
from blowfish_te.workloads import BucketWorkload

from tests.helpers import Float32Rows


def _decision(route: str, spent: float, cells: int = 16, cost: float = 0.5, total: float = 1e6) -> Decision:
    features = Features(total=total, cost=cost, cells=cells, epsilon=1.0, spent=spent, total_public=False)
    return Decision(route, "set by the test", 0.5 if route == "partition" else 2.0, features)


def _refuse(name):
    def refused(*args, **kwargs):
        raise AssertionError(f"{name} must not be called here")
    return refused


class _Stage:
    """A stand-in for the stage-two strategy: records its arguments, answers a marker (tagged as
    a linear strategy whose noise cannot be smoothed, as HB)."""

    tags = M.HB().tags

    def __init__(self):
        self.calls = []

    def run(self, workload, x, epsilon, rng):
        self.calls.append((workload, np.array(x), epsilon, rng))
        return np.full(workload.num_queries, 7.0)


class _SpyIdentity(M.Identity, register=False):
    """Identity that records its runs instead of drawing noise (it is still an Identity)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def run(self, workload, x, epsilon, rng=None):
        self.calls.append((workload, np.array(x), epsilon, rng))
        return np.full(workload.num_queries, -3.0)


def _patch_check(monkeypatch, gain, decision=None):
    """Fix the aggregation gain; record what the check measures and which model decides (the
    given decision, else refuse any check)."""
    calls = {"measure": [], "decide": []}
    monkeypatch.setattr(dd, "aggregation_gain", lambda workload: gain)

    def fake_measure(values, epsilon, gen, **kwargs):
        assert decision is not None, "measure must not be called here"
        calls["measure"].append((np.array(values), epsilon, gen, kwargs))
        return decision.features

    def fake_decide(features, model):
        calls["decide"].append((features, model))
        return decision

    monkeypatch.setattr(dd, "measure", fake_measure)
    monkeypatch.setattr(dd, "decide", fake_decide)
    return calls


def _patch_partition(monkeypatch, blocks=4):
    """A recording stand-in for the private partition: blocks of ``blocks`` cells along the layout."""
    calls = []

    def fake_partition(values, eps1, eps2, gen, **kwargs):
        calls.append((np.array(values), eps1, eps2, gen, kwargs))
        return np.arange(np.asarray(values).size) // blocks

    monkeypatch.setattr(dd, "dawa_partition", fake_partition)
    return calls


# -- the partition route: both steps get their shares of what the check left ---------------------


@pytest.mark.parametrize("epsilon, spent, gain", [(1.0, 0.03, 1.44), (0.2, 0.004, 1.0), (3.0, 0.5, 1.96)])
def test_partition_route_gives_both_steps_their_shares_of_the_rest(monkeypatch, epsilon, spent, gain):
    k = 16
    x = np.random.default_rng(1).integers(0, 50, k)
    checks = _patch_check(monkeypatch, gain, _decision("partition", spent))
    partitions = _patch_partition(monkeypatch)
    stage = _Stage()
    candidates = []
    monkeypatch.setattr(dd, "lowest_error", lambda reduced, options: candidates.append(options) or stage)
    monkeypatch.setattr(dd, "plain_strategy", _refuse("plain_strategy"))
    gen = np.random.default_rng(0)
    w = wl.identity(k)

    out = M.DAWA().run(w, x, epsilon, rng=gen)

    [(values, eps_check, gen_check, kwargs)] = checks["measure"]
    assert np.array_equal(values, x) and eps_check == epsilon and gen_check is gen and kwargs == {}
    [(features, model)] = checks["decide"]
    assert features is _decision("partition", spent).features or features.spent == spent
    assert model == error_model("dawa", 1, "cells")
    rest, ratio = epsilon - spent, 0.25 / math.sqrt(gain)
    [(values, eps1, eps2, gen_partition, kwargs)] = partitions
    assert np.array_equal(values, x) and gen_partition is gen
    assert eps1 == pytest.approx(ratio * rest, rel=1e-12)
    assert eps2 == pytest.approx((1 - ratio) * rest, rel=1e-12)
    assert kwargs["penalty"] == pytest.approx(gain**0.25, rel=1e-12)
    assert candidates == [dd.STAGE_TWO]
    [(reduced, totals, eps_totals, gen_totals)] = stage.calls
    assert isinstance(reduced, BucketWorkload) and reduced.base is w
    assert np.array_equal(reduced.labels, np.arange(k) // 4)
    assert totals.dtype == np.int64 and np.array_equal(totals, x.reshape(4, 4).sum(axis=1))
    assert eps_totals == pytest.approx((1 - ratio) * rest, rel=1e-12) and gen_totals is gen
    assert np.array_equal(out, np.full(k, 7.0))


@pytest.mark.parametrize("make, gain, ratio, penalty", [
    (lambda: M.DAWA(select=False), 1.44, 0.25 / 1.2, 1.44**0.25),
    (lambda: M.DAWA(select=False), 16.0, 0.0625, 2.0),
    (lambda: M.DAWA(ratio=0.4), 1.44, 0.4, 1.44**0.25),
    (lambda: M.DAWA(ratio=0.4, penalty=3.0), 1.0, 0.4, 3.0),
])
def test_without_a_check_the_partition_takes_its_share_of_all_of_epsilon(monkeypatch, make, gain, ratio, penalty):
    """``select=False`` or a given ratio: the published DAWA, no feature bought, the price unscaled."""
    k, epsilon = 16, 0.7
    x = np.random.default_rng(2).integers(0, 50, k)
    _patch_check(monkeypatch, gain)  # any call to the check fails
    partitions = _patch_partition(monkeypatch)
    stage = _Stage()
    monkeypatch.setattr(dd, "lowest_error", lambda reduced, options: stage)
    M_run = make().run(wl.prefix(k), x, epsilon, rng=3)
    [(_, eps1, eps2, _, kwargs)] = partitions
    assert eps1 == pytest.approx(ratio * epsilon, rel=1e-12)
    assert eps2 == pytest.approx((1 - ratio) * epsilon, rel=1e-12)
    assert kwargs["penalty"] == pytest.approx(penalty, rel=1e-12)
    assert stage.calls[0][2] == pytest.approx((1 - ratio) * epsilon, rel=1e-12)
    assert np.array_equal(M_run, np.full(k, 7.0))


def test_given_estimator_answers_the_totals_and_the_plain_release(monkeypatch):
    k = 16
    x = np.random.default_rng(4).integers(0, 50, k)
    _patch_partition(monkeypatch)
    monkeypatch.setattr(dd, "lowest_error", _refuse("lowest_error"))
    monkeypatch.setattr(dd, "plain_strategy", _refuse("plain_strategy"))
    stage = _SpyIdentity()
    dawa = M.DAWA(estimator=stage)
    assert dawa.estimator is stage
    _patch_check(monkeypatch, 1.0, _decision("partition", 0.01))
    dawa.run(wl.identity(k), x, 1.0, rng=0)
    _patch_check(monkeypatch, 1.0, _decision("plain", 0.01, cost=5.0))  # nothing to smooth
    dawa.run(wl.identity(k), x, 1.0, rng=0)
    assert [type(call[0]) for call in stage.calls] == [BucketWorkload, type(wl.identity(k))]
    assert stage.calls[0][2] == pytest.approx(0.75 * 0.99) and stage.calls[1][2] == pytest.approx(0.99)


# -- grids: layout, the check's rule and the thresholds for ranges -------------------------------


@pytest.mark.parametrize("order", ["hilbert", "rows"])
@pytest.mark.parametrize("gain, kind", [(1.5, "ranges"), (1.05, "ranges"), (1.0, "cells")])
def test_grid_check_reads_the_layout_and_partition_is_mapped_back(monkeypatch, order, gain, kind):
    shape, epsilon, spent = (4, 4), 0.8, 0.02
    x = np.random.default_rng(5).integers(0, 50, shape)
    checks = _patch_check(monkeypatch, gain, _decision("partition", spent))
    partitions = _patch_partition(monkeypatch)
    stage = _Stage()
    monkeypatch.setattr(dd, "lowest_error", lambda reduced, options: stage)
    gen = np.random.default_rng(0)

    M.DAWA(order=order, partition="intervals").run(wl.prefix(shape), x, epsilon, rng=gen)

    cells = hilbert_order(shape) if order == "hilbert" else np.arange(16)
    [(values, eps_check, gen_check, kwargs)] = checks["measure"]
    assert np.array_equal(values, x.ravel()[cells]) and eps_check == epsilon and gen_check is gen and kwargs == {}
    assert checks["decide"][0][1] == error_model("dawa", 2, kind)
    [(values, eps1, eps2, _, _)] = partitions
    assert np.array_equal(values, x.ravel()[cells])
    ratio = 0.25 / math.sqrt(gain)
    assert eps1 == pytest.approx(ratio * (epsilon - spent), rel=1e-12)
    assert eps2 == pytest.approx((1 - ratio) * (epsilon - spent), rel=1e-12)
    labels = np.empty(16, dtype=np.int64)
    labels[cells] = np.arange(16) // 4
    [(reduced, totals, _, _)] = stage.calls
    assert np.array_equal(reduced.labels, labels)
    assert np.array_equal(totals, np.bincount(labels, weights=x.ravel()).astype(np.int64))


@pytest.mark.parametrize("kind", ["ranges", "cells"])
def test_a_grid_is_partitioned_by_the_deviation_quadtree(monkeypatch, kind):
    """On a grid DAWA's default partition is PrivTree's rule over deviations at TREE_SHARE of what
    the check leaves, the leaves numbered along the Hilbert curve; the interval tiling is not run."""
    shape, epsilon, spent = (8, 8), 0.8, 0.02
    x = np.random.default_rng(6).integers(0, 50, shape)
    _patch_check(monkeypatch, 1.5 if kind == "ranges" else 1.0, _decision("partition", spent))
    monkeypatch.setattr(dd, "dawa_partition", _refuse("dawa_partition"))
    trees = []

    def leaves(values, eps1, gen, **kwargs):
        trees.append((values, eps1, kwargs))
        return np.array([[0, 0], [0, 4], [4, 4]]), np.array([[8, 4], [4, 8], [8, 8]])

    monkeypatch.setattr(privtree, "privtree_leaves", leaves)
    stage = _Stage()
    monkeypatch.setattr(dd, "lowest_error", lambda reduced, options: stage)
    gen = np.random.default_rng(0)
    M.DAWA().run(wl.prefix(shape) if kind == "ranges" else wl.identity(shape), x, epsilon, rng=gen)
    [(values, eps1, kwargs)] = trees
    assert np.array_equal(values, x) and kwargs == {"threshold": 0.0, "score": "deviation"}
    assert eps1 == pytest.approx(dd.TREE_SHARE * (epsilon - spent), rel=1e-12)
    [(reduced, totals, eps2, _)] = stage.calls
    assert eps2 == pytest.approx((1 - dd.TREE_SHARE) * (epsilon - spent), rel=1e-12)
    painted = np.zeros(shape, dtype=np.int64)
    painted[:4, 4:], painted[4:, 4:] = 1, 2
    expected = leaf_order(shape, painted.ravel())
    assert np.array_equal(reduced.labels, expected)
    assert np.array_equal(totals, np.bincount(expected, weights=x.ravel()).astype(np.int64))


def test_the_partition_kind_and_its_refusal():
    assert M.DAWA().partition_kind((16,)) == "intervals" and M.DAWA().partition_kind((4, 4)) == "tree"
    assert M.DAWA(partition="tree").partition_kind((16,)) == "tree"
    assert M.DAWA(partition="intervals").partition_kind((4, 4)) == "intervals"
    assert M.DAWA(ratio=0.3).split(wl.prefix((4, 4)))[0] == 0.3 and M.DAWA().split(wl.prefix((4, 4)))[0] == dd.TREE_SHARE
    with pytest.raises(ValueError, match=r"partition must be one of \('intervals', 'tree'\) or None .*'quadtree'"):
        M.DAWA(partition="quadtree")


@pytest.mark.parametrize("scale, factor", [(1e4, 1.0), (0.25, 1.0), (0.1, 2.5), (0.01, 25.0), (0.0, 1e4)])
def test_the_noisy_total_prices_the_buckets(monkeypatch, scale, factor):
    """N·ε/K below 0.25 makes every bucket dearer by 0.25/(N·ε/K), and lifts the length cap."""
    k, epsilon = 16, 0.01
    x = np.random.default_rng(9).integers(0, 5, k)
    _patch_check(monkeypatch, 1.0, _decision("partition", 0.0, cells=k, total=scale * k))  # the features' ε is 1
    partitions = _patch_partition(monkeypatch)
    monkeypatch.setattr(dd, "lowest_error", lambda reduced, options: _Stage())
    M.DAWA().run(wl.identity(k), x, epsilon, rng=0)
    [(_, _, _, _, kwargs)] = partitions
    assert price_factor(scale) == pytest.approx(factor)
    assert kwargs["penalty"] == pytest.approx(factor, rel=1e-12)
    assert kwargs["max_length"] == (None if factor == 1.0 else k)


def test_layout():
    assert np.array_equal(M.DAWA().layout((8,)), np.arange(8))
    assert np.array_equal(M.DAWA(order="rows").layout((8,)), np.arange(8))
    hilbert = hilbert_order((4, 4))
    assert not np.array_equal(hilbert, np.arange(16))
    assert np.array_equal(M.DAWA().layout((4, 4)), hilbert)
    assert np.array_equal(M.DAWA(order="hilbert").layout((4, 8)), hilbert_order((4, 8)))
    assert np.array_equal(M.DAWA(order="rows").layout((4, 4)), np.arange(16))


@pytest.mark.parametrize("shape, gain, kind", [
    ((16,), 1.0, "cells"), ((16,), 1.999, "cells"), ((16,), 2.0, "ranges"), ((16,), 18.0, "ranges"),
    ((4, 4), 1.0, "cells"), ((4, 4), 1.049, "cells"), ((4, 4), 1.05, "ranges"), ((4, 4), 3.0, "ranges"),
])
def test_model_by_dimension_and_workload_class(monkeypatch, shape, gain, kind):
    monkeypatch.setattr(dd, "aggregation_gain", lambda workload: gain)
    model = M.DAWA().model(wl.prefix(shape))
    assert isinstance(model, ErrorModel) and model == error_model("dawa", len(shape), kind)


def test_split_rule_and_given_values(monkeypatch):
    computed = []
    monkeypatch.setattr(dd, "aggregation_gain", lambda workload: computed.append(workload) or 16.0)
    w = wl.prefix(16)
    assert M.DAWA().split(w) == (pytest.approx(0.0625), pytest.approx(2.0))
    assert M.DAWA(ratio=0.3).split(w) == (0.3, pytest.approx(2.0))
    assert M.DAWA(penalty=3.0).split(w) == (pytest.approx(0.0625), 3.0)
    dawa = M.DAWA()
    dawa.split(w)
    dawa.split(w)
    dawa.model(w)
    assert len(computed) == 4  # once per mechanism and workload
    monkeypatch.setattr(dd, "aggregation_gain", _refuse("aggregation_gain"))
    assert M.DAWA(ratio=0.3, penalty=0.5).split(w) == (0.3, 0.5)  # both given: no gain computed


def test_partitioned_refuses_a_budgetless_partition():
    k = 8
    x = np.arange(k)
    for eps1 in (0.0, -0.5):
        with pytest.raises(ValueError, match="partition's budget must be positive"):
            M.DAWA().partitioned(wl.identity(k), x, eps1, 1.0, np.random.default_rng(0))


# -- the plain route: all of the rest, smoothed when the strategy is Identity ---------------------


@pytest.mark.parametrize("epsilon, spent", [(1.0, 0.04), (0.3, 0.01), (5.0, 1.5)])
def test_plain_route_spends_the_rest_without_smoothing(monkeypatch, epsilon, spent):
    k = 16
    x = np.random.default_rng(6).integers(0, 50, k)
    w = wl.identity(k)
    monkeypatch.setattr(dd, "add_laplace", _refuse("add_laplace"))
    monkeypatch.setattr(dd, "smooth", _refuse("smooth"))
    monkeypatch.setattr(dd, "dawa_partition", _refuse("dawa_partition"))
    gen = np.random.default_rng(0)
    for cost, estimator in ((dd.SMOOTHING_COST, _SpyIdentity()), (5.0, _Stage()), (0.1, _Stage())):
        _patch_check(monkeypatch, 1.0, _decision("plain", spent, cost=cost))
        monkeypatch.setattr(dd, "plain_strategy", lambda mechanism, workload, chosen=estimator: chosen)
        out = M.DAWA().run(w, x, epsilon, rng=gen)
        [(workload, values, eps, rng)] = estimator.calls
        assert workload is w and np.array_equal(values, x) and rng is gen
        assert eps == pytest.approx(epsilon - spent, rel=1e-12)
        assert np.array_equal(out, np.full(k, -3.0 if isinstance(estimator, M.Identity) else 7.0))


@pytest.mark.parametrize("shape, epsilon, spent", [((16,), 1.0, 0.04), ((4, 4), 0.25, 0.01), ((4, 4), 4.0, 1.0)])
def test_smooth_route_draws_laplace_on_the_layout_and_smooths_it(monkeypatch, shape, epsilon, spent):
    k = math.prod(shape)
    x = np.random.default_rng(7).integers(0, 50, shape)
    _patch_check(monkeypatch, 1.0, _decision("plain", spent, k, cost=dd.SMOOTHING_COST - 1e-9))
    monkeypatch.setattr(dd, "dawa_partition", _refuse("dawa_partition"))
    monkeypatch.setattr(dd, "plain_strategy", lambda mechanism, workload: _SpyIdentity())
    draws, smoothed = [], []

    def fake_laplace(values, scale, rng, *, sensitivity, integer):
        draws.append((np.array(values), scale, rng, sensitivity, integer))
        return np.asarray(values, dtype=np.float64) + 0.5

    def fake_smooth(y, noise, total):
        assert total is None  # the features' total has no known variance here
        smoothed.append((np.array(y), noise))
        return np.asarray(y) * 2.0 + 1.0, np.zeros(np.asarray(y).size, dtype=np.int64)

    monkeypatch.setattr(dd, "add_laplace", fake_laplace)
    monkeypatch.setattr(dd, "smooth", fake_smooth)
    gen = np.random.default_rng(0)
    w = wl.identity(shape)

    out = M.DAWA().run(w, x, epsilon, rng=gen)

    cells = np.arange(k) if len(shape) == 1 else hilbert_order(shape)
    rest = epsilon - spent
    [(values, scale, rng, sensitivity, integer)] = draws
    assert np.array_equal(values, x.ravel()[cells]) and rng is gen
    assert scale == pytest.approx(1.0 / rest, rel=1e-12)
    assert sensitivity == 1.0 and integer is True
    [(y, noise)] = smoothed
    assert np.array_equal(y, x.ravel()[cells] + 0.5)
    assert isinstance(noise, CellNoise) and noise.kind == "independent" and noise.size == k
    assert noise.variance == pytest.approx(2.0 / rest**2, rel=1e-12)
    assert out.dtype == np.float64
    assert np.allclose(out, (x.ravel() + 0.5) * 2.0 + 1.0)  # reordered back to the cells


@pytest.mark.parametrize("total, epsilon, bought", [(20.0, 0.01, True), (20.0, 0.5, False), (1e6, 0.01, False)])
def test_the_smoothed_counts_fit_the_noisy_total_refined_on_flat_data_at_small_epsilon(monkeypatch, total, epsilon, bought):
    """The plain route smooths with the check's noisy total; where N·ε/K reads low and ε < √(2/K)
    it first buys a second total at REFINED_TOTAL_SHARE·ε of the rest, and the cells get the remainder."""
    import blowfish_te.selection as selection

    k, spent = 64, 0.03 * epsilon
    x = np.zeros(k, dtype=np.int64)
    x[:20] = 1
    features = Features(total=total, cost=0.2, cells=k, epsilon=epsilon, spent=spent, total_public=False,
                        total_variance=5e5)
    _patch_check(monkeypatch, 1.0, Decision("plain", "set by the test", 2.0, features))
    monkeypatch.setattr(dd, "plain_strategy", lambda mechanism, workload: M.Identity())
    draws, smoothed = [], []

    def recording(values, scale, rng, *, sensitivity, integer):
        draws.append((np.array(values, dtype=float), scale, sensitivity))
        return np.asarray(values, dtype=np.float64) + 3.0

    monkeypatch.setattr(dd, "add_laplace", recording)
    monkeypatch.setattr(selection, "add_laplace", recording)
    monkeypatch.setattr(dd, "smooth", lambda y, noise, fit: smoothed.append((noise, fit)) or (np.asarray(y), None))
    M.DAWA().run(wl.identity(k), x, epsilon, rng=0)
    share = selection.REFINED_TOTAL_SHARE * epsilon if bought else 0.0
    rest = epsilon - spent - share
    [(noise, fit)] = smoothed
    assert noise.variance == pytest.approx(2.0 / rest**2, rel=1e-12)
    assert draws[-1][1] == pytest.approx(1.0 / rest, rel=1e-12) and draws[-1][0].size == k
    if bought:
        (second, scale, sensitivity), _ = draws
        assert second.tolist() == [20.0] and scale == pytest.approx(1.0 / share, rel=1e-12) and sensitivity == 1.0
        variance = 2.0 / share**2
        merged = 1.0 / (1.0 / 5e5 + 1.0 / variance)
        assert fit == pytest.approx((merged * (total / 5e5 + 23.0 / variance), merged), rel=1e-12)
    else:
        assert len(draws) == 1 and fit == (total, 5e5)


def test_smoothed_answers_are_float64_whatever_the_workload_returns(monkeypatch):
    k = 8
    x = np.random.default_rng(8).integers(0, 50, k)
    _patch_check(monkeypatch, 1.0, _decision("plain", 0.01, k, cost=0.2))
    monkeypatch.setattr(dd, "plain_strategy", lambda mechanism, workload: M.Identity())
    monkeypatch.setattr(dd, "add_laplace", lambda values, scale, rng, *, sensitivity, integer: np.asarray(values, float))
    monkeypatch.setattr(dd, "smooth", lambda y, noise, total: (np.asarray(y) + 0.25, None))
    matrix = np.tril(np.ones((k, k)))
    out = M.DAWA().run(Float32Rows(matrix), x, 1.0, rng=0)
    assert out.dtype == np.float64
    assert np.allclose(out, matrix @ (x + 0.25))


@pytest.mark.parametrize("k, smoothed", [(MAX_SMOOTHING, True), (MAX_SMOOTHING + 1, False)])
def test_smoothing_limit(monkeypatch, k, smoothed):
    x = np.zeros(k, dtype=np.int64)
    _patch_check(monkeypatch, 1.0, _decision("plain", 0.01, k, cost=0.2))
    estimator = _SpyIdentity()
    monkeypatch.setattr(dd, "plain_strategy", lambda mechanism, workload, chosen=estimator: chosen)
    draws = []
    monkeypatch.setattr(dd, "add_laplace",
                        lambda values, scale, rng, *, sensitivity, integer: draws.append(scale) or np.asarray(values, float))
    monkeypatch.setattr(dd, "smooth", lambda y, noise, total: (np.asarray(y), None))
    M.DAWA().run(wl.identity(k), x, 1.0, rng=0)
    assert (len(draws), len(estimator.calls)) == ((1, 0) if smoothed else (0, 1))


# -- arguments --------------------------------------------------------------------------------------


def test_defaults_and_given_arguments():
    dawa = M.DAWA()
    assert (dawa.ratio, dawa.penalty, dawa.estimator, dawa.order, dawa.select) == (None, None, None, "hilbert", True)
    assert dawa.select is True
    hb = M.HB()
    given = M.DAWA(ratio=0.3, penalty=0.5, estimator=hb, order="rows", select=False)
    assert (given.ratio, given.penalty, given.order, given.select) == (0.3, 0.5, "rows", False)
    assert given.estimator is hb
    assert M.DAWA(select=np.bool_(True)).select is True
    assert M.DAWA(penalty=1e-3).penalty == 1e-3


@pytest.mark.parametrize("kwargs, error, words", [
    ({"ratio": 1.5}, ValueError, r"^ratio must"),
    ({"ratio": 0}, ValueError, r"^ratio must"),
    ({"penalty": 0}, ValueError, r"^penalty must"),
    ({"penalty": -2.0}, ValueError, r"^penalty must"),
    ({"estimator": M.AHP()}, TypeError, r"^estimator must.*AHP"),
    ({"order": "cols"}, ValueError, r"^order must.*'cols'"),
    ({"select": "yes"}, TypeError, r"^select must.*'yes'"),
    ({"select": 1}, TypeError, r"^select must"),
])
def test_argument_errors_name_the_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        M.DAWA(**kwargs)


def test_refuses_more_than_two_dimensions_but_runs_grids(monkeypatch):
    with pytest.raises(ValueError, match="1-D domain or a 2-D grid"):
        M.DAWA().run(wl.prefix((2, 2, 2)), np.ones((2, 2, 2), dtype=int), 1.0, rng=0)
    _patch_check(monkeypatch, 1.5, _decision("plain", 0.01))
    monkeypatch.setattr(dd, "plain_strategy", lambda mechanism, workload: _Stage())
    assert M.DAWA().run(wl.prefix((2, 2)), np.ones((2, 2), dtype=int), 1.0, rng=0).shape == (4,)


# -- privacy of the whole release -----------------------------------------------------------------


def test_a_release_that_buys_a_second_total_costs_at_most_epsilon(monkeypatch):
    """Two records over 16 cells at ε = 0.2 < √(2/K), sent to the smoothed plain route: every
    Laplace draw (the features, the second total where the first reads N·ε/K below LOW_SCALE,
    the cells) replayed at every neighbour costs at most ε, with and without the second total."""
    import blowfish_te.mechanisms.base as base
    import blowfish_te.selection as selection

    k, epsilon = 16, 0.2
    x = np.zeros(k, dtype=np.int64)
    x[[2, 9]] = 1
    monkeypatch.setattr(dd, "SMOOTHING_COST", np.inf)
    real_decide = dd.decide
    monkeypatch.setattr(dd, "decide", lambda features, model: replace(real_decide(features, model), route="plain"))
    neighbours = added_records(x) + [x - np.eye(k, dtype=int)[i] for i in range(k) if x[i] > 0]
    mech = M.DAWA()
    bought = set()
    for seed in range(6):
        replays = replayed_runs(monkeypatch, lambda data, seed=seed: mech.run(wl.identity(k), data, epsilon, rng=seed), x, neighbours,
                                (selection, base, dd))
        draws = {len(r.scales) for r in replays}
        assert draws in ({3}, {4})  # total, costs, [second total], cells: the same path at every neighbour
        if draws == {4}:
            assert replays[0].scales[2] == pytest.approx(1.0 / (selection.REFINED_TOTAL_SHARE * epsilon), rel=1e-12)
        bought.add(draws == {4})
        cost = max(r.cost for r in replays)
        assert 0.7 * epsilon <= cost <= epsilon * (1 + 1e-9)
    assert bought == {True, False}


@pytest.mark.slow
@pytest.mark.parametrize("scale, seed, route", [(0, 5, None), (1, 3, None), (3000, 3, None), (3000, 4, None)])
def test_whole_release_costs_at_most_epsilon(monkeypatch, scale, seed, route):
    """Every Laplace draw (the check's features, the totals or the cells) replayed at every
    neighbour; the partition is replaced by a fixed one (its report-noisy-min does not draw through
    ``add_laplace``), so a partition release is charged at most ε less the partition's share."""
    import blowfish_te.mechanisms.base as base
    import blowfish_te.selection as selection

    monkeypatch.setattr(dd, "dawa_partition", lambda values, eps1, eps2, gen, **kw: np.arange(np.asarray(values).size) // 4)
    decisions = []
    real_decide = dd.decide
    monkeypatch.setattr(dd, "decide", lambda features, model: decisions.append(real_decide(features, model)) or decisions[-1])
    k, epsilon = 16, 1.0
    if scale == 0:  # two records: the noisy N·ε/K falls below the check's threshold at this seed
        x = np.zeros(k, dtype=np.int64)
        x[[2, 9]] = 1
    else:
        x = np.random.default_rng(scale).integers(0, 2 * scale, k)
    neighbours = added_records(x) + [x - np.eye(k, dtype=int)[i] for i in range(k) if x[i] > 0]
    mech = M.DAWA()
    cost = worst_replayed_cost(monkeypatch, lambda data: mech.run(wl.identity(k), data, epsilon, rng=seed), x, neighbours,
                               (selection, base, dd))
    routes = {d.route for d in decisions}
    assert len(routes) == 1 and (route is None or routes == {route})
    route = routes.pop()
    spent = decisions[0].spent
    assert 0 < spent <= 0.04 * epsilon + 1e-12
    bound = spent + 0.75 * (epsilon - spent) if route == "partition" else epsilon
    assert cost <= bound * (1 + 1e-9)
    assert cost >= 0.7 * bound  # the replay does charge the release


@pytest.mark.parametrize("cost", [0.2, 5.0])
def test_the_plain_route_is_release_plain_smoothed_only_below_the_smoothing_cost(monkeypatch, cost):
    """What a release runs when its check says plain is :meth:`DAWA.release_plain` of that
    decision, draw for draw; it smooths (with the features' total) only below SMOOTHING_COST."""
    k = 64
    x = np.random.default_rng(3).integers(0, 40, k)
    decision = _decision("plain", 0.05, k, cost=cost)
    _patch_check(monkeypatch, 1.0, decision)
    monkeypatch.setattr(dd, "plain_strategy", lambda mechanism, workload: M.Identity())
    smoothed = []
    real = dd.smooth
    monkeypatch.setattr(dd, "smooth", lambda y, noise, total: smoothed.append(total) or real(y, noise, total))
    released = M.DAWA().run(wl.identity(k), x, 0.5, rng=np.random.default_rng(0))
    direct = M.DAWA().release_plain(wl.identity(k), x, 0.5, np.random.default_rng(0), decision)
    assert np.array_equal(released, direct)
    assert smoothed == ([None, None] if cost < dd.SMOOTHING_COST else [])  # the hand-made features' total has no variance
