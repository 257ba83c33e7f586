"""The ``auto`` mechanism: which candidates it compares (large domains, the optimiser's and the
self-tuning candidate's time budget), which one it picks (the lowest analytic expected error) and
that its release is exactly the chosen mechanism's."""

import re

import numpy as np
import pytest

from blowfish_te import policies, trees
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import Auto, Optimized, TunedOrderedHierarchical, get_mechanism
from blowfish_te.mechanisms.auto import analytic_mechanisms
from blowfish_te.mechanisms.base import _DEFAULTS, MECHANISMS, LinearMechanism, Mechanism, NativeMechanism
from blowfish_te.routes import LARGE_DOMAIN_CELLS, STRUCTURED_CELLS, Outcome, plan_routes

EPSILON = 0.7
TUNED = "ordered_hierarchical_tuned"


def _optimizer_predicts(monkeypatch, exact, per_tree=0.0):
    """Make the optimiser predict ``exact`` seconds for the exact route and ``per_tree`` seconds per
    transform; returns the list of calls made to the two predictions."""
    calls = []

    def seconds(self, workload, policy=None):
        calls.append(("exact", workload, policy))
        return exact

    def transform(self, cells):
        calls.append(("transform", cells))
        return per_tree

    monkeypatch.setattr(Optimized, "predicted_seconds", seconds)
    monkeypatch.setattr(Optimized, "predicted_transform_seconds", transform)
    return calls


def _tree_count(monkeypatch, count):
    """Make ``trees.candidates`` return ``count`` trees; returns the policies it was asked about."""
    asked = []

    def candidates(policy):
        asked.append(policy)
        return {f"tree{i}": policy for i in range(count)}

    monkeypatch.setattr(trees, "candidates", candidates)
    return asked


def _tuned_predicts(monkeypatch, value):
    asked = []

    def seconds(self, workload, policy):
        asked.append((workload, policy))
        return value

    monkeypatch.setattr(TunedOrderedHierarchical, "predicted_seconds", seconds)
    return asked


def _stub(monkeypatch, label, error=None, raises=None, answer=0.0):
    """Register a mechanism ``label`` whose expected error is ``error`` (or which raises ``raises``)
    and whose release is ``answer`` in every query."""

    class Stub(Mechanism, register=False):
        name = label
        analytic_error = True

        def run(self, workload, x, epsilon, rng=None):
            return np.full(workload.num_queries, answer)

        def expected_error(self, workload, epsilon):
            if raises is not None:
                raise raises(f"{label} cannot")
            return error

    monkeypatch.setitem(MECHANISMS, label, Stub)
    monkeypatch.setitem(_DEFAULTS, label, Stub())
    return Stub


def _pairs(pairs):
    return [(mech.name, route) for mech, route in pairs]


# --- analytic_mechanisms ------------------------------------------------------------------------


def test_analytic_mechanisms_are_the_registered_ones_with_an_analytic_error(monkeypatch):
    class AnalyticLinear(LinearMechanism, register=False):
        name = "aaa_linear_stub"

        def strategy(self, workload):
            return workload

    class NativeWithError(NativeMechanism, register=False):
        name = "native_with_error_stub"

        def measure(self, workload, x, epsilon, gen, policy=None):
            return Outcome(np.zeros(workload.num_queries))

        def expected_error(self, workload, epsilon, policy=None):
            return 1.0

    class NativeWithoutError(NativeMechanism, register=False):
        name = "native_without_error_stub"

        def measure(self, workload, x, epsilon, gen, policy=None):
            return Outcome(np.zeros(workload.num_queries))

    class NotAnalytic(Mechanism, register=False):
        name = "not_analytic_stub"

        def run(self, workload, x, epsilon, rng=None):
            return np.zeros(workload.num_queries)

    class AnalyticAuto(Auto, register=False):
        analytic_error = True

    for cls in (AnalyticLinear, NativeWithError, NativeWithoutError, NotAnalytic):
        monkeypatch.setitem(MECHANISMS, cls.name, cls)
    monkeypatch.setitem(MECHANISMS, "auto", AnalyticAuto)  # analytic or not, never a candidate of itself

    names = analytic_mechanisms()
    assert isinstance(names, tuple)
    assert names[0] == "identity" and list(names[1:]) == sorted(names[1:])
    expected = {name for name, cls in MECHANISMS.items() if cls.analytic_error} - {"optimized", "auto"}
    assert set(names) == expected
    assert names[1] == "aaa_linear_stub"
    assert "native_with_error_stub" in names
    for absent in ("native_without_error_stub", "not_analytic_stub", "optimized", "auto", "uniform", "mwem"):
        assert absent not in names
    for present in ("identity", "laplace", "hb", "greedyh", "marginals", TUNED):
        assert present in names


