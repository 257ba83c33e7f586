"""The plain release: the linear strategy of lowest analytic error, chosen from the workload alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from blowfish_te import workloads as wl
from blowfish_te.mechanisms import DAWA, HB, Auto, GreedyH, Identity, Optimized, OrderedHierarchical, plain

pytestmark = pytest.mark.core


def test_aggregation_gain_is_the_error_ratio_of_cells_to_hierarchy():
    # one query: a hundredth of the total of 4096 cells; HB answers it from its root
    total = wl.from_matrix(0.01 * np.ones((1, 4096)))
    probe = wl.evenly_spaced_queries(total, plain.PROBE_QUERIES)
    cells, hierarchy = plain.probe_error(Identity(), total, probe), plain.probe_error(HB(), total, probe)
    assert cells == pytest.approx(4096 * 1e-4)
    assert 0 < hierarchy < 1
    assert plain.aggregation_gain(total) == pytest.approx(cells / hierarchy)
    assert plain.aggregation_gain(wl.identity(64)) == 1.0  # no query sums cells: nothing to gain


def test_aggregation_gain_of_a_workload_no_noise_reaches_is_one():
    nothing = wl.from_matrix(np.zeros((2, 8)))
    assert plain.aggregation_gain(nothing) == 1.0


def test_a_strategy_without_a_linear_reconstruction_has_infinite_probe_error():
    class Opaque(Identity, register=False):
        def reconstruction_frobenius_sq(self, workload, strategy):
            return None

    histogram = wl.identity(16)
    assert plain.probe_error(Opaque(), histogram, histogram) == math.inf
    assert isinstance(plain.lowest_error(histogram, (Opaque, HB)), HB)


def test_greedy_h_is_a_candidate_up_to_its_bucket_limit():
    at_limit = wl.prefix(plain.MAX_GREEDY_BUCKETS)
    assert isinstance(plain.lowest_error(at_limit, (GreedyH,)), GreedyH)
    above = wl.prefix(plain.MAX_GREEDY_BUCKETS + 1)
    assert isinstance(plain.lowest_error(above, (GreedyH, Identity)), Identity)


@pytest.mark.slow
def test_the_plain_strategy_is_auto_s_choice_per_workload():
    mechanism = DAWA()
    assert isinstance(plain.plain_strategy(mechanism, wl.identity(256)), Identity)
    prefix = wl.prefix(4096)  # its optimised strategy ships with the package: no planning
    chosen = plain.plain_strategy(mechanism, prefix)
    assert isinstance(chosen, Optimized)
    assert chosen.expected_error(prefix, 1.0) == Auto().expected_error(prefix, 1.0)
    assert chosen.expected_error(prefix, 1.0) < HB().expected_error(prefix, 1.0)
    assert plain.plain_strategy(mechanism, prefix) is chosen  # planned once per workload
    assert isinstance(plain.plain_strategy(mechanism, wl.identity(256)), Identity)


def test_identity_wins_a_tie_with_auto_s_choice(monkeypatch):
    # GreedyH's strategy on a histogram is the identity: the same error, and only Identity's
    # noise can be smoothed afterwards
    histogram = wl.identity(64)
    assert GreedyH().expected_error(histogram, 1.0) == pytest.approx(Identity().expected_error(histogram, 1.0))
    # where a Blowfish-native mechanism wins under unbounded DP, auto's choice for unit changes is planned
    monkeypatch.setattr(plain, "best_plan_under", lambda workload, policy, auto=None: (OrderedHierarchical(), None))
    monkeypatch.setattr(Auto, "best", lambda self, workload, epsilon=1.0: GreedyH())
    assert isinstance(plain.best_linear(histogram), Identity)
    assert isinstance(plain.best_linear(wl.prefix(64)), GreedyH)  # a real gap keeps auto's choice


def test_workload_classes():
    assert plain.workload_class(wl.identity(64)) == "cells"
    assert plain.workload_class(wl.prefix(4096)) == "ranges"
    assert plain.workload_class(wl.identity((16, 16))) == "cells"
    assert plain.workload_class(wl.dpbench_ranges((32, 32), 200, rng=0)) == "ranges"
    # the gain decides, against the threshold of the domain's dimension
    assert plain.workload_class(wl.identity(8), gain=plain.CELLS_GAIN - 1e-9) == "cells"
    assert plain.workload_class(wl.identity(8), gain=plain.CELLS_GAIN) == "ranges"
    assert plain.workload_class(wl.identity((4, 4)), gain=plain.GRID_CELLS_GAIN) == "ranges"


def test_best_plan_under_a_policy_is_auto_s_route_with_identity_on_ties():
    from blowfish_te import policies
    from blowfish_te.routes import plan_routes

    line = policies.line(64)
    mechanism, chosen = plain.best_plan_under(wl.prefix(64), line)
    auto = plan_routes(wl.prefix(64), line, 1.0, Auto()).chosen
    assert chosen.expected_mse == pytest.approx(auto.expected_mse)
    assert mechanism is chosen.mechanism
    cells, route = plain.best_plan_under(wl.identity(64), policies.unbounded(64))
    assert isinstance(cells, Identity)  # auto compares identity first, and GreedyH ties with it on a histogram
    greedy_first = Auto(candidates=("greedyh", "identity"))
    assert plan_routes(wl.identity(64), policies.unbounded(64), 1.0, greedy_first).chosen.mechanism.name == "greedyh"
    cells, route = plain.best_plan_under(wl.identity(64), policies.unbounded(64), greedy_first)
    assert isinstance(cells, Identity) and route.expected_mse == 2.0  # the tie goes to Identity all the same


TWO_D = ("dawa", "agrid", "ugrid", "privtree")


@pytest.mark.slow
@pytest.mark.parametrize("name", TWO_D)
def test_every_2d_mechanism_falls_back_to_the_optimised_strategy_on_dpbench_rectangles(name, monkeypatch):
    """The plain route of every 2-D data-dependent mechanism on DPBench's 2000 rectangles over
    128² is ``auto``'s choice — the stored optimised strategy —, with its error, and the release
    on the fallback route is that strategy's release at the rest of ε."""
    from blowfish_te import mechanisms as M
    from blowfish_te.selection import Decision, Features

    w = wl.dpbench_ranges((128, 128), 2000, rng=0)
    mech = M.get_mechanism(name)
    chosen = plain.plain_strategy(mech, w)
    assert isinstance(chosen, Optimized)
    assert chosen.expected_error(w, 0.1) == Optimized().expected_error(w, 0.1) < HB().expected_error(w, 0.1)
    x = np.random.default_rng(0).integers(0, 50, 128 * 128)
    spent = 0.003
    features = Features(total=float(x.sum()), cost=0.0, cells=x.size, epsilon=0.1, spent=spent, total_public=False)
    monkeypatch.setattr(type(mech), "check", lambda self, workload, x, epsilon, gen: Decision("plain", "test", 2.0, features))
    answers = mech.run(w, x, 0.1, np.random.default_rng(4))
    assert np.array_equal(answers, Optimized().run(w, x, 0.1 - spent, np.random.default_rng(4)))
