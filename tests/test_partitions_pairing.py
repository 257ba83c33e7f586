"""Pair partitions and quotient policies of :mod:`blowfish_te.partitions`, against brute force.

Covers the buckets of size <= 2 of Anuarbek's data-dependent Blowfish histograms — the exact
minimum-cost pairing (:func:`optimal_pairing`), its noisy post-processing variant
(:func:`noisy_pairing_partition`, Laplace(Δ_G(I)/ε) counts with the policy-specific sensitivity of
He, Machanavajjhala, Ding, SIGMOD 2014) and the max-weight matching partition with noisy weights
(:func:`matching_partition`) — and the quotient policy G' of a partition (:func:`quotient_policy`,
Anuarbek Lemma 4.1). Every reference is written from the docstrings' definitions by enumerating
all partitions into buckets of size <= 2 of a small domain, or every edge of a small policy.
"""

from __future__ import annotations

import contextlib
import signal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blowfish_te.partitions as partitions
from blowfish_te.partitions import (
    MAX_MATCHING,
    matching_partition,
    noisy_pairing_partition,
    optimal_pairing,
    quotient_policy,
)
from blowfish_te.policies import CliqueEdges, PairEdges, Policy, complete, from_edges, grid, line, partition, threshold, unbounded

# -- brute-force references ---------------------------------------------------------------------


def all_bucketings(cells):
    """Every partition of ``cells`` into buckets of one or two cells (lists of tuples)."""
    cells = list(cells)
    if not cells:
        yield []
        return
    first, rest = cells[0], cells[1:]
    for tail in all_bucketings(rest):
        yield [(first,)] + tail
    for n, other in enumerate(rest):
        for tail in all_bucketings(rest[:n] + rest[n + 1 :]):
            yield [(first, other)] + tail


def pairing_cost(values, buckets, penalty) -> float:
    """Σ over buckets: |v_i - v_j| + penalty for a pair, penalty for a singleton."""
    return sum(penalty + (abs(values[b[0]] - values[b[1]]) if len(b) == 2 else 0.0) for b in buckets)


def min_pairing_cost(values, penalty) -> float:
    return min(pairing_cost(values, b, penalty) for b in all_bucketings(range(len(values))))


def best_bucketing(values, penalty) -> set:
    """The minimum-cost bucketing, asserted unique (continuous noisy values)."""
    scored = sorted((pairing_cost(values, b, penalty), b) for b in all_bucketings(range(len(values))))
    assert len(scored) == 1 or scored[1][0] - scored[0][0] > 1e-9, "the reference optimum is not unique"
    return {frozenset(b) for b in scored[0][1]}


def max_weight_bucketing(k, weight) -> set:
    """The max-weight matching on k cells, only pairs of positive weight ``weight[(i, j)]`` allowed,
    as buckets (matched pairs and singletons); asserted unique."""
    scored = []
    for buckets in all_bucketings(range(k)):
        pairs = [b for b in buckets if len(b) == 2]
        if all(weight[p] > 0 for p in pairs):
            scored.append((sum(weight[p] for p in pairs), buckets))
    scored.sort(key=lambda s: -s[0])
    assert len(scored) == 1 or scored[0][0] - scored[1][0] > 1e-9, "the reference optimum is not unique"
    return {frozenset(b) for b in scored[0][1]}


def buckets_of(labels) -> set:
    """The buckets of a label vector, after checking that it numbers them 0..m-1, each used, and
    that every bucket holds one or two cells."""
    labels = np.asarray(labels)
    assert labels.ndim == 1 and labels.dtype == np.int64
    m = int(labels.max()) + 1 if labels.size else 0
    assert sorted(set(labels.tolist())) == list(range(m))
    buckets = {frozenset(np.flatnonzero(labels == b).tolist()) for b in range(m)}
    assert all(1 <= len(b) <= 2 for b in buckets)
    return buckets


def brute_delta(policy) -> float:
    """Δ_G(I) from the edge list: an edge between cells moves two counts by one, an edge to ⊥ one."""
    k = policy.size
    e = policy.edges
    if (e[:, 1] < k).any():
        return 2.0
    return 1.0 if e.shape[0] else 0.0


