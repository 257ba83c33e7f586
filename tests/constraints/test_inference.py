"""The release under public count constraints (He, Machanavajjhala, Ding, SIGMOD 2014, §8):
Laplace noise at the constrained sensitivity S = L · Δ_moves(A) (checked against brute force over
the neighbours of Def. 4.1 on a tiny domain), the refusals of the planner, the public counts and
the constrained least squares that follows (post-processing of the noisy answers)."""

import itertools
import re

import numpy as np
import pytest
import scipy.sparse as sp

import blowfish_te as bt
import blowfish_te.constraints.inference as inference
from blowfish_te import constraints as C
from blowfish_te import policies as P
from blowfish_te import workloads as W
from blowfish_te.constraints.inference import ConstrainedLeastSquares, plan_constrained
from blowfish_te.errors import ConstraintError
from blowfish_te.mechanisms import LinearMechanism, get_mechanism
from blowfish_te.release import make_plan
from blowfish_te.testing import assert_laplace_noise, close


# -- helpers -------------------------------------------------------------------------------------
class _Recorder:
    """Stands in for ``add_laplace`` in the inference module: records every call and draws the
    noise with the real sampler."""

    def __init__(self):
        self.calls = []
        self.real = inference.add_laplace

    def __call__(self, values, scale, rng, *, sensitivity, integer):
        out = self.real(values, scale, rng, sensitivity=sensitivity, integer=integer)
        self.calls.append(dict(values=np.array(values, dtype=np.float64), scale=scale, sensitivity=sensitivity,
                               integer=integer, noisy=np.array(out, dtype=np.float64)))
        return out


def _prefix_case():
    """prefix(8) under line(8), the public count of cells 0..3 (4 of the 10 records)."""
    x = np.array([1, 0, 2, 1, 3, 0, 1, 2])
    return W.prefix(8), x, P.line(8), C.rectangles(8, [0], [3])


def _spy_on_solves(monkeypatch, after=None):
    """Wrap cvxpy's ``Problem.solve``: record the parameter values every solve sees, then let
    ``after(problem)`` alter what the solver reported."""
    seen = []
    import cvxpy as cp  # the constrained solver, loaded where it is spied on

    original = cp.Problem.solve

    def spy(self, *args, **kwargs):
        seen.append(sorted((np.array(p.value, dtype=np.float64) for p in self.parameters()), key=np.size))
        result = original(self, *args, **kwargs)
        if after is not None:
            after(self)
        return result

    monkeypatch.setattr(cp.Problem, "solve", spy)
    return seen


def _def_4_1_sensitivity(A, policy, Q, n, moves):
    """max ‖A(h(D1) − h(D2))‖₁ over neighbours (D1, D2) of Def. 4.1 among databases of n records
    with ids (no ⊥): both satisfy the constraints with the same public counts; T(D1, D2), the
    changed records whose old and new values are a policy edge, is non-empty and minimal — no D3
    with the same counts has T(D1, D3) ⊊ T(D1, D2) (non-empty), nor T(D1, D3) = T(D1, D2) with
    fewer changed records. With moves="edges" every changed record moves along an edge."""
    k = policy.size
    edges = {frozenset(map(int, e)) for e in policy.edges.tolist()}
    q = Q.matrix.toarray()
    classes = {}
    for d in itertools.product(range(k), repeat=n):
        h = np.bincount(np.array(d, dtype=np.int64), minlength=k)
        classes.setdefault(tuple(q @ h), []).append((d, h))
    best = 0.0
    for members in classes.values():
        for d1, h1 in members:
            cands = []
            for d, h in members:
                changed = frozenset((i, d[i]) for i in range(n) if d[i] != d1[i])
                disc = frozenset((i, v) for i, v in changed if frozenset((d1[i], v)) in edges)
                if moves == "edges" and disc != changed:
                    continue
                cands.append((disc, changed, h))
            for t2, c2, h2 in cands:
                if not t2:
                    continue
                if any(t3 and t3 < t2 for t3, _, _ in cands) or any(t3 == t2 and c3 < c2 for t3, c3, _ in cands):
                    continue
                best = max(best, float(np.abs(A @ (h1 - h2)).sum()))
    return best


