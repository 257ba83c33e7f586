"""How ``adaptive`` makes its private choice and what each branch is given (Pythia: Kotsogiannis,
Machanavajjhala, Hay, Miklau, SIGMOD 2017; the data-dependent candidate DAWA: Li, Hay, Miklau,
Wang, PVLDB 2014): the candidates per policy, the features' arguments and the model that reads
them, the ε every stage receives, the smoothing decision and the notes. Small domains and
``budget=0``: the stages are recorded by wrapping the functions ``adaptive`` looks up, so no test
depends on accuracy."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import blowfish_te.mechanisms.adaptive as adaptive
import blowfish_te.routes as routes
from blowfish_te import datasets, policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import DAWA, MECHANISMS, Adaptive, Auto, Mechanism, PartitionThenTransform, UGrid
from blowfish_te.mechanisms.datadependent import SMOOTHING_COST
from blowfish_te.mechanisms.laplace import Identity
from blowfish_te.mechanisms.plain import best_plan_under
from blowfish_te.routes import Outcome, plan_routes
from blowfish_te.selection import Decision, ErrorModel, error_model, measure


def _checked(monkeypatch, route=None, cost=None):
    """Wrap ``adaptive.measure`` and ``adaptive.decide``: record every call, the model and the real
    decision; return the features (their cost replaced by ``cost`` when given) and that decision,
    or one with its features and spend but ``route``."""
    real_measure, real_decide, calls = adaptive.measure, adaptive.decide, []

    def fake_measure(cells, epsilon, gen, **kwargs):
        features = real_measure(cells, epsilon, gen, **kwargs)
        if cost is not None:
            features = replace(features, cost=cost)
        calls.append(SimpleNamespace(cells=np.array(cells), epsilon=epsilon, gen=gen, kwargs=kwargs, features=features))
        return features

    def fake_decide(features, model):
        decision = real_decide(features, model)
        calls[-1].model = model
        calls[-1].decision = decision if route is None else Decision(route, "forced", decision.predicted, features)
        return calls[-1].decision

    monkeypatch.setattr(adaptive, "measure", fake_measure)
    monkeypatch.setattr(adaptive, "decide", fake_decide)
    return calls


def _forced_notes(mechanism, check, workload, policy, epsilon):
    """The notes of a release whose check was forced: the features, "forced", and each candidate's
    predicted error at the rest of ε."""
    predicted = mechanism._predicted_errors(workload, policy, check.features, mechanism.candidates(workload, policy)[0],
                                            epsilon - check.decision.spent)
    return f"adaptive: {check.features.describe()}; forced; {predicted}"


def _never(monkeypatch, name):
    def fail(*args, **kwargs):
        raise AssertionError(f"{name} was called")

    monkeypatch.setattr(adaptive, name, fail)


def _released(monkeypatch, stub=False):
    """Record the arguments of every ``plain_release``; run it, or return a stub Outcome."""
    real, calls = adaptive.plain_release, []

    def plain(workload, x, policy, epsilon, gen, estimator, chosen, smoothed, notes, features=None):
        calls.append(SimpleNamespace(workload=workload, x=np.array(x), policy=policy, epsilon=epsilon, gen=gen,
                                     estimator=estimator, chosen=chosen, smoothed=smoothed, notes=notes, features=features))
        if stub:
            return Outcome(np.zeros(workload.shape[0]), notes=notes)
        return real(workload, x, policy, epsilon, gen, estimator, chosen, smoothed, notes, features)

    monkeypatch.setattr(adaptive, "plain_release", plain)
    return calls


def _planned(monkeypatch):
    """Record (workload, policy, ε, mechanism) of every ``plan_routes`` call of the plain release."""
    real, calls = routes.plan_routes, []

    def plan(workload, policy, epsilon, mechanism, *args):
        calls.append((workload, policy, epsilon, mechanism))
        return real(workload, policy, epsilon, mechanism, *args)

    monkeypatch.setattr(routes, "plan_routes", plan)
    return calls


def _head(decision) -> str:
    return f"adaptive: {decision.features.describe()}; {decision.reason}"


# -- construction and candidates ------------------------------------------------------------------


def test_budget_argument_and_params():
    assert Adaptive().get_params() == {"budget": 10.0}
    assert Adaptive().budget == 10.0
    assert Adaptive(budget=0).get_params() == {"budget": 0.0}
    assert Adaptive(budget=0.5).budget == 0.5
    with pytest.raises(ValueError, match=r"^budget \(seconds\) must be >= 0, got -1\.0$"):
        Adaptive(budget=-1)
    with pytest.raises(ValueError, match=r"^budget \(seconds\) must be >= 0"):
        Adaptive(budget=-1e-9)
    with pytest.raises(TypeError, match=r"^budget \(seconds\) must be a real number"):
        Adaptive(budget="1")


def test_candidates_follow_the_policy_and_are_made_once():
    """DAWA under unbounded DP on a line or a grid; partition-then-transform under every other
    policy (and beyond two dimensions); both without their own check; one Auto with the budget."""
    mechanism = Adaptive(budget=1.5)
    (dawa,), auto = mechanism.candidates(wl.identity(16), policies.unbounded(16))
    assert type(dawa) is DAWA and dawa.select is False
    assert type(auto) is Auto and auto.budget == 1.5
    assert mechanism.candidates(wl.identity((4, 4)), policies.unbounded((4, 4)))[0] == (dawa,)
    (ptt,), same = mechanism.candidates(wl.identity(16), policies.line(16))
    assert type(ptt) is PartitionThenTransform and ptt.select is False and same is auto
    assert mechanism.candidates(wl.identity(16), policies.threshold(16, 2))[0] == (ptt,)
    assert mechanism.candidates(wl.identity((4, 4)), policies.grid((4, 4)))[0] == (ptt,)
    assert mechanism.candidates(wl.identity((2, 2, 2)), policies.unbounded((2, 2, 2)))[0] == (ptt,)
    again = mechanism.candidates(wl.prefix(16), policies.unbounded(16))
    assert again[0] == (dawa,) and again[1] is auto
    assert Adaptive(budget=0).candidates(wl.identity(4), policies.line(4))[1].budget == 0.0


# -- the data-dependent candidate chosen ----------------------------------------------------------


def test_dawa_partition_gets_its_split_of_the_rest_of_epsilon(monkeypatch):
    """A histogram under unbounded DP: the features on the cells, calibrated to one record added
    or removed, no public total, read by DAWA's 1-D cells model; DAWA's partition at ratio·rest
    and its totals at (1 - ratio)·rest, priced by the noisy scale, with the caller's generator;
    answers cast to float64."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 1000, rng=0)
    w, policy, gen = wl.identity(k), policies.unbounded(k), np.random.default_rng(0)
    checks = _checked(monkeypatch, "partition")
    _never(monkeypatch, "plain_release")
    stages = []

    def partitioned(self, workload, cells, eps1, eps2, stream, scale=None):
        stages.append(SimpleNamespace(mech=self, workload=workload, x=np.array(cells), eps1=eps1, eps2=eps2, gen=stream,
                                      scale=scale))
        return np.arange(workload.shape[0])  # integers: the release casts them

    monkeypatch.setattr(DAWA, "partitioned", partitioned)
    mechanism = Adaptive(budget=0)
    release = mechanism.release(w, x, epsilon, gen, policy=policy)
    (check,) = checks
    assert np.array_equal(check.cells, x) and check.epsilon == epsilon and check.gen is gen
    assert check.kwargs == {"total": None, "record_moves": 1}
    assert check.model == error_model("dawa", 1, "cells")
    spent = check.decision.spent
    assert spent > 0
    (stage,) = stages
    rest = epsilon - spent
    assert stage.mech is mechanism.candidates(w, policy)[0][0] and stage.workload is w and stage.gen is gen
    assert np.array_equal(stage.x, x) and stage.scale == check.features.scale
    assert stage.eps1 == pytest.approx(0.25 * rest, rel=1e-12) and stage.eps2 == pytest.approx(0.75 * rest, rel=1e-12)
    assert stage.eps1 + stage.eps2 + spent == pytest.approx(epsilon, rel=1e-12)
    assert release.answers.dtype == np.float64 and np.array_equal(release.answers, np.arange(k))
    assert release.notes == _forced_notes(mechanism, check, w, policy, epsilon) + "; ran dawa"


