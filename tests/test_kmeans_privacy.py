"""SuLQ k-means under a Blowfish policy (Blum, Dwork, McSherry, Nissim, PODS 2005; He,
Machanavajjhala, Ding, SIGMOD 2014, §6): the per-iteration sensitivities against brute force over
every neighbouring pair of histograms, the noise each iteration actually draws (scale, declared
sensitivity, sampler), the update and clipping of the centres, argument checks, and the
non-private Lloyd baseline and starting centres against hand computations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from blowfish_te import kmeans, noise, policies
from blowfish_te.kmeans import (
    _points,
    blowfish_kmeans,
    check_variant,
    cluster_statistics,
    initial_centres,
    lloyd,
    objective,
    step_sensitivity,
)
from blowfish_te.policies import CliqueEdges, OffsetEdges, PairEdges, Policy
from blowfish_te.secure import SecureRandom, sampler_name
from blowfish_te.testing import assert_laplace_noise, close, policy_neighbours, worst_replayed_cost

REAL_ADD_LAPLACE = noise.add_laplace


# ---------------------------------------------------------------------------------------------
# oracles written from the definitions


def _stats(x, shape, centres, centred=True):
    """Cluster sizes n_j = Σ_{c ∈ j} x_c and sums Σ_{c ∈ j} x_c (p_c − μ_j) (raw Σ x_c p_c when
    not ``centred``), every cell to its nearest centre in L2 with ties to the lowest index."""
    centres = np.asarray(centres, dtype=float)
    k, d = centres.shape
    sizes, sums = np.zeros(k), np.zeros((k, d))
    for c, p in enumerate(itertools.product(*[range(n) for n in shape])):
        d2 = [sum((p[i] - centres[j][i]) ** 2 for i in range(d)) for j in range(k)]
        j = d2.index(min(d2))
        sizes[j] += x[c]
        for i in range(d):
            sums[j, i] += x[c] * (p[i] - (centres[j][i] if centred else 0.0))
    return sizes, sums


def _objective(x, shape, centres):
    total = 0.0
    for c, p in enumerate(itertools.product(*[range(n) for n in shape])):
        total += x[c] * min(sum((a - b) ** 2 for a, b in zip(p, mu)) for mu in centres)
    return total


def _brute(policy, centres):
    """max over every pair of neighbouring histograms (one move along an edge, or a record added
    or removed under ⊥) of the L1 change of the sizes and of the centred sums. x has a record in
    every cell, so every move is possible; the statistics are linear, so this is the max over edges."""
    x = np.ones(policy.size, dtype=np.int64)
    sx, tx = _stats(x, policy.shape, centres)
    best_size = best_sum = 0.0
    for y in policy_neighbours(x, policy):
        sy, ty = _stats(y, policy.shape, centres)
        best_size = max(best_size, float(np.abs(sx - sy).sum()))
        best_sum = max(best_sum, float(np.abs(tx - ty).sum()))
    return best_size, best_sum


def _cells(shape, coords):
    return np.array(sorted(np.ravel_multi_index(tuple(np.array(coords).T), shape)), dtype=np.int64)


def _policies_1d():
    i64 = np.int64
    return [
        policies.line(7),
        policies.threshold(9, 3),
        policies.threshold(6, 5),  # θ >= k − 1: one clique
        policies.complete(6),
        policies.unbounded(7),
        policies.from_edges((6,), [[0, 6], [2, 4], [1, 5], [3, 6]]),  # ⊥ and cell edges in one block
        Policy((6,), [CliqueEdges(np.array([2, 3, 5], dtype=i64))]),  # a clique on some cells only
        Policy((6,), [CliqueEdges(np.array([0, 1], dtype=i64)), OffsetEdges((3,))]),  # clique, then more
        Policy((6,), [PairEdges(np.array([0, 1], dtype=i64), np.array([6, 6], dtype=i64)), OffsetEdges((1,))],
               has_bottom=True),  # a block of ⊥ edges only, then cell edges
    ]


def _policies_2d():
    shape = (3, 4)
    return [
        policies.grid((4, 5), 1),
        policies.grid((4, 5), 3),
        policies.complete((3, 3)),
        policies.complete(shape),
        policies.unbounded(shape),
        policies.attribute((3, 3)),
        policies.partition(np.array([[0, 0, 1, 1], [0, 2, 2, 1], [3, 3, 2, 1]])),
        Policy(shape, [CliqueEdges(_cells(shape, [(0, 2), (1, 3), (2, 2), (1, 1)]))]),
        Policy(shape, [CliqueEdges(_cells(shape, [(0, 0), (2, 3)])), OffsetEdges((0, 1))]),
    ]


CENTRES_1D = [
    [[2.5]],                      # one cluster
    [[1.0], [4.0]],               # cell 2.5 would tie; cells 0..2 and 3.. split
    [[1.0], [3.0]],               # cell 2 ties: to the lower index
    [[0.0], [1.0], [5.5]],        # centres on cells (zero distance)
    [[2.0], [2.0], [6.0]],        # a duplicate centre: an empty cluster
    [[0.3], [4.7], [2.2], [8.0]],  # a centre beyond the domain on the right
]

CENTRES_2D = [
    [[1.5, 2.0]],
    [[1.0, 1.0], [2.0, 2.0]],
    [[0.0, 0.0], [2.0, 2.0]],     # the anti-diagonal ties
    [[0.5, 0.5], [2.5, 3.5], [1.5, 2.0]],
    [[1.0, 1.0], [1.0, 1.0], [3.0, 0.0]],
]


# ---------------------------------------------------------------------------------------------
# statistics and sensitivities


def test_cluster_statistics_and_objective_by_hand():
    points = _points((6,))
    np.testing.assert_array_equal(points, np.arange(6.0)[:, None])
    assert points.dtype == np.float64
    x = np.array([1.0, 0.0, 2.0, 0.0, 0.0, 3.0])
    centres = np.array([[1.0], [4.0]])
    sizes, sums = cluster_statistics(x, points, centres)  # centred by default
    np.testing.assert_array_equal(sizes, [3.0, 3.0])
    np.testing.assert_array_equal(sums, [[1 * (0 - 1) + 2 * (2 - 1)], [3 * (5 - 4)]])
    _, raw = cluster_statistics(x, points, centres, centred=False)
    np.testing.assert_array_equal(raw, [[4.0], [15.0]])
    assert objective(x, points, centres) == 1 * 1 + 2 * 1 + 3 * 1
    assert objective(np.array([1.0, 0, 0, 0, 0, 2.0]), points, centres) == 1 * 1 + 2 * 1
    gen = np.random.default_rng(3)
    pts2 = _points((3, 4))
    for _ in range(3):
        x2 = gen.integers(0, 5, 12).astype(float)
        mu = gen.uniform(0, 3, size=(3, 2))
        got = cluster_statistics(x2, pts2, mu)
        want = _stats(x2, (3, 4), mu)
        np.testing.assert_allclose(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], atol=1e-12)
        assert objective(x2, pts2, mu) == pytest.approx(_objective(x2, (3, 4), mu))


def test_step_sensitivity_equals_brute_force_over_neighbours_1d():
    for policy in _policies_1d():
        for centres in CENTRES_1D:
            mu = np.array(centres)
            got = step_sensitivity(policy, mu)
            assert got == pytest.approx(_brute(policy, mu), abs=1e-12), (policy.name, centres)
            assert got == step_sensitivity(policy, mu, "exact")


def test_step_sensitivity_equals_brute_force_over_neighbours_2d():
    for policy in _policies_2d():
        for centres in CENTRES_2D:
            mu = np.array(centres)
            got = step_sensitivity(policy, mu)
            assert got == pytest.approx(_brute(policy, mu), abs=1e-12), (policy.name, centres)


def test_step_sensitivity_in_cases_worked_by_hand():
    # one cluster: a move never changes the sizes; the sums change by the move's length
    assert step_sensitivity(policies.complete(6), np.array([[2.5]])) == (0.0, 5.0)
    assert step_sensitivity(policies.line(5), np.array([[2.0]])) == (0.0, 1.0)
    # two clusters, centres on the cells: sizes change by 2, centred sums not at all
    assert step_sensitivity(policies.complete(2), np.array([[0.0], [1.0]])) == (2.0, 0.0)
    assert step_sensitivity(policies.line(2), np.array([[0.0], [1.0]])) == (2.0, 0.0)
    # exactly two clusters in a clique: |0 − 1| + |5 − 4|
    assert step_sensitivity(policies.complete(6), np.array([[1.0], [4.0]])) == (2.0, 2.0)
    # clique on a 3 × 3 grid, clusters {(2, 2)} and the rest around (1, 1): the longest move
    # inside a cluster is (2, 0) → (0, 2), L1 length 4, along the anti-diagonal
    assert step_sensitivity(policies.complete((3, 3)), np.array([[1.0, 1.0], [2.2, 2.2]])) == (2.0, 4.0)
    # unbounded: adding or removing a record changes one size by 1 and its sums by ‖p_u − μ‖₁
    assert step_sensitivity(policies.unbounded(6), np.array([[1.0], [3.5]])) == (1.0, 1.5)
    # the boundary move 50 → 51 (centred: |50 − 25| + |51 − 75|)
    assert step_sensitivity(policies.threshold(101, 1), np.array([[25.0], [75.0]])) == (2.0, 49.0)


def test_step_sensitivity_names_the_variants_it_knows():
    with pytest.raises(ValueError, match=r"^how must be one of \('exact', 'paper'\), got 'Paper'$"):
        step_sensitivity(policies.line(5), np.array([[1.0]]), "Paper")


def test_paper_sensitivity_is_two_and_twice_the_longest_edge():
    mu1, mu2 = np.array([[1.0], [4.0]]), np.array([[1.0, 1.0], [2.0, 2.0]])
    assert step_sensitivity(policies.line(7), mu1, "paper") == (2.0, 2.0)
    assert step_sensitivity(policies.threshold(9, 3), mu1, "paper") == (2.0, 6.0)
    assert step_sensitivity(policies.complete(6), mu1, "paper") == (2.0, 10.0)
    assert step_sensitivity(policies.grid((4, 5), 2), mu2, "paper") == (2.0, 4.0)
    assert step_sensitivity(policies.complete((3, 5)), mu2, "paper") == (2.0, 12.0)   # (0,0) ↔ (2,4)
    clique = Policy((6,), [CliqueEdges(np.array([2, 3, 5], dtype=np.int64))])
    assert step_sensitivity(clique, mu1, "paper") == (2.0, 6.0)                        # 2 ↔ 5
    shape = (3, 4)
    clique2 = Policy(shape, [CliqueEdges(_cells(shape, [(0, 2), (1, 3)]))])
    assert step_sensitivity(clique2, mu2, "paper") == (2.0, 4.0)                       # L1 length 2
    # no edge between two cells: the longest such edge is taken as 0
    assert step_sensitivity(policies.unbounded(5), mu1, "paper") == (2.0, 0.0)


# ---------------------------------------------------------------------------------------------
# the noise drawn by blowfish_kmeans


class _Recorder:
    """Stands in for ``add_laplace``: records every call and draws the real noise."""

    def __init__(self):
        self.calls = []

    def __call__(self, values, scale, rng, *, sensitivity, integer):
        values = np.array(values, dtype=np.float64, copy=True)
        out = REAL_ADD_LAPLACE(values.copy(), scale, rng, sensitivity=sensitivity, integer=integer)
        self.calls.append(dict(values=values, scale=scale, sensitivity=sensitivity, integer=integer,
                               rng=rng, out=np.array(out, dtype=np.float64)))
        return out


def _replay_check(rec, result, x, policy, epsilon, iterations, share, how, start):
    """Replays the run from the recorded draws and checks each iteration's release."""
    shape = policy.shape
    upper = np.array(shape, dtype=float) - 1
    mu = np.array(start, dtype=float)
    k, d = mu.shape
    assert len(rec.calls) == 2 * iterations
    assert len(result.sensitivities) == iterations == len(result.objectives)
    for t in range(iterations):
        size_call, sum_call = rec.calls[2 * t], rec.calls[2 * t + 1]
        d_size, d_sum = step_sensitivity(policy, mu, how)
        # the sizes move only when an edge crosses two clusters (zero when one cluster holds every cell)
        assert d_sum > 0 and d_size in (0.0, 2.0)
        sizes, sums = _stats(x, shape, mu, centred=how == "exact")
        np.testing.assert_allclose(size_call["values"], sizes)
        np.testing.assert_allclose(sum_call["values"], sums.reshape(-1), atol=1e-9)
        # ε/T per iteration, split share : 1 − share between the sizes and the sums
        assert size_call["scale"] == pytest.approx(d_size / (epsilon / iterations * share), rel=1e-12)
        assert sum_call["scale"] == pytest.approx(d_sum / (epsilon / iterations * (1 - share)), rel=1e-12)
        assert size_call["sensitivity"] == d_size and sum_call["sensitivity"] == d_sum
        assert size_call["integer"] is True and sum_call["integer"] is False
        assert result.sensitivities[t] == (d_size, d_sum)
        noisy_sizes, noisy_sums = size_call["out"], sum_call["out"].reshape(k, d)
        assert noisy_sizes.shape == (k,)
        means = noisy_sums / np.maximum(noisy_sizes, 1.0)[:, None]
        moved = mu + means if how == "exact" else means
        mu = np.clip(np.where((noisy_sizes >= 1.0)[:, None], moved, mu), 0, upper)
        assert result.objectives[t] == pytest.approx(_objective(x, shape, mu), rel=1e-9)
    np.testing.assert_allclose(result.centres, mu, rtol=1e-12)
    assert result.objective == result.objectives[-1]


