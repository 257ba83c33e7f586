"""Private partitions of a domain into buckets, and the quotient policy (Anuarbek, data-dependent
Blowfish histograms; Li, Hay, Miklau, Wang, DAWA, PVLDB 2014).

A partition is a label per cell (buckets 0..m-1). A bucket b costs, as in DAWA (Li, Hay, Miklau,
Wang 2014), the L1 error of spreading its total evenly plus the noise of measuring it; we measure
the first with the median absolute deviation dev(b) = min_c Σ_{i∈b} |x_i - c|, which a record
added to or removed from one cell moves by at most 1 (DAWA's mean-based deviation moves by up to 2).

Privacy arguments are for unit changes of x (one record added or removed). A record moved along a
policy edge is a removal plus an addition, so a partition private at ε₁/2 for unit changes is
(ε₁, G)-Blowfish for every policy G.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_array, check_epsilon, check_histogram, check_int, check_real, check_real_array, is_int
from ._wavelet import RangeSmallestSums
from .noise import RNGLike, add_laplace, check_rng
from .policies import Policy, check_policy, from_edges

__all__ = [
    "median_deviations",
    "dawa_partition",
    "tree_cost",
    "tree_costs",
    "noise_free_partition",
    "price_factor",
    "best_interval_partition",
    "matching_partition",
    "noisy_pairing_partition",
    "optimal_pairing",
    "quotient_policy",
    "BUCKET_GUARD",
    "RUN_GUARD",
    "RUN_DOUBLING",
    "MAX_DAWA",
    "MAX_MATCHING",
]

#: Largest domain for :func:`dawa_partition` (about 80 K noisy piece scores per 4096 cells).
MAX_DAWA = 2**16
#: Largest domain for Anuarbek's exact max-weight matching (O(K³)).
MAX_MATCHING = 1024
#: Data-independent score added to every one-bucket piece, in units of the score noise 2/ε₁.
BUCKET_GUARD = 3.5
#: The same for a run of several buckets (it competes with more alternatives, see dawa_partition).
RUN_GUARD = 5.0
#: Added to RUN_GUARD for every doubling of a run's number of buckets: a slot's sub-lengths compete
#: on noise alone where the data are flat, and a run of 2^j buckets must not win that way.
RUN_DOUBLING = 0.25
#: Below this N·ε/K (the data's record total against the plain release's noise per cell) the
#: bucket price of a DAWA partition grows as PRICE_SCALE/(N·ε/K) (:func:`price_factor`).
PRICE_SCALE = 0.25
#: Grid of the secure path's piece scores (lattice Laplace): sums stay exact below 2^34.
_GRID = 2.0**-19


def median_deviations(x: ArrayLike, length: int) -> np.ndarray:
    """dev = min_c Σ |x_i - c| (c a median) over every window of ``length`` consecutive cells,
    one value per start: the sum of the window's upper half minus the sum of its lower half."""
    x = _ordered_counts(x)
    length = check_int(length, "length", minimum=1, maximum=x.size)
    return _window_deviations(x, RangeSmallestSums(x), [length])[length]


def _window_deviations(x: np.ndarray, sums: RangeSmallestSums, lengths) -> dict[int, np.ndarray]:
    """{length: dev of the window of that length at every start}, exact integers."""
    return {n: _deviations(x, sums, np.arange(x.size - n + 1), np.arange(n, x.size + 1)) for n in lengths}


def _deviations(x: np.ndarray, sums: RangeSmallestSums, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """dev of every interval [lo, hi): the sum of its upper half minus that of its lower half."""
    cumulative = np.concatenate([[0], np.cumsum(x, dtype=np.int64)])
    half = (hi - lo) // 2
    return cumulative[hi] - cumulative[lo] - sums.smallest_sums(lo, hi, hi - lo - half) - sums.smallest_sums(lo, hi, half)


def _ordered_counts(x) -> np.ndarray:
    """``x`` as an int64 copy of a non-empty 1-D histogram (an ordered domain of any size)."""
    arr = as_array(x, "x")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"x must be a non-empty 1-D histogram, got shape {arr.shape}")
    return check_histogram(arr, arr.shape).astype(np.int64)


