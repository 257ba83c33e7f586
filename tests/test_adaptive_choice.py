"""How ``adaptive`` makes its private choice and what each branch is given (Pythia: Kotsogiannis,
Machanavajjhala, Hay, Miklau, SIGMOD 2017; the data-dependent candidate DAWA: Li, Hay, Miklau,
Wang, PVLDB 2014): the candidates per policy, the features' arguments, the ε every stage
receives, the smoothing decision and the notes. Small domains and ``budget=0``: the stages are
recorded by wrapping the functions ``adaptive`` looks up, so no test depends on accuracy."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import blowfish_te.mechanisms.adaptive as adaptive
from blowfish_te import datasets, policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import DAWA, Adaptive, Auto, PartitionThenTransform
from blowfish_te.mechanisms.datadependent import RANGES_EXCESS, RANGES_FIT
from blowfish_te.mechanisms.laplace import Identity
from blowfish_te.routes import Outcome, plan_routes
from blowfish_te.selection import HISTOGRAMS, RANGES, Decision


def _checked(monkeypatch, name, route=None):
    """Wrap ``adaptive.<name>`` (choose or choose_for_ranges): record every call and its real
    decision; return that decision, or one with its features and spend but ``route``."""
    real, calls = getattr(adaptive, name), []

    def check(cells, epsilon, gen, **kwargs):
        decision = real(cells, epsilon, gen, **kwargs)
        calls.append(SimpleNamespace(cells=np.array(cells), epsilon=epsilon, gen=gen, kwargs=kwargs, decision=decision))
        return decision if route is None else Decision(route, "forced", decision.features)

    monkeypatch.setattr(adaptive, name, check)
    return calls


def _never(monkeypatch, name):
    def fail(*args, **kwargs):
        raise AssertionError(f"{name} was called")

    monkeypatch.setattr(adaptive, name, fail)


def _released(monkeypatch, stub=False):
    """Record the arguments of every ``plain_release``; run it, or return a stub Outcome."""
    real, calls = adaptive.plain_release, []

    def plain(workload, x, policy, epsilon, gen, estimator, chosen, smoothed, notes):
        calls.append(SimpleNamespace(workload=workload, x=np.array(x), policy=policy, epsilon=epsilon, gen=gen,
                                     estimator=estimator, chosen=chosen, smoothed=smoothed, notes=notes))
        if stub:
            return Outcome(np.zeros(workload.shape[0]), notes=notes)
        return real(workload, x, policy, epsilon, gen, estimator, chosen, smoothed, notes)

    monkeypatch.setattr(adaptive, "plain_release", plain)
    return calls


def _planned(monkeypatch):
    """Record (workload, policy, ε, mechanism) of every ``plan_routes`` call."""
    real, calls = adaptive.plan_routes, []

    def plan(workload, policy, epsilon, mechanism, *args):
        calls.append((workload, policy, epsilon, mechanism))
        return real(workload, policy, epsilon, mechanism, *args)

    monkeypatch.setattr(adaptive, "plan_routes", plan)
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
    dawa, auto = mechanism.candidates(wl.identity(16), policies.unbounded(16))
    assert type(dawa) is DAWA and dawa.select is False
    assert type(auto) is Auto and auto.budget == 1.5
    assert mechanism.candidates(wl.identity((4, 4)), policies.unbounded((4, 4))) == (dawa, auto)
    assert mechanism.candidates(wl.identity((4, 4)), policies.unbounded((4, 4)))[0] is dawa
    ptt, same = mechanism.candidates(wl.identity(16), policies.line(16))
    assert type(ptt) is PartitionThenTransform and ptt.select is False and same is auto
    assert mechanism.candidates(wl.identity(16), policies.threshold(16, 2))[0] is ptt
    assert mechanism.candidates(wl.identity((4, 4)), policies.grid((4, 4)))[0] is ptt
    assert mechanism.candidates(wl.identity((2, 2, 2)), policies.unbounded((2, 2, 2)))[0] is ptt
    again = mechanism.candidates(wl.prefix(16), policies.unbounded(16))
    assert again[0] is dawa and again[1] is auto
    assert Adaptive(budget=0).candidates(wl.identity(4), policies.line(4))[1].budget == 0.0


# -- the data-dependent candidate chosen ----------------------------------------------------------


def test_dawa_partition_gets_its_split_of_the_rest_of_epsilon(monkeypatch):
    """A histogram under unbounded DP: the histogram rule on the cells, features calibrated to
    one record added or removed, no public total; DAWA's partition at ratio·rest and its totals
    at (1 - ratio)·rest, with the caller's generator; answers cast to float64."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 1000, rng=0)
    w, policy, gen = wl.identity(k), policies.unbounded(k), np.random.default_rng(0)
    checks = _checked(monkeypatch, "choose", "partition")
    _never(monkeypatch, "choose_for_ranges")
    _never(monkeypatch, "plain_release")
    stages = []

    def partitioned(self, workload, cells, eps1, eps2, stream):
        stages.append(SimpleNamespace(mech=self, workload=workload, x=np.array(cells), eps1=eps1, eps2=eps2, gen=stream))
        return np.arange(workload.shape[0])  # integers: the release casts them

    monkeypatch.setattr(DAWA, "partitioned", partitioned)
    mechanism = Adaptive(budget=0)
    release = mechanism.release_native(w, x, policy, epsilon, gen)
    (check,) = checks
    assert np.array_equal(check.cells, x) and check.epsilon == epsilon and check.gen is gen
    assert check.kwargs == {"total": None, "record_moves": 1, "rule": HISTOGRAMS}
    spent = check.decision.spent
    assert spent > 0
    (stage,) = stages
    rest = epsilon - spent
    assert stage.mech is mechanism.candidates(w, policy)[0] and stage.workload is w and stage.gen is gen
    assert np.array_equal(stage.x, x)
    assert stage.eps1 == pytest.approx(0.25 * rest, rel=1e-12) and stage.eps2 == pytest.approx(0.75 * rest, rel=1e-12)
    assert stage.eps1 + stage.eps2 + spent == pytest.approx(epsilon, rel=1e-12)
    assert release.answers.dtype == np.float64 and np.array_equal(release.answers, np.arange(k))
    assert release.notes == f"adaptive: {check.decision.features.describe()}; forced; ran dawa"


