"""Helpers shared by the tests that are not oracles (those are in :mod:`blowfish_te.testing`):
hypothesis strategies for random policy graphs, a workload computing in float32, and a pattern
for error messages matched word for word."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import strategies as st

from blowfish_te.workloads import Workload


@st.composite
def forests(draw, max_cells: int = 8, allow_bottom: bool = True):
    """(k, edges) of a random forest over k cells, possibly with ⊥ (index k) as a vertex."""
    k = draw(st.integers(1, max_cells))
    has_bottom = allow_bottom and draw(st.booleans())
    v = k + int(has_bottom)
    order = draw(st.permutations(range(v)))
    edges = []
    for i in range(1, v):
        if draw(st.booleans()) or draw(st.booleans()):  # attach with probability 3/4
            parent = order[draw(st.integers(0, i - 1))]
            edges.append((order[i], parent))
    return k, edges


@st.composite
def graphs(draw, max_cells: int = 6, allow_bottom: bool = True):
    """(k, edges) of a random graph over k cells, possibly with ⊥ (index k)."""
    k = draw(st.integers(1, max_cells))
    v = k + int(allow_bottom and draw(st.booleans()))
    pairs = [(i, j) for i in range(v) for j in range(i + 1, v)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
    return k, chosen


class Float32Rows(Workload):
    """A workload whose products come back in float32 (a plug-in's, say): releases must still
    calibrate and answer in float64."""

    def __init__(self, matrix):
        self.matrix = np.asarray(matrix, dtype=np.float32)
        super().__init__((self.matrix.shape[1],), self.matrix.shape[0], "float32 rows")

    def _matmat(self, x):
        return self.matrix @ np.asarray(x, dtype=np.float32)

    def _rmatmat(self, y):
        return self.matrix.T @ np.asarray(y, dtype=np.float32)


def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern that matches ``message`` and nothing more."""
    return "^" + re.escape(message) + "$"