@pytest.mark.parametrize("dim", [1, 2])
@pytest.mark.parametrize("how", ["exact", "paper"])
@pytest.mark.parametrize("epsilon,iterations,share", [(0.3, 3, 0.2), (2.5, 2, 0.7), (40.0, 4, 0.35)])
def test_each_iteration_draws_laplace_at_its_share_of_the_budget(monkeypatch, dim, how, epsilon, iterations, share):
    if dim == 1:
        policy, start = policies.threshold(12, 2), [[1.0], [5.5], [9.0]]
    else:
        policy, start = policies.grid((5, 6), 2), [[0.5, 0.5], [4.0, 1.0], [2.0, 4.5]]
    x = np.random.default_rng(11).integers(0, 6, size=policy.size)
    rec = _Recorder()
    monkeypatch.setattr(kmeans, "add_laplace", rec)
    result = blowfish_kmeans(x.reshape(policy.shape), policy, epsilon, 3, iterations, 7,
                             sensitivity=how, size_share=share, centres=start)
    assert all(isinstance(c["rng"], np.random.Generator) for c in rec.calls)
    _replay_check(rec, result, x, policy, epsilon, iterations, share, how, start)
    if how == "paper":
        assert result.sensitivities == ((2.0, 4.0),) * iterations   # (2, 2θ) with θ = 2
    assert not result.secure and result.sampler == noise.NUMPY_LAPLACE


