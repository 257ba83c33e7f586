"""Budget accountant: sequential composition adds ε (He et al. Thm 4.1), parallel groups on
disjoint record sets charge the largest part (Thm 4.2), over-spending is refused before any noise."""

import math
import re

import numpy as np
import pytest

import blowfish_te as bt
from blowfish_te import BudgetAccountant, BudgetExceededError, Mechanism, policies
from blowfish_te import workloads as wl

pytestmark = pytest.mark.core

K = 8
X = np.array([3, 0, 1, 4, 1, 5, 9, 2])  # 25 records
W = wl.prefix(K)


class Recording(Mechanism, register=False):
    """Identity-like mechanism that records every call (its noise is irrelevant here)."""

    name = "recording"

    def __init__(self):
        self.calls = []

    def run(self, workload, x, epsilon, rng=None):
        self.calls.append(epsilon)
        return np.asarray(workload.matvec(x), dtype=np.float64)


def _state(gen: np.random.Generator):
    return gen.bit_generator.state


def test_sequential_spends_add_and_the_remaining_budget_is_reported():
    acct = BudgetAccountant(1.0, policies.line(K))
    assert acct.spend(0.25, label="first") == pytest.approx(0.75)
    acct.answer(W, X, 0.5, rng=0, label="prefix", mechanism="identity")
    assert acct.spent == pytest.approx(0.75) and acct.remaining == pytest.approx(0.25)
    assert [(s.epsilon, s.label) for s in acct.history] == [(0.25, "first"), (0.5, "prefix")]
    assert acct.guarantee == "(0.75, line(8))-Blowfish private"


def test_ten_spends_of_a_tenth_fill_a_budget_of_one_exactly():
    acct = BudgetAccountant(1.0, policies.line(K))
    for _ in range(10):
        acct.spend(0.1)
    assert acct.spent == 1.0 and acct.remaining == 0.0
    with pytest.raises(BudgetExceededError):
        acct.spend(1e-9)
    assert len(acct.history) == 10


def test_over_spending_raises_before_any_noise_is_drawn():
    acct = BudgetAccountant(1.0, policies.line(K))
    acct.spend(0.7)
    gen = np.random.default_rng(5)
    before = _state(gen)
    mech = Recording()
    with pytest.raises(BudgetExceededError) as info:
        acct.answer(W, X, 0.5, mechanism=mech, rng=gen, label="too much")
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "epsilon=0.5" in message and re.search(r"only 0\.3\d* of the total 1 remains", message)
    assert _state(gen) == before and mech.calls == []  # no noise drawn, mechanism never ran
    assert acct.spent == pytest.approx(0.7) and len(acct.history) == 1  # nothing charged
    acct.answer(W, X, 0.3, mechanism=mech, rng=gen)  # what remains still fits
    assert mech.calls == [pytest.approx(0.3)] and acct.remaining == pytest.approx(0.0)


def test_release_through_the_accountant_is_the_plain_release():
    acct = BudgetAccountant(2.0, policies.threshold(K, 2))
    ours = acct.answer(W, X, 0.5, mechanism="h2", rng=3)
    plain = bt.answer(W, X, policies.threshold(K, 2), 0.5, "h2", rng=3)
    np.testing.assert_array_equal(ours.answers, plain.answers)
    assert ours.route == plain.route and ours.policy is acct.policy


@pytest.mark.parametrize("bad", [0, -0.5, math.nan, math.inf, "0.1", None, True, 1e-300])
def test_bad_epsilons_are_refused_and_charge_nothing(bad):
    acct = BudgetAccountant(1.0, policies.line(K))
    for call in (lambda: acct.spend(bad), lambda: acct.answer(W, X, bad, rng=0),
                 lambda: acct.parallel([{1}, {2}]).spend(0, bad)):
        with pytest.raises((TypeError, ValueError), match=r"\bepsilon\b") as info:
            call()
        assert not isinstance(info.value, BudgetExceededError)
    assert acct.spent == 0 and acct.history == ()
    with pytest.raises((TypeError, ValueError), match="total_epsilon"):
        BudgetAccountant(bad, policies.line(K))