def test_dawa_partition_is_dawa_without_its_check_at_the_rest(monkeypatch):
    """The features draw from a child stream: release for release, DAWA(select=False) at ε less
    the features' spend with the same seed."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 2000, rng=1)
    w, policy = wl.identity(k), policies.unbounded(k)
    checks = _checked(monkeypatch, "choose", "partition")
    release = Adaptive(budget=0).release_native(w, x, policy, epsilon, np.random.default_rng(7))
    rest = epsilon - checks[0].decision.spent
    assert np.array_equal(release.answers, DAWA(select=False).run(w, x, rest, rng=7))
    assert release.notes.endswith("; forced; ran dawa")


def test_dawa_on_ranges_over_a_line_uses_the_ranges_rule_and_the_workloads_split(monkeypatch):
    """Prefix sums over 256 cells: DAWA's ratio is 0.25/√gain (not 0.25), and the rule is the one
    for ranges."""
    k, epsilon = 256, 0.2
    x = datasets.synthetic(k, 3000, rng=2)
    w, policy, gen = wl.prefix(k), policies.unbounded(k), np.random.default_rng(1)
    ratio, penalty = DAWA(select=False).split(w)
    assert 0 < ratio < 0.2 and penalty > 1.2  # far from each other and from the histogram's (0.25, 1)
    checks = _checked(monkeypatch, "choose", "partition")
    stages = []
    real = DAWA.partitioned

    def partitioned(self, workload, cells, eps1, eps2, stream):
        stages.append((eps1, eps2))
        return real(self, workload, cells, eps1, eps2, stream)

    monkeypatch.setattr(DAWA, "partitioned", partitioned)
    release = Adaptive(budget=0).release_native(w, x, policy, epsilon, gen)
    (check,) = checks
    assert check.kwargs == {"total": None, "record_moves": 1, "rule": RANGES}
    rest = epsilon - check.decision.spent
    assert check.decision.spent > 0
    assert stages == [(pytest.approx(ratio * rest, rel=1e-12), pytest.approx((1 - ratio) * rest, rel=1e-12))]
    assert release.answers.shape == (k,) and release.notes.endswith("; forced; ran dawa")


def test_a_histogram_on_a_grid_is_checked_along_dawas_layout(monkeypatch):
    shape, epsilon = (8, 8), 0.5
    x = datasets.synthetic_2d(shape, 5000, rng=1).ravel()
    w, policy, gen = wl.identity(shape), policies.unbounded(shape), np.random.default_rng(2)
    checks = _checked(monkeypatch, "choose", "plain")
    _never(monkeypatch, "choose_for_ranges")
    layout = DAWA(select=False).layout(shape)
    assert not np.array_equal(layout, np.arange(x.size))
    release = Adaptive(budget=0).release_native(w, x, policy, epsilon, gen)
    (check,) = checks
    assert np.array_equal(check.cells, x[layout]) and check.epsilon == epsilon and check.gen is gen
    assert check.kwargs == {"total": None, "record_moves": 1, "rule": HISTOGRAMS}
    assert release.notes.startswith(f"adaptive: {check.decision.features.describe()}; forced; ran ")


def test_rectangles_on_a_grid_take_the_ranges_check_along_the_layout(monkeypatch):
    """Prefix rectangles on a 16 × 16 grid under unbounded DP: choose_for_ranges with DAWA's
    thresholds for rectangles, on the cells in Hilbert order; the partition then runs at the
    workload's split of the rest."""
    shape, epsilon = (16, 16), 0.5
    x = datasets.synthetic_2d(shape, 20_000, rng=3).ravel()
    w, policy, gen = wl.prefix(shape), policies.unbounded(shape), np.random.default_rng(3)
    dawa = DAWA(select=False)
    assert dawa.selection_rule(w) == "ranges"
    checks = _checked(monkeypatch, "choose_for_ranges", "partition")
    _never(monkeypatch, "choose")
    stages = []
    real = DAWA.partitioned

    def partitioned(self, workload, cells, eps1, eps2, stream):
        stages.append((np.array(cells), eps1, eps2, stream))
        return real(self, workload, cells, eps1, eps2, stream)

    monkeypatch.setattr(DAWA, "partitioned", partitioned)
    release = Adaptive(budget=0).release_native(w, x, policy, epsilon, gen)
    (check,) = checks
    assert np.array_equal(check.cells, x[dawa.layout(shape)]) and check.epsilon == epsilon and check.gen is gen
    assert check.kwargs == {"fit_max": RANGES_FIT, "excess_max": RANGES_EXCESS, "total": None}
    spent = check.decision.spent
    rest, ratio = epsilon - spent, dawa.split(w)[0]
    assert spent > 0
    ((cells, eps1, eps2, stream),) = stages
    assert np.array_equal(cells, x) and stream is gen  # DAWA lays the grid out itself
    assert eps1 == pytest.approx(ratio * rest, rel=1e-12) and eps2 == pytest.approx((1 - ratio) * rest, rel=1e-12)
    assert release.notes == f"adaptive: {check.decision.features.describe()}; forced; ran dawa"