def test_default_share_and_secure_release_draw_from_the_hardened_samplers(monkeypatch):
    policy = policies.line(10)
    x = np.arange(10) % 4
    rec = _Recorder()
    monkeypatch.setattr(kmeans, "add_laplace", rec)
    start = [[1.0], [7.5]]
    result = blowfish_kmeans(x, policy, 0.8, 2, 2, centres=start)   # rng=None: hardened samplers
    _replay_check(rec, result, x, policy, 0.8, 2, 0.5, "exact", start)
    assert all(isinstance(c["rng"], SecureRandom) for c in rec.calls)
    backend = rec.calls[0]["rng"].backend
    assert result.secure is True
    assert result.sampler == "; ".join(sorted([sampler_name("integer", backend), sampler_name("lattice", backend)]))
    # every noisy size is an integer (discrete Laplace)
    for call in rec.calls[::2]:
        np.testing.assert_array_equal(call["out"], np.round(call["out"]))


def test_secure_flag_and_sampler_without_interception():
    policy = policies.grid((5, 5), 1)
    x = np.random.default_rng(0).integers(0, 9, size=(5, 5))
    secure = blowfish_kmeans(x, policy, 2.0, 3, 2)
    backend = SecureRandom().backend
    assert secure.secure is True
    assert secure.sampler == "; ".join(sorted([sampler_name("integer", backend), sampler_name("lattice", backend)]))
    for rng in (5, np.random.default_rng(5)):
        seeded = blowfish_kmeans(x, policy, 2.0, 3, 2, rng)
        assert seeded.secure is False and seeded.sampler == noise.NUMPY_LAPLACE
    given = blowfish_kmeans(x, policy, 2.0, 3, 2, SecureRandom())
    assert given.secure is True and given.sampler == secure.sampler


