"""The empirical privacy auditor: pairs, Clopper–Pearson bounds, controls
that must FAIL (halved noise, a sensitivity missing one policy edge, distance-2 pairs judged against
ε, data-dependent zeroing), correct mechanisms that must PASS, and the CI sweep."""

import numpy as np
import pytest
from scipy.stats import binomtest

from blowfish_te import Mechanism, answer, policies, trees
from blowfish_te import workloads as wl
from blowfish_te.audit import (
    KINDS,
    Batched,
    SweepConfig,
    audit,
    clopper_pearson,
    default_histogram,
    make_pair,
    neighbour_pairs,
    sweep,
    sweep_table,
)
from blowfish_te.audit.pairs import MASS
from blowfish_te.forest import RootedForest
from blowfish_te.mechanisms import MECHANISMS, Identity

K = 8
#: Confidence of the control audits: an audit of a correct mechanism FAILS with probability at most
#: 0.001 whatever the random stream, so the PASS assertions do not hinge on a lucky seed.
CONFIDENCE = 0.999


def tight_prefix(scale: float) -> Batched:
    """Prefix answers of the line transform with Laplace(scale) noise on the K - 1 cumulative counts
    (the total is public): (1/scale)-Blowfish under line(K), and tight on every edge."""

    def sample(x, n, rng):
        noise = rng.laplace(0.0, scale, (n, x.size))
        noise[:, -1] = 0.0
        return np.cumsum(x) + noise

    return Batched(sample, name=f"prefix+Lap({scale:g})")


# -- statistics --------------------------------------------------------------------------------


@pytest.mark.parametrize("count, n", [(0, 50), (7, 50), (50, 50), (1234, 4000)])
def test_clopper_pearson_matches_scipy_exact_interval(count, n):
    alpha = 0.01
    lower, upper = clopper_pearson(count, n, alpha)
    ci = binomtest(count, n).proportion_ci(confidence_level=1 - 2 * alpha, method="exact")
    assert float(lower) == pytest.approx(ci.low, abs=1e-12)
    assert float(upper) == pytest.approx(ci.high, abs=1e-12)


# -- pairs -------------------------------------------------------------------------------------

POLICIES = [
    policies.line(K),
    policies.threshold(K, 2),
    policies.grid((3, 3)),
    policies.unbounded(K),
    policies.from_edges(5, [[0, 1], [1, 2], [2, 0], [3, 5], [4, 5]]),  # a triangle, and two cells under ⊥
]


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
@pytest.mark.parametrize("distance", [1, 2])
def test_generated_pairs_move_one_record_between_vertices_at_the_distance(policy, distance):
    tree = trees.candidates(policy)["stars"] if not policy.is_forest else None
    pairs = neighbour_pairs(policy, per_kind=2, distance=distance, tree=tree, rng=1)
    assert pairs
    k = policy.size
    seen = set()
    for p in pairs:
        delta = np.zeros(k + 1, dtype=np.int64)
        delta[p.u] -= 1
        delta[p.v] += 1
        assert np.array_equal(p.y - p.x, delta[:k])
        assert p.x.min() >= 0 and p.y.min() >= 0
        assert p.distance == distance == policy.distance(
            *(policies.BOTTOM if a == k else a for a in (p.u, p.v))
        )
        key = (p.x.tobytes(), p.y.tobytes())
        assert key not in seen
        seen.add(key)
    kinds = {p.kind for p in pairs}
    assert {"boundary", "mass", "single"} <= kinds
    if policy.num_edges >= 12:  # enough moves on x for every kind to find new ones
        assert {"partition", "random"} <= kinds
        assert ("tree" in kinds) == (tree is not None)


def test_each_kind_builds_what_it_promises():
    policy = policies.threshold(K, 2)
    hub = trees.hub(K, 2)
    x = np.array([5, 5, 0, 0, 40, 40, 3, 0])
    by_kind = {kind: neighbour_pairs(policy, x, kinds=(kind,), per_kind=2, tree=hub, rng=0) for kind in KINDS}
    assert all({p.u, p.v} & {0, K - 1} for p in by_kind["boundary"])
    stretch = RootedForest(hub).distances([p.u for p in by_kind["tree"]], [p.v for p in by_kind["tree"]])
    assert stretch[0] == trees.stretch(policy, hub).maximum == 3  # the widest move in the hub tree
    assert stretch[1] == 1  # a spoke of the hub
    assert [abs(int(x[p.u]) - int(x[p.v])) for p in by_kind["partition"]] == [40, 40]  # the jumps 2|4 ... 4|6
    assert all(p.x.sum() == MASS and p.x.max() == MASS for p in by_kind["mass"])
    assert all(p.x.sum() == 1 and p.y.sum() == 1 for p in by_kind["single"])
    for p in by_kind["random"]:  # moves on x; between two empty cells, a record is placed first
        placed = np.zeros(K, int)
        placed[p.u] = x[p.u] == 0
        assert np.array_equal(p.x, x + placed)