def test_partition_then_transform_gets_the_rest_and_its_share_of_it(monkeypatch):
    """Under line: the histogram rule on the cells in their own order, the total public, the
    features calibrated to a moved record (sensitivity 2); the partition at split·rest inside a
    release at rest, given the notes, which are extended by what ran."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 1000, rng=4)
    w, policy, gen = wl.identity(k), policies.line(k), np.random.default_rng(4)
    checks = _checked(monkeypatch, "choose", "partition")
    _never(monkeypatch, "plain_release")
    stages = []
    real = PartitionThenTransform.partitioned

    def partitioned(self, workload, cells, pol, eps, eps1, stream, notes):
        inner = real(self, workload, cells, pol, eps, eps1, stream, notes)
        stages.append(SimpleNamespace(workload=workload, x=np.array(cells), policy=pol, eps=eps, eps1=eps1, gen=stream,
                                      notes=notes, inner=inner))
        return inner

    monkeypatch.setattr(PartitionThenTransform, "partitioned", partitioned)
    release = Adaptive(budget=0).release_native(w, x, policy, epsilon, gen)
    (check,) = checks
    assert np.array_equal(check.cells, x) and check.epsilon == epsilon and check.gen is gen
    assert check.kwargs == {"total": int(x.sum()), "record_moves": 2, "rule": HISTOGRAMS}
    spent = check.decision.spent
    assert spent > 0
    (stage,) = stages
    assert stage.workload is w and stage.policy is policy and stage.gen is gen and np.array_equal(stage.x, x)
    assert stage.eps == pytest.approx(epsilon - spent, rel=1e-12)
    assert stage.eps1 == pytest.approx(0.25 * (epsilon - spent), rel=1e-12)
    notes = f"adaptive: {check.decision.features.describe()}; forced"
    assert stage.notes == notes
    assert release.notes == notes + "; ran partition_then_transform"
    assert np.array_equal(release.answers, stage.inner.answers)
    assert release.component_totals == stage.inner.component_totals and release.noise_scale == stage.inner.noise_scale


def test_partition_then_transform_partition_is_the_unchecked_release_at_the_rest(monkeypatch):
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 1000, rng=5)
    w, policy = wl.identity(k), policies.line(k)
    checks = _checked(monkeypatch, "choose", "partition")
    release = Adaptive(budget=0).release_native(w, x, policy, epsilon, np.random.default_rng(11))
    rest = epsilon - checks[0].decision.spent
    plain = PartitionThenTransform(select=False).release_native(w, x, policy, rest, np.random.default_rng(11))
    assert np.array_equal(release.answers, plain.answers)


def test_ranges_under_other_policies_keep_the_histogram_rule(monkeypatch):
    """Partition-then-transform has one check for every workload it partitions (prefix sums
    under threshold:4 included): the histogram rule, on the cells in their own order."""
    k, epsilon = 256, 0.5
    x = datasets.synthetic(k, 5000, rng=6)
    w, policy = wl.prefix(k), policies.threshold(k, 4)
    checks = _checked(monkeypatch, "choose", "plain")
    plains = _released(monkeypatch, stub=True)
    Adaptive(budget=0).release_native(w, x, policy, epsilon, np.random.default_rng(5))
    (check,) = checks
    assert np.array_equal(check.cells, x)
    assert check.kwargs == {"total": int(x.sum()), "record_moves": 2, "rule": HISTOGRAMS}
    assert plains[0].smoothed is False and plains[0].epsilon == pytest.approx(epsilon - check.decision.spent, rel=1e-12)


# -- no partition: the plain release ----------------------------------------------------------------


def test_a_workload_the_partition_cannot_help_is_planned_and_run_at_all_of_epsilon(monkeypatch):
    """Prefix sums under line: partition-then-transform would not partition (split 0), so no
    feature is measured and the data-independent candidate gets all of ε, unsmoothed."""
    k, epsilon = 64, 0.3
    x = datasets.synthetic(k, 5000, rng=0)
    w, policy, gen = wl.prefix(k), policies.line(k), np.random.default_rng(6)
    _never(monkeypatch, "choose")
    _never(monkeypatch, "choose_for_ranges")
    plans, plains = _planned(monkeypatch), _released(monkeypatch)
    mechanism = Adaptive(budget=0)
    release = mechanism.release_native(w, x, policy, epsilon, gen)
    auto = mechanism.candidates(w, policy)[1]
    assert plans == [(w, policy, epsilon, auto)]
    chosen = plan_routes(w, policy, epsilon, auto).chosen
    (plain,) = plains
    notes = "adaptive: partition_then_transform would not partition prefix(64) under line(64), so it is the plain release"
    assert plain.workload is w and plain.policy is policy and plain.gen is gen and np.array_equal(plain.x, x)
    assert plain.epsilon == epsilon and plain.smoothed is False and plain.notes == notes
    assert plain.chosen == chosen and plain.estimator is chosen.mechanism and plain.estimator is not None
    assert release.notes == f"{notes}; ran {chosen.mechanism.name} ({chosen.route})"
    assert release.answers.shape == (k,)


@pytest.mark.parametrize("route", ["plain", "smooth"])
def test_dawa_plain_release_at_the_rest(route, monkeypatch):
    """A histogram under unbounded DP the check sends to the plain release: planned at ε, run
    at ε less the features' spend, smoothed when the check says so (DAWA's histograms always
    may be). Auto's best (GreedyH) ties Laplace on the cells: the smoothed release runs Identity."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 20_000, rng=7)
    w, policy, gen = wl.identity(k), policies.unbounded(k), np.random.default_rng(8)
    mechanism = Adaptive(budget=0)
    auto = mechanism.candidates(w, policy)[1]
    best, cells = plan_routes(w, policy, epsilon, auto).chosen, plan_routes(w, policy, epsilon, Identity()).chosen
    assert not isinstance(best.mechanism, Identity) and cells.expected_mse == best.expected_mse
    checks = _checked(monkeypatch, "choose", route)
    plans, plains = _planned(monkeypatch), _released(monkeypatch)
    release = mechanism.release_native(w, x, policy, epsilon, gen)
    (check,) = checks
    spent = check.decision.spent
    assert spent > 0
    (plain,) = plains
    notes = f"adaptive: {check.decision.features.describe()}; forced"
    assert plain.workload is w and plain.policy is policy and plain.gen is gen and np.array_equal(plain.x, x)
    assert plain.epsilon == pytest.approx(epsilon - spent, rel=1e-12) and plain.notes == notes
    if route == "smooth":
        assert [(p[0], p[1], p[2], type(p[3])) for p in plans] == [(w, policy, epsilon, Auto), (w, policy, epsilon, Identity)]
        assert plans[0][3] is auto
        assert plain.smoothed is True and isinstance(plain.estimator, Identity) and plain.chosen == cells
        assert release.notes == f"{notes}; cells smoothed (post-processing); ran identity ({cells.route})"
    else:
        assert plans == [(w, policy, epsilon, auto)]
        assert plain.smoothed is False and plain.estimator is best.mechanism and plain.chosen == best
        assert release.notes == f"{notes}; ran {best.mechanism.name} ({best.route})"


