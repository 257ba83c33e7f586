"""Input checks shared by the public API.

Every check names the argument, says what was wrong and what is allowed, and raises
``TypeError`` for a value of the wrong kind and ``ValueError`` for a value out of range.
"""

from __future__ import annotations

import math
import numbers
from typing import TypeGuard

import numpy as np

#: ε outside [MIN_EPSILON, MAX_EPSILON] is refused: noise scales Δ/ε (Δ <= 2**53) and their squares
#: (analytic errors, AHP's costs) must stay inside float64 range. No privacy analysis needs more.
MIN_EPSILON, MAX_EPSILON = 1e-100, 1e100

#: Most cells a domain may have where arrays of its size are built (histograms, strategies over
#: cells, listed edges): an int64 histogram of 2**31 cells takes 16 GiB, and keys u·(K + 1) + v
#: of cell pairs stay exact in int64.
MAX_CELLS = 2**31
#: Most cells a domain described without arrays of its size may have (marginal workloads, and
#: policies whose edges are offsets or ⊥): flat cell indices and K + 1 stay exact in int64.
MAX_DOMAIN_CELLS = 2**62


def check_int(value, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as an ``int``; reject bools, floats and values outside [minimum, maximum]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be an integer <= {maximum}, got {value}")
    return value


def check_size(value, name: str = "k") -> int:
    """Return a number of cells: an integer in [1, MAX_CELLS]."""
    return check_int(value, name, minimum=1, maximum=MAX_CELLS)


def check_shape(shape, name: str = "shape", maximum: int = MAX_CELLS) -> tuple[int, ...]:
    """Return a domain shape as a tuple of positive ints; an int ``k`` means ``(k,)``. At most
    ``maximum`` cells: :data:`MAX_CELLS` where arrays of the domain's size are built, up to
    :data:`MAX_DOMAIN_CELLS` for structures that never build one."""
    if isinstance(shape, numbers.Integral) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    try:
        axes = tuple(shape)
    except TypeError:
        raise TypeError(
            f"{name} must be a positive integer or a tuple of positive integers, got {shape!r}"
        ) from None
    if not axes:
        raise ValueError(f"{name} must have at least one axis, got an empty shape ()")
    for i, k in enumerate(axes):
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
            raise TypeError(f"{name}[{i}] must be an integer, got {k!r} in {shape!r}")
        if k < 1:
            raise ValueError(f"{name}[{i}] must be >= 1 (no empty axes), got {int(k)} in {shape!r}")
    axes = tuple(int(k) for k in axes)
    if math.prod(axes) > maximum:
        if maximum < MAX_DOMAIN_CELLS:
            raise ValueError(f"{name} {axes} has {math.prod(axes)} cells, more than the {maximum} allowed where arrays "
                             f"of the domain's size are built; marginal workloads (workloads.marginals, all_marginals) "
                             f"under unbounded, attribute or grid policies take up to {MAX_DOMAIN_CELLS} (2**62) cells")
        raise ValueError(f"{name} {axes} has {math.prod(axes)} cells, more than the {maximum} (2**62) a domain may have")
    return axes


def is_int(value: object) -> TypeGuard[int | np.integer]:
    """Whether ``value`` is an integer (Python or numpy), bools excluded."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _bounds(minimum: float | None, maximum: float | None, exclusive: bool) -> str:
    if minimum is not None and maximum is not None:
        return f"{'strictly ' if exclusive else ''}between {minimum:g} and {maximum:g}"
    if minimum is not None:
        return f"{'>' if exclusive else '>='} {minimum:g}"
    return f"{'<' if exclusive else '<='} {maximum:g}"


def check_real(value, name: str, minimum: float | None = None, maximum: float | None = None, *, exclusive: bool = False) -> float:
    """Return ``value`` as a finite float in [minimum, maximum] (the open interval if ``exclusive``);
    bools and anything that is not a real number are refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    below = minimum is not None and (value <= minimum if exclusive else value < minimum)
    above = maximum is not None and (value >= maximum if exclusive else value > maximum)
    if below or above:
        raise ValueError(f"{name} must be {_bounds(minimum, maximum, exclusive)}, got {value!r}")
    return value


def check_epsilon(epsilon, name: str = "epsilon") -> float:
    """Return ε as a float; it must be a finite real number > 0, within [MIN_EPSILON, MAX_EPSILON]."""
    if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, numbers.Real):
        raise TypeError(f"{name} must be a real number > 0, got {epsilon!r} ({type(epsilon).__name__})")
    value = float(epsilon)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {epsilon!r}")
    if not MIN_EPSILON <= value <= MAX_EPSILON:
        raise ValueError(
            f"{name} must be between {MIN_EPSILON:g} and {MAX_EPSILON:g} (beyond them noise scales leave "
            f"floating-point range), got {epsilon!r}"
        )
    return value


