"""Interval partitions of an ordered domain (blowfish_te.partitions), against brute force written
from the definitions on small domains: the median deviation dev(b) = min_c Σ_{i∈b} |x_i - c|, the
DAWA-style pieces and their scores (Li, Hay, Miklau, Wang, "A data- and workload-aware algorithm
for range queries under differential privacy", PVLDB 2014) with every tiling enumerated, the labels
of the least-score tiling, the exact tie rules of the dynamic program, the report-noisy-min noise
each piece receives, and the argument checks."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blowfish_te.partitions as P
from blowfish_te.noise import add_laplace
from blowfish_te.partitions import (
    BUCKET_GUARD,
    MAX_DAWA,
    RUN_DOUBLING,
    RUN_GUARD,
    best_interval_partition,
    dawa_partition,
    median_deviations,
    noise_free_partition,
    price_factor,
    tree_cost,
    tree_costs,
)

pytestmark = pytest.mark.core

# --------------------------------------------------------------------------------------------
# brute force from the definitions


def _dev(values) -> int:
    """min_c Σ |x_i - c|, trying every c among the values (a median is one of them)."""
    values = [int(v) for v in values]
    return min(sum(abs(v - c) for v in values) for c in values)


def _dyadic(k: int) -> list[int]:
    return [1 << j for j in range(k.bit_length())]


def _default_length(k: int) -> int:
    """K/32, at least min(K, 16), rounded down to a power of two (the documented default)."""
    target = max(k // 32, min(k, 16))
    return max(n for n in _dyadic(target))


def _pieces(k: int, max_length: int):
    """Every candidate piece of dawa_partition as (buckets, single): buckets a tuple of (lo, hi),
    single whether the piece was cut into buckets of one cell (its noise has δ = 1)."""
    subs = [n for n in _dyadic(k) if n <= max_length]
    out = []
    for length in _dyadic(k):  # dyadic pieces at every start, cut into dyadic buckets
        for a in range(k - length + 1):
            for sub in subs:
                if sub <= length:
                    out.append((tuple((b, b + sub) for b in range(a, a + length, sub)), sub == 1))
    for a in range(k):  # the suffix [a, k) and the prefix [0, k - a)
        n = k - a
        for sub in subs:
            if n > sub:  # a run of buckets from the inner end, the rest as one bucket at the end
                full, rest = divmod(n, sub)
                suffix = [(a + i * sub, a + (i + 1) * sub) for i in range(full)] + ([(a + full * sub, k)] if rest else [])
                prefix = ([(0, rest)] if rest else []) + [(rest + i * sub, rest + (i + 1) * sub) for i in range(full)]
                out.append((tuple(suffix), sub == 1))
                out.append((tuple(prefix), sub == 1))
        if n <= max_length:  # the whole end piece as one bucket
            out.append((((a, k),), False))
            out.append((((0, n),), False))
    return out


def _score(x, buckets, price: float, unit: float) -> float:
    n = len(buckets)
    guard = BUCKET_GUARD if n == 1 else RUN_GUARD + RUN_DOUBLING * math.log2(n)
    return sum(_dev(x[lo:hi]) for lo, hi in buckets) + n * price + guard * unit


def _optimum(x, price: float, unit: float, max_length: int, tol: float = 1e-6):
    """(least total score over all tilings of [0, K) by pieces, {labels of every tiling within tol})."""
    k = len(x)
    by_start = {}
    for buckets, _ in _pieces(k, max_length):
        by_start.setdefault(buckets[0][0], []).append((buckets, _score(x, buckets, price, unit)))
    # best[end]: {cut points: least score}; a near-optimal tiling has near-optimal prefixes
    best = {0: {(): 0.0}}
    for start in range(k):
        here = best.get(start)
        if not here:
            continue
        for buckets, score in by_start.get(start, []):
            end = buckets[-1][1]
            cuts_here = tuple(hi for _, hi in buckets)
            slot = best.setdefault(end, {})
            for cuts, value in here.items():
                key = cuts + cuts_here
                slot[key] = min(slot.get(key, math.inf), value + score)
        if start + 1 in best:
            low = min(best[start + 1].values())
            best[start + 1] = {c: v for c, v in best[start + 1].items() if v <= low + tol}
    final = best[k]
    low = min(final.values())
    labels = set()
    for cuts, value in final.items():
        if value <= low + tol:
            lab, lo = [], 0
            for bucket, hi in enumerate(cuts):
                lab += [bucket] * (hi - lo)
                lo = hi
            labels.add(tuple(lab))
    return low, labels


def _interval_brute(scores: dict, k: int):
    """All partitions of [0, k) into intervals scored by scores[length][start], by enumeration."""
    results = []

    def walk(start, cuts, total):
        if start == k:
            results.append((total, cuts))
            return
        for n in sorted(scores):
            if start + n <= k:
                walk(start + n, cuts + (start + n,), total + scores[n][start])

    walk(0, (), 0.0)
    return results


# --------------------------------------------------------------------------------------------
# median deviations


@given(st.lists(st.integers(0, 30), min_size=1, max_size=9), st.data())
@settings(max_examples=60, deadline=None, database=None)
def test_median_deviations_match_brute_force(values, data):
    length = data.draw(st.integers(1, len(values)))
    got = median_deviations(values, length)
    assert got.dtype == np.int64
    assert got.tolist() == [_dev(values[a : a + length]) for a in range(len(values) - length + 1)]


def test_median_deviations_known_windows():
    # windows starting at cell 0 and of odd length included
    assert median_deviations([5, 1, 1, 9, 2], 3).tolist() == [4, 8, 8]
    assert median_deviations([5, 1, 1, 9, 2], 5).tolist() == [12]
    assert median_deviations([4, 0], 2).tolist() == [4]
    assert median_deviations([7], 1).tolist() == [0]
    assert median_deviations(np.array([3.0, 1.0, 2.0]), 1).dtype == np.int64


@pytest.mark.parametrize(
    "x, length, error, message",
    [
        ([1, 2, 3], 0, ValueError, r"^length must be an integer >= 1, got 0$"),
        ([1, 2, 3], 4, ValueError, r"^length must be an integer <= 3, got 4$"),
        ([1, 2, 3], 2.0, TypeError, r"^length must be an integer, got 2\.0 \(float\)$"),
        ([[1, 2], [3, 4]], 1, ValueError, r"^x must be a non-empty 1-D histogram, got shape \(2, 2\)$"),
        ([], 1, ValueError, r"^x must be a non-empty 1-D histogram, got shape \(0,\)$"),
        ([[1, 2], [3]], 1, TypeError, r"^x must be an array, could not convert it"),
        ([1, -2, 3], 1, ValueError, r"^x must hold non-negative counts"),
    ],
)
def test_median_deviations_refuses_bad_arguments(x, length, error, message):
    with pytest.raises(error, match=message):
        median_deviations(x, length)


# --------------------------------------------------------------------------------------------
# best_interval_partition and the tie rules of the dynamic program


@given(st.integers(1, 7), st.data())
@settings(max_examples=40, deadline=None, database=None)
def test_best_interval_partition_is_a_least_score_partition(k, data):
    lengths = data.draw(st.sets(st.integers(2, k), max_size=k)) if k > 1 else set()
    scores = {n: data.draw(st.lists(st.integers(0, 6), min_size=k - n + 1, max_size=k - n + 1)) for n in {1, *lengths}}
    labels = best_interval_partition({n: np.array(v, dtype=np.float64) for n, v in scores.items()})
    assert labels.dtype == np.int64 and labels.shape == (k,)
    options = _interval_brute(scores, k)
    low = min(total for total, _ in options)
    cuts = tuple(int(i) + 1 for i in np.flatnonzero(np.diff(labels))) + (k,)
    assert labels[0] == 0 and set(np.diff(labels).tolist()) <= {0, 1}
    chosen = [total for total, c in options if c == cuts]
    assert chosen and min(chosen) == low
    # ties go to the longer interval: among the optimal partitions scanned from the right end,
    # the chosen one's last interval is the longest
    last = max(k - c[-2] if len(c) > 1 else k for total, c in options if total == low)
    assert (k - cuts[-2] if len(cuts) > 1 else k) == last


def test_best_interval_partition_ties_go_to_the_longer_interval():
    flat = {1: np.ones(4), 2: np.full(3, 2.0), 4: np.array([4.0])}
    assert best_interval_partition(flat).tolist() == [0, 0, 0, 0]
    assert best_interval_partition({1: np.ones(3), 2: np.full(2, 2.0)}).tolist() == [0, 1, 1]
    assert best_interval_partition({1: [1.0, 1.0, 1.0], 3: [3.5]}).tolist() == [0, 1, 2]
    assert best_interval_partition({1: [3.0]}).tolist() == [0]
    assert best_interval_partition({1: [1, 1, 1], 3: [3]}).tolist() == [0, 0, 0]


def test_best_tiling_prefix_and_suffix_pieces_must_win_strictly():
    at = {1: np.ones(3), 2: np.full(2, 2.0), 3: np.array([3.0])}
    # tied prefix and suffix pieces lose to the dyadic pieces
    assert P._best_tiling(at, prefix=np.array([1.0, 2.0, 3.0])) == ([("at", 0, 3)], 3.0)
    assert P._best_tiling(at, suffix=np.array([3.0, 2.0, 1.0])) == ([("at", 0, 3)], 3.0)
    # cheaper ones win, at the start that minimises the total
    assert P._best_tiling(at, prefix=np.array([1.0, 2.0, 2.5])) == ([("prefix", 0, 3)], 2.5)
    assert P._best_tiling(at, suffix=np.array([3.0, 2.0, 0.5])) == ([("at", 0, 2), ("suffix", 2, 3)], 2.5)
    assert P._best_tiling(at, suffix=np.array([3.0, 1.5, 2.0])) == ([("at", 0, 1), ("suffix", 1, 3)], 2.5)
    singles = {1: np.array([1.0, 1.0, 1.0, 0.0])}
    assert P._best_tiling(singles) == ([("at", 0, 1), ("at", 1, 2), ("at", 2, 3), ("at", 3, 4)], 3.0)
    mixed = {1: np.array([0.0, 5.0, 0.0, 0.0]), 2: np.array([9.0, 1.0, 9.0])}
    assert P._best_tiling(mixed) == ([("at", 0, 1), ("at", 1, 3), ("at", 3, 4)], 1.0)
    assert P._best_tiling(mixed, prefix=np.array([9.0, 0.5, 9.0, 9.0])) == ([("prefix", 0, 2), ("at", 2, 3), ("at", 3, 4)], 0.5)
    assert P._best_tiling(mixed, prefix=np.array([9.0, 9.0, 9.0, 0.25])) == ([("prefix", 0, 4)], 0.25)


@pytest.mark.parametrize(
    "scores, error, message",
    [
        ([1.0, 2.0], TypeError, r"^scores must be a dict \{interval length: array of scores\}, got list$"),
        ({2: [1.0]}, ValueError, r"^scores must include length 1 \(single cells\), so that every domain has a partition$"),
        ({1: []}, ValueError, r"^scores\[1\] must score at least one cell$"),
        ({1: [1.0, math.nan]}, ValueError, r"^scores\[1\] must hold finite numbers"),
        ({1: ["a", "b"]}, TypeError, r"^scores\[1\] must hold real numbers"),
        ({2: [1.0], 1: [[1.0, 2.0], [3.0, 4.0]]}, ValueError, r"^scores\[1\] must be a 1-D array, got shape \(2, 2\)$"),
        ({1: [1.0, 2.0, 3.0], 4: [1.0]}, ValueError, r"^scores keys must be interval lengths in \[1, 3\], got 4$"),
        ({1: [1.0, 2.0, 3.0], 0: [1.0]}, ValueError, r"^scores keys must be interval lengths in \[1, 3\], got 0$"),
        ({1: [1.0, 2.0, 3.0], 2.0: [1.0, 2.0]}, ValueError, r"^scores keys must be interval lengths in \[1, 3\], got 2\.0$"),
        ({1: [1.0, 2.0, 3.0], 2: [1.0, math.inf]}, ValueError, r"^scores\[2\] must hold finite numbers"),
        ({1: [1.0, 2.0, 3.0], 2: [[1.0, 2.0]]}, ValueError, r"^scores\[2\] must be a 1-D array, got shape \(1, 2\)$"),
        ({1: [1.0, 2.0, 3.0], 2: [1.0, 2.0, 3.0]}, ValueError, r"^scores\[2\] must hold 2 values \(one per start\), got 3$"),
        ({1: [1.0, 2.0, 3.0], 2: [1.0]}, ValueError, r"^scores\[2\] must hold 2 values \(one per start\), got 1$"),
        ({1: [1.0, 2.0, 3.0], 3: [1.0, 2.0]}, ValueError, r"^scores\[3\] must hold 1 values \(one per start\), got 2$"),
    ],
)
def test_best_interval_partition_refuses_bad_scores(scores, error, message):
    with pytest.raises(error, match=message):
        best_interval_partition(scores)


def test_best_interval_partition_accepts_numpy_integer_lengths():
    scores = {np.int64(1): [2.0, 2.0, 2.0], np.int64(3): [1.0]}
    assert best_interval_partition(scores).tolist() == [0, 0, 0]


# --------------------------------------------------------------------------------------------
# noise_free_partition: DAWA's own optimum of its cost model, no noise, no guards


_HUGE = 1e9  # noise of scale ~ 2/ε: far below every gap between distinct tiling scores
_PRICES = st.sampled_from([0.0, 0.5, 1.0, 3.0])
_EPS2 = st.sampled_from([0.3, 1.0, 4.0])


@given(st.lists(st.integers(0, 12), min_size=1, max_size=8), _EPS2, _PRICES, st.sampled_from([None, 1, 2, 4, 8]))
@settings(max_examples=80, deadline=None, database=None)
def test_noise_free_partition_is_a_least_score_tiling(x, epsilon2, penalty, max_length):
    cap = _default_length(len(x)) if max_length is None else max_length
    _, optimal = _optimum(x, penalty / epsilon2, 0.0, cap)
    labels = noise_free_partition(x, epsilon2, penalty=penalty, max_length=max_length)
    assert labels.dtype == np.int64
    assert tuple(labels.tolist()) in optimal


@given(st.lists(st.integers(0, 30), min_size=1, max_size=8), _EPS2, _PRICES, st.sampled_from([0.5, 2.0, 8.0]))
@settings(max_examples=60, deadline=None, database=None)
def test_guarded_noise_free_partition_is_a_least_score_tiling_with_the_guards(x, epsilon2, penalty, epsilon1):
    """With ``guarded_at`` = ε₁ every piece pays dawa_partition's guard in units of 2/ε₁ (brute force)."""
    _, optimal = _optimum(x, penalty / epsilon2, 2.0 / epsilon1, _default_length(len(x)))
    assert tuple(noise_free_partition(x, epsilon2, penalty=penalty, guarded_at=epsilon1).tolist()) in optimal


