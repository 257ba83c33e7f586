"""Private partitions of a domain into buckets, and the quotient policy (SPEC §8).

A partition is a label per cell (buckets 0..m-1). Costs follow DAWA (Li, Hay, Miklau, Wang 2014):
a bucket b costs its L1 deviation Σ_{i∈b} |x_i - x̄_b| (the error of spreading its total evenly)
plus 1/ε₂ (the noise of measuring it).

Privacy arguments are for unit changes of x (one record added or removed). A record moved along a
policy edge is a removal plus an addition, so a partition private at ε₁/2 for unit changes is
(ε₁, G)-Blowfish for every policy G.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from ._validation import as_array, check_epsilon, check_histogram, check_int, check_real, check_real_array, is_int
from .noise import RNGLike, add_laplace, check_rng
from .policies import Policy, check_policy, from_edges

__all__ = [
    "interval_deviations",
    "dawa_partition",
    "best_interval_partition",
    "matching_partition",
    "noisy_pairing_partition",
    "optimal_pairing",
    "quotient_policy",
    "MAX_EXACT_DAWA",
    "MAX_MATCHING",
]

#: Largest domain for DAWA's exact O(K²)-interval dynamic program.
MAX_EXACT_DAWA = 1024
#: Largest domain for DAWA's dyadic-interval partition (every window is sorted).
MAX_DAWA = 16384
#: Largest domain for the seed's exact max-weight matching (O(K³)).
MAX_MATCHING = 1024


def interval_deviations(x: np.ndarray, length: int) -> np.ndarray:
    """Σ |x_i - mean| over every window of ``length`` consecutive cells (one value per start).

    Uses Σ|x_i - μ| = 2 Σ_{x_i > μ} (x_i - μ): each window is sorted once (a strided view).
    """
    x = check_real_array(x, "x", ndim=1)
    if x.size == 0:
        raise ValueError("x must hold at least one value")
    length = check_int(length, "length", minimum=1, maximum=x.size)
    windows = np.lib.stride_tricks.sliding_window_view(x, length)
    mean = windows.mean(axis=1)
    ordered = np.sort(windows, axis=1)
    above = ordered > mean[:, None]
    return 2.0 * ((ordered - mean[:, None]) * above).sum(axis=1)


def _ordered_counts(x) -> np.ndarray:
    """``x`` as a float64 copy of a non-empty 1-D histogram (an ordered domain of any size)."""
    arr = as_array(x, "x")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"x must be a non-empty 1-D histogram, got shape {arr.shape}")
    return check_histogram(arr, arr.shape).astype(np.float64)


def _dawa_scale(epsilon: float) -> float:
    """Laplace scale for every interval's noisy cost, singletons included: 4/ε.

    Report-noisy-min over partitions (the seed's Thm 5.2 argument): fix the output partition P and
    the interval B of P holding the changed cell; condition on every other interval's noise; P wins
    iff B's own noise clears a threshold. A unit change moves B's deviation by at most 2(1 - 1/|B|)
    and the best competing partition's cost (which holds exactly one interval with that cell) by at
    most 2, so the threshold moves by at most 4, and Laplace(4/ε) noise on B keeps the probability
    within e^ε. Every interval must carry its own noise (singletons too) and costs must not be
    clipped, or the argument fails. (DAWA's code uses 2/ε, noiseless singletons and a clip at 1/ε₂.)

    With ``rng=None`` the scores are lattice Laplace (:func:`blowfish_te.secure.lattice_laplace`),
    one call per length with ``sensitivity`` 2d for its d scores: that puts every score on the
    same grid Λ = 2^-19, with noise DLap(t) in grid units, ε·t = 4/Λ + 2. In grid units the
    argument above reads: conditioned on the other noises, P wins iff N_B <= T(x) for an integer
    T (the dynamic program breaks ties by a fixed order on partitions, and lowering N_B lowers
    exactly the partitions holding B); rounding to the grid moves each of the two scores involved by
    at most one more unit, so T moves by at most 2·(2/Λ + 1) = ε·t, and
    P(N_B <= T) changes by at most e^ε. (The sum of scores stays exact in float64 while totals
    are below 2^34.) The L1 sensitivity of the whole score vector plays no part.
    """
    return 4.0 / epsilon


def dawa_partition(x, epsilon: float, epsilon2: float, rng: RNGLike = None, exact: bool = False) -> np.ndarray:
    """DAWA's private partition of an ordered domain into intervals (Li et al. 2014, step 1).

    Minimises Σ_buckets (dev(B) + 1/ε₂ + Lap(4/ε)) over partitions into intervals, by dynamic
    programming: over all intervals (``exact=True``, O(K²) candidates, K <= 1024) or over intervals
    of dyadic length at every start (DAWA's approximate variant, O(K log K) candidates).

    Privacy: ε-DP for unit changes of x (see :func:`_dawa_scale`); only the partition is released.
    Returns bucket labels 0..m-1 in cell order.
    """
    x = _ordered_counts(x)
    epsilon, epsilon2 = check_epsilon(epsilon, "epsilon"), check_epsilon(epsilon2, "epsilon2")
    k = x.size
    if exact and k > MAX_EXACT_DAWA:
        raise ValueError(f"the exact DAWA partition handles up to {MAX_EXACT_DAWA} cells, got {k}: use exact=False")
    if not exact and k > MAX_DAWA:
        raise ValueError(f"the DAWA partition handles up to {MAX_DAWA} cells (it sorts every dyadic window), got {k}")
    return best_interval_partition(_interval_scores(x, epsilon, epsilon2, check_rng(rng), exact))


def _interval_scores(x: np.ndarray, epsilon: float, epsilon2: float, gen, exact: bool) -> dict:
    """{length: noisy score of the interval of that length at every start}."""
    k = x.size
    lengths = range(1, k + 1) if exact else [1 << j for j in range(int(math.log2(k)) + 1)]
    penalty, scale = 1.0 / epsilon2, _dawa_scale(epsilon)
    scores = {}
    for length in lengths:  # every interval gets its own noise, and no cost is clipped
        dev = interval_deviations(x, length) if length > 1 else np.zeros(k)
        # report-noisy-min, not a vector release: sensitivity 2d puts all lengths on the grid 2^-19
        # (see _dawa_scale); the values are real, so the secure path is the lattice
        scores[length] = add_laplace(dev + penalty, scale, gen, sensitivity=2.0 * dev.size, integer=False)
    return scores


def best_interval_partition(scores: dict) -> np.ndarray:
    """Labels of the partition into intervals with the least total score (dynamic program over
    right ends; ties go to the longer interval). ``scores[length][start]`` scores one interval;
    length 1 must be present, so that a partition exists."""
    scores = _check_scores(scores)
    k = scores[1].size
    best = np.zeros(k + 1)
    choice = np.zeros(k + 1, dtype=np.int64)
    for end in range(1, k + 1):  # best[end]: cells 0..end-1 partitioned
        options = [(best[end - n] + scores[n][end - n], -n) for n in scores if n <= end]
        value, negative = min(options)
        best[end], choice[end] = value, -negative
    bounds, end = [], k
    while end > 0:
        bounds.append((end - choice[end], end))
        end -= choice[end]
    labels = np.empty(k, dtype=np.int64)
    for bucket, (start, stop) in enumerate(reversed(bounds)):
        labels[start:stop] = bucket
    return labels


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


def optimal_pairing(values, penalty: float) -> np.ndarray:
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


def noisy_pairing_partition(x, policy: Policy, epsilon: float, epsilon2: float, rng: RNGLike = None) -> np.ndarray:
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


def matching_partition(x, epsilon: float, epsilon2: float, rng: RNGLike = None) -> np.ndarray:
    """The seed's matching partition (Anuarbek §5.2): max-weight matching with noisy edge weights.

    The seed matches each cell i either with another cell j (pair weight
    p_ij = -(|x_i - x_j| + 1/ε₂)) or with a secondary twin of its own (t_i = -1/ε₂), every weight
    with Laplace(2/ε) noise, and takes a max-weight perfect matching of that 2K-vertex graph (twins
    left over pair up at weight 0). A perfect matching weighs Σ_i t_i + Σ_pairs (p_ij - t_i - t_j),
    so the same buckets (size <= 2) come from a max-weight matching on the K cells with weights
    p_ij - t_i - t_j, keeping only positive ones: half the vertices of the seed's graph. Exact
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
    g = nx.Graph()
    g.add_weighted_edges_from(zip(i[keep].tolist(), j[keep].tolist(), gain[keep].tolist()))
    owner = np.arange(k)  # each bucket is named by its smallest cell
    for a, b in nx.max_weight_matching(g):
        owner[max(a, b)] = min(a, b)
    return np.unique(owner, return_inverse=True)[1].astype(np.int64)


def quotient_policy(policy: Policy, labels) -> Policy:
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
    from .policies import CliqueEdges

    for block in policy.edge_blocks:
        if isinstance(block, CliqueEdges):  # the quotient of a clique is a clique on its buckets
            buckets = np.unique(labels[block.cells])
            a, b = np.triu_indices(buckets.size, 1)
            pairs.append(np.stack([buckets[a], buckets[b]], axis=1))
        else:
            u, v = block.pairs(policy.shape)
            pairs.append(np.stack([extended[u], extended[v]], axis=1))
    edges = np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)
    edges = edges[edges[:, 0] != edges[:, 1]]
    return from_edges(m, edges)
