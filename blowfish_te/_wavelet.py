"""Order statistics over ranges of an integer vector: a wavelet matrix with prefix sums.

:class:`RangeSmallestSums` answers "the sum of the k smallest values of x[l:r)" for many (l, r, k)
at once, in O(log σ) vectorised steps (σ distinct values), after an O(K log σ) build
(Claude, Navarro, Ordóñez: "The wavelet matrix", Information Systems 2015). Sums are exact int64.
"""

from __future__ import annotations

import numpy as np


class RangeSmallestSums:
    """The wavelet matrix of the ranks of ``values`` (non-negative integers), one level per bit.

    Level j (most significant bit first) holds the ranks in the order reached so far; its zeros
    (bit j clear) are moved stably in front of its ones for level j+1. Per level we keep the
    number of zeros among the first i entries and the sum of the values of those zeros.
    """

    def __init__(self, values: np.ndarray):
        values = np.asarray(values, dtype=np.int64)
        self.size = values.size
        self.levels, codes = np.unique(values, return_inverse=True)
        self.bits = max(1, int(self.levels.size - 1).bit_length())
        codes = codes.reshape(-1)
        current = values.copy()
        self.zeros, self.zero_sums, self.zero_total = [], [], []
        for j in range(self.bits - 1, -1, -1):
            clear = ((codes >> j) & 1) == 0
            self.zeros.append(np.concatenate([[0], np.cumsum(clear)]))
            self.zero_sums.append(np.concatenate([[0], np.cumsum(np.where(clear, current, 0))]))
            self.zero_total.append(int(clear.sum()))
            order = np.argsort(~clear, kind="stable")
            codes, current = codes[order], current[order]

    def smallest_sums(self, lo: np.ndarray, hi: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Sum of the ``k`` smallest values of x[lo:hi) for each triple (0 <= k <= hi - lo)."""
        lo, hi, k = (np.array(a, dtype=np.int64) for a in (lo, hi, k))
        total = np.zeros(lo.shape, dtype=np.int64)
        code = np.zeros(lo.shape, dtype=np.int64)
        for zeros, sums, n_zero in zip(self.zeros, self.zero_sums, self.zero_total):
            z_lo, z_hi = zeros[lo], zeros[hi]
            here = z_hi - z_lo
            left = k <= here  # the k smallest all have this bit clear
            total += np.where(left, 0, sums[hi] - sums[lo])
            k = np.where(left, k, k - here)
            lo = np.where(left, z_lo, n_zero + lo - z_lo)
            hi = np.where(left, z_hi, n_zero + hi - z_hi)
            code = 2 * code + ~left
        return total + k * self.levels[np.minimum(code, self.levels.size - 1)]
