"""Strategies that measure marginals, with least squares over them that never builds the full table
(in the spirit of HDMM's marginals template: McKenna, Miklau, Hay, Machanavajjhala, VLDB 2018).

The domain is a product of d attributes of sizes n_1..n_d (K = Π n_i cells). The marginal on a set
S of attributes, M_S x, sums x over the attributes outside S; its table has N_S = Π_{i∈S} n_i
cells. Per attribute let P = 11ᵀ/n and Q = I - P; for a set T of attributes the projector
E_T = ⊗_{i∈T} Q_i ⊗_{i∉T} P_i has rank r_T = Π_{i∈T} (n_i - 1), and the E_T are orthogonal and sum
to I. Every Gram M_Sᵀ M_S = (K/N_S) Σ_{T⊆S} E_T is diagonal in them, so a strategy A that
measures w_S M_S x for S in a set C, and a workload W of marginals R, have

    AᵀA = K Σ_T λ_T E_T,  λ_T = Σ_{S∈C, S⊇T} w_S²/N_S;   WᵀW = K Σ_T μ_T E_T,  μ_T = Σ_{R⊇T} 1/N_R.

Least squares needs λ_T > 0 wherever μ_T r_T > 0; its expected total squared error under Laplace
noise of scale b is 2 b² Σ_T r_T μ_T/λ_T, and it answers every marginal R of the workload from
tables no larger than the measured ones (the ANOVA decomposition of the R-table):

    M_R x̂ = (1/N_R) Σ_{T⊆R} (N_T/λ_T) spread_R(z_T),   z_T = Q_T Σ_{S⊇T} (w_S/N_S) sum_{S∖T}(y_S).

Marginals that no neighbour pair can change (sensitivity 0, e.g. the record total under a policy
without ⊥) are known exactly: their components enter with their true value and no error.

Sensitivity comes from the policy's structure (:func:`move_patterns`): a neighbour pair of cells
u, v changes the marginals on the sets S that meet the attributes D in which u and v differ, each
by an L1 norm of 2; a record added or removed (⊥) changes every marginal by 1. So

    Δ = max( Σ_S w_S  [if some edge reaches ⊥],  max_D 2 Σ_{S∩D≠∅} w_S ).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..policies import Policy
from ..workloads.base import Workload
from .lbfgs import minimize_nonnegative

__all__ = ["MarginalStrategy", "Moves", "move_patterns", "optimize_weights", "own_marginals", "marginal_table", "UNIT_CHANGES"]

#: Largest table (cells) a measured marginal of an optimised strategy may have.
MAX_TABLE_CELLS = 2**22
#: Above this many attributes the optimiser considers only subsets of the workload's marginals.
MAX_LATTICE_ATTRIBUTES = 14
#: Rounds of the optimiser's last step, each adding the one measured set that helps most...
MAX_ADDED_SETS = 8
#: ... of this many tried (the most promising before re-solving).
ADDITIONS_TRIED = 6
#: Above this many distinct cells a clique's patterns are read from one anchor cell or bounded above.
MAX_CLIQUE_PAIRS_CELLS = 4096


def _mask(subset) -> int:
    return sum(1 << int(i) for i in subset)


def _members(mask: int, d: int) -> tuple[int, ...]:
    return tuple(i for i in range(d) if mask >> i & 1)


@dataclass(frozen=True)
class Moves:
    """How neighbours move records, read off a policy: ``patterns`` are the maximal sets of
    attributes (bit masks) in which the two cells of an edge differ, ``bottom`` whether some
    edge reaches ⊥ (a record added or removed)."""

    patterns: tuple[int, ...]
    bottom: bool

    def costs(self, masks: Iterable[int]) -> np.ndarray:
        """(patterns [+ 1 for ⊥]) × subsets: the L1 change of each marginal under each move."""
        masks = np.asarray(list(masks), dtype=np.int64)
        rows = [np.where(masks & p, 2.0, 0.0) for p in self.patterns]
        if self.bottom:
            rows.append(np.ones(masks.size))
        return np.array(rows, dtype=np.float64).reshape(len(rows), masks.size)

    def free_attributes(self, d: int) -> int | None:
        """The attributes (mask) no edge changes, when no edge reaches ⊥: marginals on them (the
        total included) are functions of the disclosed component totals (sensitivity 0). None when
        a record can be added or removed: then every marginal, the total included, changes."""
        if self.bottom:
            return None
        changed = 0
        for p in self.patterns:
            changed |= p
        return ((1 << d) - 1) & ~changed


#: Unit changes of the histogram (x ± e_i): every marginal changes by 1.
UNIT_CHANGES = Moves((), True)


def _maximal(patterns) -> tuple[int, ...]:
    found = sorted(set(int(p) for p in patterns if p), key=lambda p: -bin(p).count("1"))
    kept: list[int] = []
    for p in found:
        if not any(p & q == p for q in kept):
            kept.append(p)
    return tuple(sorted(kept))


def _pair_patterns(shape: tuple[int, ...], u: np.ndarray, v: np.ndarray) -> set[int]:
    found: set[int] = set()
    for start in range(0, u.size, 1 << 20):
        cu = np.unravel_index(u[start:start + (1 << 20)], shape)
        cv = np.unravel_index(v[start:start + (1 << 20)], shape)
        masks = np.zeros(cu[0].size, dtype=np.int64)
        for axis in range(len(shape)):
            masks |= (cu[axis] != cv[axis]).astype(np.int64) << axis
        found.update(np.unique(masks).tolist())
    return found


def _clique_patterns(shape: tuple[int, ...], cells: np.ndarray) -> set[int]:
    """The maximal difference patterns of pairs of ``cells``: every pair when there are few
    distinct cells; else the attributes that vary in the clique when one cell differs from some
    other in all of them (the largest pattern possible), else that set as an upper bound."""
    coords = np.stack(np.unravel_index(cells, shape), axis=1)
    varying = _mask(np.flatnonzero((coords != coords[:1]).any(axis=0)))
    if not varying:
        return set()
    axes = np.array(_members(varying, len(shape)))
    for anchor in (coords[0], coords[-1], coords.min(axis=0), coords.max(axis=0)):
        differs = (coords[:, axes] != anchor[axes]).all(axis=1)
        if differs.any() and (anchor == coords).all(axis=1).any():
            return {varying}
    if cells.size > MAX_CLIQUE_PAIRS_CELLS:
        return {varying}  # an upper bound: the noise is calibrated to at least Δ
    i, j = np.triu_indices(cells.size, k=1)
    return _pair_patterns(shape, cells[i], cells[j])


def move_patterns(policy: Policy | None) -> Moves:
    """The :class:`Moves` of ``policy`` (unit changes for None), from its edge blocks and never
    from a listed edge set: an offset block changes the attributes where its offset is non-zero,
    explicit pairs are compared coordinate by coordinate, a clique (complete and partition
    policies) by the attributes that vary in it."""
    if policy is None:
        return UNIT_CHANGES
    shape = policy.shape
    found: set[int] = {_mask(np.flatnonzero(offset)) for offset in policy.offsets()}
    for cells in policy.cliques():
        found |= _clique_patterns(shape, cells)
    for u, v in policy.edge_pairs(offsets=False, bottom=False):
        found |= _pair_patterns(shape, u, v)
    return Moves(_maximal(found), policy.touches_bottom)


def marginal_table(x: np.ndarray, shape: tuple[int, ...], subset: tuple[int, ...]) -> np.ndarray:
    """M_S x as a table over the sorted attributes of ``subset`` (float64)."""
    others = tuple(i for i in range(len(shape)) if i not in subset)
    return np.asarray(x, dtype=np.float64).reshape(shape).sum(axis=others)


def _sum_to(table: np.ndarray, subset: tuple[int, ...], target: tuple[int, ...]) -> np.ndarray:
    """A table over ``subset`` summed down to the attributes of ``target`` ⊆ subset."""
    drop = tuple(j for j, a in enumerate(subset) if a not in target)
    return table.sum(axis=drop) if drop else table


def _centered(table: np.ndarray) -> np.ndarray:
    """Q on every axis: the mean along each axis removed in turn."""
    out = np.array(table, dtype=np.float64)
    for axis in range(out.ndim):
        out -= out.mean(axis=axis, keepdims=True)
    return out


def _spread(table: np.ndarray, subset: tuple[int, ...], target: tuple[int, ...], shape) -> np.ndarray:
    """A table over ``subset`` ⊆ target repeated along the other attributes of ``target``."""
    index = tuple(slice(None) if a in subset else np.newaxis for a in target)
    return np.broadcast_to(table[index] if subset else table, tuple(shape[a] for a in target))


class MarginalStrategy(Workload):
    """A strategy that measures marginals: rows w_S M_S for each set S of ``subsets`` (sorted
    attribute tuples), stacked in that order, each table in row-major order. ``exact`` lists
    marginals known exactly (sensitivity 0 under the policy the strategy was built for): their
    components are taken as they are, with no noise and no error. See the module docstring for
    the algebra; no method builds a K-sized array except those applied to a K-sized histogram."""

    def __init__(self, shape, subsets, weights, exact=(), name: str | None = None):
        shape = tuple(int(n) for n in shape)
        subsets = tuple(tuple(sorted(int(a) for a in s)) for s in subsets)
        weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        if len(set(subsets)) != len(subsets) or weights.shape != (len(subsets),) or not (weights > 0).all():
            raise ValueError("subsets must be distinct, with one positive weight each")
        self.subsets = subsets
        self.weights = weights
        self.weights.flags.writeable = False
        self.exact = tuple(sorted({tuple(sorted(s)) for s in exact}))
        self.is_binary = bool((weights == 1).all())
        self._sizes = [math.prod(shape[a] for a in s) for s in subsets]
        rows = sum(self._sizes)
        label = ", ".join(f"{w:.3g}·{s}" for s, w in zip(subsets, weights))
        super().__init__(shape, rows, name or f"marginal strategy [{label}]")

    # -- the algebra -------------------------------------------------------------------------
    def _cells(self, subset) -> int:
        return math.prod(self.domain[a] for a in subset)

    def _rank(self, subset) -> int:
        return math.prod(self.domain[a] - 1 for a in subset)

    def _known(self, subset) -> bool:
        return any(set(subset) <= set(e) for e in self.exact)

    def eigenvalue(self, subset: Iterable[int]) -> float:
        """λ_T = Σ_{S ⊇ T} w_S²/N_S (infinite for a component known exactly)."""
        if self._known(subset):
            return math.inf
        t = set(subset)
        return float(sum(w * w / n for s, w, n in zip(self.subsets, self.weights, self._sizes) if t <= set(s)))

    def error_factor(self, workload_subsets: Iterable[Iterable[int]]) -> float:
        """Σ_R Σ_{T⊆R} r_T/(N_R λ_T): the expected total squared error of least squares over
        the workload's marginals R is 2 (Δ/ε)² times this (infinite when the strategy does not
        support the workload)."""
        total = 0.0
        cache: dict[tuple[int, ...], float] = {}
        for r in workload_subsets:
            r = tuple(sorted(r))
            n_r = self._cells(r)
            for size in range(len(r) + 1):
                for t in itertools.combinations(r, size):
                    rank = self._rank(t)
                    if rank == 0:
                        continue
                    if t not in cache:
                        cache[t] = self.eigenvalue(t)
                    lam = cache[t]
                    if lam == 0:
                        return math.inf
                    total += rank / (n_r * lam)
        return total

    def sensitivity(self, moves: Moves) -> float:
        """Δ of the strategy for the neighbours ``moves`` describe (marginals in ``exact`` are
        measured without noise and cost nothing: they are free only when no move changes them, and
        a ValueError says so otherwise)."""
        if self.exact and moves.costs(_mask(e) for e in self.exact).any():
            raise ValueError(f"marginals {self.exact} are released without noise, but these neighbours change them: "
                             "build the strategy for the policy it is released under")
        costs = moves.costs(_mask(s) for s in self.subsets)
        return float((costs @ self.weights).max()) if costs.size else 0.0

    def tables(self, x: np.ndarray) -> list[np.ndarray]:
        """The unweighted marginal tables M_S x of a histogram, one per measured set."""
        return [marginal_table(x, self.domain, s) for s in self.subsets]

    def answer(self, workload_subsets: Iterable[Sequence[int]], measured: Sequence[np.ndarray], known: Sequence[np.ndarray]) -> np.ndarray:
        """Least-squares answers to the marginals ``workload_subsets`` (attribute tuples, each
        table raveled in its own attribute order, concatenated) from ``measured`` — the noisy
        tables y_S (already weighted: w_S M_S x + noise) in the order of :attr:`subsets` — and
        ``known``, the exact tables of :attr:`exact` in that order."""
        shape = self.domain
        components: dict[tuple[int, ...], np.ndarray] = {}

        def component(t):
            if t in components:
                return components[t]
            if self._known(t):
                source = next(e for e in self.exact if set(t) <= set(e))
                table = _sum_to(known[self.exact.index(source)], source, t)
                value = self._cells(t) * _centered(table)
            else:
                z = 0.0
                for s, w, n, y in zip(self.subsets, self.weights, self._sizes, measured):
                    if set(t) <= set(s):
                        z = z + (w / n) * _sum_to(y, s, t)
                lam = self.eigenvalue(t)
                if lam == 0:
                    raise ValueError(f"the strategy measures no marginal containing attributes {t}: "
                                     "it cannot answer this workload")
                value = (self._cells(t) / lam) * _centered(np.asarray(z, dtype=np.float64).reshape(
                    tuple(shape[a] for a in t)))
            components[t] = value
            return value

        answers = []
        for given in workload_subsets:
            r = tuple(sorted(given))
            table = np.zeros(tuple(shape[a] for a in r))
            for size in range(len(r) + 1):
                for t in itertools.combinations(r, size):
                    if self._rank(t) == 0 and t:
                        continue
                    table += _spread(component(t), t, r, shape)
            table /= self._cells(r)
            order = [r.index(a) for a in given]
            answers.append(np.transpose(table, order).reshape(-1))
        return np.concatenate(answers)

    # -- the operator (for callers that apply the strategy to a histogram) ------------------------
    def _matmat(self, x):
        x = np.asarray(x, dtype=np.float64)
        out = []
        for s, w in zip(self.subsets, self.weights):
            cols = [marginal_table(x[:, c], self.domain, s).reshape(-1) for c in range(x.shape[1])]
            out.append(w * np.stack(cols, axis=1))
        return np.concatenate(out, axis=0)

    def _rmatmat(self, y):
        y = np.asarray(y, dtype=np.float64)
        shape = self.domain
        full = tuple(range(len(shape)))
        out = np.zeros((self.size, y.shape[1]))
        start = 0
        for s, w, n in zip(self.subsets, self.weights, self._sizes):
            for c in range(y.shape[1]):
                table = y[start:start + n, c].reshape(tuple(shape[a] for a in s))
                out[:, c] += w * _spread(table, s, full, shape).reshape(-1)
            start += n
        return out

    def column_norms(self, norm: str = "l1") -> np.ndarray:
        """Every column holds one entry w_S per measured set: Σ w_S (L1), √Σ w_S² (L2), held once."""
        value = float(self.weights.sum()) if norm == "l1" else float(np.sqrt((self.weights**2).sum()))
        return np.broadcast_to(value, (self.size,))


def _lattice(shape, workload_subsets, free: int | None, max_cells: int) -> list[int]:
    """Candidate measured sets (masks): subsets of the workload's attributes with tables of at
    most ``max_cells`` cells (a set with attributes outside every workload marginal is dominated by
    its part inside), not free; only the workload's sets and their subsets with many attributes."""
    d = len(shape)
    used = 0
    for r in workload_subsets:
        used |= _mask(r)
    attrs = _members(used, d)
    if len(attrs) <= MAX_LATTICE_ATTRIBUTES:
        pool = {_mask(c) for size in range(1, len(attrs) + 1) for c in itertools.combinations(attrs, size)}
    else:
        pool = {_mask(c) for r in workload_subsets for size in range(1, len(r) + 1) for c in itertools.combinations(r, size)}
    pool |= {_mask(r) for r in workload_subsets if r}
    own = {_mask(r) for r in workload_subsets}
    return sorted(m for m in pool if not _is_free(m, free) and (m in own or math.prod(shape[a] for a in _members(m, d)) <= max_cells))