# -- the noise: scale S/ε and sensitivity S --------------------------------------------------------
def test_noise_is_drawn_at_the_constrained_sensitivity_over_epsilon(monkeypatch):
    """Two records move at most (ξ = 2); along line edges a move changes one prefix by 1, any move
    up to 7 prefixes (cell 0 to cell 7): S = 2 resp. 14, and the noise has scale S/ε at each ε."""
    w, x, policy, q = _prefix_case()
    for moves, s in [("edges", 2.0), ("any", 14.0)]:
        for eps, seed in [(0.5, 11), (2.5, 12)]:
            rec = _Recorder()
            monkeypatch.setattr(inference, "add_laplace", rec)
            release = bt.answer(w, x, policy, eps, "laplace", rng=seed, constraints=q, moves=moves)
            assert len(rec.calls) == 1
            call = rec.calls[0]
            assert call["sensitivity"] == s and call["scale"] == pytest.approx(s / eps, rel=1e-15)
            assert call["integer"] is True  # prefix sums of counts are integers
            np.testing.assert_array_equal(call["values"], w @ x)
            drawn = release.unconstrained_answers - w @ x
            assert close(drawn, np.random.default_rng(seed).laplace(0.0, s / eps, 8), release.unconstrained_answers)
            assert release.sensitivity == s and release.noise_scale == pytest.approx(s / eps, rel=1e-15)
            assert release.public_counts == {"[0..3]": 4}


def test_noise_statistics_match_laplace_at_s_over_epsilon(monkeypatch):
    w, x, policy, q = _prefix_case()
    for eps in (0.4, 3.0):
        rec = _Recorder()
        monkeypatch.setattr(inference, "add_laplace", rec)
        the_plan = bt.plan(w, policy, eps, "laplace", constraints=q, moves="any")
        gen = np.random.default_rng(int(eps * 10))
        for _ in range(40):
            the_plan.release(x, gen)
        noise = np.concatenate([c["noisy"] - c["values"] for c in rec.calls])
        assert_laplace_noise(noise, 14.0 / eps)


def test_non_integer_strategy_is_flagged_and_calibrated_on_the_secure_path(monkeypatch):
    """Privelet's Haar strategy has non-integer entries: the secure path draws lattice Laplace,
    calibrated with the sensitivity S; an integer strategy draws integer noise."""
    w, x, policy, q = _prefix_case()
    rec = _Recorder()
    monkeypatch.setattr(inference, "add_laplace", rec)
    release = bt.answer(w, x, policy, 0.5, "privelet", constraints=q, moves="edges")
    s = release.sensitivity
    assert rec.calls[0]["integer"] is False and rec.calls[0]["sensitivity"] == s == 12
    assert release.secure and "lattice" in release.sampler
    rec.calls.clear()
    release = bt.answer(w, x, policy, 0.5, "laplace", constraints=q, moves="any")
    assert rec.calls[0]["integer"] is True and rec.calls[0]["sensitivity"] == 14
    assert release.secure and "lattice" not in release.sampler
    noisy = release.unconstrained_answers
    np.testing.assert_array_equal(noisy, np.round(noisy))  # exact discrete Laplace on integer answers


def test_sensitivity_covers_brute_force_over_constrained_neighbours(monkeypatch):
    """On 4 cells with the public count of cells 1..2 and 3 records: the largest change of the
    strategy's answers between Def. 4.1 neighbours never exceeds the S the noise is drawn at, and
    attains it for the histogram and for prefixes along line edges (under G_full two records moved
    change the prefixes by 4 < 2 · 3: the bound L · Δ_moves is not always tight)."""
    q = C.rectangles(4, [1], [2])
    x = np.array([1, 1, 0, 1])
    cases = [(P.complete(4), "identity", W.identity(4), "any", True), (P.complete(4), "laplace", W.prefix(4), "any", False),
             (P.line(4), "laplace", W.prefix(4), "edges", True), (P.line(4), "identity", W.identity(4), "edges", True)]
    for policy, mech, w, moves, attained in cases:
        a = get_mechanism(mech).strategy(w) @ np.eye(4)  # the strategy as a dense matrix
        brute = _def_4_1_sensitivity(a, policy, q, 3, moves)
        rec = _Recorder()
        monkeypatch.setattr(inference, "add_laplace", rec)
        release = bt.answer(w, x, policy, 0.75, mech, rng=5, constraints=q, moves=moves)
        s = rec.calls[0]["sensitivity"]
        assert s == release.sensitivity and brute <= s
        assert rec.calls[0]["scale"] * 0.75 == pytest.approx(s, rel=1e-15)
        if attained:
            assert brute == s, (mech, moves)


