"""Random number generators and noise samplers (SPEC §10).

Every random function of the library takes ``rng``: a ``numpy.random.Generator`` or an int seed
(``None`` draws fresh entropy). The same seed gives the same output; no global state is used.
"""

from __future__ import annotations

import numbers

import numpy as np

#: What every ``rng`` argument accepts.
RNGLike = np.random.Generator | int | None

#: Name recorded in every release drawn with :func:`laplace`. It is the fast experimental path:
#: textbook floating-point Laplace sampling, which is not hardened against Mironov's (2012)
#: floating-point attack.
NUMPY_LAPLACE = "numpy.random.Generator.laplace (floating point, not hardened)"


def check_rng(rng: RNGLike, name: str = "rng") -> np.random.Generator:
    """Return a ``numpy.random.Generator`` for ``rng`` (a Generator, a non-negative int seed or None)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, numbers.Integral) and not isinstance(rng, (bool, np.bool_)):
        if rng < 0:
            raise ValueError(f"{name} seed must be a non-negative integer, got {rng}")
        return np.random.default_rng(int(rng))
    raise TypeError(
        f"{name} must be a numpy.random.Generator, a non-negative int seed or None, "
        f"got {type(rng).__name__}"
    )


def laplace(scale: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``size`` i.i.d. Laplace(0, ``scale``) values (density exp(-|z|/scale) / (2 scale))."""
    if scale == 0:
        return np.zeros(size)
    return rng.laplace(0.0, scale, size)