def test_noise_free_partition_targeted_pieces():
    """Cases whose optimum is a single kind of piece (suffix and prefix runs with and without a
    rest bucket, whole end pieces, dyadic runs), each checked against the brute force."""
    cases = [
        ([0, 0, 0, 0, 2, 9, 0, 7], 0.2, 2),
        ([5, 0, 0, 9, 9, 0, 0, 4], 0.2, 2),
        ([1, 8, 8, 0, 0, 3, 3, 0], 0.3, 2),
        ([3, 9, 1, 0, 0, 0, 0, 0], 1.0, 8),
        ([0, 0, 0, 0, 0, 1, 9, 3], 1.0, 8),
        ([9, 0, 0, 0, 0, 0, 0, 0], 1.0, 8),
        ([0, 0, 7, 7, 7, 7, 7, 7], 1.0, 8),
        ([0, 1, 2, 3, 4, 5, 6, 7], 0.5, 4),
        ([1, 9, 2, 8, 3, 7, 4], 0.05, 2),
        ([2, 1, 2, 2, 5, 1, 5], 1.0, 4),
        ([5, 0, 4, 0, 5, 3, 3], 0.3, 2),
    ]
    for x, epsilon2, max_length in cases:
        for penalty in (0.5, 2.0):
            _, optimal = _optimum(x, penalty / epsilon2, 0.0, max_length)
            assert tuple(noise_free_partition(x, epsilon2, penalty=penalty, max_length=max_length).tolist()) in optimal, (x, penalty)