def test_dawa_partition_is_dawas_partition_after_the_features(monkeypatch):
    """The features are the release's first draws; then, draw for draw, DAWA's two steps at the
    rest of ε, priced by the noisy scale."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 2000, rng=1)
    w, policy = wl.identity(k), policies.unbounded(k)
    checks = _checked(monkeypatch, "partition")
    mechanism = Adaptive(budget=0)
    release = mechanism.release(w, x, epsilon, np.random.default_rng(7), policy=policy)
    gen = np.random.default_rng(7)
    features = measure(x, epsilon, gen)
    rest = epsilon - features.spent
    expected = DAWA(select=False).partitioned(w, x, 0.25 * rest, 0.75 * rest, gen, scale=features.scale)
    assert np.array_equal(release.answers, expected)
    assert release.notes == _forced_notes(mechanism, checks[0], w, policy, epsilon) + "; ran dawa"
    assert "predicted error ratio to the plain release: dawa " in release.notes  # a histogram: ratios only


def test_dawa_on_ranges_over_a_line_reads_the_ranges_model_and_the_workloads_split(monkeypatch):
    """Prefix sums over 256 cells: DAWA's ratio is 0.25/√gain (not 0.25), and the model is the one
    for ranges."""
    k, epsilon = 256, 0.2
    x = datasets.synthetic(k, 3000, rng=2)
    w, policy, gen = wl.prefix(k), policies.unbounded(k), np.random.default_rng(1)
    ratio, penalty = DAWA(select=False).split(w)
    assert 0 < ratio < 0.2 and penalty > 1.2  # far from each other and from the histogram's (0.25, 1)
    checks = _checked(monkeypatch, "partition")
    stages = []
    real = DAWA.partitioned

    def partitioned(self, workload, cells, eps1, eps2, stream, scale=None):
        stages.append((eps1, eps2))
        return real(self, workload, cells, eps1, eps2, stream, scale=scale)

    monkeypatch.setattr(DAWA, "partitioned", partitioned)
    release = Adaptive(budget=0).release(w, x, epsilon, gen, policy=policy)
    (check,) = checks
    assert check.kwargs == {"total": None, "record_moves": 1} and check.model == error_model("dawa", 1, "ranges")
    rest = epsilon - check.decision.spent
    assert check.decision.spent > 0
    assert stages == [(pytest.approx(ratio * rest, rel=1e-12), pytest.approx((1 - ratio) * rest, rel=1e-12))]
    assert release.answers.shape == (k,) and release.notes.endswith("; ran dawa")
    mse = best_plan_under(w, policy, Adaptive(budget=0).candidates(w, policy)[1])[1].expected_mse
    plain = math.sqrt(mse) / rest
    predicted = error_model("dawa", 1, "ranges", calibrated=True).predict(check.features) * plain
    assert f"; forced; predicted RMSE per query: dawa {predicted:.4g}, plain release {plain:.4g} (analytic)" in release.notes


@pytest.mark.parametrize("workload", [wl.identity((8, 8)), wl.prefix((8, 8))])
def test_a_grid_is_checked_along_dawas_layout(monkeypatch, workload):
    from blowfish_te.mechanisms.plain import workload_class

    shape, epsilon = (8, 8), 0.5
    x = datasets.synthetic_2d(shape, 5000, rng=1).ravel()
    policy, gen = policies.unbounded(shape), np.random.default_rng(2)
    checks = _checked(monkeypatch, "plain")
    layout = DAWA(select=False).layout(shape)
    assert not np.array_equal(layout, np.arange(x.size))
    release = Adaptive(budget=0).release(workload, x, epsilon, gen, policy=policy)
    (check,) = checks
    assert np.array_equal(check.cells, x[layout]) and check.epsilon == epsilon and check.gen is gen
    assert check.kwargs == {"total": None, "record_moves": 1}
    assert check.model == error_model("dawa", 2, workload_class(workload))
    assert release.notes.startswith(f"adaptive: {check.features.describe()}; forced")


def test_partition_then_transform_gets_the_rest_and_its_share_of_it(monkeypatch):
    """Under line: the features on the cells in their own order, the total public, calibrated to
    a moved record (sensitivity 2), read by its model; the partition at split·rest inside a
    release at rest, priced by the scale, given the notes, which are extended by what ran."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 1000, rng=4)
    w, policy, gen = wl.identity(k), policies.line(k), np.random.default_rng(4)
    checks = _checked(monkeypatch, "partition")
    _never(monkeypatch, "plain_release")
    stages = []
    real = PartitionThenTransform.partitioned

    def partitioned(self, workload, cells, pol, eps, eps1, stream, notes, scale=None):
        inner = real(self, workload, cells, pol, eps, eps1, stream, notes, scale=scale)
        stages.append(SimpleNamespace(workload=workload, x=np.array(cells), policy=pol, eps=eps, eps1=eps1, gen=stream,
                                      notes=notes, scale=scale, inner=inner))
        return inner

    monkeypatch.setattr(PartitionThenTransform, "partitioned", partitioned)
    release = Adaptive(budget=0).release(w, x, epsilon, gen, policy=policy)
    (check,) = checks
    assert np.array_equal(check.cells, x) and check.epsilon == epsilon and check.gen is gen
    assert check.kwargs == {"total": int(x.sum()), "record_moves": 2}
    assert check.model == error_model("partition_then_transform", 1, "cells")
    spent = check.decision.spent
    assert spent > 0
    (stage,) = stages
    assert stage.workload is w and stage.policy is policy and stage.gen is gen and np.array_equal(stage.x, x)
    assert stage.eps == pytest.approx(epsilon - spent, rel=1e-12)
    assert stage.eps1 == pytest.approx(0.25 * (epsilon - spent), rel=1e-12)
    assert stage.scale == check.features.scale == x.sum() * epsilon / k  # the public total: exact
    notes = _forced_notes(Adaptive(budget=0), check, w, policy, epsilon)
    assert "predicted error ratio to the plain release: partition_then_transform " in notes
    assert stage.notes == notes
    assert release.notes == notes + "; ran partition_then_transform"
    assert np.array_equal(release.answers, stage.inner.answers)
    assert release.component_totals == stage.inner.component_totals and release.noise_scale == stage.inner.noise_scale


