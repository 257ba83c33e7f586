"""Lower bounds on matrix-mechanism error: the SVD bound and its column-weighted refinement are
below the exact error of every strategy, under DP and under policies."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blowfish_te import plan, policies
from blowfish_te import workloads as wl
from blowfish_te.bounds import lower_bound, weighted_lower_bound

pytestmark = pytest.mark.core

STRATEGIES = ["identity", "laplace", "hb", "h2", "privelet", "greedyh"]


def _best_error(workload, policy, epsilon) -> float:
    """The lowest analytic total squared error of the library's linear strategies, every route."""
    return min(plan(workload, policy, epsilon, m).chosen.expected_mse * workload.num_queries for m in STRATEGIES)


def test_uniform_weights_are_the_svd_bound_and_ascent_only_raises_it():
    for workload, policy in [(wl.prefix(40), None), (wl.random_ranges(40, 60, rng=1), policies.threshold(40, 3)),
                             (wl.prefix(40), policies.line(40))]:
        svd = lower_bound(workload, 0.5, policy)
        assert weighted_lower_bound(workload, 0.5, policy, steps=0) == pytest.approx(svd, rel=1e-6)  # SVD vs Gram eigenvalues
        assert weighted_lower_bound(workload, 0.5, policy) >= svd * (1 - 1e-6)


def test_the_bound_is_tight_for_the_identity_workload():
    # ‖diag(√d)‖_* = Σ√d_j <= √K: the uniform weights are optimal and the identity strategy attains 2K/ε²
    assert weighted_lower_bound(wl.identity(12), 0.5) == pytest.approx(2 * 12 / 0.25)
    assert plan(wl.identity(12), policies.unbounded(12), 0.5, "identity").chosen.expected_mse * 12 == pytest.approx(2 * 12 / 0.25)


@pytest.mark.parametrize("policy", [None, "line", "threshold:4", "unbounded", "complete"])
def test_no_strategy_beats_the_weighted_bound(policy):
    k, eps = 48, 0.7
    workload = wl.prefix(k)
    bound = weighted_lower_bound(workload, eps, None if policy is None else policies.from_spec(policy, k))
    target = policies.unbounded(k) if policy is None else policies.from_spec(policy, k)
    assert bound <= _best_error(workload, target, eps) * (1 + 1e-9)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.integers(4, 14), st.integers(2, 12), st.integers(0, 2**16))
def test_random_workloads_never_beat_it(k, m, seed):
    gen = np.random.default_rng(seed)
    lo = gen.integers(0, k, m)
    hi = np.maximum(lo, gen.integers(0, k, m))
    workload = wl.ranges(k, lo, hi)
    for policy in (policies.unbounded(k), policies.line(k), policies.threshold(k, 2)):
        bound = weighted_lower_bound(workload, 1.0, None if policy.is_differential_privacy else policy, steps=20)
        assert bound <= _best_error(workload, policy, 1.0) * (1 + 1e-9)


def test_weighted_bound_arguments_are_named():
    with pytest.raises(ValueError, match="epsilon"):
        weighted_lower_bound(wl.prefix(8), 0.0)
    with pytest.raises(ValueError, match="steps"):
        weighted_lower_bound(wl.prefix(8), 1.0, steps=-1)
    with pytest.raises(ValueError, match="limit"):
        weighted_lower_bound(wl.prefix(4096), 1.0)
    with pytest.raises(ValueError, match="cells"):
        weighted_lower_bound(wl.prefix(8), 1.0, policies.line(9))


def test_ascent_finds_the_columns_that_matter():
    # under threshold:4 the prefix workload loads the policy's edges very unevenly: the weighted
    # bound is about 1.23x the SVD bound (a wrong ascent direction would stay at 1.0x)
    workload, policy = wl.prefix(64), policies.threshold(64, 4)
    assert weighted_lower_bound(workload, 1.0, policy) > 1.15 * lower_bound(workload, 1.0, policy)


@pytest.mark.parametrize("spec", ["unbounded", "complete", "line", "threshold:3"])
@pytest.mark.parametrize("rows", [8, None], ids=["fewer queries than cells", "all ranges"])
def test_policy_bound_is_the_svd_of_w_times_the_incidence(spec, rows):
    """From the m × m side or, with more queries than cells, the K × K side: the same bound."""
    k = 12
    dense = np.asarray(wl.all_ranges(k).matmat(np.eye(k)))
    workload = wl.all_ranges(k) if rows is None else wl.from_matrix(dense[:rows])
    policy = policies.from_spec(spec, k)
    incidence = np.asarray(policy.incidence().todense())
    singular = np.linalg.svd(np.asarray(workload.matmat(np.eye(k))) @ incidence, compute_uv=False)
    assert lower_bound(workload, 0.5, policy) == pytest.approx(2 * singular.sum() ** 2 / 0.25 / incidence.shape[1], rel=1e-7)
