"""A private choice between a data-dependent and a data-independent release, under any policy
(Pythia: Kotsogiannis, Machanavajjhala, Hay, Miklau, SIGMOD 2017), registered as ``adaptive``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._validation import check_real
from ..policies import Policy
from ..routes import Outcome
from ..selection import decide, measure
from ..workloads import Workload
from .auto import Auto
from .base import Mechanism, NativeMechanism
from .datadependent import DAWA, SMOOTHING_COST
from .partition_then_transform import PartitionThenTransform, plain_release, public_total
from .plain import best_plan_under


class Adaptive(NativeMechanism):
    """Runs the data-dependent or the data-independent release it predicts to be better, from noisy
    features of the data, and says in the release which it ran and why.

    Candidates (fixed by the workload and policy, never by the data):

    - data-dependent: DAWA (its partition at ε₁ = 0.25 ε for histograms, ε-DP for the unit changes
      that are unbounded DP's neighbours) under unbounded DP; partition-then-transform under every
      other policy (its partition is (ε₁, G)-Blowfish for every G, the bucket totals go through the
      quotient policy's best route). Both without their own check (``select=False``): this
      mechanism makes it;
    - data-independent: :class:`~blowfish_te.mechanisms.Auto` with optimiser time ``budget``: the
      strategy and route of lowest analytic error, exact-route strategies included under
      threshold and grid policies. A histogram released with Laplace on every cell has its
      structure read back afterwards (:func:`blowfish_te.smoothing.smooth`, post-processing)
      unless the features show nothing to merge.

    Choice: :func:`blowfish_te.selection.measure` spends a few % of ε on the record total (free
    when the policy discloses it: no ⊥) and DAWA's cost of the data, and
    :func:`~blowfish_te.selection.decide` reads them with the data-dependent candidate's fitted
    error model; the candidate it runs gets the rest of ε.
    When the data-dependent candidate would not partition this workload at all (prefix and range
    queries under line, threshold and grid policies: buckets cannot halve their error), it is
    the data-independent release itself, so nothing is measured and all of ε goes to it.

    Privacy: the features are (ρε, G)-Blowfish (Laplace noise calibrated to their sensitivity: 1
    per record added or removed, 2 per record moved along an edge); the chosen candidate runs at
    (1 - ρ)ε with its own argument; the choice depends only on the noisy features, the workload,
    the policy and ε. Sequential composition gives ε. Data-dependent: no analytic error.
    """

    name = "adaptive"

    def __init__(self, budget: float = 10.0):
        self.budget = check_real(budget, "budget (seconds)", 0)

    def candidates(self, workload: Workload, policy: Policy) -> tuple[Mechanism, Auto]:
        """(data-dependent, data-independent) candidates for ``workload`` under ``policy``."""
        cache = self.__dict__.setdefault("_members", {})
        if not cache:
            cache.update(dawa=DAWA(select=False), ptt=PartitionThenTransform(select=False), auto=Auto(budget=self.budget))
        return (cache["dawa"] if policy.is_unbounded_dp and policy.ndim <= 2 else cache["ptt"]), cache["auto"]

    def _partitions(self, dependent: Mechanism, workload: Workload, policy: Policy) -> bool:
        if isinstance(dependent, DAWA):
            return True
        return dependent.split(workload, policy) > 0

    def compute(self, workload, x, policy, epsilon, gen) -> Outcome:
        dependent = self.candidates(workload, policy)[0]
        if not self._partitions(dependent, workload, policy):
            notes = f"{self.name}: {dependent.name} would not partition {workload.name} under {policy.name}, so it is the plain release"
            return self._plain(workload, x, policy, epsilon, gen, False, notes)
        dawa = isinstance(dependent, DAWA)
        order = dependent.layout(policy.shape) if dawa else np.arange(x.size)
        features = measure(x[order], epsilon, gen, total=public_total(policy, x), record_moves=1 if dawa else 2)
        decision = decide(features, dependent.model(workload))
        notes = f"{self.name}: {features.describe()}; {decision.reason}"
        if decision.route != "partition":
            smoothed = features.cost < SMOOTHING_COST and (dawa or dependent.smooths(workload))
            return self._plain(workload, x, policy, epsilon - decision.spent, gen, smoothed, notes)
        rest = epsilon - decision.spent  # the candidate's steps keep their shares of the rest
        if dawa:  # unbounded DP: the transform is the identity, DAWA runs on x itself
            ratio = dependent.split(workload)[0]
            answers = dependent.partitioned(workload, x, ratio * rest, (1 - ratio) * rest, gen,
                                            scale=dependent.pricing_scale(workload, decision))
            return Outcome(np.asarray(answers, dtype=np.float64), notes=f"{notes}; ran {dependent.name}")
        inner = dependent.partitioned(workload, x, policy, rest, dependent.split(workload, policy) * rest, gen, notes,
                                      scale=features.scale if dependent.smooths(workload) else None)
        return replace(inner, notes=f"{notes}; ran {dependent.name}")

    def _plain(self, workload: Workload, x: np.ndarray, policy: Policy, rest: float, gen, smoothed: bool, notes: str):
        """The data-independent candidate at ``rest``: ``auto``'s choice and route for the workload
        under the policy (planned once per workload and policy: every analytic error scales as
        1/ε², so the ranking holds at any ε; Laplace on the cells where it ties, since only its
        release can be smoothed)."""
        mechanism, chosen = best_plan_under(workload, policy, self.candidates(workload, policy)[1])
        return plain_release(workload, x, policy, rest, gen, mechanism, chosen, smoothed, notes)