def test_noise_free_partition_known_partitions():
    # a spike at cell 0 in front of 5 flat cells: the spike alone, the suffix [1, 6) as one bucket
    assert noise_free_partition([30, 0, 0, 0, 0, 0], 1.0, max_length=8).tolist() == [0, 1, 1, 1, 1, 1]
    # flat data, any price: one bucket
    assert noise_free_partition([4, 4, 4, 4], 0.5).tolist() == [0, 0, 0, 0]
    # no price: every cell its own bucket costs nothing, and ties go to longer pieces only at equal score
    assert noise_free_partition([1, 9, 1, 9], 1.0, penalty=0.0).max() == 3
    # the guards' price: a spike of 30 keeps its own bucket unguarded, not where a piece costs 3.5 · 2/0.1 = 70
    assert noise_free_partition([30, 0, 0, 0, 0, 0], 1.0, max_length=8, guarded_at=10.0).tolist() == [0, 1, 1, 1, 1, 1]
    assert noise_free_partition([30, 0, 0, 0, 0, 0], 1.0, max_length=8, guarded_at=0.1).tolist() == [0] * 6
    with pytest.raises(ValueError, match="guarded_at"):
        noise_free_partition([1, 2], 1.0, guarded_at=0.0)


# --------------------------------------------------------------------------------------------
# tree_cost: DAWA's cost over aligned dyadic tilings (the check's feature)


