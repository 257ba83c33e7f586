"""Blowfish-native mechanisms for ordered domains (He, Machanavajjhala, Ding, SIGMOD 2014, §7).

Both measure cumulative counts s_j = x_0 + ... + x_j, whose sensitivity under a distance-threshold
policy G^θ is θ (1 on the line) — computed here from the policy's edges, never assumed. When the
policy is connected and has no ⊥, n = s_{K-1} is public (invariant under neighbours) and is used
exactly; otherwise it is measured like the other counts.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from .._cache import IdentityCache
from .._grid import ceil_log
from .._validation import check_epsilon, check_int, check_real
from ..noise import RandomSource, add_laplace
from ..policies import Policy, line
from ..policies import from_edges as policies_from_edges
from ..routes import Outcome
from ..sensitivity import check_compatible, sensitivity
from ..strategies import GeneralStrategy, Hierarchy
from ..strategies.base import integer_entries
from ..transform import transform
from ..trees import edge_span
from ..workloads import Boxes, RampedPrefixes, Stacked, Workload, as_workload
from .base import NativeMechanism


def _public_total(policy: Policy) -> bool:
    """n is invariant under neighbours when the policy is connected and never reaches ⊥."""
    return policy.is_connected and not policy.touches_bottom


def _check_ordered(policy: Policy, workload: Workload, name: str) -> None:
    check_compatible(workload, policy)
    if policy.ndim != 1:
        raise ValueError(f"{name} needs a 1-D ordered domain, got policy {policy.name} of shape {policy.shape}")


def _interior_bottom(policy: Policy) -> bool:
    """Whether ⊥ is joined to a cell other than the last one."""
    return bool(np.any(policy.bottom_cells() < policy.size - 1))


def _line_to_bottom(k: int) -> Policy:
    """The path 0 - 1 - ... - (K-1) - ⊥: its transform has the cumulative counts s_0..s_{K-1}."""
    return policies_from_edges(k, np.stack([np.arange(k), np.arange(1, k + 1)], axis=1))


def _prefixes(k: int, ends) -> Boxes:
    ends = np.asarray(ends, dtype=np.int64)
    return Boxes((k,), np.zeros_like(ends), ends, name=f"prefixes({k}, {ends.size})")


def _s_nodes(k: int, ends: np.ndarray, ramp: int) -> Workload:
    """Cumulative counts at ``ends``; with ``ramp`` > 1 each (but n = s_{K-1}) averages the ``ramp``
    counts centred on its end (:class:`~blowfish_te.workloads.RampedPrefixes`), the windows
    cut at the next one and at the last cell."""
    if ramp <= 1:
        return _prefixes(k, ends)
    total = ends == k - 1
    starts = np.where(total, k - 1, np.maximum(ends - ramp // 2, 0))
    limits = np.append(starts[1:], k)  # a window stops before the next one starts
    return RampedPrefixes(k, starts, np.where(total, 1, np.minimum(ramp, limits - starts)))


class Ordered(NativeMechanism):
    """The Ordered mechanism (seed §7.1): noisy cumulative counts, then constrained inference.

    Privacy: the cumulative counts s_0..s_{K-2} (and s_{K-1} when n is not public) have policy
    sensitivity Δ_G computed from the edges (1 on the line, θ on G^θ); Laplace(Δ_G/ε) noise on each
    makes them (ε, G)-Blowfish (He et al. Thm 5.1); with ``rng=None`` the noise is exact discrete
    Laplace (the counts are integers). Isotonic regression, clipping to [0, n] and the
    answers W x̂ are post-processing. Per range query the unconstrained error is at most 4Δ²/ε²
    (Thm 7.1); the expected error reported is that of the unconstrained estimate, exact and
    data-independent, and only when ``constrained=False``.
    """

    name = "ordered"
    analytic_error = True  # unconstrained: with isotonic regression the error depends on the data (None)

    def __init__(self, constrained: bool = True):
        self.constrained = bool(constrained)

    def _strategy(self, policy: Policy) -> Boxes:
        k = policy.size
        return _prefixes(k, np.arange(k - 1 if _public_total(policy) else k))

    def serves(self, workload: Workload, policy: Policy) -> bool:
        _check_ordered(policy, workload, self.name)
        return True

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        policy = self.needs_policy(policy)
        k = policy.size
        public = _public_total(policy)
        if k == 1 and public:  # one cell, no ⊥: its count is the public total
            return Outcome(np.asarray(workload.matvec(x), dtype=np.float64), component_totals={0: int(x[0])}, sensitivity=0.0,
                           noise_scale=0.0)
        counts = self._strategy(policy)
        delta = sensitivity(counts, policy)
        scale = delta / epsilon
        if not np.isfinite(scale):
            raise ValueError(f"epsilon={epsilon!r} is too small: the noise scale overflows")
        # prefix counts of a histogram: integers for every x, L1 sensitivity Δ_G under the policy
        noisy = add_laplace(counts.matvec(x), scale, gen, sensitivity=delta, integer=True)
        total = float(x.sum()) if public else float(noisy[-1])
        cumulative = noisy[: k - 1]
        if self.constrained:
            from ..smoothing import nondecreasing  # scipy.optimize with it: loaded on first use

            cumulative = nondecreasing(cumulative, total)
        estimate = np.diff(np.concatenate([[0.0], cumulative, [total]]))
        totals = {k - 1: int(x.sum())} if public else {}
        return Outcome(np.asarray(workload.matvec(estimate), dtype=np.float64), totals, delta, scale)

    def expected_error(self, workload: Workload | ArrayLike, epsilon: float, policy: Policy | None = None) -> float | None:
        """2 (Δ/ε)² Σ_j ‖W (e_j - e_{j+1})‖² (+ ‖W e_{K-1}‖² when n is measured), unconstrained."""
        policy = self.needs_policy(policy)
        if self.constrained:
            return None
        workload = as_workload(workload)
        _check_ordered(policy, workload, self.name)
        epsilon = check_epsilon(epsilon)
        k = policy.size
        public = _public_total(policy)
        if k == 1 and public:
            return 0.0
        scale = sensitivity(self._strategy(policy), policy) / epsilon
        if not np.isfinite(scale):
            raise ValueError(f"epsilon={epsilon!r} is too small: the noise scale overflows")
        cells = np.arange(k - 1)
        frobenius = workload.difference_norms(cells, cells + 1, "l2sq").sum()
        if not public:
            frobenius += workload.difference_norms([k - 1], [k], "l2sq").sum()
        return 2.0 * scale * scale * float(frobenius)


def _weighted_sensitivity(groups) -> float:
    """Σ_g w_g·Δ_g over the measured groups, w_g = 1/scale_g the weight actually used (ε_S + ε_H up
    to rounding): a bound on the L1 sensitivity, under the policy, of the weighted rows W_w of
    :meth:`OrderedHierarchical._plan`, as ‖W_w (x - x')‖₁ = Σ_g w_g ‖A_g (x - x')‖₁ <= Σ_g w_g Δ_g
    for neighbours x, x'. Groups with Δ_g = 0 (weight 1) add nothing."""
    return math.fsum(delta * (1.0 / scale) for _, _, delta, scale in groups if scale > 0)


