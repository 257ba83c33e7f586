"""A privacy budget that lasts across runs: a ledger file (SQLite) of every release on a dataset.

Sequential composition (He, Machanavajjhala, Ding, SIGMOD 2014, Thm 4.1): releases that are
(ε₁, P)-, ..., (ε_r, P)-Blowfish private on the same data are together (ε₁ + ... + ε_r, P)-Blowfish
private. A ledger holds, per dataset, the policy P and the total budget, and one row per release.
:meth:`Ledger.reserve` charges a release's ε *before* the data are read and refuses one that would
take the sum past the total; the check and the charge are one SQLite write transaction
(``BEGIN IMMEDIATE``), so concurrent runs on one ledger cannot both spend the last of a budget.

A charge is settled afterwards: ``released``, or ``refunded`` when the run failed before any noise
was drawn (unreadable or invalid data: nothing about the data left the run), or ``failed`` when it
failed later (noise may have been drawn: the ε stays spent). A run that dies between the two
leaves its charge ``reserved``, which counts as spent. Releases under another policy than the
dataset's are refused: the composition theorem holds for one policy (a release under a different
graph can reveal pairs P protects without bound).
"""

from __future__ import annotations

import datetime
import math
import pathlib
import sqlite3
from dataclasses import dataclass

from ._validation import check_epsilon
from .errors import BlowfishError

__all__ = ["COUNTED", "BudgetExceeded", "Charge", "DatasetBudget", "Ledger"]