def test_ranges_under_other_policies_keep_the_cells_model(monkeypatch):
    """Partition-then-transform has one model for every workload it partitions (prefix sums under
    threshold:4 included), on the cells in their own order."""
    k, epsilon = 256, 0.5
    x = datasets.synthetic(k, 5000, rng=6)
    w, policy = wl.prefix(k), policies.threshold(k, 4)
    checks = _checked(monkeypatch, "plain")
    plains = _released(monkeypatch, stub=True)
    Adaptive(budget=0).release(w, x, epsilon, np.random.default_rng(5), policy=policy)
    (check,) = checks
    assert np.array_equal(check.cells, x)
    assert check.kwargs == {"total": int(x.sum()), "record_moves": 2}
    assert check.model == error_model("partition_then_transform", 1, "cells")
    assert plains[0].smoothed is False and plains[0].epsilon == pytest.approx(epsilon - check.decision.spent, rel=1e-12)


# -- no partition: the plain release ----------------------------------------------------------------


def test_a_workload_the_partition_cannot_help_is_planned_and_run_at_all_of_epsilon(monkeypatch):
    """Prefix sums under line: partition-then-transform would not partition (split 0), so no
    feature is measured and the data-independent candidate gets all of ε, unsmoothed."""
    k, epsilon = 64, 0.3
    x = datasets.synthetic(k, 5000, rng=0)
    w, policy, gen = wl.prefix(k), policies.line(k), np.random.default_rng(6)
    _never(monkeypatch, "measure")
    plains = _released(monkeypatch)
    mechanism = Adaptive(budget=0)
    release = mechanism.release(w, x, epsilon, gen, policy=policy)
    auto = mechanism.candidates(w, policy)[1]
    chosen = plan_routes(w, policy, 1.0, auto).chosen
    (plain,) = plains
    notes = "adaptive: partition_then_transform would not partition prefix(64) under line(64), so it is the plain release"
    assert plain.workload is w and plain.policy is policy and plain.gen is gen and np.array_equal(plain.x, x)
    assert plain.epsilon == epsilon and plain.smoothed is False and plain.notes == notes and plain.features is None
    assert plain.chosen.expected_mse == chosen.expected_mse and plain.estimator is plain.chosen.mechanism
    assert release.notes == f"{notes}; running sums made nondecreasing (post-processing); ran {plain.estimator.name} " \
        f"({plain.chosen.route})"
    assert release.answers.shape == (k,)