# --- __init__ -----------------------------------------------------------------------------------


def test_defaults():
    auto = Auto()
    assert auto.budget == 10.0
    assert auto.candidates is None
    assert auto.compared() == analytic_mechanisms()
    assert Auto(budget=0).budget == 0.0


def test_candidates_are_kept_as_a_tuple_and_compared():
    auto = Auto(budget=2.5, candidates=["laplace", "identity"])
    assert auto.candidates == ("laplace", "identity")
    assert isinstance(auto.candidates, tuple)
    assert auto.compared() == ("laplace", "identity")
    assert Auto(candidates=("hb",)).compared() == ("hb",)
    assert Auto(candidates=()).compared() == ()


def test_invalid_arguments_are_refused_with_a_message():
    with pytest.raises(ValueError, match=re.escape("budget (seconds) must be")):
        Auto(budget=-0.5)
    with pytest.raises(TypeError, match="budget"):
        Auto(budget="10")
    with pytest.raises(TypeError, match=r"candidates must be a tuple of mechanism names or None \(every registered "
                                        r"one with an analytic error\), got 'identity'"):
        Auto(candidates="identity")
    with pytest.raises(TypeError) as refused:
        Auto(candidates=("identity", 3))
    assert str(refused.value) == ("candidates must be a tuple of mechanism names or None (every registered one with an "
                                  "analytic error), got ('identity', 3)")
    with pytest.raises(ValueError) as refused:
        Auto(candidates=("identity", "auto"))
    assert str(refused.value) == "candidates cannot include 'auto' itself"
    with pytest.raises(ValueError, match="unknown mechanism"):
        Auto(candidates=("identity", "nope"))


# --- choices: large domains ---------------------------------------------------------------------


def test_marginals_of_any_size_keep_only_the_mechanisms_that_need_no_domain_array(monkeypatch):
    calls = _optimizer_predicts(monkeypatch, 0.0)
    for shape in ((STRUCTURED_CELLS + 1,), (3, 4)):
        pairs, note = Auto(candidates=("identity", "laplace", "hb", "marginals")).choices(wl.marginals(shape, [(0,)]))
        assert _pairs(pairs) == [("laplace", "auto"), ("marginals", "auto")]
        assert note == ("skipped for marginals (strategies over cells: never better on them, slow to plan): "
                        "optimized, identity, hb")
    assert calls == []  # the optimiser is not even asked
    # the same cells as another workload: every candidate
    pairs, _ = Auto(candidates=("identity", "laplace", "hb", "marginals")).choices(wl.identity((3, 4)))
    assert _pairs(pairs)[:3] == [("identity", "auto"), ("laplace", "auto"), ("hb", "auto")]


def test_large_domains_of_other_workloads(monkeypatch):
    _optimizer_predicts(monkeypatch, 0.0)
    auto = Auto(candidates=("identity", "laplace"))
    big = wl.ranges(LARGE_DOMAIN_CELLS + 1, [0], [3])
    pairs, note = auto.choices(big)
    assert pairs == []
    assert note == (f"skipped on {LARGE_DOMAIN_CELLS + 1} cells (they work on arrays of the domain's size): "
                    "optimized, identity, laplace")
    with pytest.raises(ValueError, match=re.escape("no candidate of ('identity', 'laplace') has an analytic error")):
        auto.expected_error(big, EPSILON)

    at_limit = wl.ranges(LARGE_DOMAIN_CELLS, [0], [3])
    pairs, note = auto.choices(at_limit)
    assert _pairs(pairs) == [("identity", "auto"), ("laplace", "auto"), ("optimized", "auto")]
    assert note == "optimized considered (predicted 0 s <= budget 10 s)"

    # beyond the marginals' limit a workload that is not one of marginals is no large domain
    wide = wl.ranges(STRUCTURED_CELLS + 1, [0], [3])
    pairs, note = auto.choices(wide)
    assert _pairs(pairs) == [("identity", "auto"), ("laplace", "auto"), ("optimized", "auto")]
    assert note.startswith("optimized considered")


