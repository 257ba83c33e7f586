"""The mechanism contract: where any differentially private algorithm plugs in (transformational
equivalence: Haney, Machanavajjhala, Ding, PVLDB 2015; the matrix mechanism: Li et al., PODS 2010).

One contract for every kind: :meth:`Mechanism.measure` ``(workload, x, ε, gen, policy=None) ->
Outcome`` releases on validated arguments — for unit changes when ``policy`` is None (what a
transform route runs on (W_T, x_T)), under ``policy`` in the exact and native routes —;
:meth:`Mechanism.expected_error` ``(workload, ε, policy=None)`` gives its analytic error where it
has one; :meth:`Mechanism.serves` ``(workload, policy)`` refuses, at planning time, what it does
not serve; the public :meth:`Mechanism.release` validates every argument and calls ``measure``
(:meth:`Mechanism.run` gives its answers for unit changes). The kinds differ in what they must (M)
and may (m) implement:

- :class:`Mechanism` — any ε-DP algorithm for unit changes of a vector. M: ``name``, ``measure``.
  m: ``expected_error`` (when data-independent), ``total_source`` (where a mechanism that needs
  the record total gets it). (A class written against the earlier contract, which implements
  ``run``, still works: ``measure`` then answers with it.)
- :class:`LinearMechanism` — measure A x + Laplace noise, reconstruct linearly. M: ``name``,
  ``strategy``. m: ``reconstruct`` and ``reconstruction_frobenius_sq`` (default least squares).
  Gets the exact route and analytic errors for free.
- :class:`NativeMechanism` — reads the policy itself (``measure`` needs ``policy``). M: ``name``,
  ``measure``. m: ``serves``, ``expected_error``.

Each kind declares what it is in its tags (:attr:`Mechanism.tags`, class attributes such as
``routes``, ``models_records``, ``needs_grid``, ``sampler``) and answers in one shape,
:class:`~blowfish_te.routes.Outcome`.

Parameters go in ``__init__`` under their own names (read back by :meth:`Mechanism.get_params`,
which drives ``repr``) and are fixed afterwards. A module-level class that sets ``name`` joins
:data:`MECHANISMS` when it is defined (``register=False`` in the class statement opts out); an
installed package adds its classes through the entry-point group :data:`ENTRY_POINT_GROUP`, e.g.
in its ``pyproject.toml``::

    [project.entry-points."blowfish_te.mechanisms"]
    my_mechanism = "my_package.module:MyMechanism"

after which ``answer(..., "my_mechanism")``, the CLI and suite files find it by name.
"""

from __future__ import annotations

import inspect
import warnings
from abc import ABC, abstractmethod
from collections.abc import ItemsView, Iterator, KeysView, ValuesView
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._cache import IdentityCache
from .._validation import check_epsilon, check_histogram, check_real
from ..noise import NUMPY_LAPLACE, RandomSource, RNGLike, add_laplace, check_rng
from ..policies import Policy
from ..routes import MechanismTags, Outcome
from ..sensitivity import check_compatible, sensitivity
from ..strategies.base import LeastSquares, integer_entries
from ..workloads import Workload, as_workload

#: Cache key standing for "no policy": sensitivity for unit changes.
_UNIT_CHANGES = object()

class Registry(dict):
    """Mechanism classes by name. The library's own register when their module is imported, which
    :data:`loader` (set by the package) does on the first lookup of one of their names, or of all
    of them when the registry is listed; plug-ins register when first looked up (see
    :func:`mechanism_class`). So a release imports only the modules of what it runs."""

    loader = None  # loader(name) imports the module defining the library mechanism name (None: all)

    def _load(self, name: str | None = None) -> None:
        if self.loader is not None and (name is None or not dict.__contains__(self, name)):
            self.loader(name)

    def __getitem__(self, name: str) -> type[Mechanism]:
        self._load(name)
        return dict.__getitem__(self, name)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):  # only names are registered
            self._load(name)
        return dict.__contains__(self, name)

    def get(self, name: str, default: type[Mechanism] | None = None) -> type[Mechanism] | None:  # type: ignore[override]
        self._load(name)
        return dict.get(self, name, default)

    def __iter__(self) -> Iterator[str]:
        self._load()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._load()
        return dict.__len__(self)

    def keys(self) -> KeysView[str]:  # type: ignore[override]  # dict's view classes are private
        self._load()
        return dict.keys(self)

    def values(self) -> ValuesView[type[Mechanism]]:  # type: ignore[override]
        self._load()
        return dict.values(self)

    def items(self) -> ItemsView[str, type[Mechanism]]:  # type: ignore[override]
        self._load()
        return dict.items(self)