@pytest.mark.parametrize("smoothed", [False, True])
def test_dawa_plain_release_at_the_rest(smoothed, monkeypatch):
    """A histogram under unbounded DP the check sends to the plain release: auto's choice under
    the policy (Laplace on the cells, compared first, which GreedyH ties), at ε less the features'
    spend, smoothed when the noisy cost is below the smoothing threshold."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 20_000, rng=7)
    w, policy, gen = wl.identity(k), policies.unbounded(k), np.random.default_rng(8)
    mechanism = Adaptive(budget=0)
    auto = mechanism.candidates(w, policy)[1]
    best, cells = plan_routes(w, policy, 1.0, auto).chosen, plan_routes(w, policy, 1.0, Identity()).chosen
    assert isinstance(best.mechanism, Identity) and cells.expected_mse == best.expected_mse
    checks = _checked(monkeypatch, "plain", cost=SMOOTHING_COST * (0.5 if smoothed else 1.0))
    plans, plains = _planned(monkeypatch), _released(monkeypatch)
    release = mechanism.release(w, x, epsilon, gen, policy=policy)
    (check,) = checks
    spent = check.decision.spent
    assert spent > 0
    (plain,) = plains
    notes = _forced_notes(mechanism, check, w, policy, epsilon)
    assert plain.workload is w and plain.policy is policy and plain.gen is gen and np.array_equal(plain.x, x)
    assert plain.epsilon == pytest.approx(epsilon - spent, rel=1e-12) and plain.notes == notes
    assert plain.features is check.features  # their noisy record total, for the smoothed sums
    assert [(p[0], p[1], p[2]) for p in plans[:1]] == [(w, policy, 1.0)] and plans[0][3] is auto
    assert plain.smoothed is smoothed and isinstance(plain.estimator, Identity) and plain.chosen == cells
    if smoothed:
        assert release.notes == f"{notes}; cells smoothed (post-processing); ran identity ({cells.route})"
    else:
        assert release.notes == f"{notes}; ran identity ({cells.route})"


def test_dawa_smoothing_keeps_a_strategy_much_better_than_laplace_on_the_cells(monkeypatch):
    """Prefix sums under unbounded DP sent to a plain release that would be smoothed: auto's
    strategy is several times better than Identity, so it runs (unsmoothed: only Identity's cells
    can be)."""
    k, epsilon = 256, 0.2
    x = datasets.synthetic(k, 3000, rng=8)
    w, policy = wl.prefix(k), policies.unbounded(k)
    checks = _checked(monkeypatch, "plain", cost=0.1)
    plains = _released(monkeypatch, stub=True)
    mechanism = Adaptive(budget=0)
    mechanism.release(w, x, epsilon, np.random.default_rng(9), policy=policy)
    auto = mechanism.candidates(w, policy)[1]
    best = plan_routes(w, policy, 1.0, auto).chosen
    cells = plan_routes(w, policy, 1.0, Identity()).chosen
    assert not isinstance(best.mechanism, Identity) and cells.expected_mse > 2.5 * best.expected_mse
    (plain,) = plains
    assert plain.smoothed is True and plain.chosen.expected_mse == best.expected_mse and plain.estimator is plain.chosen.mechanism
    assert plain.notes == _forced_notes(mechanism, checks[0], w, policy, epsilon)
    assert "; predicted RMSE per query: dawa " in plain.notes  # prefix sums: against the analytic plain error


@pytest.mark.parametrize("factor, identity", [(1.0, True), (1 + 1e-9, True), (1 + 3e-9, False), (1.5, False), (3.0, False)])
def test_the_tie_tolerance_of_laplace_on_the_cells(factor, identity, monkeypatch):
    """Identity replaces auto's choice when its analytic error is at most (1 + 1e-9) times it."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 20_000, rng=9)
    w, policy = wl.identity(k), policies.line(k)
    mechanism = Adaptive(budget=0)
    auto = mechanism.candidates(w, policy)[1]
    real = routes.plan_routes
    best = real(w, policy, 1.0, auto).chosen
    assert not isinstance(best.mechanism, Identity)

    def plan(workload, pol, eps, mech, *args):
        found = real(workload, pol, eps, mech, *args)
        if isinstance(mech, Identity):
            return SimpleNamespace(chosen=replace(found.chosen, expected_mse=best.expected_mse * factor))
        return found

    monkeypatch.setattr(routes, "plan_routes", plan)
    _checked(monkeypatch, "plain", cost=0.1)
    plains = _released(monkeypatch, stub=True)
    mechanism.release(w, x, epsilon, np.random.default_rng(12), policy=policy)
    (plain,) = plains
    assert isinstance(plain.estimator, Identity) is identity and plain.smoothed is True
    assert plain.chosen.expected_mse == (best.expected_mse * factor if identity else best.expected_mse)
    assert plain.estimator is plain.chosen.mechanism