# -- the planner's refusals and what it passes on --------------------------------------------------
def test_epsilon_whose_noise_scale_overflows_is_refused_before_any_noise():
    big = np.zeros((2, 4))
    big[0, 0] = big[1, 3] = 1e250
    q = C.rectangles(4, [1], [2])
    the_plan = bt.plan(big, P.complete(4), 1e-3, "laplace", constraints=q)
    delta = the_plan.chosen.sensitivity
    assert np.isfinite(delta) and delta >= 1e250
    with pytest.raises(ValueError, match="^" + re.escape(f"epsilon=1e-100 is too small: the noise scale {delta}/1e-100 overflows") + "$"):
        bt.plan(big, P.complete(4), 1e-100, "laplace", constraints=q)


def test_non_linear_mechanisms_are_refused_with_the_reason():
    w, _, policy, q = _prefix_case()
    words = ("mechanism 'dawa' is not linear: under constraints only linear mechanisms have a known sensitivity "
             "(L moves times the strategy's largest change per move); use 'identity', 'hb', 'privelet', ...")
    with pytest.raises(ValueError, match="^" + re.escape(words) + "$"):
        bt.plan(w, policy, 0.5, "dawa", constraints=q)
    with pytest.raises(ValueError, match="^" + re.escape(words) + "$"):
        plan_constrained(w, policy, 0.5, q, get_mechanism("dawa"))


def test_constraints_of_another_type_are_refused_naming_it():
    w, _, policy, _ = _prefix_case()
    words = "constraints must be a blowfish_te.constraints.Constraints, got list"
    with pytest.raises(TypeError, match="^" + re.escape(words) + "$"):
        bt.plan(w, policy, 0.5, "laplace", constraints=[[0, 1]])


def test_moves_default_to_any_and_max_steps_reaches_the_search():
    w, _, policy, q = _prefix_case()
    mech = get_mechanism("laplace")
    default = plan_constrained(w, policy, 0.5, q, mech)
    assert default.chosen.sensitivity == 14 and default.chosen.analysis.moves == "any"
    assert plan_constrained(w, policy, 0.5, q, mech, "edges").chosen.sensitivity == 2
    hard = C.count_queries(8, [[i] for i in range(7)])
    with pytest.raises(ConstraintError, match="max_steps=3"):
        plan_constrained(W.identity(8), P.line(8), 0.5, hard, get_mechanism("identity"), "edges", max_steps=3)
    with pytest.raises(ConstraintError, match="max_steps=5"):
        plan_constrained(W.identity(8), P.line(8), 0.5, hard, get_mechanism("identity"), "edges", 5)
    assert plan_constrained(W.identity(8), P.line(8), 0.5, hard, get_mechanism("identity"), "edges").chosen.sensitivity > 0


def test_the_plan_carries_its_route_policy_analysis_and_mechanism():
    w, x, policy, q = _prefix_case()
    mech = get_mechanism("laplace")
    the_plan = plan_constrained(w, policy, 0.5, q, mech, "edges")
    route = the_plan.chosen
    assert the_plan.considered == (route,) and route.route == "constrained"
    assert route.policy is policy and the_plan.policy is policy
    assert route.mechanism is mech and the_plan.mechanism is mech
    assert route.workload is w and route.epsilon == 0.5 and route.sensitivity == 2
    assert route.analysis == C.histogram_sensitivity(q, policy, "edges")
    assert (route.analysis.alpha, route.analysis.xi) == (0, 2)
    assert route.expected_mse == pytest.approx(mech.expected_error(w, 0.5, sensitivity=2.0) / 8)
    assert route.expected_mse == pytest.approx(2 * (2 / 0.5) ** 2)
    summary = the_plan.summary()
    assert summary.startswith("laplace on ") and "route: constrained" in summary
    assert "the 1 public counts that x determines" in the_plan.reason
    assert the_plan.release(x, rng=0).public_counts == {"[0..3]": 4}