def _tree_brute(x, price: float) -> float:
    """min over aligned dyadic tilings of Σ dev + price per block, by recursion on the blocks."""
    k = len(x)
    top = 1
    while top < k:
        top *= 2

    def best(lo: int, length: int) -> float:
        hi = min(lo + length, k)
        whole = _dev(x[lo:hi]) + price
        if length == 1:
            return whole
        half = length // 2
        if lo + half >= k:
            return min(whole, best(lo, half))
        return min(whole, best(lo, half) + best(lo + half, half))

    return best(0, top)


@given(st.lists(st.integers(0, 9), min_size=1, max_size=19), st.sampled_from([0.0, 0.5, 2.0, 7.0]))
@settings(max_examples=120, deadline=None, database=None)
def test_tree_cost_is_the_least_score_over_aligned_tilings(x, price):
    assert tree_cost(x, price) == pytest.approx(_tree_brute(x, price), rel=1e-9, abs=1e-9)


@given(st.lists(st.integers(0, 9), min_size=1, max_size=16), st.sampled_from([0.0, 0.5, 3.0]), st.data())
@settings(max_examples=80, deadline=None, database=None)
def test_tree_cost_moves_by_at_most_one_per_record(x, price, data):
    """The sensitivity its noise is calibrated to: one record added or removed moves it by <= 1."""
    i = data.draw(st.integers(0, len(x) - 1))
    more = list(x)
    more[i] += 1
    assert abs(tree_cost(more, price) - tree_cost(x, price)) <= 1 + 1e-9


