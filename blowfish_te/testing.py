"""Oracles and privacy replay for testing mechanisms, as :mod:`numpy.testing` is for arrays.

Everything here is written from the definitions, apart from the code it checks: dense twins of
implicit operators, brute force over tiny domains, the tolerances of Laplace statistics, and two
exact couplings that run a release on a histogram x, replay it on a neighbour x' with the same
noise outputs, and add up the privacy loss of the noise actually drawn:

- :class:`Replay` (with :func:`replayed_runs`): Laplace draws through one name ``add_laplace``
  that the caller patches in the modules it lists;
- :class:`Tape` (with :func:`recording` and :func:`transcript_loss`): every Laplace draw of
  :func:`blowfish_te.noise.add_laplace` and every private selection of the library, wherever a
  module bound them, on a numpy Generator or the secure sampler; a draw made outside them, a
  neighbour that takes another path, or answers that differ under the same transcript fail.

The library's own tests use them. A plug-in author replays a mechanism the same way (the module
that defines it is listed so that its own ``add_laplace`` is intercepted too)::

    from blowfish_te import testing

    release = lambda x, rng: bt.answer(W, x, policy, 0.5, MyMechanism(), rng=rng).answers
    with testing.recording(modules=[my_module]) as tape:
        pairs = testing.sampled_neighbour_pairs(policy)  # seeded histograms and a neighbour of each
        assert max(testing.transcript_loss(tape, release, x, y) for x, y in pairs) <= 0.5 * (1 + 1e-9)

Importing this module loads numpy and the library's samplers only; the rest of the library is
imported by the functions that use it. Neither pytest nor hypothesis is needed.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import random
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any, NamedTuple, Protocol

import numpy as np

from . import noise, secure
from .secure import SecureRandom

__all__ = [
    "DRAWS",
    "Call",
    "Replay",
    "SeededSecrets",
    "Tape",
    "WatchedGenerator",
    "WatchedSecure",
    "added_records",
    "all_neighbour_pairs",
    "assert_laplace_noise",
    "brute_edges",
    "brute_sensitivity",
    "close",
    "dense_boxes",
    "dlap_cdf",
    "edge_set",
    "exponential_mechanism_loss",
    "ks_distance",
    "laplace_cdf",
    "laplace_mse_sd",
    "library_selections",
    "per_unit_change",
    "policy_neighbours",
    "policy_routes",
    "recording",
    "replayed_runs",
    "sampled_neighbour_pairs",
    "seeded_entropy",
    "transcript_loss",
    "worst_case_loss",
    "worst_replayed_cost",
]


class Patcher(Protocol):
    """What :func:`replayed_runs` patches through: pytest's ``monkeypatch`` fixture, for one."""

    def setattr(self, target: Any, name: str, value: Any) -> None: ...


class _Patches:
    """Attributes set for a while and put back, last first (a ``monkeypatch`` without pytest)."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def setattr(self, target: Any, name: str, value: Any) -> None:
        self._saved.append((target, name, getattr(target, name)))
        setattr(target, name, value)

    def undo(self) -> None:
        while self._saved:
            target, name, value = self._saved.pop()
            setattr(target, name, value)


# -- dense twins and brute force -------------------------------------------------------------


def dense_boxes(domain: Sequence[int], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Dense matrix of box queries over the grid ``domain``, one indicator grid per box
    [``lo``, ``hi``] (inclusive): the twin of :func:`blowfish_te.workloads.rects` and ``ranges``."""
    rows = []
    for a, b in zip(np.atleast_2d(lo), np.atleast_2d(hi)):
        g = np.zeros(domain)
        g[tuple(slice(int(i), int(j) + 1) for i, j in zip(a, b))] = 1
        rows.append(g.ravel())
    return np.array(rows)