def oh_constants(k: int, theta: int, fanout: int) -> tuple[float, float]:
    """c1 = 4(K - θ)/(K + 1) and c2 = 8(f - 1) h³ · K/(K + 1) of He et al. (SIGMOD 2014) eq. (14), with the tree
    height h = ⌈log_f θ⌉ of their construction (8h²/ε_H² per node, (f - 1)h nodes per query)."""
    c1 = 4.0 * (k - theta) / (k + 1)
    h = ceil_log(theta, fanout)
    c2 = 8.0 * (fanout - 1) * h**3 * k / (k + 1)
    return c1, c2


def oh_optimal_split(k: int, theta: int, fanout: int) -> float:
    """ε_S*/ε = c1^{1/3} / (c1^{1/3} + c2^{1/3}) (seed eq. (15))."""
    c1, c2 = oh_constants(k, theta, fanout)
    if c1 == 0 and c2 == 0:
        return 0.5
    return c1 ** (1 / 3) / (c1 ** (1 / 3) + c2 ** (1 / 3))


def oh_predicted_error(k: int, theta: int, fanout: int, epsilon: float) -> float:
    """He et al.'s per-range-query error at the optimal split, (c1^{1/3} + c2^{1/3})³ / ε² (eq. 15)."""
    c1, c2 = oh_constants(k, theta, fanout)
    return (c1 ** (1 / 3) + c2 ** (1 / 3)) ** 3 / epsilon**2