def test_tree_cost_known_values_and_arguments():
    assert tree_cost([4, 4, 4, 4], 2.0) == 2.0  # one flat block
    assert tree_cost([0, 8, 0, 0], 1.0) == 3.0  # cells 0 and 1 alone, the flat half whole: 3 blocks, no deviation
    assert tree_cost([0, 8, 0, 0], 10.0) == 18.0  # dearer blocks: one block, dev 8
    with pytest.raises(ValueError, match="price must be"):
        tree_cost([1, 2], -1.0)
    with pytest.raises(ValueError, match="non-empty 1-D histogram"):
        tree_cost(np.zeros((2, 2), dtype=int), 1.0)


@given(st.lists(st.integers(0, 9), min_size=1, max_size=21), st.lists(st.sampled_from([0.0, 0.5, 2.0, 7.0, 30.0]),
                                                                  min_size=1, max_size=4))
@settings(max_examples=120, deadline=None, database=None)
def test_tree_costs_is_tree_cost_at_every_price(x, prices):
    """One pass over the levels for several prices gives, price by price, the least score over
    aligned tilings (the brute force), in the order given."""
    together = tree_costs(x, prices)
    assert together.shape == (len(prices),)
    for price, cost in zip(prices, together):
        assert cost == pytest.approx(_tree_brute(x, price), rel=1e-9, abs=1e-9)


def test_tree_costs_arguments():
    assert tree_costs([0, 8, 0, 0, 5], [1.0, 10.0]).tolist() == [tree_cost([0, 8, 0, 0, 5], 1.0), tree_cost([0, 8, 0, 0, 5], 10.0)]
    with pytest.raises(ValueError, match="prices must hold numbers >= 0"):
        tree_costs([1, 2], [1.0, -1.0])
    with pytest.raises(ValueError, match="prices must be a 1-D array"):
        tree_costs([1, 2], 1.0)