#: Mechanism classes by name (a :class:`Registry`).
MECHANISMS: Registry = Registry()
#: The entry-point group through which installed packages add mechanisms.
ENTRY_POINT_GROUP = "blowfish_te.mechanisms"


def _register(cls: type[Mechanism]) -> None:
    known = dict.get(MECHANISMS, cls.name)
    if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
        raise TypeError(f"mechanism name {cls.name!r} of {cls.__module__}.{cls.__qualname__} is already taken by "
                        f"{known.__module__}.{known.__qualname__}; choose another name")
    MECHANISMS[cls.name] = cls


def load_plugins(name: str | None = None) -> None:
    """Register the mechanisms installed packages declare in :data:`ENTRY_POINT_GROUP` (only the
    entry point called ``name`` when given)."""
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        if name is not None and point.name != name:
            continue
        try:
            cls = point.load()
        except Exception as err:  # a broken plug-in must say which one it is
            raise ImportError(f"plug-in mechanism {point.name!r} ({point.value}) failed to load: {err}") from err
        if not (isinstance(cls, type) and issubclass(cls, Mechanism)) or cls.name != point.name:
            raise TypeError(f"entry point {point.name!r} ({point.value}) must name a Mechanism class whose name is "
                            f"{point.name!r}, got {cls!r}")
        _register(cls)


def mechanism_class(name: str) -> type[Mechanism]:
    """The class registered as ``name`` (a library mechanism's module is imported on its first
    lookup), looking through installed plug-ins on a miss."""
    if not isinstance(name, str):
        raise TypeError(f"mechanism name must be a string, got {type(name).__name__}")
    if name not in MECHANISMS:
        load_plugins(name)
    if name not in MECHANISMS:
        raise ValueError(f"unknown mechanism {name!r}; known mechanisms: {', '.join(sorted(MECHANISMS))}")
    return MECHANISMS[name]


_DEFAULTS: dict[str, Mechanism] = {}


def get_mechanism(mechanism: str | Mechanism) -> Mechanism:
    """A mechanism instance from a registered name (see :func:`mechanism_class`) or an instance.

    Names map to one shared default instance each, so strategies cached per workload (GreedyH's
    weights, optimised strategies) are reused across releases.
    """
    if isinstance(mechanism, Mechanism):
        return mechanism
    if isinstance(mechanism, str):
        cls = mechanism_class(mechanism)
        if type(_DEFAULTS.get(mechanism)) is not cls:  # first use, or the name was registered anew
            _DEFAULTS[mechanism] = cls()
        return _DEFAULTS[mechanism]
    raise TypeError(f"mechanism must be a name or a Mechanism instance, got {type(mechanism).__name__}")