def test_seeded_run_draws_the_starting_centres_and_the_noise_from_one_generator(monkeypatch):
    """With a seed, the starting centres are uniform(0, 1) · (shape − 1) and then each iteration
    draws Laplace(d_size / ε_size) for the k sizes and Laplace(d_sum / ε_sum) for the k·d sums,
    all from the one numpy generator."""
    shape, k, iterations, epsilon, share = (6, 7), 3, 3, 1.7, 0.4
    policy = policies.grid(shape, 2)
    x = np.random.default_rng(2).integers(0, 4, size=shape)
    rec = _Recorder()
    monkeypatch.setattr(kmeans, "add_laplace", rec)
    result = blowfish_kmeans(x, policy, epsilon, k, iterations, 21, size_share=share)
    mirror = np.random.default_rng(21)
    start = mirror.uniform(0, 1, size=(k, 2)) * np.array([5.0, 6.0])
    _replay_check(rec, result, x.reshape(-1), policy, epsilon, iterations, share, "exact", start)
    for t in range(iterations):
        size_call, sum_call = rec.calls[2 * t], rec.calls[2 * t + 1]
        assert close(size_call["out"] - size_call["values"], mirror.laplace(0.0, size_call["scale"], k), size_call["out"])
        assert close(sum_call["out"] - sum_call["values"], mirror.laplace(0.0, sum_call["scale"], 2 * k), sum_call["out"])