def test_only_histogram_like_workloads_of_partition_then_transform_are_smoothed(monkeypatch):
    """Prefix sums under threshold:4 (partitioned, not histogram-like): a plain release with a
    low noisy cost stays unsmoothed."""
    k, epsilon = 256, 0.5
    x = datasets.synthetic(k, 5000, rng=10)
    w, policy = wl.prefix(k), policies.threshold(k, 4)
    assert not PartitionThenTransform().smooths(w)
    checks = _checked(monkeypatch, "plain", cost=0.1)
    plains = _released(monkeypatch, stub=True)
    mechanism = Adaptive(budget=0)
    mechanism.release(w, x, epsilon, np.random.default_rng(13), policy=policy)
    (plain,) = plains
    assert plain.smoothed is False and plain.notes == _forced_notes(mechanism, checks[0], w, policy, epsilon)
    assert plain.epsilon == pytest.approx(epsilon - checks[0].decision.spent, rel=1e-12)


def test_the_real_check_decides_and_its_reason_is_in_the_notes(monkeypatch):
    """Without forcing: the notes carry the features and the model's own reason, and each route
    runs what it says."""
    k, epsilon = 1024, 0.5  # the features' noise is about 0.1 of their units from K = 1024 on
    w, policy = wl.prefix(k), policies.unbounded(k)
    checks = _checked(monkeypatch)
    empty = np.zeros(k, dtype=np.int64)
    sparse = Adaptive(budget=0).release(w, empty, epsilon, np.random.default_rng(5), policy=policy)
    decision = checks[-1].decision
    assert decision.route == "partition" and decision.reason.startswith("partition: dawa's 1-D ranges model predicts")
    mechanism = Adaptive(budget=0)
    predicted = mechanism._predicted_errors(w, policy, decision.features, mechanism.candidates(w, policy)[0],
                                            epsilon - decision.spent)
    assert sparse.notes == f"{_head(decision)}; {predicted}; ran dawa"
    dense = np.random.default_rng(0).integers(0, 2 * 10**6, k)  # no two neighbours alike: no bucket pays
    plain = Adaptive(budget=0).release(w, dense, epsilon, np.random.default_rng(0), policy=policy)
    decision = checks[-1].decision
    assert decision.route == "plain" and decision.reason.startswith("plain release: dawa's 1-D ranges model predicts")
    assert plain.notes.startswith(_head(decision))