def test_price_factor():
    assert price_factor(None) == 1.0
    assert price_factor(0.25) == 1.0 and price_factor(10.0) == 1.0
    assert price_factor(0.025) == pytest.approx(10.0)
    assert price_factor(0.0) == 1e4 and price_factor(1e-9) == 1e4  # at most 10⁴: everything merges
    with pytest.raises(ValueError, match="scale must be"):
        price_factor(-0.1)


# --------------------------------------------------------------------------------------------
# dawa_partition: with huge ε the noisy minimum is the noiseless one


@given(
    st.lists(st.integers(0, 12), min_size=1, max_size=8), st.sampled_from([0.2, 1.0, 3.0]),
    st.sampled_from([None, 0.0, 0.6, 2.0]), st.sampled_from([0.0, 0.4, 1.5, 4.0]),
    st.sampled_from([None, 1, 2, 4, 8]), st.integers(0, 2**16),
)
@settings(max_examples=80, deadline=None, database=None)
def test_dawa_partition_with_huge_epsilon_is_the_least_score_tiling(x, epsilon2, penalty, unit, max_length, seed):
    cap = _default_length(len(x)) if max_length is None else max_length
    kwargs = {} if penalty is None else {"penalty": penalty}
    price = (1.0 if penalty is None else penalty) / epsilon2
    labels = dawa_partition(
        x, _HUGE, epsilon2, np.random.default_rng(seed), guard=unit * _HUGE / 2.0, max_length=max_length, **kwargs
    )
    assert labels.dtype == np.int64 and labels.shape == (len(x),)
    _, optimal = _optimum(x, price, unit, cap)
    assert tuple(labels.tolist()) in optimal


def test_dawa_partition_with_huge_epsilon_targeted():
    """Structures that only one kind of piece isolates cheaply, each checked against brute force."""
    cases = [
        ([30, 0, 0, 0, 0, 0, 0, 0], 1.0, 1.0, 8),  # spike at 0, then the suffix [1, 8) as one bucket
        ([0, 0, 0, 0, 0, 0, 0, 30], 1.0, 1.0, 8),  # the prefix [0, 7) as one bucket
        ([0, 0, 0, 0, 2, 9, 0, 7], 0.2, 1.0, 2),
        ([5, 0, 0, 9, 9, 0, 0, 4], 0.2, 1.0, 2),
        ([1, 8, 8, 0, 0, 3, 3, 0], 0.3, 1.0, 2),
        ([0, 9, 0, 9, 0, 9, 0, 9], 0.1, 0.5, 1),
        ([1, 9, 2, 8, 3, 7, 4], 0.05, 2.0, 2),
        ([0, 0, 7, 7, 7, 7, 7, 7], 1.0, 1.0, 8),
        ([7, 7, 7, 7, 7, 7, 0, 0], 1.0, 1.0, 8),
        ([0, 4, 4, 4, 4, 4, 4, 4], 1.0, 1.0, 2),
        ([4, 4, 4, 4, 4, 4, 4, 0], 1.0, 1.0, 2),
        ([0, 0, 5, 5, 0, 0, 5, 5], 0.1, 3.0, 2),
        ([2, 0, 0, 5, 5, 0, 0, 5], 0.1, 3.0, 2),
        ([0, 3, 3, 3, 3, 6, 6, 6], 0.5, 2.0, 4),
    ]
    rng = np.random.default_rng(2014)
    for x, epsilon2, unit, max_length in cases:
        for scale in (0.25, 1.0, 4.0):
            labels = dawa_partition(x, _HUGE, epsilon2, rng, guard=unit * scale * _HUGE / 2.0, max_length=max_length)
            _, optimal = _optimum(x, 1.0 / epsilon2, unit * scale, max_length)
            assert tuple(labels.tolist()) in optimal, (x, epsilon2, unit * scale, max_length)