def brute_quotient_edges(policy, labels) -> set:
    """The edges of G': each edge (u, v) of G mapped to its buckets (⊥ to ⊥, index m), self-loops dropped."""
    m = int(max(labels)) + 1
    extended = list(labels) + [m]
    out = set()
    for u, v in policy.edges.tolist():
        a, b = extended[u], extended[v]
        if a != b:
            out.add((min(a, b), max(a, b)))
    return out


@contextlib.contextmanager
def returns_within(seconds: float):
    """Fail (rather than hang) when the body does not return: a watchdog for loops that must end."""

    def fire(signum, frame):
        raise AssertionError(f"the call did not return within {seconds} s (an endless loop)")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def add_laplace_recorder(monkeypatch) -> list:
    """Record every add_laplace call of the partitions module (arguments kept), still adding the noise."""
    calls = []
    real = partitions.add_laplace

    def recorder(values, scale, rng, *, sensitivity, integer):
        calls.append({"values": np.array(values, copy=True), "scale": scale, "sensitivity": sensitivity,
                      "integer": integer})
        return real(values, scale, rng, sensitivity=sensitivity, integer=integer)

    monkeypatch.setattr(partitions, "add_laplace", recorder)
    return calls


# -- optimal_pairing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values, penalty, expected",
    [
        ([0.0, 10.0], 1.0, [{0}, {1}]),  # the largest value alone
        ([0.0, 10.0, 10.5], 1.0, [{0}, {1, 2}]),  # the top two paired, the bottom alone
        ([7.0, 7.25], 0.5, [{0, 1}]),  # one pair covers everything
        ([4.0], 2.0, [{0}]),
        ([], 1.0, []),
        ([0.0, 1.0], 1.0, [{0}, {1}]),  # a gap equal to the penalty: pairing does not help
        ([2.5, 0.5, 9.0], 2.0, [{0}, {1}, {2}]),
        ([3.0, 3.0, 3.0], 0.0, [{0}, {1}, {2}]),  # no penalty: a pair never saves anything
        ([0.0, 0.9, 1.0, 5.0], 1.0, [{0}, {1, 2}, {3}]),
        ([0.0, 0.1, 1.0, 5.0], 1.0, [{0, 1}, {2}, {3}]),
        ([[9.0, 0.0], [0.3, 8.8]], 0.5, [{0, 3}, {1, 2}]),  # any shape: labels per flat cell
    ],
)
def test_optimal_pairing_small_cases(values, penalty, expected):
    with returns_within(2.0):
        labels = optimal_pairing(values, penalty)
    assert labels.shape == (np.size(values),)
    assert buckets_of(labels) == {frozenset(b) for b in expected}


@settings(max_examples=150)
@given(
    st.lists(st.integers(0, 12), max_size=7),
    st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5, 7.0]),
)
def test_optimal_pairing_has_the_least_cost_of_all_pairings(halves, penalty):
    values = np.array(halves, dtype=np.float64) / 2.0  # many ties and gaps equal to the penalty
    labels = optimal_pairing(values, penalty)
    buckets = buckets_of(labels)
    assert sum(len(b) for b in buckets) == values.size
    cost = pairing_cost(values, [tuple(b) for b in buckets], penalty)
    assert cost == pytest.approx(min_pairing_cost(values, penalty), abs=1e-9)
    # pairing helps only below a gap of the penalty: no pair at a gap >= penalty
    assert all(abs(values[min(b)] - values[max(b)]) < penalty for b in buckets if len(b) == 2)


@settings(max_examples=60)
@given(st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=7), st.floats(0.01, 20))
def test_optimal_pairing_on_real_values_is_optimal(values, penalty):
    values = np.array(values)
    buckets = buckets_of(optimal_pairing(values, penalty))
    cost = pairing_cost(values, [tuple(b) for b in buckets], penalty)
    assert cost == pytest.approx(min_pairing_cost(values, penalty), abs=1e-9)


def test_optimal_pairing_breaks_ties_by_cell_index():
    """Equal values pair in cell order (a stable sort): within each value, its 1st and 2nd cells,
    3rd and 4th, ...; an odd last cell stays alone. The result does not depend on the sort algorithm."""
    values = np.random.default_rng(11).integers(0, 3, 60).astype(np.float64)
    expected = set()
    for v in range(3):
        cells = np.flatnonzero(values == v).tolist()
        expected |= {frozenset(cells[n : n + 2]) for n in range(0, len(cells), 2)}
    assert buckets_of(optimal_pairing(values, 0.5)) == expected


