"""Choices kept across processes: ``auto`` plans a (workload, policy, route) once, stores which
candidate won and every candidate's error at ε = 1, and a later plan — at any ε — plans the winner
alone, checks it against the record and lists the others from it; the tuned Ordered Hierarchical
mechanism keeps its settings the same way. A damaged or stale record costs a full plan, never a
different release. Each "new process" here gets fresh mechanism instances and caches."""

from __future__ import annotations

import json

import numpy as np
import pytest

from blowfish_te import answer, plan, policies, routes
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import Auto, base, ordered
from blowfish_te.strategies import store as store_lib


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", str(tmp_path))
    return tmp_path


def _new_process(monkeypatch):
    """Fresh default mechanism instances and shared caches, as in a new interpreter."""
    monkeypatch.setattr(base, "_DEFAULTS", {})
    monkeypatch.setattr(ordered, "_EXACT_ERRORS", ordered.IdentityCache())


def _case():
    return wl.prefix(64), policies.threshold(64, 4)


def _listing(p):
    return [(p._label(c), c.expected_mse, c.floor) for c in p.considered]


def test_a_stored_choice_lists_what_a_full_plan_lists_at_any_epsilon(cache, monkeypatch):
    workload, policy = _case()
    full = plan(workload, policy, 1.0, mechanism=Auto())
    assert len(list(cache.glob("*.json"))) == 2  # the choice and the tuned settings
    _new_process(monkeypatch)
    again = plan(workload, policy, 1.0, mechanism=Auto())
    assert again.chosen.expected_mse == full.chosen.expected_mse and again._label(again.chosen) == full._label(full.chosen)
    assert "read from the plan store" in again.reason
    assert _listing(again) == _listing(full)
    _new_process(monkeypatch)
    at_half = plan(workload, policy, 0.5, mechanism=Auto())
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", "off")
    _new_process(monkeypatch)
    fresh_half = plan(workload, policy, 0.5, mechanism=Auto())
    assert "plan store" not in fresh_half.reason
    for (label, mse, floor), (want_label, want_mse, want_floor) in zip(_listing(at_half), _listing(fresh_half)):
        assert label == want_label
        assert mse == pytest.approx(want_mse, rel=1e-12) if want_mse is not None else mse is None
        assert floor == pytest.approx(want_floor, rel=1e-12) if want_floor is not None else floor is None


def test_a_stored_choice_plans_the_winner_alone_and_releases_as_a_full_plan(cache, monkeypatch):
    workload, policy = _case()
    x = np.random.default_rng(0).integers(0, 20, 64)
    first = answer(workload, x, policy, 1.0, mechanism=Auto(), rng=7)
    _new_process(monkeypatch)
    seen = []
    real_plan_routes = routes.plan_routes
    monkeypatch.setattr(routes, "plan_routes", lambda w, p, e, m, *a: seen.append(m.name) or real_plan_routes(w, p, e, m, *a))
    second = answer(workload, x, policy, 1.0, mechanism=Auto(), rng=7)
    assert seen == [first.mechanism]  # the winner alone (a full plan plans every candidate)
    np.testing.assert_array_equal(second.answers, first.answers)
    assert second.route == first.route and second.expected_mse == first.expected_mse


@pytest.mark.parametrize("damage", [
    "not json", json.dumps([1, 2]), json.dumps({"winner": {"mechanism": "no_such"}}),
    "stale error",
])
def test_a_damaged_or_stale_choice_is_planned_again(cache, monkeypatch, damage):
    workload, policy = _case()
    full = plan(workload, policy, 1.0, mechanism=Auto())
    key = store_lib.choice_key(Auto(), workload, policy, "auto")
    path = cache / f"{key}.json"
    if damage == "stale error":
        record = json.loads(path.read_text())
        record["winner"]["mse"] *= 1.5
        damage = json.dumps(record)
    path.write_text(damage)
    _new_process(monkeypatch)
    again = plan(workload, policy, 1.0, mechanism=Auto())
    assert "plan store" not in again.reason
    assert _listing(again) == _listing(full)
    assert json.loads(path.read_text())["winner"]["label"] == full.chosen.label  # rewritten


def test_choices_depend_on_the_chooser_workload_policy_and_route(cache):
    workload, policy = _case()
    key = store_lib.choice_key(Auto(), workload, policy, "auto")
    assert key == store_lib.choice_key(Auto(), wl.prefix(64), policies.threshold(64, 4), "auto")
    others = [store_lib.choice_key(Auto(budget=1.0), workload, policy, "auto"),
              store_lib.choice_key(Auto(candidates=("hb", "identity")), workload, policy, "auto"),
              store_lib.choice_key(Auto(), wl.identity(64), policy, "auto"),
              store_lib.choice_key(Auto(), workload, policies.line(64), "auto"),
              store_lib.choice_key(Auto(), workload, policy, "exact")]
    assert len({key, *others}) == 6
    assert store_lib.choice_key(Auto(), workload, policies.line(2**23), "auto") is None  # too many edges to digest


def test_nothing_is_written_with_the_cache_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", "off")
    workload, policy = _case()
    plan(workload, policy, 1.0, mechanism=Auto())
    assert list(tmp_path.iterdir()) == []


