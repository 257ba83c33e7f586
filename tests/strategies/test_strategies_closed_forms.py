"""The closed-form analytic errors and Gram matrices against their generic (blockwise) twins.

The generic twin of ‖W A⁺‖_F² applies (A⁺)ᵀ to W's rows (``LeastSquares.lstsq_frobenius_sq``);
the closed forms must agree with it to rounding on every hierarchy shape, weighting and workload.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blowfish_te as bt
from blowfish_te import workloads as wl
from blowfish_te.strategies import GeneralStrategy, HaarStrategy, Hierarchy, TreeStrategy, greedy_hierarchy, hierarchical
from blowfish_te.strategies.base import LeastSquares, sparse_rows
from blowfish_te.strategies.greedy import _CellSpace, _image_space, _QuerySpace
from blowfish_te.transform import transform
from blowfish_te.workloads import Boxes
from blowfish_te.workloads.base import Workload

pytestmark = pytest.mark.core


def generic_error(strategy, workload) -> float:
    return LeastSquares.lstsq_frobenius_sq(strategy, workload)


def random_boxes(shape, m, rng, weighted=True) -> Boxes:
    ends = np.stack([np.stack([rng.integers(0, s, m) for s in shape], axis=1) for _ in range(2)])
    return Boxes(shape, ends.min(0), ends.max(0), weights=rng.uniform(0, 3, m) if weighted else None)


shapes = st.one_of(
    st.tuples(st.integers(1, 40)),
    st.tuples(st.integers(1, 7), st.integers(1, 7)),
)


@settings(max_examples=80, deadline=None)
@given(shape=st.one_of(shapes, st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(1, 4))),
       branching=st.integers(2, 5), seed=st.integers(0, 2**31), unmeasured=st.floats(0, 0.5))
def test_tree_error_matches_least_squares_on_boxes(shape, branching, seed, unmeasured):
    """Any node weights, including unmeasured nodes and whole unmeasured subtrees; 1-D ranges by
    their two ends' paths, 2-D and 3-D boxes by the nodes their boundaries cut."""
    rng = np.random.default_rng(seed)
    h = Hierarchy(shape, branching)
    weights = rng.uniform(0.1, 2.0, h.num_nodes) * (rng.random(h.num_nodes) >= unmeasured)
    try:
        strategy = TreeStrategy(h, weights)
    except ValueError:  # rank deficient: nothing to compare
        return
    workload = random_boxes(shape, 15, rng)
    assert strategy.lstsq_frobenius_sq(workload) == pytest.approx(generic_error(strategy, workload), rel=1e-9)


def test_tree_error_on_rectangles_never_lists_their_cells(monkeypatch):
    """HB and QuadTree on 2-D rectangles: the error from the nodes the boundaries cut, without the
    workload's sparse form (one entry per (query, cell) pair)."""
    shape = (40, 33)
    boxes = wl.dpbench_ranges(shape, 50, rng=3)
    expected = {b: generic_error(hierarchical(shape, b), boxes) for b in (2, 5)}

    def refuse(self):
        raise AssertionError("the sparse form of the workload was built")

    monkeypatch.setattr(wl.Boxes, "tosparse", refuse)
    for b, value in expected.items():
        assert hierarchical(shape, b).lstsq_frobenius_sq(boxes) == pytest.approx(value, rel=1e-9)


def test_tree_error_visits_the_unmeasured_family_correction():
    """A leaf left unmeasured makes its parent's estimate parent - siblings (β = 1 on it)."""
    h = Hierarchy((6, 5), 2)
    weights = np.ones(h.num_nodes)
    leaves = np.flatnonzero(h.is_leaf)
    first_leaf_of_family = leaves[np.unique(h.parent[leaves], return_index=True)[1]]
    weights[first_leaf_of_family[::2]] = 0.0  # at most one unmeasured child per family
    strategy = TreeStrategy(h, weights)
    assert np.isinf(strategy._variance).any()
    workload = random_boxes((6, 5), 40, np.random.default_rng(1))
    assert strategy._sparse_error(workload.tosparse()) == pytest.approx(generic_error(strategy, workload), rel=1e-9)


def moved_workloads(spec: str, shape: tuple, rects: int):
    """The prefix (1-D) or random-rectangle workload moved onto every tree the policy offers."""
    policy = bt.policies.from_spec(spec, shape)
    trees = [None] if policy.is_forest else list(bt.trees.candidates(policy).values())
    base = bt.workloads.prefix(shape) if len(shape) == 1 else bt.workloads.random_rects(shape, rects, rng=0)
    return [transform(policy, tree).workload(base) for tree in trees]