def test_optimal_pairing_accepts_any_penalty_at_least_zero():
    assert buckets_of(optimal_pairing([1.0, 1.2, 5.0], 0.25)) == {frozenset({0, 1}), frozenset({2})}
    assert buckets_of(optimal_pairing(np.array([3, 1, 2]), 0)) == {frozenset({0}), frozenset({1}), frozenset({2})}


def test_optimal_pairing_refusals():
    with pytest.raises(TypeError, match=r"^values must hold real numbers, got an array of dtype <U1"):
        optimal_pairing(["a", "b"], 1.0)
    with pytest.raises(ValueError, match=r"^values must hold finite numbers"):
        optimal_pairing([0.0, np.nan], 1.0)
    with pytest.raises(ValueError, match=r"^penalty must be >= 0, got -0\.5"):
        optimal_pairing([0.0, 1.0], -0.5)
    with pytest.raises(TypeError, match=r"^penalty must be a real number"):
        optimal_pairing([0.0, 1.0], "1")


# -- noisy_pairing_partition --------------------------------------------------------------------


def _policies_with_sensitivity():
    """(policy, Δ_G(I) expected from the definition) on six cells."""
    return [
        (line(6), 2.0),
        (complete(6), 2.0),
        (threshold(6, 2), 2.0),
        (unbounded(6), 1.0),  # only edges to ⊥
        (grid((2, 3)), 2.0),
        (from_edges(6, [[0, 6], [2, 6], [1, 3]]), 2.0),  # ⊥ and a cell-cell edge
        (from_edges(6, [[0, 6], [3, 6]]), 1.0),
    ]


def test_noisy_pairing_partition_is_the_best_pairing_of_the_replayed_noisy_counts():
    for policy, delta in _policies_with_sensitivity():
        assert brute_delta(policy) == delta
        for seed, (epsilon, epsilon2) in enumerate([(0.7, 0.5), (3.0, 2.0), (1.0, 1.0)]):
            x = np.random.default_rng(100 + seed).integers(0, 9, policy.size)
            noisy = x + np.random.default_rng(seed).laplace(0.0, delta / epsilon, policy.size)
            labels = noisy_pairing_partition(x.reshape(policy.shape), policy, epsilon, epsilon2, rng=seed)
            assert buckets_of(labels) == best_bucketing(noisy, 1.0 / epsilon2), (policy.name, epsilon, epsilon2)


def test_noisy_pairing_partition_without_edges_adds_no_noise():
    policy = from_edges(6, np.zeros((0, 2), dtype=np.int64))  # Δ = 0: counts are public
    x = np.array([0, 5, 1, 9, 5, 2])
    for epsilon2 in (0.4, 1.0, 3.0):
        labels = noisy_pairing_partition(x, policy, 1.0, epsilon2, rng=1)
        cost = pairing_cost(x, [tuple(b) for b in buckets_of(labels)], 1.0 / epsilon2)
        assert cost == pytest.approx(min_pairing_cost(x, 1.0 / epsilon2))


def test_noisy_pairing_partition_draws_integer_laplace_of_the_policy_sensitivity(monkeypatch):
    calls = add_laplace_recorder(monkeypatch)
    x = np.array([3, 0, 4, 4, 1, 2])
    for policy, delta in _policies_with_sensitivity():
        for epsilon in (0.5, 2.0):
            calls.clear()
            noisy_pairing_partition(x, policy, epsilon, 1.5, rng=4)
            assert len(calls) == 1
            (call,) = calls
            assert call["values"].tolist() == x.tolist()
            assert call["scale"] == pytest.approx(delta / epsilon)
            assert call["sensitivity"] == delta  # ε = sensitivity / scale
            assert call["integer"] is True  # counts are integers: exact discrete Laplace on the secure path


def test_noisy_pairing_partition_secure_path_gives_a_pairing():
    labels = noisy_pairing_partition([0, 40, 41, 90, 200], line(5), 50.0, 0.2)
    assert buckets_of(labels) == {frozenset({0}), frozenset({1, 2}), frozenset({3}), frozenset({4})}


