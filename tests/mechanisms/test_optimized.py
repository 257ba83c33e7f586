"""Optimised strategies: Kronecker products against their dense twins, the policy-aware objective,
exact Δ_G in the exact route, the transform routes' error floor and the ``auto`` selector."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from blowfish_te import answer, plan, policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import Auto, Optimized, TunedOrderedHierarchical, get_mechanism
from blowfish_te.mechanisms.matrix import MatrixMechanism
from blowfish_te.mechanisms.optimized import axis_edges
from blowfish_te.routes import transform_floor
from blowfish_te.sensitivity import sensitivity
from blowfish_te.strategies import PIdentityStrategy, cap_scales
from blowfish_te.strategies.kronecker import KroneckerStrategy, optimize_kronecker
from blowfish_te.strategies.pidentity import MAX_COLUMN_SCALE, _objective, _soft_sensitivity
from blowfish_te.strategies.standard import standard_workloads
from blowfish_te.transform import transform
from blowfish_te.workloads import from_matrix

pytestmark = pytest.mark.core


def _kronecker(seed, sides=(5, 4, 3), rows=(2, 3, 0)):
    gen = np.random.default_rng(seed)
    factors = [PIdentityStrategy(gen.random((p, k)), (k,)) for k, p in zip(sides, rows)]
    dense = factors[0].dense()
    for f in factors[1:]:
        dense = np.kron(dense, f.dense())
    return KroneckerStrategy(factors), dense


def test_least_squares_stays_exact_when_theta_is_huge():
    """Optimised Θ can hold entries of 10⁴ and more on cells the workload only sees through Θ
    (2,000 DPBench rectangles at 64²: 2·10⁴); the estimate must still invert A to rounding, and
    its error must be the dense least squares'."""
    gen = np.random.default_rng(5)
    theta = gen.random((4, 32))
    theta[:, 3:9] *= 3e4
    strategy = PIdentityStrategy(theta, (32,))
    dense = strategy.dense()
    x = gen.integers(0, 1000, 32).astype(float)
    reference = np.abs(np.linalg.lstsq(dense, dense @ x, rcond=None)[0] - x).max()  # what rounding allows
    assert np.abs(strategy.pinv(dense @ x) - x).max() <= 10 * reference + 1e-9
    w = wl.random_ranges(32, 40, rng=1)
    assert strategy.lstsq_frobenius_sq(w) == pytest.approx(np.linalg.norm(w.dense() @ np.linalg.pinv(dense)) ** 2, rel=1e-6)


#: Unit roundoff of doubles: every rounded operation is exact to a relative 2⁻⁵³.
ROUNDOFF = np.finfo(np.float64).eps / 2
#: Records in the neighbouring histograms of the privacy-loss checks below.
RECORDS = 2


def _exact_edge_cost(strategy: PIdentityStrategy, u: int, v: int) -> Fraction:
    """‖A(e_u - e_v)‖₁ in exact arithmetic, A = [I; Θ] diag(1/s) for the strategy's own Θ and s."""
    su, sv = Fraction(strategy.scale[u]), Fraction(strategy.scale[v])
    rows = zip(strategy.theta[:, u], strategy.theta[:, v])
    return 1 / su + 1 / sv + sum(abs(Fraction(a) / su - Fraction(b) / sv) for a, b in rows)


def _release_loss(strategy, policy, noise_scale: float) -> Fraction:
    """max over G-neighbours x, x' of at most RECORDS records of ‖A x - A x'‖₁ / b, with A x as the
    release computes it (``strategy.matvec``) and the difference, sum and ratio exact."""
    k = strategy.size
    worst = Fraction(0)
    for n in range(1, RECORDS + 1):
        for placement in itertools.combinations_with_replacement(range(k), n):
            x = np.bincount(np.array(placement), minlength=k).astype(np.float64)
            for u, v in policy.edges:
                for a, b in ((u, v), (v, u)):
                    if x[a] == 0:
                        continue
                    y = x.copy()
                    y[a] -= 1
                    y[b] += 1
                    pairs = zip(strategy.matvec(x), strategy.matvec(y))
                    worst = max(worst, sum(abs(Fraction(p) - Fraction(q)) for p, q in pairs))
    return worst / Fraction(noise_scale)