@pytest.mark.parametrize("spec,shape", [("line", (40,)), ("threshold:4", (30,)), ("grid:1", (6, 7)), ("line", (37,))])
def test_tree_and_haar_errors_match_on_transformed_workloads(spec, shape):
    """W_G has short signed rows (edges crossing a query's boundary): the sparse-load forms."""
    for moved in moved_workloads(spec, shape, 25):
        for strategy in (hierarchical(moved.domain, 3), HaarStrategy(moved.domain)):
            assert strategy.lstsq_frobenius_sq(moved) == pytest.approx(generic_error(strategy, moved), rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(shape=st.one_of(shapes, st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 5))), seed=st.integers(0, 2**31))
def test_haar_error_matches_least_squares_on_boxes(shape, seed):
    rng = np.random.default_rng(seed)
    strategy = HaarStrategy(shape)
    workload = random_boxes(shape, 12, rng)
    expected = generic_error(strategy, workload)
    assert strategy.lstsq_frobenius_sq(workload) == pytest.approx(expected, rel=1e-9)
    assert strategy._sparse_error(workload.tosparse()) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("shape", [(3, 5), (8, 8), (2, 3, 5)])
@pytest.mark.parametrize("norm", ["l1", "l2sq"])
def test_haar_difference_norms_in_several_dimensions(shape, norm):
    rng = np.random.default_rng(4)
    strategy = HaarStrategy(shape)
    k = strategy.size
    u, v = rng.integers(0, k, 60), rng.integers(0, k + 1, 60)
    v[:5], v[5] = k, u[5]  # pairs with ⊥ and a pair of equal cells
    np.testing.assert_allclose(strategy.difference_norms(u, v, norm), Workload.difference_norms(strategy, u, v, norm))


@pytest.mark.parametrize("spec,shape", [("line", (30,)), ("threshold:3", (20,)), ("grid:1", (4, 5)), ("unbounded", (9,))])
def test_transformed_gram_is_p_transpose_c_p(spec, shape):
    for moved in moved_workloads(spec, shape, 10):
        np.testing.assert_allclose(moved.gram_matrix(), Workload.gram_matrix(moved), atol=1e-9)


@pytest.mark.parametrize("workload", [bt.workloads.random_ranges(300, 500, rng=1), bt.workloads.prefix(7), bt.workloads.identity(1)])
def test_range_gram_matrix(workload):
    np.testing.assert_allclose(workload.gram_matrix(), Workload.gram_matrix(workload))


@pytest.mark.parametrize("rule", ["dawa", "exact"])
def test_greedy_with_a_sparse_gram_chooses_the_same_weights(rule, monkeypatch):
    """Ranges moved onto a line's edges have a sparse Gram; the dense one must give the same tree."""
    moved = transform(bt.policies.line(37)).workload(bt.workloads.random_ranges(37, 30, rng=2))
    monkeypatch.setattr("blowfish_te.strategies.greedy.SMALL_GRAM_ENTRIES", 0)  # look for the sparse Gram even here
    assert not isinstance(_image_space(moved).gram, np.ndarray)
    sparse = greedy_hierarchy(moved, 3, rule=rule)
    monkeypatch.setattr(type(moved), "sparse_rows", lambda workload: None)  # the dense Gram
    dense = greedy_hierarchy(moved, 3, rule=rule)
    np.testing.assert_allclose(sparse.node_weights, dense.node_weights)
    assert sparse.selection_score == pytest.approx(dense.selection_score)


@pytest.mark.parametrize("rule", ["dawa", "exact"])
@pytest.mark.parametrize("workload", [
    bt.workloads.random_rects((16, 12), 40, rng=3),
    bt.workloads.Boxes((9, 10), [[0, 0], [2, 3], [5, 1]], [[8, 9], [4, 3], [7, 7]], weights=[1.0, 2.5, 0.5]),
    bt.workloads.MatrixWorkload(np.random.default_rng(4).integers(0, 3, (25, 64)).astype(float), (8, 8)),
], ids=["rects", "weighted boxes", "matrix"])
def test_greedy_in_query_space_chooses_the_same_weights(workload, rule, monkeypatch):
    """Fewer queries than cells: images W v with G = W Wᵀ give the tree that WᵀW gives."""
    cells = greedy_hierarchy(workload, 2, rule=rule)
    monkeypatch.setattr("blowfish_te.strategies.greedy.DENSE_GRAM_ENTRIES", 0)
    monkeypatch.setattr("blowfish_te.strategies.greedy.SMALL_GRAM_ENTRIES", 0)
    space = _image_space(workload)
    assert isinstance(space, _QuerySpace)
    queries = greedy_hierarchy(workload, 2, rule=rule)
    np.testing.assert_allclose(queries.node_weights, cells.node_weights)
    assert queries.selection_score == pytest.approx(cells.selection_score)
    gram = Workload.gram_matrix(workload)
    np.testing.assert_allclose(space.cell_energy, (gram**2).sum(axis=1))
    assert isinstance(_CellSpace(gram).unit(None), np.ndarray)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 30), extra=st.integers(0, 30), queries=st.integers(1, 60), seed=st.integers(0, 2**31))