def test_dawa_partition_isolates_a_spike_next_to_a_flat_rest():
    labels = dawa_partition([40] + [0] * 7, _HUGE, 1.0, np.random.default_rng(1), guard=_HUGE / 2.0, max_length=8)
    assert labels.tolist() == [0, 1, 1, 1, 1, 1, 1, 1]
    labels = dawa_partition([0] * 7 + [40], _HUGE, 1.0, np.random.default_rng(1), guard=_HUGE / 2.0, max_length=8)
    assert labels.tolist() == [0, 0, 0, 0, 0, 0, 0, 1]
    # a run of single cells where the data alternate
    labels = dawa_partition([0, 9, 0, 9, 0, 9, 0, 9], _HUGE, 1.0, np.random.default_rng(1), guard=_HUGE / 2.0)
    assert labels.tolist() == list(range(8))


def test_noiseless_tiling_tie_rules_prefer_fewer_buckets_and_longer_pieces():
    # every tiling of zeros scores 0 with no price and no guard: the whole domain, one bucket
    pieces = P._DawaPieces(np.zeros(8, dtype=np.int64), None)
    chosen, value = pieces.tiling(0.0, 0.0, None)
    assert value == 0.0
    assert pieces.labels(chosen).tolist() == [0] * 8
    pieces = P._DawaPieces(np.zeros(8, dtype=np.int64), 2)
    assert pieces.labels(pieces.tiling(0.0, 0.0, None)[0]).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    # the tiling's labels are those of a least-score tiling of the brute force
    x = np.array([0, 0, 7, 7, 7, 7, 7, 7])
    pieces = P._DawaPieces(x, 2)
    chosen, value = pieces.tiling(1.0, 1.0, None)
    low, optimal = _optimum(x.tolist(), 1.0, 1.0, 2)
    assert value == pytest.approx(low) and tuple(pieces.labels(chosen).tolist()) in optimal


def test_dawa_partition_accepts_the_largest_domain():
    pieces = P._DawaPieces(np.zeros(MAX_DAWA, dtype=np.int64), 1)
    assert pieces.k == MAX_DAWA
    with pytest.raises(ValueError, match=rf"^dawa_partition handles up to {MAX_DAWA} cells, got {MAX_DAWA + 1}$"):
        noise_free_partition(np.zeros(MAX_DAWA + 1, dtype=np.int64), 1.0)
    with pytest.raises(ValueError, match=rf"^dawa_partition handles up to {MAX_DAWA} cells, got {MAX_DAWA + 1}$"):
        dawa_partition(np.zeros(MAX_DAWA + 1, dtype=np.int64), 1.0, 1.0, np.random.default_rng(0))


@pytest.mark.parametrize(
    "k, expected",
    [(1, 1), (2, 2), (3, 2), (15, 8), (16, 16), (17, 16), (100, 16), (511, 16), (512, 16), (1023, 16),
     (1024, 32), (1056, 32), (2047, 32), (2048, 64), (2**16, 2048)],
)
def test_default_max_length(k, expected):
    assert P._default_max_length(k) == expected
    assert isinstance(P._default_max_length(k), int)


def test_default_max_length_caps_the_buckets_of_the_partition():
    # 40 cells of one value: with the cap (from K/32 at least 16 → 16) one bucket cannot hold them
    x = [3] * 40
    assert np.bincount(noise_free_partition(x, 1.0)).max() == 16
    assert noise_free_partition(x, 1.0).tolist() == noise_free_partition(x, 1.0, max_length=16).tolist()
    assert noise_free_partition(x, 1.0, max_length=64).tolist() == [0] * 40


# --------------------------------------------------------------------------------------------
# report-noisy-min noise


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 7.5])
@pytest.mark.parametrize("delta", [1.0, 2.0])
def test_report_noisy_min_scale(epsilon, delta):
    grid = 2.0**-19
    scale = (delta / grid + 2.0) / (epsilon * (1.0 / grid + 0.5))
    values = np.arange(6, dtype=np.int64)
    got = P._report_noisy_min_scores(values, delta, epsilon, np.random.default_rng(11))
    expected = add_laplace(values.astype(np.float64), scale, np.random.default_rng(11), sensitivity=12.0, integer=False)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, expected)
    # the scale is δ/ε up to a factor 1 + 2^-19, seen in a large sample's mean absolute noise
    sample = P._report_noisy_min_scores(np.zeros(40_000), delta, epsilon, np.random.default_rng(5))
    assert np.mean(np.abs(sample)) == pytest.approx(delta / epsilon, rel=0.03)