def _check_exact_privacy(strategy: PIdentityStrategy, workload, policy, epsilon: float) -> float:
    """The declared Δ_G against the exact one, and the exact route's privacy loss against ε, each
    within its rounding bound: Δ_G from entries θ/s and 1/s of at most 1, each rounded once, and
    p + 2 further additions: (4 + (p + 3) Δ) u absolute; A x row by row with K + 1 roundings on
    counts summing to at most RECORDS: (K + 1)·2·RECORDS·u absolute on ‖A x - A x'‖₁; and one
    rounding of b = Δ/ε. Returns the relative tolerance on the loss."""
    p, k = strategy.theta.shape
    declared = sensitivity(strategy, policy)
    exact = max(_exact_edge_cost(strategy, u, v) for u, v in policy.edges)
    assert abs(Fraction(declared) - exact) <= (4 + (p + 3) * declared) * ROUNDOFF
    release = answer(workload, np.arange(k), policy, epsilon, MatrixMechanism(strategy), rng=0, route="exact")
    assert release.sensitivity == declared and release.noise_scale == declared / epsilon
    tolerance = ((k + 1) * 2 * RECORDS + 4) / declared * ROUNDOFF + (p + 5) * ROUNDOFF
    loss = _release_loss(strategy, policy, release.noise_scale)
    assert abs(loss / Fraction(epsilon) - 1) <= tolerance
    return tolerance


@pytest.mark.filterwarnings("error")
def test_a_near_degenerate_pidentity_strategy_is_capped_and_its_privacy_loss_is_exact():
    """Identity rows of ~1e-8 next to Θ rows near 1 (column scales s ≈ 10⁸, where the policy-aware
    search went under partition policies) leave Δ_G ≈ 2/s to the rounding of entries near 1: nine
    of its digits. The constructor refuses such Θ; cap_scales brings the scales to 2¹⁷ - 1, and
    then Δ_G and the release's privacy loss are exact to their rounding bounds (2·10⁻¹⁰ relative,
    five times below the route check's 10⁻⁹; uncapped, 1.6·10⁻⁷)."""
    gen = np.random.default_rng(7)
    p, k = 2, 5
    theta = 5e7 * (1 + 1e-6 * gen.random((p, k)))
    theta[:, 4] = gen.random(p)  # an ordinary column, alone in its block
    scales = 1 + theta.sum(axis=0)
    message = (f"theta's column {int(np.argmax(scales))} has scale s = 1 + column sum = {scales.max():.6g} > "
               "MAX_COLUMN_SCALE = 2**17: the policy sensitivities of such a strategy lose their digits; "
               "cap_scales(theta) rescales it")
    with pytest.raises(ValueError) as refused:
        PIdentityStrategy(theta, (k,))
    assert str(refused.value) == message
    capped = cap_scales(theta)
    strategy = PIdentityStrategy(capped, (k,))
    assert np.array_equal(capped[:, 4], theta[:, 4])
    np.testing.assert_allclose(strategy.scale[:4], MAX_COLUMN_SCALE - 1, rtol=4 * ROUNDOFF)
    np.testing.assert_allclose(capped[:, :4] / capped[:, :4].sum(0), theta[:, :4] / theta[:, :4].sum(0), rtol=4 * ROUNDOFF)
    assert strategy.scale.max() <= MAX_COLUMN_SCALE and cap_scales(capped).tolist() == capped.tolist()
    policy = policies.partition([0, 0, 1, 1, 2])
    assert _check_exact_privacy(strategy, wl.prefix(k), policy, 0.7) < 1e-9 / 4


