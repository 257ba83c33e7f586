"""Mechanisms for marginal workloads that keep the product structure: measure marginal tables,
never the full table, and answer by least squares over them (:mod:`blowfish_te.strategies.marginals`;
HDMM's marginals template: McKenna, Miklau, Hay, Machanavajjhala, VLDB 2018)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._cache import IdentityCache
from .._validation import check_int
from ..noise import RandomSource, add_laplace
from ..policies import Policy
from ..routes import Outcome
from ..strategies.marginals import (
    MAX_TABLE_CELLS,
    UNIT_CHANGES,
    MarginalStrategy,
    Moves,
    marginal_table,
    move_patterns,
    optimize_weights,
    own_marginals,
)
from ..workloads import MarginalCounts, Marginals, Workload
from .base import LinearMechanism

__all__ = ["MarginalMechanism", "WorkloadMarginals", "OptimizedMarginals"]


class MarginalMechanism(LinearMechanism):
    """Measure weighted marginals y_S = w_S M_S x + Lap(Δ/ε), answer the workload's marginals by
    least squares over them (consistent answers), without building the full table.

    Privacy: Δ is the L1 sensitivity of the stacked weighted marginals for the neighbour relation,
    from the policy's structure (:func:`~blowfish_te.strategies.marginals.move_patterns`): Σ w_S
    when a record can be added or removed, and 2 Σ_{S∩D≠∅} w_S for a record moved between cells that
    differ in the attributes D (the largest over the policy's moves). Marginals no move changes
    (sensitivity 0: functions of the disclosed totals) are released exactly. Laplace(Δ/ε) on the
    others is (ε, G)-Blowfish (He et al. Thm 5.1); the answers are post-processing; one release
    spends ε once. Only the exact route: a tree transform's W_T is no longer a set of marginals.
    """

    routes = ("exact",)
    needs_marginals = True

    def _build(self, shape: tuple[int, ...], subsets, moves: Moves) -> MarginalStrategy:
        raise NotImplementedError

    def handles_large_domain(self, workload: Workload) -> bool:
        return isinstance(workload, Marginals)

    @staticmethod
    def subsets_of(workload: Workload) -> tuple[tuple[int, ...], ...]:
        """The workload's marginals, or a ValueError when it is not a marginal workload."""
        if not isinstance(workload, Marginals):
            raise ValueError(f"answers marginal workloads only (workloads.marginals or workloads.all_marginals); "
                             f"{workload.name} is not one")
        return workload.subsets

    def strategy(self, workload: Workload) -> MarginalStrategy:
        subsets = self.subsets_of(workload)
        return self._cache("strategy").get(workload, lambda: self._build(workload.domain, subsets, UNIT_CHANGES))

    def policy_strategy(self, workload: Workload, policy: Policy) -> MarginalStrategy:
        subsets = self.subsets_of(workload)
        per_workload = self._cache("policy strategy").get(workload, IdentityCache)
        return per_workload.get(policy, lambda: self._build(workload.domain, subsets, self._moves(policy)))

    def _moves(self, policy: Policy | None) -> Moves:
        if policy is None:
            return UNIT_CHANGES
        return self._cache("moves").get(policy, lambda: move_patterns(policy))

    def strategy_sensitivity(self, strategy: MarginalStrategy, policy: Policy | None = None) -> float:
        """Δ of the weighted marginals from the policy's moves (unit changes: Σ w_S)."""
        return strategy.sensitivity(self._moves(policy))

    def reconstruction_frobenius_sq(self, workload: Workload, strategy: MarginalStrategy) -> float:
        """‖W A⁺‖_F² = Σ_R Σ_{T⊆R} r_T/(N_R λ_T), from the marginals' eigenvalues."""
        return strategy.error_factor(self.subsets_of(workload))

    def marginals_read(self, workload: Workload, policy: Policy | None = None) -> tuple[tuple[int, ...], ...]:
        """The marginals a release reads (measured with noise, or exact): the counts that
        :class:`~blowfish_te.workloads.MarginalCounts` must hold instead of the histogram."""
        strategy = self._strategy_for(workload, policy)
        return tuple(dict.fromkeys(strategy.subsets + strategy.exact))

    def measure(self, workload: Workload, x: np.ndarray | MarginalCounts, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        """A release from the histogram ``x`` or from :class:`~blowfish_te.workloads.MarginalCounts`."""
        strategy = self._strategy_for(workload, policy)
        if isinstance(x, MarginalCounts):
            tables, known = [x.table(s) for s in strategy.subsets], [x.table(e) for e in strategy.exact]
        else:
            tables, known = strategy.tables(x), [marginal_table(x, workload.domain, e) for e in strategy.exact]
        return self.measure_tables(workload, tables, known, epsilon, gen, policy)

    def measure_tables(self, workload: Workload, tables: Sequence[np.ndarray], known: Sequence[np.ndarray], epsilon: float,
                       gen: RandomSource, policy: Policy | None = None) -> Outcome:
        """The release from the marginal tables the strategy measures (``tables``, in the order
        of its ``subsets``, unweighted counts) and the exact ones (``known``, in the order of its
        ``exact``): what :meth:`measure` computes from a histogram, or a caller counts from records."""
        strategy = self._strategy_for(workload, policy)
        delta = self._sensitivity(workload, strategy, policy)
        scale = delta / epsilon
        if not np.isfinite(scale):
            raise ValueError(f"epsilon={epsilon!r} is too small: the noise scale Δ/ε = {delta}/{epsilon} overflows")
        values = np.concatenate([w * np.asarray(t, dtype=np.float64).reshape(-1)
                                 for w, t in zip(strategy.weights, tables)]) if tables else np.zeros(0)
        noisy = add_laplace(values, scale, gen, sensitivity=delta, integer=strategy.is_binary)
        measured, start = [], 0
        for t in tables:
            measured.append(noisy[start:start + np.size(t)].reshape(np.shape(t)))
            start += np.size(t)
        answers = strategy.answer(self.subsets_of(workload), measured, known)
        notes = ""
        if strategy.exact and any(strategy.exact):
            notes = ("exact (sensitivity 0 under the policy: functions of the disclosed totals): marginals on attributes "
                     + ", ".join(str(e) for e in strategy.exact if e))
        return Outcome(answers, sensitivity=delta, noise_scale=scale, notes=notes)


class WorkloadMarginals(MarginalMechanism):
    """The workload's own marginals, each measured once with weight 1 (those on attributes no
    neighbour can change are exact), answered by least squares: consistent, and never worse than
    Laplace noise on the marginals themselves (``laplace``)."""

    name = "marginals"

    def _build(self, shape, subsets, moves):
        return own_marginals(shape, subsets, moves)


class OptimizedMarginals(MarginalMechanism):
    """Weights over the lattice of marginals optimised for the workload and the policy's moves
    (:func:`~blowfish_te.strategies.marginals.optimize_weights`): measured tables have at most
    ``max_cells`` cells; never worse than the workload's own marginals."""

    name = "marginals_optimized"

    def __init__(self, max_cells: int = MAX_TABLE_CELLS, restarts: int = 12):
        self.max_cells = check_int(max_cells, "max_cells", minimum=1)
        self.restarts = check_int(restarts, "restarts", minimum=2)

    def _build(self, shape, subsets, moves):
        return optimize_weights(shape, subsets, moves, max_cells=self.max_cells, restarts=self.restarts)
