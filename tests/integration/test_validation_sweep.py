"""Validation sweep: malformed inputs to every public function are refused by the
library's own checks, with a ``ValueError`` or ``TypeError`` whose message names the argument.

Each case calls one public function with one argument replaced by a value drawn from a hypothesis
strategy of malformed values (NaN, infinities, negative or fractional counts, wrong shapes and
dtypes, ε <= 0, bad sizes, unknown names, bad seeds, ...). The refusal must come from a ``raise``
statement inside ``blowfish_te`` — not from deep inside numpy or scipy — and must not be silent
output. Every case also runs once with a valid value, so it cannot pass for an unrelated reason.
"""

from __future__ import annotations

import math
import pathlib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import blowfish_te as bt
from blowfish_te import bounds, datasets, partitions, policies, strategies, trees
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te._validation import MAX_EPSILON, MIN_EPSILON
from blowfish_te.mechanisms import PartitionThenTransform

PACKAGE = pathlib.Path(bt.__file__).resolve().parent
NAN, INF = math.nan, math.inf

# -- fixtures: small valid objects ------------------------------------------------------------

K = 8
SHAPE2 = (3, 4)
X = np.array([3, 0, 1, 4, 1, 5, 9, 2])
X2 = np.arange(12).reshape(SHAPE2) % 5
W = wl.prefix(K)
W2 = wl.identity(SHAPE2)
LINE = policies.line(K)
CYCLIC = policies.threshold(K, 2)
GRID = policies.grid(SHAPE2)
TRANSFORM = bt.transform(LINE)
TOTALS = TRANSFORM.totals(X)
HIERARCHY = strategies.Hierarchy((K,), 2)
HAAR = strategies.HaarStrategy((K,))
GRAPH = nx.path_graph(K)


# -- strategies of malformed values -------------------------------------------------------------

NON_NUMBERS = st.sampled_from([None, "1", b"1", [1], (1,), {"a": 1}, 1j, object(), np.array([1.0])])


def bad_epsilons() -> st.SearchStrategy:
    """ε must be a finite real number > 0 (bools are not numbers here), within [MIN_EPSILON, MAX_EPSILON]."""
    return st.one_of(
        st.sampled_from([0, 0.0, -0.0, NAN, INF, -INF, True, False, np.float64(NAN), np.int64(0)]),
        st.sampled_from([5e-324, 1e-308, MIN_EPSILON / 2, MAX_EPSILON * 2, 1e300, sys.float_info.max]),
        st.floats(max_value=0.0),
        st.integers(max_value=0),
        NON_NUMBERS,
    )


def bad_ints(minimum: int = 1) -> st.SearchStrategy:
    """Not an integer >= ``minimum``: smaller integers, any float (integral ones too), bools, others."""
    return st.one_of(
        st.integers(max_value=minimum - 1),
        st.floats(),
        st.sampled_from([True, False, np.float64(3.0), "3", 3j]),
        NON_NUMBERS,
    )


def bad_sizes(minimum: int = 1) -> st.SearchStrategy:
    """A bad domain size: as :func:`bad_ints`, or more cells than any histogram can hold."""
    return st.one_of(bad_ints(minimum), st.sampled_from([2**31 + 1, 2**63, 10**30]))


def bad_shapes() -> st.SearchStrategy:
    return st.one_of(
        st.integers(max_value=0),
        st.sampled_from([
            (), (0,), (3, 0), (-1, 2), (2.5,), 2.5, "8", None, True, (True, 2), (2, None), [[2]],
            (np.float64(2.0),), 2**31 + 1, (2**16, 2**16), 10**30, object(),
        ]),
    )


def bad_implicit_shapes() -> st.SearchStrategy:
    """Shapes refused by what never builds an array of the domain's size (marginals, policies of
    offsets or ⊥): those take up to 2**62 cells, so the sizes past 2**31 here are past 2**62."""
    return st.one_of(
        st.integers(max_value=0),
        st.sampled_from([
            (), (0,), (3, 0), (-1, 2), (2.5,), 2.5, "8", None, True, (True, 2), (2, None), [[2]],
            (np.float64(2.0),), 2**62 + 1, (2**32, 2**31), 10**30, object(),
        ]),
    )


def bad_rngs() -> st.SearchStrategy:
    """rng is a numpy Generator, a non-negative int seed or None."""
    return st.one_of(
        st.integers(max_value=-1),
        st.floats(),
        st.sampled_from([True, False, "0", [0], np.random.RandomState(0), np.int64(-1), object()]),
    )


def bad_names(known) -> st.SearchStrategy:
    return st.one_of(
        st.text(max_size=12).filter(lambda s: s not in known),
        st.sampled_from([None, 3, b"identity", ("identity",), object()]),
    )