def _first_bad(mask: np.ndarray, values: np.ndarray) -> str:
    count = int(mask.sum())
    index = int(np.flatnonzero(mask.ravel())[0])
    return f"{count} such entr{'y' if count == 1 else 'ies'}, first at flat index {index}: {values.ravel()[index]!r}"


def as_array(value, name: str) -> np.ndarray:
    """``np.asarray(value)``, refusing what numpy cannot convert (ragged nested lists) by name."""
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array, could not convert it: {exc}") from None


def check_real_array(values, name: str, ndim: int | None = None, minimum: float | None = None,
                     copy: bool = True) -> np.ndarray:
    """Return a float64 copy of ``values``: finite real numbers (no bools, strings, objects or complex),
    ``ndim`` dimensions if given, all >= ``minimum`` if given. ``copy=False``: ``values`` itself
    when it already is a float64 array (for callers that only read it)."""
    arr = as_array(values, name)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers, got an array of dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    arr = arr.astype(np.float64, copy=copy)
    if not np.isfinite(arr).all():
        bad = ~np.isfinite(arr)
        raise ValueError(f"{name} must hold finite numbers, found NaN or infinity: {_first_bad(bad, arr)}")
    if minimum is not None:
        bad = arr < minimum
        if bad.any():
            raise ValueError(f"{name} must hold numbers >= {minimum:g}: {_first_bad(bad, arr)}")
    return arr


def check_histogram(x, shape: tuple[int, ...], name: str = "x") -> np.ndarray:
    """Return a copy of ``x`` as a flat int64 histogram of ``prod(shape)`` counts.

    Accepts an array of shape ``shape`` or ``(K,)`` holding finite, non-negative, integral
    numbers (integral floats such as ``3.0`` are accepted); anything else raises.
    """
    size = math.prod(shape)
    arr = as_array(x, name)
    if arr.dtype == bool:
        raise TypeError(f"{name} must hold numeric counts, got a boolean array")
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold numeric counts, got an array of dtype {arr.dtype}")
    if arr.shape not in (tuple(shape), (size,)):
        allowed = f"{tuple(shape)}" if len(shape) == 1 else f"{tuple(shape)} or ({size},)"
        raise ValueError(f"{name} has shape {arr.shape}, expected {allowed} to match the domain")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            raise ValueError(f"{name} must hold finite counts, found NaN or infinity: {_first_bad(bad, arr)}")
        bad = arr != np.round(arr)
        if bad.any():
            raise ValueError(f"{name} must hold whole-number counts, found fractional values: {_first_bad(bad, arr)}")
    bad = arr < 0
    if bad.any():
        raise ValueError(f"{name} must hold non-negative counts, found negative values: {_first_bad(bad, arr)}")
    # Answers are exact in float64 only up to 2**53 records; reject larger totals before any sum overflows.
    if arr.size and (arr.max() > 2**53 or float(np.sum(arr, dtype=np.float64)) > 2**53):
        raise ValueError(f"{name} holds more than 2**53 records in total, beyond exact float64 arithmetic")
    return arr.reshape(size).astype(np.int64, copy=True)


def check_index_array(values, name: str, upper: int) -> np.ndarray:
    """Return a 1-D int64 array with all entries in ``[0, upper]`` (inclusive)."""
    arr = as_array(values, name)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an array of integer indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False).reshape(-1)
    if arr.size and (arr.min() < 0 or arr.max() > upper):
        raise ValueError(f"{name} must hold indices in [0, {upper}], got values in [{arr.min()}, {arr.max()}]")
    return arr
