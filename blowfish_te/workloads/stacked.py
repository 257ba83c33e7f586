"""Workloads stacked on top of each other, each scaled by a weight: [w_1 W_1; w_2 W_2; ...]."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._digest import digest
from .._validation import check_real
from .base import Workload, as_block, check_norm


class Stacked(Workload):
    """The rows of every part, part g scaled by ``weights[g]`` (> 0), over one domain. Column
    norms add up over the parts (L1 with weight w, squared L2 with w²), so sensitivities and
    errors keep each part's structure."""

    def __init__(self, parts, weights=None, name: str | None = None):
        parts = list(parts)
        for part in parts:
            if not isinstance(part, Workload):
                raise TypeError(f"parts must be blowfish_te workloads, got {type(part).__name__}")
        if not parts:
            raise ValueError("parts must hold at least one workload")
        domain = parts[0].domain
        for part in parts[1:]:
            if part.domain != domain:
                raise ValueError(f"every part must have domain {domain}, got {part.name} with {part.domain}")
        weights = [1.0] * len(parts) if weights is None else list(weights)
        if len(weights) != len(parts):
            raise ValueError(f"weights must have one entry per part ({len(parts)}), got {len(weights)}")
        self.parts = parts
        self.weights = [check_real(w, "weights", 0, math.inf, exclusive=True) for w in weights]
        self._offsets = np.cumsum([0] + [part.num_queries for part in parts])
        super().__init__(domain, int(self._offsets[-1]), name or " + ".join(part.name for part in parts))
        self.is_binary = all(part.is_binary for part in parts) and all(w == 1.0 for w in self.weights)

    def fingerprint(self) -> str | None:
        """The parts' fingerprints and weights, in order (None when a part has none)."""
        prints = [part.fingerprint() for part in self.parts]
        return None if None in prints else digest("stacked", tuple(prints), np.asarray(self.weights))

    def _matmat(self, x):
        x = as_block(x)
        return np.concatenate([w * np.asarray(part._matmat(x)) for part, w in zip(self.parts, self.weights)])

    def _rmatmat(self, y):
        y = as_block(y)
        blocks = zip(self.parts, self.weights, self._offsets[:-1], self._offsets[1:])
        return sum(w * np.asarray(part._rmatmat(y[lo:hi])) for part, w, lo, hi in blocks)

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        u, v = self._check_pairs(u, v)
        check_norm(norm)
        power = 1 if norm == "l1" else 2
        return sum(w**power * part.difference_norms(u, v, norm) for part, w in zip(self.parts, self.weights))

    def times_incidence(self, child: np.ndarray, parent: np.ndarray) -> sp.csr_array:
        return sp.csr_array(sp.vstack([w * part.times_incidence(child, parent) for part, w in zip(self.parts, self.weights)]))

    def tosparse(self) -> sp.csr_array:
        return sp.csr_array(sp.vstack([w * part.tosparse() for part, w in zip(self.parts, self.weights)]))