def test_tuned_settings_are_read_back_instead_of_tuned(cache, monkeypatch):
    workload, policy = _case()
    mech = ordered.TunedOrderedHierarchical()
    settings = mech._settings(workload, policy)
    _new_process(monkeypatch)
    monkeypatch.setattr(ordered.TunedOrderedHierarchical, "_tune", lambda *a: pytest.fail("tuned again"))
    assert ordered.TunedOrderedHierarchical()._settings(workload, policy) == settings


@pytest.mark.parametrize("stored", [
    [4, 1.5, 4, None], [4, -0.1, 4, None], [4, 1.0, 4, None], [4, "0.5", 4, None], [True, 0.5, 4, None],
    [0, 0.5, 4, None], [4, 0.5, 1, None], [4, 0.5, 4, 1], [4, 0.5], "0.5", None,
])
def test_stored_settings_outside_their_ranges_are_tuned_again(cache, monkeypatch, stored):
    workload, policy = _case()
    mech = ordered.TunedOrderedHierarchical()
    key = store_lib.strategy_key(f"{mech.name}-settings", workload, policy, (mech.fanout,))
    (cache / f"{key}.json").write_text(json.dumps({"settings": stored}))
    tuned = []
    real = ordered.TunedOrderedHierarchical._tune
    monkeypatch.setattr(ordered.TunedOrderedHierarchical, "_tune", lambda self, w, p: tuned.append(1) or real(self, w, p))
    settings = mech._settings(workload, policy)
    assert tuned == [1]
    assert settings[1] is None or 0.0 < settings[1] < 1.0


def test_a_plan_refuses_a_share_outside_zero_and_one():
    mech = ordered.OrderedHierarchical()
    policy = policies.threshold(64, 4)
    for share in (1.5, -0.5):
        with pytest.raises(ValueError, match=r"share of ε for the S nodes must lie in \[0, 1\]"):
            mech._plan(policy, 1.0, None, share)


@pytest.mark.parametrize("name", ["identity:4096", "prefix:256", "all_ranges:512", "dpbench_ranges:2000@64x64",
                                  "dpbench_ranges:2000@256x256"])
def test_the_shipped_choices_of_the_standard_workloads_are_read_as_they_are(cache, monkeypatch, name):
    """Each standard workload's choice under each standard policy ships with the package and still
    reproduces its winner's error (a stale record would be planned again, and written)."""
    from blowfish_te.strategies.standard import standard_policies, standard_workloads

    workload = standard_workloads()[name]()
    for spec, policy in standard_policies(workload).items():
        _new_process(monkeypatch)
        chosen = plan(workload, policy, 0.3, mechanism=Auto())
        assert "read from the plan store" in chosen.reason, (name, spec)
    assert list(cache.iterdir()) == []  # read from the package, nothing planned anew


def test_choices_that_compare_a_plug_in_are_not_kept(cache, monkeypatch):
    """A plug-in's code can change under the same name, so its stored error could hide a better
    choice: a choice that compares one is planned every time."""
    from blowfish_te.mechanisms import MECHANISMS
    from blowfish_te.mechanisms.base import LinearMechanism

    class PlugIn(LinearMechanism, register=False):  # defined outside the library, as a plug-in is
        name = "plug_in_identity"

        def strategy(self, workload):
            from blowfish_te.strategies import IdentityStrategy

            return IdentityStrategy(workload.domain)

    monkeypatch.setitem(MECHANISMS, PlugIn.name, PlugIn)
    workload, policy = _case()
    chosen = plan(workload, policy, 1.0, mechanism=Auto())
    assert any(c.mechanism.name == PlugIn.name for c in chosen.considered)
    tuned = ordered.TunedOrderedHierarchical()
    settings = store_lib.strategy_key(f"{tuned.name}-settings", workload, policy, (tuned.fanout,))
    assert [p.stem for p in cache.glob("*.json")] == [settings]  # the tuned settings alone, no choice
    _new_process(monkeypatch)
    assert "plan store" not in plan(workload, policy, 1.0, mechanism=Auto()).reason


def test_plans_under_policies_past_the_edge_cap_are_not_stored_but_strategies_are(cache, monkeypatch):
    """A plan's record under a policy of more than MAX_FINGERPRINT_EDGES edges is not kept (its
    key would list every edge); the optimised strategies' keys do not depend on the cap."""
    monkeypatch.setattr(store_lib, "MAX_FINGERPRINT_EDGES", 10)
    workload, policy = _case()
    assert policy.num_edges > 10
    assert store_lib.choice_key(Auto(), workload, policy, "auto") is None
    assert store_lib.strategy_key("optimized", workload, policy, ()) is not None
    ordered.TunedOrderedHierarchical()._settings(workload, policy)
    assert list(cache.glob("*.json")) == []


def test_a_data_dependent_fallback_reads_the_shipped_choice(cache, monkeypatch):
    """The plain release a data-dependent mechanism falls back to is auto's stored choice: only
    the winner is planned (UGrid's fallback on 128² rectangles planned every candidate, GreedyH's
    2.7 s included, inside the release)."""
    from blowfish_te.mechanisms import HB, GreedyH
    from blowfish_te.mechanisms.plain import best_linear
    from blowfish_te.strategies.standard import standard_workloads

    _new_process(monkeypatch)
    for loser in (HB, GreedyH):
        monkeypatch.setattr(loser, "expected_error", lambda *a, **k: pytest.fail("a losing candidate was planned"))
    chosen = best_linear(standard_workloads()["dpbench_ranges:2000@128x128"]())
    assert chosen.name == "optimized"
    assert list(cache.iterdir()) == []