class Mechanism(ABC):  # noqa: B024 (a subclass implements measure, or run under the earlier contract)
    """An algorithm that answers a workload with ε-differential privacy.

    Contract:

    - parameters go in ``__init__`` and are fixed afterwards (strategies and errors are cached per
      workload); :meth:`run` keeps no state between calls;
    - ``run(W, x, epsilon, rng)`` returns an estimate of ``W @ x`` (one value per query) and is
      ε-DP for **unit-change neighbours** of the vector x (x' = x ± e_i). :func:`blowfish_te.answer`
      applies it to (W_G, x_G) of a tree transform, where G-neighbours are exactly unit changes, so
      the release is (ε, G)-Blowfish private. Note x_G is not a histogram of records: its
      total is not public;
    - :meth:`expected_error` is the exact expected total squared error E‖ŷ - W x‖², or None when it
      depends on the data.
    """

    #: Short name used in releases and reports.
    name: str = "mechanism"
    #: The noise sampler the mechanism draws from with a numpy Generator, recorded in releases made
    #: with one (with ``rng=None`` releases record the samplers actually used).
    sampler: str = NUMPY_LAPLACE
    #: True when the mechanism models x as records spread over cells (a distribution with a total,
    #: as MWEM and Uniform do): under a policy other than plain DP it would run on x_G, whose
    #: coordinates count records below tree edges, so :func:`blowfish_te.answer` refuses it there.
    models_records: bool = False
    #: True for mechanisms that only run on a 2-D grid of counts (checked and audited on one).
    needs_grid: bool = False
    #: True for mechanisms that answer marginal workloads only (audited on one).
    needs_marginals: bool = False
    #: The routes the planner gives this kind of mechanism (tags of :data:`blowfish_te.routes.ROUTE_CLASSES`):
    #: any ε-DP algorithm runs on a tree transform.
    routes: tuple[str, ...] = ("transform",)
    #: True when :meth:`expected_error` is analytic (data-independent): the planner ranks routes and
    #: trees by it.
    analytic_error: bool = False
    #: True for a mechanism that tunes its own plan and predicts the time that takes
    #: (``predicted_seconds(workload, policy)``, a cost model of sizes, never a clock).
    tunes_plan: bool = False
    #: True for a linear strategy answered by least squares (:class:`LinearMechanism`).
    linear: bool = False
    #: True when the release is x plus one independent Laplace draw per cell (:class:`Identity`):
    #: :mod:`blowfish_te.smoothing` can read structure back from it.
    laplace_on_cells: bool = False
    #: True for a data-dependent mechanism that declares its error model and runs without its own
    #: check (:meth:`unchecked`); see :attr:`~blowfish_te.routes.MechanismTags.predicts_error`.
    predicts_error: bool = False

    @property
    def tags(self) -> MechanismTags:
        """The class's :class:`~blowfish_te.routes.MechanismTags`: what the planner and the
        selectors ask of a mechanism, instead of its class."""
        return MechanismTags.of(type(self))

    def __init_subclass__(cls, register: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if register and "name" in cls.__dict__ and "<locals>" not in cls.__qualname__:
            _register(cls)

    def unchecked(self) -> Mechanism:
        """The same mechanism without its own private check (``select=False``, its other
        parameters kept): what a selector that has checked for it runs. Mechanisms that predict
        their error (:attr:`predicts_error`) take ``select``."""
        params = self.get_params()
        if not self.predicts_error or "select" not in params:
            raise TypeError(f"{self.name} has no private check to leave out: only a mechanism that predicts its error and "
                            "takes select can run unchecked")
        return type(self)(**{**params, "select": False})

    def get_params(self) -> dict:
        """The constructor's parameters and their values (scikit-learn's convention): every
        ``__init__`` argument is stored under its own name."""
        signature = inspect.signature(type(self).__init__)
        keep = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return {p: getattr(self, p) for p, spec in list(signature.parameters.items())[1:] if spec.kind in keep}

    def run(self, workload: Workload | ArrayLike, x: ArrayLike, epsilon: float, rng: RNGLike = None) -> np.ndarray:
        """Estimate ``workload @ x`` with ε-DP for unit-change neighbours of x: the answers of
        :meth:`release`."""
        return self.release(workload, x, epsilon, rng).answers

    def release(self, workload: Workload | ArrayLike, x: ArrayLike, epsilon: float, rng: RNGLike = None,
                policy: Policy | None = None) -> Outcome:
        """:meth:`measure` after validating every argument: the workload, the histogram (of the
        policy's shape under ``policy``, which the mechanism must :meth:`serve <serves>`), ε and the
        generator."""
        workload = as_workload(workload)
        if policy is not None:
            if not {"exact", "native"} & set(self.tags.routes):
                self.unit_changes(policy)
            check_compatible(workload, policy)
            self.serves(workload, policy)
        x = check_histogram(x, workload.domain if policy is None else policy.shape)
        return self.measure(workload, x, check_epsilon(epsilon), check_rng(rng), policy=policy)

    @staticmethod
    def registry() -> dict[str, type[Mechanism]]:
        """The registered mechanism classes by name (:data:`MECHANISMS`)."""
        return MECHANISMS

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        """The release on validated arguments (a numpy Generator or SecureRandom ``gen``), as an
        :class:`~blowfish_te.routes.Outcome`: what the routes execute, for unit changes when
        ``policy`` is None. Mechanisms that know their sensitivity and noise scale report them.
        A class that implements :meth:`run` instead (the earlier contract) answers with it."""
        if type(self).run is Mechanism.run:
            raise NotImplementedError(f"mechanism {self.name!r} must implement measure(workload, x, epsilon, gen, policy=None)")
        self.unit_changes(policy)
        return Outcome(np.asarray(self.run(workload, x, epsilon, gen), dtype=np.float64))

    def unit_changes(self, policy: Policy | None) -> None:
        """Refuse a policy where the release is ε-DP for unit changes only: under a policy it must
        run through a transform (:func:`blowfish_te.answer`), else its privacy would be stated for
        the wrong neighbours."""
        if policy is not None:
            raise TypeError(f"mechanism {self.name!r} is ε-DP for unit changes of x; under {policy.name} release it "
                            "with answer(workload, x, policy, epsilon, mechanism), which runs it on the transformed counts")

    def serves(self, workload: Workload, policy: Policy) -> bool:
        """True when the mechanism releases ``workload`` under ``policy`` (checked at planning
        time, before any data is read); raises ValueError saying why when it does not."""
        return True

    def handles_large_domain(self, workload: Workload) -> bool:
        """True when the mechanism plans and releases ``workload`` without arrays of the domain's
        size (e.g. strategies over marginals): :class:`~blowfish_te.mechanisms.Auto` considers
        only such mechanisms on domains too large for a histogram."""
        return False

    def marginals_read(self, workload: Workload, policy: Policy | None = None) -> tuple[tuple[int, ...], ...] | None:
        """The marginals (attribute tuples) the release reads when it reads marginals only, else
        None (it needs the histogram)."""
        return None

    def total_source(self) -> str | None:
        """For mechanisms that use the record total: whether it was given as public or measured
        (and with what share of ε); the release's ``choice`` reports it. None: not used."""
        return None

    def expected_error(self, workload: Workload | ArrayLike, epsilon: float, policy: Policy | None = None) -> float | None:
        """Expected total squared error over the workload (for unit changes, or under ``policy``),
        when data-independent; else None."""
        return None

    def __setattr__(self, name: str, value: Any) -> None:
        # Parameters are fixed once set: strategies and errors are cached per workload.
        if not name.startswith("_") and name in self.__dict__:
            raise AttributeError(f"mechanism parameter {name!r} is fixed; create a new {type(self).__name__}")
        object.__setattr__(self, name, value)

    @staticmethod
    def _checked(workload: Workload | ArrayLike, x: ArrayLike, epsilon: float,
                 rng: RNGLike) -> tuple[Workload, np.ndarray, float, RandomSource]:
        """The arguments of :meth:`run`, validated: (workload, histogram, ε, numpy Generator)."""
        workload = as_workload(workload)
        return workload, check_histogram(x, workload.domain), check_epsilon(epsilon), check_rng(rng)

    def _cache(self, label: str) -> IdentityCache:
        """A bounded per-workload cache owned by this mechanism."""
        caches = self.__dict__.setdefault("_caches", {})
        if label not in caches:
            caches[label] = IdentityCache()
        return caches[label]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"


class RecordTotal:
    """For mechanisms that scale by the record total N: either ``total`` given as public, or N
    measured with Laplace(1/(ρε)) (sensitivity 1 under unit changes) for the share ρ =
    ``total_share`` of ε, composed sequentially with the rest. Never read from the data for free."""

    name: str  # the mechanism's, which this mixes into

    def _init_total(self, total: float | None, total_share: float) -> None:
        self.total = None if total is None else check_real(total, "total (the public record count)", 0, exclusive=True)
        self.total_share = check_real(total_share, "total_share", 0, 1, exclusive=True)

    def total_source(self) -> str:
        if self.total is not None:
            return f"{self.name}: record total given as public ({self.total:g})"
        return f"{self.name}: record total measured with {self.total_share:g}·ε (never read from the data)"

    def _record_total(self, x: np.ndarray, epsilon: float, gen: RandomSource) -> tuple[float, float]:
        """(N, ε left): the public total, or the noisy one (at least 1) and ε less its share."""
        if self.total is not None:
            return float(self.total), epsilon
        spent = self.total_share * epsilon
        noisy = add_laplace(np.array([float(x.sum())]), 1.0 / spent, gen, sensitivity=1.0, integer=True)[0]
        return max(float(noisy), 1.0), epsilon - spent


class LinearMechanism(Mechanism):
    """A data-independent linear mechanism: measure y = A x + Lap(Δ/ε)^p, answer ŷ = R y.

    Privacy: Δ is the L1 sensitivity of the strategy A for the neighbour relation — the largest
    column L1 norm of A for unit changes (:meth:`run`), or Δ_G(A) computed from the policy's edges
    in the exact route. Laplace(Δ/ε) noise makes y ε-DP, resp. (ε, G)-Blowfish
    (Dwork et al. 2006; He et al. Thm 5.1); the answers are post-processing of y. One release
    spends ε once (sequential composition applies across releases). With ``rng=None`` the noise is
    exact discrete Laplace when A has integer entries (:func:`integer_entries`: y is then an
    integer vector), else lattice Laplace (:mod:`blowfish_te.secure`); both are ε-DP exactly.

    By default R = W A⁺ (least squares, for strategies that solve their own, see
    :class:`blowfish_te.strategies.LeastSquares`), and the expected total squared error is exactly
    2 (Δ/ε)² ‖R‖_F² (the matrix mechanism's error).
    """

    routes = ("exact", "transform")
    analytic_error = True
    linear = True

    @abstractmethod
    def strategy(self, workload: Workload) -> LeastSquares:
        """The measured queries A (depending on the workload only, never on the data)."""

    def policy_strategy(self, workload: Workload, policy: Policy) -> LeastSquares:
        """The measured queries of the exact route under ``policy`` (depending on the workload and
        policy only, never on the data); by default :meth:`strategy`. Whatever it returns, the noise
        is calibrated to Δ_G of it computed from the policy's edges."""
        return self.strategy(workload)

    def _strategy_for(self, workload: Workload, policy: Policy | None) -> LeastSquares:
        return self.strategy(workload) if policy is None else self.policy_strategy(workload, policy)

    def reconstruct(self, workload: Workload, strategy: LeastSquares, y: np.ndarray) -> np.ndarray:
        """Answers ŷ = W A⁺ y from the noisy measurements y."""
        return workload.matvec(strategy.pinv(y))

    def reconstruction_frobenius_sq(self, workload: Workload, strategy: LeastSquares) -> float | None:
        """‖R‖_F² for the reconstruction of :meth:`reconstruct`; None if it is not linear."""
        return strategy.lstsq_frobenius_sq(workload)

    def _frobenius(self, workload: Workload, strategy: LeastSquares) -> float | None:
        """‖R‖_F², cached per (workload, strategy) object."""
        per_workload = self._cache("frobenius").get(workload, IdentityCache)
        return per_workload.get(strategy, lambda: self.reconstruction_frobenius_sq(workload, strategy))

    def strategy_sensitivity(self, strategy: Workload, policy: Policy | None = None) -> float:
        """Δ of the strategy: unit-change sensitivity if ``policy`` is None, else Δ_G(A)."""
        if policy is None:
            return float(strategy.column_norms("l1").max())
        return sensitivity(strategy, policy)

    def _sensitivity(self, workload: Workload, strategy: Workload, policy: Policy | None) -> float:
        """:meth:`strategy_sensitivity`, cached per (workload, policy) object: A depends on them only."""
        per_workload = self._cache("sensitivity").get(workload, IdentityCache)
        return per_workload.get(_UNIT_CHANGES if policy is None else policy,
                                lambda: self.strategy_sensitivity(strategy, policy))

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        """The answers, the sensitivity Δ the noise was calibrated to (for unit changes, or Δ_G
        under ``policy``) and the Laplace scale Δ/ε, on validated arguments."""
        strategy = self._strategy_for(workload, policy)
        delta = self._sensitivity(workload, strategy, policy)
        scale = delta / epsilon
        if not np.isfinite(scale):
            raise ValueError(f"epsilon={epsilon!r} is too small: the noise scale Δ/ε = {delta}/{epsilon} overflows")
        y = add_laplace(strategy.matvec(x), scale, gen, sensitivity=delta, integer=integer_entries(strategy))
        answers = np.asarray(self.reconstruct(workload, strategy, y), dtype=np.float64)
        return Outcome(answers, sensitivity=delta, noise_scale=scale)

    def expected_error(
        self, workload: Workload | ArrayLike, epsilon: float, policy: Policy | None = None, sensitivity: float | None = None
    ) -> float | None:
        """2 (Δ/ε)² ‖R‖_F², with Δ for unit changes, for ``policy``, or as given; None when the
        reconstruction is not linear (then the error depends on the data)."""
        workload = as_workload(workload)
        epsilon = check_epsilon(epsilon)
        strategy = self._strategy_for(workload, policy)
        frobenius = self._frobenius(workload, strategy)
        if frobenius is None:
            return None
        delta = self._sensitivity(workload, strategy, policy) if sensitivity is None else sensitivity
        scale = delta / epsilon
        if not np.isfinite(scale):
            raise ValueError(f"epsilon={epsilon!r} is too small: the noise scale Δ/ε = {delta}/{epsilon} overflows")
        return 2.0 * scale * scale * frobenius


class NativeMechanism(Mechanism):
    """A mechanism designed for a family of policies: it reads the policy and calibrates every noise
    scale to a sensitivity computed from the policy's edges. :func:`blowfish_te.answer` runs it on
    (W, x, policy) directly (route ``"native"``); it has no unit-change form, so :meth:`measure`
    and :meth:`release` need ``policy``.

    :meth:`serves` refuses policies the mechanism does not serve (at planning time, before any data
    is read), :meth:`measure` releases on validated arguments, :meth:`release` does both. A class
    written against the earlier contract (``compute``, ``check_policy``, ``expected_error_native``)
    still works, with a DeprecationWarning when it is defined."""

    routes = ("native",)

    def __init_subclass__(cls, register: bool = True, **kwargs: Any) -> None:
        _adopt_native_contract(cls)
        # a native mechanism that computes its expected error is an analytic candidate of auto
        if "expected_error" in vars(cls) and "analytic_error" not in vars(cls):
            cls.analytic_error = True
        super().__init_subclass__(register=register, **kwargs)

    def run(self, workload: Workload | ArrayLike, x: ArrayLike, epsilon: float, rng: RNGLike = None) -> np.ndarray:
        raise TypeError(f"mechanism {self.name!r} needs the policy: use answer(workload, x, policy, ...)")

    @abstractmethod
    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        """Answer the workload with (ε, policy)-Blowfish privacy, on validated arguments."""

    def needs_policy(self, policy: Policy | None) -> Policy:
        """``policy``, or TypeError: a native mechanism has no unit-change form."""
        if policy is None:
            raise TypeError(f"mechanism {self.name!r} needs the policy: use answer(workload, x, policy, ...)")
        return policy

    def release_native(self, workload: Workload | ArrayLike, x: ArrayLike, policy: Policy, epsilon: float,
                       rng: RNGLike = None) -> Outcome:
        """Deprecated: :meth:`release` with ``policy=policy``."""
        warnings.warn("release_native(workload, x, policy, epsilon, rng) is deprecated; use "
                      "release(workload, x, epsilon, rng, policy=policy)", DeprecationWarning, stacklevel=2)
        return self.release(workload, x, epsilon, rng, policy=policy)


def _adopt_native_contract(cls: type) -> None:
    """A native class written against the earlier contract gets the methods of this one, each
    calling its old counterpart: ``measure`` from ``compute``, ``serves`` from ``check_policy``,
    ``expected_error`` from ``expected_error_native``."""
    own = vars(cls)
    old = [name for name in ("compute", "check_policy", "expected_error_native") if name in own]
    if not old:
        return
    warnings.warn(f"{cls.__qualname__} implements {', '.join(old)}: the native contract is now measure(workload, x, "
                  "epsilon, gen, policy), serves(workload, policy) and expected_error(workload, epsilon, policy)",
                  DeprecationWarning, stacklevel=3)
    if "compute" in own and "measure" not in own:
        compute = own["compute"]

        def measure(self: NativeMechanism, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                    policy: Policy | None = None) -> Outcome:
            return compute(self, workload, x, self.needs_policy(policy), epsilon, gen)

        cls.measure = measure  # type: ignore[attr-defined]
    if "check_policy" in own and "serves" not in own:
        check = own["check_policy"]

        def serves(self: NativeMechanism, workload: Workload, policy: Policy) -> bool:
            check(self, workload, policy)
            return True

        cls.serves = serves  # type: ignore[attr-defined]
    if "expected_error_native" in own and "expected_error" not in own:
        native_error = own["expected_error_native"]

        def expected_error(self: NativeMechanism, workload: Workload, epsilon: float,
                           policy: Policy | None = None) -> float | None:
            return native_error(self, workload, epsilon, self.needs_policy(policy))

        cls.expected_error = expected_error  # type: ignore[attr-defined]
