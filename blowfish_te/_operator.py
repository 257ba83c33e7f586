"""Implicit real linear maps with the interface of ``scipy.sparse.linalg.LinearOperator``.

Importing ``scipy.sparse.linalg`` loads ``scipy.linalg`` and its LAPACK wrappers: about 45 ms, a
quarter of ``import numpy, scipy.sparse``, which a first release (an identity workload, Laplace
noise) never uses. :class:`LinearMap` gives workloads and their Gram operators the same interface
without that import:

* products ``A @ x``, ``A.dot(x)``, ``A(x)``, ``A * x`` and ``x @ A`` with vectors and matrices, and
  ``matvec``/``rmatvec``/``matmat``/``rmatmat`` with scipy's shapes and checks;
* ``A.T``, ``A.H``, ``A.adjoint()``, ``A.transpose()`` (the maps are real);
* scipy's solvers (``lsmr``, ``cg``, ``eigsh``, ...) take it as they take any object with ``shape``
  and ``matvec`` (``aslinearoperator``);
* algebra with other operators (sums, products with operators, scalar multiples, powers) goes
  through :meth:`LinearMap.as_linear_operator`, a scipy ``LinearOperator`` built on first use.
"""

from __future__ import annotations

import numpy as np


def _is_dense_operand(x) -> bool:
    """An operand taken as an array (vector or matrix), not as an operator or a scalar."""
    return not np.isscalar(x) and not hasattr(x, "matvec")


def _scipy_operand(x):
    """``x`` as scipy's algebra takes it: linear maps as scipy operators, anything else as it is."""
    return x.as_linear_operator() if isinstance(x, LinearMap) else x


def _vector_product(x, size: int, out_size: int, product):
    """``product(x)`` for a vector of ``size`` entries, shaped as ``x`` was ((size,) or (size, 1))."""
    x = np.asarray(x)
    if x.shape not in ((size,), (size, 1)):
        raise ValueError(f"dimension mismatch: a vector of {size} entries needed, got shape {x.shape}")
    y = np.asarray(product(x))
    return y.reshape(out_size) if x.ndim == 1 else y.reshape(out_size, 1)