def test_dawa_smoothing_keeps_a_strategy_much_better_than_laplace_on_the_cells(monkeypatch):
    """Prefix sums under unbounded DP sent to the smoothed release: auto's hierarchy is several
    times better than Identity, so it runs (unsmoothed, as only Identity's cells can be)."""
    k, epsilon = 256, 0.2
    x = datasets.synthetic(k, 3000, rng=8)
    w, policy = wl.prefix(k), policies.unbounded(k)
    checks = _checked(monkeypatch, "choose", "smooth")
    plans, plains = _planned(monkeypatch), _released(monkeypatch, stub=True)
    mechanism = Adaptive(budget=0)
    mechanism.release_native(w, x, policy, epsilon, np.random.default_rng(9))
    auto = mechanism.candidates(w, policy)[1]
    best = plan_routes(w, policy, epsilon, auto).chosen
    cells = plan_routes(w, policy, epsilon, Identity()).chosen
    assert not isinstance(best.mechanism, Identity) and cells.expected_mse > 2.5 * best.expected_mse
    assert [(p[2], type(p[3])) for p in plans] == [(epsilon, Auto), (epsilon, Identity)]
    assert all(p[0] is w and p[1] is policy for p in plans)
    (plain,) = plains
    assert plain.smoothed is True and plain.chosen == best and plain.estimator is best.mechanism
    assert plain.notes == f"adaptive: {checks[0].decision.features.describe()}; forced"


