"""The plain release: the linear strategy of lowest analytic error, chosen from the workload alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from blowfish_te import workloads as wl
from blowfish_te.mechanisms import DAWA, HB, GreedyH, Identity, plain


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


def test_the_plain_strategy_is_chosen_per_workload():
    mechanism = DAWA()
    assert isinstance(plain.plain_strategy(mechanism, wl.identity(256)), Identity)
    assert isinstance(plain.plain_strategy(mechanism, wl.prefix(4096)), HB)
    assert isinstance(plain.plain_strategy(mechanism, wl.identity(256)), Identity)