class OrderedHierarchical(NativeMechanism):
    """The Ordered Hierarchical mechanism (seed §7.2) for a distance-threshold policy G^θ.

    Measures S nodes — cumulative counts at the block ends θ, 2θ, ... — with budget ε_S, and on each
    block of θ cells a hierarchy of fan-out f below the block total (which the S nodes give) with
    ε_H = ε - ε_S;
    ε_S defaults to the optimal split of eq. (15), θ is read off the policy (its widest edge; the
    whole domain when ⊥ joins interior cells, as under unbounded DP, where the S node is n itself
    and gets at least one level's share of ε). ``spacing`` puts the S nodes (and the blocks) every
    ``spacing`` cells instead of every θ: an S-node set then has sensitivity about θ/spacing, the
    blocks' trees are lower; ``ramp`` spreads each S node's step over that many cells (the mean of
    the cumulative counts around the block end, :class:`~blowfish_te.workloads.RampedPrefixes`;
    see :class:`TunedOrderedHierarchical`).

    Privacy: each group's noise is Laplace(Δ_G/ε_group), Δ_G computed from the policy's edges for
    that group's rows; sequential composition gives (ε_S + ε_H, G)-Blowfish. (The seed gives the first
    block's tree the whole ε; this version keeps the plain composition argument.) The answers are the
    least-squares estimate from all measurements — post-processing; when n is public the least
    squares runs on the line transform's coordinates, so n enters exactly.

    All groups are measured in one draw at unit scale on the weighted rows (w_g = ε_g/Δ_g), whose L1
    sensitivity is at most Σ_g w_g·Δ_g = ε_S + ε_H: Laplace(1) on them is the same composition. With
    ``rng=None`` that draw is lattice Laplace calibrated to this sensitivity (exact discrete Laplace
    when every weight is 1), so releases are hardened.
    """

    name = "ordered_hierarchical"
    analytic_error = True

    def __init__(self, fanout: int = 16, split: float | None = None, spacing: int | None = None,
                 ramp: int | None = None):
        self.fanout = check_int(fanout, "fanout", minimum=2)
        self.split = None if split is None else check_real(split, "split (ε_S / ε)", 0, 1, exclusive=True)
        self.spacing = None if spacing is None else check_int(spacing, "spacing (cells between S nodes)", minimum=1)
        self.ramp = None if ramp is None else check_int(ramp, "ramp (cells an S node's step is spread over)", minimum=1)

    @staticmethod
    def _theta(policy: Policy) -> int:
        """θ read off the policy: its widest edge, the whole domain when ⊥ joins interior cells."""
        k = policy.size
        if _interior_bottom(policy):  # records appear anywhere (e.g. unbounded DP): one block
            return k
        return max(1, min(edge_span(policy), k))

    def _groups(self, policy: Policy, spacing: int | None = None, fanout: int | None = None,
                ramp: int | None = None) -> tuple[Workload | None, Boxes | None, int]:
        """S nodes every ``spacing`` cells (default: this mechanism's spacing, else θ), their steps
        spread over ``ramp`` cells (default: this mechanism's; at most the spacing), and the
        fan-out-``fanout`` hierarchies (default: this mechanism's) below each block of ``spacing``
        cells; also returns the block size."""
        k = policy.size
        fanout = fanout or self.fanout
        block = min(spacing or self.spacing or self._theta(policy), k)
        ends = np.arange(block - 1, k - 1, block)
        if not _public_total(policy):
            ends = np.append(ends, k - 1)
        s_rows = _s_nodes(k, ends, min(ramp or self.ramp or 1, block)) if ends.size else None
        h_rows = None
        if block > 1:
            los, his = [], []
            for start in range(0, k, block):  # below each block's root: the S nodes give block totals
                tree = Hierarchy((min(block, k - start),), fanout)
                los.append(tree.lo[1:, 0] + start)
                his.append(tree.hi[1:, 0] + start)
            h_rows = Boxes((k,), np.concatenate(los), np.concatenate(his), name=f"blocks({k}, size={block}, f={fanout})")
        return s_rows, h_rows, block

    def _default_share(self, policy: Policy, block: int, has_s: bool) -> float:
        """ε_S / ε: ``split`` if given, else eq. (15) for blocks of ``block`` cells."""
        if self.split is not None:
            return self.split
        share = oh_optimal_split(policy.size, block, self.fanout)
        if not _public_total(policy) and has_s:
            # eq. (15) assumes n public (c1 = 0 when θ = K): n itself must then be measured, so
            # the S nodes get at least one hierarchy level's share, 1 / (h + 1)
            share = max(share, 1.0 / (ceil_log(block, self.fanout) + 1))
        return share

    def _settings(self, workload: Workload, policy: Policy) -> tuple[int | None, float | None, int | None, int | None]:
        """(spacing, ε_S / ε, fan-out, ramp) for this workload: the constructor's (None: θ, eq. (15),
        steps)."""
        return None, None, None, None

    def _plan(self, policy: Policy, epsilon: float, spacing: int | None = None, share: float | None = None,
              fanout: int | None = None, ramp: int | None = None):
        s_rows, h_rows, block, deltas = self._measured_groups(policy, spacing, fanout, ramp)
        theta = self._theta(policy)
        if share is None:
            share = self._default_share(policy, block, s_rows is not None)
        if not 0.0 <= share <= 1.0:  # ε_S = share·ε and ε_H = (1 − share)·ε must compose to ε
            raise ValueError(f"the share of ε for the S nodes must lie in [0, 1], got {share!r}")
        if h_rows is None:
            share = 1.0
        if s_rows is None:
            share = 0.0
        groups = []
        for label, rows, eps in (("S", s_rows, share * epsilon), ("H", h_rows, (1 - share) * epsilon)):
            if rows is None or eps <= 0:
                continue
            delta = deltas[label]
            if delta > 0 and not (np.isfinite(delta / eps) and eps / delta > 0):
                raise ValueError(f"epsilon={epsilon!r} is too small: the noise scales overflow")
            groups.append((label, rows, delta, delta / eps))
        if not groups:
            return [], None
        name = f"oh({policy.size}, theta={theta}, spacing={block})"
        if not all(isinstance(rows, Boxes) for _, rows, _, _ in groups):  # ramped S nodes
            parts = [rows for _, rows, _, _ in groups]
            return groups, Stacked(parts, [1.0 / scale if scale > 0 else 1.0 for *_, scale in groups], name=name)
        lo = np.concatenate([rows.lo for _, rows, _, _ in groups])
        hi = np.concatenate([rows.hi for _, rows, _, _ in groups])
        weights = np.concatenate([np.full(rows.num_queries, 1.0 / scale if scale > 0 else 1.0) for _, rows, _, scale in groups])
        weighted = Boxes(policy.shape, lo, hi, name=name, weights=weights)
        return groups, weighted

    def _measured_groups(self, policy: Policy, spacing: int | None, fanout: int | None, ramp: int | None):
        """:meth:`_groups` and each group's Δ_G from the policy's edges, built once per policy and
        resolved settings: tuning evaluates a plan at several splits, and both the rows (a tree per
        block) and Δ_G (a pass over every edge) cost seconds on large domains."""
        key = (spacing or self.spacing or self._theta(policy), fanout or self.fanout, ramp or self.ramp)
        per_policy = self._cache("groups").get(policy, dict)
        if key not in per_policy:
            s_rows, h_rows, block = self._groups(policy, *key)
            deltas = {label: sensitivity(rows, policy) for label, rows in (("S", s_rows), ("H", h_rows)) if rows is not None}
            per_policy[key] = (s_rows, h_rows, block, deltas)
        return per_policy[key]

    def _solver(self, policy: Policy, weighted: Workload):
        """Least squares in cumulative coordinates, where every S node and block range touches at
        most two unknowns (a sparse Gram at any size): the line tree ending at the last cell when n
        is public (n enters exactly), else ending at ⊥ (n is one more unknown)."""
        k = policy.size
        if _public_total(policy):
            tree = transform(line(k))
        else:
            tree = transform(_line_to_bottom(k))
        return GeneralStrategy(tree.workload(weighted)), tree

    def serves(self, workload: Workload, policy: Policy) -> bool:
        _check_ordered(policy, workload, self.name)
        return True

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        policy = self.needs_policy(policy)
        groups, weighted = self._plan(policy, epsilon, *self._settings(workload, policy))
        if weighted is None:  # a single cell with a public total: nothing to measure
            return Outcome(np.asarray(workload.matvec(x), dtype=np.float64), component_totals={0: int(x[0])}, sensitivity=0.0,
                           noise_scale=0.0)
        # unit scale after weighting: the rows of group g carry w_g = 1/scale_g = ε_g/Δ_g, so the weighted
        # vector's L1 sensitivity under the policy is at most Σ_g w_g·Δ_g = ε_S + ε_H (groups with Δ_g = 0
        # add nothing), and Laplace(1) on it is (ε_S + ε_H, G)-Blowfish — the lattice's calibration
        y = add_laplace(weighted.matvec(x), 1.0, gen, sensitivity=_weighted_sensitivity(groups),
                        integer=integer_entries(weighted))  # integer only when every weight is 1
        solver, tree = self._solver(policy, weighted)
        totals_arr = tree.totals(x)
        estimate = tree.reconstruct(solver.pinv(y - tree.offset(weighted, totals_arr)), totals_arr)
        totals = dict(zip(tree.roots.tolist(), totals_arr.tolist()))
        # the largest sensitivity and scale over the groups (each group's own are in the plan)
        return Outcome(np.asarray(workload.matvec(estimate), dtype=np.float64), totals,
                       max(delta for _, _, delta, _ in groups), max(scale for _, _, _, scale in groups))

    def expected_error(self, workload: Workload | ArrayLike, epsilon: float, policy: Policy | None = None) -> float:
        """2 ‖W A_w⁺‖_F² for the noise-weighted strategy A_w (unit Laplace scale), exact.

        The split does not depend on ε, so every weight scales with ε and the error is exactly
        its value at ε = 1 divided by ε²: computed once per (workload, policy)."""
        policy = self.needs_policy(policy)
        workload = as_workload(workload)
        _check_ordered(policy, workload, self.name)
        epsilon = check_epsilon(epsilon)

        per_policy = self._cache("expected").get(policy, IdentityCache)
        at_unit = per_policy.get(workload, lambda: self._unit_error(workload, policy, *self._settings(workload, policy)))
        return at_unit / epsilon**2

    def measurements(self, workload: Workload | ArrayLike, policy: Policy, epsilon: float) -> Workload | None:
        """The rows a release of ``workload`` measures at ``epsilon``, each group weighted by
        ε_group/Δ_group, so unit Laplace noise on them is the release's noise (their L1 sensitivity
        under ``policy`` is at most ε); None when nothing is measured (one cell, n public). For
        inspecting the plan or comparing it with other strategies."""
        workload = as_workload(workload)
        _check_ordered(policy, workload, self.name)
        epsilon = check_epsilon(epsilon)
        return self._plan(policy, epsilon, *self._settings(workload, policy))[1]

    def _unit_error(self, workload: Workload, policy: Policy, spacing: int | None, share: float | None,
                    fanout: int | None = None, ramp: int | None = None) -> float:
        """The expected total squared error at ε = 1 of the plan with these settings."""
        _, weighted = self._plan(policy, 1.0, spacing, share, fanout, ramp)
        if weighted is None:
            return 0.0
        key = weighted.fingerprint()
        known = _EXACT_ERRORS.get(policy, IdentityCache).get(workload, dict)
        if key is None or key not in known:
            solver, tree = self._solver(policy, weighted)
            error = 2.0 * solver.lstsq_frobenius_sq(tree.workload(workload))
            if key is None:
                return error
            known[key] = error
        return known[key]


