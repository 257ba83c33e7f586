"""Privacy budget accounting for releases on one dataset under one policy (composition: He,
Machanavajjhala, Ding, SIGMOD 2014).

Composition theorems (He, Machanavajjhala, Ding, SIGMOD 2014, §4.1), for a policy P = (T, G, I_Q):

- **Sequential** (Thm 4.1): mechanisms that are (ε₁, P)-, ..., (ε_r, P)-Blowfish private, run on
  the same data with independent randomness — each may depend on the earlier outputs — are
  together (ε₁ + ... + ε_r, P)-Blowfish private. This holds whatever constraints Q are known.
- **Parallel** (Thm 4.2): when nothing but the number of records n is known (Q = I_n), mechanisms
  M_i that are (ε_i, P)-Blowfish private, run on D ∩ S_i for *disjoint* sets S_i of individuals
  (fixed in advance, not chosen from the data), are together (max_i ε_i, P)-Blowfish private:
  neighbours differ in one individual, who is in one S_i only (proof, App. C). The same argument
  covers policies with ⊥ (the paper's §3.1 extension: the secret "individual i is absent" still
  concerns one individual) — it is McSherry's (SIGMOD 2009) parallel composition for unbounded DP.
- With other public **constraints** (known count queries or marginals) parallel composition fails
  in general (§4.1: with the numbers of men and women known, two records that swap gender in two
  different subsets are neighbours touching both). Thm 4.3 restores it when the constraints split
  into groups that each affect one subset. An accountant given the constraints
  (:class:`~blowfish_te.constraints.Constraints`, each query with the record ids it counts as its
  ``scope``) checks this when a group is formed, before anything is released: a query that some
  policy edge changes (it has critical secret pairs) must count records of one part only — its
  scope inside that part — or of no part. A query counting every record is critical under every
  policy that can move a record into or out of it, and then blocks the group; the known total n
  is critical only under policies with ⊥, so Thm 4.2 is the case without ⊥. (Requiring the scope
  to lie inside the part, not merely to meet no other part, closes a gap in Thm 4.3: records
  outside every part in the scopes of two queries can chain moves in two parts into one
  neighbour.) Releases charged by such an accountant are calibrated to the constraints
  (:func:`blowfish_te.answer` with ``constraints``). ``constraints=True`` declares constraints
  without giving them: parallel groups are then refused.

An accountant is bound to one policy G, and the guarantee it states is (spent, G)-Blowfish: both
theorems compose releases under the same policy. :meth:`~BudgetAccountant.answer` always releases
under the accountant's own policy; :meth:`~BudgetAccountant.spend` records a release made elsewhere
that the caller vouches is (ε, G)-Blowfish. An (ε', G')-Blowfish release under another policy is
(ε'·ℓ, G)-Blowfish with ℓ the largest G'-distance between the two ends of a G-edge (a G-move is a
chain of ℓ G'-moves): the caller charges ε'·ℓ with :meth:`~BudgetAccountant.spend`.
If ℓ is infinite (G' separates the two ends of some G-edge) the release has no G guarantee at all.

Every charge is checked and recorded **before** the release runs, so an over-spending request
raises :class:`BudgetExceededError` without drawing any noise. Spends are summed with
``math.fsum`` (the exact sum of the floats, rounded once): ten spends of 0.1 fill a budget of 1.0.
A release that fails after its charge keeps it (the mechanism may have read the data); its
arguments are validated before charging, so malformed calls cost nothing.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_epsilon, check_histogram
from .constraints import MOVES, Constraints, critical_queries
from .errors import BudgetExceededError, ConstraintError
from .noise import RNGLike, check_rng
from .policies import Policy, check_policy
from .release import make_plan
from .routes import Release

if TYPE_CHECKING:
    from .mechanisms import Mechanism
    from .workloads import Workload

__all__ = ["BudgetAccountant", "BudgetExceededError", "ParallelGroup", "Spend"]


@dataclass(frozen=True)
class Spend:
    """One charge: ``epsilon`` under ``label``; ``group`` and ``part`` name the parallel group and
    the disjoint record set of a release inside one (both None for a sequential release)."""

    epsilon: float
    label: str | None = None
    group: str | None = None
    part: object = None


def _check_label(label) -> str | None:
    if label is not None and not isinstance(label, str):
        raise TypeError(f"label must be a string or None, got {type(label).__name__}")
    return label


class BudgetAccountant:
    """The ε budget of one dataset under one policy: charges add up (sequential composition), a
    parallel group on disjoint record sets charges the largest of its parts.

    Parameters
    ----------
    total_epsilon : the budget; every release's ε is charged against it.
    policy : the policy G of every release; the accountant guarantees (spent, G)-Blowfish privacy.
    constraints : the publicly known count constraints (a :class:`~blowfish_te.constraints.Constraints`):
        every release is calibrated to them and parallel groups are checked against He et al.
        Thm 4.3; or True when constraints are known but not given (parallel groups are refused).
    moves : how neighbours under the constraints move records, ``"any"`` or ``"edges"`` (see
        :mod:`blowfish_te.constraints.graph`).

    Examples
    --------
    ::

        acct = BudgetAccountant(1.0, policies.line(k))
        r1 = acct.answer(workloads.prefix(k), x, 0.4, rng=0)      # spent 0.4
        group = acct.parallel({"north": north_ids, "south": south_ids})
        group.answer("north", W, x_north, 0.5, rng=1)             # charge max(0.5) = 0.5
        group.answer("south", W, x_south, 0.5, rng=2)             # still 0.5: disjoint records
        acct.remaining                                            # 0.1
    """

    def __init__(self, total_epsilon: float, policy: Policy, *, constraints: bool | Constraints = False, moves: str = "any"):
        self.total = check_epsilon(total_epsilon, "total_epsilon")
        self.policy = check_policy(policy)
        if isinstance(constraints, Constraints):
            if constraints.shape != self.policy.shape:
                raise ValueError(f"constraints are over {constraints.shape} but the policy over {self.policy.shape}")
        elif isinstance(constraints, (bool, np.bool_)):
            constraints = bool(constraints)
        else:
            raise TypeError(f"constraints must be a Constraints object, True or False, got {constraints!r}")
        if moves not in MOVES:
            raise ValueError(f"moves must be one of {MOVES}, got {moves!r}")
        self.constraints = constraints
        self.moves = moves
        self._sequential: list[float] = []
        self._groups: list[ParallelGroup] = []
        self._history: list[Spend] = []

    # -- state ------------------------------------------------------------------------------
    def _ledger(self, group: ParallelGroup | None = None, charge: float = 0.0) -> list[float]:
        """Sequential spends and group charges (``group``'s replaced by ``charge``): what is summed."""
        return self._sequential + [charge if g is group else g.charge for g in self._groups]

    @property
    def spent(self) -> float:
        """ε charged so far: sequential spends plus each parallel group's largest part."""
        return math.fsum(self._ledger())

    @property
    def remaining(self) -> float:
        """ε still available (never negative)."""
        return self.total - self.spent

    @property
    def history(self) -> tuple[Spend, ...]:
        """Every charge, in order."""
        return tuple(self._history)

    @property
    def guarantee(self) -> str:
        """The privacy statement of everything released so far."""
        return f"({self.spent:g}, {self.policy.name})-Blowfish private"

    def __repr__(self) -> str:
        return f"<BudgetAccountant: {self.spent:g} of {self.total:g} spent under {self.policy.name}, {len(self._history)} releases>"

    # -- charging ---------------------------------------------------------------------------
    def _refuse_unless_fits(self, new_spent: float, requested: float, what: str) -> None:
        if new_spent > self.total:
            raise BudgetExceededError(
                f"{what} requests epsilon={requested:g} but only {self.remaining:g} of the total "
                f"{self.total:g} remains ({self.spent:g} spent); nothing was charged or run"
            )

    def spend(self, epsilon: float, label: str | None = None) -> float:
        """Charge ε for a release on the whole dataset that the caller vouches is (ε, policy)-
        Blowfish private; raise :class:`BudgetExceededError` (charging nothing) if it does not fit.
        Returns the remaining budget."""
        epsilon = check_epsilon(epsilon)
        label = _check_label(label)
        self._refuse_unless_fits(math.fsum(self._ledger() + [epsilon]), epsilon, f"release {label!r}" if label else "a release")
        self._sequential.append(epsilon)
        self._history.append(Spend(epsilon, label))
        return self.remaining

    def answer(
        self, workload: Workload | ArrayLike, x: ArrayLike, epsilon: float, mechanism: str | Mechanism | None = None,
        rng: RNGLike = None, route: str = "auto", tree: Policy | str | None = None, label: str | None = None,
    ) -> Release:
        """:func:`blowfish_te.answer` under the accountant's policy, charged ε first.

        All arguments are validated (the release's plan, x, rng) before the charge; an
        over-spending request raises :class:`BudgetExceededError` before any noise is drawn.
        With constraints the release is calibrated to them.
        """
        release = self._prepared(workload, x, epsilon, mechanism, rng, route, tree, None)
        self.spend(epsilon, label)
        return release()

    def _prepared(self, workload, x, epsilon, mechanism, rng, route, tree, records):
        """Validate a release completely (plan or constrained sensitivity, histogram, rng) and
        return the call that draws it."""
        constraints = self.constraints if isinstance(self.constraints, Constraints) else None
        the_plan = make_plan(workload, self.policy, epsilon, mechanism, route, tree, constraints, self.moves, records)
        counts, gen = the_plan.check(x), check_rng(rng)
        return lambda: the_plan.release_checked(counts, gen)

    def parallel(self, parts: Mapping[Hashable, Iterable[Hashable]] | Iterable[Iterable[Hashable]], label: str | None = None) -> ParallelGroup:
        """A group of releases on disjoint sets of records (He et al. Thm 4.2), charged the largest
        total ε of any one part rather than the sum.

        ``parts`` maps part names to collections of record ids (or is a sequence of them, named
        0, 1, ...): the individuals of each set, fixed before looking at the data. Overlapping
        sets are refused, and so is the group when a known constraint affects two parts (He et al.
        Thm 4.3, see the module docstring) or when ``constraints=True`` hides which.
        """
        label = _check_label(label)
        if isinstance(self.constraints, Constraints):
            parts = _disjoint_parts(parts)
            _check_parallel(self.constraints, self.policy, parts)
            group = ParallelGroup(self, parts, label)
            self._groups.append(group)
            return group
        if self.constraints:
            raise ValueError(
                "parallel composition is refused: this accountant was declared with constraints=True, and with "
                "publicly known constraints beyond the record count it fails in general (He et al. SIGMOD 2014, "
                "§4.1; Thm 4.3 needs the constraints split so that each affects one part only, which cannot be "
                "checked here). Charge the releases sequentially instead."
            )
        group = ParallelGroup(self, _disjoint_parts(parts), label)
        self._groups.append(group)
        return group


class ParallelGroup:
    """Releases on disjoint record sets of one dataset: each part's spends add up, the group
    charges the accountant max over parts. Create it with :meth:`BudgetAccountant.parallel`."""

    def __init__(self, accountant: BudgetAccountant, parts: dict[object, frozenset], label: str | None):
        self.accountant = accountant
        self.parts = parts
        self.label = label
        self._spent: dict[object, list[float]] = {name: [] for name in parts}

    @property
    def charge(self) -> float:
        """What the group costs the accountant: the largest part's total ε."""
        return max((math.fsum(v) for v in self._spent.values()), default=0.0)

    def spent_on(self, part: Hashable) -> float:
        """Total ε spent on one part."""
        return math.fsum(self._spent[self._part(part)])

    def __repr__(self) -> str:
        name = f" {self.label}" if self.label else ""
        return f"<ParallelGroup{name}: {len(self.parts)} disjoint parts, charge {self.charge:g}>"

    def _part(self, part):
        try:
            known = part in self.parts
        except TypeError:  # unhashable
            known = False
        if not known:
            raise ValueError(f"part must be one of the group's parts {list(self.parts)}, got {part!r}")
        return part

    def spend(self, part: Hashable, epsilon: float, label: str | None = None) -> float:
        """Charge ε for a release on the records of ``part`` only, vouched (ε, policy)-Blowfish;
        the accountant pays only if the group's largest part grows. Returns its remaining budget."""
        part = self._part(part)
        epsilon = check_epsilon(epsilon)
        label = _check_label(label)
        acct = self.accountant
        new_charge = max(self.charge, math.fsum(self._spent[part] + [epsilon]))
        what = f"release {label!r} on part {part!r}" if label else f"a release on part {part!r}"
        acct._refuse_unless_fits(math.fsum(acct._ledger(self, new_charge)), epsilon, what)
        self._spent[part].append(epsilon)
        acct._history.append(Spend(epsilon, label, self.label, part))
        return acct.remaining

    def answer(
        self, part: Hashable, workload: Workload | ArrayLike, x: ArrayLike, epsilon: float,
        mechanism: str | Mechanism | None = None, rng: RNGLike = None, route: str = "auto",
        tree: Policy | str | None = None, label: str | None = None,
    ) -> Release:
        """:func:`blowfish_te.answer` on ``x`` = the histogram of the records of ``part`` only.

        x must hold exactly one record per id of the part when the policy has no ⊥ (every
        individual has a record: n is known), at most one per id otherwise. Validated and charged
        before any noise is drawn, as :meth:`BudgetAccountant.answer`.
        """
        part = self._part(part)
        policy = self.accountant.policy
        counts = check_histogram(x, policy.shape)
        records, ids = int(counts.sum()), len(self.parts[part])
        if records > ids or (records < ids and not policy.touches_bottom):
            rule = "at most" if policy.touches_bottom else "exactly"
            raise ValueError(
                f"x holds {records} records but part {part!r} has {ids} record ids: a release on D ∩ S must see "
                f"{rule} one record per id of S (pass the histogram of that part's records only)"
            )
        release = self.accountant._prepared(workload, x, epsilon, mechanism, rng, route, tree, self.parts[part])
        self.spend(part, epsilon, label)
        return release()


def _check_parallel(constraints: Constraints, policy: Policy, parts: dict[object, frozenset]) -> None:
    """Refuse parts that a critical constraint ties together (He et al. Thm 4.3, as tightened in
    the module docstring): every query some policy edge changes must count records of one part
    only, or of none."""
    everyone = frozenset().union(*parts.values())
    for j in np.flatnonzero(critical_queries(constraints, policy)):
        scope = constraints.scopes[j]
        name = constraints.names[j]
        hit = [p for p, ids in parts.items() if scope is None or scope & ids]
        outside = scope is None or bool(scope - everyone)
        if len(hit) > 1 or (hit and outside):
            where = (f"parts {hit[0]!r} and {hit[1]!r}" if len(hit) > 1 else
                     f"part {hit[0]!r} and records outside every part")
            raise ConstraintError(
                f"parallel composition is refused: the public constraint {name!r} counts records of {where}, and a "
                f"move along an edge of {policy.name} changes it, so one neighbour can differ in both (He et al. "
                "Thm 4.3 needs every such constraint to count records of one part only). Nothing was released; "
                "charge the releases sequentially, or give the constraint a scope inside one part"
            )


def _disjoint_parts(parts) -> dict[object, frozenset]:
    """``{name: frozenset of record ids}``; refuses empty parts and any id in two parts."""
    if isinstance(parts, Mapping):
        items = list(parts.items())
    elif isinstance(parts, Iterable) and not isinstance(parts, (str, bytes)):
        items = list(enumerate(parts))
    else:
        raise TypeError(f"parts must map part names to collections of record ids, got {type(parts).__name__}")
    if not items:
        raise ValueError("parts must name at least one record set, got none")
    owner: dict[object, object] = {}
    out = {}
    for name, ids in items:
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise TypeError(f"parts[{name!r}] must be a collection of record ids, got {type(ids).__name__}")
        try:
            members = frozenset(ids.ravel().tolist() if isinstance(ids, np.ndarray) else ids)
        except TypeError:
            raise TypeError(f"parts[{name!r}] must hold hashable record ids (ints or strings)") from None
        if not members:
            raise ValueError(f"parts[{name!r}] holds no record ids")
        for record in members:
            if record in owner:
                raise ValueError(
                    f"parts overlap: record id {record!r} is in parts {owner[record]!r} and {name!r}; parallel "
                    "composition needs disjoint record sets (He et al. Thm 4.2)"
                )
            owner[record] = name
        out[name] = members
    return out
