"""Hardened noise for releases on real data (Mironov, CCS 2012): exact discrete Laplace and a lattice scheme.

Textbook Laplace sampling in floating point leaks: the doubles it can output around f(x) depend on
f(x), so the low-order bits of a release can reveal the data (Mironov, CCS 2012). Here no floating-
point operation ever combines the data with the noise:

- :func:`discrete_laplace` draws the two-sided geometric distribution DLap(t) on the integers,
  P(Z = z) = (1 - α) / (1 + α) · α^|z| with α = exp(-1/t), exactly, in integer arithmetic fed by
  :mod:`secrets` (Canonne, Kamath & Steinke, NeurIPS 2020, §5), vectorised over numpy arrays
  (0.3-0.6 µs a draw); OpenDP's sampler (the ``[secure]`` extra, ``backend="opendp"``) is the
  independent implementation to choose instead, about 8 µs a draw.
- :func:`integer_laplace` adds it to integer-valued queries: the answers are integers.
- :func:`lattice_laplace` releases real-valued queries on a grid Λℤ, Λ a power of two.
- :class:`SecureRandom` is what ``rng=None`` means in the library.

Why a lattice rather than Mironov's snapping mechanism: snapping needs a public bound B on the
answers (it clamps them to [-B, B]), a correctly rounded logarithm (Python's ``math.log`` is not
guaranteed to be one), and its privacy loss exceeds ε by a term that grows with B/λ (Mironov
2012, Thm 1), λ the noise scale. The lattice scheme needs none of these and its ε is exact, paid
for by a noise scale at most 1 + 2^-20 times larger.

Importing OpenDP's sampler turns on its ``"contrib"`` feature flag (``opendp.prelude.enable_features``).
"""

from __future__ import annotations

import functools
import math
import numbers
import secrets
from collections import Counter
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_int

__all__ = [
    "BACKENDS",
    "SecureRandom",
    "default_backend",
    "discrete_laplace",
    "integer_laplace",
    "lattice_laplace",
    "lattice_spacing",
    "opendp_available",
    "sampler_name",
]

#: Implementations of the exact discrete Laplace sampler.
BACKENDS = ("builtin", "opendp")

#: Largest scale :func:`discrete_laplace` accepts: draws beyond ±2^63 (int64) then have
#: probability below exp(-2^11).
MAX_SCALE = 2**52

#: A lattice spacing Λ with d·Λ <= 2^-LATTICE_BITS · Δ: the noise scale grows by at most 2^-20.
LATTICE_BITS = 20

_BACKEND_LABELS = {"builtin": "blowfish_te builtin, exact, secrets", "opendp": "opendp, exact"}
_KINDS = {"integer": "discrete Laplace on integers", "lattice": "lattice Laplace (2^k grid + discrete Laplace)"}


@functools.cache
def opendp_available() -> bool:
    """Whether OpenDP (the ``[secure]`` extra) can be imported."""
    try:
        import opendp.prelude  # noqa: F401
    except ImportError:
        return False
    return True


def default_backend() -> str:
    """``"builtin"``: exact like OpenDP's sampler and some 20 times faster (``benchmarks/bench_secure.py``)."""
    return "builtin"


def _check_backend(backend: str | None) -> str:
    if backend is None:
        return default_backend()
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    if backend == "opendp" and not opendp_available():
        raise ValueError("backend='opendp' needs OpenDP: pip install 'blowfish_te[secure]'")
    return backend


def sampler_name(kind: str, backend: str) -> str:
    """The name releases record for a hardened sampler: ``kind`` is "integer" or "lattice"."""
    return f"{_KINDS[kind]} ({_BACKEND_LABELS[backend]})"