# --- choices: the optimiser's budget ------------------------------------------------------------


def test_optimizer_joins_every_route_when_all_fit_budget_included(monkeypatch):
    pol = policies.threshold(8, 2)  # cyclic: one transform per tree candidate
    asked = _tree_count(monkeypatch, 3)
    calls = _optimizer_predicts(monkeypatch, 4.0, 2.0)
    w = wl.prefix(8)
    pairs, note = Auto(candidates=("identity",)).choices(w, pol)
    assert _pairs(pairs) == [("identity", "auto"), ("optimized", "auto")]
    assert note == "optimized considered (predicted 10 s <= budget 10 s)"
    assert asked == [pol]
    assert calls == [("exact", w, pol), ("transform", pol.size)]

    pairs, note = Auto(candidates=("identity",)).choices(w, pol, "transform")
    assert _pairs(pairs) == [("identity", "transform"), ("optimized", "transform")]
    assert note == "optimized considered (predicted 10 s <= budget 10 s)"


def test_optimizer_keeps_the_exact_route_when_only_it_fits(monkeypatch):
    pol = policies.threshold(8, 2)
    _tree_count(monkeypatch, 3)
    _optimizer_predicts(monkeypatch, 10.0, 1.0)
    w = wl.prefix(8)
    pairs, note = Auto(candidates=("identity",)).choices(w, pol)
    assert _pairs(pairs) == [("identity", "auto"), ("optimized", "exact")]
    assert note == "optimized considered in the exact route (predicted 10 s <= budget 10 s; its transform routes 3 s more)"

    # a caller asking for the transform routes gets no optimiser at all
    pairs, note = Auto(candidates=("identity",)).choices(w, pol, "transform")
    assert _pairs(pairs) == [("identity", "transform")]
    assert note == "optimized skipped (predicted 13 s > budget 10 s)"


def test_optimizer_in_the_exact_route_asked_for(monkeypatch):
    pol = policies.threshold(8, 2)
    _tree_count(monkeypatch, 3)
    _optimizer_predicts(monkeypatch, 1.0, 1.0)
    w = wl.prefix(8)
    pairs, note = Auto(candidates=("identity",)).choices(w, pol, "exact")
    assert _pairs(pairs) == [("identity", "exact"), ("optimized", "exact")]
    assert note == "optimized considered in the exact route (predicted 1 s <= budget 10 s; its transform routes 3 s more)"


def test_optimizer_skipped_beyond_the_budget(monkeypatch):
    pol = policies.threshold(8, 2)
    _tree_count(monkeypatch, 3)
    _optimizer_predicts(monkeypatch, 10.5, 1.0)
    pairs, note = Auto(candidates=("identity",)).choices(wl.prefix(8), pol)
    assert _pairs(pairs) == [("identity", "auto")]
    assert note == "optimized skipped (predicted 14 s > budget 10 s)"
    pairs, note = Auto(candidates=("identity",)).choices(wl.prefix(8), pol, "exact")
    assert _pairs(pairs) == [("identity", "exact")]
    assert note == "optimized skipped (predicted 14 s > budget 10 s)"


def test_optimizer_numbers_are_formatted(monkeypatch):
    _optimizer_predicts(monkeypatch, 0.123456)
    pairs, note = Auto(budget=2.5, candidates=()).choices(wl.prefix(8))
    assert _pairs(pairs) == [("optimized", "auto")]
    assert note == "optimized considered (predicted 0.12 s <= budget 2.5 s)"
    _optimizer_predicts(monkeypatch, 3.14159)
    pairs, note = Auto(budget=2.5, candidates=()).choices(wl.prefix(8), None, "exact")
    assert pairs == []
    assert note == "optimized skipped (predicted 3.1 s > budget 2.5 s)"


