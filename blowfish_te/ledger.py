"""A privacy budget that lasts across runs: a ledger file (SQLite) of every release on a dataset.

Sequential composition (He, Machanavajjhala, Ding, SIGMOD 2014, Thm 4.1): releases that are
(ε₁, P)-, ..., (ε_r, P)-Blowfish private on the same data are together (ε₁ + ... + ε_r, P)-Blowfish
private. A ledger holds, per dataset, the policy P and the total budget, and one row per release.
:meth:`Ledger.reserve` charges a release's ε *before* the data are read and refuses one that would
take the sum past the total; the check and the charge are one SQLite write transaction
(``BEGIN IMMEDIATE``), so concurrent runs on one ledger cannot both spend the last of a budget.
Releases under another policy than the dataset's are refused: the composition theorem holds for
one policy (a release under a different graph can reveal pairs P protects without bound).

Charges add up exactly: every ε and total is taken at the decimal value of its shortest form
(``repr``: 0.1 is 1/10) as a :class:`fractions.Fraction`, so ten charges of 0.1 spend a budget of
1 to the last digit and no charge, however small, fits after them.

A charge is settled afterwards: ``released``; ``refunded`` when the run failed before it read any
record (a bad option, a missing file, a header without the domain's columns); or ``failed`` when
it failed after reading records, whether or not noise was drawn. Only a refund frees the ε, for
only then can nothing about the data have left the run. A run that fails after reading keeps its
charge because the failure itself is a noiseless answer: its message gives exact counts and
example values (records outside the domain, negative counts), and even its exit status says
whether any record lies outside the domain. Were such runs refunded, repeated failing runs (the
domain's bounds moved each time) would learn exact counts for free. A run that dies between
reserving and settling leaves its charge ``reserved``, which counts as spent.

Every read checks the whole file, for a ledger is only as good as its rows: a status other than
``reserved``, ``released``, ``failed`` and ``refunded``, an ε or total that is not a finite
number > 0, or a dataset's total that is not the last one logged (every total set by
:meth:`Ledger.set_budget` or a first :meth:`Ledger.reserve` is logged) is refused with
:class:`InvalidLedger`, naming the row: a ledger edited outside this module charges nothing until
the row is put right. A ledger written before totals were logged gets its totals logged when it
is first opened.
"""

from __future__ import annotations

import datetime
import math
import pathlib
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction

from ._validation import check_epsilon
from .errors import BlowfishError, first_line

__all__ = ["COUNTED", "BudgetExceeded", "Charge", "DatasetBudget", "InvalidLedger", "Ledger", "Run"]