def test_noisy_pairing_partition_refusals():
    policy = line(4)
    x = [1, 2, 3, 4]
    with pytest.raises(ValueError, match=r"^epsilon must be a finite number > 0, got 0"):
        noisy_pairing_partition(x, policy, 0, 1.0, rng=0)
    with pytest.raises(ValueError, match=r"^epsilon2 must be a finite number > 0, got -1"):
        noisy_pairing_partition(x, policy, 1.0, -1, rng=0)
    with pytest.raises(TypeError, match=r"^epsilon2 must be a real number > 0"):
        noisy_pairing_partition(x, policy, 1.0, "1", rng=0)
    with pytest.raises(ValueError, match=r"^x has shape \(3,\), expected \(4,\)"):
        noisy_pairing_partition([1, 2, 3], policy, 1.0, 1.0, rng=0)
    with pytest.raises(TypeError, match=r"^policy must be a blowfish_te Policy"):
        noisy_pairing_partition(x, "line", 1.0, 1.0, rng=0)


# -- matching_partition -------------------------------------------------------------------------


@settings(max_examples=80)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=7), st.sampled_from([0.25, 0.4, 1.0, 2.0, 3.0]))
def test_matching_partition_without_noise_is_a_max_weight_matching(x, epsilon2):
    """ε = 1e100: the Laplace(2/ε) noise is below the weights' rounding, so the matching maximises
    Σ over pairs of -(|x_i - x_j| + 1/ε₂) + 2/ε₂, only positive weights used."""
    labels = matching_partition(x, 1e100, epsilon2, rng=0)
    buckets = buckets_of(labels)
    pairs = [tuple(sorted(b)) for b in buckets if len(b) == 2]
    weights = [-(abs(x[i] - x[j]) + 1.0 / epsilon2) + 2.0 / epsilon2 for i, j in pairs]
    assert all(w > 0 for w in weights)
    best = max(
        sum(-(abs(x[b[0]] - x[b[1]]) + 1.0 / epsilon2) + 2.0 / epsilon2 for b in bs if len(b) == 2)
        for bs in all_bucketings(range(len(x)))
        if all(abs(x[b[0]] - x[b[1]]) < 1.0 / epsilon2 for b in bs if len(b) == 2)
    )
    assert sum(weights) == pytest.approx(best, abs=1e-9)
    # buckets are named by their smallest cell, in cell order
    assert [int(labels[min(b)]) for b in sorted(buckets, key=min)] == list(range(len(buckets)))


def test_matching_partition_keeps_only_positive_weights():
    # a gap of exactly 1/ε₂ weighs 0: the cells stay apart
    assert buckets_of(matching_partition([0, 1], 1e100, 1.0, rng=0)) == {frozenset({0}), frozenset({1})}
    assert buckets_of(matching_partition([4, 0, 2], 1e100, 0.5, rng=0)) == {frozenset({0}), frozenset({1}), frozenset({2})}
    assert buckets_of(matching_partition([0, 0], 1e100, 2.0, rng=0)) == {frozenset({0, 1})}  # weight 1/2


def test_matching_partition_is_the_max_weight_matching_of_the_replayed_noisy_weights():
    k = 6
    i, j = np.triu_indices(k, 1)
    for seed in range(6):
        x = np.random.default_rng(50 + seed).integers(0, 5, k)
        for epsilon, epsilon2 in [(0.5, 0.5), (1.0, 1.0), (3.0, 0.4), (2.0, 2.0)]:
            gen = np.random.default_rng(seed)
            pair_noise = gen.laplace(0.0, 2.0 / epsilon, i.size)  # pair weights first, in (i < j) order
            twin_noise = gen.laplace(0.0, 2.0 / epsilon, k)
            pair = -(np.abs(x[i] - x[j]) + 1.0 / epsilon2) + pair_noise
            twin = -1.0 / epsilon2 + twin_noise
            weight = {(a, b): pair[n] - twin[a] - twin[b] for n, (a, b) in enumerate(zip(i.tolist(), j.tolist()))}
            labels = matching_partition(x, epsilon, epsilon2, rng=seed)
            assert buckets_of(labels) == max_weight_bucketing(k, weight), (seed, epsilon, epsilon2)