def optimize_weights(shape: Sequence[int], workload_subsets: Iterable[Iterable[int]], moves: Moves, max_cells: int = MAX_TABLE_CELLS,
                     restarts: int = 12, rng: int | np.random.Generator | None = 0) -> MarginalStrategy:
    """Weights over the lattice of marginals that minimise the expected error of least squares
    for the workload's marginals under ``moves``: min (Δ(w))² Σ_T r_T μ_T/λ_T(w) by projected L-BFGS
    (HDMM's marginals template, here with the policy's sensitivity: for several move patterns the
    max in Δ is smoothed by a p-norm, p raised in steps, and the result scored exactly). Starts
    from the workload's own marginals (kept when nothing beats them) and from equal weights."""
    shape = tuple(int(n) for n in shape)
    d = len(shape)
    free = moves.free_attributes(d)
    workload_subsets = [tuple(sorted(r)) for r in workload_subsets]
    own = own_marginals(shape, workload_subsets, moves)
    exact = own.exact
    candidates = _lattice(shape, workload_subsets, free, max_cells)
    if not candidates or not own.subsets:
        return own
    # the workload's components T with error, and the coefficients a_T = r_T μ_T
    targets: dict[int, float] = {}
    for r in workload_subsets:
        n_r = math.prod(shape[a] for a in r)
        for size in range(len(r) + 1):
            for t in itertools.combinations(r, size):
                m = _mask(t)
                rank = math.prod(shape[a] - 1 for a in t)
                if rank and not _is_free(m, free):
                    targets[m] = targets.get(m, 0.0) + rank / n_r
    keys = list(targets)
    a = np.array([targets[m] for m in keys])
    cells = np.array([math.prod(shape[i] for i in _members(m, d)) for m in candidates], dtype=np.float64)
    rows, cols = [], []
    for i, t in enumerate(keys):
        for j, s in enumerate(candidates):
            if t & s == t:
                rows.append(i)
                cols.append(j)
    cover = sp.csr_array((1.0 / cells[cols], (rows, cols)), shape=(len(keys), len(candidates)))
    costs = moves.costs(candidates)

    def objective(w, p):
        lam = cover @ (w * w)
        if (lam <= 0).any():
            return math.inf, np.zeros_like(w)
        f = float((a / lam).sum())
        grad_f = -2.0 * w * (cover.T @ (a / lam**2))
        u = costs @ w
        top = float(u.max())
        if top <= 0:
            return math.inf, np.zeros_like(w)
        if costs.shape[0] == 1 or p is None:
            s, grad_s = top, costs[int(u.argmax())]
        else:
            s = top * float(((u / top) ** p).sum()) ** (1.0 / p)
            grad_s = ((u / s) ** (p - 1)) @ costs
        value, grad = s * s * f, 2.0 * s * grad_s * f + s * s * grad_f
        # the value does not change with the scale of w (its gradient shrinks as w grows, which
        # stops L-BFGS-B early): a factor 1 + (q - 1)², q = ‖w‖²/n, pins the scale and keeps the minimum
        q = float(w @ w) / w.size
        pin = 1.0 + (q - 1.0) ** 2
        return value * pin, grad * pin + value * 4.0 * (q - 1.0) * w / w.size

    def exact_value(w) -> float:
        lam = cover @ (w * w)
        return math.inf if (lam <= 0).any() else float((costs @ w).max()) ** 2 * float((a / lam).sum())

    steps = (None,) if costs.shape[0] == 1 else (4.0, 16.0, 64.0)

    def solve(w):
        # projected L-BFGS (:mod:`.lbfgs`): the same weights as scipy's L-BFGS-B to four digits of
        # the error on HDMM's shapes, as fast or faster, without loading scipy.optimize (27 MB)
        for p in steps:
            result = minimize_nonnegative(objective, w, (p,), maxiter=500, tol=1e-6, window=5)
            if np.isfinite(result.fun):
                w = result.x
        return w

    from threadpoolctl import threadpool_limits

    # L-BFGS's steps are BLAS calls on vectors of a few thousand weights: threads cost more than
    # they bring, and on a busy machine they wait on each other (all 2-way marginals over twelve
    # attributes under the attribute policy: 3.7 s on one thread, 77 s on two cores with one of
    # them taken). The limit is set once: finding the BLAS libraries takes milliseconds.
    with threadpool_limits(limits=1, user_api="blas"):
        best_w = _searched(candidates, workload_subsets, exact_value, solve, restarts, rng)
    chosen = MarginalStrategy(shape, *_kept(candidates, best_w, d), exact) if best_w is not None else None
    if chosen is None or _score(own, workload_subsets, moves) <= _score(chosen, workload_subsets, moves):
        return own
    return chosen


