"""The plan search of the tuned Ordered Hierarchical mechanism
(``blowfish_te.mechanisms.ordered``; He, Machanavajjhala, Ding, SIGMOD 2014, §7.2 and
docs/theory.md), checked on error models whose optimum is known in closed form: every plan's
exact error is replaced by c_S/s² + c_H/(1 − s)² at the split s = ε_S/ε, whose best split is
∛c_S/(∛c_S + ∛c_H) with error (∛c_S + ∛c_H)³. What is checked: which plans and splits are
evaluated, the fitted split and its clipping to [0.02, 0.98], the plain-steps twin, ties, plans
with one group, and the caches keyed by workload. The split changes accuracy only: any
ε_S + ε_H = ε composes to ε."""

from __future__ import annotations

import pytest

from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import MECHANISMS
from blowfish_te.mechanisms.ordered import FIT_SHARES, TunedOrderedHierarchical, ramp_width

from tests.helpers import exactly

LOW, HIGH = FIT_SHARES
HE_ET_AL = (None, None, None, None)


def _modelled(plans, model, he_error=1e12, one_group=None):
    """A tuned mechanism whose candidate plans are ``plans`` and whose exact error is ``model``:
    (spacing, fan-out, ramp) -> (c_S, c_H), or for the plans in ``one_group`` a constant."""
    one_group = one_group or {}
    calls = []

    class _Modelled(TunedOrderedHierarchical, register=False):
        name = "oh_modelled"

        def _candidates(self, policy):
            return list(plans)

        def _measured_groups(self, policy, spacing, fanout, ramp):
            one = (spacing, fanout, ramp) in one_group
            return "S rows", None if one else "H rows", spacing, {}

        def _unit_error(self, workload, policy, spacing, share, fanout=None, ramp=None):
            calls.append((spacing, share, fanout, ramp))
            if spacing is None:
                return he_error
            if (spacing, fanout, ramp) in one_group:
                return one_group[(spacing, fanout, ramp)]
            c_s, c_h = model[(spacing, fanout, ramp)]
            return c_s / share**2 + c_h / (1 - share) ** 2

    return _Modelled(), calls


def _tune(mech):
    return mech._tune(wl.prefix(16), policies.line(16))


def test_the_plan_with_the_least_fitted_optimum_is_used_at_its_fitted_split():
    plans = [(8, 16, 6), (4, 4, 3)]
    model = {(8, 16, 6): (8.0, 1.0), (4, 4, 3): (1.0, 1.0), (4, 4, None): (2.0, 2.0)}
    mech, calls = _modelled(plans, model)
    spacing, share, fanout, ramp = _tune(mech)
    assert (spacing, fanout, ramp) == (4, 4, 3)
    assert share == pytest.approx(0.5, rel=1e-12)
    assert calls[0] == HE_ET_AL
    assert calls[1:5] == [(8, LOW, 16, 6), (8, HIGH, 16, 6), (4, LOW, 4, 3), (4, HIGH, 4, 3)]
    assert [c[0::2] for c in calls[5:]] == [(4, 4), (4, 4)] and [c[3] for c in calls[5:]] == [3, None]
    assert calls[5][1] == calls[6][1] == share


def test_the_fitted_split_is_the_cube_root_ratio():
    mech, _ = _modelled([(8, 16, 6)], {(8, 16, 6): (8.0, 1.0), (8, 16, None): (1e6, 1e6)})
    assert _tune(mech)[1] == pytest.approx(2.0 / 3.0, rel=1e-12)
    mech, _ = _modelled([(8, 16, 6)], {(8, 16, 6): (1.0, 0.5), (8, 16, None): (1e6, 1e6)})  # c_H below 1 fits too
    share = _tune(mech)[1]
    assert share == pytest.approx(1.0 / (1.0 + 0.5 ** (1.0 / 3.0)), rel=1e-12)
    assert share not in FIT_SHARES


@pytest.mark.parametrize("c_s, c_h, clipped", [(1e6, 1.0, 0.98), (1.0, 1e6, 0.02)])
def test_the_fitted_split_is_clipped(c_s, c_h, clipped):
    mech, calls = _modelled([(8, 16, 6)], {(8, 16, 6): (c_s, c_h), (8, 16, None): (1e9, 1e9)})
    assert _tune(mech) == (8, clipped, 16, 6)
    assert calls[-2] == (8, clipped, 16, 6)