def test_matching_partition_draws_laplace_two_over_epsilon_on_every_weight(monkeypatch):
    calls = add_laplace_recorder(monkeypatch)
    x = np.array([2, 7, 7, 0, 3])
    k = x.size
    i, j = np.triu_indices(k, 1)
    for epsilon, epsilon2 in [(0.5, 4.0), (2.0, 0.25)]:
        calls.clear()
        matching_partition(x, epsilon, epsilon2, rng=3)
        assert len(calls) == 2
        pair, twin = calls
        assert pair["values"] == pytest.approx(-(np.abs(x[i] - x[j]) + 1.0 / epsilon2))
        assert twin["values"] == pytest.approx(np.full(k, -1.0 / epsilon2))
        for call, count in ((pair, i.size), (twin, k)):
            assert call["scale"] == pytest.approx(2.0 / epsilon)
            assert call["sensitivity"] == count  # the number of weights: one lattice for all of them
            assert call["integer"] is False  # real weights: lattice Laplace on the secure path


def test_matching_partition_secure_path_gives_a_pairing():
    labels = matching_partition([0, 30, 31, 80], 100.0, 0.2)
    assert buckets_of(labels) == {frozenset({0}), frozenset({1, 2}), frozenset({3})}


def test_matching_partition_accepts_exactly_max_matching_cells():
    x = 10 * np.arange(MAX_MATCHING)  # every gap far above 1/ε₂: no positive weight, nothing to match
    labels = matching_partition(x, 1e6, 1.0, rng=0)
    assert labels.tolist() == list(range(MAX_MATCHING))


def test_matching_partition_refusals():
    with pytest.raises(
        ValueError,
        match=(
            rf"^the exact matching partition handles up to {MAX_MATCHING} cells \(O\(K³\)\), got {MAX_MATCHING + 1}: "
            r"use noisy_pairing_partition, whose privacy is post-processing$"
        ),
    ):
        matching_partition(np.zeros(MAX_MATCHING + 1, dtype=np.int64), 1.0, 1.0, rng=0)
    with pytest.raises(ValueError, match=r"^epsilon must be a finite number > 0, got -2"):
        matching_partition([1, 2], -2, 1.0, rng=0)
    with pytest.raises(TypeError, match=r"^epsilon must be a real number > 0"):
        matching_partition([1, 2], None, 1.0, rng=0)
    with pytest.raises(ValueError, match=r"^epsilon2 must be a finite number > 0, got 0"):
        matching_partition([1, 2], 1.0, 0, rng=0)
    with pytest.raises(TypeError, match=r"^epsilon2 must be a real number > 0"):
        matching_partition([1, 2], 1.0, "0.5", rng=0)
    with pytest.raises(ValueError, match=r"^x must be a non-empty 1-D histogram, got shape \(2, 2\)"):
        matching_partition([[1, 2], [3, 4]], 1.0, 1.0, rng=0)


# -- quotient_policy ----------------------------------------------------------------------------


def _policy(name: str) -> Policy:
    """Six-cell policies (and one of 40 cells), with ⊥, clique blocks, explicit pairs and offsets."""
    if name == "mixed":  # a clique block next to explicit pairs with ⊥
        return Policy((6,), [CliqueEdges(np.array([1, 3, 4])), PairEdges(np.array([0, 2, 5]), np.array([2, 6, 6]))],
                      has_bottom=True)
    if name == "large partition":  # a block of 34 cells is kept as a clique
        return partition(np.where(np.arange(40) % 7 == 0, 1, 0))
    return {
        "line": lambda: line(6),
        "complete": lambda: complete(6),
        "threshold": lambda: threshold(6, 2),
        "unbounded": lambda: unbounded(6),
        "grid": lambda: grid((2, 3)),
        "full grid": lambda: grid((2, 3), theta=3),
        "with bottom": lambda: from_edges(6, [[0, 6], [2, 6], [1, 3], [4, 5]]),
        "small partition": lambda: partition([0, 1, 0, 1, 2, 0]),
    }[name]()