#: Statuses whose ε counts as spent (a refunded charge drew no noise).
COUNTED = ("reserved", "released", "failed")
_STATUSES = (*COUNTED, "refunded")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS budgets (
    dataset TEXT PRIMARY KEY, policy TEXT NOT NULL, total REAL NOT NULL, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS releases (
    id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL REFERENCES budgets(dataset), time TEXT NOT NULL,
    epsilon REAL NOT NULL, policy TEXT NOT NULL, mechanism TEXT NOT NULL, workload TEXT NOT NULL,
    status TEXT NOT NULL, note TEXT NOT NULL DEFAULT '');
"""


class BudgetExceeded(BlowfishError, ValueError):
    """A release would take a dataset's spent ε past its total budget: nothing was charged."""


@dataclass(frozen=True)
class DatasetBudget:
    """A dataset's policy, total budget and the ε spent so far (every counted charge)."""

    dataset: str
    policy: str
    total: float
    spent: float

    @property
    def remaining(self) -> float:
        return max(self.total - self.spent, 0.0)


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


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class Ledger:
    """The ledger in SQLite file ``path`` (created when missing). Each method opens its own
    connection, so one Ledger may be shared by threads and one file by processes."""

    def __init__(self, path: str | pathlib.Path, timeout: float = 60.0):
        self.path = pathlib.Path(path)
        if self.path.is_dir():
            raise ValueError(f"ledger {self.path}: is a folder; give a file (created when missing)")
        if not self.path.parent.is_dir():
            raise ValueError(f"ledger {self.path}: its folder does not exist")
        self.timeout = timeout
        with self._connect() as db:
            try:
                db.executescript(_SCHEMA)
            except sqlite3.DatabaseError as err:
                raise ValueError(f"ledger {self.path}: not a ledger (SQLite) file: {err}") from None

    def _connect(self) -> _Closing:
        db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        db.execute("PRAGMA foreign_keys = ON")
        return _Closing(db)

    @staticmethod
    def _budget(db, dataset: str) -> DatasetBudget | None:
        row = db.execute("SELECT policy, total FROM budgets WHERE dataset = ?", (dataset,)).fetchone()
        if row is None:
            return None
        spent = math.fsum(e for (e,) in db.execute(
            f"SELECT epsilon FROM releases WHERE dataset = ? AND status IN ({', '.join('?' * len(COUNTED))})",
            (dataset, *COUNTED)))
        return DatasetBudget(dataset, row[0], row[1], spent)

    def budget(self, dataset: str) -> DatasetBudget | None:
        """``dataset``'s policy, total and spent ε, or None when the ledger has no budget for it."""
        with self._connect() as db:
            return self._budget(db, dataset)

    def budgets(self) -> list[DatasetBudget]:
        """Every dataset's budget, by name."""
        with self._connect() as db:
            names = [name for (name,) in db.execute("SELECT dataset FROM budgets ORDER BY dataset")]
            return [self._budget(db, name) for name in names]

    def set_budget(self, dataset: str, policy: str, total: float) -> DatasetBudget:
        """Give ``dataset`` a total budget under ``policy`` (its name), or change the total of an
        existing one (never below what is already spent; the policy cannot change)."""
        total = check_epsilon(total, "total")
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            current = self._budget(db, dataset)
            if current is None:
                db.execute("INSERT INTO budgets VALUES (?, ?, ?, ?)", (dataset, policy, total, _now()))
            else:
                _check_policy(current, policy)
                if total < current.spent:
                    raise ValueError(f"total={total:g}: dataset {dataset!r} has already spent ε = {current.spent:g}")
                db.execute("UPDATE budgets SET total = ? WHERE dataset = ?", (total, dataset))
            db.execute("COMMIT")
            return self._budget(db, dataset)

    def reserve(self, dataset: str, epsilon: float, policy: str, mechanism: str, workload: str,
                total: float | None = None) -> Charge:
        """Charge ``epsilon`` to ``dataset`` before its data are read, or raise
        :class:`BudgetExceeded` (charging nothing) when the spent ε plus this one would exceed the
        total. A dataset new to the ledger needs ``total``; for a known one ``total``, if given,
        must be the recorded one. Check and charge are one write transaction."""
        epsilon = check_epsilon(epsilon)
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            current = self._budget(db, dataset)
            if current is None:
                if total is None:
                    raise ValueError(f"the ledger {self.path} has no budget for dataset {dataset!r}: give its total "
                                     "(--budget) on its first release")
                total = check_epsilon(total, "total")
                db.execute("INSERT INTO budgets VALUES (?, ?, ?, ?)", (dataset, policy, total, _now()))
                current = DatasetBudget(dataset, policy, total, 0.0)
            elif total is not None and total != current.total:
                raise ValueError(f"total={total:g}: dataset {dataset!r} has a total budget of {current.total:g} in the "
                                 f"ledger (change it with `blowfish-te ledger {self.path} --dataset ... --budget ...`)")
            _check_policy(current, policy)
            if math.fsum([current.spent, epsilon]) > current.total:
                raise BudgetExceeded(f"ε = {epsilon:g} would exceed dataset {dataset!r}'s budget: {current.spent:g} of "
                                     f"{current.total:g} spent, {current.remaining:g} left (nothing was charged)")
            cursor = db.execute("INSERT INTO releases (dataset, time, epsilon, policy, mechanism, workload, status) "
                                "VALUES (?, ?, ?, ?, ?, ?, 'reserved')", (dataset, _now(), epsilon, policy, mechanism, workload))
            db.execute("COMMIT")
            return self._charge(db, cursor.lastrowid)

    def settle(self, charge: Charge, status: str, note: str = "") -> Charge:
        """Record how a reserved charge ended: ``released``, ``refunded`` (no noise was drawn) or
        ``failed`` (noise may have been drawn; the ε stays spent)."""
        if status not in _STATUSES[1:]:
            raise ValueError(f"status must be one of {_STATUSES[1:]}, got {status!r}")
        with self._connect() as db:
            updated = db.execute("UPDATE releases SET status = ?, note = ? WHERE id = ? AND status = 'reserved'",
                                 (status, note, charge.id)).rowcount
            if not updated:
                raise ValueError(f"charge {charge.id} is not a reserved charge of ledger {self.path}")
            return self._charge(db, charge.id)

    @staticmethod
    def _charge(db, charge_id: int) -> Charge:
        row = db.execute("SELECT * FROM releases WHERE id = ?", (charge_id,)).fetchone()
        return Charge(*row)

    def charges(self, dataset: str | None = None) -> list[Charge]:
        """Every charge (of ``dataset``, or of all), oldest first."""
        with self._connect() as db:
            where, args = ("WHERE dataset = ?", (dataset,)) if dataset is not None else ("", ())
            return [Charge(*row) for row in db.execute(f"SELECT * FROM releases {where} ORDER BY id", args)]


def _check_policy(current: DatasetBudget, policy: str) -> None:
    if policy != current.policy:
        raise ValueError(f"policy {policy}: dataset {current.dataset!r}'s budget is for policy {current.policy}; releases "
                         "under another policy do not compose with it (sequential composition holds for one policy)")


class _Closing:
    """A connection that closes when its ``with`` block ends, rolling back an open transaction
    (an error between BEGIN and COMMIT charges nothing)."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __getattr__(self, name):
        return getattr(self.db, name)

    def __enter__(self):
        return self.db

    def __exit__(self, *exc):
        if self.db.in_transaction:
            self.db.rollback()
        self.db.close()