def test_a_linear_mechanism_without_analytic_error_is_planned_and_its_outcome_is_float():
    """A plug-in linear mechanism that rounds its answers (so has no closed-form error): the plan
    reports no expected error; the route's outcome holds float64 arrays."""

    class RoundedLaplace(LinearMechanism, register=False):
        name = "rounded_laplace"

        def strategy(self, workload):
            return workload

        def reconstruct(self, workload, strategy, y):
            return np.rint(y).astype(np.int64)

        def reconstruction_frobenius_sq(self, workload, strategy):
            return None

    w, x, policy, q = _prefix_case()
    mech = RoundedLaplace()
    the_plan = bt.plan(w, policy, 0.5, mech, constraints=q, moves="edges")
    assert the_plan.chosen.expected_mse is None and "n/a (no analytic error)" in the_plan.summary()
    for known in (q, C.count_queries(8, [[0, 1]], scopes=[{0, 1}])):
        the_plan = bt.plan(w, policy, 0.5, mech, constraints=known, moves="edges")
        outcome = the_plan.chosen.execute(x, np.random.default_rng(3))
        assert outcome.unconstrained_answers.dtype == np.float64 and outcome.answers.dtype == np.float64
        noisy = w @ x + np.random.default_rng(3).laplace(0.0, outcome.noise_scale, 8)
        np.testing.assert_array_equal(outcome.unconstrained_answers, np.rint(noisy))


# -- the public counts ---------------------------------------------------------------------------
def test_public_counts_are_reported_and_fitted():
    x = np.array([2, 0, 1, 3, 0, 1])
    q = C.count_queries(6, [[0, 1], [2, 3, 4], [5]], names=["low", "mid", "top"])
    release = bt.answer(W.identity(6), x, P.complete(6), 0.8, rng=4, constraints=q)
    assert release.public_counts == {"low": 2, "mid": 4, "top": 1}
    np.testing.assert_allclose(q.matrix @ release.answers, [2, 4, 1], atol=1e-5)
    assert release.answers.min() >= 0
    assert not np.allclose(release.answers, release.unconstrained_answers)


def test_scoped_constraints_apply_only_to_the_records_they_count():
    """A count scoped to records {0, 1, 2} is fitted only on the histogram of those records (a part
    of a parallel composition); elsewhere no public count applies and the answers are the noisy
    ones, untouched — while the noise is calibrated to every constraint."""
    k = 8
    q = C.count_queries(k, [[0, 1], [5]], names=["n-low", "s-high"], scopes=[{0, 1, 2}, {3, 4, 5}])
    x = np.bincount([0, 1, 6], minlength=k)
    w, policy = W.identity(k), P.line(k)
    part = make_plan(w, policy, 0.5, "identity", constraints=q, moves="edges", records={0, 1, 2})
    release = part.release(x, rng=0)
    assert release.public_counts == {"n-low": 2}
    assert release.answers[:2].sum() == pytest.approx(2, abs=1e-5)
    for records in (None, {6, 7}):
        whole = make_plan(w, policy, 0.5, "identity", constraints=q, moves="edges", records=records)
        assert whole.chosen.sensitivity == part.chosen.sensitivity
        assert "the 0 public counts" in whole.reason
        release = whole.release(x, rng=0)
        assert release.public_counts == {}
        np.testing.assert_array_equal(release.answers, release.unconstrained_answers)
        assert release.answers.min() < 0  # the noisy answers, with no inference at all


# -- constrained least squares -------------------------------------------------------------------
def test_least_squares_projects_onto_the_public_counts():
    """For A = I and one total, x̂ = y + (c − Σy)/K·1 (the Euclidean projection)."""
    q = C.known_total(4)
    y = np.array([1.5, 2.0, 0.5, 3.0])
    for strategy in (np.eye(4), sp.csr_array(np.eye(4)), W.identity(4)):
        est = ConstrainedLeastSquares(strategy, q).solve(y, [9])
        np.testing.assert_allclose(est, y + (9 - y.sum()) / 4, atol=1e-7)


def test_least_squares_with_more_measurements_than_cells():
    """A = [[1, 0], [0, 1], [1, 1]] with x0 = 2 public: x1 minimises (x1 − y1)² + (2 + x1 − y2)²."""
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    q = C.count_queries(2, [[0]])
    y = np.array([1.0, 3.0, 7.0])
    for strategy in (a, sp.csr_array(a), W.as_workload(a)):
        solver = ConstrainedLeastSquares(strategy, q)
        np.testing.assert_allclose(solver.solve(y, [2]), [2.0, (3.0 + 7.0 - 2.0) / 2], atol=1e-7)
        np.testing.assert_allclose(solver.solve(2 * y, [4]), [4.0, (6.0 + 14.0 - 4.0) / 2], atol=1e-6)


