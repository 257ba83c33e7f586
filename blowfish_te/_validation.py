"""Input checks shared by the public API (SPEC §1, §10).

Every check names the argument, says what was wrong and what is allowed, and raises
``TypeError`` for a value of the wrong kind and ``ValueError`` for a value out of range.
"""

from __future__ import annotations

import math
import numbers

import numpy as np


def check_int(value, name: str, minimum: int | None = None) -> int:
    """Return ``value`` as an ``int``; reject bools, floats and values below ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_shape(shape, name: str = "shape") -> tuple[int, ...]:
    """Return a domain shape as a tuple of positive ints; an int ``k`` means ``(k,)``."""
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
    return tuple(int(k) for k in axes)


def check_epsilon(epsilon, name: str = "epsilon") -> float:
    """Return ε as a float; it must be a finite real number > 0."""
    if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, numbers.Real):
        raise TypeError(f"{name} must be a real number > 0, got {epsilon!r} ({type(epsilon).__name__})")
    value = float(epsilon)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return value


def _first_bad(mask: np.ndarray, values: np.ndarray) -> str:
    count = int(mask.sum())
    index = int(np.flatnonzero(mask.ravel())[0])
    return f"{count} such entr{'y' if count == 1 else 'ies'}, first at flat index {index}: {values.ravel()[index]!r}"


def check_histogram(x, shape: tuple[int, ...], name: str = "x") -> np.ndarray:
    """Return a copy of ``x`` as a flat int64 histogram of ``prod(shape)`` counts.

    Accepts an array of shape ``shape`` or ``(K,)`` holding finite, non-negative, integral
    numbers (integral floats such as ``3.0`` are accepted); anything else raises.
    """
    size = math.prod(shape)
    try:
        arr = np.asarray(x)
    except Exception as exc:  # e.g. ragged nested lists
        raise TypeError(f"{name} must be an array of counts, could not convert it: {exc}") from None
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
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an array of integer indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False).reshape(-1)
    if arr.size and (arr.min() < 0 or arr.max() > upper):
        raise ValueError(f"{name} must hold indices in [0, {upper}], got values in [{arr.min()}, {arr.max()}]")
    return arr
