"""Shared oracles for the tests: dense twins and brute force written from the definitions."""

from __future__ import annotations

import atexit
import itertools
import math
import os
import re
import shutil
import tempfile

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from blowfish_te.workloads import Workload

# optimised strategies computed by the tests go to a folder of their own, never the user's cache
# (child processes inherit it); the shipped strategies are read as in any install
_STRATEGY_CACHE = tempfile.mkdtemp(prefix="blowfish_te_test_strategies_")
os.environ["BLOWFISH_TE_CACHE_DIR"] = _STRATEGY_CACHE
atexit.register(shutil.rmtree, _STRATEGY_CACHE, ignore_errors=True)

settings.register_profile(
    "default", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("default")


def dense_boxes(domain, lo, hi) -> np.ndarray:
    """Dense matrix of box queries, one indicator grid per box."""
    rows = []
    for a, b in zip(np.atleast_2d(lo), np.atleast_2d(hi)):
        g = np.zeros(domain)
        g[tuple(slice(int(i), int(j) + 1) for i, j in zip(a, b))] = 1
        rows.append(g.ravel())
    return np.array(rows)


def brute_edges(policy_kind: str, shape, theta=1, labels=None) -> set:
    """Edge set of a standard policy from the constructors' definitions, by testing every pair of cells."""
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


def edge_set(policy) -> set:
    return {(int(u), int(v)) for u, v in policy.edges}


def assert_laplace_noise(noise, scale: float) -> None:
    """The mean of η² against 2b² for i.i.d. Laplace(b) draws η, within 5 standard deviations
    (Var η² = μ4 - σ⁴ = 20 b⁴), and the mean of η against 0."""
    noise = np.ravel(np.asarray(noise, dtype=np.float64))
    n = noise.size
    assert abs(np.mean(noise**2) - 2 * scale**2) < 5 * math.sqrt(20.0 / n) * scale**2
    assert abs(np.mean(noise)) < 5 * math.sqrt(2.0 / n) * scale


def policy_neighbours(x, policy) -> list:
    """Every histogram one move along an edge of ``policy`` away from ``x`` (either direction; an
    edge to ⊥ adds or removes a record)."""
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


def brute_sensitivity(dense_w: np.ndarray, edges, k: int, max_records: int = 2) -> float:
    """max ‖W x - W x'‖₁ over every pair of neighbouring histograms with at most ``max_records``
    records: move one record along an edge (either direction), or add/remove one under ⊥ (index k)."""
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


@st.composite
def forests(draw, max_cells: int = 8, allow_bottom: bool = True):
    """(k, edges) of a random forest over k cells, possibly with ⊥ (index k) as a vertex."""
    k = draw(st.integers(1, max_cells))
    has_bottom = allow_bottom and draw(st.booleans())
    v = k + int(has_bottom)
    order = draw(st.permutations(range(v)))
    edges = []
    for i in range(1, v):
        if draw(st.booleans()) or draw(st.booleans()):  # attach with probability 3/4
            parent = order[draw(st.integers(0, i - 1))]
            edges.append((order[i], parent))
    return k, edges


@st.composite
def graphs(draw, max_cells: int = 6, allow_bottom: bool = True):
    """(k, edges) of a random graph over k cells, possibly with ⊥ (index k)."""
    k = draw(st.integers(1, max_cells))
    v = k + int(allow_bottom and draw(st.booleans()))
    pairs = [(i, j) for i in range(v) for j in range(i + 1, v)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
    return k, chosen


def close(actual, expected, magnitude=None) -> bool:
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
    """Standard deviation of (1/m) ηᵀAη for i.i.d. Laplace(scale) η and symmetric A.

    Var(ηᵀAη) = (μ4 - 3σ⁴) Σ A_ii² + 2σ⁴ tr(A²) with σ² = 2b², μ4 = 24b⁴.
    """
    b4 = scale**4
    var = 12 * b4 * float((np.diag(a) ** 2).sum()) + 8 * b4 * float((a * a).sum())
    return math.sqrt(var) / m


class Replay:
    """Exact coupling for mechanisms whose randomness is Laplace noise: record every noisy vector
    released on x, then on a neighbour x' return the same outputs, charging ‖v - v'‖₁ / scale
    for the shift of the noise. The mechanism's later choices read only released values, so both
    runs take the same path; the total charge bounds the privacy loss of the output."""

    def __init__(self):
        self.outputs, self.inputs, self.scales, self.cost = [], [], [], 0.0
        self.replaying = False

    def __call__(self, values, scale, rng, *, sensitivity, integer):
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

    def replay(self):
        self.inputs_replay, self.inputs, self.replaying, self.cost = self.inputs, [], True, 0.0


class Float32Rows(Workload):
    """A workload whose products come back in float32 (a plug-in's, say): releases must still
    calibrate and answer in float64."""

    def __init__(self, matrix):
        self.matrix = np.asarray(matrix, dtype=np.float32)
        super().__init__((self.matrix.shape[1],), self.matrix.shape[0], "float32 rows")

    def _matmat(self, x):
        return self.matrix @ np.asarray(x, dtype=np.float32)

    def _rmatmat(self, y):
        return self.matrix.T @ np.asarray(y, dtype=np.float32)


def added_records(x) -> list:
    """x + e_c for every cell c: the neighbours with one record more."""
    x = np.asarray(x)
    return [x + np.eye(x.size, dtype=x.dtype)[c] for c in range(x.size)]


def replayed_runs(monkeypatch, run, x, neighbours, modules) -> list:
    """One :class:`Replay` per neighbour y of ``x``: ``run(x)`` with every draw through the
    ``add_laplace`` of ``modules`` recorded, then ``run(y)`` replayed (the answers must agree up
    to rounding, :func:`close`, else the neighbour took another path). Each replay's ``cost``
    bounds the privacy loss of the output between x and y."""
    replays = []
    for y in neighbours:
        replay = Replay()
        for module in modules:
            monkeypatch.setattr(module, "add_laplace", replay)
        first = run(x)
        replay.replay()
        assert close(run(y), first), "the neighbour took another path"
        replays.append(replay)
    return replays


def worst_replayed_cost(monkeypatch, run, x, neighbours, modules) -> float:
    """The largest :func:`replayed_runs` cost over ``neighbours``."""
    return max(replay.cost for replay in replayed_runs(monkeypatch, run, x, neighbours, modules))


def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern that matches ``message`` and nothing more."""
    return "^" + re.escape(message) + "$"
