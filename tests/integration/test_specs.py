"""String specs of policies and workloads, and the exception hierarchy."""

import numpy as np
import pytest

import blowfish_te as bt
from blowfish_te import errors, policies
from blowfish_te import workloads as wl
from blowfish_te.evaluation import SuiteError

pytestmark = pytest.mark.core


@pytest.mark.parametrize("spec, shape, expected", [
    ("unbounded", 8, policies.unbounded(8)),
    ("complete", (3, 4), policies.complete((3, 4))),
    ("attribute", (3, 4), policies.attribute((3, 4))),
    ("line", 8, policies.line(8)),
    ("threshold:3", 8, policies.threshold(8, 3)),
    ("threshold:full", 8, policies.complete(8)),
    ("grid:2", (4, 5), policies.grid((4, 5), 2)),
])
def test_policy_specs_build_the_named_graph(spec, shape, expected):
    built = policies.from_spec(spec, shape)
    assert built.shape == expected.shape and built.has_bottom == expected.has_bottom
    assert np.array_equal(built.edges, expected.edges)


@pytest.mark.parametrize("spec, shape, message", [
    ("circle", 8, "unknown policy 'circle'; allowed: unbounded"),
    ("line:2", 8, "unknown policy 'line:2'"),
    ("threshold", 8, "unknown policy 'threshold'"),
    ("threshold:0", 8, "θ must be a positive integer or full"),
    ("grid:x", (3, 3), "θ must be a positive integer"),
    ("line", (3, 3), "needs a 1-D domain"),
    ("threshold:2", (3, 3), "use grid:θ"),
    ("line", 0, "policy 'line'"),
    (3, 8, "must be a string"),
])
def test_bad_policy_specs_raise_one_spec_error(spec, shape, message):
    with pytest.raises(bt.SpecError, match=message):
        policies.from_spec(spec, shape)


def test_workload_specs():
    assert np.array_equal(wl.from_spec("prefix", 6).dense(), wl.prefix(6).dense())
    assert np.array_equal(wl.from_spec("identity", (2, 3)).dense(), np.eye(6))
    assert wl.from_spec("all_ranges", 5).num_queries == 15
    ranges = wl.from_spec("random_ranges:40", 32, seed=7)
    assert np.array_equal(ranges.dense(), wl.random_ranges(32, 40, rng=7).dense())
    table = wl.from_spec({"kind": "random_rects", "queries": 9, "seed": 2}, (5, 6))
    assert np.array_equal(table.dense(), wl.random_rects((5, 6), 9, rng=2).dense())


@pytest.mark.parametrize("spec, shape, message", [
    ("cubes", 8, "unknown workload 'cubes'; allowed: identity"),
    ("random_ranges", 8, "give the number of queries"),
    ("random_ranges:0", 8, "positive number of queries"),
    ("prefix:4", 8, "only random kinds take a count"),
    ("all_ranges", (3, 3), "needs a 1-D domain"),
    ("random_rects:5", 8, "needs a 2-D domain"),
    (["prefix"], 8, "must be a string"),
])
def test_bad_workload_specs_raise_one_spec_error(spec, shape, message):
    with pytest.raises(bt.SpecError, match=message):
        wl.from_spec(spec, shape)


def test_every_library_error_is_a_blowfish_error_and_a_value_error():
    for cls in (bt.CyclicPolicyError, bt.BudgetExceededError, bt.SpecError, SuiteError):
        assert issubclass(cls, errors.BlowfishError) and issubclass(cls, ValueError)
    with pytest.raises(errors.BlowfishError):
        bt.transform(policies.threshold(6, 2))