def test_pairs_under_bottom_add_and_remove_records():
    policy = policies.unbounded(4)
    single = neighbour_pairs(policy, kinds=("single",), per_kind=4, rng=0)
    assert all(p.v == 4 and p.y.sum() == 0 for p in single)  # one record alone, removed
    added = make_pair(policy, np.zeros(4, int), 4, 2)
    assert added.move == "⊥ → 2" and added.y.tolist() == [0, 0, 1, 0] and added.distance == 1


def test_default_histogram_has_empty_and_loaded_cells_and_is_seeded():
    h = default_histogram((3, 3), rng=5)
    assert h.shape == (9,) and h.min() == 0 and h.max() >= 16
    assert np.array_equal(h, default_histogram((3, 3), rng=5))


def test_complete_policy_has_no_pairs_at_distance_two():
    assert neighbour_pairs(policies.complete(4), distance=2) == []
    with pytest.raises(ValueError, match="no pairs to audit"):
        audit(tight_prefix(1.0), policies.complete(4), wl.prefix(4), 1.0, pairs=[])


def test_make_pair_rejects_impossible_moves():
    policy = policies.line(4)
    x = np.array([0, 2, 0, 1])
    with pytest.raises(ValueError, match="no record at cell u=0"):
        make_pair(policy, x, 0, 1)
    with pytest.raises(ValueError, match="u and v must differ"):
        make_pair(policy, x, 1, 1)
    with pytest.raises(ValueError, match="v=4 is not a vertex.*no BOTTOM"):
        make_pair(policy, x, 1, 4)
    with pytest.raises(ValueError, match="x has shape"):
        make_pair(policy, [1, 2], 0, 1)


# -- controls that must FAIL, and their correct twins that must PASS ----------------------------


class ShrunkNoise(Mechanism, register=False):
    """A broken Identity: calibrated to factor·ε, so it is only (factor·ε)-DP."""

    def __init__(self, factor: float = 2.0):
        self.factor = factor
        self.name = f"identity(noise / {factor:g})"

    def run(self, workload, x, epsilon, rng=None):
        return Identity().run(workload, x, self.factor * epsilon, rng)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism, passes", [(ShrunkNoise(), False), (Identity(), True)])
