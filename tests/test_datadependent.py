"""Data-dependent mechanisms and partition-then-transform (SPEC §6, §8)."""

import itertools
import math
import pathlib

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import blowfish_te as bt
from blowfish_te import datasets, policies
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te.partitions import (
    _interval_scores,
    best_interval_partition,
    dawa_partition,
    interval_deviations,
    matching_partition,
    noisy_pairing_partition,
    optimal_pairing,
    quotient_policy,
)
from conftest import graphs
from test_routes import neighbour_pairs

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "datasets" / "dpbench"


# -- partitions ---------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 9), min_size=1, max_size=12), st.integers(1, 12))
def test_interval_deviations_brute_force(values, length):
    x = np.array(values, dtype=float)
    if length > x.size:
        return
    expected = [np.abs(x[s : s + length] - x[s : s + length].mean()).sum() for s in range(x.size - length + 1)]
    assert np.allclose(interval_deviations(x, length), expected)


def _compositions(k):
    """Every partition of 0..k-1 into intervals, as lists of (start, length)."""
    if k == 0:
        yield []
        return
    for first in range(1, k + 1):
        for rest in _compositions(k - first):
            yield [(0, first)] + [(s + first, n) for s, n in rest]


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("seed", range(5))
def test_dawa_dynamic_program_finds_the_least_noisy_cost(exact, seed):
    x = np.random.default_rng(seed).integers(0, 20, 8).astype(float)
    scores = _interval_scores(x, 0.5, 0.3, np.random.default_rng(seed), exact)
    labels = best_interval_partition(scores)
    best = min(sum(scores[n][s] for s, n in parts) for parts in _compositions(8) if all(n in scores for _, n in parts))
    chosen = sum(scores[int((labels == b).sum())][int(np.flatnonzero(labels == b)[0])] for b in range(labels.max() + 1))
    assert chosen == pytest.approx(best)
    assert (np.diff(labels) >= 0).all() and (np.diff(labels) <= 1).all()  # intervals in order


@given(st.integers(1, 60), st.integers(0, 2**32 - 1))
def test_optimal_pairing_equals_networkx_max_weight_matching(k, seed):
    rng = np.random.default_rng(seed)
    values, penalty = rng.normal(size=k) * rng.uniform(0.1, 5), rng.uniform(0.1, 3)
    labels = optimal_pairing(values, penalty)
    sizes = np.bincount(labels)
    assert sizes.max() <= 2
    cost = sum((abs(np.subtract(*values[labels == b])) if sizes[b] == 2 else 0) + penalty for b in range(sizes.size))
    g = nx.Graph()
    g.add_weighted_edges_from((i, j, penalty - abs(values[i] - values[j])) for i, j in itertools.combinations(range(k), 2)
                              if abs(values[i] - values[j]) < penalty)
    saving = sum(g[a][b]["weight"] for a, b in nx.max_weight_matching(g))
    assert cost == pytest.approx(k * penalty - saving)


def test_matching_partition_pairs_close_counts_and_refuses_large_domains():
    x = np.array([0, 100, 1, 101, 50, 200])
    labels = matching_partition(x, epsilon=50.0, epsilon2=0.02, rng=0)  # little noise, pairing pays
    assert labels[0] == labels[2] and labels[1] == labels[3] and np.bincount(labels).max() == 2
    with pytest.raises(ValueError, match="noisy_pairing"):
        matching_partition(np.zeros(1025), 1.0, 1.0, rng=0)
    with pytest.raises(ValueError, match="exact=False"):
        dawa_partition(np.zeros(2000), 1.0, 1.0, rng=0, exact=True)


@pytest.mark.parametrize("seed", range(6))
def test_matching_partition_equals_the_seeds_twin_graph(seed):
    """The K-vertex reduction gives the buckets of the seed's 2K-vertex perfect matching
    (cells, twins, weight-0 twin edges) on the same noisy weights; the weight is compared, since
    ties could pick other buckets of equal weight."""
    k, eps, eps2 = 9, 0.7, 0.4
    x = np.random.default_rng(seed).integers(0, 6, k)
    labels = matching_partition(x, eps, eps2, rng=seed)
    gen = np.random.default_rng(seed)
    i, j = np.triu_indices(k, 1)
    pair = -(np.abs(x[i] - x[j]) + 1 / eps2) + gen.laplace(0, 2 / eps, i.size)
    twin = -np.full(k, 1 / eps2) + gen.laplace(0, 2 / eps, k)
    g = nx.Graph()
    g.add_weighted_edges_from((a, b, w + 100) for a, b, w in zip(i, j, pair))
    g.add_weighted_edges_from((c, k + c, w + 50) for c, w in enumerate(twin))
    g.add_weighted_edges_from((k + a, k + b, 0.0) for a, b in zip(i, j))
    best = nx.max_weight_matching(g, maxcardinality=True)
    seed_weight = sum(g[a][b]["weight"] for a, b in best) - 50 * k
    weights = dict(zip(zip(i.tolist(), j.tolist()), pair))
    ours = 0.0
    for bucket in np.unique(labels):
        cells = np.flatnonzero(labels == bucket)
        assert cells.size in (1, 2)
        ours += twin[cells[0]] if cells.size == 1 else weights[tuple(cells)]
    assert ours == pytest.approx(seed_weight)


