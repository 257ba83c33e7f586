"""A private choice between a data-dependent and a data-independent release, under any policy
(Pythia: Kotsogiannis, Machanavajjhala, Hay, Miklau, SIGMOD 2017), registered as ``adaptive``."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from .._validation import check_real
from ..policies import Policy
from ..routes import MechanismTags, Outcome
from ..selection import Features, choose, decide, measure
from ..workloads import Workload
from .auto import Auto
from .base import MECHANISMS, Mechanism, NativeMechanism, get_mechanism, load_plugins
from .consistency import consistent
from .datadependent import DAWA, SMOOTHING_COST
from .partition_then_transform import PartitionThenTransform, plain_release, public_total
from .partitioner import Partitioner
from .plain import aggregation_gain, best_plan_under, workload_class

if TYPE_CHECKING:
    from ..noise import RandomSource


#: Mechanisms that predict their error but are not offered to :class:`Adaptive` on range workloads
#: of a dimension, each with the measurement that kept it out (``benchmarks/train_selection.py
#: --candidates``: every shape held out in turn, the models fitted on the other six choose
#: among the candidates on it).
NOT_OFFERED: dict[tuple[str, int], str] = {
    ("privtree", 1): "offered beside DAWA on 1-D prefixes, the held-out choice's RMSE over the best candidate's rose "
                     "from 1.118 to 1.133 at the geometric mean (median 1.000 to 1.026)",
    ("ugrid", 2): "offered beside DAWA, AGrid and PrivTree on rectangles, the held-out choice's worst RMSE over the best "
                  "candidate's rose from 1.26 to 2.73 (geometric mean 1.052 to 1.093)",
}


class Adaptive(NativeMechanism):
    """Runs the data-dependent or the data-independent release it predicts to be better, from noisy
    features of the data, and says in the release which it ran and why.

    Candidates (fixed by the workload and policy, never by the data):

    - data-dependent: DAWA (its partition at ε₁ = 0.25 ε for histograms, ε-DP for the unit changes
      that are unbounded DP's neighbours) under unbounded DP, and on range workloads also every
      registered mechanism :meth:`offered`: each one that declares a fitted error model (tag
      ``predicts_error``; installed plug-ins included) and runs on the cells, unless measurement
      kept it out (:data:`NOT_OFFERED`: PrivTree on 1-D ranges, UGrid on rectangles) — PrivTree
      and AGrid on a grid among the library's own —; partition-then-transform under every other
      policy (its partition is (ε₁, G)-Blowfish for every G, the bucket totals go through the
      quotient policy's best route). All without their own check (``unchecked()``): this
      mechanism makes it;
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
    (range workloads) :func:`~blowfish_te.selection.choose` reads the same features with
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
    (1 - ρ)ε with its own argument — an offered mechanism on the cells themselves is ε-DP for unit
    changes, as every registered mechanism states — (less a second record total's share where one is bought: Laplace
    on a value of the features' sensitivity, bought on the first noisy total, ε and K alone); the
    choice depends only on the noisy features, the workload, the policy and ε. Sequential
    composition gives ε. Answers to a 1-D prefix workload are then made nondecreasing from 0, up
    to the record total where the policy discloses it (:mod:`~blowfish_te.mechanisms.consistency`:
    post-processing). Data-dependent: no analytic error.
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
        """(data-dependent candidates, data-independent candidate) for ``workload`` under ``policy``:
        partition-then-transform under a Blowfish policy; DAWA alone for histogram-like workloads
        under unbounded DP; DAWA and every mechanism :meth:`offered` for range workloads."""
        members = self.__dict__.setdefault("_members", {})
        if not members:
            members.update(dawa=DAWA(select=False), ptt=PartitionThenTransform(select=False), auto=Auto(budget=self.budget))
        if not self._on_cells(policy):
            return (members["ptt"],), members["auto"]
        if self._workload_class(workload) != "ranges":
            return (members["dawa"],), members["auto"]
        return (members["dawa"], *self.offered(workload, policy.ndim)), members["auto"]

    def offered(self, workload: Workload, ndim: int) -> tuple[Mechanism, ...]:
        """Besides DAWA, the registered mechanisms (installed plug-ins included) offered as
        candidates for a range ``workload`` on ``ndim`` dimensions, without their own check
        (:meth:`~blowfish_te.mechanisms.Mechanism.unchecked`), in name order: each predicts its
        error (tag ``predicts_error``) with a model for this workload, runs on the cells themselves
        (a ``transform`` route: ε-DP for unit changes), fits the dimension (``needs_grid``: 2-D
        only), and is not in :data:`NOT_OFFERED`."""
        if not self.__dict__.get("_plugins_loaded"):
            load_plugins()
            self.__dict__["_plugins_loaded"] = True
        unchecked = self.__dict__.setdefault("_unchecked", {})
        out = []
        for name in sorted(MECHANISMS):
            cls = MECHANISMS[name]
            tags = MechanismTags.of(cls)
            if (name == DAWA.name or not tags.predicts_error or "transform" not in tags.routes or (name, ndim) in NOT_OFFERED
                    or (tags.needs_grid and ndim != 2)):
                continue
            if type(unchecked.get(name)) is not cls:
                unchecked[name] = get_mechanism(name).unchecked()
            if unchecked[name].model(workload) is not None:
                out.append(unchecked[name])
        return tuple(out)

    def _workload_class(self, workload: Workload) -> str:
        return self._cache("workload class").get(workload, lambda: workload_class(workload, aggregation_gain(workload)))

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        policy = self.needs_policy(policy)
        return consistent(self._release(workload, x, epsilon, gen, policy), workload, public_total(policy, x))

    def _release(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource, policy: Policy) -> Outcome:
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
        if chosen is not first:  # an offered mechanism on x itself, without its own check, at the rest
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