def test_the_plain_steps_twin_wins_when_it_is_better():
    plans = [(4, 4, 3)]
    mech, calls = _modelled(plans, {(4, 4, 3): (1.0, 1.0), (4, 4, None): (0.5, 0.5)})
    assert _tune(mech) == pytest.approx((4, 0.5, 4, None))
    assert calls[-1][3] is None and calls[-2][3] == 3


def test_a_plan_without_a_ramp_has_no_twin():
    mech, calls = _modelled([(2, 2, None)], {(2, 2, None): (1.0, 1.0)})
    assert _tune(mech) == pytest.approx((2, 0.5, 2, None))
    assert len(calls) == 1 + 2 + 1  # He et al.'s, the two fitting splits, the fitted split


def test_on_a_tie_the_first_plan_listed_wins():
    plans = [(8, 16, 6), (4, 4, 3)]
    model = {(8, 16, 6): (1.0, 1.0), (4, 4, 3): (1.0, 1.0), (8, 16, None): (9.0, 9.0), (4, 4, None): (9.0, 9.0)}
    mech, _ = _modelled(plans, model)
    assert _tune(mech) == pytest.approx((8, 0.5, 16, 6))


def test_a_model_that_does_not_fit_keeps_the_best_evaluated_split():
    # c_S < 0: no optimum to fit; the better of the two evaluated splits stands
    mech, calls = _modelled([(8, 16, 6)], {(8, 16, 6): (-1.0, 10.0)})
    assert _tune(mech) == (8, LOW, 16, 6)
    assert len(calls) == 3


@pytest.mark.parametrize("c_s, c_h, kept", [(0.0, 1.0, LOW), (1.0, 0.0, HIGH)])
def test_a_model_with_a_zero_coefficient_does_not_fit(c_s, c_h, kept):
    # the optimum would sit at a split of 0 or 1 (one group gets all of ε): not fitted
    mech, calls = _modelled([(8, 16, 6)], {(8, 16, 6): (c_s, c_h)})
    assert _tune(mech) == (8, kept, 16, 6)
    assert len(calls) == 3


def test_plans_are_ranked_by_the_cube_of_the_summed_cube_roots():
    # (1, 1): (1 + 1)³ = 8; (1, 27): (1 + 3)³ = 64. A difference of cube roots would rank them
    # the other way round.
    plans = [(8, 16, 6), (4, 4, 3)]
    model = {(8, 16, 6): (1.0, 1.0), (4, 4, 3): (1.0, 27.0), (8, 16, None): (1e6, 1e6), (4, 4, None): (1e6, 1e6)}
    mech, _ = _modelled(plans, model)
    assert _tune(mech) == pytest.approx((8, 0.5, 16, 6))


def test_on_an_exact_tie_he_et_al_s_plan_is_kept():
    model = {(8, 16, 6): (-1.0, 10.0)}  # no fit: its two evaluated splits stand
    he_error = -1.0 / LOW**2 + 10.0 / (1 - LOW) ** 2  # equal to the plan's error at the low split
    mech, _ = _modelled([(8, 16, 6)], model, he_error=he_error)
    assert _tune(mech) == HE_ET_AL


def test_he_et_al_s_plan_wins_when_it_is_best():
    mech, _ = _modelled([(4, 4, 3)], {(4, 4, 3): (1.0, 1.0), (4, 4, None): (1.0, 1.0)}, he_error=7.0)
    assert _tune(mech) == HE_ET_AL


def test_a_plan_with_one_group_is_evaluated_as_it_is_and_the_search_goes_on():
    plans = [(8, 16, 6), (4, 4, 3)]
    model = {(4, 4, 3): (1.0, 1.0), (4, 4, None): (9.0, 9.0)}
    mech, calls = _modelled(plans, model, one_group={(8, 16, 6): 50.0})
    assert _tune(mech) == pytest.approx((4, 0.5, 4, 3))
    assert calls[1] == (8, 0.5, 16, 6)
    mech, _ = _modelled(plans, model, one_group={(8, 16, 6): 3.0})
    assert _tune(mech) == (8, 0.5, 16, 6)


# -- caches keyed by workload ---------------------------------------------------------------------------
@pytest.mark.parametrize("spacing, width", [(1, None), (2, None), (3, 2), (4, 3), (32, 24), (64, 45), (4096, 362)])
def test_ramp_width_is_three_quarters_of_the_spacing_capped_and_at_least_two(spacing, width):
    assert ramp_width(spacing) == width