def test_a_forest_needs_one_transform(monkeypatch):
    pol = policies.line(8)
    asked = _tree_count(monkeypatch, 5)
    calls = _optimizer_predicts(monkeypatch, 3.0, 2.0)
    w = wl.prefix(8)
    pairs, note = Auto(candidates=("identity",)).choices(w, pol)
    assert _pairs(pairs) == [("identity", "auto"), ("optimized", "auto")]
    assert note == "optimized considered (predicted 5 s <= budget 10 s)"
    assert asked == []
    assert calls == [("exact", w, pol), ("transform", 8)]


def test_a_cyclic_policy_needs_one_transform_per_tree(monkeypatch):
    pol = policies.threshold(8, 2)
    _tree_count(monkeypatch, 4)
    _optimizer_predicts(monkeypatch, 1.0, 0.5)
    pairs, note = Auto(budget=2.5, candidates=()).choices(wl.prefix(8), pol)
    assert _pairs(pairs) == [("optimized", "exact")]
    assert note == ("optimized considered in the exact route (predicted 1 s <= budget 2.5 s; "
                    "its transform routes 2 s more)")


@pytest.mark.parametrize("unbounded", [True, False])
def test_without_transforms_only_the_exact_time_counts(monkeypatch, unbounded):
    pol = policies.unbounded(8) if unbounded else None  # unbounded DP: W_G = W, no tree to optimise
    asked = _tree_count(monkeypatch, 3)
    calls = _optimizer_predicts(monkeypatch, 10.0, 2.0)
    w = wl.prefix(8)
    pairs, note = Auto(candidates=("identity",)).choices(w, pol)
    assert _pairs(pairs) == [("identity", "auto"), ("optimized", "auto")]
    assert note == "optimized considered (predicted 10 s <= budget 10 s)"
    assert asked == []
    assert calls == [("exact", w, pol)]
    pairs, note = Auto(candidates=("identity",)).choices(w, pol, "exact")
    assert _pairs(pairs) == [("identity", "exact"), ("optimized", "exact")]
    assert note == "optimized considered in the exact route (predicted 10 s <= budget 10 s; its transform routes 0 s more)"


def test_default_route_is_auto(monkeypatch):
    _tree_count(monkeypatch, 3)
    _optimizer_predicts(monkeypatch, 2.0, 3.0)
    pairs, note = Auto(budget=5.0, candidates=("identity", "hb")).choices(wl.prefix(8), policies.threshold(8, 2))
    assert _pairs(pairs) == [("identity", "auto"), ("hb", "auto"), ("optimized", "exact")]
    assert note == "optimized considered in the exact route (predicted 2 s <= budget 5 s; its transform routes 9 s more)"


# --- choices: the self-tuning candidate ---------------------------------------------------------


def test_tuned_candidate_within_its_budget(monkeypatch):
    _optimizer_predicts(monkeypatch, 20.0)
    asked = _tuned_predicts(monkeypatch, 10.0)
    w, pol = wl.prefix(8), policies.line(8)
    pairs, note = Auto(candidates=(TUNED, "identity")).choices(w, pol)
    assert _pairs(pairs) == [(TUNED, "auto"), ("identity", "auto")]
    assert note == f"optimized skipped (predicted 20 s > budget 10 s); {TUNED} considered (predicted 10 s <= budget 10 s)"
    assert asked == [(w, pol)]


def test_tuned_candidate_beyond_its_budget(monkeypatch):
    _optimizer_predicts(monkeypatch, 0.0)
    _tuned_predicts(monkeypatch, 12.345)
    pairs, note = Auto(candidates=(TUNED, "identity")).choices(wl.prefix(8), policies.line(8))
    assert _pairs(pairs) == [("identity", "auto"), ("optimized", "auto")]
    assert note == f"optimized considered (predicted 0 s <= budget 10 s); {TUNED} skipped (predicted 12 s > budget 10 s)"
    _tuned_predicts(monkeypatch, 0.0123)
    pairs, note = Auto(budget=0.5, candidates=(TUNED,)).choices(wl.prefix(8), policies.line(8))
    assert _pairs(pairs) == [(TUNED, "auto"), ("optimized", "auto")]
    assert note == f"optimized considered (predicted 0 s <= budget 0.5 s); {TUNED} considered (predicted 0.012 s <= budget 0.5 s)"


