"""Privacy from the noise actually drawn, for every registered mechanism, policy kind, route and sampler.

Releases run on histograms of 50–200 records over K = 8 cells (a 4 × 2 grid for grid
mechanisms), uneven and often with empty cells, at a seeded sample of their G-neighbours, on both
samplers: a seeded numpy Generator, and the secure path (a SecureRandom: exact discrete Laplace
for integer values, lattice Laplace for real ones; its entropy is seeded here, so that every run
is reproducible). Every noise primitive of the library is intercepted, and the generator reports
any draw made outside them. The run on x records each primitive call:

- Laplace noise added to values (:func:`blowfish_te.noise.add_laplace`): the values, the scale,
  the output;
- a selection, with the ε its own arguments give it: DAWA's partition (report-noisy-min over
  tilings, :func:`~blowfish_te.partitions.dawa_partition`), Anuarbek's matching
  (:func:`~blowfish_te.partitions.matching_partition`) and PrivTree's decomposition
  (:func:`~blowfish_te.mechanisms.privtree.privtree_leaves`), each ε-DP for unit changes of its
  data, and MWEM's exponential mechanism (:func:`~blowfish_te.mechanisms.datadependent.exponential_choice`),
  whose utilities carry its ε; and its decision.

The run on a neighbour x' is forced onto the same outputs and decisions — the same transcript —
and records its own inputs. Then:

- the transcript's privacy loss must be at most ε: Σ ‖v(x) - v(x')‖₁ / b over the Laplace draws,
  plus each selection's ε times the unit changes ‖x - x'‖₁ between its data (group privacy), or,
  for the exponential mechanism, the spread max - min of u(x) - u(x') over the queries it may choose;
- both runs must take the same path (the same calls, shapes, scales and data-independent
  arguments), keep every promise of integer values, and give the same answers: anything else read
  the data outside the noise.

The loss counts each draw at the scale passed to the primitive, so each sampler is checked once on
its own to draw the scale it is given. Deliberately broken mechanisms must fail: one drawing less
noise than it reports, one spending a selection beyond its share, one reading the data outside the
noise.

The harness (the transcript, its interception of the primitives, the watched generators) is
:mod:`blowfish_te.testing`, where plug-in authors replay their own mechanisms.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import pytest

import blowfish_te as bt
from blowfish_te import noise, partitions, policies, testing
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import (
    DAWA,
    MECHANISMS,
    Identity,
    Mechanism,
    PartitionThenTransform,
    PrivTree,
    datadependent,
    privtree,
)
from blowfish_te.routes import Outcome
from blowfish_te.secure import SecureRandom
from blowfish_te.testing import dlap_cdf, ks_distance, laplace_cdf, transcript_loss

pytestmark = pytest.mark.core

K, GRID = 8, (4, 2)
EPSILON = 0.7
#: Records of a sampled histogram, the neighbour pairs replayed per case and sampler, and the seed.
RECORDS, PAIRS, SEED = (50, 200), 4, 2024
SAMPLERS = ("numpy", "secure")
#: The samplers' own check: draws, the false-alarm rate of its tolerance, the scale drawn.
NOISE_DRAWS, ALPHA, NOISE_SCALE = 20_000, 1e-6, 2.5


#: The selections, by name: the module defining each and its privacy loss between neighbours.
SELECTIONS = testing.library_selections()


@pytest.fixture
def seeded_entropy():
    with testing.seeded_entropy(SEED):
        yield


@pytest.fixture
def tape():
    """Intercept every noise primitive and selection wherever the library bound it."""
    with testing.recording(seed=SEED) as the_tape:
        yield the_tape


def sampled_pairs(policy, count: int = PAIRS):
    """``count`` seeded G-neighbour pairs (x, x'): x has 50–200 records spread over the cells by a
    Dirichlet(½) draw (uneven, often with empty cells), x' is one of its neighbours, drawn."""
    return testing.sampled_neighbour_pairs(policy, count, records=RECORDS, seed=SEED)


#: The mechanisms replayed: every registered one as its name builds it, and — since at 50–200
#: records their private checks choose the plain release — the data-dependent ones forced to
#: select, with the selections each must make.
UNDER_TEST = {name: (MECHANISMS[name](), {"exponential_choice"} if name == "mwem" else set())
              for name in sorted(MECHANISMS) if name != "matrix"}  # MatrixMechanism needs a strategy
UNDER_TEST |= {
    "dawa_partitioned": (DAWA(ratio=0.25), {"dawa_partition"}),
    "privtree_split": (PrivTree(select=False), {"privtree_leaves"}),
    "ptt_dawa": (PartitionThenTransform(epsilon_split=0.25), {"dawa_partition"}),
    "ptt_matching": (PartitionThenTransform("matching", epsilon_split=0.25), {"matching_partition"}),
    "ptt_pairing": (PartitionThenTransform("noisy_pairing", epsilon_split=0.25), set()),
}


class Case(NamedTuple):
    label: str
    mechanism: Mechanism
    policy: policies.Policy
    route: str
    tree: str | None
    selects: frozenset


def _workload(mechanism: Mechanism, shape):
    """Prefix queries; for a mechanism that answers marginals only, every 1-way marginal and the total."""
    return _shared_workload(mechanism.needs_marginals, tuple(shape))


@functools.cache
def _shared_workload(marginals: bool, shape: tuple):
    """One workload object per kind and shape: plans and strategies are cached per workload object."""
    if marginals:
        return wl.marginals(shape, [(a,) for a in range(len(shape))] + [()])
    return wl.prefix(shape)


def _cases():
    """A :class:`Case` for every mechanism of :data:`UNDER_TEST` under every policy kind it accepts
    (1-D mechanisms on K cells, grid mechanisms on the grid, mechanisms for marginals on both and
    under the attribute policy) and every route."""
    line_kinds = [policies.unbounded(K), policies.complete(K), policies.line(K), policies.threshold(K, 2)]
    grid_kinds = [policies.unbounded(GRID), policies.grid(GRID, 1)]
    for label, (mechanism, selects) in UNDER_TEST.items():
        kinds = grid_kinds if mechanism.needs_grid else line_kinds
        if mechanism.needs_marginals:
            kinds = line_kinds + grid_kinds + [policies.attribute(GRID)]
        for policy in kinds:
            for route in ("auto", "transform", "exact"):
                # a spanning tree where a transform route needs one; native mechanisms read the policy itself
                tree = None if policy.is_forest or route == "exact" or mechanism.analytic_error or "native" in mechanism.routes else "bfs"
                try:
                    bt.plan(_workload(mechanism, policy.shape), policy, EPSILON, mechanism, route, tree)
                except (ValueError, TypeError):  # a route or policy the mechanism does not get
                    continue
                yield Case(label, mechanism, policy, route, tree, frozenset(selects))


CASES = list(_cases())


def test_the_cases_cover_every_mechanism_policy_kind_route_and_selection():
    assert {case.label for case in CASES} == set(UNDER_TEST)
    assert {case.mechanism.name for case in CASES} == set(MECHANISMS) - {"matrix"}
    assert {case.route for case in CASES} == {"auto", "transform", "exact"}
    chosen = {bt.plan(_workload(c.mechanism, c.policy.shape), c.policy, EPSILON, c.mechanism, c.route, c.tree).chosen.route
              for c in CASES}
    assert chosen >= {"exact", "transform", "native"}
    assert frozenset().union(*(case.selects for case in CASES)) == set(SELECTIONS)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("case", CASES, ids=[f"{c.label}-{c.policy.name}-{c.route}" for c in CASES])
def test_every_release_is_epsilon_blowfish_from_the_noise_drawn(tape, case, sampler):
    workload = _workload(case.mechanism, case.policy.shape)

    def release(x, gen):
        return bt.answer(workload, x, case.policy, EPSILON, case.mechanism, rng=gen, route=case.route, tree=case.tree).answers

    for x, y in sampled_pairs(case.policy):
        loss = transcript_loss(tape, release, x, y, sampler)
        # the shares of ε and the sums of the loss round at a few ulps each
        assert loss <= EPSILON * (1 + 1e-9), f"privacy loss {loss:.6g} > ε = {EPSILON} from x = {x.tolist()} to {y.tolist()}"
        assert case.selects <= {call.kind for call in tape.calls}, f"{sorted(case.selects)} not all made"


@pytest.mark.parametrize("sampler, integer", [("numpy", False), ("secure", True), ("secure", False)],
                         ids=["numpy", "secure-integer", "secure-lattice"])
def test_each_sampler_draws_the_scale_it_is_given(seeded_entropy, sampler, integer):
    """add_laplace's noise on 20 000 values against its distribution at the scale given: Laplace on
    a numpy Generator; on a SecureRandom discrete Laplace for integer values, and for real values
    the lattice scheme, whose noise is discrete Laplace on a grid 2^-35 fine at a scale at most
    1 + 2^-20 larger — Laplace for this test. The Kolmogorov–Smirnov distance must be within the
    Dvoretzky–Kiefer–Wolfowitz bound sqrt(ln(2/α) / 2n) (exceeded with probability at most α under
    the hypothesis, for any distribution), and beyond it for a scale 20 % off: the check's power."""
    gen = np.random.default_rng(SEED)
    values = gen.integers(0, 200, NOISE_DRAWS) if integer else gen.uniform(-100, 100, NOISE_DRAWS)
    rng = np.random.default_rng(SEED + 1) if sampler == "numpy" else SecureRandom()
    drawn = noise.add_laplace(values, NOISE_SCALE, rng, sensitivity=1.0, integer=integer) - values

    def distance(scale: float) -> float:
        if integer:
            return ks_distance(drawn, lambda z: dlap_cdf(z, scale), lambda z: dlap_cdf(z - 1, scale))
        return ks_distance(drawn, lambda z: laplace_cdf(z, scale), lambda z: laplace_cdf(z, scale))

    bound = math.sqrt(math.log(2 / ALPHA) / (2 * NOISE_DRAWS))
    assert distance(NOISE_SCALE) <= bound, f"KS distance {distance(NOISE_SCALE):.4f} > {bound:.4f} from scale {NOISE_SCALE}"
    for wrong in (0.8 * NOISE_SCALE, 1.25 * NOISE_SCALE):
        assert distance(wrong) > bound, f"no power against scale {wrong}"


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

    worst = max(transcript_loss(tape, run, x, y) for x, y in sampled_pairs(policy))
    assert worst == pytest.approx(EPSILON / 0.9)


#: A selection at ε for unit changes of x (all of them with the same loss ε at every unit change).
SPEND = {
    "dawa_partition": lambda x, epsilon, gen: partitions.dawa_partition(x, epsilon, epsilon, gen),
    "matching_partition": lambda x, epsilon, gen: partitions.matching_partition(x, epsilon, epsilon, gen),
    "privtree_leaves": lambda x, epsilon, gen: privtree.privtree_leaves(x, epsilon, gen),
    "exponential_choice": lambda x, epsilon, gen: datadependent.exponential_choice(epsilon * x, np.zeros(x.size, bool), gen),
}


class Overspending(Identity, register=False):
    """Broken on purpose: a selection at ε, then Laplace counts at ε."""

    name = "overspending"

    def __init__(self, selection: str):
        self.selection = selection

    def measure(self, workload, x, epsilon, gen, policy=None):
        SPEND[self.selection](x, epsilon, gen)  # its decision unused: the budget is spent all the same
        return super().measure(workload, x, epsilon, gen, policy)


@pytest.mark.parametrize("selection", sorted(SELECTIONS))
def test_a_selection_spending_beyond_its_share_is_caught(tape, selection):
    policy, workload, mechanism = policies.unbounded(K), wl.identity(K), Overspending(selection)

    def run(x, gen):
        return bt.answer(workload, x, policy, EPSILON, mechanism, rng=gen).answers

    losses = [transcript_loss(tape, run, x, y) for x, y in sampled_pairs(policy)]
    assert losses == pytest.approx([2 * EPSILON] * PAIRS)


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
        max(transcript_loss(tape, run, x, y) for x, y in sampled_pairs(policy))
