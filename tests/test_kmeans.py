"""k-means under Blowfish: the per-iteration sensitivity against brute force over every policy
edge, the boundary move He et al. §6 miss, and the auditor on one iteration."""

import numpy as np
import pytest

from blowfish_te import audit, kmeans, policies
from blowfish_te.kmeans import _points, assign, cluster_statistics, step_sensitivity

pytestmark = pytest.mark.core


def _brute(policy, centres, centred=True):
    """max over edges of the L1 change of (sizes, sums) when one record moves along it."""
    points = _points(policy.shape)
    k = policy.size
    best_size = best_sum = 0.0
    for u, v in policy.edges.tolist():
        x, y = np.zeros(k), np.zeros(k)
        x[u] = 1
        if v < k:
            y[v] = 1
        sx, tx = cluster_statistics(x, points, centres, centred)
        sy, ty = cluster_statistics(y, points, centres, centred)
        best_size = max(best_size, np.abs(sx - sy).sum())
        best_sum = max(best_sum, np.abs(tx - ty).sum())
    return best_size, best_sum


@pytest.mark.parametrize("policy", [policies.threshold(20, 3), policies.line(20), policies.complete(20),
                                    policies.unbounded(20), policies.grid((6, 5), 2), policies.complete((4, 5))],
                         ids=lambda p: p.name)
def test_step_sensitivity_is_the_largest_change_over_policy_edges(policy):
    gen = np.random.default_rng(0)
    for _ in range(3):
        centres = gen.uniform(0, 1, size=(3, policy.ndim)) * (np.array(policy.shape) - 1)
        assert step_sensitivity(policy, centres) == pytest.approx(_brute(policy, centres))


def test_boundary_move_changes_raw_sums_by_101():
    """1-D, θ = 1, centres 25 and 75: the move 50 → 51 crosses the boundary and changes the raw
    sums by 50 + 51 = 101, not the 2θ = 2 of He et al. Lemma 6.1."""
    policy = policies.threshold(101, 1)
    centres = np.array([[25.0], [75.0]])
    points = _points((101,))
    assert assign(points, centres)[50] == 0 and assign(points, centres)[51] == 1
    x, y = np.zeros(101), np.zeros(101)
    x[50], y[51] = 1, 1
    _, raw_x = cluster_statistics(x, points, centres, centred=False)
    _, raw_y = cluster_statistics(y, points, centres, centred=False)
    assert np.abs(raw_x - raw_y).sum() == 101
    assert step_sensitivity(policy, centres, "paper") == (2.0, 2.0)
    assert step_sensitivity(policy, centres) == (2.0, 49.0)   # centred: |50 − 25| + |51 − 75|


def _iteration_sampler(policy, centres, epsilon, how):
    """One iteration's release (noisy sizes, then sums) as the mechanism computes it."""
    points = _points(policy.shape)
    d_size, d_sum = step_sensitivity(policy, centres, how)

    def sample(h, n, gen):
        sizes, sums = cluster_statistics(h.astype(float), points, centres, centred=how == "exact")
        base = np.concatenate([sizes, sums.ravel()])
        noise = np.concatenate([gen.laplace(0, d_size / (epsilon / 2), size=(n, sizes.size)),
                                gen.laplace(0, d_sum / (epsilon / 2), size=(n, sums.size))], axis=1)
        return base + noise

    return sample


def test_auditor_breaks_the_papers_sensitivity_and_passes_ours():
    policy = policies.threshold(101, 1)
    centres = np.array([[25.0], [75.0]])
    x = np.zeros(101, dtype=np.int64)
    x[[10, 50, 90]] = 1
    y = x.copy()
    y[50], y[51] = 0, 1   # one record moves along an edge of the policy
    kwargs = dict(n_select=2000, n_detect=20000, rng=5)
    paper = audit.audit_histograms(_iteration_sampler(policy, centres, 1.0, "paper"), x, y, 1.0, **kwargs)
    assert not paper.passed and paper.epsilon_lower > 5
    ours = audit.audit_histograms(_iteration_sampler(policy, centres, 1.0, "exact"), x, y, 1.0, **kwargs)
    assert ours.passed


def test_private_kmeans_approaches_lloyd_at_large_epsilon():
    gen = np.random.default_rng(1)
    shape = (32, 32)
    x = np.zeros(shape, dtype=np.int64)
    for cx, cy in [(6, 6), (25, 8), (8, 24), (26, 26)]:
        pts = np.clip(np.rint(gen.normal([cx, cy], 2.0, size=(2000, 2))), 0, 31).astype(int)
        np.add.at(x, (pts[:, 0], pts[:, 1]), 1)
    start = np.array([[2.0, 2.0], [29.0, 3.0], [3.0, 29.0], [29.0, 29.0]])
    base = kmeans.lloyd(x, shape, centres=start).objective
    private = kmeans.blowfish_kmeans(x, policies.grid(shape, 2), 1e4, rng=0, centres=start)
    assert private.objective == pytest.approx(base, rel=0.01)
    noisy = kmeans.blowfish_kmeans(x, policies.grid(shape, 2), 0.05, rng=0, centres=start)
    assert noisy.objective > base
    again = kmeans.blowfish_kmeans(x, policies.grid(shape, 2), 0.05, rng=0, centres=start)
    np.testing.assert_array_equal(noisy.centres, again.centres)


@pytest.mark.parametrize("kwargs,match", [
    (dict(epsilon=0.0), "epsilon"), (dict(k=0), "k must"), (dict(sensitivity="theta"), "sensitivity must"),
    (dict(centres=[[1.0]]), "centres must have shape"),
])
def test_bad_arguments(kwargs, match):
    args = dict(x=np.ones(10, int), policy=policies.line(10), epsilon=1.0) | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        kmeans.blowfish_kmeans(**args)


def test_kmeans_without_a_seed_draws_only_hardened_noise_and_says_so():
    x = np.random.default_rng(0).integers(0, 20, size=(12, 12))
    policy = policies.grid((12, 12), 2)
    secure = kmeans.blowfish_kmeans(x, policy, 1.0, 3, 2)
    assert secure.secure and "discrete Laplace" in secure.sampler and "lattice" in secure.sampler
    seeded = kmeans.blowfish_kmeans(x, policy, 1.0, 3, 2, rng=0)
    assert not seeded.secure and "floating point" in seeded.sampler
