"""Small helpers for row-major domain grids, shared by policies and workloads."""

from __future__ import annotations

import math

import numpy as np


def shape_label(shape: tuple[int, ...]) -> str:
    """``k`` for a 1-D domain, ``(k1, k2, ...)`` otherwise: how names print shapes."""
    return str(shape[0]) if len(shape) == 1 else str(shape)


def ceil_log(n: int, base: int) -> int:
    """Smallest h >= 0 with base**h >= n, in integers (⌈log_base n⌉ for n >= 1)."""
    h, reach = 0, 1
    while reach < n:
        reach *= base
        h += 1
    return h


def strides(shape: tuple[int, ...]) -> np.ndarray:
    """Row-major strides of a grid, in cells."""
    return np.array([math.prod(shape[i + 1 :]) for i in range(len(shape))], dtype=np.int64)


def positive_offsets(shape: tuple[int, ...], theta: int) -> np.ndarray:
    """All lexicographically positive offsets with 1 <= L1 norm <= θ that fit in the grid, as rows."""
    axes = [np.arange(-min(theta, k - 1), min(theta, k - 1) + 1) for k in shape]
    offsets = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(shape))
    norm = np.abs(offsets).sum(axis=1)
    offsets = offsets[(norm >= 1) & (norm <= theta)]
    first = offsets[np.arange(offsets.shape[0]), (offsets != 0).argmax(axis=1)]
    return offsets[first > 0]


def offset_pairs(shape: tuple[int, ...], offset) -> tuple[np.ndarray, np.ndarray]:
    """Every pair ``(u, u + offset)`` of cells inside the grid, in row-major order of u."""
    st = strides(shape)
    u = np.zeros(1, dtype=np.int64)
    for k, d, s in zip(shape, offset, st):
        axis = np.arange(max(0, -d), k - max(0, d), dtype=np.int64) * s
        u = (u[:, None] + axis[None, :]).reshape(-1)
    return u, u + int(np.dot(offset, st))