class LinearMap:
    """A real ``shape == (m, n)`` linear map given by block products.

    Subclasses implement ``_matmat`` and ``_rmatmat``: dense ``(n, b)`` blocks in, ``(m, b)``
    blocks out (and ``(m, b)`` in, ``(n, b)`` out).
    """

    ndim = 2
    #: numpy's binary operators defer to this class (``x @ A`` reaches ``__rmatmul__``).
    __array_ufunc__ = None

    def __init__(self, shape, dtype=np.float64):
        rows, cols = (int(n) for n in shape)
        if rows < 0 or cols < 0:
            raise ValueError(f"shape must hold two sizes >= 0, got {tuple(shape)}")
        self.shape = (rows, cols)
        self.dtype = np.dtype(dtype)

    # -- the four products, shapes as scipy gives them -----------------------------------------
    def matvec(self, x):
        """A x for a vector of ``n`` entries (shape ``(n,)`` or ``(n, 1)``, returned alike)."""
        return _vector_product(x, self.shape[1], self.shape[0], self._matvec)

    def rmatvec(self, y):
        """Aᵀ y for a vector of ``m`` entries."""
        return _vector_product(y, self.shape[0], self.shape[1], self._rmatvec)

    def matmat(self, x):
        """A X for an ``(n, b)`` block."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[0] != self.shape[1]:
            raise ValueError(f"dimension mismatch: an ({self.shape[1]}, b) block needed, got shape {x.shape}")
        return self._matmat(x)

    def rmatmat(self, y):
        """Aᵀ Y for an ``(m, b)`` block."""
        y = np.asarray(y)
        if y.ndim != 2 or y.shape[0] != self.shape[0]:
            raise ValueError(f"dimension mismatch: an ({self.shape[0]}, b) block needed, got shape {y.shape}")
        return self._rmatmat(y)

    def _matvec(self, x):
        return self._matmat(np.asarray(x).reshape(-1, 1)).reshape(-1)

    def _rmatvec(self, y):
        return self._rmatmat(np.asarray(y).reshape(-1, 1)).reshape(-1)

    def _matmat(self, x):
        raise NotImplementedError(f"{type(self).__name__} does not implement _matmat")

    def _rmatmat(self, y):
        raise NotImplementedError(f"{type(self).__name__} does not implement _rmatmat")

    # -- operator syntax -----------------------------------------------------------------------
    def dot(self, x):
        """A x for a vector or a block; with an operator or a scalar, scipy's algebra."""
        if not _is_dense_operand(x):
            return self.as_linear_operator().dot(_scipy_operand(x))
        x = np.asarray(x)
        if x.ndim == 1 or (x.ndim == 2 and x.shape[1] == 1):
            return self.matvec(x)
        return self.matmat(x)  # a block, or refused with the block's message

    def __matmul__(self, other):
        if np.isscalar(other):
            raise ValueError("scalar operands are not allowed with '@', use '*' instead")
        return self.dot(other)

    def __rmatmul__(self, other):
        if np.isscalar(other):
            raise ValueError("scalar operands are not allowed with '@', use '*' instead")
        if not _is_dense_operand(other):
            return self.as_linear_operator().__rmatmul__(_scipy_operand(other))
        other = np.asarray(other)
        if other.ndim == 1:
            return self.rmatvec(other)
        if other.ndim == 2:
            return self.rmatmat(other.T).T
        raise ValueError(f"expected a vector or a 2-D block, got an array of shape {other.shape}")

    def __call__(self, x):
        return self.dot(x)

    def __mul__(self, x):
        return self.dot(x)

    def __rmul__(self, x):
        return self.as_linear_operator().__rmul__(_scipy_operand(x))

    def __truediv__(self, x):
        return self.as_linear_operator() / x

    def __pow__(self, p):
        return self.as_linear_operator() ** p

    def __add__(self, x):
        return self.as_linear_operator() + _scipy_operand(x)

    def __radd__(self, x):
        return _scipy_operand(x) + self.as_linear_operator()

    def __sub__(self, x):
        return self.as_linear_operator() - _scipy_operand(x)

    def __rsub__(self, x):
        return _scipy_operand(x) - self.as_linear_operator()

    def __neg__(self):
        return -self.as_linear_operator()

    def adjoint(self) -> LinearMap:
        """Aᵀ (the map is real, so the adjoint is the transpose)."""
        return self._adjoint()

    H = property(adjoint)

    def transpose(self) -> LinearMap:
        return self._adjoint()

    T = property(transpose)

    def _adjoint(self) -> LinearMap:
        return _Adjoint(self)

    def as_linear_operator(self):
        """This map as a ``scipy.sparse.linalg.LinearOperator`` with the same four products."""
        from scipy.sparse.linalg import LinearOperator

        return LinearOperator(self.shape, matvec=self.matvec, rmatvec=self.rmatvec, matmat=self.matmat,
                              rmatmat=self.rmatmat, dtype=self.dtype)

    def __repr__(self) -> str:
        return f"<{self.shape[0]}x{self.shape[1]} {type(self).__name__} with dtype={self.dtype}>"


class _Adjoint(LinearMap):
    """Aᵀ, through the block products of A."""

    def __init__(self, base: LinearMap):
        self.base = base
        super().__init__((base.shape[1], base.shape[0]), base.dtype)

    def _matmat(self, y):
        return self.base._rmatmat(y)

    def _rmatmat(self, x):
        return self.base._matmat(x)

    def _adjoint(self) -> LinearMap:
        return self.base


class FunctionMap(LinearMap):
    """A map given by its block product (and the transpose's, for non-symmetric maps)."""

    def __init__(self, shape, matmat, rmatmat=None):
        super().__init__(shape)
        self._forward, self._backward = matmat, rmatmat

    def _matmat(self, x):
        return self._forward(x)

    def _rmatmat(self, y):
        if self._backward is None:
            raise NotImplementedError("this map has no transpose product")
        return self._backward(y)