def test_malformed_releases_cost_nothing():
    """Every argument is validated before the charge: a typo does not burn budget."""
    acct = BudgetAccountant(1.0, policies.threshold(K, 2))
    gen = np.random.default_rng(0)
    before = _state(gen)
    for kwargs, words in [
        (dict(mechanism="no-such"), "unknown mechanism"),
        (dict(route="fast"), "route"),
        (dict(mechanism="dawa"), "tree"),  # data-dependent on a cyclic policy needs a tree
        (dict(tree="no-such"), "unknown tree"),
        (dict(x=X - 1), "negative"),
        (dict(workload=wl.prefix(K + 1)), "cells"),
        (dict(rng=-1), "rng"),
        (dict(label=3), "label"),
    ]:
        args = dict(workload=W, x=X, epsilon=0.5, mechanism="identity", rng=gen) | kwargs
        with pytest.raises((TypeError, ValueError), match=words):
            acct.answer(**args)
    assert acct.spent == 0 and acct.history == () and _state(gen) == before
    with pytest.raises(TypeError, match="policy"):
        BudgetAccountant(1.0, "line")


def test_parallel_group_charges_the_largest_part_not_the_sum():
    acct = BudgetAccountant(1.0, policies.line(K))
    acct.spend(0.2)
    group = acct.parallel({"north": range(0, 25), "south": range(25, 50)}, label="regions")
    group.answer("north", W, X, 0.5, rng=1, mechanism="identity")
    group.answer("south", W, X, 0.5, rng=2)
    assert group.charge == pytest.approx(0.5) and acct.spent == pytest.approx(0.7)
    group.spend("south", 0.3)  # the south part now carries 0.8: the group charges 0.8
    assert group.spent_on("north") == pytest.approx(0.5) and group.spent_on("south") == pytest.approx(0.8)
    assert acct.spent == pytest.approx(1.0) and acct.remaining == pytest.approx(0.0)
    group.spend("north", 0.3)  # the smaller part catches up for free
    assert acct.spent == pytest.approx(1.0)
    gen = np.random.default_rng(9)
    before = _state(gen)
    with pytest.raises(BudgetExceededError, match="part 'north'"):
        group.answer("north", W, X, 0.1, rng=gen)
    assert _state(gen) == before and group.spent_on("north") == pytest.approx(0.8)
    assert [(s.group, s.part) for s in acct.history] == [(None, None)] + [("regions", p) for p in ("north", "south", "south", "north")]


def test_parallel_groups_compose_sequentially_with_everything_else():
    acct = BudgetAccountant(2.0, policies.line(K))
    first = acct.parallel([[1, 2], [3, 4]])
    second = acct.parallel([[1, 3], [2, 4]])  # a different partition of the same records
    first.spend(0, 0.5)
    first.spend(1, 0.4)
    second.spend(1, 0.7)
    acct.spend(0.1)
    assert acct.spent == pytest.approx(0.5 + 0.7 + 0.1)
    with pytest.raises(BudgetExceededError):  # 0.5 + max(0.7, 1.5) + 0.1 > 2
        second.spend(0, 1.5)
    assert second.charge == pytest.approx(0.7)
    assert second.spend(0, 1.4) == pytest.approx(0.0)  # 0.5 + max(0.7, 1.4) + 0.1 = 2


def test_overlapping_or_malformed_record_sets_are_refused():
    acct = BudgetAccountant(1.0, policies.line(K))
    with pytest.raises(ValueError, match=r"overlap.*record id 7.*'a'.*'b'"):
        acct.parallel({"a": [1, 7], "b": np.array([7, 8])})
    for parts, words in [({}, "at least one"), ({"a": []}, "no record ids"), ({"a": [[1]]}, "hashable"),
                         ({"a": 5}, "collection"), ("ab", "parts"), (3, "parts")]:
        with pytest.raises((TypeError, ValueError), match=words):
            acct.parallel(parts)
    group = acct.parallel({"a": [1], "b": [2]})
    with pytest.raises(ValueError, match="part must be one of"):
        group.spend("c", 0.1)
    assert acct.spent == 0


def test_parallel_composition_is_refused_under_public_constraints():
    """Thm 4.2 needs nothing but n to be known; with other constraints it fails in general."""
    acct = BudgetAccountant(1.0, policies.line(K), constraints=True)
    with pytest.raises(ValueError, match=r"constraints.*§4\.1"):
        acct.parallel([[1], [2]])
    acct.spend(0.4)  # sequential composition still holds (Thm 4.1)
    assert acct.remaining == pytest.approx(0.6)