def brute_edges(policy_kind: str, shape: Sequence[int], theta: int = 1, labels: Sequence[int] | None = None) -> set[tuple[int, int]]:
    """Edge set of a standard policy (``complete``, ``line``, ``threshold``, ``grid``,
    ``attribute``, ``partition``, ``unbounded``) from its definition (He, Machanavajjhala, Ding,
    SIGMOD 2014, §3), by testing every pair of cells; ⊥ is index K."""
    cells = list(itertools.product(*[range(k) for k in shape]))
    k = math.prod(shape)
    edges = set()
    if policy_kind == "unbounded":
        return {(i, k) for i in range(k)}
    for i, a in enumerate(cells):
        for j in range(i + 1, k):
            b = cells[j]
            dist = sum(abs(p - q) for p, q in zip(a, b))
            differ = sum(p != q for p, q in zip(a, b))
            keep = {
                "complete": True,
                "line": dist == 1,
                "threshold": dist <= theta,
                "grid": dist <= theta,
                "attribute": differ == 1,
                "partition": labels is not None and labels[i] == labels[j],
            }[policy_kind]
            if keep:
                edges.add((i, j))
    return edges


def edge_set(policy: Any) -> set[tuple[int, int]]:
    """The edges of ``policy`` as a set of int pairs (⊥ is index K)."""
    return {(int(u), int(v)) for u, v in policy.edges}


def policy_neighbours(x: np.ndarray, policy: Any) -> list[np.ndarray]:
    """Every histogram one move along an edge of ``policy`` away from ``x`` (either direction; an
    edge to ⊥ adds or removes a record): the neighbours of Blowfish privacy."""
    k, found = x.size, []
    for u, v in edge_set(policy):
        for a, b in ((u, v), (v, u)):
            y = x.copy()
            if a == k:
                y[b] += 1
            elif x[a] > 0:
                y[a] -= 1
                if b < k:
                    y[b] += 1
            else:
                continue
            found.append(y)
    return found