#: Exact errors at ε = 1 by (policy, workload, content of the weighted rows), shared by every
#: instance: tuning evaluates He et al.'s plan, which the untuned mechanism evaluates too, and
#: different settings can measure the same rows (θ = 1: every spacing and fan-out measures single
#: cells). The error is a function of these three alone (the solver depends on the policy only).
_EXACT_ERRORS = IdentityCache()


def _checked_settings(record) -> tuple[int | None, float | None, int | None, int | None] | None:
    """Stored tuned settings (spacing, share, fan-out, ramp), or None when the record is absent or
    not such settings: whole numbers of the right ranges (or None), a share strictly inside (0, 1).
    Privacy does not rest on them: Δ of each group is computed from the policy's edges for the
    rows a plan measures, and :meth:`OrderedHierarchical._plan` refuses a share outside [0, 1]."""
    try:
        spacing, share, fanout, ramp = record["settings"]
    except (KeyError, TypeError, ValueError):
        return None
    whole = [(spacing, 1), (fanout, 2), (ramp, 2)]
    if not all(v is None or (type(v) is int and v >= low) for v, low in whole):
        return None
    if share is not None and not (type(share) is float and 0.0 < share < 1.0):
        return None
    return spacing, share, fanout, ramp


def _error_of(plan: tuple) -> float:
    return plan[0]