@st.composite
def bad_histograms(draw, shape=(K,), any_length: bool = False):
    """Anything but a finite non-negative integer histogram of ``shape`` (or flat; of any length
    if ``any_length``)."""
    size = math.prod(shape)
    good = draw(arrays(np.int64, size, elements=st.integers(0, 20)))
    i = draw(st.integers(0, size - 1))
    kinds = ["nonfinite", "negative", "fractional", "ndim", "dtype", "container", "huge"]
    kind = draw(st.sampled_from(kinds if any_length else kinds + ["length"]))
    if kind == "nonfinite":
        x = good.astype(float)
        x[i] = draw(st.sampled_from([NAN, INF, -INF]))
        return x
    if kind == "negative":
        x = good.copy()
        x[i] = -draw(st.integers(1, 2**40))
        return x if draw(st.booleans()) else x.tolist()
    if kind == "fractional":
        x = good.astype(float)
        x[i] += draw(st.floats(0.001, 0.999))
        return x
    if kind == "length":
        n = draw(st.integers(0, 2 * size).filter(lambda n: n != size))
        return np.ones(n, dtype=np.int64)
    if kind == "ndim":
        return draw(st.sampled_from([good.reshape(1, -1), good.reshape(-1, 1), good[None, None], np.int64(3), 3]))
    if kind == "dtype":
        return draw(st.sampled_from([good.astype(str), good.astype(object), good.astype(complex), good.astype(bool),
                                     good.astype("datetime64[s]"), [str(v) for v in good]]))
    if kind == "container":
        return draw(st.sampled_from([None, "abc", {1: 2}, [[1, 2], [3]], {1, 2}, object()]))
    x = good.copy()
    x[i] = draw(st.integers(2**53 + 1, 2**62))
    return x


def bad_index_arrays(upper: int) -> st.SearchStrategy:
    """Not an array of integer indices in [0, upper]."""
    return st.one_of(
        st.sampled_from([[0.5], [upper + 1], [-1], ["a"], [[0, 1], [2]], [True, False], [NAN]]),
        st.lists(st.integers(min_value=upper + 1), min_size=1, max_size=3),
    )


def bad_reals() -> st.SearchStrategy:
    """Not a finite real number."""
    return st.one_of(st.sampled_from([NAN, INF, -INF, True, False]), NON_NUMBERS)


def bad_shares() -> st.SearchStrategy:
    """Not a number strictly between 0 and 1."""
    return st.one_of(
        st.floats().filter(lambda v: not 0 < v < 1),
        st.integers(),
        st.sampled_from([True, False]),
        NON_NUMBERS,
    )