def test_tuned_candidate_needs_a_one_dimensional_policy_to_be_timed(monkeypatch):
    _optimizer_predicts(monkeypatch, 20.0)
    _tree_count(monkeypatch, 1)
    asked = _tuned_predicts(monkeypatch, 100.0)
    for pol in (None, policies.grid((3, 3))):
        pairs, note = Auto(candidates=(TUNED,)).choices(wl.prefix((3, 3)), pol)
        assert _pairs(pairs) == [(TUNED, "auto")]
        assert note == "optimized skipped (predicted 20 s > budget 10 s)"
    assert asked == []


# --- _best, expected_error, run -----------------------------------------------------------------


def test_expected_error_is_the_least_analytic_error_of_the_candidates(monkeypatch):
    _optimizer_predicts(monkeypatch, 1e9)
    auto = Auto()
    w = wl.prefix(64)
    errors = {}
    for name in auto.compared():
        try:
            error = get_mechanism(name).expected_error(w, EPSILON)
        except (NotImplementedError, TypeError, ValueError):
            continue
        if error is not None:
            errors[name] = error
    best = min(errors, key=errors.get)
    assert sorted(errors.values())[0] < sorted(errors.values())[1]  # one clear winner
    assert auto.expected_error(w, EPSILON) == errors[best]
    assert auto.expected_error(w.dense(), EPSILON) == pytest.approx(errors[best])
    assert auto.best(w, EPSILON) is get_mechanism(best)

    x = np.random.default_rng(1).integers(0, 20, size=64)
    ours = auto.run(w, x, EPSILON, np.random.default_rng(7))
    theirs = get_mechanism(best).run(w, x, EPSILON, np.random.default_rng(7))
    assert np.array_equal(ours, theirs)
    assert np.array_equal(auto.run(w, x, EPSILON, 7), theirs)  # a seed is a Generator seeded with it


def test_run_is_the_chosen_mechanisms_release(monkeypatch):
    _optimizer_predicts(monkeypatch, 1e9)
    auto = Auto(candidates=("identity", "greedyh"))
    w = wl.prefix(64)
    greedyh = get_mechanism("greedyh")
    assert greedyh.expected_error(w, 0.3) < get_mechanism("identity").expected_error(w, 0.3)
    assert auto.expected_error(w, 0.3) == greedyh.expected_error(w, 0.3)
    x = np.random.default_rng(2).integers(0, 50, size=64)
    ours = auto.run(w, x, 0.3, np.random.default_rng(11))
    theirs = greedyh.run(w, x, 0.3, np.random.default_rng(11))
    assert np.array_equal(ours, theirs)
    other_eps = greedyh.run(w, x, 0.6, np.random.default_rng(11))
    assert not np.allclose(ours, other_eps)
    assert ours.shape == (64,)
    # answers follow the data
    shifted = auto.run(w, x + 5, 0.3, np.random.default_rng(11))
    assert np.array_equal(shifted, greedyh.run(w, x + 5, 0.3, np.random.default_rng(11)))
    assert not np.array_equal(shifted, ours)


def test_candidates_that_cannot_compute_their_error_are_skipped(monkeypatch):
    _optimizer_predicts(monkeypatch, 1e9)
    _stub(monkeypatch, "stub_not_implemented", raises=NotImplementedError, answer=1.0)
    _stub(monkeypatch, "stub_type_error", raises=TypeError, answer=2.0)
    _stub(monkeypatch, "stub_value_error", raises=ValueError, answer=3.0)
    _stub(monkeypatch, "stub_no_error", error=None, answer=4.0)
    _stub(monkeypatch, "stub_worse", error=4.0, answer=5.0)
    _stub(monkeypatch, "stub_better", error=3.0, answer=6.0)
    _stub(monkeypatch, "stub_worst", error=5.0, answer=7.0)
    auto = Auto(candidates=("stub_not_implemented", "stub_type_error", "stub_value_error", "stub_no_error",
                            "stub_worse", "stub_better", "stub_worst", "marginals", "ordered"))
    w = wl.prefix(4)
    assert auto.expected_error(w, EPSILON) == 3.0
    answers = auto.run(w, np.arange(4), EPSILON, np.random.default_rng(0))
    assert np.array_equal(answers, np.full(4, 6.0))