@pytest.mark.filterwarnings("error")
def test_the_policy_aware_search_keeps_to_the_scale_bound_and_its_release_is_exactly_private():
    """The case of the route check that read 0.7000000014 for ε = 0.7 (prefixes, two blocks over
    five cells): the search runs into the bound θ <= (2¹⁷ - 2)/p instead of s ≈ 10⁷, without an
    overflow, and the exact route's privacy loss is ε to its rounding bound."""
    workload, policy = wl.prefix(5), policies.partition([0, 0, 1, 1, 1])
    strategy = Optimized(store=False).policy_strategy(workload, policy)
    assert isinstance(strategy, PIdentityStrategy) and strategy.theta.shape == (1, 5)
    assert strategy.theta.max() == MAX_COLUMN_SCALE - 2  # the search wanted more
    assert strategy.scale.max() <= MAX_COLUMN_SCALE
    assert _check_exact_privacy(strategy, workload, policy, 0.7) < 1e-9 / 4


@pytest.mark.filterwarnings("error")
def test_the_objective_is_infinite_where_it_overflows():
    workload = wl.prefix(5)
    gram, diag = workload.gram(), np.asarray(workload.column_norms("l2sq"), dtype=np.float64)
    loss, grad = _objective(np.full(5, 1e100), 1, 5, gram, diag)
    assert loss == np.inf and grad.tolist() == [0.0] * 5
    loss, grad = _objective(np.full(5, 0.5), 1, 5, gram, diag)
    assert np.isfinite(loss) and np.isfinite(grad).all()


@pytest.mark.parametrize("name", sorted(standard_workloads()))
def test_every_shipped_strategy_inverts_to_rounding(name):
    workload = standard_workloads()[name]()
    shipped = Optimized().strategy(workload)
    cells = np.random.default_rng(0).integers(0, 500, workload.size).astype(float)
    assert np.abs(shipped.pinv(shipped.matvec(cells)) - cells).max() < 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_kronecker_strategy_equals_its_dense_twin(seed):
    strategy, dense = _kronecker(seed)
    gen = np.random.default_rng(seed)
    x = gen.random((60, 2))
    y = gen.random((dense.shape[0], 2))
    assert np.allclose(strategy.matmat(x), dense @ x)
    assert np.allclose(strategy.rmatmat(y), dense.T @ y)
    assert np.allclose(strategy.pinv(y), np.linalg.pinv(dense) @ y)
    # every kind of pair: shared and distinct coordinates on each axis, and ⊥
    u = gen.integers(0, 60, size=300)
    v = np.where(gen.random(300) < 0.1, 60, gen.integers(0, 60, size=300))
    v[:40] = u[:40] + 1  # neighbours along the last axis (shared leading coordinates)
    v = np.minimum(v, 60)
    twin = from_matrix(dense)
    for norm in ("l1", "l2sq"):
        assert np.allclose(strategy.difference_norms(u, v, norm), twin.difference_norms(u, v, norm))
    boxes = wl.random_rects((5, 4, 3), 25, rng=seed)
    assert strategy.lstsq_frobenius_sq(boxes) == pytest.approx(np.linalg.norm(boxes.dense() @ np.linalg.pinv(dense)) ** 2)


def test_soft_sensitivity_bounds_the_maximum_and_has_the_right_gradient():
    gen = np.random.default_rng(3)
    theta = gen.random((3, 9))
    pol = policies.threshold(9, 2)
    u, v = pol.edges.T
    q = 40.0
    soft, grad = _soft_sensitivity(theta, u, v, q)
    exact = sensitivity(PIdentityStrategy(theta, (9,)), pol)
    assert exact <= soft <= exact * len(u) ** (1 / q) + 1e-12
    numeric = approx_fprime(theta.ravel(), lambda t: _soft_sensitivity(t.reshape(3, 9), u, v, q)[0], 1e-7)
    assert np.allclose(grad.ravel(), numeric, rtol=1e-4, atol=1e-6)
    # ⊥ edges cost ‖a_u‖₁ = 1 each, so nine of them give 9^(1/q)
    soft_bottom, _ = _soft_sensitivity(theta, np.arange(9), np.full(9, 9), q)
    assert soft_bottom == pytest.approx(9 ** (1 / q))