def _searched(candidates, workload_subsets, exact_value, solve, restarts: int, rng) -> np.ndarray | None:
    """The best weights over ``candidates`` that :func:`optimize_weights`'s ``solve`` finds from
    several starts, then with single sets added while one helps; None when no start can answer
    the workload."""
    # zero weights are local minima (a set's cost grows linearly, its information quadratically),
    # so start from several supports: the workload's own sets, every level of the lattice, all
    # sets, random weights; then add the single set that helps most while one does
    sizes = np.array([bin(m).count("1") for m in candidates])
    own_masks = {_mask(r) for r in workload_subsets}
    starts = [np.array([1.0 if m in own_masks else 0.0 for m in candidates])]
    starts += [(sizes == k).astype(np.float64) for k in np.unique(sizes)]
    gen = np.random.default_rng(rng)
    starts += [np.ones(len(candidates))] + [gen.uniform(0.0, 1.0, len(candidates)) for _ in range(max(restarts - 2, 0))]
    best_w, best_value = None, math.inf
    for w0 in starts:
        if not np.isfinite(exact_value(w0)):
            continue  # this support cannot answer the workload
        w = solve(w0)
        value = exact_value(w)
        if value < best_value:
            best_w, best_value = w, value
    for _ in range(MAX_ADDED_SETS if best_w is not None else 0):
        # a set added alone rarely pays at once (the others' weights must make room): re-solve
        # from the few most promising additions and keep the best, while it improves
        scale = float(best_w.max())

        def added(j: int, t: float, base: np.ndarray = best_w, scale: float = scale) -> np.ndarray:
            w = base.copy()  # best_w with set j added at t times its largest weight
            w[j] += t * scale
            return w

        trials = sorted((exact_value(added(j, t)), int(j), t)
                        for j in np.flatnonzero(best_w <= 1e-9 * scale) for t in (0.1, 0.3, 1.0))
        tried = set()
        found = []
        for _, j, t in trials:
            if j not in tried and len(tried) < ADDITIONS_TRIED:
                tried.add(j)
                w = solve(added(j, t))
                found.append((exact_value(w), j, w))
        if not found or min(found, key=lambda f: f[0])[0] >= best_value * (1 - 1e-6):
            break
        best_value, _, best_w = min(found, key=lambda f: f[0])
    return best_w