def test_least_squares_on_a_release_with_a_tall_strategy():
    """H2's strategy measures 15 sums of 8 cells; the estimate fits the public count."""
    w, x, policy, q = _prefix_case()
    release = bt.answer(w, x, policy, 1.5, "h2", rng=9, constraints=q)
    assert release.answers[3] == pytest.approx(4, abs=1e-4)  # prefix over cells 0..3
    assert np.all(np.diff(release.answers) >= -1e-6)  # prefixes of x̂ >= 0


def test_nonnegativity_is_imposed_only_when_asked():
    q = C.known_total(2)
    y = np.array([-3.0, 1.0])
    free = ConstrainedLeastSquares(np.eye(2), q, nonnegative=False)
    assert not free.nonnegative
    np.testing.assert_allclose(free.solve(y, [0]), [-2.0, 2.0], atol=1e-7)
    bounded = ConstrainedLeastSquares(np.eye(2), q)
    assert bounded.nonnegative
    est = bounded.solve(y, [1])
    assert est.min() >= 0
    np.testing.assert_allclose(est, [0.0, 1.0], atol=1e-7)


def test_equality_constraints_hold_for_large_and_tiny_answers():
    """Answers around 10^6 (rescaled by their largest magnitude) and below 1 (left as they are):
    the estimate is exact to the solver's tolerance either way."""
    q = C.count_queries(4, [[0, 1], [2, 3]])
    y = np.array([1.0e6 + 0.4, 2.0e6 - 0.3, 3.0e6 + 0.2, 5.0e5 - 0.7])
    c = np.array([3_000_003, 3_500_000])
    est = ConstrainedLeastSquares(np.eye(4), q).solve(y, c)
    np.testing.assert_allclose(q.matrix @ est, c, rtol=1e-9, atol=0)
    want = np.concatenate([y[:2] + (c[0] - y[:2].sum()) / 2, y[2:] + (c[1] - y[2:].sum()) / 2])
    np.testing.assert_allclose(est, want, rtol=1e-9, atol=1e-3)
    tiny = np.array([1e-4, 3e-4, 2e-4, 0.0])
    est = ConstrainedLeastSquares(np.eye(4), q).solve(tiny, [5e-4, 3e-4])
    np.testing.assert_allclose(est, [1.5e-4, 3.5e-4, 2.5e-4, 0.5e-4], rtol=0, atol=1e-6)
    np.testing.assert_allclose(q.matrix @ est, [5e-4, 3e-4], rtol=0, atol=1e-7)


def test_the_solver_sees_the_data_rescaled_by_max_of_one_and_the_largest_answer(monkeypatch):
    """Scaling by max(1, |y|max) keeps the solver's (absolute) tolerances relative for large
    answers and never shrinks small ones; the estimate is scaled back."""
    seen = _spy_on_solves(monkeypatch)
    solver = ConstrainedLeastSquares(np.eye(3), C.known_total(3))
    large = np.array([4.0e6, -2.0e6, 1.0e6])
    est = solver.solve(large, [5_000_000])
    np.testing.assert_allclose(est, [4.0e6, 0.0, 1.0e6], rtol=1e-9, atol=1e-3)  # x1 >= 0 binds, τ = 0
    np.testing.assert_array_equal(seen[-1][0], [5.0 / 4.0])
    np.testing.assert_array_equal(seen[-1][1], large / 4.0e6)
    small = np.array([0.25, -0.5, 0.125])
    solver.solve(small, [1])
    np.testing.assert_array_equal(seen[-1][0], [1.0])
    np.testing.assert_array_equal(seen[-1][1], small)
    solver.solve(np.zeros(3), [0])
    np.testing.assert_array_equal(seen[-1][1], np.zeros(3))


def test_answers_and_counts_of_any_real_dtype_are_solved_in_double_precision():
    q = C.known_total(3)
    y16 = np.array([3.0, 1.0, 0.5], dtype=np.float16)
    c16 = np.array([10.0], dtype=np.float16)
    solver = ConstrainedLeastSquares(np.eye(3), q)
    want = solver.solve(y16.astype(np.float64), [10.0])
    np.testing.assert_allclose(want, y16.astype(np.float64) + (10.0 - 4.5) / 3, atol=1e-7)
    for y, c in [(y16, c16), (y16, [10]), (y16.astype(np.float64), c16), ([3, 1, 0.5], np.array([10], dtype=np.int64))]:
        est = solver.solve(y, c)
        assert est.dtype == np.float64
        np.testing.assert_allclose(est, want, rtol=0, atol=1e-9)  # float16 arithmetic would be off by ~1e-3