def test_noise_is_laplace_at_the_declared_scale(monkeypatch):
    policy = policies.threshold(16, 2)
    x = np.full(16, 5)
    rec = _Recorder()
    monkeypatch.setattr(kmeans, "add_laplace", rec)
    blowfish_kmeans(x, policy, 3.0, 4, 150, 9, size_share=0.3, centres=[[1.0], [5.0], [10.0], [14.0]])
    sizes = np.concatenate([(c["out"] - c["values"]) / c["scale"] for c in rec.calls[::2]])
    sums = np.concatenate([(c["out"] - c["values"]) / c["scale"] for c in rec.calls[1::2]])
    assert sizes.size == sums.size == 600
    assert_laplace_noise(sizes, 1.0)
    assert_laplace_noise(sums, 1.0)


@pytest.mark.parametrize("name", ["threshold", "grid", "complete", "unbounded"])
def test_replayed_privacy_loss_is_at_most_epsilon(monkeypatch, name):
    """Coupling: the run on every neighbour is forced onto the same noisy outputs; the sum of
    ‖v(x) − v(y)‖₁ / b over the draws bounds the privacy loss (He et al. Thm 4.1, 5.1)."""
    policy = {"threshold": policies.threshold(7, 2), "grid": policies.grid((3, 3), 1),
              "complete": policies.complete((2, 3)), "unbounded": policies.unbounded(6)}[name]
    x = np.full(policy.size, 2)
    epsilon = 0.6

    def run(h):
        return blowfish_kmeans(h, policy, epsilon, 2, 3, 4, size_share=0.4).centres

    cost = worst_replayed_cost(monkeypatch, run, x, policy_neighbours(x, policy), [kmeans])
    assert 0.3 * epsilon < cost <= epsilon * (1 + 1e-9)