def _check_scale(scale, name: str = "scale", maximum: int | None = MAX_SCALE) -> Fraction:
    """``scale`` as an exact Fraction: a finite real number in [0, ``maximum``]."""
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, numbers.Real):
        raise TypeError(f"{name} must be a real number >= 0, got {scale!r} ({type(scale).__name__})")
    if isinstance(scale, numbers.Rational):
        exact = Fraction(int(scale.numerator), int(scale.denominator))
    elif math.isfinite(float(scale)):
        exact = Fraction(float(scale))  # exact for every binary float type
    else:
        raise ValueError(f"{name} must be finite, got {scale!r}")
    if exact < 0:
        raise ValueError(f"{name} must be >= 0, got {scale!r}")
    if maximum is not None and exact > maximum:
        raise ValueError(f"{name} must be at most 2**52 (draws are 64-bit integers), got {scale!r}")
    return exact


# -- the exact sampler ------------------------------------------------------------------------
#
# Canonne, Kamath & Steinke (NeurIPS 2020, §5, Algorithms 1-2) run on whole arrays: every lane is
# an independent run of their algorithm, fed by independent uniform words from ``secrets``, and a
# loop step draws for the lanes still running. Lanes whose integers would leave 64 bits (with
# probability below exp(-100)) finish in Python integers, so no draw is ever approximated.

#: Numerators up to 2^SCALE_BITS keep every integer of the sampler below 2^64 (see _bounded).
SCALE_BITS = 56