def but_none(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """For arguments whose default None is valid."""
    return strategy.filter(lambda v: v is not None)


def not_a(kind: str) -> st.SearchStrategy:
    """Objects of the wrong kind for a policy / workload / mechanism argument."""
    others = {"policy": [W, GRAPH, X], "workload": [LINE, "prefix", 3, {1: 2}], "mechanism": [LINE, W, 3.0]}
    return st.sampled_from([None, "x", 3, object(), [1, 2]] + others.get(kind, []))


# -- the harness --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[Any], Any]
    arg: str  # regex the message must match (word-bounded)
    bad: st.SearchStrategy
    good: Any


CASES: list[Case] = []


def case(id: str, call: Callable[[Any], Any], arg: str, bad: st.SearchStrategy, good: Any) -> None:
    CASES.append(Case(id, call, arg, bad, good))


def assert_refused(call: Callable[[], Any], arg: str) -> None:
    """``call()`` raises ValueError/TypeError from a ``raise`` in blowfish_te naming ``arg``."""
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    last = info.traceback[-1]
    where = f"{last.path}:{last.lineno + 1}: {type(info.value).__name__}: {info.value}"
    assert pathlib.Path(str(last.path)).resolve().is_relative_to(PACKAGE), f"raised outside blowfish_te: {where}"
    assert str(last.statement).lstrip().startswith("raise"), f"not raised by a check of ours: {where}"
    assert re.search(rf"\b({arg})\b", str(info.value)), f"message does not name {arg!r}: {where}"


# -- policies -----------------------------------------------------------------------------------

case("policies.complete(shape)", lambda v: policies.complete(v), "shape", bad_shapes(), SHAPE2)
for name in ("unbounded", "attribute"):
    case(f"policies.{name}(shape)", lambda v, f=getattr(policies, name): f(v), "shape", bad_implicit_shapes(), SHAPE2)
case("policies.line(k)", lambda v: policies.line(v), "k", bad_sizes(), K)
case("policies.threshold(k)", lambda v: policies.threshold(v, 2), "k", bad_sizes(), K)
case("policies.threshold(theta)", lambda v: policies.threshold(K, v), "theta", bad_ints(), 2)
case("policies.grid(shape)", lambda v: policies.grid(v), "shape", bad_implicit_shapes(), SHAPE2)
case("policies.grid(theta)", lambda v: policies.grid(SHAPE2, v), "theta", bad_ints(), 2)
case("policies.partition(labels)", lambda v: policies.partition(v), "labels",
     st.sampled_from([[], 3, [NAN, 1.0], [None, 1], [[1, 2], [3]], np.zeros((0, 3)), [1, "a", None], None]),
     [0, 0, 1, 1])
case("policies.from_edges(shape)", lambda v: policies.from_edges(v, [[0, 1]]), "shape", bad_shapes(), K)
case("policies.from_edges(edges)", lambda v: policies.from_edges(K, v), "edges",
     st.sampled_from([[[0.0, 1.0]], [[0, 9]], [[-1, 2]], [0, 1], [[0, 1, 2]], [[0, 1], [2]], [["a", "b"]], [[3, 3]],
                      [[True, False]], None, "01"]),
     [[0, 1], [1, K]])
case("policies.from_networkx(graph)", lambda v: policies.from_networkx(v), "graph",
     st.sampled_from([None, [(0, 1)], X, nx.Graph([("a", "b")]), nx.Graph([(1, 2)]), nx.empty_graph(0)]), GRAPH)
case("policies.from_networkx(shape)", lambda v: policies.from_networkx(GRAPH, v), "shape", but_none(bad_shapes()), K)
case("Policy(blocks)", lambda v: policies.Policy(K, v), "blocks|edge blocks|OffsetEdges",
     st.sampled_from([None, 3, [None], [(0, 1)], [policies.OffsetEdges((0,))], [policies.OffsetEdges((1, 1))]]),
     [policies.OffsetEdges((1,))])
case("Policy.vertex(value)", lambda v: LINE.vertex(v), "cell",
     st.one_of(st.integers().filter(lambda i: not 0 <= i < K), st.sampled_from([0.0, (0,) * 2, (0.5,), "0", None])), 3)
case("Policy.distance(u)", lambda v: LINE.distance(v, 0), "cell|BOTTOM",
     st.one_of(st.integers().filter(lambda i: not 0 <= i < K), st.sampled_from([1.5, None, bt.BOTTOM])), 3)

# -- workloads ----------------------------------------------------------------------------------

for name in ("identity", "prefix"):
    case(f"workloads.{name}(shape)", lambda v, f=getattr(wl, name): f(v), "shape", bad_shapes(), SHAPE2)
case("workloads.all_ranges(k)", lambda v: wl.all_ranges(v), "k", bad_sizes(), K)
case("workloads.ranges(k)", lambda v: wl.ranges(v, [0], [1]), "k", bad_sizes(minimum=2), K)
for side in ("lo", "hi"):
    case(f"workloads.ranges({side})", lambda v, s=side: wl.ranges(K, **{"lo": [0, 1], "hi": [2, 3], s: v}), side,
         st.sampled_from([[], [0.0, 1.0], [-1, 0], [K, K], [[0, 1], [2]], ["a", "b"], [0], None, [True, False]]), [1, 2])
case("workloads.ranges(lo > hi)", lambda v: wl.ranges(K, v, [1, 1]), "lo", st.sampled_from([[2, 3], [0, 5]]), [0, 1])
case("workloads.random_ranges(k)", lambda v: wl.random_ranges(v, 5, rng=0), "k", bad_sizes(), K)
case("workloads.random_ranges(m)", lambda v: wl.random_ranges(K, v, rng=0), "m", bad_ints(), 5)
case("workloads.random_ranges(rng)", lambda v: wl.random_ranges(K, 5, rng=v), "rng", bad_rngs(), 0)
case("workloads.rects(shape)", lambda v: wl.rects(v, [[0, 0]], [[1, 1]]), "shape", bad_shapes(), SHAPE2)
for side in ("lo", "hi"):
    case(f"workloads.rects({side})", lambda v, s=side: wl.rects(SHAPE2, **{"lo": [[0, 0]], "hi": [[1, 1]], s: v}), side,
         st.sampled_from([[], [[0.0, 0.0]], [[0, 0, 0]], [0, 0], [[-1, 0]], [[3, 4]], [[0, 1], [2]], [["a", "b"]], None]),
         [[1, 1]])
case("workloads.random_rects(shape)", lambda v: wl.random_rects(v, 5, rng=0), "shape", bad_shapes(), SHAPE2)
case("workloads.random_rects(m)", lambda v: wl.random_rects(SHAPE2, v, rng=0), "m", bad_ints(), 5)
case("workloads.random_rects(rng)", lambda v: wl.random_rects(SHAPE2, 5, rng=v), "rng", bad_rngs(), 0)
case("workloads.marginals(shape)", lambda v: wl.marginals(v), "shape", bad_implicit_shapes(), SHAPE2)
case("workloads.marginals(axes)", lambda v: wl.marginals(SHAPE2, v), "axes|marginal",
     st.sampled_from([[], [(2,)], [(0, 0)], (0.5,), "a", [[-1]], 3, [(True,)], {0: 1}, [None]]), [(0,), (0, 1)])
case("workloads.from_matrix(matrix)", lambda v: wl.from_matrix(v), "matrix",
     st.sampled_from([[], [[]], [1, 2], np.ones((2, 2, 2)), [["a"]], [[1j]], [[NAN]], [[INF, 0]], [[1, 2], [3]],
                      None, np.zeros((0, K)), np.array([[1]], dtype=object), "W"]),
     np.eye(3))
case("workloads.from_matrix(domain)", lambda v: wl.from_matrix(np.eye(12), domain=v), "domain",
     st.one_of(but_none(bad_shapes()), st.sampled_from([(3, 3), 11, (2, 2, 2)])), SHAPE2)
case("workloads.as_workload(workload)", lambda v: wl.as_workload(v), "workload|matrix", not_a("workload"), W)
case("Workload.difference_norms(norm)", lambda v: W.difference_norms([0], [1], v), "norm", bad_names(("l1", "l2sq")), "l1")
case("Workload.difference_norms(u)", lambda v: W.difference_norms(v, [1]), "u", bad_index_arrays(K - 1), [0])
case("Workload.columns(cells)", lambda v: W.columns(v), "cells", bad_index_arrays(K - 1), [0, 2])
case("Workload.column_diameter(cells)", lambda v: W.column_diameter(v), "cells", bad_index_arrays(K - 1), [0, 2])

# -- trees --------------------------------------------------------------------------------------

case("trees.line(shape)", lambda v: trees.line(v), "shape", bad_shapes(), SHAPE2)
case("trees.hub(k)", lambda v: trees.hub(v, 2), "k", bad_sizes(), K)
case("trees.hub(theta)", lambda v: trees.hub(K, v), "theta", bad_ints(), 3)
for name in ("snake", "comb"):
    case(f"trees.{name}(shape)", lambda v, f=getattr(trees, name): f(v), "shape",
         st.one_of(bad_shapes(), st.sampled_from([K, (2, 2, 2)])), SHAPE2)
case("trees.comb(spine)", lambda v: trees.comb(SHAPE2, v), "spine", st.one_of(but_none(bad_ints(0)), st.integers(4, 10**30)), 1)
case("trees.star(shape)", lambda v: trees.star(v), "shape", bad_shapes(), SHAPE2)
case("trees.star(centre)", lambda v: trees.star(SHAPE2, v), "centre",
     st.one_of(st.integers().filter(lambda i: not 0 <= i < 12), st.sampled_from([(0.5, 0), (0,), (3, 0), (-1, 0), "a", 1.0, (None, 0)])),
     (1, 2))
for name in ("stars", "bfs", "shortest_path", "mst", "candidates", "edge_span"):
    case(f"trees.{name}(policy)", lambda v, f=getattr(trees, name): f(v), "policy", not_a("policy"), CYCLIC)
for name in ("bfs", "shortest_path"):
    case(f"trees.{name}(centre)", lambda v, f=getattr(trees, name): f(CYCLIC, v), "centre",
         st.one_of(st.integers().filter(lambda i: not 0 <= i < K), st.sampled_from([0.5, "a", (0.5,), (K,)])), 3)
case("trees.stretch(policy)", lambda v: trees.stretch(v, trees.line(K)), "policy", not_a("policy"), CYCLIC)
case("trees.stretch(tree)", lambda v: trees.stretch(CYCLIC, v), "tree",
     st.one_of(not_a("tree"), st.sampled_from([trees.line(K + 1), trees.line(SHAPE2)])), trees.line(K))

# -- sensitivity and transforms -----------------------------------------------------------------

case("sensitivity(workload)", lambda v: bt.sensitivity(v, LINE), "workload|matrix",
     st.one_of(not_a("workload"), st.sampled_from([wl.prefix(K + 1), np.ones((2, K - 1)), np.zeros((0, K))])), W)
case("sensitivity(policy)", lambda v: bt.sensitivity(W, v), "policy",
     st.one_of(not_a("policy"), st.sampled_from([policies.line(K + 1), GRID])), LINE)
case("transform(policy)", lambda v: bt.transform(v), "policy", st.one_of(not_a("policy"), st.just(CYCLIC)), LINE)
case("transform(tree)", lambda v: bt.transform(CYCLIC, v), "tree",
     st.one_of(not_a("tree"), st.sampled_from([trees.line(K + 1), policies.line(K // 2), CYCLIC, policies.from_edges(K, [[0, 1]])])),
     trees.hub(K, 2))
for name in ("data", "totals"):
    case(f"TreeTransform.{name}(x)", lambda v, n=name: getattr(TRANSFORM, n)(v), "x", bad_histograms(), X)
case("TreeTransform.offset(totals)", lambda v: TRANSFORM.offset(W, v), "totals",
     st.sampled_from([[], [1, 2], ["a"], [NAN], [INF], [-1], [0.5], None, [[1]], [1j]]), TOTALS)
case("TreeTransform.offset(workload)", lambda v: TRANSFORM.offset(v, TOTALS), "workload|matrix",
     st.one_of(not_a("workload"), st.just(wl.prefix(K + 1))), W)
case("TreeTransform.workload(workload)", lambda v: TRANSFORM.workload(v), "workload|matrix",
     st.one_of(not_a("workload"), st.just(wl.prefix(K + 1))), W)
case("TreeTransform.reconstruct(x_g)", lambda v: TRANSFORM.reconstruct(v, TOTALS), "x_g",
     st.sampled_from([np.zeros(K), np.zeros(K - 2), np.full(K - 1, NAN), np.full(K - 1, INF), ["a"] * (K - 1),
                      np.zeros(K - 1, dtype=complex), None, np.zeros((K - 1, 1))]),
     np.zeros(K - 1))
case("TreeTransform.reconstruct(totals)", lambda v: TRANSFORM.reconstruct(np.zeros(K - 1), v), "totals",
     st.sampled_from([[], [1, 2], ["a"], [NAN], [-1], [0.5], None]), TOTALS)

# -- mechanisms -------------------------------------------------------------------------------------

INSTANCES = {
    "Identity": M.Identity(), "DirectLaplace": M.DirectLaplace(), "H2": M.H2(), "HB": M.HB(), "QuadTree": M.QuadTree(),
    "GreedyH": M.GreedyH(), "Privelet": M.Privelet(), "Uniform": M.Uniform(), "Optimized": M.Optimized(restarts=1, maxiter=5),
    "MatrixMechanism": M.MatrixMechanism(np.eye(K)), "NonNegative": M.NonNegative(M.Identity()), "DAWA": M.DAWA(),
    "MWEM": M.MWEM(rounds=2, updates=2), "AHP": M.AHP(),
}
NATIVE = {"Ordered": M.Ordered(), "OrderedHierarchical": M.OrderedHierarchical(fanout=2),
          "TunedOrderedHierarchical": M.TunedOrderedHierarchical(fanout=2), "PartitionThenTransform": PartitionThenTransform()}

for cls, mech in INSTANCES.items():
    case(f"{cls}.run(epsilon)", lambda v, m=mech: m.run(W, X, v, rng=0), "epsilon", bad_epsilons(), 1.0)
    case(f"{cls}.run(x)", lambda v, m=mech: m.run(W, v, 1.0, rng=0), "x", bad_histograms(), X)
    case(f"{cls}.run(rng)", lambda v, m=mech: m.run(W, X, 1.0, rng=v), "rng", bad_rngs(), 0)
    case(f"{cls}.run(workload)", lambda v, m=mech: m.run(v, X, 1.0, rng=0), "workload|matrix", not_a("workload"), W)
    if isinstance(mech, M.LinearMechanism):
        case(f"{cls}.expected_error(epsilon)", lambda v, m=mech: m.expected_error(W, v), "epsilon", bad_epsilons(), 1.0)
for cls, mech in NATIVE.items():
    case(f"{cls}.release(epsilon)", lambda v, m=mech: m.release(W, X, v, 0, policy=LINE), "epsilon",
         bad_epsilons(), 1.0)
    case(f"{cls}.release(x)", lambda v, m=mech: m.release(W, v, 1.0, 0, policy=LINE), "x", bad_histograms(), X)
    case(f"{cls}.release(rng)", lambda v, m=mech: m.release(W, X, 1.0, v, policy=LINE), "rng", bad_rngs(), 0)
    case(f"{cls}.release(policy)", lambda v, m=mech: m.release(W, X, 1.0, 0, policy=v), "policy",
         st.one_of(not_a("policy"), st.just(policies.line(K + 1))), LINE)
    case(f"{cls}.run()", lambda v, m=mech: m.run(W, v, 1.0), "policy", st.just(X), None)

case("HB(branching)", lambda v: M.HB(branching=v), "branching", but_none(bad_ints(2)), 4)
case("QuadTree(budget)", lambda v: M.QuadTree(budget=v), "budget", bad_names(("geometric", "uniform")), "uniform")
case("GreedyH(branching)", lambda v: M.GreedyH(branching=v), "branching", bad_ints(2), 3)
case("GreedyH(grid)", lambda v: M.GreedyH(grid=v), "grid", bad_ints(2), 10)
case("GreedyH(rule)", lambda v: M.GreedyH(rule=v), "rule", bad_names(("dawa", "exact")), "exact")
for arg, minimum in (("p", 1), ("restarts", 1), ("maxiter", 1), ("seed", 0)):
    case(f"Optimized({arg})", lambda v, a=arg: M.Optimized(**{a: v}), arg, but_none(bad_ints(minimum)), 2)
case("MatrixMechanism(strategy)", lambda v: M.MatrixMechanism(v), "strategy|matrix",
     st.sampled_from([None, "abc", 3, [["a"]], [[NAN]], np.ones((2, 2, 2))]), np.eye(K))
case("MatrixMechanism(strategy size)", lambda v: M.MatrixMechanism(v).run(W, X, 1.0, rng=0), "strategy",
     st.sampled_from([np.eye(K + 1), lambda w: np.eye(3), lambda w: None]), np.eye(K))
case("NonNegative(mechanism)", lambda v: M.NonNegative(v), "mechanism|LinearMechanism",
     st.one_of(not_a("mechanism"), st.just(M.DAWA())), M.H2())
case("OrderedHierarchical(fanout)", lambda v: M.OrderedHierarchical(fanout=v), "fanout", bad_ints(2), 4)
case("OrderedHierarchical(split)", lambda v: M.OrderedHierarchical(split=v), "split", but_none(bad_shares()), 0.3)
case("OrderedHierarchical(spacing)", lambda v: M.OrderedHierarchical(spacing=v), "spacing", but_none(bad_ints(1)), 4)
case("TunedOrderedHierarchical(fanout)", lambda v: M.TunedOrderedHierarchical(fanout=v), "fanout", bad_ints(2), 4)
case("Ordered(policy 2-D)", lambda v: M.Ordered().release(W2, X2, 1.0, 0, policy=v), "1-D|policy", st.just(GRID), None)
case("DAWA(ratio)", lambda v: M.DAWA(ratio=v), "ratio", but_none(bad_shares()), 0.3)
case("DAWA(penalty)", lambda v: M.DAWA(penalty=v), "penalty", st.sampled_from([0, -1.0, NAN, INF, "a"]), 2.0)
case("DAWA(estimator)", lambda v: M.DAWA(estimator=v), "estimator",
     but_none(st.one_of(not_a("mechanism"), st.just(M.AHP()))), M.HB())
case("MWEM(rounds)", lambda v: M.MWEM(rounds=v), "rounds", bad_ints(), 3)
case("MWEM(updates)", lambda v: M.MWEM(updates=v), "updates", bad_ints(), 3)
case("MWEM(ratio)", lambda v: M.MWEM(ratio=v), "ratio", bad_shares(), 0.3)
case("MWEM(total_share)", lambda v: M.MWEM(total_share=v), "total_share", bad_shares(), 0.3)
case("MWEM(total)", lambda v: M.MWEM(total=v), "total",
     but_none(st.one_of(bad_reals(), st.floats(max_value=0.0), st.integers(max_value=0))), 100)
case("AHP(ratio)", lambda v: M.AHP(ratio=v), "ratio", bad_shares(), 0.3)
case("AHP(eta)", lambda v: M.AHP(eta=v), "eta", st.one_of(bad_reals(), st.floats(max_value=-1e-9)), 0.5)
case("PartitionThenTransform(partition)", lambda v: PartitionThenTransform(partition=v), "partition",
     bad_names(("dawa", "matching", "noisy_pairing")), "matching")
case("PartitionThenTransform(epsilon_split)", lambda v: PartitionThenTransform(epsilon_split=v), "epsilon_split",
     but_none(bad_shares()), 0.3)
case("PartitionThenTransform(estimator)", lambda v: PartitionThenTransform(estimator=v), "estimator",
     but_none(st.one_of(not_a("mechanism"), st.just(M.AHP()))), M.HB())
case("get_mechanism(mechanism)", lambda v: M.get_mechanism(v), "mechanism",
     st.one_of(bad_names(M.MECHANISMS), not_a("mechanism")), "identity")
case("qardaji_branching(n)", lambda v: M.qardaji_branching(v), "n", bad_ints(), 100)
case("qardaji_branching_2d(side)", lambda v: M.qardaji_branching_2d(v), "side", bad_ints(), 16)

# -- release: answer and plan -----------------------------------------------------------------------

ANSWER = dict(workload=W, x=X, policy=LINE, epsilon=1.0, mechanism="identity", rng=0)


def _answer(**changed):
    return bt.answer(**{**ANSWER, **changed})


def _plan(**changed):
    args = {**ANSWER, **changed}
    del args["x"], args["rng"]
    return bt.plan(**args)


for fn, label in ((_answer, "answer"), (_plan, "plan")):
    case(f"{label}(workload)", lambda v, f=fn: f(workload=v), "workload|matrix",
         st.one_of(not_a("workload"), st.sampled_from([wl.prefix(K + 1), np.zeros((0, K)), np.ones((2, 3))])), W)
    case(f"{label}(policy)", lambda v, f=fn: f(policy=v), "policy",
         st.one_of(not_a("policy"), st.just(policies.line(K + 1))), LINE)
    case(f"{label}(epsilon)", lambda v, f=fn: f(epsilon=v), "epsilon", bad_epsilons(), 0.5)
    case(f"{label}(mechanism)", lambda v, f=fn: f(mechanism=v), "mechanism",
         but_none(st.one_of(bad_names(M.MECHANISMS), not_a("mechanism"))), "h2")  # None: the default
    case(f"{label}(route)", lambda v, f=fn: f(route=v), "route", bad_names(("auto", "transform", "exact")), "exact")
    case(f"{label}(tree)", lambda v, f=fn: f(policy=CYCLIC, tree=v), "tree",
         st.one_of(but_none(bad_names(trees.candidates(CYCLIC))), st.sampled_from([trees.line(K + 1), policies.line(K // 2)])),
         "hub")
    case(f"{label}(tree with route exact)", lambda v, f=fn: f(policy=CYCLIC, tree="hub", route=v), "tree", st.just("exact"),
         "transform")
    case(f"{label}(cyclic policy, data-dependent mechanism)", lambda v, f=fn: f(policy=CYCLIC, mechanism=v), "tree",
         st.sampled_from(["dawa", "ahp"]), "identity")
case("answer(x)", lambda v: _answer(x=v), "x", bad_histograms(), X)
case("answer(x, 2-D)", lambda v: _answer(workload=W2, policy=GRID, x=v), "x", bad_histograms(SHAPE2), X2)
case("answer(rng)", lambda v: _answer(rng=v), "rng", bad_rngs(), 0)

# -- partitions -------------------------------------------------------------------------------------

case("median_deviations(x)", lambda v: partitions.median_deviations(v, 2), "x",
     st.one_of(bad_histograms(any_length=True), st.just([])), X)
case("median_deviations(length)", lambda v: partitions.median_deviations(X, v), "length",
     st.one_of(bad_ints(), st.integers(K + 1, 10**30)), 3)
DAWA_ARGS = dict(x=X, epsilon=1.0, epsilon2=1.0, rng=0)
MATCH_ARGS = dict(DAWA_ARGS)
PAIR_ARGS = dict(x=X, policy=LINE, epsilon=1.0, epsilon2=1.0, rng=0)
for fn, base in ((partitions.dawa_partition, DAWA_ARGS), (partitions.matching_partition, MATCH_ARGS),
                 (partitions.noisy_pairing_partition, PAIR_ARGS)):
    name = fn.__name__
    case(f"{name}(x)", lambda v, f=fn, b=base: f(**{**b, "x": v}), "x",
         st.one_of(bad_histograms(any_length=fn is not partitions.noisy_pairing_partition), st.just([])), X)
    for eps in ("epsilon", "epsilon2"):
        case(f"{name}({eps})", lambda v, f=fn, b=base, e=eps: f(**{**b, e: v}), eps, bad_epsilons(), 0.5)
    case(f"{name}(rng)", lambda v, f=fn, b=base: f(**{**b, "rng": v}), "rng", bad_rngs(), 0)
case("dawa_partition(penalty)", lambda v: partitions.dawa_partition(**{**DAWA_ARGS, "penalty": v}), "penalty",
     st.sampled_from([-1.0, NAN, INF, "a", None]), 2.0)
case("dawa_partition(guard)", lambda v: partitions.dawa_partition(**{**DAWA_ARGS, "guard": v}), "guard",
     st.sampled_from([-1.0, NAN, INF, "a", None]), 2.0)
case("dawa_partition(max_length)", lambda v: partitions.dawa_partition(**{**DAWA_ARGS, "max_length": v}), "max_length",
     but_none(bad_ints(1)), 2)
case("noisy_pairing_partition(policy)", lambda v: partitions.noisy_pairing_partition(X, v, 1.0, 1.0, rng=0), "policy",
     not_a("policy"), LINE)
case("best_interval_partition(scores)", lambda v: partitions.best_interval_partition(v), "scores",
     st.sampled_from([None, {}, [np.zeros(3)], {2: np.zeros(2)}, {1: np.zeros(3), 2: np.zeros(3)},
                      {1: np.array([NAN, 0.0])}, {1: np.array(["a", "b"])}, {1: np.zeros(3), 0: np.zeros(4)},
                      {1.5: np.zeros(3), 1: np.zeros(3)}, {1: np.zeros((3, 1))}]),
     {1: np.zeros(3), 2: np.zeros(2)})
case("optimal_pairing(values)", lambda v: partitions.optimal_pairing(v, 1.0), "values",
     st.sampled_from([[NAN, 1.0], [INF, 0], ["a", "b"], [[1, 2], [3]], None, [1j]]), [1.0, 2.0, 5.0])
case("optimal_pairing(penalty)", lambda v: partitions.optimal_pairing([1.0, 2.0], v), "penalty",
     st.one_of(bad_reals(), st.floats(max_value=-1e-9)), 1.0)
case("quotient_policy(policy)", lambda v: partitions.quotient_policy(v, np.zeros(K, dtype=int)), "policy",
     not_a("policy"), LINE)
case("quotient_policy(labels)", lambda v: partitions.quotient_policy(LINE, v), "labels",
     st.sampled_from([[], np.zeros(K), np.arange(K + 1), np.full(K, -1), np.array([0, 2] * 4), ["a"] * K, None]),
     np.arange(K) // 2)

# -- bounds, datasets, strategies ---------------------------------------------------------------------

case("lower_bound(workload)", lambda v: bounds.lower_bound(v, 1.0), "workload|matrix", not_a("workload"), W)
case("lower_bound(epsilon)", lambda v: bounds.lower_bound(W, v), "epsilon", bad_epsilons(), 1.0)
case("lower_bound(policy)", lambda v: bounds.lower_bound(W, 1.0, v), "policy",
     st.one_of(but_none(not_a("policy")), st.just(policies.line(K + 1))), LINE)
case("datasets.synthetic(k)", lambda v: datasets.synthetic(v, 100), "k", bad_ints(), K)
case("datasets.synthetic(n)", lambda v: datasets.synthetic(K, v), "n", bad_ints(0), 100)
case("datasets.synthetic(rng)", lambda v: datasets.synthetic(K, 100, rng=v), "rng", bad_rngs(), 0)
case("datasets.load(data_dir_path)", lambda v: datasets.load("HEPTH", v), "data directory|data_dir",
     st.sampled_from(["/nonexistent/blowfish_te", str(pathlib.Path(__file__))]), None)

case("GeneralStrategy(strategy)", lambda v: strategies.GeneralStrategy(v), "strategy|matrix",
     st.sampled_from([None, "abc", [["a"]], np.ones((2, K)), np.zeros((K, K)), [[NAN]]]), np.eye(K))
for cls in ("IdentityStrategy", "HaarStrategy"):
    case(f"{cls}(domain)", lambda v, c=getattr(strategies, cls): c(v), "domain", bad_shapes(), SHAPE2)
case("Hierarchy(domain)", lambda v: strategies.Hierarchy(v, 2), "domain", bad_shapes(), SHAPE2)
case("Hierarchy(branching)", lambda v: strategies.Hierarchy(K, v), "branching", bad_ints(2), 3)
case("TreeStrategy(hierarchy)", lambda v: strategies.TreeStrategy(v, np.ones(HIERARCHY.num_nodes)), "hierarchy",
     st.sampled_from([None, W, LINE, "h"]), HIERARCHY)
case("TreeStrategy(weights)", lambda v: strategies.TreeStrategy(HIERARCHY, v), "weights",
     st.sampled_from([None, ["a"] * HIERARCHY.num_nodes, np.ones(3), np.full(HIERARCHY.num_nodes, NAN),
                      -np.ones(HIERARCHY.num_nodes), np.zeros(HIERARCHY.num_nodes), [[1, 2], [3]]]),
     np.ones(HIERARCHY.num_nodes))
case("hierarchical(level_weights)", lambda v: strategies.hierarchical(K, 2, level_weights=v), "level_weights|weights",
     st.sampled_from([["a"] * 4, np.ones(2), [NAN] * 4, [-1.0] * 4, [[1, 2], [3]], "abcd"]), np.ones(4))
case("greedy_hierarchy(workload)", lambda v: strategies.greedy_hierarchy(v), "workload|matrix", not_a("workload"), W)
case("greedy_hierarchy(branching)", lambda v: strategies.greedy_hierarchy(W, v), "branching", bad_ints(2), 2)
case("greedy_hierarchy(grid)", lambda v: strategies.greedy_hierarchy(W, 2, v), "grid", bad_ints(), 10)
case("greedy_hierarchy(rule)", lambda v: strategies.greedy_hierarchy(W, rule=v), "rule", bad_names(("dawa", "exact")), "exact")
case("PIdentityStrategy(theta)", lambda v: strategies.PIdentityStrategy(v, K), "theta",
     st.sampled_from([None, [["a"] * K], np.ones(K), -np.ones((1, K)), np.full((1, K), NAN), np.ones((1, K + 1)),
                      [[1, 2], [3]]]),
     np.ones((1, K)))
case("PIdentityStrategy(domain)", lambda v: strategies.PIdentityStrategy(np.ones((1, K)), v), "domain",
     st.one_of(bad_shapes(), st.just(K + 1)), K)
case("optimize_pidentity(workload)", lambda v: strategies.optimize_pidentity(v, 1, 1, 0, 3), "workload|matrix",
     not_a("workload"), W)
for pos, arg, minimum in ((1, "p", 1), (2, "restarts", 1), (4, "maxiter", 1)):
    def _opt(v, pos=pos):
        args = [W, 1, 1, 0, 3]
        args[pos] = v
        return strategies.optimize_pidentity(*args)

    case(f"optimize_pidentity({arg})", _opt, arg, but_none(bad_ints(minimum)), 2)
case("optimize_pidentity(rng)", lambda v: strategies.optimize_pidentity(W, 1, 1, v, 3), "rng", bad_rngs(), 0)
case("LeastSquares.pinv(y)", lambda v: HAAR.pinv(v), "y",
     st.sampled_from([np.zeros(K + 1), ["a"] * K, np.full(K, NAN), None, np.zeros(K, dtype=complex), np.zeros((K, 2, 2))]),
     np.zeros(K))


# -- budget -------------------------------------------------------------------------------------------

case("BudgetAccountant(total_epsilon)", lambda v: bt.BudgetAccountant(v, LINE), "total_epsilon", bad_epsilons(), 1.0)
case("BudgetAccountant(policy)", lambda v: bt.BudgetAccountant(1.0, v), "policy", not_a("policy"), LINE)
case("BudgetAccountant(constraints)", lambda v: bt.BudgetAccountant(1.0, LINE, constraints=v), "constraints",
     st.sampled_from([None, "yes", 1, 0.0, [True]]), True)
case("BudgetAccountant.spend(epsilon)", lambda v: bt.BudgetAccountant(1.0, LINE).spend(v), "epsilon", bad_epsilons(), 0.5)
case("BudgetAccountant.spend(label)", lambda v: bt.BudgetAccountant(1.0, LINE).spend(0.5, v), "label",
     st.sampled_from([3, b"x", ["x"]]), "x")
case("BudgetAccountant.answer(x)", lambda v: bt.BudgetAccountant(1.0, LINE).answer(W, v, 0.5, mechanism="identity", rng=0), "x",
     bad_histograms(), X)
case("BudgetAccountant.parallel(parts)", lambda v: bt.BudgetAccountant(1.0, LINE).parallel(v), "parts",
     st.sampled_from([None, 3, "ab", [], {}, {"a": []}, {"a": 1}, {"a": [[1]]}, {"a": [1, 2], "b": [2]}]), [[1], [2]])
case("ParallelGroup.spend(part)", lambda v: bt.BudgetAccountant(1.0, LINE).parallel({"a": [1], "b": [2]}).spend(v, 0.5),
     "part", st.sampled_from(["c", None, 0, ["a"]]), "a")


# -- the tests ----------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
@settings(max_examples=10)
@given(data=st.data())
def test_malformed_argument_is_refused_and_named(c: Case, data):
    bad = data.draw(c.bad, label=c.id)
    assert_refused(lambda: c.call(bad), c.arg)


@pytest.mark.parametrize("c", [c for c in CASES if c.good is not None], ids=[c.id for c in CASES if c.good is not None])
def test_the_valid_value_of_each_case_is_accepted(c: Case):
    """Each case differs from a working call in the drawn argument only."""
    c.call(c.good)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", sorted(M.MECHANISMS))
@pytest.mark.parametrize("epsilon", [MIN_EPSILON, 1e-99, 1e99, MAX_EPSILON])
def test_extreme_valid_epsilons_give_finite_answers_or_name_epsilon(mechanism, epsilon):
    """At the ends of the accepted ε range every release is finite, or is refused before any
    output because a share of a tiny ε (a split, ε/rounds or ε/stretch) falls below the range —
    never inf or NaN."""
    native = issubclass(M.MECHANISMS[mechanism], M.NativeMechanism)
    grid = M.MECHANISMS[mechanism].needs_grid
    for policy in (LINE, policies.unbounded((2, K // 2) if grid else K), CYCLIC):
        if M.MECHANISMS[mechanism].models_records and not policy.is_differential_privacy:
            continue  # refused whatever ε (test_datadependent)
        marginal = M.MECHANISMS[mechanism].needs_marginals  # the exact route only, on marginals
        tree = "hub" if policy is CYCLIC and not native and not marginal else None
        workload = wl.random_rects(policy.shape, 10, rng=0) if grid else wl.all_ranges(K)
        if marginal:
            workload = wl.marginals(policy.shape, [(0,), ()])
        try:
            release = bt.answer(workload, X.reshape(policy.shape), policy, epsilon, mechanism, rng=0, tree=tree)
        except ValueError as exc:
            assert epsilon < 1 and re.search(r"\bepsilon\b", str(exc)), exc
            continue
        assert np.isfinite(release.answers).all()