def _score(strategy: MarginalStrategy, workload_subsets, moves: Moves) -> float:
    return strategy.sensitivity(moves) ** 2 * strategy.error_factor(workload_subsets)


def _kept(candidates, w, d) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """The sets with weight above 10⁻⁶ of the largest, weights scaled to a largest of 1."""
    w = np.asarray(w, dtype=np.float64) / float(np.max(w))
    keep = np.flatnonzero(w > 1e-6)
    return [_members(candidates[j], d) for j in keep], w[keep]


def _is_free(mask: int, free: int | None) -> bool:
    """Whether the marginal on ``mask`` no move changes (``free`` from :meth:`Moves.free_attributes`)."""
    return free is not None and mask & ~free == 0


def _exact_sets(workload_subsets, free: int | None) -> list[tuple[int, ...]]:
    """The parts of the workload's marginals on free attributes (known exactly), maximal ones."""
    if free is None:
        return []
    parts = {tuple(a for a in r if free >> a & 1) for r in workload_subsets}
    return [p for p in parts if not any(set(p) < set(q) for q in parts)]


def _measured_own(workload_subsets, free: int | None) -> list[tuple[int, ...]]:
    """The workload's own marginals that carry noise (those not entirely on free attributes)."""
    seen: list[tuple[int, ...]] = []
    for r in workload_subsets:
        if not _is_free(_mask(r), free) and r not in seen:
            seen.append(r)
    return seen


def own_marginals(shape: Sequence[int], workload_subsets: Iterable[Iterable[int]], moves: Moves) -> MarginalStrategy:
    """The workload's own marginals, each with weight 1, those on free attributes known exactly."""
    shape = tuple(int(n) for n in shape)
    free = moves.free_attributes(len(shape))
    workload_subsets = [tuple(sorted(r)) for r in workload_subsets]
    measured = _measured_own(workload_subsets, free)
    return MarginalStrategy(shape, measured, [1.0] * len(measured), _exact_sets(workload_subsets, free))