def all_neighbour_pairs(policy: Any, max_records: int = 2) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every pair (x, x') of G-neighbouring histograms with at most ``max_records`` records in x
    (He et al. 2014): one record of x moved along an edge, or added or removed across ⊥."""
    k = policy.size
    for n in range(max_records + 1):
        for placement in itertools.combinations_with_replacement(range(k), n):
            x = np.bincount(np.array(placement, dtype=int), minlength=k)
            for u, v in policy.edges:
                for a, b in ((u, v), (v, u)):
                    if a < k and x[a] == 0:
                        continue
                    y = x.copy()
                    if a < k:
                        y[a] -= 1
                    if b < k:
                        y[b] += 1
                    yield x, y


def added_records(x: np.ndarray) -> list[np.ndarray]:
    """x + e_c for every cell c: the neighbours with one record more (unbounded DP)."""
    x = np.asarray(x)
    return [x + np.eye(x.size, dtype=x.dtype)[c] for c in range(x.size)]


def brute_sensitivity(dense_w: np.ndarray, edges: Iterable[tuple[int, int]], k: int, max_records: int = 2) -> float:
    """max ‖W x - W x'‖₁ over every pair of neighbouring histograms with at most ``max_records``
    records: move one record along an edge (either direction), or add/remove one under ⊥ (index k).
    The definition of the policy-specific sensitivity Δ_G(W), on a tiny domain."""
    best = 0.0
    for n in range(max_records + 1):
        for placement in itertools.combinations_with_replacement(range(k), n):
            x = np.bincount(np.array(placement, dtype=int), minlength=k)
            for u, v in edges:
                for a, b in ((u, v), (v, u)):
                    if a == k:  # add a record with value b
                        x2 = x.copy()
                        x2[b] += 1
                    elif x[a] == 0:
                        continue
                    else:  # move (or remove, when b is ⊥) a record of value a
                        x2 = x.copy()
                        x2[a] -= 1
                        if b < k:
                            x2[b] += 1
                    best = max(best, float(np.abs(dense_w @ x - dense_w @ x2).sum()))
    return best


# -- tolerances and distributions ------------------------------------------------------------


def close(actual: Any, expected: Any, magnitude: Any = None) -> bool:
    """Whether ``actual`` equals ``expected`` (same shape) up to the rounding of the float work
    that made them: 1e-9 of each value, and at least 1e-9 of the largest magnitude that work
    handled — ``magnitude`` (a number or the values it ran on, e.g. the noisy answers a draw is
    read back from), else ``expected`` — and of 1. Values as large as counts scale with keep
    their rounding inside, while a difference of one count is found at any size up to 10⁸."""
    actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    largest = np.abs(expected if magnitude is None else np.asarray(magnitude, dtype=np.float64))
    scale = max(1.0, float(largest.max(initial=0.0)))
    return actual.shape == expected.shape and bool(np.allclose(actual, expected, rtol=1e-9, atol=1e-9 * scale))


def laplace_mse_sd(a: np.ndarray, scale: float, m: int) -> float:
    """Standard deviation of (1/m) ηᵀAη for i.i.d. Laplace(scale) η and symmetric A: the spread of
    a Monte-Carlo mean squared error around its expectation.

    Var(ηᵀAη) = (μ4 - 3σ⁴) Σ A_ii² + 2σ⁴ tr(A²) with σ² = 2b², μ4 = 24b⁴.
    """
    b4 = scale**4
    var = 12 * b4 * float((np.diag(a) ** 2).sum()) + 8 * b4 * float((a * a).sum())
    return math.sqrt(var) / m


def assert_laplace_noise(noise: Any, scale: float) -> None:
    """Assert that i.i.d. draws η look like Laplace(``scale``): the mean of η² against 2b², within
    5 standard deviations (Var η² = μ4 - σ⁴ = 20 b⁴), and the mean of η against 0."""
    noise = np.ravel(np.asarray(noise, dtype=np.float64))
    n = noise.size
    assert abs(np.mean(noise**2) - 2 * scale**2) < 5 * math.sqrt(20.0 / n) * scale**2
    assert abs(np.mean(noise)) < 5 * math.sqrt(2.0 / n) * scale


def laplace_cdf(z: np.ndarray, scale: float) -> np.ndarray:
    """P(Z <= z) for Z ~ Laplace(scale)."""
    return np.where(z < 0, 0.5 * np.exp(z / scale), 1 - 0.5 * np.exp(-z / scale))


def dlap_cdf(k: np.ndarray, scale: float) -> np.ndarray:
    """P(Z <= k) for Z ~ DLap(scale), the discrete Laplace distribution of the secure sampler:
    1 - α^(k+1)/(1+α) for k >= 0, α^(-k)/(1+α) for k < 0, with α = exp(-1/scale)."""
    k = np.asarray(k, dtype=np.float64)
    alpha = np.exp(-1.0 / scale)
    return np.where(k >= 0, 1.0 - np.exp(-(k + 1) / scale) / (1 + alpha), np.exp(k / scale) / (1 + alpha))


def ks_distance(draws: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray], left_cdf: Callable[[np.ndarray], np.ndarray]) -> float:
    """sup_z |F_n(z) - F(z)| between the draws' empirical distribution F_n and ``cdf`` F
    (``left_cdf``: z ↦ F(z-), its limit from the left), the Kolmogorov–Smirnov distance. F_n is
    constant between draws and F monotone, so the sup is at a draw, on one side or the other of its
    jump. Compare it with the Dvoretzky–Kiefer–Wolfowitz bound sqrt(ln(2/α) / 2n)."""
    z = np.sort(draws)
    after = np.searchsorted(z, z, side="right") / z.size
    before = np.searchsorted(z, z, side="left") / z.size
    return float(max(np.abs(after - cdf(z)).max(), np.abs(before - left_cdf(z)).max()))


# -- exact privacy loss of linear releases ---------------------------------------------------


def policy_routes(policy: Any) -> Iterator[tuple[str, str | None]]:
    """Every (route, tree) a release under ``policy`` can be asked for: the exact route, the
    transform route (through each candidate spanning tree of a cyclic policy), and ``auto``."""
    from . import trees

    yield "exact", None
    if policy.is_forest:
        yield "transform", None
    else:
        for name in trees.candidates(policy):
            yield "transform", name
    yield "auto", None


def worst_case_loss(
    workload: Any, policy: Any, epsilon: float, mechanism: Any, route: str = "auto", tree: Any = None, ignore_stretch: bool = False
) -> float:
    """max over neighbours (:func:`all_neighbour_pairs`) of log p(out | x) / p(out | x') =
    ‖μ(x) - μ(x')‖₁ / b for the Laplace measurement μ of a linear release, with the noise scale b
    the release actually used (``ignore_stretch``: Δ/ε, without the stretch of the tree): the
    exact coupling of the Laplace mechanism. ∞ when answers released without noise differ."""
    from .mechanisms import get_mechanism
    from .release import answer, plan
    from .transform import transform
    from .workloads import marginals

    def release(x):
        return answer(workload, x, policy, epsilon, mechanism, rng=0, route=route, tree=tree)

    probe = release(np.zeros(policy.size, int))
    if probe.noise_scale == 0:  # exact answers: private only if no neighbour pair changes them
        same = all(np.array_equal(release(x).answers, release(y).answers) for x, y in all_neighbour_pairs(policy))
        return 0.0 if same else math.inf
    mech = get_mechanism(mechanism)
    if probe.route == "exact":
        strategy = mech.policy_strategy(workload, policy)
        a = strategy.dense()  # what the exact route measures
        measure = lambda x: a @ x  # noqa: E731
        _assert_approx(probe.noise_scale, probe.sensitivity / epsilon)
        exact = getattr(strategy, "exact", ())  # marginals released without noise: no neighbour may change them
        if exact:
            released = marginals(policy.shape, list(exact)).dense()
            if any(np.any(released @ (x - y)) for x, y in all_neighbour_pairs(policy)):
                return math.inf
    else:
        chosen = plan(workload, policy, epsilon, mechanism, route, tree).chosen
        tr = transform(policy, None if chosen.tree is policy else chosen.tree)
        a = mech.strategy(tr.workload(workload)).dense()
        measure = lambda x: a @ tr.data(x)  # noqa: E731
        _assert_approx(probe.noise_scale, probe.sensitivity * probe.stretch / epsilon)
    scale = probe.sensitivity / epsilon if ignore_stretch else probe.noise_scale
    loss = max((np.abs(measure(x) - measure(y)).sum() for x, y in all_neighbour_pairs(policy)), default=0.0)
    return loss / scale


def _assert_approx(actual: float, expected: float) -> None:
    """``actual == pytest.approx(expected)``: within 1e-6 of ``expected``, or 1e-12."""
    assert abs(actual - expected) <= max(1e-6 * abs(expected), 1e-12), f"noise scale {actual} != {expected}"


# -- replay of Laplace draws through a patched ``add_laplace`` --------------------------------


class Replay:
    """Exact coupling for mechanisms whose randomness is Laplace noise: record every noisy vector
    released on x, then on a neighbour x' return the same outputs, charging ‖v - v'‖₁ / scale
    for the shift of the noise. The mechanism's later choices read only released values, so both
    runs take the same path; the total charge ``cost`` bounds the privacy loss of the output.

    An instance stands in for :func:`blowfish_te.noise.add_laplace` (same signature): patch it
    into the modules that draw, run on x, call :meth:`replay`, run on x'."""

    def __init__(self) -> None:
        self.outputs: list[np.ndarray] = []
        self.inputs: list[np.ndarray] = []
        self.scales: list[float] = []
        self.cost = 0.0
        self.replaying = False

    def __call__(self, values: Any, scale: float, rng: Any, *, sensitivity: float, integer: bool) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if not self.replaying:
            out = values + rng.laplace(0.0, scale, values.shape)
            self.outputs.append(out)
            self.inputs.append(values)
            self.scales.append(scale)
            return out
        step = len(self.inputs)
        recorded_values, recorded_out = self.inputs_replay[step], self.outputs[step]
        assert recorded_values.shape == values.shape and self.scales[step] == scale, "the neighbour took another path"
        self.cost += np.abs(values - recorded_values).sum() / scale
        self.inputs.append(values)
        return recorded_out

    def replay(self) -> None:
        """Switch from recording (on x) to replaying (on a neighbour x')."""
        self.inputs_replay, self.inputs, self.replaying, self.cost = self.inputs, [], True, 0.0


def replayed_runs(
    monkeypatch: Patcher | None, run: Callable[[np.ndarray], Any], x: np.ndarray, neighbours: Iterable[np.ndarray],
    modules: Iterable[ModuleType],
) -> list[Replay]:
    """One :class:`Replay` per neighbour y of ``x``: ``run(x)`` with every draw through the
    ``add_laplace`` of ``modules`` recorded, then ``run(y)`` replayed (the answers must agree up
    to rounding, :func:`close`, else the neighbour took another path). Each replay's ``cost``
    bounds the privacy loss of the output between x and y.

    ``monkeypatch``: pytest's fixture (the patches last to the end of the test), or None to put
    the original ``add_laplace`` back on return."""
    patches = _Patches() if monkeypatch is None else None
    patcher: Patcher = monkeypatch if monkeypatch is not None else patches  # type: ignore[assignment]
    modules = list(modules)
    replays = []
    try:
        for y in neighbours:
            replay = Replay()
            for module in modules:
                patcher.setattr(module, "add_laplace", replay)
            first = run(x)
            replay.replay()
            assert close(run(y), first), "the neighbour took another path"
            replays.append(replay)
    finally:
        if patches is not None:
            patches.undo()
    return replays


def worst_replayed_cost(
    monkeypatch: Patcher | None, run: Callable[[np.ndarray], Any], x: np.ndarray, neighbours: Iterable[np.ndarray],
    modules: Iterable[ModuleType],
) -> float:
    """The largest :func:`replayed_runs` cost over ``neighbours``."""
    return max(replay.cost for replay in replayed_runs(monkeypatch, run, x, neighbours, modules))


# -- the transcript of a release: every noise primitive and selection -------------------------

#: Generator methods that draw; a SecureRandom's hardened samplers are reached through add_laplace only.
DRAWS = ("laplace", "gumbel", "exponential", "normal", "uniform", "random", "integers", "choice", "permutation",
         "shuffle", "integer_laplace", "lattice_laplace")

#: The loss of a selection between neighbours: (its data on x, its data on x', its bound arguments) -> loss.
SelectionLoss = Callable[[np.ndarray, np.ndarray, dict], float]


def per_unit_change(recorded: np.ndarray, data: np.ndarray, arguments: dict) -> float:
    """ε·‖x - x'‖₁ for a selection that is ε-DP (its ``epsilon`` argument) for unit changes of its
    data x (group privacy)."""
    return float(arguments["epsilon"]) * float(np.abs(recorded - data).sum())


def exponential_mechanism_loss(recorded: np.ndarray, utility: np.ndarray, arguments: dict) -> float:
    """max - min of u(x) - u(x') over the queries not ``excluded``: the privacy loss of any choice of
    the exponential mechanism (q drawn with probability ∝ exp(u_q)) between the two utilities."""
    moved = (recorded - utility)[~np.asarray(arguments["excluded"], dtype=bool)]
    return float(moved.max() - moved.min())


def library_selections() -> dict[str, tuple[ModuleType, SelectionLoss]]:
    """The library's private selections, by name: the module defining each and its privacy loss
    between neighbours. DAWA's partition (report-noisy-min over tilings), Anuarbek's matching and
    PrivTree's decomposition are ε-DP for unit changes of their data; MWEM's exponential mechanism
    carries its ε in its utilities."""
    from . import partitions
    from .mechanisms import datadependent, privtree

    return {
        "dawa_partition": (partitions, per_unit_change),
        "matching_partition": (partitions, per_unit_change),
        "privtree_leaves": (privtree, per_unit_change),
        "exponential_choice": (datadependent, exponential_mechanism_loss),
    }


class Call(NamedTuple):
    """One primitive call of a transcript."""

    kind: str  # "laplace" or the selection's name
    data: np.ndarray  # the values noised, or the selection's data (float64)
    key: tuple  # what the neighbour's call must share: scale, sensitivity, data-independent arguments
    out: object  # the output: noisy values, or the selection's decision


def _copy(out: Any) -> Any:
    """``out`` (an array, a tuple of arrays or a scalar) as a copy the caller may change in place."""
    if isinstance(out, tuple):
        return tuple(_copy(part) for part in out)
    return out.copy() if isinstance(out, np.ndarray) else out


def _public(value: Any) -> Any:
    """An argument in a form == compares: arrays as tuples."""
    return tuple(np.ravel(value).tolist()) if isinstance(value, np.ndarray) else value


class Tape:
    """The transcript of one release: recorded on x, replayed on x'.

    On x each primitive call is recorded: Laplace noise added to values (the values, the scale,
    the output), and each selection with the arguments it was given and its decision. On x' every
    call must match the recorded one (the same kind, shapes, scales and data-independent
    arguments) and gets its recorded output; ``loss`` adds Σ ‖v(x) - v(x')‖₁ / b over the
    Laplace draws and each selection's loss between its data on x and on x'."""

    def __init__(self) -> None:
        self.start()

    def start(self) -> None:
        """Forget everything and record afresh."""
        self.calls: list[Call] = []
        self.depth, self.stray = 0, []
        self.replaying, self.step, self.loss = False, 0, 0.0

    def replay(self) -> None:
        """Switch from recording (on x) to replaying (on a neighbour x')."""
        self.replaying, self.step, self.loss, self.stray = True, 0, 0.0, []

    def note(self, draw: str) -> None:
        """A generator drew: as part of an intercepted primitive, or astray."""
        if self.depth == 0:
            self.stray.append(draw)

    def _record(self, kind: str, data: np.ndarray, key: tuple, run: Callable[[], Any]) -> Any:
        self.depth += 1
        try:
            out = run()
        finally:
            self.depth -= 1
        self.calls.append(Call(kind, data.copy(), key, _copy(out)))
        return out

    def _next(self, kind: str, data: np.ndarray, key: tuple) -> Call:
        assert self.step < len(self.calls), "the neighbour made more draws than x: another path"
        call = self.calls[self.step]
        self.step += 1
        assert (call.kind, call.data.shape, call.key) == (kind, data.shape, key), "the neighbour took another path"
        return call

    def measure(self, original: Callable, values: Any, scale: float, rng: Any, *, sensitivity: float, integer: bool) -> Any:
        """add_laplace: recorded, or replayed with loss ‖v - v'‖₁ / scale."""
        if self.depth:  # inside a selection: part of its draw
            return original(values, scale, rng, sensitivity=sensitivity, integer=integer)
        data = np.asarray(values, dtype=np.float64)
        assert not integer or np.array_equal(data, np.round(data)), "values promised integer are not integers"
        key = (float(scale), float(sensitivity), bool(integer))
        if not self.replaying:
            return self._record("laplace", data, key, lambda: original(values, scale, rng, sensitivity=sensitivity,
                                                                         integer=integer))
        call = self._next("laplace", data, key)
        if scale == 0:
            assert np.array_equal(data, call.data), "values released without noise differ between neighbours"
        else:
            self.loss += float(np.abs(data - call.data).sum()) / scale
        return _copy(call.out)

    def select(self, kind: str, original: Callable, loss: SelectionLoss, *args: Any, **kwargs: Any) -> Any:
        """A selection: recorded, or replayed with its privacy loss ``loss``(data on x, data on x', arguments)."""
        arguments = inspect.signature(original).bind(*args, **kwargs).arguments
        name, data = next(iter(arguments.items()))
        key = tuple((k, _public(v)) for k, v in arguments.items()
                    if k != name and not isinstance(v, (np.random.Generator, SecureRandom)))
        data = np.asarray(data, dtype=np.float64)
        if not self.replaying:
            return self._record(kind, data, key, lambda: original(*args, **kwargs))
        call = self._next(kind, data, key)
        self.loss += loss(call.data, data, arguments)
        return _copy(call.out)


class WatchedGenerator(np.random.Generator):
    """A seeded numpy Generator that tells its tape of every draw."""

    def __init__(self, seed: int, tape: Tape):
        super().__init__(np.random.PCG64(seed))
        self.tape = tape

    def __getattribute__(self, name: str) -> Any:
        if name in DRAWS:
            super().__getattribute__("tape").note(name)
        return super().__getattribute__(name)


class WatchedSecure(SecureRandom):
    """A SecureRandom that tells its tape of every draw, hardened or not."""

    def __init__(self, tape: Tape):
        super().__init__()
        self.tape = tape

    def __getattribute__(self, name: str) -> Any:
        if name in DRAWS:
            object.__getattribute__(self, "tape").note(name)
        return super().__getattribute__(name)


class SeededSecrets:
    """What the secure sampler reads from :mod:`secrets`, from a seeded generator: the same
    algorithm on reproducible bits."""

    def __init__(self, seed: int):
        self._random = random.Random(seed)

    def token_bytes(self, n: int) -> bytes:
        return self._random.randbytes(n)

    def randbelow(self, n: int) -> int:
        return self._random.randrange(n)

    def randbits(self, k: int) -> int:
        return self._random.getrandbits(k)


@contextlib.contextmanager
def seeded_entropy(seed: int) -> Iterator[None]:
    """Within the block, the secure sampler reads its entropy from :class:`SeededSecrets` (``seed``):
    every secure run is reproducible."""
    patches = _Patches()
    patches.setattr(secure, "secrets", SeededSecrets(seed))
    try:
        yield
    finally:
        patches.undo()


def _intercept(patches: _Patches, original: Callable, stand_in: Callable, modules: Sequence[ModuleType]) -> None:
    """``stand_in`` for ``original`` wherever a module of the library, or one of ``modules``, bound it."""
    found = [m for name, m in sys.modules.items() if name.startswith("blowfish_te")]
    for module in found + [m for m in modules if m not in found]:
        if getattr(module, original.__name__, None) is original:
            patches.setattr(module, original.__name__, stand_in)


def _selection(tape: Tape, name: str, original: Callable, loss: SelectionLoss) -> Callable:
    """The stand-in of the selection ``name``, recorded on and replayed from ``tape``."""
    return lambda *a, **k: tape.select(name, original, loss, *a, **k)


@contextlib.contextmanager
def recording(
    *, seed: int | None = 2024, selections: dict[str, tuple[ModuleType, SelectionLoss]] | None = None,
    modules: Sequence[ModuleType] = (),
) -> Iterator[Tape]:
    """Within the block, every noise primitive (:func:`blowfish_te.noise.add_laplace`) and every
    selection (``selections``: name -> (defining module, loss); :func:`library_selections` by
    default) goes through the :class:`Tape` yielded, wherever a module of the library or one of
    ``modules`` (a plug-in's) bound it by name. ``seed``: the secure sampler's entropy
    (:func:`seeded_entropy`; None leaves it truly random). Everything is put back on exit."""
    patches = _Patches()
    try:
        if seed is not None:
            patches.setattr(secure, "secrets", SeededSecrets(seed))
        tape = Tape()
        laplace = noise.add_laplace
        _intercept(patches, laplace, lambda *a, **k: tape.measure(laplace, *a, **k), modules)
        for name, (home, loss) in (library_selections() if selections is None else selections).items():
            original = getattr(home, name)
            _intercept(patches, original, _selection(tape, name, original, loss), modules)
        yield tape
    finally:
        patches.undo()


def _generator(sampler: str, tape: Tape, seed: int) -> np.random.Generator | SecureRandom:
    return WatchedGenerator(seed, tape) if sampler == "numpy" else WatchedSecure(tape)


def transcript_loss(tape: Tape, release: Callable[[np.ndarray, Any], Any], x: np.ndarray, y: np.ndarray, sampler: str = "numpy") -> float:
    """The privacy loss of x's transcript against the neighbour y: ``release(x, rng)`` recorded,
    ``release(y, rng)`` replayed on the same outputs (``sampler``: ``"numpy"``, a seeded
    Generator, or ``"secure"``, a SecureRandom). Fails when either run draws outside the
    primitives, when y's run makes other calls than x's, or when its answers differ."""
    tape.start()
    first = release(x, _generator(sampler, tape, 7))
    assert not tape.stray, f"draws outside the noise primitives: {sorted(set(tape.stray))}"
    tape.replay()
    second = release(y, _generator(sampler, tape, 8))
    assert tape.step == len(tape.calls), "the neighbour made fewer draws than x: another path"
    assert not tape.stray, f"draws outside the noise primitives: {sorted(set(tape.stray))}"
    np.testing.assert_allclose(second, first, rtol=1e-9, atol=1e-9, err_msg="same transcript, other answers")
    return tape.loss


def sampled_neighbour_pairs(
    policy: Any, count: int = 4, *, records: tuple[int, int] = (50, 200), seed: int = 2024
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``count`` seeded G-neighbour pairs (x, x'): x has ``records`` (50–200) records spread over
    the cells by a Dirichlet(½) draw (uneven, often with empty cells), x' is one of its
    neighbours (:func:`policy_neighbours`), drawn."""
    gen = np.random.default_rng(seed)
    for _ in range(count):
        x = gen.multinomial(gen.integers(records[0], records[1] + 1), gen.dirichlet(np.full(policy.size, 0.5)))
        neighbours = policy_neighbours(x, policy)
        yield x, neighbours[gen.integers(len(neighbours))]