def test_general_strategy_trace_form_matches_least_squares(k, extra, queries, seed):
    """‖W A⁺‖²_F = tr(W (AᵀA)⁻¹ Wᵀ) for full-column-rank A (sparse LU of AᵀA), with fewer or more
    queries than cells and measurements."""
    rng = np.random.default_rng(seed)
    rows = Boxes((k,), np.arange(k), np.arange(k), weights=rng.uniform(0.2, 3, k))  # full column rank
    more = random_boxes((k,), extra, rng) if extra else None
    strategy_rows = rows if more is None else Boxes((k,), np.concatenate([rows.lo, more.lo]), np.concatenate([rows.hi, more.hi]),
                                                    weights=np.concatenate([rows.weights, more.weights]))
    strategy = GeneralStrategy(strategy_rows)
    workload = random_boxes((k,), queries, rng)
    dense = np.linalg.norm(workload.dense() @ np.linalg.pinv(strategy_rows.dense())) ** 2
    assert strategy.lstsq_frobenius_sq(workload) == pytest.approx(generic_error(strategy, workload), rel=1e-9)
    assert strategy.lstsq_frobenius_sq(workload) == pytest.approx(dense, rel=1e-8)


def test_general_strategy_trace_form_with_a_dense_factor():
    """A Gram too dense for the sparse LU (a row over every cell): the Cholesky path agrees too."""
    rng = np.random.default_rng(5)
    k = 80
    rows = Boxes((k,), np.concatenate([np.arange(k), [0]]), np.concatenate([np.arange(k), [k - 1]]), weights=rng.uniform(0.2, 3, k + 1))
    strategy = GeneralStrategy(rows)
    assert strategy._factor is not None
    for workload in (random_boxes((k,), 30, rng), random_boxes((k,), 200, rng)):
        dense = np.linalg.norm(workload.dense() @ np.linalg.pinv(rows.dense())) ** 2
        assert strategy.lstsq_frobenius_sq(workload) == pytest.approx(dense, rel=1e-8)
        assert strategy.lstsq_frobenius_sq(workload) == pytest.approx(generic_error(strategy, workload), rel=1e-9)


def test_general_strategy_trace_form_reads_sparse_rows_and_products_alike():
    """W's rows taken from its sparse form (boxes) or through Wᵀ products (a workload without
    one) give one ‖W A⁺‖²_F."""
    rng = np.random.default_rng(11)
    k = 300
    rows = Boxes((k,), np.arange(k), np.minimum(np.arange(k) + 2, k - 1), weights=rng.uniform(0.2, 3, k))
    strategy = GeneralStrategy(rows)
    assert strategy._sparse_lu is not None
    workload = random_boxes((k,), 120, rng)
    products_only = wl.Stacked([workload])  # no sparse form of its own: its rows come through Wᵀ
    assert sparse_rows(workload) is not None and sparse_rows(products_only) is None
    assert strategy.lstsq_frobenius_sq(workload) == pytest.approx(strategy.lstsq_frobenius_sq(products_only), rel=1e-12)


@pytest.mark.parametrize("ratio", [0.0, float("inf")])
def test_query_space_gram_by_products_or_sparse_rows_is_w_w_transpose(monkeypatch, ratio):
    """G = W Wᵀ of a workload moved onto a tree's edges, formed through the sparse rows or through
    the workload's own products (the ratio forces one way), equals the dense product."""
    from blowfish_te.strategies import greedy

    monkeypatch.setattr(greedy, "SPARSE_GRAM_RATIO", ratio)
    policy = bt.policies.grid((9, 7), 1)
    moved = transform(policy, bt.trees.named(policy, "stars")).workload(wl.random_rects((9, 7), 40, rng=4))
    rows = sparse_rows(moved)
    dense = moved.dense()
    np.testing.assert_allclose(greedy._query_gram(moved, rows), dense @ dense.T, atol=1e-9)
