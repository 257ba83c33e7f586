"""The mechanism interface: where any differentially private algorithm plugs in (transformational
equivalence: Haney, Machanavajjhala, Ding, PVLDB 2015; the matrix mechanism: Li et al., PODS 2010)."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .._cache import IdentityCache
from .._validation import check_epsilon, check_histogram
from ..noise import NUMPY_LAPLACE, RNGLike, add_laplace, check_rng
from ..policies import Policy
from ..sensitivity import sensitivity
from ..transform import TransformedWorkload
from ..workloads import MatrixWorkload, Workload, as_workload


#: Cache key standing for "no policy": sensitivity for unit changes.
_UNIT_CHANGES = object()


class Mechanism(ABC):
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

    @abstractmethod
    def run(self, workload: Workload, x: np.ndarray, epsilon: float, rng: RNGLike = None) -> np.ndarray:
        """Estimate ``workload @ x`` with ε-DP for unit-change neighbours of x."""

    def expected_error(self, workload: Workload, epsilon: float) -> float | None:
        """Expected total squared error over the workload, when data-independent; else None."""
        return None

    def __setattr__(self, name: str, value) -> None:
        # Parameters are fixed once set: strategies and errors are cached per workload.
        if not name.startswith("_") and name in self.__dict__:
            raise AttributeError(f"mechanism parameter {name!r} is fixed; create a new {type(self).__name__}")
        object.__setattr__(self, name, value)

    @staticmethod
    def _checked(workload, x, epsilon, rng):
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
        return f"{type(self).__name__}()"


def integer_entries(strategy: Workload) -> bool:
    """Whether every entry of A is an integer, read off its structure (never the data): binary
    workloads, explicit matrices with integral entries, and W P_G of such a W (P_G has entries
    0 and ±1). Then A x is an integer vector for every histogram x."""
    if strategy.is_binary:
        return True
    if isinstance(strategy, MatrixWorkload):
        data = strategy.matrix.data
        return bool(np.array_equal(data, np.round(data)))
    if isinstance(strategy, TransformedWorkload):
        return integer_entries(strategy.base)
    return False


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

    @abstractmethod
    def strategy(self, workload: Workload) -> Workload:
        """The measured queries A (depending on the workload only, never on the data)."""

    def reconstruct(self, workload: Workload, strategy: Workload, y: np.ndarray) -> np.ndarray:
        """Answers ŷ = W A⁺ y from the noisy measurements y."""
        return workload.matvec(strategy.pinv(y))

    def reconstruction_frobenius_sq(self, workload: Workload, strategy: Workload) -> float | None:
        """‖R‖_F² for the reconstruction of :meth:`reconstruct`; None if it is not linear."""
        return strategy.lstsq_frobenius_sq(workload)

    def _frobenius(self, workload: Workload, strategy: Workload) -> float | None:
        """‖R‖_F², cached per workload object (the strategy depends on the workload only)."""
        return self._cache("frobenius").get(workload, lambda: self.reconstruction_frobenius_sq(workload, strategy))

    def strategy_sensitivity(self, strategy: Workload, policy: Policy | None = None) -> float:
        """Δ of the strategy: unit-change sensitivity if ``policy`` is None, else Δ_G(A)."""
        if policy is None:
            return float(strategy.column_norms("l1").max())
        return sensitivity(strategy, policy)

    def _sensitivity(self, workload: Workload, strategy: Workload, policy: Policy | None) -> float:
        """:meth:`strategy_sensitivity`, cached per (workload, policy) object: A depends on W only."""
        per_workload = self._cache("sensitivity").get(workload, IdentityCache)
        return per_workload.get(_UNIT_CHANGES if policy is None else policy,
                                lambda: self.strategy_sensitivity(strategy, policy))

    def release(
        self, workload, x, epsilon: float, rng: RNGLike = None, policy: Policy | None = None
    ) -> tuple[np.ndarray, float]:
        """Run the mechanism; return the answers and the sensitivity Δ the noise was calibrated to."""
        workload, x, epsilon, gen = self._checked(workload, x, epsilon, rng)
        strategy = self.strategy(workload)
        delta = self._sensitivity(workload, strategy, policy)
        scale = delta / epsilon
        if not np.isfinite(scale):
            raise ValueError(f"epsilon={epsilon!r} is too small: the noise scale Δ/ε = {delta}/{epsilon} overflows")
        y = add_laplace(strategy.matvec(x), scale, gen, sensitivity=delta, integer=integer_entries(strategy))
        return np.asarray(self.reconstruct(workload, strategy, y), dtype=np.float64), delta

    def run(self, workload, x, epsilon, rng=None):
        return self.release(workload, x, epsilon, rng)[0]

    def expected_error(
        self, workload, epsilon: float, policy: Policy | None = None, sensitivity: float | None = None
    ) -> float | None:
        """2 (Δ/ε)² ‖R‖_F², with Δ for unit changes, for ``policy``, or as given; None when the
        reconstruction is not linear (then the error depends on the data)."""
        workload = as_workload(workload)
        epsilon = check_epsilon(epsilon)
        strategy = self.strategy(workload)
        frobenius = self._frobenius(workload, strategy)
        if frobenius is None:
            return None
        delta = self._sensitivity(workload, strategy, policy) if sensitivity is None else sensitivity
        scale = delta / epsilon
        if not np.isfinite(scale):
            raise ValueError(f"epsilon={epsilon!r} is too small: the noise scale Δ/ε = {delta}/{epsilon} overflows")
        return 2.0 * scale * scale * frobenius
