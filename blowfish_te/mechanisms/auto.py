"""Strategy selection: the data-independent strategy with the lowest analytic expected error,
the optimised one included when it fits a time budget."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .. import trees
from .._validation import check_real
from ..noise import RandomSource
from ..policies import Policy
from ..routes import LARGE_DOMAIN_CELLS, MechanismTags, Outcome
from ..workloads import Marginals, Workload, as_workload
from .base import MECHANISMS, Mechanism, get_mechanism, mechanism_class


def analytic_mechanisms() -> tuple[str, ...]:
    """Every registered mechanism (plug-ins included) whose expected error is analytic (tag
    ``analytic_error``): the linear data-independent ones and the Blowfish-native ones that
    compute theirs; ``optimized`` and ``auto`` itself are left to :class:`Auto`. Sorted by
    name with ``identity`` first: ties go to the first compared, and on a histogram GreedyH's and
    the Laplace mechanism's strategies are the identity too, where a user expects ``identity``."""
    names = [name for name, cls in MECHANISMS.items()
             if MechanismTags.of(cls).analytic_error and name not in ("optimized", "auto")]
    return tuple(sorted(names, key=lambda name: (name != "identity", name)))


class Auto(Mechanism):
    """Chooses, per workload and policy, among data-independent mechanisms (``candidates``; by
    default every registered one with an analytic error, :func:`analytic_mechanisms`: the Laplace
    mechanism on the workload itself and the marginal strategies included) and the optimised
    strategy (``optimized``, see :class:`~blowfish_te.mechanisms.Optimized`) when its predicted
    optimisation time — a cost model of sizes, never a clock — is within ``budget`` seconds; a
    candidate that tunes its own plan (``ordered_hierarchical_tuned``) is held to the same budget.
    On a domain too large for a histogram (over ``LARGE_DOMAIN_CELLS``), and for marginals at any
    size, only mechanisms that need no array of the domain's size are compared
    (``handles_large_domain``: the Laplace mechanism on the workload and the marginal strategies).
    Strategies over cells answer a marginal with error that grows with the cells it sums, and their
    plans need work of the domain's size or of its edges' (GreedyH asked for 23 GB under the
    attribute policy on a 1.2·10⁶-cell grid; the hierarchies took 55–115 s, for 3,400–15,700 times
    the error of the marginal strategies). Below that size they never won either: over 54 marginal
    workloads of 8–4,096 cells (1- to 3-way, unbounded DP and the attribute policy) the best
    strategy over cells was 1.00–11.2 times the best marginal strategy (equal on 12), while
    comparing them took up to 382 s where the marginal strategies took 0.12–1.1 s
    (``benchmarks/marginal_candidates.py``). Under the L2 sensitivity this is a theorem: the workload
    is invariant under permuting the values of each attribute, the error is convex in the
    strategy's Gram matrix, so averaging that matrix over those permutations gives a weighted
    marginal strategy that is no worse. Under Laplace noise it is measured. :func:`blowfish_te.plan`
    with route ``"auto"`` weighs every route of every candidate and keeps the lowest analytic
    expected error; the release names the mechanism that ran and why. The choice is planned once
    per (workload, policy, route) and kept in the strategy store, then read at any ε
    (:class:`~blowfish_te.routes.ChoiceRoute`); the standard workloads' choices ship with the package.

    Privacy: the choice depends on the workload, policy and ε only (never on the data), so it is
    free; the release is exactly the chosen mechanism's, with its own privacy argument (Laplace
    noise calibrated to the sensitivity of the chosen strategy for the neighbour relation). One
    release spends ε once.
    """

    name = "auto"
    routes = ("choice",)

    def __init__(self, budget: float = 10.0, candidates: tuple[str, ...] | None = None):
        self.budget = check_real(budget, "budget (seconds)", 0)
        if candidates is not None:
            if isinstance(candidates, str):
                raise TypeError(f"candidates must be a tuple of mechanism names or None (every registered one with an "
                                f"analytic error), got {candidates!r}")
            # a set has no order and ties go to the first candidate: sorted, so a choice is reproducible
            candidates = tuple(sorted(candidates) if isinstance(candidates, (set, frozenset)) else candidates)
            if not all(isinstance(c, str) for c in candidates):
                raise TypeError(f"candidates must be a tuple of mechanism names or None (every registered one with an "
                                f"analytic error), got {candidates!r}")
            for c in candidates:
                if mechanism_class(c) is Auto:
                    raise ValueError("candidates cannot include 'auto' itself")
        self.candidates = candidates

    def compared(self) -> tuple[str, ...]:
        """The names of the candidates compared (besides ``optimized``)."""
        return analytic_mechanisms() if self.candidates is None else self.candidates

    def choices(self, workload: Workload, policy: Policy | None = None, route: str = "auto") -> tuple[list[tuple[Mechanism, str]], str]:
        """The (mechanism, route) pairs to compare, and a sentence on the budgets: the optimised
        strategy joins with every route when all its optimisations fit, with the exact route alone
        when only that one does (route ``"auto"``), else not at all; a self-tuning native candidate
        joins when its predicted tuning time fits."""
        pairs, notes = [], []
        within = f"<= budget {self.budget:g} s"
        marginals = isinstance(workload, Marginals)
        large = marginals or workload.size > LARGE_DOMAIN_CELLS
        too_large = []
        for name in self.compared():
            mech = get_mechanism(name)
            if large and not mech.handles_large_domain(workload):
                too_large.append(name)
                continue
            if mech.tags.tunes_plan and policy is not None and policy.ndim == 1:
                seconds = mech.predicted_seconds(workload, policy)
                if seconds > self.budget:
                    notes.append(f"{name} skipped (predicted {seconds:.2g} s > budget {self.budget:g} s)")
                    continue
                notes.append(f"{name} considered (predicted {seconds:.2g} s {within})")
            pairs.append((mech, route))
        if large:
            skipped = ", ".join(["optimized", *too_large])
            if marginals:
                return pairs, f"skipped for marginals (strategies over cells: never better on them, slow to plan): {skipped}"
            return pairs, f"skipped on {workload.size} cells (they work on arrays of the domain's size): {skipped}"
        optimizer = get_mechanism("optimized")
        exact = optimizer.predicted_seconds(workload, policy)
        transforms = 0.0
        if policy is not None and not policy.is_unbounded_dp:

            count = 1 if policy.is_forest else len(trees.candidates(policy))
            transforms = count * optimizer.predicted_transform_seconds(policy.size)
        if route != "exact" and exact + transforms <= self.budget:
            pairs.append((optimizer, route))
            note = f"optimized considered (predicted {exact + transforms:.2g} s {within})"
        elif route in ("auto", "exact") and exact <= self.budget:
            pairs.append((optimizer, "exact"))
            note = (f"optimized considered in the exact route (predicted {exact:.2g} s {within}; "
                    f"its transform routes {transforms:.2g} s more)")
        else:
            note = f"optimized skipped (predicted {exact + transforms:.2g} s > budget {self.budget:g} s)"
        return pairs, "; ".join([note, *notes])

    def best(self, workload: Workload, epsilon: float = 1.0) -> Mechanism:
        """The candidate of lowest analytic expected error for ``workload`` (unit changes; ties go
        to the first compared). Every analytic error scales as 1/ε², so the choice is the same at
        every ``epsilon``."""
        best, best_error = None, float("inf")
        for mech, _ in self.choices(workload)[0]:
            try:
                error = mech.expected_error(workload, epsilon)
            except (NotImplementedError, TypeError, ValueError):
                continue  # a native mechanism, or a size it cannot compute
            if error is not None and error < best_error:
                best, best_error = mech, error
        if best is None:
            raise ValueError(f"no candidate of {self.compared()} has an analytic error for {workload.name}")
        return best

    def expected_error(self, workload: Workload | ArrayLike, epsilon: float) -> float | None:
        workload = as_workload(workload)
        return self.best(workload, epsilon).expected_error(workload, epsilon)

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        self.unit_changes(policy)
        return Outcome(np.asarray(self.best(workload, epsilon).run(workload, x, epsilon, gen), dtype=np.float64))