def ramp_width(spacing: int) -> int | None:
    """Cells a tuned S node's step is spread over: RAMP_FRACTION of the spacing, at most
    √(RAMP_GRAM_CELLS · spacing); None (a plain step) below 2 cells."""
    width = min(int(RAMP_FRACTION * spacing), math.isqrt(RAMP_GRAM_CELLS * spacing))
    return width if width >= 2 else None


#: Block sizes the tuned mechanism compares, as divisors of θ: θ, θ/2, θ/4 (at least 1 cell). At
#: K = 4096 (ε = 0.1, prefixes and random ranges, θ = 4, 16, 64) θ/8 never won.
TUNED_SPACING_DIVISORS = (1, 2, 4)
#: The two splits ε_S/ε at which each plan's error is evaluated to fit c_S/ε_S² + c_H/ε_H².
FIT_SHARES = (1.0 / 3.0, 2.0 / 3.0)
#: Fraction of the spacing b an S node's step is spread over in the tuned plans: at K = 4096
#: (prefixes and random ranges, θ = 4, 16, 64, single cells or a hierarchy below) ramps of 3b/4
#: beat b/2 in all seven cases measured, and b in the three where it was tried.
RAMP_FRACTION = 0.75
#: Ramps are at most √(RAMP_GRAM_CELLS · b) wide, so that the least-squares Gram (w² entries per
#: ramp, a ramp every b cells) keeps a sparse factorisation at any domain size.
RAMP_GRAM_CELLS = 32
#: Seconds per (cell × query) of one exact error evaluation (K = 4096 prefixes: about 0.8 s on the
#: 2-core reference machine): the cost model of :meth:`TunedOrderedHierarchical.predicted_seconds`.
SECONDS_PER_CELL_QUERY = 5e-8
#: Seconds per policy edge of one plan's Δ_G (both groups over every edge, once per plan; K = 2^18,
#: θ = 64: about 5 s for 16.8 M edges on the reference machine), the other term of that model.
SECONDS_PER_EDGE = 3e-7