def test_ties_go_to_the_first_candidate(monkeypatch):
    _optimizer_predicts(monkeypatch, 1e9)
    _stub(monkeypatch, "stub_first", error=2.0, answer=1.0)
    _stub(monkeypatch, "stub_second", error=2.0, answer=2.0)
    auto = Auto(candidates=("stub_first", "stub_second"))
    answers = auto.run(wl.prefix(4), np.arange(4), EPSILON, np.random.default_rng(0))
    assert np.array_equal(answers, np.full(4, 1.0))
    assert auto.best(wl.prefix(4), EPSILON) is get_mechanism("stub_first")


def test_no_candidate_with_an_analytic_error(monkeypatch):
    _optimizer_predicts(monkeypatch, 1e9)
    _stub(monkeypatch, "stub_no_error", error=None)
    _stub(monkeypatch, "stub_value_error", raises=ValueError)
    w = wl.prefix(4)
    message = f"no candidate of ('stub_no_error', 'stub_value_error', 'ordered') has an analytic error for {w.name}"
    auto = Auto(candidates=("stub_no_error", "stub_value_error", "ordered"))
    with pytest.raises(ValueError, match=re.escape(message)):
        auto.expected_error(w, EPSILON)
    with pytest.raises(ValueError, match=re.escape(message)):
        auto.run(w, np.arange(4), EPSILON, np.random.default_rng(0))
    with pytest.raises(ValueError, match=re.escape(f"no candidate of ('ordered',) has an analytic error for {w.name}")):
        Auto(candidates=("ordered",)).expected_error(w, EPSILON)


def test_candidates_from_an_iterator_or_a_set_are_kept_in_a_reproducible_order():
    assert Auto(candidates=(n for n in ["identity", "hb"])).candidates == ("identity", "hb")
    assert Auto(candidates=iter(["hb", "identity"])).candidates == ("hb", "identity")
    names = analytic_mechanisms()
    assert len(names) >= 6  # a set of this many names iterates in sorted order by chance only rarely
    assert Auto(candidates=set(names)).candidates == tuple(sorted(names))
    assert Auto(candidates=frozenset(names)).candidates == tuple(sorted(names))
    with pytest.raises(ValueError, match=r"^candidates cannot include 'auto' itself$"):
        Auto(candidates=iter(["identity", "auto"]))
    with pytest.raises(TypeError, match=r"^candidates must be a tuple of mechanism names"):
        Auto(candidates=iter(["identity", 3]))


@pytest.mark.parametrize("make", [lambda: (wl.prefix(48), policies.threshold(48, 6)),
                                  lambda: (wl.random_ranges(36, 40, rng=2), policies.grid((6, 6), 1)),
                                  lambda: (wl.dpbench_ranges((8, 8), 30, rng=1), policies.grid((8, 8), 2))])
def test_candidates_bounded_by_the_others_leave_the_choice_as_a_full_comparison(make, monkeypatch):
    """A transform route is skipped once its lower bound exceeds the best error of any candidate
    compared before it (another mechanism's included): the choice is the least error over every
    candidate's own full plan, and every skipped route's bound is above it."""
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", "off")  # plan everything
    monkeypatch.setattr("blowfish_te.mechanisms.base._DEFAULTS", {})
    workload, policy = make()
    chooser = Auto()
    chosen = plan_routes(workload, policy, 1.0, chooser)
    own = []
    for sub, route in chooser.choices(workload, policy)[0]:
        try:
            own += plan_routes(workload, policy, 1.0, type(sub)(), route).considered
        except (ValueError, TypeError):
            continue
    best = min(c.expected_mse for c in own if c.expected_mse is not None)
    assert chosen.chosen.expected_mse == pytest.approx(best, rel=1e-9)
    floors = [c.floor for c in chosen.considered if c.floor is not None]
    assert all(f > best for f in floors)
    assert len(floors) > sum(c.floor is not None for c in own)  # the others' errors bound more routes