def test_dawa_partition_noise_is_delta_one_for_single_cell_pieces(monkeypatch):
    original = P._report_noisy_min_scores
    calls = []

    def recorder(values, delta, epsilon, gen):
        calls.append((values.size, delta, epsilon))
        return original(values, delta, epsilon, gen)

    monkeypatch.setattr(P, "_report_noisy_min_scores", recorder)
    for k, max_length in [(8, None), (7, 2), (5, 1)]:
        calls.clear()
        x = np.random.default_rng(k).integers(0, 9, size=k)
        dawa_partition(x, 0.7, 1.0, np.random.default_rng(0), max_length=max_length)
        cap = _default_length(k) if max_length is None else max_length
        pieces = _pieces(k, cap)
        singles = sum(1 for _, single in pieces if single)
        assert sum(n for n, delta, _ in calls if delta == 1.0) == singles
        assert sum(n for n, delta, _ in calls if delta == 2.0) == len(pieces) - singles
        assert {delta for _, delta, _ in calls} <= {1.0, 2.0}
        assert {epsilon for _, _, epsilon in calls} == {0.7}


# --------------------------------------------------------------------------------------------
# argument checks


_X = [1, 2, 3, 4]


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"epsilon": 0}, ValueError, r"^epsilon must be a finite number > 0, got 0$"),
        ({"epsilon": "1"}, TypeError, r"^epsilon must be a real number > 0"),
        ({"epsilon2": -1.0}, ValueError, r"^epsilon2 must be a finite number > 0, got -1\.0$"),
        ({"epsilon2": None}, TypeError, r"^epsilon2 must be a real number > 0"),
        ({"penalty": -1.0}, ValueError, r"^penalty must be >= 0, got -1\.0$"),
        ({"penalty": "1"}, TypeError, r"^penalty must be a real number"),
        ({"max_length": 0}, ValueError, r"^max_length must be an integer >= 1, got 0$"),
        ({"max_length": 2.0}, TypeError, r"^max_length must be an integer, got 2\.0 \(float\)$"),
        ({"x": [[1, 2], [3, 4]]}, ValueError, r"^x must be a non-empty 1-D histogram, got shape \(2, 2\)$"),
        ({"x": []}, ValueError, r"^x must be a non-empty 1-D histogram, got shape \(0,\)$"),
    ],
)
@pytest.mark.parametrize("which", ["partition", "noise free"])
def test_dawa_arguments_are_checked_by_name(kwargs, error, message, which):
    args = {"x": _X, "epsilon": 1.0, "epsilon2": 1.0, **kwargs}
    x, epsilon, epsilon2 = args.pop("x"), args.pop("epsilon"), args.pop("epsilon2")
    if which == "noise free" and "epsilon" in kwargs:
        return  # it has no partition budget
    with pytest.raises(error, match=message):
        if which == "partition":
            dawa_partition(x, epsilon, epsilon2, np.random.default_rng(0), **args)
        else:
            noise_free_partition(x, epsilon2, **args)


def test_guard_arguments_are_checked_by_name():
    with pytest.raises(ValueError, match=r"^guard must be >= 0, got -0\.5$"):
        dawa_partition(_X, 1.0, 1.0, np.random.default_rng(0), guard=-0.5)
    with pytest.raises(TypeError, match=r"^guard must be a real number"):
        dawa_partition(_X, 1.0, 1.0, np.random.default_rng(0), guard=None)



@pytest.mark.parametrize("guard", [True, "1", 1 + 0j, None])
def test_a_guard_that_is_not_a_real_number_is_refused_by_name(guard):
    with pytest.raises(TypeError, match=r"^guard must be a real number, got "):
        dawa_partition(_X, 1.0, 1.0, np.random.default_rng(0), guard=guard)


def test_zero_penalty_guard_and_unit_max_length_are_accepted():
    rng = np.random.default_rng(3)
    labels = dawa_partition([0, 5, 0, 5], 1.0, 1.0, rng, penalty=0.0, guard=0.0, max_length=1)
    assert labels.tolist() == [0, 1, 2, 3]  # buckets of one cell only
    assert noise_free_partition([0, 5, 0, 5], 1.0, penalty=0.0, max_length=1).tolist() == [0, 1, 2, 3]
    assert dawa_partition([4], 1.0, 1.0, rng).tolist() == [0]
    assert noise_free_partition([4], 1.0).tolist() == [0]