def _distribution(sample, trials):
    outputs = {}
    for t in range(trials):
        key = tuple(sample(t))
        outputs[key] = outputs.get(key, 0) + 1
    return outputs


@pytest.mark.parametrize("name", ["dawa", "noisy_pairing", "matching"])
def test_partition_output_distributions_at_two_neighbours(name):
    """A record moved between two cells (a line-policy neighbour): every partition's probability
    changes by at most e^ε, checked on 4000 draws each with binomial slack of 4 standard errors."""
    eps, trials = 1.0, 4000
    x = np.array([0, 6, 7, 3])
    y = np.array([0, 5, 8, 3])  # one record moved from cell 1 to cell 2
    policy = policies.line(4)
    run = {
        "dawa": lambda data, t: dawa_partition(data, eps / 2, 0.3, rng=t),  # ε/2 per unit change: ε per move
        "noisy_pairing": lambda data, t: noisy_pairing_partition(data, policy, eps, 0.3, rng=t),
        "matching": lambda data, t: matching_partition(data, eps / 2, 0.3, rng=t),
    }[name]
    p = _distribution(lambda t: run(x, t), trials)
    q = _distribution(lambda t: run(y, 10**6 + t), trials)
    assert _within(p, q, eps, trials)


def _within(p: dict, q: dict, eps: float, trials: int) -> bool:
    """Whether every output's frequencies agree within e^ε, up to 4 binomial standard errors."""
    for key in set(p) | set(q):
        a, b = p.get(key, 0) / trials, q.get(key, 0) / trials
        slack = 4 * math.sqrt(max(a, b, 1 / trials) / trials) * (1 + math.exp(eps))
        if a > math.exp(eps) * b + slack or b > math.exp(eps) * a + slack:
            return False
    return True


def test_the_distribution_check_catches_a_noiseless_partition():
    """Negative control: pairing the true counts (no noise) is flagged at these neighbours."""
    x, y = np.array([0, 6, 7, 3]), np.array([0, 5, 8, 3])
    p = _distribution(lambda t: optimal_pairing(x, 1 / 0.3), 4000)
    q = _distribution(lambda t: optimal_pairing(y, 1 / 0.3), 4000)
    assert p != q and not _within(p, q, 1.0, 4000)


@given(graphs(max_cells=5), st.integers(0, 2**32 - 1))
def test_quotient_policy_maps_neighbours_to_neighbours(case, seed):
    """Anuarbek Lemma 4.1: every G-neighbour pair gives equal or G'-neighbouring bucket totals."""
    k, edges = case
    policy = policies.from_edges(k, np.array(edges, dtype=int).reshape(-1, 2))
    labels = np.random.default_rng(seed).integers(0, k, k)
    labels = np.unique(labels, return_inverse=True)[1].reshape(-1)
    quotient = quotient_policy(policy, labels)
    allowed = {tuple(e) for e in quotient.edges.tolist()}
    m = quotient.size
    for x, y in neighbour_pairs(policy, max_records=1):
        bx, by = np.bincount(labels, weights=x, minlength=m), np.bincount(labels, weights=y, minlength=m)
        diff = by - bx
        if not diff.any():
            continue
        assert np.abs(diff).sum() <= 2
        src = np.flatnonzero(diff < 0)
        dst = np.flatnonzero(diff > 0)
        u = int(src[0]) if src.size else m  # ⊥ when a record was added
        v = int(dst[0]) if dst.size else m  # ⊥ when one was removed
        assert (min(u, v), max(u, v)) in allowed


# -- mechanisms -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mech", [M.DAWA(), M.DAWA(exact=True), M.MWEM(), M.MWEM(total=400.0), M.AHP(), M.Uniform()],
                         ids=repr)
def test_data_dependent_mechanisms_run_on_transformed_data_and_need_a_tree(mech):
    k = 64
    x = datasets.synthetic(k, 400, rng=0)
    w = wl.prefix(k)
    release = bt.answer(w, x, policies.line(k), 1.0, mech, rng=1)
    assert release.route == "transform" and release.expected_mse is None and release.answers.shape == (k,)
    assert np.array_equal(release.answers, bt.answer(w, x, policies.line(k), 1.0, mech, rng=1).answers)  # seeded
    with pytest.raises(bt.CyclicPolicyError, match="spanning tree"):
        bt.answer(w, x, policies.threshold(k, 3), 1.0, mech, rng=1)
    assert bt.answer(w, x, policies.threshold(k, 3), 1.0, mech, rng=1, tree="hub").stretch == 3


