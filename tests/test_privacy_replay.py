"""Privacy from the noise actually drawn, for every registered mechanism, policy kind and route.

Each release runs with every noise primitive of the library intercepted and a generator that
reports any draw made outside them. The run on x records each primitive call: for Laplace noise
added to values (:func:`blowfish_te.noise.add_laplace`) the values, the scale drawn and the
output; for a selection (report-noisy-min in DAWA's partition, PrivTree's split decisions, MWEM's
exponential mechanism) its inputs and decision. The run on a neighbour x' is forced onto the same
outputs and decisions — the same transcript — and records its own values. Then:

- the transcript's privacy loss from the Laplace draws is Σ ‖v(x) - v(x')‖₁ / b, with b the
  scale drawn (not the one the release reports); it must be at most ε;
- both runs must take the same path (the same calls, shapes and scales) and give the same
  answers: anything else read the data outside the noise.

A selection's own ε (its theorem: report-noisy-min, PrivTree, the exponential mechanism) is not
part of the sum, so for mechanisms that select the sum is a necessary condition, checked at every
neighbour pair of a tiny domain. A deliberately broken mechanism that draws 0.9 times the noise it
reports must fail.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import replace

import numpy as np
import pytest

import blowfish_te as bt
from blowfish_te import noise, partitions, policies
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import MECHANISMS, Identity, datadependent, privtree
from blowfish_te.routes import Outcome

from test_routes import neighbour_pairs

K = 5
EPSILON = 0.7
DRAWS = ("laplace", "gumbel", "exponential", "normal", "uniform", "random", "integers", "choice", "permutation", "shuffle")


class Watched(np.random.Generator):
    """A numpy Generator that notes every draw made outside an intercepted primitive."""

    tape = None

    def __getattribute__(self, name):
        attr = super().__getattribute__(name)
        if name in DRAWS and Watched.tape is not None and Watched.tape.depth == 0:
            Watched.tape.stray.append(name)
        return attr


class Tape:
    """The transcript of one release: recorded on x, replayed on x'."""

    def __init__(self):
        self.calls, self.depth, self.stray = [], 0, []
        self.replaying, self.step, self.loss = False, 0, 0.0

    def replay(self):
        self.replaying, self.step, self.loss, self.stray = True, 0, 0.0, []

    def _next(self, kind: str, values: np.ndarray, scale) -> tuple:
        assert self.step < len(self.calls), "the neighbour made more draws than x: another path"
        call = self.calls[self.step]
        self.step += 1
        assert call[0] == kind and call[1].shape == values.shape and call[2] == scale, "the neighbour took another path"
        return call

    def measure(self, original, values, scale, rng, *, sensitivity, integer):
        values = np.asarray(values, dtype=np.float64)
        if self.depth:  # inside a selection: part of its draw
            return original(values, scale, rng, sensitivity=sensitivity, integer=integer)
        if not self.replaying:
            self.depth += 1
            try:
                out = original(values, scale, rng, sensitivity=sensitivity, integer=integer)
            finally:
                self.depth -= 1
            self.calls.append(("laplace", values.copy(), scale, np.array(out, dtype=np.float64, copy=True)))
            return out
        call = self._next("laplace", values, scale)
        if scale == 0:
            assert np.array_equal(values, call[1]), "values released without noise differ between neighbours"
        else:
            self.loss += float(np.abs(values - call[1]).sum()) / scale
        return call[3].copy()

    def select(self, kind: str, original, values, *args):
        values = np.asarray(values, dtype=np.float64)
        if not self.replaying:
            self.depth += 1
            try:
                out = original(values, *args)
            finally:
                self.depth -= 1
            self.calls.append((kind, values.copy(), args[0] if args and np.isscalar(args[0]) else None, out))
            return out
        call = self._next(kind, values, args[0] if args and np.isscalar(args[0]) else None)
        return call[3].copy() if isinstance(call[3], np.ndarray) else call[3]


@pytest.fixture
def tape(monkeypatch):
    """Intercept every noise primitive wherever the library bound it."""
    the_tape = Tape()
    original = noise.add_laplace
    for module in [m for name, m in sys.modules.items() if name.startswith("blowfish_te")]:
        if getattr(module, "add_laplace", None) is original:
            monkeypatch.setattr(module, "add_laplace", lambda *a, **k: the_tape.measure(original, *a, **k))
    rnm, split, choice = partitions._report_noisy_min_scores, privtree._split, datadependent.exponential_choice
    monkeypatch.setattr(partitions, "_report_noisy_min_scores", lambda v, *a: the_tape.select("noisy-min", rnm, v, *a))
    monkeypatch.setattr(privtree, "_split", lambda v, *a: the_tape.select("split", split, v, *a))
    monkeypatch.setattr(datadependent, "exponential_choice", lambda v, *a: the_tape.select("exponential", choice, v, *a))
    monkeypatch.setattr(Watched, "tape", the_tape)
    return the_tape