def test_the_choice_lists_each_candidates_predicted_rmse_against_the_analytic_plain_error():
    """On a grid's rectangles every candidate's least-squares ratio times the plain release's
    analytic RMSE at the rest of ε, in the candidates' order; on histograms only the ratios (the
    plain release is smoothed, its error unknown before the release)."""
    shape, rest = (16, 16), 0.37
    w, policy = wl.prefix(shape), policies.unbounded(shape)
    x = datasets.synthetic_2d(shape, 4000, rng=3).ravel()
    mechanism = Adaptive(budget=0)
    dependents = mechanism.candidates(w, policy)[0]
    assert [m.name for m in dependents] == ["dawa", "agrid", "privtree"]
    features = measure(x, 1.0, np.random.default_rng(0))
    plain = math.sqrt(best_plan_under(w, policy, mechanism.candidates(w, policy)[1])[1].expected_mse) / rest
    listed = ", ".join(f"{m.name} {error_model(m.name, 2, 'ranges', calibrated=True).predict(features) * plain:.4g}"
                       for m in dependents)
    assert mechanism._predicted_errors(w, policy, features, dependents, rest) == \
        f"predicted RMSE per query: {listed}, plain release {plain:.4g} (analytic)"
    cells = wl.identity(shape)
    ratio = error_model("dawa", 2, "cells", calibrated=True).predict(features)
    assert mechanism._predicted_errors(cells, policy, features, mechanism.candidates(cells, policy)[0], rest) == \
        f"predicted error ratio to the plain release: dawa {ratio:.3g} ×"