class TunedOrderedHierarchical(OrderedHierarchical):
    """Ordered Hierarchical with the S-node spacing, the blocks' fan-out and the split ε_S/ε chosen
    for the workload.

    The template is He et al.'s (SIGMOD 2014, §7.2): S nodes every b cells, a hierarchy in each
    block of b cells. He et al. fix b = θ; a smaller b makes the S-node set cost about θ/b (a
    neighbour's move of up to θ cells crosses that many block ends) but shortens every query's
    walk inside a block, and the best b depends on θ and the workload. The plans compared are
    b = θ with the fan-out-f hierarchy and b = θ/2, θ/4 with it and with single cells only below
    the S nodes (sensitivity 2, not 2 per level). In these plans each S node's step is spread
    into a ramp over w = 3b/4 cells (the mean of the w cumulative counts around the block end,
    :class:`~blowfish_te.workloads.RampedPrefixes`): a move changes each ramp by the share of its
    window it crosses, so the set costs no more than the steps (Δ_S is computed from the edges
    all the same), and the least squares reads each block end from w counts instead of one.
    For each plan, the exact expected error at two splits fits the model c_S/ε_S² + c_H/ε_H²,
    whose optimum is ε_S/ε = c_S^⅓/(c_S^⅓ + c_H^⅓) with error (c_S^⅓ + c_H^⅓)³ (eq. (15)'s form);
    the plan with the least predicted optimum is evaluated exactly at its fitted split, and with
    plain steps; the least exact error among every evaluated plan — He et al.'s own included — is
    used, so the tuned error never exceeds :class:`OrderedHierarchical`'s.
    (K = 4096, θ = 64, prefixes: 13.1× the policy bound for He et al.'s plan, 10.6× with S nodes
    every 32 cells over single cells, 9.2× with their steps ramped; see docs/theory.md.)

    Privacy: as :class:`OrderedHierarchical` — the choice reads the workload and the policy only,
    never the data; each group's Δ_G is computed from the policy's edges for the rows measured and
    its noise is Laplace(Δ_G/ε_group); sequential composition gives (ε, G)-Blowfish.
    """

    name = "ordered_hierarchical_tuned"
    tunes_plan = True

    def __init__(self, fanout: int = 16):
        super().__init__(fanout)

    def _candidates(self, policy: Policy) -> list[tuple[int, int, int | None]]:
        """The (spacing, fan-out, ramp) plans compared, without duplicates (a fan-out of at least
        the block size measures single cells): blocks of θ with the fan-out-f hierarchy, finer
        blocks with it and with single cells, every S node ramped (:func:`ramp_width`)."""
        theta = self._theta(policy)
        if theta == policy.size:  # one block (e.g. unbounded DP): only the split is tuned
            return [(theta, self.fanout, None)]
        plans = []
        for spacing in sorted({max(1, theta // d) for d in TUNED_SPACING_DIVISORS}, reverse=True):
            for fanout in (self.fanout,) if spacing == theta else (self.fanout, spacing):
                plan = (spacing, max(2, min(fanout, spacing)), ramp_width(spacing))
                if plan not in plans:
                    plans.append(plan)
        return plans

    def predicted_seconds(self, workload: Workload, policy: Policy) -> float:
        """Predicted tuning time from sizes alone (see :data:`SECONDS_PER_CELL_QUERY` and
        :data:`SECONDS_PER_EDGE`): data-independent and the same on every machine."""
        workload = as_workload(workload)
        queries = min(workload.num_queries, workload.size) if workload.structured_gram else workload.num_queries
        candidates = len(self._candidates(policy))
        plans = 2 + candidates  # with He et al.'s and the steps twin of the fitted plan
        evaluations = 3 + len(FIT_SHARES) * candidates  # and the fitted split
        return evaluations * SECONDS_PER_CELL_QUERY * workload.size * queries + plans * SECONDS_PER_EDGE * policy.num_edges

    def _settings(self, workload: Workload, policy: Policy) -> tuple[int | None, float | None, int | None, int | None]:
        """The tuned settings, kept per (workload, policy) in this process and in the strategy
        store across processes (they read the workload and the policy only)."""
        per_policy = self._cache("settings").get(policy, IdentityCache)
        return per_policy.get(workload, lambda: self._stored_settings(workload, policy))

    def _stored_settings(self, workload: Workload, policy: Policy) -> tuple[int | None, float | None, int | None, int | None]:
        from ..strategies.store import MAX_FINGERPRINT_EDGES, default_store, strategy_key

        store = default_store()
        small = policy.num_edges <= MAX_FINGERPRINT_EDGES
        key = strategy_key(f"{self.name}-settings", workload, policy, (self.fanout,)) if small else None
        settings = _checked_settings(store.load_record(key))
        if settings is None:
            settings = self._tune(workload, policy)
            store.save_record(key, {"settings": list(settings)})
        return settings

    def _tune(self, workload: Workload, policy: Policy) -> tuple[int | None, float | None, int | None, int | None]:
        evaluated = [(self._unit_error(workload, policy, None, None), (None, None, None, None))]  # He et al.'s plan
        low, high = FIT_SHARES
        fitted = []  # (predicted optimum, settings)
        for spacing, fanout, ramp in self._candidates(policy):
            s_rows, h_rows, _, _ = self._measured_groups(policy, spacing, fanout, ramp)
            if s_rows is None or h_rows is None:  # one group: no split to choose
                settings = (spacing, 0.5, fanout, ramp)
                evaluated.append((self._unit_error(workload, policy, *settings), settings))
                continue
            e_low = self._unit_error(workload, policy, spacing, low, fanout, ramp)
            e_high = self._unit_error(workload, policy, spacing, high, fanout, ramp)
            evaluated += [(e_low, (spacing, low, fanout, ramp)), (e_high, (spacing, high, fanout, ramp))]
            c_s, c_h = np.linalg.solve([[low**-2, (1 - low) ** -2], [high**-2, (1 - high) ** -2]], [e_low, e_high])
            if c_s > 0 and c_h > 0:  # else the model does not fit: the evaluated splits stand
                share = float(np.clip(np.cbrt(c_s) / (np.cbrt(c_s) + np.cbrt(c_h)), 0.02, 0.98))
                fitted.append(((np.cbrt(c_s) + np.cbrt(c_h)) ** 3, (spacing, share, fanout, ramp)))
        if fitted:
            settings = min(fitted, key=_error_of)[1]
            evaluated.append((self._unit_error(workload, policy, *settings), settings))
            if settings[3] is not None:  # its twin with plain steps (better at a few small domains)
                steps = settings[:3] + (None,)
                evaluated.append((self._unit_error(workload, policy, *steps), steps))
        return min(evaluated, key=_error_of)[1]
