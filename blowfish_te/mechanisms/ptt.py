"""Partition-then-transform (Anuarbek; SPEC §8): a data-dependent Blowfish histogram algorithm that
works under any policy, cyclic ones included."""

from __future__ import annotations

import numpy as np

from .._validation import check_epsilon, check_histogram, check_real
from ..noise import RNGLike, check_rng
from ..partitions import dawa_partition, matching_partition, noisy_pairing_partition, quotient_policy
from ..policies import Policy
from ..sensitivity import check_compatible
from ..workloads import as_workload, identity
from .ordered import NativeMechanism, NativeRelease

PARTITIONS = ("dawa", "matching", "noisy_pairing")


class PartitionThenTransform(NativeMechanism):
    """Private partition (ε₁ = ``epsilon_split``·ε), bucket totals under the quotient policy G' by
    the lowest-error route (ε₂ = ε - ε₁), uniform expansion; answers W x̂.

    Partitions (each with its privacy argument):

    - ``"dawa"``: DAWA's interval partition at ε₁/2 for unit changes; a move along a policy edge is a
      removal plus an addition, so it is (ε₁, G)-Blowfish for every G (``exact=True``: all
      intervals, K <= 1024; else dyadic intervals);
    - ``"matching"``: the seed's noisy max-weight matching at ε₁/2, same argument (K <= 256);
    - ``"noisy_pairing"``: counts with Laplace(Δ_G(I)/ε₁), Δ_G(I) from the policy's edges, then the
      optimal pairing of the noisy counts — post-processing.

    The bucket totals are a G'-neighbour pair (or equal) whenever x is a G-neighbour pair, so
    (ε₂, G')-Blowfish on them is (ε₂, G)-Blowfish on x (Anuarbek Lemma 4.1); they are answered with
    ``blowfish_te.answer`` (identity mechanism, automatic route). Sequential composition gives ε.
    """

    name = "partition_then_transform"

    def __init__(self, partition: str = "dawa", epsilon_split: float = 0.5, exact: bool = False):
        if partition not in PARTITIONS:
            raise ValueError(f"partition must be one of {PARTITIONS}, got {partition!r}")
        self.partition = partition
        self.epsilon_split = check_real(epsilon_split, "epsilon_split", 0, 1, exclusive=True)
        self.exact = bool(exact)

    def _labels(self, x: np.ndarray, policy: Policy, eps1: float, eps2: float, gen) -> np.ndarray:
        if self.partition == "dawa":
            return dawa_partition(x, eps1 / 2, eps2, gen, exact=self.exact)
        if self.partition == "matching":
            return matching_partition(x, eps1 / 2, eps2, gen)
        return noisy_pairing_partition(x, policy, eps1, eps2, gen)

    def release_native(self, workload, x, policy: Policy, epsilon: float, rng: RNGLike = None) -> NativeRelease:
        from ..release import answer

        workload = as_workload(workload)
        check_compatible(workload, policy)
        x = check_histogram(x, policy.shape)
        epsilon = check_epsilon(epsilon)
        gen = check_rng(rng)
        eps1 = self.epsilon_split * epsilon
        eps2 = epsilon - eps1
        labels = self._labels(x, policy, eps1, eps2, gen)
        sizes = np.bincount(labels)
        quotient = quotient_policy(policy, labels)
        totals = np.bincount(labels, weights=x).astype(np.int64)
        inner = answer(identity(sizes.size), totals, quotient, eps2, "identity", rng=gen)
        estimate = inner.answers[labels] / sizes[labels]
        last_cell = np.zeros(sizes.size, dtype=np.int64)
        np.maximum.at(last_cell, labels, np.arange(labels.size))
        disclosed = {int(last_cell[b]): total for b, total in inner.component_totals.items()}
        return NativeRelease(
            np.asarray(workload.matvec(estimate), dtype=np.float64),
            sensitivity={"buckets": inner.sensitivity},
            noise_scale={"buckets": inner.noise_scale},
            component_totals=disclosed,
        )

    def __repr__(self) -> str:
        return f"PartitionThenTransform(partition={self.partition!r}, epsilon_split={self.epsilon_split}, exact={self.exact})"