#: Statuses whose ε counts as spent (a refunded charge's run read no record).
COUNTED = ("reserved", "released", "failed")
_STATUSES = (*COUNTED, "refunded")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS budgets (
        dataset TEXT PRIMARY KEY, policy TEXT NOT NULL, total REAL NOT NULL, created TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS releases (
        id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL REFERENCES budgets(dataset), time TEXT NOT NULL,
        epsilon REAL NOT NULL, policy TEXT NOT NULL, mechanism TEXT NOT NULL, workload TEXT NOT NULL,
        status TEXT NOT NULL, note TEXT NOT NULL DEFAULT '')""",
    """CREATE TABLE IF NOT EXISTS totals (
        id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL REFERENCES budgets(dataset), time TEXT NOT NULL,
        total REAL NOT NULL)""",
)
_POSITIVE = "a finite number > 0"


class BudgetExceeded(BlowfishError, ValueError):
    """A release would take a dataset's spent ε past its total budget: nothing was charged."""


class InvalidLedger(BlowfishError, ValueError):
    """A ledger file holding a row this module never writes (edited by hand or by another
    program): nothing is charged to it until the row is put right."""


@dataclass(frozen=True)
class DatasetBudget:
    """A dataset's policy, total budget and the ε spent so far (every counted charge)."""

    dataset: str
    policy: str
    total: float
    spent: float

    @property
    def remaining(self) -> float:
        """The ε left: total − spent on their decimal values, never below 0."""
        return float(max(_decimal(self.total) - _decimal(self.spent), 0))


@dataclass(frozen=True)
class Charge:
    """One row of the ledger: a release's ε on a dataset and how it was settled."""

    id: int
    dataset: str
    time: str
    epsilon: float
    policy: str
    mechanism: str
    workload: str
    status: str
    note: str


@dataclass(frozen=True)
class _Exact:
    """A dataset's policy, total and spent ε as exact decimal fractions."""

    policy: str
    total: Fraction
    spent: Fraction


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _decimal(value: float) -> Fraction:
    """The decimal value of ``value``'s shortest form: 0.1 is 1/10, not the binary float near it."""
    return Fraction(repr(float(value)))


def _positive(value) -> bool:
    """Whether a value read from SQLite is a finite number > 0 (text and blobs are not)."""
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


class Ledger:
    """The ledger in SQLite file ``path`` (created when missing). Each method opens its own
    connection, so one Ledger may be shared by threads and one file by processes; a call waits up
    to ``timeout`` seconds (a minute by default) for another's write to end, then raises
    :class:`sqlite3.OperationalError` (database is locked) having charged nothing."""

    def __init__(self, path: str | pathlib.Path, timeout: float = 60.0):
        self.path = pathlib.Path(path)
        if self.path.is_dir():
            raise ValueError(f"ledger {self.path}: is a folder; give a file (created when missing)")
        if not self.path.parent.is_dir():
            raise ValueError(f"ledger {self.path}: its folder does not exist")
        self.timeout = timeout
        with self._connect() as db:
            try:
                if self._tables(db) != 3:  # a new file, or a ledger from before totals were logged
                    db.execute("BEGIN IMMEDIATE")
                    logs = self._tables(db, "totals")
                    for statement in _SCHEMA:
                        db.execute(statement)
                    if not logs:  # the totals of an older ledger are taken as they are
                        db.execute("INSERT INTO totals (dataset, time, total) SELECT dataset, ?, total FROM budgets", (_now(),))
                    db.execute("COMMIT")
            except sqlite3.DatabaseError as err:
                raise ValueError(f"ledger {self.path}: not a ledger (SQLite) file: {err}") from None

    @staticmethod
    def _tables(db, *names: str) -> int:
        """How many of the ledger's tables (or of ``names``) the file holds."""
        names = names or ("budgets", "releases", "totals")
        query = f"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ({', '.join('?' * len(names))})"
        return db.execute(query, names).fetchone()[0]

    def _connect(self) -> _Closing:
        db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        db.execute("PRAGMA foreign_keys = ON")
        return _Closing(db)

    def _invalid(self, row: str, what: str, allowed: str) -> InvalidLedger:
        return InvalidLedger(f"ledger {self.path}: {row}: {what}; allowed: {allowed}. The file was changed outside "
                             "blowfish_te: nothing is charged to it until the row is put right")

    def _checked(self, charge: Charge) -> Charge:
        """``charge``, once its status and ε are ones this module writes."""
        if charge.status not in _STATUSES:
            raise self._invalid(f"releases row {charge.id}", f"status {charge.status!r}",
                                ", ".join(map(repr, _STATUSES)) + " (lower case)")
        if not _positive(charge.epsilon):
            raise self._invalid(f"releases row {charge.id}", f"epsilon {charge.epsilon!r}", _POSITIVE)
        return charge

    def _read(self, db) -> tuple[dict[str, _Exact], list[Charge]]:
        """Every dataset's budget (exactly) and every charge, oldest first, each row checked."""
        logged = {}
        for row_id, dataset, total in db.execute("SELECT id, dataset, total FROM totals ORDER BY id"):
            if not _positive(total):
                raise self._invalid(f"totals row {row_id}", f"total {total!r}", _POSITIVE)
            logged[dataset] = total
        charges = [self._checked(Charge(*row)) for row in db.execute("SELECT * FROM releases ORDER BY id")]
        spent: defaultdict[str, Fraction] = defaultdict(Fraction)
        for charge in charges:
            if charge.status in COUNTED:
                spent[charge.dataset] += _decimal(charge.epsilon)
        budgets = {}
        for dataset, policy, total in db.execute("SELECT dataset, policy, total FROM budgets ORDER BY dataset"):
            row = f"budgets row of dataset {dataset!r}"
            if not _positive(total):
                raise self._invalid(row, f"total {total!r}", _POSITIVE)
            if total != logged.get(dataset):
                last = repr(logged[dataset]) if dataset in logged else "none logged"
                raise self._invalid(row, f"total {total!r} is not the last total logged for it ({last})", "a total set by "
                                    "Ledger.set_budget (`blowfish-te ledger FILE --dataset NAME --budget TOTAL`), which logs it")
            budgets[dataset] = _Exact(policy, _decimal(total), spent[dataset])
        return budgets, charges

    def _snapshot(self) -> tuple[dict[str, _Exact], list[Charge]]:
        """:meth:`_read` in one read transaction (one consistent state of the file)."""
        with self._connect() as db:
            db.execute("BEGIN")
            return self._read(db)

    def budget(self, dataset: str) -> DatasetBudget | None:
        """``dataset``'s policy, total and spent ε, or None when the ledger has no budget for it."""
        budgets, _ = self._snapshot()
        return _public(dataset, budgets[dataset]) if dataset in budgets else None

    def budgets(self) -> list[DatasetBudget]:
        """Every dataset's budget, by name."""
        budgets, _ = self._snapshot()
        return [_public(name, exact) for name, exact in budgets.items()]

    def set_budget(self, dataset: str, policy: str, total: float) -> DatasetBudget:
        """Give ``dataset`` a total budget under ``policy`` (its name), or change the total of an
        existing one (never below what is already spent; the policy cannot change). The total is
        logged."""
        total = check_epsilon(total, "total")
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            current = self._read(db)[0].get(dataset)
            if current is None:
                db.execute("INSERT INTO budgets VALUES (?, ?, ?, ?)", (dataset, policy, total, _now()))
            else:
                _check_policy(dataset, current.policy, policy)
                if _decimal(total) < current.spent:
                    raise ValueError(f"total={total:g}: dataset {dataset!r} has already spent ε = {float(current.spent):g}")
                db.execute("UPDATE budgets SET total = ? WHERE dataset = ?", (total, dataset))
            db.execute("INSERT INTO totals (dataset, time, total) VALUES (?, ?, ?)", (dataset, _now(), total))
            db.execute("COMMIT")
        return self.budget(dataset)

    def reserve(self, dataset: str, epsilon: float, policy: str, mechanism: str, workload: str,
                total: float | None = None) -> Charge:
        """Charge ``epsilon`` to ``dataset`` before its data are read, or raise
        :class:`BudgetExceeded` (charging nothing) when the spent ε plus this one would exceed the
        total (exactly, on their decimal values). A dataset new to the ledger needs ``total``; for
        a known one ``total``, if given, must be the recorded one. Check and charge are one write
        transaction."""
        epsilon = check_epsilon(epsilon)
        if total is not None:
            total = check_epsilon(total, "total")
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            current = self._read(db)[0].get(dataset)
            if current is None:
                if total is None:
                    raise ValueError(f"the ledger {self.path} has no budget for dataset {dataset!r}: give its total "
                                     "(--budget) on its first release")
                db.execute("INSERT INTO budgets VALUES (?, ?, ?, ?)", (dataset, policy, total, _now()))
                db.execute("INSERT INTO totals (dataset, time, total) VALUES (?, ?, ?)", (dataset, _now(), total))
                current = _Exact(policy, _decimal(total), Fraction(0))
            elif total is not None and _decimal(total) != current.total:
                raise ValueError(f"total={total:g}: dataset {dataset!r} has a total budget of {float(current.total):g} in "
                                 f"the ledger (change it with `blowfish-te ledger {self.path} --dataset ... --budget ...`)")
            _check_policy(dataset, current.policy, policy)
            if current.spent + _decimal(epsilon) > current.total:
                left = _public(dataset, current)
                raise BudgetExceeded(f"ε = {epsilon:g} would exceed dataset {dataset!r}'s budget: {left.spent:g} of "
                                     f"{left.total:g} spent, {left.remaining:g} left (nothing was charged)")
            cursor = db.execute("INSERT INTO releases (dataset, time, epsilon, policy, mechanism, workload, status) "
                                "VALUES (?, ?, ?, ?, ?, ?, 'reserved')", (dataset, _now(), epsilon, policy, mechanism, workload))
            db.execute("COMMIT")
            return self._charge(db, cursor.lastrowid)

    def settle(self, charge: Charge, status: str, note: str = "") -> Charge:
        """Record how a reserved charge ended: ``released``, ``refunded`` (its run read no record)
        or ``failed`` (its run read records: the ε stays spent)."""
        if status not in _STATUSES[1:]:
            raise ValueError(f"status must be one of {_STATUSES[1:]}, got {status!r}")
        with self._connect() as db:
            updated = db.execute("UPDATE releases SET status = ?, note = ? WHERE id = ? AND status = 'reserved'",
                                 (status, note, charge.id)).rowcount
            if not updated:
                raise ValueError(f"charge {charge.id} is not a reserved charge of ledger {self.path}")
            return self._charge(db, charge.id)

    @contextmanager
    def charged(self, dataset: str, epsilon: float, policy: str, mechanism: str, workload: str,
                total: float | None = None) -> Iterator[Run]:
        """One run's charge, reserved on entry (:meth:`reserve`) and settled on exit: ``released``
        when the block ends without error, else ``refunded`` if the run had not yet said
        :meth:`Run.reading` and ``failed`` if it had, the error's first line as the note (the
        error goes on). The protocol of the module docstring in one ``with`` block::

            with ledger.charged("d", 0.5, "line(8)", "hb", "prefix(8)") as run:
                ...  # checks that read no record: a failure here is refunded
                run.reading()
                ...  # read the records and release: a failure here keeps the charge
        """
        run = Run(self.reserve(dataset, epsilon, policy, mechanism, workload, total))
        try:
            yield run
        except BaseException as err:
            self.settle(run.charge, "failed" if run.read else "refunded", first_line(err))
            raise
        self.settle(run.charge, "released")

    def _charge(self, db, charge_id: int) -> Charge:
        return self._checked(Charge(*db.execute("SELECT * FROM releases WHERE id = ?", (charge_id,)).fetchone()))

    def charges(self, dataset: str | None = None) -> list[Charge]:
        """Every charge (of ``dataset``, or of all), oldest first."""
        _, charges = self._snapshot()
        return [c for c in charges if dataset in (None, c.dataset)]


def _public(dataset: str, exact: _Exact) -> DatasetBudget:
    return DatasetBudget(dataset, exact.policy, float(exact.total), float(exact.spent))


def _check_policy(dataset: str, recorded: str, policy: str) -> None:
    if policy != recorded:
        raise ValueError(f"policy {policy}: dataset {dataset!r}'s budget is for policy {recorded}; releases "
                         "under another policy do not compose with it (sequential composition holds for one policy)")


class Run:
    """A run inside :meth:`Ledger.charged` (``charge`` None outside a ledger): it says when it
    starts reading records, after which a failure keeps the charge."""

    def __init__(self, charge: Charge | None = None):
        self.charge = charge
        self.read = False

    def reading(self) -> None:
        """From here on the run reads records: a failure is no longer refunded."""
        self.read = True


class _Closing:
    """A connection that closes when its ``with`` block ends, rolling back an open transaction
    (an error between BEGIN and COMMIT charges nothing)."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self):
        return self.db

    def __exit__(self, *exc):
        if self.db.in_transaction:
            self.db.rollback()
        self.db.close()