# ---------------------------------------------------------------------------------------------
# the update of the centres


def _fake_noise(outputs):
    """``add_laplace`` returning the given noisy values, in call order."""
    queue = list(outputs)

    def fake(values, scale, rng, *, sensitivity, integer):
        out = np.array(queue.pop(0), dtype=np.float64).reshape(np.shape(values))
        return out

    return fake


def test_noisy_size_below_one_keeps_the_centre_and_one_moves_it(monkeypatch):
    policy = policies.line(12)
    x = np.ones(12, dtype=np.int64)
    start = [[1.0], [5.0], [10.0]]
    outputs = [[1.0, 0.999, 1.5], [2.0, 7.0, -3.0]]
    monkeypatch.setattr(kmeans, "add_laplace", _fake_noise(outputs))
    exact = blowfish_kmeans(x, policy, 1.5, 3, 1, 0, centres=start)
    # 1 + 2/1; kept; 10 − 3/1.5
    np.testing.assert_allclose(exact.centres, [[3.0], [5.0], [8.0]])
    monkeypatch.setattr(kmeans, "add_laplace", _fake_noise(outputs))
    paper = blowfish_kmeans(x, policy, 1.5, 3, 1, 0, centres=start, sensitivity="paper")
    # raw sums: 2/1; kept; −3/1.5 = −2 clipped to 0
    np.testing.assert_allclose(paper.centres, [[2.0], [5.0], [0.0]])


def test_centres_are_clipped_to_the_domain_box(monkeypatch):
    policy = policies.grid((4, 6), 1)
    x = np.ones((4, 6), dtype=np.int64)
    start = [[1.0, 1.0], [2.0, 4.0], [2.5, 0.5]]
    outputs = [[1.0, 1.0, 1.0], [[50.0, -50.0], [-50.0, 50.0], [0.25, 0.5]]]
    monkeypatch.setattr(kmeans, "add_laplace", _fake_noise(outputs))
    result = blowfish_kmeans(x, policy, 0.5, 3, 1, 0, centres=start)
    np.testing.assert_allclose(result.centres, [[3.0, 0.0], [0.0, 5.0], [2.75, 1.0]])
    assert result.objectives[0] == pytest.approx(_objective(x.reshape(-1), (4, 6), result.centres))


def test_zero_noise_reproduces_lloyd_for_both_variants(monkeypatch):
    def exact_release(values, scale, rng, *, sensitivity, integer):
        return np.array(values, dtype=np.float64, copy=True)

    gen = np.random.default_rng(4)
    shape = (7, 5)
    x = gen.integers(0, 4, size=shape)
    x[:, 2] = 0
    x[0, 0] = 1   # a cluster of one record
    start = [[0.5, 0.5], [6.0, 4.0], [3.0, 2.0], [6.0, 0.0]]
    base = lloyd(x, shape, 4, 4, centres=start)
    monkeypatch.setattr(kmeans, "add_laplace", exact_release)
    for how in ("exact", "paper"):
        got = blowfish_kmeans(x, policies.grid(shape, 1), 1.0, 4, 4, 0, sensitivity=how, centres=start)
        np.testing.assert_allclose(got.centres, base.centres, atol=1e-9)
        np.testing.assert_allclose(got.objectives, base.objectives, rtol=1e-9)
    one = blowfish_kmeans(np.eye(1, 8, 0, dtype=int)[0], policies.line(8), 1.0, 2, 1, 0, centres=[[0.5], [6.0]])
    np.testing.assert_array_equal(one.centres, [[0.0], [6.0]])   # a single record at 0: its cluster moves onto it