def transcript_loss(tape: Tape, release, x, y) -> float:
    """The privacy loss of x's transcript against the neighbour y (see the module docstring)."""
    tape.__init__()
    first = release(x, Watched(np.random.PCG64(7)))
    assert not tape.stray, f"draws outside the noise primitives: {sorted(set(tape.stray))}"
    tape.replay()
    second = release(y, Watched(np.random.PCG64(8)))
    assert tape.step == len(tape.calls), "the neighbour made fewer draws than x: another path"
    assert not tape.stray, f"draws outside the noise primitives: {sorted(set(tape.stray))}"
    np.testing.assert_allclose(second, first, rtol=1e-9, atol=1e-9, err_msg="same transcript, other answers")
    return tape.loss


def _workload(name, shape):
    """Prefix queries; for a mechanism that answers marginals only, every 1-way marginal and the total."""
    if MECHANISMS[name].needs_marginals:
        return wl.marginals(shape, [(a,) for a in range(len(shape))] + [()])
    return wl.prefix(shape)


def _cases():
    """(mechanism name, policy, route, tree) for every registered mechanism under every policy
    kind it accepts (1-D mechanisms on K cells, grid mechanisms on a 3 × 2 grid, mechanisms for
    marginals on both and under the attribute policy) and every route."""
    line_kinds = [policies.unbounded(K), policies.complete(K), policies.line(K), policies.threshold(K, 2)]
    grid_kinds = [policies.unbounded((3, 2)), policies.grid((3, 2), 1)]
    for name in sorted(MECHANISMS):
        cls = MECHANISMS[name]
        kinds = grid_kinds if cls.needs_grid else line_kinds
        if cls.needs_marginals:
            kinds = line_kinds + grid_kinds + [policies.attribute((3, 2))]
        for policy in kinds:
            for route in ("auto", "transform", "exact"):
                tree = None if policy.is_forest or route == "exact" or cls.analytic_error else "bfs"
                try:
                    bt.plan(_workload(name, policy.shape), policy, EPSILON, name, route, tree)
                except (ValueError, TypeError):  # a route or policy the mechanism does not get
                    continue
                yield name, policy, route, tree


CASES = list(_cases())


def test_the_cases_cover_every_mechanism_policy_kind_and_route():
    names = {name for name, *_ in CASES}
    assert names == set(MECHANISMS) - {"matrix"}  # MatrixMechanism needs a strategy: no default instance
    assert {route for _, _, route, _ in CASES} == {"auto", "transform", "exact"}
    assert {bt.plan(_workload(n, p.shape), p, EPSILON, n, r, t).chosen.route for n, p, r, t in CASES} >= {"exact", "transform", "native"}


@pytest.mark.parametrize("name, policy, route, tree", CASES, ids=[f"{n}-{p.name}-{r}" for n, p, r, _ in CASES])
def test_every_release_is_epsilon_blowfish_from_the_noise_drawn(tape, name, policy, route, tree):
    workload = _workload(name, policy.shape)
    mechanism = MECHANISMS[name]()

    def release(x, gen):
        return bt.answer(workload, x, policy, EPSILON, mechanism, rng=gen, route=route, tree=tree).answers

    pairs = list(neighbour_pairs(policy, max_records=2 if policy.size <= 6 else 1))
    worst = max(transcript_loss(tape, release, x, y) for x, y in pairs)
    assert worst <= EPSILON * (1 + 1e-9), f"privacy loss {worst:.6g} > ε = {EPSILON} at some neighbour pair"


class ShortChanged(Identity, register=False):
    """Broken on purpose: reports the Laplace scale Δ/ε but draws 0.9 Δ/ε."""

    name = "short_changed"

    def measure(self, workload, x, epsilon, gen, policy=None):
        drawn = super().measure(workload, x, epsilon / 0.9, gen, policy)  # Laplace(0.9 Δ/ε)
        return replace(drawn, noise_scale=drawn.noise_scale / 0.9)  # reported as Δ/ε


def test_a_mechanism_drawing_less_noise_than_it_reports_is_caught(tape):
    policy, workload, mechanism = policies.line(K), wl.identity(K), ShortChanged()
    release = bt.answer(workload, np.ones(K, int), policy, EPSILON, mechanism, rng=0)
    assert release.noise_scale == pytest.approx(1 / EPSILON)  # what it reports is honest

    def run(x, gen):
        return bt.answer(workload, x, policy, EPSILON, mechanism, rng=gen).answers

    worst = max(transcript_loss(tape, run, x, y) for x, y in neighbour_pairs(policy, max_records=1))
    assert worst == pytest.approx(EPSILON / 0.9)


def test_a_mechanism_reading_the_data_outside_the_noise_is_caught(tape):
    class Peeking(Identity, register=False):
        name = "peeking"

        def measure(self, workload, x, epsilon, gen, policy=None):
            outcome = super().measure(workload, x, epsilon, gen, policy)
            return Outcome(outcome.answers + 1e-3 * x.sum(), sensitivity=outcome.sensitivity, noise_scale=outcome.noise_scale)

    policy, workload = policies.unbounded(K), wl.identity(K)

    def run(x, gen):
        return bt.answer(workload, x, policy, EPSILON, Peeking(), rng=gen).answers

    with pytest.raises(AssertionError, match="same transcript, other answers"):
        max(transcript_loss(tape, run, x, y) for x, y in itertools.islice(neighbour_pairs(policy, max_records=1), 4))