def _report_noisy_min_scores(values: np.ndarray, delta: float, epsilon: float, gen) -> np.ndarray:
    """``values`` + noise for report-noisy-min, when the threshold a piece's noise must clear moves
    by at most ``delta`` between neighbours (see :func:`dawa_partition`).

    Laplace(δ/ε) on a numpy Generator. With ``rng=None`` lattice Laplace
    (:func:`blowfish_te.secure.lattice_laplace`) with ``sensitivity`` 2d for the d values puts every
    score on the grid Λ = 2^-19 with noise DLap(t), t = scale·(1/Λ + 1/2); rounding to the grid
    moves each of the two scores the threshold compares by half a unit, so the threshold moves by
    at most δ/Λ + 2 grid units, and the scale below makes ε·t exactly that. It exceeds δ/ε by a
    factor 1 + 2^-19 at most, so both paths use it.
    """
    scale = (delta / _GRID + 2.0) / (epsilon * (1.0 / _GRID + 0.5))
    return add_laplace(values.astype(np.float64), scale, gen, sensitivity=2.0 * values.size, integer=False)


def price_factor(scale: float | None) -> float:
    """How much dearer a bucket is priced when the data are small against the noise: max(1,
    :data:`PRICE_SCALE` / scale) up to 10⁴, ``scale`` = N·ε/K from a private record total (None: 1).

    DAWA prices a bucket at the L1 noise of its total, 1/ε₂, whatever the data; the release's
    error is squared. Where N·ε/K is small the few records spread over many cells carry little
    squared bias when merged, while every extra bucket carries a whole Laplace draw, and a partition
    at ε₁ places most of its boundaries by noise (measured on the DPBench shapes at 10³ records,
    ε = 0.01: 46 buckets for an optimum of 1–6, 34–61 times its squared error; priced by this
    factor, 1–2 buckets, 1.0–1.3 times). Data-independent given the noisy total: post-processing.
    """
    if scale is None:
        return 1.0
    scale = check_real(scale, "scale", minimum=0)
    return min(max(1.0, PRICE_SCALE / max(scale, 1e-300)), 1e4)