class _Declared(Mechanism, register=False):
    """A plug-in that declares its error model: a constant predicted ratio (none without one), and
    answers every query with 7 while recording the ε it was given."""

    name = "declared_plugin"
    predicts_error = True

    def __init__(self, ratio: float | None = 1e-6, select: bool = True):
        self.ratio = ratio
        self.select = select

    def model(self, workload, calibrated=False):
        if self.ratio is None:
            return None
        return ErrorModel("declared", (math.log10(self.ratio),) + (0.0,) * 7)

    def measure(self, workload, x, epsilon, gen, policy=None):
        _Declared.given = (epsilon, self.select)
        return Outcome(np.full(workload.num_queries, 7.0))


@pytest.mark.parametrize("shape", [(256,), (16, 16)], ids=["1d", "2d"])
def test_a_plugin_that_declares_its_error_model_is_offered_and_chosen_on_ranges(shape, monkeypatch):
    """A registered mechanism that predicts its error and runs on the cells is offered beside the
    library's candidates on range workloads (in name order, unchecked), read with the same
    features, and run at ε less their spend when its prediction is the lowest and below 1."""
    monkeypatch.setitem(MECHANISMS, _Declared.name, _Declared)
    monkeypatch.setattr(adaptive, "load_plugins", lambda: None)
    w, policy = wl.prefix(shape), policies.unbounded(shape)
    x = datasets.synthetic(256, 3000, rng=1) if len(shape) == 1 else datasets.synthetic_2d(shape, 3000, rng=1).ravel()
    mechanism = Adaptive(budget=0)
    names = [m.name for m in mechanism.candidates(w, policy)[0]]
    assert names == (["dawa", "declared_plugin"] if len(shape) == 1 else ["dawa", "agrid", "declared_plugin", "privtree"])
    release = mechanism.release(w, x, 0.5, np.random.default_rng(2), policy=policy)
    assert np.array_equal(release.answers, np.full(w.num_queries, 7.0))
    assert release.notes.endswith("; ran declared_plugin")
    features = measure(x, 0.5, np.random.default_rng(2))
    assert _Declared.given == (pytest.approx(0.5 - features.spent), False)
    # histograms keep DAWA alone (its prediction is against the smoothed counts)
    assert [m.name for m in mechanism.candidates(wl.identity(shape), policy)[0]] == ["dawa"]


def test_a_plugin_without_a_model_for_the_workload_is_not_offered(monkeypatch):
    class _NoModel(_Declared, register=False):
        name = "no_model_plugin"

        def __init__(self, ratio: float | None = None, select: bool = True):
            super().__init__(ratio, select)

    monkeypatch.setitem(MECHANISMS, _NoModel.name, _NoModel)
    monkeypatch.setattr(adaptive, "load_plugins", lambda: None)
    assert [m.name for m in Adaptive().candidates(wl.prefix(256), policies.unbounded((256,)))[0]] == ["dawa"]


def test_mechanisms_measured_to_hurt_the_choice_are_not_offered():
    """PrivTree on 1-D prefixes and UGrid on rectangles predict their error but are not offered
    (the measurements are in ``NOT_OFFERED``); a mechanism without a check cannot run unchecked."""
    mechanism = Adaptive(budget=0)
    assert ("privtree", 1) in adaptive.NOT_OFFERED and ("ugrid", 2) in adaptive.NOT_OFFERED
    assert [m.name for m in mechanism.candidates(wl.prefix(256), policies.unbounded((256,)))[0]] == ["dawa"]
    names = [m.name for m in mechanism.candidates(wl.dpbench_ranges((32, 32), 200, rng=0), policies.unbounded((32, 32)))[0]]
    assert "ugrid" not in names and "privtree" in names
    assert UGrid().unchecked().select is False and UGrid(c=5.0).unchecked().c == 5.0
    with pytest.raises(TypeError, match="identity has no private check to leave out"):
        Identity().unchecked()