# ---------------------------------------------------------------------------------------------
# arguments, defaults and starting centres


def test_check_variant_defaults_and_boundaries():
    assert check_variant() == ("exact", 0.5)
    assert check_variant("paper", 0.25) == ("paper", 0.25)
    for share in (1e-9, 0.5, 1 - 1e-9):
        assert check_variant("exact", share) == ("exact", share)
    for share in (0, 0.0, 1, 1.0, 1.5, -0.2, 2.0):
        with pytest.raises(ValueError, match=r"^size_share must be strictly between 0 and 1, got "):
            check_variant("exact", share)
    with pytest.raises(TypeError, match=r"^size_share must be a real number"):
        check_variant("exact", "half")
    with pytest.raises(ValueError, match=r"^sensitivity must be one of \('exact', 'paper'\), got 'theta'$"):
        check_variant("theta")


def test_blowfish_kmeans_refuses_bad_arguments_by_name():
    x, policy = np.ones(10, dtype=int), policies.line(10)
    with pytest.raises(ValueError, match=r"^size_share must be strictly between 0 and 1, got 1\.0$"):
        blowfish_kmeans(x, policy, 1.0, rng=0, size_share=1.0)
    with pytest.raises(ValueError, match=r"^size_share must be strictly between 0 and 1, got 0\.0$"):
        blowfish_kmeans(x, policy, 1.0, rng=0, size_share=0.0)
    with pytest.raises(TypeError, match=r"^policy must be a Policy, got list$"):
        blowfish_kmeans(x, [(0, 1)], 1.0, rng=0)
    cube = policies.grid((2, 2, 2), 1)
    with pytest.raises(ValueError, match=r"^k-means runs on 1-D or 2-D domains, got the 3-D shape \(2, 2, 2\)$"):
        blowfish_kmeans(np.ones((2, 2, 2), dtype=int), cube, 1.0, 2, 1, 0)
    with pytest.raises(ValueError, match=r"^iterations must be an integer >= 1, got 0$"):
        blowfish_kmeans(x, policy, 1.0, 2, 0, 0)
    with pytest.raises(TypeError, match=r"^iterations must be an integer, got 1\.5"):
        blowfish_kmeans(x, policy, 1.0, 2, 1.5, 0)
    with pytest.raises(ValueError, match=r"^k must be an integer >= 1, got 0$"):
        blowfish_kmeans(x, policy, 1.0, 0, 1, 0)
    with pytest.raises(ValueError, match=r"^centres must have shape \(2, 1\), got \(3, 1\)$"):
        blowfish_kmeans(x, policy, 1.0, 2, 1, 0, centres=[[1.0], [2.0], [3.0]])


def test_blowfish_kmeans_defaults_and_smallest_arguments():
    policy = policies.grid((6, 5), 1)
    x = np.random.default_rng(1).integers(0, 5, size=(6, 5))
    result = blowfish_kmeans(x, policy, 1.3, rng=3)
    assert result.centres.shape == (4, 2)                    # k = 4
    assert len(result.objectives) == len(result.sensitivities) == 10   # 10 iterations
    assert np.all(result.centres >= 0) and np.all(result.centres <= [5, 4])
    again = blowfish_kmeans(x, policy, 1.3, rng=3)
    np.testing.assert_array_equal(result.centres, again.centres)
    one = blowfish_kmeans(x, policy, 1.3, 1, 1, 3)               # k = 1 and one iteration
    assert one.centres.shape == (1, 2) and len(one.objectives) == 1
    assert one.sensitivities == ((0.0, 1.0),)                     # one cluster on the grid: a move by 1