def test_a_smoothed_release_runs_laplace_on_the_cells_when_it_ties(monkeypatch):
    """A histogram under line: the ordered hierarchy and Identity tie; a release to be smoothed
    runs Identity (its cells are what smoothing reads), one that is not keeps auto's choice."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 20_000, rng=9)
    w, policy = wl.identity(k), policies.line(k)
    mechanism = Adaptive(budget=0)
    auto = mechanism.candidates(w, policy)[1]
    best = plan_routes(w, policy, epsilon, auto).chosen
    cells = plan_routes(w, policy, epsilon, Identity()).chosen
    assert not isinstance(best.mechanism, Identity) and cells.expected_mse == pytest.approx(best.expected_mse, rel=1e-12)
    checks = _checked(monkeypatch, "choose", "smooth")
    plains = _released(monkeypatch)
    smoothed = mechanism.release_native(w, x, policy, epsilon, np.random.default_rng(10))
    assert plains[0].smoothed is True and isinstance(plains[0].estimator, Identity) and plains[0].chosen == cells
    assert plains[0].epsilon == pytest.approx(epsilon - checks[0].decision.spent, rel=1e-12)
    notes = f"adaptive: {checks[0].decision.features.describe()}; forced"
    assert smoothed.notes == f"{notes}; cells smoothed (post-processing); ran identity ({cells.route})"
    checks = _checked(monkeypatch, "choose", "plain")
    plains = _released(monkeypatch)
    plain = mechanism.release_native(w, x, policy, epsilon, np.random.default_rng(10))
    assert plains[0].smoothed is False and plains[0].estimator is best.mechanism and plains[0].chosen == best
    notes = f"adaptive: {checks[0].decision.features.describe()}; forced"
    assert plain.notes == f"{notes}; ran {best.mechanism.name} ({best.route})"


@pytest.mark.parametrize("factor, identity", [(1.0, True), (1 + 1e-9, True), (1 + 3e-9, False), (1.5, False), (3.0, False)])
def test_the_tie_tolerance_of_laplace_on_the_cells(factor, identity, monkeypatch):
    """Identity replaces auto's choice when its analytic error is at most (1 + 1e-9) times it."""
    k, epsilon = 64, 0.5
    x = datasets.synthetic(k, 20_000, rng=9)
    w, policy = wl.identity(k), policies.line(k)
    mechanism = Adaptive(budget=0)
    auto = mechanism.candidates(w, policy)[1]
    real = adaptive.plan_routes
    best = real(w, policy, epsilon, auto).chosen
    assert not isinstance(best.mechanism, Identity)

    def plan(workload, pol, eps, mech, *args):
        found = real(workload, pol, eps, mech, *args)
        if isinstance(mech, Identity):
            return SimpleNamespace(chosen=replace(found.chosen, expected_mse=best.expected_mse * factor))
        return found

    monkeypatch.setattr(adaptive, "plan_routes", plan)
    _checked(monkeypatch, "choose", "smooth")
    plains = _released(monkeypatch, stub=True)
    mechanism.release_native(w, x, policy, epsilon, np.random.default_rng(12))
    (plain,) = plains
    assert isinstance(plain.estimator, Identity) is identity and plain.smoothed is True
    assert plain.chosen.expected_mse == (best.expected_mse * factor if identity else best.expected_mse)
    assert plain.estimator is plain.chosen.mechanism