def _default_max_length(k: int) -> int:
    """K/32 (at least min(K, 16)), rounded down to a power of two."""
    return 1 << (max(k // 32, min(k, 16)).bit_length() - 1)


def dawa_partition(
    x: ArrayLike, epsilon: float, epsilon2: float, rng: RNGLike = None, *, penalty: float = 1.0, guard: float = 1.0,
    max_length: int | None = None,
) -> np.ndarray:
    """A private partition of an ordered domain into intervals, in the spirit of DAWA's first step
    (Li, Hay, Miklau, Wang, PVLDB 2014), whose buckets follow the data rather than the noise.

    Candidates are *pieces*: an interval [a, a + L) of dyadic length L at any start, cut into L/l
    buckets of dyadic length l (l = L: one bucket; l = 1: single cells), with l <= ``max_length``
    (default K/32); and the pieces [a, K) and [0, b) that reach an end of the domain, of any
    length, cut into buckets of l from their inner end with the rest as one shorter bucket at the
    domain's end (or whole, when short enough), so that isolating a structure next to an end of
    the domain (a spike at value 0, common in real data) does not cost a dyadic tiling of the
    rest. A piece with buckets b scores

        Σ_b dev(b) + (#buckets)·λ + guard + noise,   λ = ``penalty``/ε₂,

    and the released partition is the tiling of [0, K) by pieces with the least total score
    (dynamic program over right ends; ties go to longer pieces, then to fewer buckets).

    - λ is DAWA's per-bucket price of measuring a total at ε₂ (``penalty`` = 1 for histograms).
    - The guard (:data:`BUCKET_GUARD` for one bucket, for a run of n buckets :data:`RUN_GUARD` +
      log2(n)·:data:`RUN_DOUBLING`, times ``guard``·2/ε) is a data-independent price per piece.
      Minimising a sum of zero-mean noisy scores favours many pieces whose noise happens to be
      negative; without a guard, flat regions break into thousands of spurious
      buckets. A guard near the extreme noise over the alternatives removes this, and because a
      dense region is covered by a few long runs of short buckets, the guard is paid once per
      run rather than once per bucket, so dense data keeps its fine buckets.
    - Bucket lengths are capped so that one wrongly merged structure spreads over at most
      ``max_length`` cells of a range query.

    Privacy (ε-DP for unit changes of x; report-noisy-min over tilings, as in the DAWA and seed
    Thm 5.2 arguments): fix the output tiling P and its piece B holding the changed cell i;
    condition on every other piece's noise. P wins iff (a) it beats every tiling that contains B,
    which involves only pieces without cell i, so it does not change between neighbours, and
    (b) N_B <= T(x) = min over tilings Q without B of [cost(Q) - cost(P ∖ B)] - data(B) - price(B).
    data(B) moves by at most δ_B (1 if B has a bucket of two or more cells, 0 for single cells:
    only the bucket holding i changes, and dev has sensitivity 1), and each cost(Q) by at most 1
    (its one piece holding i), so T moves by at most δ_B + 1. Laplace((δ_B + 1)/ε) noise on B
    keeps P(N_B <= T) within a factor e^ε; every piece carries its own noise and no score is
    clipped. Guards, penalties and caps depend only on (K, ε, ε₂), so they do not enter the
    argument. Only the partition is released. See :func:`_report_noisy_min_scores` for ``rng=None``.
    """
    x = _ordered_counts(x)
    epsilon, epsilon2 = check_epsilon(epsilon, "epsilon"), check_epsilon(epsilon2, "epsilon2")
    penalty = check_real(penalty, "penalty", minimum=0)
    guard = check_real(guard, "guard", minimum=0)
    pieces = _DawaPieces(x, max_length)
    return pieces.labels(pieces.tiling(penalty / epsilon2, guard * 2.0 / epsilon, (epsilon, check_rng(rng)))[0])


def noise_free_partition(x: ArrayLike, epsilon2: float, *, penalty: float = 1.0, max_length: int | None = None,
                         guarded_at: float | None = None) -> np.ndarray:
    """The noiseless twin of :func:`dawa_partition`: the tiling of least score Σ_b dev(b) +
    (#buckets)·``penalty``/ε₂ over the same pieces, without noise and without guards — DAWA's own
    optimum of its cost model at the same bucket price. With ``guarded_at`` = ε₁ every piece also
    pays the guard :func:`dawa_partition` adds at that ε₁, still without noise: the drawn partition
    over this one measures where the noise places boundaries, this one over the unguarded optimum
    what the guards cost. Not private: references to measure how far a drawn partition is from
    what the data would give without noise."""
    x = _ordered_counts(x)
    epsilon2 = check_epsilon(epsilon2, "epsilon2")
    penalty = check_real(penalty, "penalty", minimum=0)
    unit = 0.0 if guarded_at is None else 2.0 / check_epsilon(guarded_at, "guarded_at")
    pieces = _DawaPieces(x, max_length)
    return pieces.labels(pieces.tiling(penalty / epsilon2, unit, None)[0])


def tree_cost(x: ArrayLike, price: float, guard: float = 0.0) -> float:
    """DAWA's cost of the data without noise over the tilings by aligned dyadic blocks
    [a·2^j, (a + 1)·2^j) (the last block of a level cut at K): min over those tilings of
    Σ_b dev(b) + (#blocks)·(``price`` + ``guard``), one bottom-up pass per level — O(K log² K),
    vectorised, so a private check can afford it on 2-D grids laid out along a curve.

    Not private by itself; a feature to release with noise. Its L1 sensitivity is 1 for unit
    changes of x: every tiling's score moves by at most 1 (only the block holding the changed cell
    changes, and dev moves by at most 1), so their minimum does too. A move of one record (a
    removal plus an addition) moves it by at most 2.
    """
    price = check_real(price, "price", minimum=0) + check_real(guard, "guard", minimum=0)
    return float(tree_costs(x, [price])[0])


def tree_costs(x: ArrayLike, prices: ArrayLike) -> np.ndarray:
    """:func:`tree_cost` at every price of ``prices`` (≥ 0) in one pass: the blocks' deviations,
    the costly part, are computed once per level for all prices."""
    x = _ordered_counts(x)
    prices = check_real_array(prices, "prices", ndim=1, minimum=0)
    k = x.size
    sums = RangeSmallestSums(x)
    best = np.repeat(prices[:, None], k, axis=1)  # single cells: dev 0
    length = 1
    while length < k:
        length *= 2
        lo = np.arange(0, k, length)
        whole = _deviations(x, sums, lo, np.minimum(lo + length, k))[None, :] + prices[:, None]
        if best.shape[1] % 2:  # the last block of the level has one half only
            best = np.concatenate([best, np.zeros((prices.size, 1))], axis=1)
        best = np.minimum(whole, best[:, 0::2] + best[:, 1::2])  # or the two halves' best tilings
    return best[:, 0]


class _DawaPieces:
    """The candidate pieces of :func:`dawa_partition` for a histogram, with their data terms:
    groups of (slot kind, slots, bucket length, Σ dev over the buckets, number of buckets)."""

    def __init__(self, x: np.ndarray, max_length: int | None):
        k = x.size
        if k > MAX_DAWA:
            raise ValueError(f"dawa_partition handles up to {MAX_DAWA} cells, got {k}")
        max_length = _default_max_length(k) if max_length is None else check_int(max_length, "max_length", minimum=1)
        self.k = k
        self.groups = []  # (key, slot count, slots, sub, data, buckets), in the order noise is drawn
        sums = RangeSmallestSums(x)
        self.lengths = lengths = [1 << j for j in range(k.bit_length())]
        subs = [n for n in lengths if n <= max_length]
        devs = _window_deviations(x, sums, subs)
        forward = {n: _strided_suffix_sums(devs[n], n) for n in subs}  # runs from a start
        backward = {n: _strided_suffix_sums(devs[n][::-1], n) for n in subs}  # mirrored: runs to an end
        ends = np.arange(1, min(max_length, k) + 1)  # dev of the first and of the last r cells
        head = np.concatenate([[0], _deviations(x, sums, np.zeros(ends.size, dtype=np.int64), ends)])
        tail = np.concatenate([[0], _deviations(x, sums, k - ends, np.full(ends.size, k))])
        add = self.groups.append
        for length in lengths:  # dyadic pieces at every start
            starts = np.arange(k - length + 1)
            for sub in reversed([n for n in subs if n <= length]):  # fewest buckets first
                data = _run_sums(forward[sub], sub, starts, length // sub) if sub > 1 else np.zeros(starts.size)
                add((("at", length), starts.size, starts, sub, data, np.full(starts.size, length // sub)))
        # pieces reaching an end of the domain, of any length: a run aligned at its inner end, the
        # part left over as one shorter bucket at the domain's end (so that a structure at either
        # end does not cost a dyadic tiling of the rest)
        cut_at = np.arange(k)  # the piece [a, k), or [0, k - a)
        length = k - cut_at
        for sub in subs:
            runs = length > sub  # at least two buckets
            a = cut_at[runs]
            full, rest = length[runs] // sub, length[runs] % sub
            if sub > 1:
                after = _run_sums(forward[sub], sub, a, full) + tail[rest]  # [a, k), runs from a
                before = _run_sums(backward[sub], sub, a, full) + head[rest]  # [0, k - a), mirrored
            else:
                after = before = np.zeros(a.size)
            count = full + (rest > 0)
            add((("suffix",), k, a, sub, after, count))
            add((("prefix",), k, a, sub, before, count))
        fits = length <= max_length  # the whole end piece as one bucket
        one = np.ones(int(fits.sum()), dtype=np.int64)
        add((("suffix",), k, cut_at[fits], 0, tail[length[fits]], one))
        add((("prefix",), k, cut_at[fits], 0, head[length[fits]], one))

    def tiling(self, price: float, unit: float, noise) -> tuple[tuple, float]:
        """(the tiling with the least total score and the cut of each slot, that score): every
        piece scores its data + (#buckets)·``price`` + its guard in units of ``unit``, plus
        report-noisy-min noise when ``noise`` = (ε, generator) (see :func:`dawa_partition`)."""
        best, cut = {}, {}
        for key, size, slots, sub, data, buckets in self.groups:
            if key not in best:
                best[key] = np.full(size, np.inf)
                cut[key] = np.zeros(size, dtype=np.int64)
            if slots.size == 0:
                continue
            extra = np.where(buckets == 1, BUCKET_GUARD, RUN_GUARD + RUN_DOUBLING * np.log2(buckets)) * unit
            scores = data + buckets * price + extra
            if noise is not None:
                delta = 1.0 if sub == 1 else 2.0  # buckets of single cells have no data term
                scores = _report_noisy_min_scores(scores, delta, noise[0], noise[1])
            better = scores < best[key][slots]
            best[key][slots[better]] = scores[better]
            cut[key][slots[better]] = sub
        scores = {n: best[("at", n)] for n in self.lengths}
        tiling, value = _best_tiling(scores, prefix=best[("prefix",)][::-1], suffix=best[("suffix",)])
        return (tiling, cut), value

    def labels(self, chosen) -> np.ndarray:
        """Bucket labels of a tiling returned by :meth:`tiling`."""
        tiling, cut = chosen
        k = self.k
        labels = np.empty(k, dtype=np.int64)
        bucket = 0
        for kind, start, stop in tiling:
            key = ("at", stop - start) if kind == "at" else (kind,)
            index = start if kind != "prefix" else k - stop
            sub = int(cut[key][index]) or stop - start
            edges = range(start, stop, sub) if kind != "prefix" else range(stop - sub * ((stop - start) // sub), stop, sub)
            bounds = sorted({start, stop, *edges})
            for first, last in zip(bounds[:-1], bounds[1:]):
                labels[first:last] = bucket
                bucket += 1
        return labels


def _run_sums(strided: np.ndarray, step: int, starts: np.ndarray, count) -> np.ndarray:
    """Σ_{j < count} devs[a + j·step] for each start a (the buckets of a run of ``count``), from
    the strided suffix sums of the devs (:func:`_strided_suffix_sums`)."""
    return strided[starts] - strided[starts + np.asarray(count) * step]


def _strided_suffix_sums(values: np.ndarray, step: int) -> np.ndarray:
    """S[a] = values[a] + values[a + step] + ... (0 beyond the end), padded with ``step`` zeros so
    that S[a] - S[a + L] sums the L/step windows of a run starting at a."""
    rows = -(-values.size // step)
    padded = np.zeros(rows * step)
    padded[: values.size] = values
    sums = padded.reshape(rows, step)[::-1].cumsum(axis=0)[::-1].reshape(-1)
    return np.concatenate([sums, np.zeros(step)])


def best_interval_partition(scores: dict) -> np.ndarray:
    """Labels of the partition into intervals with the least total score (dynamic program over
    right ends; ties go to the longer interval). ``scores[length][start]`` scores one interval;
    length 1 must be present, so that a partition exists."""
    scores = _check_scores(scores)
    labels = np.empty(scores[1].size, dtype=np.int64)
    for bucket, (_, start, stop) in enumerate(_best_tiling(scores)[0]):
        labels[start:stop] = bucket
    return labels


def _best_tiling(scores: dict[int, np.ndarray], prefix: np.ndarray | None = None, suffix: np.ndarray | None = None):
    """The least-score tiling of [0, K) and its score: (kind, start, stop) of its pieces, left to right:
    ``"at"`` scored by ``scores[stop - start][start]``, ``"prefix"`` (the piece [0, stop)) by
    ``prefix[stop - 1]`` and ``"suffix"`` (the piece [start, K)) by ``suffix[start]``. Ties go to
    the longer piece of ``scores``; a prefix or suffix piece must win strictly."""
    k = scores[1].size
    lengths = sorted(scores)
    columns = [scores[n].tolist() for n in lengths]
    first = prefix.tolist() if prefix is not None else [math.inf] * k
    best = [0.0] * (k + 1)  # best[end]: cells 0..end-1 covered
    choice = [1] * (k + 1)  # the length of the last piece; 0: the prefix piece [0, end)
    for end in range(1, k + 1):
        value, pick = math.inf, 1
        for n, column in zip(lengths, columns):
            if n > end:
                break
            candidate = best[end - n] + column[end - n]
            if candidate <= value:  # ascending lengths: ties go to the longer
                value, pick = candidate, n
        if first[end - 1] < value:
            value, pick = first[end - 1], 0
        best[end], choice[end] = value, pick
    tiling, end, value = [], k, best[k]
    if suffix is not None:
        totals = np.asarray(best[:k]) + suffix
        start = int(np.argmin(totals))
        if totals[start] < best[k]:
            tiling.append(("suffix", start, k))
            end, value = start, float(totals[start])
    while end > 0:
        n = choice[end]
        tiling.append(("prefix", 0, end) if n == 0 else ("at", end - n, end))
        end -= end if n == 0 else n
    return tiling[::-1], value


def _check_scores(scores) -> dict[int, np.ndarray]:
    """``{length: finite scores, one per start}`` over k cells, lengths in [1, k], length 1 included."""
    if not isinstance(scores, dict):
        raise TypeError(f"scores must be a dict {{interval length: array of scores}}, got {type(scores).__name__}")
    if 1 not in scores:
        raise ValueError("scores must include length 1 (single cells), so that every domain has a partition")
    k = check_real_array(scores[1], "scores[1]", ndim=1).size
    if k == 0:
        raise ValueError("scores[1] must score at least one cell")
    checked = {}
    for length, values in scores.items():
        if not is_int(length) or not 1 <= length <= k:
            raise ValueError(f"scores keys must be interval lengths in [1, {k}], got {length!r}")
        values = check_real_array(values, f"scores[{length}]", ndim=1)
        if values.size != k - length + 1:
            raise ValueError(f"scores[{length}] must hold {k - length + 1} values (one per start), got {values.size}")
        checked[int(length)] = values
    return checked


def optimal_pairing(values: ArrayLike, penalty: float) -> np.ndarray:
    """Minimum-cost partition into buckets of size <= 2: a pair {i, j} costs |v_i - v_j| + penalty,
    a singleton penalty. Pairing helps only below a gap of ``penalty``, and by exchange an optimal
    pairing uses neighbours in sorted order, so a dynamic program over the sorted values is exact:
    O(K log K). Returns labels 0..m-1."""
    values = check_real_array(values, "values").reshape(-1)
    penalty = check_real(penalty, "penalty", minimum=0)
    order = np.argsort(values, kind="stable")
    gaps = np.diff(values[order])
    n = values.size
    best = np.zeros(n + 1)
    paired = np.zeros(n + 1, dtype=bool)
    for i in range(2, n + 1):  # saving of pairing sorted neighbours i-2, i-1
        pair = best[i - 2] + (penalty - gaps[i - 2])
        if pair > best[i - 1]:
            best[i], paired[i] = pair, True
        else:
            best[i] = best[i - 1]
    labels = np.empty(n, dtype=np.int64)
    i, bucket = n, 0
    while i > 0:
        if paired[i]:
            labels[order[i - 2 : i]] = bucket
            i -= 2
        else:
            labels[order[i - 1]] = bucket
            i -= 1
        bucket += 1
    return labels


def noisy_pairing_partition(x: ArrayLike, policy: Policy, epsilon: float, epsilon2: float, rng: RNGLike = None) -> np.ndarray:
    """Buckets of size <= 2 from Laplace-noisy counts (the post-processing matching variant).

    Privacy: x + Lap(Δ_G(I)/ε)^K is (ε, G)-Blowfish, Δ_G(I) computed from the policy's edges (2 for
    an edge between cells, 1 for an edge to ⊥); the minimum-cost pairing of the noisy counts
    (:func:`optimal_pairing`, cost |x̃_i - x̃_j| + 1/ε₂ per pair, 1/ε₂ per singleton) is post-processing.
    """
    from .sensitivity import sensitivity
    from .workloads import identity

    x = check_histogram(x, check_policy(policy).shape)
    epsilon, epsilon2 = check_epsilon(epsilon, "epsilon"), check_epsilon(epsilon2, "epsilon2")
    delta = sensitivity(identity(policy.shape), policy)
    # integer counts, L1 sensitivity Δ_G(I): exact discrete Laplace on the secure path
    noisy = add_laplace(x, delta / epsilon, check_rng(rng), sensitivity=delta, integer=True)
    return optimal_pairing(noisy, 1.0 / epsilon2)


def matching_partition(x: ArrayLike, epsilon: float, epsilon2: float, rng: RNGLike = None) -> np.ndarray:
    """Anuarbek's matching partition (§5.2): max-weight matching with noisy edge weights.

    The seed matches each cell i either with another cell j (pair weight
    p_ij = -(|x_i - x_j| + 1/ε₂)) or with a secondary twin of its own (t_i = -1/ε₂), every weight
    with Laplace(2/ε) noise, and takes a max-weight perfect matching of that 2K-vertex graph (twins
    left over pair up at weight 0). A perfect matching weighs Σ_i t_i + Σ_pairs (p_ij - t_i - t_j),
    so the same buckets (size <= 2) come from a max-weight matching on the K cells with weights
    p_ij - t_i - t_j, keeping only positive ones: half the vertices of Anuarbek's graph. Exact
    blossom algorithm of networkx, O(K³) in Python: about 6 s at K = 256, a minute at 512, several
    minutes at the limit K = 1024.

    Privacy: ε-DP for unit changes (seed Thm 5.2): every candidate matching covers each cell once,
    so a unit change moves the chosen matching's weight and the best competitor's by at most 1 each,
    and Laplace(2/ε) noise on the covering edge keeps probabilities within e^ε.

    With ``rng=None`` the weights are lattice Laplace with ``sensitivity`` d for the d weights of
    each call, so pair and twin weights share the grid Λ = 2^-20 with noise DLap(t) in grid units,
    ε·t = 2/Λ + 2: rounding adds at most one unit to each of the two weights that move, so the
    threshold on the covering edge's noise moves by at most 2·(1/Λ + 1) = ε·t. This assumes
    ties between matchings (possible on a grid, with probability of order 2^-21·ε per pair of
    matchings) are broken consistently by networkx, which it does not document.
    """
    x = _ordered_counts(x)
    epsilon, epsilon2 = check_epsilon(epsilon, "epsilon"), check_epsilon(epsilon2, "epsilon2")
    gen = check_rng(rng)
    k = x.size
    if k > MAX_MATCHING:
        raise ValueError(
            f"the exact matching partition handles up to {MAX_MATCHING} cells (O(K³)), got {k}: "
            "use noisy_pairing_partition, whose privacy is post-processing"
        )
    i, j = np.triu_indices(k, 1)
    # report-noisy-max, not a vector release: sensitivity = the number of weights puts both on the
    # grid 2^-20 (see the docstring); the weights are real, so the secure path is the lattice
    pair = add_laplace(
        -(np.abs(x[i] - x[j]) + 1.0 / epsilon2), 2.0 / epsilon, gen, sensitivity=float(i.size), integer=False
    )
    twin = add_laplace(-np.full(k, 1.0 / epsilon2), 2.0 / epsilon, gen, sensitivity=float(k), integer=False)
    gain = pair - twin[i] - twin[j]
    keep = gain > 0
    import networkx as nx  # only this partition needs it; importing it costs a first release 0.17 s

    g = nx.Graph()
    g.add_weighted_edges_from(zip(i[keep].tolist(), j[keep].tolist(), gain[keep].tolist()))
    owner = np.arange(k)  # each bucket is named by its smallest cell
    for a, b in nx.max_weight_matching(g):
        owner[max(a, b)] = min(a, b)
    return np.unique(owner, return_inverse=True)[1].astype(np.int64)


def quotient_policy(policy: Policy, labels: ArrayLike) -> Policy:
    """G': merge each bucket into one vertex; buckets are adjacent when any of their cells are
    adjacent in G (self-loops dropped), and a bucket meets ⊥ when any of its cells does.

    A G-neighbour pair of histograms maps to bucket histograms that are equal (a move inside a
    bucket) or G'-neighbours, so (ε, G')-Blowfish on bucket counts is (ε, G)-Blowfish on x
    (Anuarbek Lemma 4.1).
    """
    labels = as_array(labels, "labels").reshape(-1)
    k = check_policy(policy).size
    if labels.shape != (k,) or labels.dtype.kind not in "iu":
        raise ValueError(f"labels must be {k} integer bucket labels, one per cell")
    m = int(labels.max()) + 1
    if labels.min() < 0 or np.unique(labels).size != m:
        raise ValueError("labels must number the buckets 0..m-1, each used")
    extended = np.append(labels, m)  # ⊥ maps to ⊥ (index m of the quotient)
    pairs = []
    for cells in policy.cliques():  # the quotient of a clique is a clique on its buckets
        buckets = np.unique(labels[cells])
        a, b = np.triu_indices(buckets.size, 1)
        pairs.append(np.stack([buckets[a], buckets[b]], axis=1))
    for u, v in policy.edge_pairs():
        pairs.append(np.stack([extended[u], extended[v]], axis=1))
    edges = np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)
    edges = edges[edges[:, 0] != edges[:, 1]]
    return from_edges(m, edges)