def test_mwem_never_reads_the_total_for_free():
    """Without a public total MWEM pays for a noisy one: the total then moves with the seed."""
    k = 32
    x = np.full(k, 10)
    total_query = wl.ranges(k, [0], [k - 1])
    totals = {float(M.MWEM(rounds=1, updates=1).run(total_query, x, 1.0, rng=s)[0]) for s in range(5)}
    assert len(totals) == 5
    exact = M.MWEM(rounds=1, updates=1, total=float(x.sum())).run(total_query, x, 1.0, rng=0)
    assert exact[0] == pytest.approx(x.sum())


@pytest.mark.parametrize("partition", ["dawa", "noisy_pairing", "matching"])
@pytest.mark.parametrize("policy", [policies.line(32), policies.threshold(32, 3), policies.grid((4, 8)), policies.unbounded(32)],
                         ids=lambda p: p.name)
def test_partition_then_transform_under_every_policy(partition, policy):
    x = datasets.synthetic(32, 500, rng=2).reshape(policy.shape)
    mech = M.PartitionThenTransform(partition)
    release = bt.answer(wl.identity(policy.shape), x, policy, 1.0, mech, rng=0)
    assert release.route == "native" and release.answers.shape == (32,)
    assert abs(release.answers.sum() - x.sum()) < 200  # a histogram estimate, not noise
    assert np.array_equal(release.answers, bt.answer(wl.identity(policy.shape), x, policy, 1.0, mech, rng=0).answers)


def test_partition_then_transform_arguments():
    with pytest.raises(ValueError, match="partition"):
        M.PartitionThenTransform("kmeans")
    with pytest.raises(ValueError, match="epsilon_split"):
        M.PartitionThenTransform(epsilon_split=1.0)
    with pytest.raises(ValueError, match="ratio"):
        M.DAWA(ratio=0)
    with pytest.raises(ValueError, match="total"):
        M.MWEM(total=-1)


# -- regression targets (HEPTH, 4096 cells, ε = 0.1, prefix, unbounded DP; per-query RMSE) --------


@pytest.mark.skipif(not (DATA / "1D" / "HEPTH.npy").exists(), reason="DPBench data not beside the clone")
@pytest.mark.parametrize("mech, low, high", [
    # DPBench's DAWA reaches 140-200 with a partition that is not ε-DP (noiseless singletons,
    # clipped costs, Laplace(2/ε)): ours is provably private and lands at ≈ 275 (20 trials).
    (M.DAWA(0.25), 200, 350),
    (M.AHP(), 2400 * 0.9, 2400 * 1.1),
    (M.MWEM(), 1000 * 0.9, 1200),
], ids=["dawa", "ahp", "mwem"])
def test_peer_regression_targets(mech, low, high):
    x = np.load(DATA / "1D" / "HEPTH.npy")
    w = wl.prefix(4096)
    truth = w @ x
    errors = [np.mean((bt.answer(w, x, policies.unbounded(4096), 0.1, mech, rng=t).answers - truth) ** 2) for t in range(20)]
    assert low <= math.sqrt(np.mean(errors)) <= high


def test_dawa_partition_singleton_event_at_an_adversarial_neighbour():
    """Review finding (privacy): with noiseless singletons and clipped costs, 'cell 8 is a bucket
    of its own' had log-ratio ≈ 2 between x = 0 and x = e_8 at ε = 1. Now within ε."""
    k, cell, eps, trials = 16, 8, 1.0, 6000
    x = np.zeros(k, dtype=int)
    y = x.copy()
    y[cell] = 1

    def alone(data, offset):
        hits = 0
        for t in range(trials):
            labels = dawa_partition(data, eps, 2.0, rng=offset + t)
            hits += (labels == labels[cell]).sum() == 1
        return hits

    assert _within({"alone": alone(x, 0), "with others": trials - alone(x, 0)},
                   {"alone": alone(y, 10**6), "with others": trials - alone(y, 10**6)}, eps, trials)


def test_partitions_and_mwem_inputs():
    with pytest.raises(ValueError, match="negative"):
        dawa_partition([-5, 2, 1, 1], 1.0, 1.0, rng=0)
    with pytest.raises(ValueError, match="fractional"):
        matching_partition([2.5, 1, 1, 0], 1.0, 1.0, rng=0)
    assert np.isfinite(M.MWEM().run(wl.prefix(8), np.full(8, 1000), 1e-4, rng=2)).all()
    assert np.isfinite(M.MWEM(total=10.0).run(wl.prefix(8), np.full(8, 1000), 1e-3, rng=0)).all()