def test_a_part_sees_exactly_its_own_records():
    """Without ⊥ every individual has a record: the part's histogram has one record per id; with ⊥
    individuals may be absent, so at most one. Passing the whole data set is caught."""
    bounded = BudgetAccountant(5.0, policies.line(K)).parallel({"a": range(25), "b": range(25, 40)})
    with pytest.raises(ValueError, match="x holds 25 records but part 'b' has 15 record ids"):
        bounded.answer("b", W, X, 0.5, rng=0)
    bounded.answer("a", W, X, 0.5, rng=0, mechanism="identity")
    unbounded = BudgetAccountant(5.0, policies.unbounded(K)).parallel({"a": range(30), "b": range(30, 40)})
    unbounded.answer("a", W, X, 0.5, rng=0)  # 25 of 30 individuals present
    with pytest.raises(ValueError, match="at most one record per id"):
        unbounded.answer("b", W, X, 0.5, rng=0)
    assert unbounded.charge == pytest.approx(0.5)


# -- exact refusals, records and history -----------------------------------------------------------
def _refusal(call) -> str:
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    return str(info.value)


def test_the_accountants_refusals_name_what_is_wrong():
    line = policies.line(K)
    assert _refusal(lambda: BudgetAccountant(0.0, line)) == "total_epsilon must be a finite number > 0, got 0.0"
    assert _refusal(lambda: BudgetAccountant(1.0, line, constraints=bt.constraints.known_total(4))) == (
        "constraints are over (4,) but the policy over (8,)")
    assert _refusal(lambda: BudgetAccountant(1.0, line, constraints="yes")) == (
        "constraints must be a Constraints object, True or False, got 'yes'")
    assert _refusal(lambda: BudgetAccountant(1.0, line, moves="all")) == "moves must be one of ('any', 'edges'), got 'all'"
    acct = BudgetAccountant(1.0, line)
    assert _refusal(lambda: acct.spend(0.1, label=3)) == "label must be a string or None, got int"
    acct.spend(0.75)
    assert _refusal(lambda: acct.spend(0.5)) == (
        "a release requests epsilon=0.5 but only 0.25 of the total 1 remains (0.75 spent); nothing was charged or run")
    assert _refusal(lambda: acct.spend(0.5, "late")) == (
        "release 'late' requests epsilon=0.5 but only 0.25 of the total 1 remains (0.75 spent); nothing was charged or run")
    assert _refusal(lambda: BudgetAccountant(1.0, line, constraints=True).parallel([[1], [2]])) == (
        "parallel composition is refused: this accountant was declared with constraints=True, and with publicly known "
        "constraints beyond the record count it fails in general (He et al. SIGMOD 2014, §4.1; Thm 4.3 needs the "
        "constraints split so that each affects one part only, which cannot be checked here). Charge the releases "
        "sequentially instead.")


def test_malformed_record_sets_are_refused_by_name():
    acct = BudgetAccountant(1.0, policies.line(K))
    assert _refusal(lambda: acct.parallel({})) == "parts must name at least one record set, got none"
    assert _refusal(lambda: acct.parallel(3)) == "parts must map part names to collections of record ids, got int"
    assert _refusal(lambda: acct.parallel({"a": 5})) == "parts['a'] must be a collection of record ids, got int"
    assert _refusal(lambda: acct.parallel({"a": [1, 7], "b": [7]})) == (
        "parts overlap: record id 7 is in parts 'a' and 'b'; parallel composition needs disjoint record sets "
        "(He et al. Thm 4.2)")
    group = acct.parallel({"a": [1], "b": [2]})
    # an unhashable part name is no part of the group, refused as any other unknown name
    assert _refusal(lambda: group.spend(["a"], 0.1)) == "part must be one of the group's parts ['a', 'b'], got ['a']"
    assert acct.history == ()