def test_axis_edges_of_a_grid_are_the_lines_of_each_axis():
    for (u, v), side in zip(axis_edges(policies.grid((4, 6), 1)), (4, 6)):
        assert np.array_equal(u, np.arange(side - 1)) and np.array_equal(v, np.arange(1, side))
    (u, v), = axis_edges(policies.unbounded(5))
    assert np.array_equal(v, np.full(5, 5))


@pytest.mark.slow
def test_the_exact_route_calibrates_noise_to_the_exact_sensitivity_of_the_policy_aware_strategy():
    shape = (12, 12)
    pol = policies.grid(shape, 1)
    w = wl.random_rects(shape, 60, rng=1)
    mech = Optimized(maxiter=60)
    aware = mech.policy_strategy(w, pol)
    unit = mech.strategy(w)
    assert aware is not unit  # the grid policy pays off: a different strategy
    delta = sensitivity(from_matrix(aware.dense()), pol)  # brute force on the dense twin
    assert delta < 2.0  # bounded DP would cost 2
    release = answer(w, np.zeros(shape, dtype=np.int64), pol, 0.5, mech, rng=0, route="exact")
    assert release.sensitivity == pytest.approx(delta)
    assert release.noise_scale == pytest.approx(delta / 0.5)
    aware_error = mech.expected_error(w, 0.5, policy=pol)
    unit_error = 2 * (sensitivity(unit, pol) / 0.5) ** 2 * unit.lstsq_frobenius_sq(w)
    assert aware_error < unit_error


@pytest.mark.slow
@pytest.mark.parametrize("k, theta", [(256, 64), (256, 16)])
def test_the_1d_policy_aware_search_starts_from_the_unit_change_strategy(k, theta):
    """From random starts the policy-aware p-Identity lost to the unit-change strategy under wide
    threshold policies (K = 256, θ = 64: 1.26× its error); started from it, it wins (0.58×)."""
    pol, w = policies.threshold(k, theta), wl.prefix(k)
    mech = Optimized()
    aware, unit = mech.policy_strategy(w, pol), mech.strategy(w)
    assert isinstance(aware, PIdentityStrategy) and aware is not unit
    aware_error = mech.expected_error(w, 0.5, policy=pol)
    unit_error = 2 * (sensitivity(unit, pol) / 0.5) ** 2 * unit.lstsq_frobenius_sq(w)
    assert aware_error < 0.8 * unit_error
    delta = sensitivity(from_matrix(aware.dense()), pol)  # brute force on the dense twin
    assert aware_error == pytest.approx(2 * (delta / 0.5) ** 2 * aware.lstsq_frobenius_sq(w))


@pytest.mark.slow
def test_kronecker_optimisation_beats_the_hierarchy_and_its_error_is_measured():
    shape = (32, 32)
    w = wl.random_rects(shape, 200, rng=0)
    pol = policies.unbounded(shape)
    mech = Optimized()
    assert isinstance(mech.strategy(w), KroneckerStrategy)
    expected = plan(w, pol, 1.0, mech).chosen.expected_mse
    assert expected < plan(w, pol, 1.0, "hb").chosen.expected_mse
    x = np.random.default_rng(0).integers(0, 50, size=shape)
    truth = w @ x.ravel()
    trials = 200
    errors = np.array([np.mean((answer(w, x, pol, 1.0, mech, rng=t).answers - truth) ** 2) for t in range(trials)])
    # the per-trial mean of 200 Laplace-driven squares: its spread sets the tolerance (5 standard errors)
    assert abs(errors.mean() - expected) < 5 * errors.std(ddof=1) / np.sqrt(trials)


def test_optimize_kronecker_refuses_other_workloads():
    with pytest.raises(TypeError, match="box workload"):
        optimize_kronecker(from_matrix(np.eye(4)))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["identity", "hb", "privelet", "greedyh", "optimized"])
