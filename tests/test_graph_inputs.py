"""Every call into scipy's graph kernels hands them int32 indices: before scipy 1.15 (shortest
paths, Dijkstra) and 1.17.1 (minimum spanning trees) the kernels refuse int64 ones with
"Buffer dtype mismatch". The fixture makes today's scipy as strict, then every path of the
library that reaches csgraph runs and must agree with the unrestricted answer."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from blowfish_te import constraints as C
from blowfish_te import explore, policies, transform, trees
from blowfish_te._graph import csgraph_ready
from blowfish_te.audit import neighbour_pairs

pytestmark = pytest.mark.core

KERNELS = ("breadth_first_order", "connected_components", "shortest_path", "dijkstra", "minimum_spanning_tree")


@pytest.fixture
def int32_only(monkeypatch):
    """csgraph as an older scipy has it; yields the kernels called."""
    called = []
    for name in KERNELS:
        def strict(graph, *args, _kernel=getattr(csgraph, name), _name=name, **kwargs):
            if graph.indices.dtype != np.int32 or graph.indptr.dtype != np.int32:
                raise ValueError(f"Buffer dtype mismatch, expected 'const int' but got 'long' in {_name}")
            called.append(_name)
            return _kernel(graph, *args, **kwargs)
        monkeypatch.setattr(csgraph, name, strict)
    return called


def library_paths():
    """What each graph path of the library answers: distances, components, trees, transforms,
    audit pairs, guarantees, the constraints' policy graph."""
    grid = policies.grid((5, 6), 2)
    partition = policies.partition([0, 0, 1, 1, 2])  # a forest: three components
    q = C.marginals((2, 2, 3), (0, 1))
    graph = C.policy_graph(q, policies.complete((2, 2, 3)))
    return {
        "distance": grid.distance(0, 29),
        "components": partition.n_components,
        "trees": {name: tree.edges.tolist() for name, tree in trees.candidates(grid).items()},
        "shortest_path": trees.shortest_path(grid).edges.tolist(),
        "transform": transform(partition).data(np.arange(5)).tolist(),
        "pairs": [(p.u, p.v) for p in neighbour_pairs(grid, distance=2)],
        "guarantees": [g.distance for g in explore.guarantees(grid)],
        "constraints": (C.longest_cycle(graph)[0], C.longest_path(graph)[0]),
    }


def test_every_graph_path_runs_on_int32_kernels(int32_only):
    answers = library_paths()
    assert set(int32_only) == set(KERNELS)  # every kernel the library uses was reached
    assert answers["components"] == 3 and answers["constraints"] == (4, 1)


def test_int32_kernels_change_no_answer(monkeypatch):
    unrestricted = library_paths()
    for name in KERNELS:
        monkeypatch.setattr(csgraph, name, getattr(csgraph, name))
    assert unrestricted == library_paths()


def test_csgraph_ready_keeps_the_graph():
    graph = sp.csr_array((np.arange(1.0, 5.0), (np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]))), shape=(4, 4))
    assert graph.indices.dtype == np.int64
    ready = csgraph_ready(graph)
    assert ready.indices.dtype == np.int32 and ready.indptr.dtype == np.int32
    assert np.array_equal(ready.toarray(), graph.toarray())
    again = csgraph_ready(ready)  # already int32: the same index arrays, not copies
    assert again.indices is ready.indices and again.indptr is ready.indptr