# -- the failure path ------------------------------------------------------------------------------
def test_infeasible_counts_raise_with_the_solver_status():
    q = C.count_queries(2, [[0, 1], [0], [1]])
    with pytest.raises(ConstraintError, match=re.escape("constrained inference failed: the solver returned status 'infeasible'")):
        ConstrainedLeastSquares(np.eye(2), q).solve([1.0, 2.0], [5, 1, 1])
    with pytest.raises(ConstraintError, match=r"^constrained inference failed: the solver returned status 'infeasible'$"):
        ConstrainedLeastSquares(np.eye(2), C.known_total(2)).solve([1.0, 2.0], [-1])


def test_a_solver_stopped_early_is_refused_even_with_a_point(monkeypatch):
    def stopped(problem):
        problem._status = "user_limit"  # cvxpy keeps the last iterate for user_limit

    _spy_on_solves(monkeypatch, stopped)
    solver = ConstrainedLeastSquares(np.eye(2), C.known_total(2))
    with pytest.raises(ConstraintError, match=r"^constrained inference failed: the solver returned status 'user_limit'$"):
        solver.solve([1.0, 2.0], [3])
    assert solver._x.value is not None


def test_optimal_without_a_point_is_refused(monkeypatch):
    def lost(problem):
        problem.variables()[0].value = None

    _spy_on_solves(monkeypatch, lost)
    with pytest.raises(ConstraintError, match=r"^constrained inference failed: the solver returned status 'optimal'$"):
        ConstrainedLeastSquares(np.eye(2), C.known_total(2)).solve([1.0, 2.0], [3])


def test_an_inaccurate_optimum_is_accepted(monkeypatch):
    def inaccurate(problem):
        assert problem.status == "optimal"
        problem._status = "optimal_inaccurate"

    _spy_on_solves(monkeypatch, inaccurate)
    est = ConstrainedLeastSquares(np.eye(2), C.known_total(2)).solve([1.0, 2.0], [5])
    np.testing.assert_allclose(est, [2.0, 3.0], atol=1e-7)


def test_a_solve_does_not_depend_on_earlier_solves():
    """Each solve starts cold: a seed reproduces a release however many solves came before, and
    an extreme earlier solve does not stop a plain later one."""
    q = C.known_total(3)
    y, counts = np.array([3e6, 1e6, 2e6]), [6e6]
    fresh = ConstrainedLeastSquares(np.eye(3), q).solve(y, counts)
    reused = ConstrainedLeastSquares(np.eye(3), q)
    first = reused.solve([1.3, 2.2, 0.4], [4])
    reused.solve([0.5, 0.2, 0.1], [1e12])
    np.testing.assert_array_equal(reused.solve(y, counts), fresh)
    reused.solve([10.0, -3.0, 2.0], [20])
    np.testing.assert_array_equal(reused.solve([1.3, 2.2, 0.4], [4]), first)


def test_concurrent_solves_on_one_solver_fit_their_own_counts():
    from concurrent.futures import ThreadPoolExecutor

    solver = ConstrainedLeastSquares(np.eye(3), C.known_total(3))
    y = np.array([1.0, 2.0, 3.0])
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda c: (c, solver.solve(y, [c])), [4.0, 20.0] * 20))
    for count, estimate in results:
        np.testing.assert_allclose(estimate.sum(), count, atol=1e-6)
        np.testing.assert_allclose(estimate, y + (count - y.sum()) / 3, atol=1e-6)


def test_the_plan_states_the_change_per_move_and_the_constrained_sensitivity():
    """S = L · Δ_moves(A): the reason names Δ_moves (7 for prefix(8), any move) and S."""
    w, _, policy, q = _prefix_case()  # two records move at most: S = 2 · 7
    reason = make_plan(w, policy, 0.5, "laplace", constraints=q, moves="any").reason
    assert "each move changes the strategy's answers by at most 7 in L1, so S = 14;" in reason
    total = make_plan(W.prefix(8), P.line(8), 0.5, "laplace", constraints=C.known_total(8), moves="any").reason
    assert "each move changes the strategy's answers by at most 7 in L1, so S = 7;" in total  # one record moves
