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


def csgraph_ready(matrix) -> sp.csr_array:
    """``matrix`` as a CSR array with int32 indices where they fit, for ``scipy.sparse.csgraph``:
    its kernels take only int32 indices before scipy 1.15 (shortest paths, Dijkstra) and 1.17.1
    (minimum spanning trees), while arrays built from int64 coordinates carry int64 indices.
    Every call into csgraph goes through here."""
    graph = matrix if isinstance(matrix, sp.csr_array) else sp.csr_array(matrix)
    if graph.indices.dtype == np.int32 and graph.indptr.dtype == np.int32:
        return graph
    if max(graph.shape) >= 2**31 or graph.nnz >= 2**31:
        return graph  # beyond int32: only a scipy that takes int64 can hold it anyway
    return sp.csr_array((graph.data, graph.indices.astype(np.int32), graph.indptr.astype(np.int32)), shape=graph.shape)
