"""Random number generators and noise samplers.

Every random function of the library takes ``rng``:

- ``None`` (the default): the secure path, a :class:`~blowfish_te.secure.SecureRandom`. Noise
  drawn through :func:`add_laplace` is exact discrete Laplace (integer-valued queries) or lattice
  Laplace (real-valued ones); every other draw comes from a numpy Generator seeded from
  :mod:`secrets` and is recorded as not hardened. Releases say which samplers they used.
- a ``numpy.random.Generator`` or a non-negative int seed: the fast experimental path (floating-
  point Laplace). The same seed gives the same output; no global state is used.
"""

from __future__ import annotations

import numbers

import numpy as np

from .secure import SecureRandom

#: What every ``rng`` argument accepts.
RNGLike = np.random.Generator | SecureRandom | int | None
#: What :func:`check_rng` returns and every sampler draws from.
RandomSource = np.random.Generator | SecureRandom

#: Name recorded in every release drawn from a numpy Generator. It is the fast experimental path:
#: textbook floating-point Laplace sampling, which is not hardened against Mironov's (2012)
#: floating-point attack.
NUMPY_LAPLACE = "numpy.random.Generator.laplace (floating point, not hardened)"


def check_rng(rng: RNGLike, name: str = "rng") -> RandomSource:
    """Return the generator for ``rng``: a Generator or SecureRandom as given, a
    ``numpy.random.Generator`` for a non-negative int seed, a new SecureRandom for None."""
    if isinstance(rng, (np.random.Generator, SecureRandom)):
        return rng
    if rng is None:
        return SecureRandom()
    if isinstance(rng, numbers.Integral) and not isinstance(rng, (bool, np.bool_)):
        if rng < 0:
            raise ValueError(f"{name} seed must be a non-negative integer, got {rng}")
        return np.random.default_rng(int(rng))
    raise TypeError(
        f"{name} must be a numpy.random.Generator, a non-negative int seed, a SecureRandom or None, "
        f"got {type(rng).__name__}"
    )


def laplace(scale: float, size: int, rng: np.random.Generator | SecureRandom) -> np.ndarray:
    """Draw ``size`` i.i.d. Laplace(0, ``scale``) values (density exp(-|z|/scale) / (2 scale)).

    Floating point, never hardened (also on a SecureRandom, which records it as such): noise that
    the caller adds to real values cannot be hardened, since the attack reads the low bits of
    value + noise. Releases should use :func:`add_laplace`.
    """
    if scale == 0:
        return np.zeros(size)
    return rng.laplace(0.0, scale, size)


def add_laplace(
    values: np.ndarray, scale: float, rng: np.random.Generator | SecureRandom, *, sensitivity: float, integer: bool
) -> np.ndarray:
    """``values`` + Laplace(``scale``) noise, ε = ``sensitivity`` / ``scale`` for L1 sensitivity Δ.

    On a numpy Generator: ``values + laplace(scale, len(values), rng)`` (floating point). On a
    SecureRandom: exact discrete Laplace DLap(scale) when ``integer`` — the caller's promise that
    ``values`` is an integer vector for every input (e.g. an integer strategy times the counts) —
    else the lattice scheme of :func:`blowfish_te.secure.lattice_laplace`, calibrated with
    ``sensitivity``. Both are ε-DP exactly; see :mod:`blowfish_te.secure` for the arguments.
    A zero scale adds nothing and draws nothing.
    """
    if isinstance(rng, SecureRandom) and scale != 0:
        if integer:
            return rng.integer_laplace(values, scale)
        return rng.lattice_laplace(values, scale, sensitivity)
    noisy = laplace(scale, np.size(values), rng).reshape(np.shape(values))
    noisy += values  # in place: one array of the values' size, not two
    return noisy
