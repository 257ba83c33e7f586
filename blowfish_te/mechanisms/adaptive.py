"""A private choice between a data-dependent and a data-independent release, under any policy
(Pythia: Kotsogiannis, Machanavajjhala, Hay, Miklau, SIGMOD 2017), registered as ``adaptive``."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from .._validation import check_real
from ..policies import Policy
from ..routes import Outcome
from ..selection import Features, choose, decide, measure
from ..workloads import Workload
from .auto import Auto
from .base import Mechanism, NativeMechanism
from .datadependent import DAWA, SMOOTHING_COST
from .partition_then_transform import PartitionThenTransform, plain_release, public_total
from .partitioner import Partitioner
from .plain import aggregation_gain, best_plan_under, workload_class
from .privtree import PrivTree
from .spatial import AGrid

if TYPE_CHECKING:
    from ..noise import RandomSource


class Adaptive(NativeMechanism):
    """Runs the data-dependent or the data-independent release it predicts to be better, from noisy
    features of the data, and says in the release which it ran and why.

    Candidates (fixed by the workload and policy, never by the data):

    - data-dependent: DAWA (its partition at ε₁ = 0.25 ε for histograms, ε-DP for the unit changes
      that are unbounded DP's neighbours) under unbounded DP — and on a grid, for range workloads,
      also PrivTree and AGrid (not UGrid: its fitted model extrapolates badly outside the scales it
      was fitted on, it was never the best of the four on DPBench's 2-D cells, and its own check
      has a bias probe this choice does not run) —; partition-then-transform under every other policy (its
      partition is (ε₁, G)-Blowfish for every G, the bucket totals go through the quotient
      policy's best route). All without their own check (``select=False``): this mechanism makes
      it;
    - data-independent: :class:`~blowfish_te.mechanisms.Auto` with optimiser time ``budget``: the
      strategy and route of lowest analytic error, exact-route strategies included under
      threshold and grid policies. A histogram released with Laplace on every cell has its
      structure read back afterwards (:func:`blowfish_te.smoothing.smooth`, post-processing)
      unless the features show nothing to merge, fitted to the features' noisy record total (refined
      by a second total on flat or nearly empty data: :func:`blowfish_te.selection.refine_total`).

    Choice: :func:`blowfish_te.selection.measure` spends a few % of ε on the record total (free
    when the policy discloses it: no ⊥) and DAWA's cost of the data, and
    :func:`~blowfish_te.selection.decide` reads them with the data-dependent candidate's fitted
    error model; the candidate it runs gets the rest of ε. With several data-dependent candidates
    (range workloads on a grid) :func:`~blowfish_te.selection.choose` reads the same features with
    each one's least-squares model (``calibrated``: comparable magnitudes) and runs the lowest
    prediction where the chosen mechanism's own check model puts it below the plain release's
    error (their models all predict against ``auto``'s analytic error there; on histograms DAWA's
    prediction is against the smoothed counts, whose error is not known before the release, so
    DAWA stays the only candidate). Measured on the training cells (DPBench's seven 2-D shapes at
    10⁴–10⁷ records, ε ∈ {0.01, 0.1}, 2000 rectangles over 128², 400 noisy readings each): the
    choice's mean error over the best candidate's, median 1.12 → 1.01, worst 2.4 → 1.9; released
    on the 28 cells of ``benchmarks/datadependent_report.py`` (10⁴ and 10⁶ records, 20 seeds),
    ``adaptive`` over the best single mechanism of each cell went from worst 1.48 to 1.26 (median
    1.03 both), BJ-CABS at 10⁶ records, ε = 0.01, from 1.44–1.48 to 0.97–1.03.
    When the data-dependent candidate would not partition this workload at all (prefix and range
    queries under line, threshold and grid policies: buckets cannot halve their error), it is
    the data-independent release itself, so nothing is measured and all of ε goes to it.

    Privacy: the features are (ρε, G)-Blowfish (Laplace noise calibrated to their sensitivity: 1
    per record added or removed, 2 per record moved along an edge); the chosen candidate runs at
    (1 - ρ)ε with its own argument (less a second record total's share where one is bought: Laplace
    on a value of the features' sensitivity, bought on the first noisy total, ε and K alone); the
    choice depends only on the noisy features, the workload, the policy and ε. Sequential
    composition gives ε. Data-dependent: no analytic error.
    """

    name = "adaptive"

    def __init__(self, budget: float = 10.0):
        self.budget = check_real(budget, "budget (seconds)", 0)

    @staticmethod
    def _on_cells(policy: Policy) -> bool:
        """Whether the candidates run on x itself: unbounded DP on a line or a grid (its transform
        is the identity, and DAWA's partition is ε-DP for its unit changes)."""
        return policy.is_unbounded_dp and policy.ndim <= 2

    def candidates(self, workload: Workload, policy: Policy) -> tuple[tuple[Mechanism, ...], Auto]:
        """(data-dependent candidates, data-independent candidate) for ``workload`` under ``policy``."""
        cache = self.__dict__.setdefault("_members", {})
        if not cache:
            cache.update(dawa=DAWA(select=False), ptt=PartitionThenTransform(select=False), auto=Auto(budget=self.budget),
                         grid=(PrivTree(select=False), AGrid(select=False)))
        if not self._on_cells(policy):
            return (cache["ptt"],), cache["auto"]
        if policy.ndim == 2 and self._workload_class(workload) == "ranges":
            return (cache["dawa"], *cache["grid"]), cache["auto"]
        return (cache["dawa"],), cache["auto"]

    def _workload_class(self, workload: Workload) -> str:
        return self._cache("workload class").get(workload, lambda: workload_class(workload, aggregation_gain(workload)))

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        policy = self.needs_policy(policy)
        dependents = self.candidates(workload, policy)[0]
        first: Partitioner = dependents[0]
        on_cells = self._on_cells(policy)
        if not (on_cells or first.partition_share(workload, policy) > 0):
            notes = f"{self.name}: {first.name} would not partition {workload.name} under {policy.name}, so it is the plain release"
            return self._plain(workload, x, policy, epsilon, gen, False, notes)
        features = measure(x[first.layout(policy.shape)], epsilon, gen, total=public_total(policy, x),
                           record_moves=1 if on_cells else 2)
        if len(dependents) > 1:
            decision = choose(features, {m.name: m.model(workload, calibrated=True) for m in dependents},
                              {m.name: m.model(workload) for m in dependents})
        else:
            decision = decide(features, first.model(workload))
        notes = f"{self.name}: {features.describe()}; {decision.reason}; " \
            f"{self._predicted_errors(workload, policy, features, dependents, epsilon - decision.spent)}"
        if decision.route == "plain":
            smoothed = features.cost < SMOOTHING_COST and first.smooths(workload)
            return self._plain(workload, x, policy, epsilon - decision.spent, gen, smoothed, notes, features)
        rest = epsilon - decision.spent  # the candidate's steps keep their shares of the rest
        chosen = next((m for m in dependents if m.name == decision.route), first)
        if chosen is not first:  # a grid mechanism on x itself, without its own check, at the rest
            answers = chosen.run(workload, x, rest, gen)
            return Outcome(np.asarray(answers, dtype=np.float64), notes=f"{notes}; ran {chosen.name}")
        inner = first.release_partitioned(workload, x, rest, gen, policy, decision, notes)
        return replace(inner, notes=f"{notes}; ran {first.name}")

    def _predicted_errors(self, workload: Workload, policy: Policy, features: Features, dependents, rest: float) -> str:
        """Each candidate's predicted RMSE per query at ``rest`` from its least-squares model (the
        calibrated magnitudes :func:`~blowfish_te.selection.choose` ranks by), against the plain
        release's analytic RMSE there; on histogram-like workloads, whose plain release is smoothed
        (its error unknown before the release), the predicted ratios to it."""
        ratios = {m.name: m.model(workload, calibrated=True).predict(features) for m in dependents}
        mse = None if self._workload_class(workload) == "cells" else \
            best_plan_under(workload, policy, self.candidates(workload, policy)[1])[1].expected_mse
        if mse is None:
            return "predicted error ratio to the plain release: " + ", ".join(f"{n} {r:.3g} ×" for n, r in ratios.items())
        plain = math.sqrt(mse) / rest
        listing = ", ".join(f"{name} {ratio * plain:.4g}" for name, ratio in ratios.items())
        return f"predicted RMSE per query: {listing}, plain release {plain:.4g} (analytic)"

    def _plain(self, workload: Workload, x: np.ndarray, policy: Policy, rest: float, gen, smoothed: bool, notes: str,
               features: Features | None = None):
        """The data-independent candidate at ``rest``: ``auto``'s choice and route for the workload
        under the policy (planned once per workload and policy: every analytic error scales as
        1/ε², so the ranking holds at any ε; Laplace on the cells where it ties, since only its
        release can be smoothed)."""
        mechanism, chosen = best_plan_under(workload, policy, self.candidates(workload, policy)[1])
        return plain_release(workload, x, policy, rest, gen, mechanism, chosen, smoothed, notes, features)