def test_numeric_centres_are_read_as_float64():
    """Centres pass through ``np.array(centres, dtype=float64)``: numbers written as text too."""
    policy = policies.line(8)
    x = np.array([0, 1, 0, 0, 0, 0, 2, 2])
    as_text = blowfish_kmeans(x, policy, 1.0, 2, 2, 6, centres=[["0.5"], ["6"]])
    as_numbers = blowfish_kmeans(x, policy, 1.0, 2, 2, 6, centres=[[0.5], [6.0]])
    np.testing.assert_array_equal(as_text.centres, as_numbers.centres)
    assert as_text.centres.dtype == np.float64
    base = lloyd(x, (8,), 2, 2, centres=[["0.5"], ["6"]])
    np.testing.assert_array_equal(base.centres, [[1.0], [6.5]])


def test_initial_centres_are_uniform_in_the_box_from_the_generator():
    for shape, k, seed in [((5,), 3, 7), ((4, 6), 5, 8), ((9, 2), 2, 0)]:
        want = np.random.default_rng(seed).uniform(0, 1, size=(k, len(shape))) * (np.array(shape) - 1.0)
        np.testing.assert_array_equal(initial_centres(shape, k, seed), want)
        gen, mirror = np.random.default_rng(seed), np.random.default_rng(seed)
        np.testing.assert_array_equal(initial_centres(shape, k, gen), initial_centres(shape, k, mirror))
        got = initial_centres(shape, k, gen)   # the generator moves on
        np.testing.assert_array_equal(got, mirror.uniform(0, 1, size=(k, len(shape))) * (np.array(shape) - 1.0))
    secure = initial_centres((10, 3), 50)
    assert secure.shape == (50, 2) and np.all(secure >= 0) and np.all(secure <= [9, 2])


# ---------------------------------------------------------------------------------------------
# the non-private baseline


def _lloyd_reference(x, shape, centres, iterations):
    mu = np.array(centres, dtype=float)
    history = []
    for _ in range(iterations):
        sizes, sums = _stats(x, shape, mu, centred=False)
        for j in range(mu.shape[0]):
            if sizes[j] > 0:
                mu[j] = sums[j] / sizes[j]
        history.append(_objective(x, shape, mu))
    return mu, history


def test_lloyd_by_hand():
    """Cells 0..7, centres 0.5, 3.5, 7: cluster 0 holds one record at 1 (moves onto it),
    cluster 1 is empty (keeps its centre), cluster 2 holds 2 records at 6 and 2 at 7 (→ 6.5)."""
    x = np.array([0, 1, 0, 0, 0, 0, 2, 2])
    result = lloyd(x, (8,), 3, 1, centres=[[0.5], [3.5], [7.0]])
    np.testing.assert_array_equal(result.centres, [[1.0], [3.5], [6.5]])
    assert result.objectives == (4 * 0.25,)
    assert result.sensitivities == ()
    assert result.sampler == "none" and result.secure is False
    two = lloyd(x, (8,), 3, 2, centres=[[0.5], [3.5], [7.0]])
    np.testing.assert_array_equal(two.centres, [[1.0], [3.5], [6.5]])
    assert two.objectives == (1.0, 1.0)


def test_lloyd_against_a_reference_from_the_seeded_start():
    shape, k, seed = (6, 5), 3, 12
    x = np.random.default_rng(5).integers(0, 4, size=shape)
    start = np.random.default_rng(seed).uniform(0, 1, size=(k, 2)) * np.array([5.0, 4.0])
    want_mu, want_hist = _lloyd_reference(x.reshape(-1), shape, start, 3)
    for rng in (seed, np.random.default_rng(seed)):
        got = lloyd(x, shape, k, 3, rng)
        np.testing.assert_allclose(got.centres, want_mu, rtol=1e-12)
        np.testing.assert_allclose(got.objectives, want_hist, rtol=1e-12)
    given = lloyd(x, shape, k, 3, 99, centres=start)
    np.testing.assert_allclose(given.centres, want_mu, rtol=1e-12)


def test_lloyd_defaults():
    x = np.random.default_rng(6).integers(0, 4, size=(5, 5))
    result = lloyd(x, (5, 5), rng=1)
    assert result.centres.shape == (4, 2)
    assert len(result.objectives) == 10
    assert result.objective == result.objectives[-1]
