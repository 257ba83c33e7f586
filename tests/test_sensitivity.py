import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.spatial.distance import pdist

from blowfish_te import policies, sensitivity
from blowfish_te import workloads as wl
from blowfish_te.policies import SMALL_CLIQUE
from blowfish_te.testing import brute_sensitivity, dense_boxes

from tests.helpers import graphs

pytestmark = pytest.mark.core


@pytest.mark.parametrize("k", [2, 3, 5, 8, 16, 33])
def test_spec_table(k):
    """Exact sensitivities: identity, prefix and all ranges under complete, line, threshold and unbounded."""
    full = (k + 1) ** 2 // 4
    for w, complete, line, unbounded in [
        (wl.identity(k), 2, 2, 1),
        (wl.prefix(k), k - 1, 1, k),
        (wl.all_ranges(k), full, k, full),
    ]:
        assert sensitivity(w, policies.complete(k)) == complete
        assert sensitivity(w, policies.line(k)) == line
        assert sensitivity(w, policies.unbounded(k)) == unbounded
    for theta in range(1, k):
        assert sensitivity(wl.identity(k), policies.threshold(k, theta)) == 2
        assert sensitivity(wl.prefix(k), policies.threshold(k, theta)) == theta
        if theta <= (k + 1) / 2:
            assert sensitivity(wl.all_ranges(k), policies.threshold(k, theta)) == theta * (k + 1 - theta)


def _random_workload(kind: str, k: int, seed: int):
    rng = np.random.default_rng(seed)
    if kind == "ranges":
        w = wl.random_ranges(k, int(rng.integers(1, 8)), rng=rng)
        return w, dense_boxes((k,), w.lo, w.hi)
    if kind == "all_ranges":
        w = wl.all_ranges(k)
        return w, w.dense()
    if kind == "prefix":
        return wl.prefix(k), np.tril(np.ones((k, k)))
    if kind == "binary":
        mat = rng.integers(0, 2, (int(rng.integers(1, 6)), k))
    else:
        mat = rng.integers(-3, 4, (int(rng.integers(1, 6)), k))
    return wl.from_matrix(mat), mat.astype(float)


@given(graphs(max_cells=5), st.sampled_from(["ranges", "all_ranges", "prefix", "binary", "integer"]), st.integers(0, 2**32 - 1))
def test_sensitivity_equals_brute_force_over_neighbouring_databases(case, kind, seed):
    k, edges = case
    policy = policies.from_edges(k, np.array(edges, dtype=int).reshape(-1, 2))
    w, d = _random_workload(kind, k, seed)
    assert sensitivity(w, policy) == pytest.approx(brute_sensitivity(d, edges, k))


@pytest.mark.slow
@given(st.integers(1, 6), st.integers(1, 7), st.integers(0, 2**32 - 1))
def test_structured_policies_against_brute_force(k, theta, seed):
    shapes = [(k,), (2, k)]
    for shape in shapes:
        w = wl.random_rects(shape, 5, rng=seed)
        d = dense_boxes(shape, w.lo, w.hi)
        labels = np.random.default_rng(seed).integers(0, 3, shape)
        for policy in [
            policies.complete(shape),
            policies.grid(shape, theta),
            policies.attribute(shape),
            policies.partition(labels),
            policies.unbounded(shape),
        ]:
            edges = [tuple(e) for e in policy.edges]
            assert sensitivity(w, policy) == brute_sensitivity(d, edges, w.size, max_records=1)


def test_clique_shortcuts_against_all_pairs_at_moderate_size():
    """The complete-graph paths (per-offset tables, Gram blocks, city-block distances) on K = 300."""
    k = 300
    rng = np.random.default_rng(3)
    for w in [wl.random_ranges(k, 200, rng=rng), wl.prefix(k), wl.identity(k)]:
        d = w.dense()
        expected = pdist(d.T, "cityblock").max()
        assert sensitivity(w, policies.complete(k)) == expected
        assert sensitivity(wl.from_matrix(d), policies.complete(k)) == expected
    mixed = rng.integers(-4, 5, (30, k)).astype(float)
    assert sensitivity(wl.from_matrix(mixed), policies.complete(k)) == pdist(mixed.T, "cityblock").max()
    sub = np.sort(rng.choice(k, 40, replace=False))
    labels = np.zeros(k, int)
    labels[sub] = 1
    w = wl.random_ranges(k, 50, rng=rng)
    d = w.dense()
    expected = max(pdist(d[:, sub].T, "cityblock").max(), pdist(d[:, labels == 0].T, "cityblock").max())
    assert sensitivity(w, policies.partition(labels)) == expected


