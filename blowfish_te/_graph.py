"""Sparse graph helpers shared by policies, workloads and transforms."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def signed_incidence(u: np.ndarray, v: np.ndarray, size: int) -> sp.csc_array:
    """The ``size × len(u)`` matrix whose column e has +1 at u[e] and -1 at v[e].

    ``v[e] == size`` stands for ⊥, which has no row: that column has only the +1. Entries are
    int64, so products with integer vectors stay exact.
    """
    cols = np.arange(u.size)
    keep = v < size
    rows = np.concatenate([u, v[keep]])
    data = np.concatenate([np.ones(u.size, dtype=np.int64), -np.ones(int(keep.sum()), dtype=np.int64)])
    return sp.csc_array((data, (rows, np.concatenate([cols, cols[keep]]))), shape=(size, u.size))