def test_a_groups_charges_are_recorded_with_their_labels():
    acct = BudgetAccountant(1.0, policies.line(K))
    group = acct.parallel({"north": range(25), "south": range(25, 50)}, label="regions")
    assert repr(group) == "<ParallelGroup regions: 2 disjoint parts, charge 0>"
    assert repr(acct.parallel([[100]])) == "<ParallelGroup: 1 disjoint parts, charge 0>"
    group.answer("north", W, X, 0.5, rng=1, label="prefix", mechanism="identity")
    group.spend("south", 0.25, "vouched")
    assert acct.history == (bt.budget.Spend(0.5, "prefix", "regions", "north"), bt.budget.Spend(0.25, "vouched", "regions", "south"))
    assert repr(group) == "<ParallelGroup regions: 2 disjoint parts, charge 0.5>"
    acct.spend(0.5)
    assert _refusal(lambda: group.spend("north", 0.125, "more")) == (
        "release 'more' on part 'north' requests epsilon=0.125 but only 0 of the total 1 remains (1 spent); "
        "nothing was charged or run")
    assert _refusal(lambda: group.spend("north", 0.125)) == (
        "a release on part 'north' requests epsilon=0.125 but only 0 of the total 1 remains (1 spent); "
        "nothing was charged or run")
    bounded = BudgetAccountant(5.0, policies.line(K)).parallel({"a": range(25), "b": range(25, 40)})
    assert _refusal(lambda: bounded.answer("b", W, X, 0.5, rng=0)) == (
        "x holds 25 records but part 'b' has 15 record ids: a release on D ∩ S must see exactly one record per id of S "
        "(pass the histogram of that part's records only)")


def test_a_parts_release_is_the_plain_release_with_its_rng_and_tree():
    policy = policies.threshold(K, 2)
    group = BudgetAccountant(5.0, policy).parallel({"a": range(25), "b": range(25, 40)})
    ours = group.answer("a", W, X, 0.5, mechanism="dawa", rng=3, tree="line")  # dawa needs a tree on this cyclic policy
    plain = bt.answer(W, X, policy, 0.5, "dawa", rng=3, tree="line")
    np.testing.assert_array_equal(ours.answers, plain.answers)
    assert ours.route == plain.route


def test_a_parts_release_fits_the_public_counts_scoped_inside_it():
    """The records of a part are passed on: a constraint whose scope lies inside the part is a
    count the part's histogram determines, and the release is fitted to it."""
    k = 8
    north, south = {0, 1, 2}, {3, 4, 5}
    scoped = bt.constraints.count_queries(k, [[0, 1], [5]], names=["n-low", "s-high"], scopes=[north, south])
    acct = BudgetAccountant(1.0, policies.line(k), constraints=scoped)
    group = acct.parallel({"north": north, "south": south}, label="regions")
    assert group.label == "regions"
    x = np.zeros(k, int)
    x[[1, 2, 6]] = 1
    assert group.answer("north", wl.prefix(k), x, 0.5, rng=0, mechanism="identity").public_counts == {"n-low": 1}
    assert acct.history == (bt.budget.Spend(0.5, None, "regions", "north"),)


def test_a_critical_constraint_counting_two_parts_refuses_the_group():
    """A scope inside the parts' union that meets two of them refuses the group (no record outside
    every part is needed); one that meets no part ties none together."""
    k = 8
    parts = {"north": {0, 1, 2}, "south": {3, 4, 5}}
    two = bt.constraints.count_queries(k, [[0, 1]], names=["low"], scopes=[{0, 3}])
    assert _refusal(lambda: BudgetAccountant(1.0, policies.line(k), constraints=two).parallel(parts)) == (
        "parallel composition is refused: the public constraint 'low' counts records of parts 'north' and 'south', and "
        "a move along an edge of line(8) changes it, so one neighbour can differ in both (He et al. Thm 4.3 needs every "
        "such constraint to count records of one part only). Nothing was released; charge the releases sequentially, "
        "or give the constraint a scope inside one part")
    three = {**parts, "west": {6}}
    assert "parts 'north' and 'south'" in _refusal(
        lambda: BudgetAccountant(1.0, policies.line(k), constraints=two).parallel(three))
    elsewhere = bt.constraints.count_queries(k, [[0, 1]], names=["low"], scopes=[{6, 7}])
    assert BudgetAccountant(1.0, policies.line(k), constraints=elsewhere).parallel(parts).charge == 0.0