@pytest.mark.parametrize("pol", [policies.grid((4, 5), 1), policies.threshold(16, 3)], ids=["grid", "threshold"])
def test_the_transform_floor_is_below_every_mechanism_on_every_tree(name, pol):
    from blowfish_te import trees

    w = wl.random_rects(pol.shape, 30, rng=2) if pol.ndim == 2 else wl.random_ranges(16, 30, rng=2)
    mech = get_mechanism(name)
    for tree in trees.candidates(pol).values():
        tr = transform(pol, tree)
        floor = transform_floor(w, tr, 0.5)
        error = mech.expected_error(tr.workload(w), 0.5 / tr.stretch) / w.num_queries
        assert floor <= error * (1 + 1e-9)


@pytest.mark.parametrize("epsilon", [0.3, 2.0])
def test_the_transform_floor_is_reached_where_every_transformed_query_is_one_count(epsilon):
    """Prefixes through a path (a spanning tree of threshold(k, 2), stretch 2): every row of W_T
    holds one ±1 (n itself is a disclosed total), so Laplace on x_T at ε/ℓ meets the floor
    2 (ℓ/ε)² (K - 1)/K exactly, at every ε."""
    k = 16
    pol = policies.threshold(k, 2)
    tr = transform(pol, policies.line(k))
    assert tr.stretch == 2
    floor = transform_floor(wl.prefix(k), tr, epsilon)
    assert floor == pytest.approx(2 * (2 / epsilon) ** 2 * (k - 1) / k, rel=1e-12)
    identity = get_mechanism("identity").expected_error(tr.workload(wl.prefix(k)), epsilon / tr.stretch) / k
    assert identity == pytest.approx(floor, rel=1e-12)


def test_auto_picks_the_lowest_error_and_says_why():
    k = 64
    w, pol = wl.prefix(k), policies.threshold(k, 4)
    chosen = plan(w, pol, 0.5, "auto")
    best = min(plan(w, pol, 0.5, m).chosen.expected_mse for m in ("identity", "hb", "h2", "privelet", "greedyh",
                                                                  "ordered_hierarchical", "ordered_hierarchical_tuned",
                                                                  "optimized"))
    assert chosen.chosen.expected_mse == pytest.approx(best)
    assert "optimized considered" in chosen.reason
    assert "ordered_hierarchical_tuned considered (predicted" in chosen.reason
    x = np.random.default_rng(1).integers(0, 9, size=k)
    release = chosen.release(x, rng=4)
    assert release.mechanism == chosen.chosen.mechanism.name
    assert "auto: lowest analytic expected error" in release.choice
    assert np.array_equal(release.answers, plan(w, pol, 0.5, "auto").release(x, rng=4).answers)


def test_auto_skips_the_optimiser_beyond_its_budget(monkeypatch, tmp_path):
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", str(tmp_path))  # nothing stored: the optimiser would run
    w = wl.prefix(64)
    frugal = Auto(budget=0.0)
    chosen = plan(w, policies.unbounded(64), 0.5, frugal)
    assert "optimized skipped (predicted" in chosen.reason
    assert "ordered_hierarchical_tuned skipped (predicted" in chosen.reason
    assert all(c.mechanism.name not in ("optimized", "ordered_hierarchical_tuned") for c in chosen.considered)
    # a wide domain with few queries: the tuning time is the Δ_G of every plan over K·θ edges
    tuned, k = TunedOrderedHierarchical(), 2**17
    few = wl.random_ranges(k, 20, rng=0)
    assert tuned.predicted_seconds(few, policies.threshold(k, 64)) > 10.0 > tuned.predicted_seconds(few, policies.line(k))
    with pytest.raises(ValueError, match="budget"):
        Auto(budget=-1.0)
    with pytest.raises(ValueError, match="unknown mechanism"):
        Auto(candidates=("identity", "nope"))


def test_predicted_time_depends_on_sizes_only():
    mech = Optimized(store=False)
    assert mech.predicted_seconds(wl.prefix(4096)) == mech.predicted_seconds(wl.random_ranges(4096, 10, rng=0))
    assert mech.predicted_seconds(wl.prefix(4096)) > mech.predicted_seconds(wl.prefix(256))
    assert mech.predicted_seconds(wl.prefix(256), policies.threshold(256, 4)) > mech.predicted_seconds(wl.prefix(256))
