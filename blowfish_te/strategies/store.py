"""Optimised strategies kept on disk: computed once per (workload, policy, parameters, library version).

A strategy depends on the workload, the policy and the optimiser's parameters only — never on
data or ε — so it can be computed once and reused by every later release, in any process. Entries
are keyed by a digest of the library version, the template, the workload's
:meth:`~blowfish_te.workloads.Workload.fingerprint`, the policy's
:meth:`~blowfish_te.policies.Policy.fingerprint` and the parameters; a workload without a
fingerprint is not stored.

Two places are read, in order: the strategies shipped inside the package (the standard workloads,
built by ``blowfish-te strategies --out <package>/data/strategies``) and the user's cache directory
(``$BLOWFISH_TE_CACHE_DIR``, else the platform's cache folder: ``$XDG_CACHE_HOME`` or
``~/.cache`` on Linux, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows, then
``blowfish_te/strategies``). New strategies are written to the cache directory;
``BLOWFISH_TE_CACHE_DIR=off`` turns writing (and reading it) off.

Privacy does not rest on a stored file: a p-Identity strategy has columns of L1 norm 1 whatever
its Θ >= 0, and every policy sensitivity is computed from the strategy actually loaded and the
policy's edges. A damaged or foreign file is ignored and the strategy recomputed (and rewritten),
and so is one that makes no usable strategy: Θ not of real numbers (bool, str, complex), negative,
not finite, of the wrong shape, or with a column scale 1 + Σ_i θ_iu beyond
S = :data:`~blowfish_te.strategies.pidentity.MAX_COLUMN_SCALE`
(a Θ of 10¹⁵⁰ would overflow its least squares). Within that bound the entries of I + ΘΘᵀ stay
below 1 + K·S², far from overflow; a Cholesky factor that fails (LinAlgError, a ValueError) counts
as damage too.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._digest import digest
from .general import IdentityStrategy
from .kronecker import KroneckerStrategy
from .pidentity import PIdentityStrategy

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from ..policies import Policy
    from ..workloads import Workload

#: Environment variable naming the cache directory ("off" disables it).
CACHE_ENV = "BLOWFISH_TE_CACHE_DIR"
#: Revision of the optimisers and of the file format, part of every key: raise it whenever an
#: optimiser would give a different strategy for the same parameters, so that no stale entry is read.
REVISION = 2


def cache_directory() -> Path | None:
    """The user's strategy cache directory (see the module docstring), None when turned off."""
    value = os.environ.get(CACHE_ENV)
    if value is not None:
        return None if value.strip().lower() in ("", "off", "none", "0") else Path(value).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "blowfish_te" / "strategies"


def shipped_directory() -> Traversable:
    """The strategies shipped with the package (a :mod:`importlib.resources` traversable)."""
    return resources.files("blowfish_te") / "data" / "strategies"


def strategy_key(template: str, workload: Workload, policy: Policy | None, params: tuple) -> str | None:
    """The entry's name: a digest of the library version, :data:`REVISION`, ``template``, the
    workload's and the policy's fingerprints and ``params``; None when the workload has no fingerprint."""
    from .._version import __version__

    fingerprint = workload.fingerprint()
    if fingerprint is None:
        return None
    return digest("strategy", __version__, REVISION, template, fingerprint, None if policy is None else policy.fingerprint(), params)


def to_arrays(strategy: IdentityStrategy | PIdentityStrategy | KroneckerStrategy) -> dict[str, np.ndarray]:
    """The arrays that define an identity, p-Identity or Kronecker (p-Identity factors) strategy."""
    if isinstance(strategy, IdentityStrategy):
        return {"kind": np.array("identity")}
    if isinstance(strategy, PIdentityStrategy):
        return {"kind": np.array("p-identity"), "theta": strategy.theta}
    if isinstance(strategy, KroneckerStrategy):
        factors = {f"theta_{i}": f.theta for i, f in enumerate(strategy.factors)}
        return {"kind": np.array("kronecker"), **factors}
    raise TypeError(f"cannot store a strategy of type {type(strategy).__name__}")


def from_arrays(arrays: Mapping[str, np.ndarray], domain: tuple[int, ...]) -> IdentityStrategy | PIdentityStrategy | KroneckerStrategy:
    """The strategy :func:`to_arrays` described, over ``domain``; ValueError when they do not fit it."""
    kind = str(arrays["kind"])
    if kind == "identity":
        return IdentityStrategy(domain)
    if kind == "p-identity":
        return PIdentityStrategy(arrays["theta"], domain)  # refuses a Θ not of real numbers (bool, str, complex)
    if kind == "kronecker":
        factors = [PIdentityStrategy(arrays[f"theta_{i}"], (k,)) for i, k in enumerate(domain)]
        return KroneckerStrategy(factors)
    raise ValueError(f"unknown stored strategy kind {kind!r}")


#: Plans (choices, tuned settings) under policies with more edges are not stored: the policy's
#: fingerprint lists every edge, work a plan that is quick to redo should not pay.
MAX_FINGERPRINT_EDGES = 2**22


def _policy_print(policy) -> str | None:
    return policy.fingerprint() if policy.num_edges <= MAX_FINGERPRINT_EDGES else None