def test_only_histogram_like_workloads_of_partition_then_transform_are_smoothed(monkeypatch):
    """Prefix sums under threshold:4 (partitioned, not histogram-like): a check that would smooth
    gives the plain release unsmoothed, and says why."""
    k, epsilon = 256, 0.5
    x = datasets.synthetic(k, 5000, rng=10)
    w, policy = wl.prefix(k), policies.threshold(k, 4)
    assert not PartitionThenTransform().smooths(w)
    checks = _checked(monkeypatch, "choose", "smooth")
    plains = _released(monkeypatch, stub=True)
    mechanism = Adaptive(budget=0)
    mechanism.release_native(w, x, policy, epsilon, np.random.default_rng(13))
    (plain,) = plains
    head = f"adaptive: {checks[0].decision.features.describe()}; forced"
    assert plain.smoothed is False and plain.notes == head + "; not smoothed: prefix(256) is not histogram-like"
    assert plain.epsilon == pytest.approx(epsilon - checks[0].decision.spent, rel=1e-12)
    assert plain.chosen == plan_routes(w, policy, epsilon, mechanism.candidates(w, policy)[1]).chosen


def test_the_real_check_decides_and_its_reason_is_in_the_notes(monkeypatch):
    """Without forcing: the notes carry the features and the check's own reason, and each route
    runs what it says (seeds picked for each route of the check)."""
    k, epsilon = 64, 0.5
    w, policy = wl.identity(k), policies.unbounded(k)
    checks = _checked(monkeypatch, "choose")
    empty = np.zeros(k, dtype=np.int64)
    sparse = Adaptive(budget=0).release_native(w, empty, policy, epsilon, np.random.default_rng(5))
    decision = checks[-1].decision
    assert decision.route == "partition" and decision.reason.startswith("partition: N·ε/K")
    assert sparse.notes == f"{_head(decision)}; ran dawa"
    smooth = Adaptive(budget=0).release_native(w, empty, policy, epsilon, np.random.default_rng(0))
    decision = checks[-1].decision
    assert decision.route == "smooth"
    assert smooth.notes == f"{_head(decision)}; cells smoothed (post-processing); ran identity (exact)"