def _words(count: int, bits: int) -> np.ndarray:
    """``count`` independent uniform ``bits``-bit words (32 or 64) from :mod:`secrets`, as uint64."""
    dtype = np.uint32 if bits == 32 else np.uint64
    return np.frombuffer(secrets.token_bytes(count * bits // 8), dtype=dtype).astype(np.uint64)


def _uniform_words(modulus: int, count: int) -> tuple[np.ndarray, int]:
    """``count`` words w uniform on [0, q·modulus) and q = ⌊2^b / modulus⌋ (b = 32 or 64), by rejection.

    ⌊w / q⌋ is then uniform on {0, ..., modulus - 1}, and w < a·q holds exactly when ⌊w / q⌋ < a.
    """
    bits = 32 if modulus <= 2**32 else 64
    q = 2**bits // modulus
    limit = q * modulus
    out = _words(count, bits)
    if limit < 2**bits:
        bad = np.flatnonzero(out >= limit)
        while bad.size:  # each word is refused with probability below 1/2
            out[bad] = _words(bad.size, bits)
            bad = bad[out[bad] >= limit]
    return out, q


def _uniform_below(modulus: int, count: int) -> np.ndarray:
    """``count`` independent integers uniform on {0, ..., modulus - 1} (1 <= modulus <= 2^64), as uint64."""
    words, q = _uniform_words(modulus, count)
    return words // np.uint64(q)


def _bernoulli_exp_scalar(num: int, den: int, k: int) -> bool:
    """True with probability exp(-num/den), for integers 0 <= num <= den (CKS20, Algorithm 1),
    continuing a run that has reached step ``k``.

    Draw Bernoulli(γ/k) for k = 1, 2, ... until one fails; K, the first failing k, satisfies
    P(K > k) = γ^k / k!, so P(K odd) = Σ_j (-γ)^j / j! = exp(-γ).
    """
    while secrets.randbelow(den * k) < num:
        k += 1
    return k % 2 == 1


def _bernoulli_exp(num: np.ndarray | int, den: int, count: int) -> np.ndarray:
    """``count`` independent Bernoulli(exp(-num_i/den)) draws, num_i <= den (one per lane; an int
    ``num`` is shared; den <= 2^56): :func:`_bernoulli_exp_scalar` on every lane at once."""
    num = np.broadcast_to(np.asarray(num, dtype=np.uint64), (count,))
    out = np.empty(count, dtype=bool)
    lanes = np.arange(count)
    k = 1
    while lanes.size and den * k <= 2**64:
        words, q = _uniform_words(den * k, lanes.size)
        a = num[lanes]
        going = words < a * np.uint64(q)  # ⌊w/q⌋ < a
        if k == 1:  # a = den continues surely; a·q = 2^64 wraps to 0 when den divides 2^64
            going |= a == den
        out[lanes[~going]] = k % 2 == 1
        lanes = lanes[going]
        k += 1
    for lane in lanes.tolist():  # den·k > 2^64: P(reaching here) <= 1/k!, k > 2^8
        out[lane] = _bernoulli_exp_scalar(int(num[lane]), den, k)
    return out


def _geometric_exp1(count: int) -> np.ndarray:
    """``count`` draws of V with P(V = v) = (1 - 1/e)·e^-v: successes of Bernoulli(1/e) before a failure."""
    v = np.zeros(count, dtype=np.int64)
    lanes = np.arange(count)
    while lanes.size:
        lanes = lanes[_bernoulli_exp(1, 1, lanes.size)]
        v[lanes] += 1
    return v


def _bounded(scale: Fraction) -> Fraction:
    """``scale`` (at most 2^52) itself when its numerator is at most 2^56, else the smallest multiple of a power of
    two that is >= scale and has such a numerator: larger by a factor below 1 + 2^-54, so the
    noise only grows. Every double has a numerator below 2^53 and is kept exactly."""
    if scale.numerator <= 2**SCALE_BITS:
        return scale
    shift = SCALE_BITS - 1 - (scale.numerator.bit_length() - scale.denominator.bit_length())
    scaled = scale * Fraction(2) ** shift  # in (2^54, 2^56)
    return Fraction(-(-scaled.numerator // scaled.denominator)) / Fraction(2) ** shift


def _builtin_draws(scale: Fraction, size: int) -> np.ndarray:
    """``size`` draws of DLap(num/den) (CKS20, Algorithm 2) in integer arithmetic with :mod:`secrets`.

    X = U + num·V, with U uniform on {0..num-1} kept with probability exp(-U/num) and
    P(V = v) ∝ exp(-v), is geometric: P(X = x) ∝ exp(-x/num). Y = ⌊X/den⌋ is then geometric with
    P(Y = y) ∝ exp(-y·den/num); a random sign, rejecting "-0", gives P(±y) ∝ exp(-|y|/t), t = num/den.
    Accepted lanes are i.i.d., so taking the first ``size`` of them in lane order is exact.
    """
    num, den = scale.numerator, scale.denominator
    parts, missing = [], size
    while missing:
        lanes = 2 * missing + 64  # about 0.63 of the lanes pass U, at least half of those the sign
        u = _uniform_below(num, lanes)
        u = u[_bernoulli_exp(u, num, lanes)]
        v = _geometric_exp1(u.size)
        wide = v >= 2**63 // 2**SCALE_BITS - 1  # u + num·v may leave int64: P(v >= 127) = e^-127
        x = u.astype(np.int64) + np.int64(num) * np.where(wide, 0, v)
        y = x // den if den < 2**63 else np.zeros(u.size, dtype=np.int64)
        if wide.any():
            y = y.astype(object)
            y[wide] = [(int(a) + num * int(b)) // den for a, b in zip(u[wide], v[wide])]
        negative = np.unpackbits(np.frombuffer(secrets.token_bytes(-(-u.size // 8)), dtype=np.uint8))[: u.size] == 1
        z = np.where(negative, -y, y)[~(negative & (y == 0))][:missing]
        parts.append(np.asarray(z, dtype=np.int64))  # raises for |z| >= 2^63: probability below exp(-2^11)
        missing -= parts[-1].size
    return np.concatenate(parts)


@functools.lru_cache(maxsize=64)
def _opendp_sampler(scale: float):
    """OpenDP's vector Laplace measurement on int64, which samples the discrete Laplace exactly
    (its proof: docs.opendp.org, ``make_laplace``). Applied to zeros it returns the noise."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=scale)


def _float_at_least(value: Fraction) -> float:
    """The smallest double >= ``value`` (OpenDP takes its scale as a double)."""
    out = float(value)
    return out if Fraction(out) >= value else math.nextafter(out, math.inf)


def discrete_laplace(scale: float | Fraction, size: int, backend: str | None = None) -> np.ndarray:
    """``size`` i.i.d. draws of the discrete Laplace DLap(``scale``) as int64, exactly.

    P(Z = z) = (1 - α) / (1 + α) · α^|z|, α = exp(-1/scale) (the two-sided geometric distribution).
    ``scale`` is any real in [0, 2^52], taken exactly (a ``Fraction`` gives a rational scale
    num/den), with one exception that only adds noise: the builtin backend rounds a rational whose
    numerator exceeds 2^56 (never a double) up by a factor below 1 + 2^-54, and the opendp backend
    receives the smallest double >= scale. ``backend``: ``"builtin"`` (the default, vectorised,
    0.3-0.6 µs a draw) or ``"opendp"`` (about 8 µs a draw; ``benchmarks/bench_secure.py``).

    Privacy (Ghosh, Roughgarden & Sundararajan 2009): for integer-valued q with ‖q(x) - q(x')‖₁ <= Δ,
    q(x) + DLap(Δ/ε)^d is ε-DP, since the density ratio is at most exp(‖q(x) - q(x')‖₁ / scale).
    """
    exact = _check_scale(scale)
    size = check_int(size, "size", minimum=0)
    backend = _check_backend(backend)
    if exact == 0 or size == 0:
        return np.zeros(size, dtype=np.int64)
    if backend == "opendp":
        draws = _opendp_sampler(_float_at_least(exact))([0] * size)
        return np.array(draws, dtype=np.int64)
    return _builtin_draws(_bounded(exact), size)


# -- releases ---------------------------------------------------------------------------------


def _as_values(values) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        raise ValueError(f"values must be a 1-D array of real numbers, got shape {arr.shape} and dtype {arr.dtype}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError("values must be finite")
    return arr


def _shifted(points: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """points + noise (integer-valued doubles and int64) as the exact integer sum, returned as
    doubles: each output is the correctly rounded value of one exact integer, so it is post-
    processing of the exact sum. Sums in int64 where no term can overflow, in Python ints elsewhere."""
    narrow = (np.abs(points) < 2.0**62) & (np.abs(noise) < 2**62)
    out = np.empty(points.size, dtype=np.float64)
    out[narrow] = points[narrow].astype(np.int64) + noise[narrow]  # int64 -> double rounds to nearest
    wide = np.flatnonzero(~narrow)
    out[wide] = [float(int(points[i]) + int(noise[i])) for i in wide.tolist()]
    return out


def integer_laplace(values: ArrayLike, scale: float | Fraction, backend: str | None = None) -> np.ndarray:
    """``values + DLap(scale)`` for integer-valued ``values``, as float64 integers.

    Privacy: if ``values`` = q(x) is an integer vector for every input and ‖q(x) - q(x')‖₁ <= Δ for
    neighbours, scale = Δ/ε gives ε-DP exactly (see :func:`discrete_laplace`). The sum is formed
    in exact integer arithmetic; non-integral ``values`` are refused (no lattice applies).
    """
    arr = _as_values(values)
    if arr.dtype.kind == "f" and not np.array_equal(arr, np.round(arr)):
        raise ValueError("values must be integers for integer_laplace; use lattice_laplace for real values")
    noise = discrete_laplace(scale, arr.size, backend)
    return _shifted(arr.astype(np.float64) if arr.dtype.kind == "f" else arr, noise)


def lattice_spacing(sensitivity: float | Fraction, size: int) -> int:
    """The exponent e of Λ = 2^e: the largest power of two with ``size`` · Λ <= 2^-20 · Δ."""
    delta = _check_scale(sensitivity, "sensitivity", maximum=None)
    size = check_int(size, "size", minimum=1)
    if delta == 0:
        raise ValueError("sensitivity must be > 0 for a lattice release")
    target = delta / (size << LATTICE_BITS)
    e = target.numerator.bit_length() - target.denominator.bit_length()
    return e if Fraction(2) ** e <= target else e - 1


def lattice_laplace(values: ArrayLike, scale: float | Fraction, sensitivity: float | Fraction, backend: str | None = None) -> np.ndarray:
    """Release real-valued ``values`` (d of them) with Laplace-like noise on the grid Λℤ, exactly ε-DP.

    With Λ = 2^e from :func:`lattice_spacing` (d·Λ <= 2^-20·Δ):

    1. k = round(v / Λ), coordinatewise (exact: Λ is a power of two); values are first clamped to
       ±min(2^1000·Λ, 2^1023), a contraction that keeps v/Λ finite and costs no privacy;
    2. z = k + DLap(t) on the integers, t = scale/Λ + d·scale/Δ = (Δ + d·Λ) / (Λ·ε), ε = Δ/scale;
    3. output z·Λ (the correctly rounded double of an exact integer times a power of two).

    Privacy: rounding moves each coordinate by at most Λ/2, so for neighbours ‖k(x) - k(x')‖₁ <=
    (Δ + d·Λ)/Λ in grid units, and DLap(t) with t = that sensitivity / ε makes k + Z ε-DP
    (:func:`discrete_laplace`); step 3 is post-processing. The noise scale, in value units,
    is scale · (1 + d·Λ/Δ) <= scale · (1 + 2^-20). As everywhere, Δ must bound the sensitivity
    of the ``values`` as computed.
    """
    arr = _as_values(values).astype(np.float64)
    exact = _check_scale(scale)
    delta = _check_scale(sensitivity, "sensitivity", maximum=None)
    if exact == 0 or arr.size == 0:
        return arr.copy()
    e = lattice_spacing(delta, arr.size)
    t = exact / Fraction(2) ** e + arr.size * exact / delta
    if t > MAX_SCALE:
        raise ValueError(
            f"the lattice noise scale {float(t):.3g} (in units of 2^{e}) exceeds 2**52: "
            "scale / sensitivity (1/epsilon) or the number of values is too large"
        )
    bound = np.ldexp(1.0, min(1000 + e, 1023))
    points = np.rint(np.ldexp(np.clip(arr, -bound, bound), -e))
    return np.ldexp(_shifted(points, discrete_laplace(t, arr.size, backend)), e)


# -- rng=None ---------------------------------------------------------------------------------


class SecureRandom:
    """What ``rng=None`` gives: hardened noise for releases, honest records of every draw.

    - :meth:`integer_laplace` and :meth:`lattice_laplace` (reached through
      :func:`blowfish_te.noise.add_laplace`) use the exact samplers of this module;
    - any other method of ``numpy.random.Generator`` (``laplace``, ``gumbel``, ``integers``, ...)
      works as usual on a generator seeded with 128 bits from :mod:`secrets`, and is recorded as
      not hardened (floating-point Laplace, the Gumbel trick of the exponential mechanism, ...).

    ``backend`` chooses the exact sampler (see :func:`discrete_laplace`). Every draw is tallied by
    sampler name; :meth:`summary` says which samplers a release used and whether all of them were
    hardened. Not reproducible, by design: use a seed for experiments.
    """

    def __init__(self, backend: str | None = None):
        self.backend = _check_backend(backend)
        self._numpy = np.random.default_rng(secrets.randbits(128))
        self._tally: Counter[str] = Counter()
        self._hardened = {sampler_name(kind, self.backend) for kind in _KINDS}

    def integer_laplace(self, values: ArrayLike, scale: float | Fraction) -> np.ndarray:
        """:func:`integer_laplace` with this generator's backend, recorded."""
        self._tally[sampler_name("integer", self.backend)] += 1
        return integer_laplace(values, scale, self.backend)

    def lattice_laplace(self, values: ArrayLike, scale: float | Fraction, sensitivity: float | Fraction) -> np.ndarray:
        """:func:`lattice_laplace` with this generator's backend, recorded."""
        self._tally[sampler_name("lattice", self.backend)] += 1
        return lattice_laplace(values, scale, sensitivity, self.backend)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._numpy, name)
        if callable(attr):
            self._tally[f"numpy.random.Generator.{name} (secrets-seeded, not hardened)"] += 1
        return attr

    def tally(self) -> Counter:
        """A copy of the draw counts per sampler name (pass it to :meth:`summary` later)."""
        return Counter(self._tally)

    def summary(self, since: Counter) -> tuple[str, bool]:
        """The samplers used since the ``since`` tally ("; "-joined, or "none") and whether every
        one of them was hardened."""
        used = sorted(name for name, count in self._tally.items() if count > since[name])
        return "; ".join(used) or "none", all(name in self._hardened for name in used)

    def __repr__(self) -> str:
        return f"SecureRandom(backend={self.backend!r})"
