"""Content digests: equal for equal content, across processes and machines."""

from __future__ import annotations

import hashlib

import numpy as np


def digest(*parts) -> str:
    """SHA-256 (hex) of ``parts``: strings, numbers, tuples of them, and arrays (their dtype and
    shape are part of the content, bytes taken in little-endian C order)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            arr = np.ascontiguousarray(part)
            arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
            h.update(f"array:{arr.dtype.str}:{arr.shape}:".encode())
            h.update(arr.tobytes())
        else:
            h.update(f"{type(part).__name__}:{part!r};".encode())
    return h.hexdigest()
