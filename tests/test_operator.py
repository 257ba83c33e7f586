"""LinearMap against its dense twin: every product and operator form scipy's LinearOperator offers
gives what the dense matrix gives, and scipy's solvers and algebra take it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse.linalg as spla
from hypothesis import given, settings
from hypothesis import strategies as st

from blowfish_te import workloads
from blowfish_te._operator import FunctionMap, LinearMap


class _Dense(LinearMap):
    """A map defined by a dense matrix, through block products only."""

    def __init__(self, matrix):
        self.matrix = np.asarray(matrix, dtype=np.float64)
        super().__init__(self.matrix.shape)

    def _matmat(self, x):
        return self.matrix @ x

    def _rmatmat(self, y):
        return self.matrix.T @ y


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 6), n=st.integers(1, 6), b=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_every_product_form_is_the_dense_one(m, n, b, seed):
    gen = np.random.default_rng(seed)
    a = gen.integers(-3, 4, (m, n)).astype(float)
    op = _Dense(a)
    x, y = gen.integers(-5, 6, n).astype(float), gen.integers(-5, 6, m).astype(float)
    xb, yb = gen.integers(-5, 6, (n, b)).astype(float), gen.integers(-5, 6, (m, b)).astype(float)
    for got, want in [
        (op.matvec(x), a @ x), (op.matvec(x[:, None]), (a @ x)[:, None]), (op.rmatvec(y), a.T @ y),
        (op.rmatvec(y[:, None]), (a.T @ y)[:, None]), (op.matmat(xb), a @ xb), (op.rmatmat(yb), a.T @ yb),
        (op @ x, a @ x), (op @ xb, a @ xb), (op.dot(x), a @ x), (op(x), a @ x), (op * xb, a @ xb),
        (y @ op, y @ a), (yb.T @ op, yb.T @ a), (op.T @ y, a.T @ y), (op.H @ yb, a.T @ yb),
        (op.adjoint().T @ x, a @ x), (op.transpose().rmatvec(x), a @ x),
    ]:
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)  # small integers: exact in float64
    assert op.T.T is op and op.shape == (m, n) and op.ndim == 2 and op.dtype == np.float64


def test_algebra_with_scalars_and_operators_goes_through_scipy():
    a = np.arange(6.0).reshape(2, 3)
    b = np.ones((2, 3))
    op, other = _Dense(a), _Dense(b)
    x = np.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose((2 * op) @ x, 2 * a @ x)
    np.testing.assert_allclose((op * 3) @ x, 3 * a @ x)
    np.testing.assert_allclose((op / 2) @ x, a @ x / 2)
    np.testing.assert_allclose((op + other) @ x, (a + b) @ x)
    np.testing.assert_allclose((op - other) @ x, (a - b) @ x)
    np.testing.assert_allclose((-op) @ x, -a @ x)
    np.testing.assert_allclose((op.T @ op) @ x, a.T @ a @ x)  # an operator times an operator
    square = _Dense(np.array([[1.0, 2.0], [0.0, 1.0]]))
    np.testing.assert_allclose((square**3) @ np.ones(2), np.linalg.matrix_power(square.matrix, 3) @ np.ones(2))
    assert isinstance(op.as_linear_operator(), spla.LinearOperator)


def test_scipy_solvers_take_a_workload_as_it_is():
    w = workloads.prefix(12)
    gen = np.random.default_rng(3)
    y = gen.normal(size=12)
    want = np.linalg.lstsq(w.dense(), y, rcond=None)[0]
    np.testing.assert_allclose(spla.lsmr(w, y, atol=1e-14, btol=1e-14, maxiter=200)[0], want, atol=1e-8)
    gram = w.gram()
    np.testing.assert_allclose(spla.cg(gram, w.rmatvec(y), rtol=1e-12, atol=0)[0], want, atol=1e-6)
    values = spla.eigsh(gram.as_linear_operator(), k=2, which="LA", return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(values), np.sort(np.linalg.eigvalsh(w.gram_matrix()))[-2:], rtol=1e-8)


def test_wrong_shapes_and_scalars_are_refused_with_the_expected_size():
    op = _Dense(np.ones((2, 3)))
    with pytest.raises(ValueError, match="a vector of 3 entries"):
        op.matvec(np.ones(2))
    with pytest.raises(ValueError, match="a vector of 2 entries"):
        op.rmatvec(np.ones(3))
    with pytest.raises(ValueError, match=r"an \(3, b\) block"):
        op @ np.ones((2, 2))
    with pytest.raises(ValueError, match=r"an \(3, b\) block"):
        op @ np.ones((3, 2, 2))
    with pytest.raises(ValueError, match="use '\\*'"):
        op @ 2.0
    with pytest.raises(ValueError, match="use '\\*'"):
        2.0 @ op
    with pytest.raises(ValueError, match="shape must hold two sizes"):
        LinearMap((2, -1))
    with pytest.raises(NotImplementedError, match="no transpose product"):
        FunctionMap((2, 2), lambda x: x).rmatvec(np.ones(2))


def test_a_workload_keeps_its_own_message_for_a_wrong_shape():
    w = workloads.identity(5)
    with pytest.raises(ValueError, match="matvec of .* needs a vector of 5 entries, one per cell"):
        w @ np.ones(4)
    with pytest.raises(ValueError, match=r"matmat of .* needs a \(5, n\) block"):
        w @ np.ones((5, 2, 2))