def choice_key(chooser: Any, workload: Workload, policy: Policy, route: str) -> str | None:
    """The name of a chooser's stored choice (``auto``: which candidate and route won, and every
    candidate's error): a digest of the library version, :data:`REVISION`, the chooser's name and
    parameters, the names it compares (plug-ins included), the workload's and the policy's
    fingerprints and the route asked for; None when either has no fingerprint (a policy of more
    than :data:`MAX_FINGERPRINT_EDGES` edges has none here)."""
    from .._version import __version__

    policy_print = _policy_print(policy)
    if policy_print is None:
        return None  # before the workload's print, which may cost its rows (marginals make their corners)
    workload_print = workload.fingerprint()
    if workload_print is None:
        return None
    params = tuple(sorted((name, repr(value)) for name, value in chooser.get_params().items()))
    return digest("choice", __version__, REVISION, chooser.name, params, tuple(chooser.compared()), workload_print,
                  policy_print, route)


class StrategyStore:
    """Reads shipped strategies and the cache directory, writes new ones to the cache directory.

    ``directory`` None turns the cache directory off; ``shipped`` False skips the package's files.
    """

    def __init__(self, directory: str | Path | None, shipped: bool = True):
        self.directory = None if directory is None else Path(directory)
        self.shipped = shipped

    def _candidates(self, key: str, suffix: str = ".npz"):
        name = f"{key}{suffix}"
        if self.shipped:
            yield shipped_directory() / name
        if self.directory is not None:
            yield self.directory / name

    def contains(self, key: str | None) -> bool:
        """Whether a file for ``key`` exists (it may still fail to load)."""
        return key is not None and any(path.is_file() for path in self._candidates(key))

    def load(self, key: str | None, domain: tuple[int, ...]) -> IdentityStrategy | PIdentityStrategy | KroneckerStrategy | None:
        """The stored strategy for ``key`` over ``domain``, or None (absent, damaged, not a usable
        strategy, or not fitting)."""
        if key is None:
            return None
        for path in self._candidates(key):
            if not path.is_file():
                continue
            try:
                with path.open("rb") as handle, np.load(handle, allow_pickle=False) as arrays:
                    strategy = from_arrays({name: arrays[name] for name in arrays.files}, domain)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if strategy.domain == tuple(domain):
                return strategy
        return None

    def save(self, key: str | None, strategy: IdentityStrategy | PIdentityStrategy | KroneckerStrategy) -> None:
        """Write ``strategy`` under ``key`` (atomically; a directory that cannot be written is skipped)."""
        if key is not None:
            arrays = to_arrays(strategy)
            self._write(f"{key}.npz", lambda out: np.savez_compressed(out, **arrays))

    def _write(self, name: str, write: Callable) -> None:
        """``write(binary file)`` into ``name`` in the cache directory, atomically (through a
        temporary file renamed over it); nothing when there is no directory or it cannot be written."""
        if self.directory is None:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        except OSError:
            return
        try:
            with os.fdopen(handle, "wb") as out:
                write(out)
            os.replace(temporary, self.directory / name)
        except OSError:
            Path(temporary).unlink(missing_ok=True)

    def load_record(self, key: str | None) -> dict | None:
        """The JSON record stored under ``key`` (``<key>.json``), or None (absent or unreadable)."""
        if key is None:
            return None
        for path in self._candidates(key, ".json"):
            if not path.is_file():
                continue
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(record, dict):
                return record
        return None

    def save_record(self, key: str | None, record: dict) -> None:
        """Write ``record`` as JSON under ``key`` (atomically; a directory that cannot be written is skipped)."""
        if key is None:
            return
        try:  # numpy scalars as Python numbers; anything else is not a record to keep
            text = json.dumps(record, default=lambda value: value.item() if isinstance(value, np.generic) else repr(value))
        except (TypeError, ValueError):
            return
        self._write(f"{key}.json", lambda out: out.write(text.encode("utf-8")))

    def get(self, key: str | None, domain: tuple[int, ...], compute: Callable[[], IdentityStrategy | PIdentityStrategy | KroneckerStrategy],
            ) -> IdentityStrategy | PIdentityStrategy | KroneckerStrategy:
        """The stored strategy for ``key``, else ``compute()`` (then stored)."""
        strategy = self.load(key, domain)
        if strategy is None:
            strategy = compute()
            self.save(key, strategy)
        return strategy


#: The store every read and write goes to while a set is built (:func:`building_into`), else None.
_BUILDING: list[StrategyStore] = []


def default_store() -> StrategyStore:
    """The store of shipped strategies and :func:`cache_directory` (read from the environment
    now); while :func:`building_into` runs, the store being built alone."""
    return _BUILDING[-1] if _BUILDING else StrategyStore(cache_directory())


@contextmanager
def building_into(store: StrategyStore) -> Iterator[StrategyStore]:
    """Direct every stored record read or written through :func:`default_store` to ``store``
    alone while the block runs (``blowfish-te strategies --out``: the target folder alone decides
    what is missing, so a release build writes every file)."""
    _BUILDING.append(store)
    try:
        yield store
    finally:
        _BUILDING.pop()