def test_a_policy_without_edges_has_zero_sensitivity():
    assert sensitivity(wl.prefix(5), policies.partition([0, 1, 2, 3, 4])) == 0
    assert sensitivity(wl.prefix(1), policies.line(1)) == 0


def test_partition_totals_are_free():
    """He et al. §5: the histogram of the partition itself has sensitivity 0 under G_P."""
    for size in (5, SMALL_CLIQUE + 1):  # blocks listed pair by pair, and blocks kept as cliques
        labels = np.repeat(np.arange(4), size)
        totals = wl.from_matrix((labels[None, :] == np.arange(4)[:, None]).astype(float))
        assert sensitivity(totals, policies.partition(labels)) == 0
        assert sensitivity(totals, policies.complete(labels.size)) == 2


def test_mismatched_sizes_are_refused():
    with pytest.raises(ValueError, match="cells"):
        sensitivity(wl.prefix(5), policies.line(6))
    with pytest.raises(ValueError, match="domain"):
        sensitivity(wl.identity((2, 6)), policies.grid((3, 4)))
    with pytest.raises(TypeError, match="policy must be a blowfish_te Policy, got str"):
        sensitivity(wl.prefix(5), "line")


def test_a_grid_workload_takes_a_policy_over_its_flattened_cells():
    """A 1-D policy over K cells applies to a K-cell grid workload cell by cell (flat order)."""
    w = wl.random_rects((3, 4), 6, rng=1)
    d = w.dense()
    edges = policies.line(12)
    assert sensitivity(w, edges) == max(np.abs(d[:, i] - d[:, i + 1]).sum() for i in range(11))


@given(graphs(max_cells=6))
def test_identity_closed_form_sensitivity_matches_brute_force(case):
    """Identity reads Δ_G(I) off the edge blocks; it must equal the brute-force maximum."""
    from blowfish_te.mechanisms import Identity

    k, edges = case
    policy = policies.from_edges(k, np.array(edges, dtype=int).reshape(-1, 2))
    mech = Identity()
    assert mech.strategy_sensitivity(mech.strategy(wl.identity(k)), policy) == brute_sensitivity(np.eye(k), edges, k)


@pytest.mark.parametrize("policy", [policies.line(7), policies.threshold(7, 3), policies.grid((3, 4)), policies.complete(5),
                                    policies.unbounded(6), policies.attribute((2, 3)), policies.partition([0, 1, 1, 2, 2, 2])])
def test_identity_closed_form_sensitivity_on_structured_policies(policy):
    from blowfish_te.mechanisms import Identity

    mech = Identity()
    assert mech.strategy_sensitivity(mech.strategy(wl.identity(policy.shape)), policy) == sensitivity(wl.identity(policy.shape), policy)


@pytest.mark.parametrize("name", ["identity", "hb", "quadtree"])
def test_grid_policies_cost_hierarchies_what_bounded_dp_costs(name):
    """Two adjacent cells on either side of the first split share only the root: the worst pair
    of a grid policy is already the worst pair of bounded DP, so Δ_grid = Δ_complete (= 2 Δ for
    the identity). Only strategies whose columns for neighbouring cells overlap gain from a grid policy."""
    from blowfish_te.mechanisms import mechanism_class

    strategy = mechanism_class(name)().strategy(wl.random_rects((16, 16), 50, rng=0))
    bounded = sensitivity(strategy, policies.complete((16, 16)))
    # the three come from different pairs of columns, summed in different orders: equal to rounding
    assert sensitivity(strategy, policies.grid((16, 16), 1)) == pytest.approx(bounded, rel=1e-12)
    assert sensitivity(strategy, policies.grid((16, 16), 4)) == pytest.approx(bounded, rel=1e-12)
    assert bounded > sensitivity(strategy, policies.unbounded((16, 16)))