def test_tuned_settings_are_kept_per_workload():
    tuned = []

    class _Recorded(TunedOrderedHierarchical, register=False):
        name = "oh_recorded"

        def _tune(self, workload, policy):
            tuned.append(workload.name)
            return (None, None, None, None) if workload.name.startswith("prefix") else (2, 0.5, 2, None)

    mech, policy, other = _Recorded(), policies.line(8), policies.threshold(8, 2)
    prefix, identity = wl.prefix(8), wl.identity(8)
    assert mech._settings(prefix, policy) == HE_ET_AL
    assert mech._settings(identity, policy) == (2, 0.5, 2, None)
    assert mech._settings(prefix, policy) == HE_ET_AL
    assert tuned == [prefix.name, identity.name]
    assert mech._settings(identity, other) == (2, 0.5, 2, None)
    assert tuned == [prefix.name, identity.name, identity.name]  # tuned again for another policy


def test_expected_errors_are_kept_per_workload():
    # the same workload and policy objects throughout: the caches are keyed by identity
    mech, policy, wider_policy = MECHANISMS["ordered_hierarchical"](), policies.line(16), policies.threshold(16, 4)
    prefixes, cells = wl.prefix(16), wl.identity(16)
    prefix = mech.expected_error(prefixes, 1.0, policy=policy)
    identity = mech.expected_error(cells, 1.0, policy=policy)
    wider = mech.expected_error(prefixes, 1.0, policy=wider_policy)
    fresh = MECHANISMS["ordered_hierarchical"]
    assert prefix == fresh().expected_error(prefixes, 1.0, policy=policy)
    assert identity == fresh().expected_error(cells, 1.0, policy=policy)
    assert wider == fresh().expected_error(prefixes, 1.0, policy=wider_policy)
    assert len({prefix, identity, wider}) == 3
    assert mech.expected_error(prefixes, 0.5, policy=policy) == pytest.approx(4 * prefix, rel=1e-12)


def test_a_plan_is_solved_once_for_every_instance_and_setting_that_measures_its_rows(monkeypatch):
    """Errors are kept by the content of the weighted rows: under ``line`` (θ = 1) every plan
    measures single cells, so the untuned mechanism's plan and every plan the tuned one compares
    are one least-squares solve; a new workload is solved anew, and the kept value is the exact one."""
    from blowfish_te.mechanisms import ordered
    from blowfish_te.strategies import GeneralStrategy

    solved = []
    exact = GeneralStrategy.lstsq_frobenius_sq
    monkeypatch.setattr(GeneralStrategy, "lstsq_frobenius_sq", lambda self, w: solved.append(w.name) or exact(self, w))
    monkeypatch.setattr(ordered, "_EXACT_ERRORS", ordered.IdentityCache())
    policy, prefixes = policies.line(64), wl.prefix(64)
    plain = MECHANISMS["ordered_hierarchical"]().expected_error(prefixes, 1.0, policy=policy)
    tuned = MECHANISMS["ordered_hierarchical_tuned"]().expected_error(prefixes, 1.0, policy=policy)
    assert len(solved) == 1 and tuned == plain
    other = wl.prefix(64)  # equal rows, another object: kept by identity, so solved again
    assert MECHANISMS["ordered_hierarchical"]().expected_error(other, 1.0, policy=policy) == plain
    assert len(solved) == 2
    monkeypatch.setattr(ordered, "_EXACT_ERRORS", ordered.IdentityCache())
    assert MECHANISMS["ordered_hierarchical"]().expected_error(prefixes, 1.0, policy=policy) == plain


def test_nothing_measured_has_no_error():
    # one cell and its count public: nothing to measure
    mech = MECHANISMS["ordered_hierarchical"]()
    assert mech.expected_error(wl.identity(1), 1.0, policy=policies.line(1)) == 0.0
    assert mech.measurements(wl.identity(1), policies.line(1), 1.0) is None


def test_measurements_refuse_a_grid_naming_the_mechanism():
    message = "ordered_hierarchical needs a 1-D ordered domain, got policy grid((2, 3), theta=1) of shape (2, 3)"
    with pytest.raises(ValueError, match=exactly(message)):
        MECHANISMS["ordered_hierarchical"]().measurements(wl.identity((2, 3)), policies.grid((2, 3)), 1.0)
