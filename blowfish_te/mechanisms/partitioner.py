"""The one protocol of the mechanisms that partition, check privately whether to, and fall back to
the plain release (DAWA, partition-then-transform): what a selector such as ``adaptive`` asks of
them, so it never needs their classes."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..noise import RandomSource
from ..policies import Policy
from ..routes import Outcome
from ..selection import Decision, ErrorModel
from ..workloads import Workload


class Partitioner(Protocol):
    """A release that partitions the cells, whose check a selector makes for it.

    - :meth:`model`: its fitted error model over the plain release's (``calibrated``: the
      least-squares fit, whose magnitudes compare across mechanisms).
    - :meth:`layout`: the order in which the check reads the cells (data-independent).
    - :meth:`partition_share`: the share of ε its partition spends on ``workload`` under
      ``policy``; 0 when it would not partition this workload at all.
    - :meth:`smooths`: whether its plain release's counts may be smoothed for ``workload``.
    - :meth:`release_partitioned`: the partition branch at ``epsilon`` (what the check left), on
      validated arguments, priced by the ``decision``'s noisy features; ``notes`` join the release.
    """

    name: str

    def model(self, workload: Workload, calibrated: bool = False) -> ErrorModel: ...

    def layout(self, domain: tuple[int, ...]) -> np.ndarray: ...

    def partition_share(self, workload: Workload, policy: Policy) -> float: ...

    def smooths(self, workload: Workload) -> bool: ...

    def release_partitioned(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource, policy: Policy,
                            decision: Decision, notes: str) -> Outcome: ...