def test_halved_noise_fails_and_the_library_identity_passes(mechanism, passes):
    report = audit(mechanism, policies.line(K), wl.prefix(K), 1.0, n_select=300, n_detect=900,
                   kinds=("single",), rng=3, confidence=CONFIDENCE)
    assert report.route == "transform[line(8), stretch 1]"
    assert report.passed is passes
    bound = report.worst.epsilon_lower
    assert (bound > 1.1) if not passes else (0.2 < bound <= 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism, passes", [(ShrunkNoise(4.0), False), (Identity(), True)])
def test_the_secure_samplers_are_audited_too(mechanism, passes):
    """rng=None: exact discrete Laplace on the integer cumulative counts. Not reproducible, so the
    control is a 4× violation, which 300 runs FAIL with near-certainty (the bound is about 2.4)."""
    report = audit(mechanism, policies.line(K), wl.prefix(K), 1.0, n_select=100, n_detect=300,
                   kinds=("single",), secure=True, rng=0, confidence=CONFIDENCE)
    assert report.sampler.startswith("discrete Laplace on integers")
    assert report.passed is passes


@pytest.mark.slow
def test_missing_policy_edge_fails_on_the_pair_across_it():
    """Laplace on prefix counts calibrated to Δ of the line (1) instead of line + (0, 7) (Δ = 7)."""
    full = policies.from_edges(K, np.array([[i, i + 1] for i in range(K - 1)] + [[0, K - 1]]))
    w = wl.prefix(K)
    x = np.array([3, 1, 0, 2, 2, 0, 1, 4])
    pairs = [make_pair(full, x, 0, K - 1), make_pair(full, x, 3, 4)]

    def missing_edge(h, rng):
        return answer(w, h, policies.line(K), 1.0, "laplace", rng=rng, route="exact").answers

    def correct(h, rng):
        return answer(w, h, full, 1.0, "laplace", rng=rng, route="exact").answers

    kwargs = dict(pairs=pairs, n_select=150, n_detect=450, rng=0, confidence=CONFIDENCE)
    broken = audit(missing_edge, full, w, 1.0, **kwargs)
    assert [r.passed for r in broken.results] == [False, True]
    assert broken.results[0].epsilon_lower > 1.2
    assert broken.mechanism == "missing_edge" and "FAIL" in broken.table() and "0 → 7" in broken.table()
    assert audit(correct, full, w, 1.0, **kwargs).passed


def test_distance_two_pairs_fail_against_epsilon_and_pass_against_two_epsilon():
    """The library's Laplace mechanism on one count Σ_i i·x_i (Δ = 1 under the line) is tight: a
    move over two edges shifts the count by 2, a privacy loss of exactly 2ε."""
    policy = policies.line(K)
    w = wl.from_matrix(np.arange(K)[None, :])
    pairs = neighbour_pairs(policy, distance=2, kinds=("single",), rng=0)
    assert [p.distance for p in pairs] == [2]
    kwargs = dict(pairs=pairs, n_select=200, n_detect=800, rng=4, confidence=CONFIDENCE)
    against_eps = audit("laplace", policy, w, 1.0, scale_by_distance=False, **kwargs)
    assert not against_eps.passed
    assert all(r.claimed == 1.0 for r in against_eps.results)
    against_2eps = audit("laplace", policy, w, 1.0, **kwargs)
    assert against_2eps.passed and all(r.claimed == 2.0 for r in against_2eps.results)


def test_single_record_pairs_catch_data_dependent_zeroing():
    """Noisy counts, but cells that are truly empty are published as exact zeros (a structural-zero
    leak): invisible on dense data, certain on a single record that moves."""

    def zeroing(x, n, rng):
        noisy = x + rng.laplace(0.0, 2.0, (n, x.size))
        noisy[:, x == 0] = 0.0
        return noisy

    policy = policies.line(K)
    dense = audit(Batched(zeroing, "zeroing"), policy, wl.identity(K), 1.0, x=np.full(K, 10),
                  kinds=("boundary", "random"), n_select=200, n_detect=600, rng=0, confidence=CONFIDENCE)
    assert dense.passed
    single = audit(Batched(zeroing, "zeroing"), policy, wl.identity(K), 1.0, kinds=("single",),
                   n_select=200, n_detect=600, rng=0, confidence=CONFIDENCE)
    assert not single.passed and single.worst.pair.kind == "single"
    assert single.worst.p_denominator == 0.0 and single.worst.epsilon_lower > 3


def test_a_tight_mechanism_gets_a_bound_close_to_epsilon_and_halved_noise_close_to_two_epsilon():
    """Power: with 8000 detection runs the bound reaches most of the true loss, never more."""
    kwargs = dict(kinds=("boundary", "partition", "single"), n_select=2000, n_detect=8000, rng=2, confidence=CONFIDENCE)
    tight = audit(tight_prefix(1.0), policies.line(K), wl.prefix(K), 1.0, **kwargs)
    assert tight.passed and all(0.7 < r.epsilon_lower <= 1.0 for r in tight.results)
    halved = audit(tight_prefix(0.5), policies.line(K), wl.prefix(K), 1.0, **kwargs)
    assert not halved.passed and all(1.5 < r.epsilon_lower <= 2.0 for r in halved.results)


def test_the_same_seed_gives_the_same_report():
    runs = [audit(tight_prefix(1.0), policies.line(K), wl.prefix(K), 1.0, n_select=100, n_detect=300, rng=9)
            for _ in range(2)]
    assert [r.epsilon_lower for r in runs[0].results] == [r.epsilon_lower for r in runs[1].results]
    assert [str(r.event) for r in runs[0].results] == [str(r.event) for r in runs[1].results]


def test_data_dependent_mechanism_on_a_cyclic_policy_runs_through_the_given_tree():
    report = audit("ahp", policies.threshold(K, 2), wl.prefix(K), 1.0, tree="hub", kinds=("tree",),
                   per_kind=2, n_select=30, n_detect=60, rng=0, confidence=CONFIDENCE)
    assert report.route == "transform[hub(8, theta=2), stretch 3]" and report.passed
    assert [r.pair.kind for r in report.results] == ["tree", "tree"]


# -- argument checks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(epsilon=0), ValueError, "epsilon must be a finite number > 0"),
        (dict(epsilon=-1.0), ValueError, "epsilon must be a finite number > 0"),
        (dict(mechanism="no-such-mechanism"), ValueError, "unknown mechanism 'no-such-mechanism'; known mechanisms"),
        (dict(mechanism=42), TypeError, "mechanism must be a name in MECHANISMS"),
        (dict(n_select=0), ValueError, "n_select must be an integer >= 1"),
        (dict(n_detect=0), ValueError, "n_detect must be an integer >= 1"),
        (dict(confidence=1.0), ValueError, "confidence must be a number strictly between 0 and 1"),
        (dict(confidence=0), ValueError, "confidence must be a number strictly between 0 and 1"),
        (dict(kinds=("boundary", "corner")), ValueError, "kinds must be a non-empty selection"),
        (dict(per_kind=0), ValueError, "per_kind must be an integer >= 1"),
        (dict(mechanism=lambda x, rng: x, route="exact"), ValueError, "route, tree and secure apply to library"),
        (dict(mechanism=lambda x, rng: x, secure=True), ValueError, "route, tree and secure apply to library"),
        (dict(mechanism=lambda x, rng: x[:3]), ValueError, r"returned shape \(3,\), expected \(8,\)"),
        (dict(mechanism=Batched(lambda x, n, rng: np.zeros((n, 2)))), ValueError, r"returned shape \(5, 2\)"),
        (dict(workload=wl.prefix(5)), ValueError, "workload prefix\\(5\\) has 5 cells"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    args = dict(mechanism="identity", policy=policies.line(K), workload=wl.prefix(K), epsilon=1.0,
                n_select=5, n_detect=5)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        audit(**args)


def test_inconsistent_pairs_are_refused():
    policy = policies.line(K)
    good = make_pair(policy, np.ones(K, int), 2, 3)
    forged = type(good)(good.x, good.y, good.u, good.v, 5.0, "custom")  # claims a larger distance
    with pytest.raises(ValueError, match=r"pairs\[0\] is inconsistent"):
        audit(tight_prefix(1.0), policy, wl.prefix(K), 1.0, pairs=[forged], n_select=5, n_detect=5)
    with pytest.raises(ValueError, match=r"pairs\[0\] must be a NeighbourPair"):
        audit(tight_prefix(1.0), policy, wl.prefix(K), 1.0, pairs=[(good.x, good.y)], n_select=5, n_detect=5)


def test_sweep_runs_a_new_mechanism_given_by_label():
    config = SweepConfig("tiny", k=4, theta=2, grid_shape=(2, 2), n_select=10, n_detect=20, kinds=("single",))
    rows = sweep(config, mechanisms={"mine": ShrunkNoise()}, policies=["line", "unbounded"])
    assert [(row.mechanism, row.policy) for row in rows] == [("mine", "line"), ("mine", "unbounded")]
    assert all(row.report.mechanism == "identity(noise / 2)" for row in rows)
    table = sweep_table(rows)
    assert table.count("| mine |") == 2 and "transform[line(4), stretch 1]" in table


def test_sweep_arguments_are_checked():
    with pytest.raises(ValueError, match="config must be one of"):
        sweep("huge")
    with pytest.raises(ValueError, match="are not in the sweep"):
        sweep("ci", mechanisms=["no-such"])
    with pytest.raises(ValueError, match="are not in the sweep"):
        sweep("ci", policies=["torus"])


# -- the CI sweep ------------------------------------------------------------------------------


@pytest.mark.slow
def test_sweep_ci_every_mechanism_under_every_policy_passes():
    """Every mechanism × {line, threshold, grid, unbounded}, seeded; skipped: the 1-D native
    mechanisms on the grid, and the record models (MWEM, Uniform, UGrid, AGrid) under every policy
    but unbounded DP (on the grid for the grid mechanisms)."""
    rows = sweep("ci")
    print(sweep_table(rows))
    labels = {row.mechanism for row in rows}
    assert set(MECHANISMS) | {"matrix(prefix)", "nonnegative(identity)"} <= labels
    skipped = {(row.mechanism, row.policy): row.skipped for row in rows if row.report is None}
    records = {(m, p) for m in ("mwem", "uniform", "ugrid", "agrid") for p in ("line", "threshold", "grid")}
    natives = {("ordered", "grid"), ("ordered_hierarchical", "grid"), ("ordered_hierarchical_tuned", "grid")}
    assert set(skipped) == natives | records
    assert all(("records" if key in records else "1-D ordered domain") in reason for key, reason in skipped.items())
    failed = [(row.mechanism, row.policy) for row in rows if row.report is not None and not row.report.passed]
    assert failed == []


@pytest.mark.slow
def test_scale_pairs_catch_a_mechanism_that_is_exact_above_a_count():
    """A broken mechanism publishes exact answers once a cell holds more than 1000 records: no
    small-histogram pair reaches that count (mass pairs hold 100), the scale pairs do."""

    class ExactWhenLarge(Mechanism, register=False):
        name = "exact_when_large"

        def run(self, workload, x, epsilon, rng=None):
            if np.max(x) > 1000:
                return workload @ x
            return Identity().run(workload, x, epsilon, rng)

    small = audit(ExactWhenLarge(), policies.line(K), wl.prefix(K), 1.0, n_select=100, n_detect=300,
                  kinds=("boundary", "mass", "single", "random"), rng=1, confidence=CONFIDENCE)
    assert small.passed  # invisible without large counts
    scaled = audit(ExactWhenLarge(), policies.line(K), wl.prefix(K), 1.0, n_select=100, n_detect=300,
                   kinds=("scale",), per_kind=3, rng=1, confidence=CONFIDENCE)
    assert not scaled.passed and any(r.pair.x.max() > 1000 for r in scaled.results if not r.passed)