@settings(max_examples=150)
@given(
    st.sampled_from(["line", "complete", "threshold", "unbounded", "grid", "full grid", "with bottom",
                     "small partition", "mixed", "large partition"]),
    st.data(),
)
def test_quotient_policy_merges_buckets_of_every_edge(name, data):
    policy = _policy(name)
    k = policy.size
    raw = data.draw(st.lists(st.integers(0, min(k, 8) - 1), min_size=k, max_size=k))
    labels = np.unique(raw, return_inverse=True)[1].reshape(-1)  # buckets 0..m-1, each used
    m = int(labels.max()) + 1
    q = quotient_policy(policy, labels)
    expected = brute_quotient_edges(policy, labels.tolist())
    assert q.shape == (m,)
    assert set(map(tuple, q.edges.tolist())) == expected
    assert q.has_bottom == any(b == m for _, b in expected)  # a bucket meets ⊥ when one of its cells does


def test_quotient_of_a_clique_is_a_clique_on_its_buckets():
    q = quotient_policy(complete(6), [2, 0, 1, 2, 0, 3])
    assert set(map(tuple, q.edges.tolist())) == {(a, b) for a in range(4) for b in range(a + 1, 4)}
    assert not q.has_bottom
    q = quotient_policy(_policy("mixed"), [0, 1, 0, 1, 2, 3])  # clique {1, 3, 4} -> buckets {1, 2}
    assert set(map(tuple, q.edges.tolist())) == {(1, 2), (0, 4), (3, 4)}
    assert q.has_bottom


def test_quotient_policy_reads_labels_of_the_domain_shape():
    policy = grid((2, 3))
    labels = np.array([[0, 0, 1], [2, 3, 1]])
    flat = quotient_policy(policy, labels.reshape(-1))
    shaped = quotient_policy(policy, labels)
    assert set(map(tuple, shaped.edges.tolist())) == set(map(tuple, flat.edges.tolist())) == {
        (0, 1), (0, 2), (0, 3), (1, 3), (2, 3)
    }


def test_quotient_of_a_policy_without_edges_has_no_edges():
    policy = from_edges(5, np.zeros((0, 2), dtype=np.int64))
    q = quotient_policy(policy, [1, 0, 1, 2, 0])
    assert q.shape == (3,)
    assert q.edges.shape == (0, 2)
    assert not q.has_bottom


def test_quotient_policy_with_one_bucket_keeps_only_bottom():
    q = quotient_policy(from_edges(4, [[0, 1], [2, 4], [1, 3]]), [0, 0, 0, 0])
    assert q.shape == (1,)
    assert q.edges.tolist() == [[0, 1]]  # the one bucket meets ⊥ (index m = 1)
    assert q.has_bottom


def test_quotient_policy_refusals():
    policy = line(4)
    with pytest.raises(ValueError, match=r"^labels must be 4 integer bucket labels, one per cell$"):
        quotient_policy(policy, [0, 1, 2])
    with pytest.raises(ValueError, match=r"^labels must be 4 integer bucket labels, one per cell$"):
        quotient_policy(policy, [0, 1, 2, 3, 0])
    with pytest.raises(ValueError, match=r"^labels must be 4 integer bucket labels, one per cell$"):
        quotient_policy(policy, [0.0, 1.0, 1.0, 0.0])
    with pytest.raises(ValueError, match=r"^labels must be 4 integer bucket labels, one per cell$"):
        quotient_policy(policy, [True, False, True, False])
    with pytest.raises(ValueError, match=r"^labels must number the buckets 0\.\.m-1, each used$"):
        quotient_policy(policy, [0, 2, 2, 0])  # bucket 1 unused
    with pytest.raises(ValueError, match=r"^labels must number the buckets 0\.\.m-1, each used$"):
        quotient_policy(policy, [-1, 1, 0, 0])  # -1 is no bucket
    with pytest.raises(ValueError, match=r"^labels must number the buckets 0\.\.m-1, each used$"):
        quotient_policy(policy, [-1, 1, 1, -1])
    with pytest.raises(TypeError, match=r"^labels must be an array, could not convert it"):
        quotient_policy(policy, [[0, 1], [2]])
    with pytest.raises(TypeError, match=r"^policy must be a blowfish_te Policy"):
        quotient_policy(np.zeros(4), [0, 1, 2, 3])
