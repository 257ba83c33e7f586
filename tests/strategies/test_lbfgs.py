"""Projected L-BFGS over x >= 0: against scipy's NNLS, the bounds held exactly, the stopping rules."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import nnls

from blowfish_te.strategies.lbfgs import minimize_nonnegative

pytestmark = pytest.mark.core


def least_squares(x, a, b):
    r = a @ x - b
    return 0.5 * float(r @ r), a.T @ r


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_matches_nnls_on_random_problems(seed):
    gen = np.random.default_rng(seed)
    m, n = gen.integers(5, 40), gen.integers(2, 30)
    a = gen.normal(size=(m, n)) + 0.1 * np.eye(m, n)
    b = gen.normal(size=m) * 3
    exact, _ = nnls(a, b)
    found = minimize_nonnegative(least_squares, gen.random(n), (a, b), maxiter=5000, tol=0.0)
    assert found.x.min() >= 0.0
    best = least_squares(exact, a, b)[0]
    assert found.fun <= best + 1e-7 * max(1.0, best)
    # on a strictly convex problem the minimiser is unique
    if np.linalg.matrix_rank(a) == n:
        np.testing.assert_allclose(found.x, exact, atol=1e-4 * max(1.0, np.abs(exact).max()))


def test_bounds_are_met_exactly_where_the_unconstrained_minimum_is_negative():
    target = np.array([2.0, -1.0, 0.5, -3.0])
    found = minimize_nonnegative(lambda x: (float(((x - target) ** 2).sum()), 2 * (x - target)), np.ones(4), tol=0.0)
    np.testing.assert_allclose(found.x, [2.0, 0.0, 0.5, 0.0], atol=1e-9)
    assert found.x[1] == 0.0 and found.x[3] == 0.0


def test_start_is_projected_and_maxiter_respected():
    calls = []

    def fun(x):
        calls.append(x.copy())
        return float(x @ x), 2 * x

    found = minimize_nonnegative(fun, np.array([-5.0, 3.0]), maxiter=1, tol=0.0)
    assert calls[0].tolist() == [0.0, 3.0]
    assert found.iterations == 1


def test_stops_when_progress_is_below_tolerance():
    # a badly conditioned quadratic whose minimum is far: progress per 50 iterations stays large
    # at tol = 0, and a loose tolerance stops much earlier
    scales = np.logspace(0, 4, 50)
    fun = lambda x: (float((scales * (x - 1) ** 2).sum()), 2 * scales * (x - 1))  # noqa: E731
    loose = minimize_nonnegative(fun, np.zeros(50), maxiter=3000, tol=0.5, window=5)
    strict = minimize_nonnegative(fun, np.zeros(50), maxiter=3000, tol=0.0, window=5)
    assert loose.iterations < strict.iterations
    assert strict.fun < 1e-10


def test_refuses_a_non_finite_start():
    with pytest.raises(ValueError, match="not finite at the starting point"):
        minimize_nonnegative(lambda x: (np.inf, x), np.ones(3))


def test_an_upper_bound_is_met_exactly_and_held_where_the_gradient_points_out():
    target = np.array([2.0, -1.0, 5.0, 0.5])
    fun = lambda x: (float(((x - target) ** 2).sum()), 2 * (x - target))  # noqa: E731
    found = minimize_nonnegative(fun, np.array([9.0, 9.0, 0.0, 0.0]), tol=0.0, upper=3.0)
    np.testing.assert_allclose(found.x, [2.0, 0.0, 3.0, 0.5], atol=1e-9)
    assert found.x[2] == 3.0 and found.x[1] == 0.0
    # the start is projected onto the box
    calls = []
    minimize_nonnegative(lambda x: calls.append(x.copy()) or fun(x), np.array([9.0, -1.0, 1.0, 1.0]), maxiter=1, upper=3.0)
    assert calls[0].tolist() == [3.0, 0.0, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"^upper must be > 0, got 0\.0$"):
        minimize_nonnegative(fun, np.ones(4), upper=0.0)
