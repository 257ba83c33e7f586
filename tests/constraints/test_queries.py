"""Public count constraints as query matrices (``blowfish_te.constraints.queries``; He,
Machanavajjhala, Ding, SIGMOD 2014, §8): each builder against a 0/1 matrix written from the
definition on small grids, the names, counts and scopes it keeps, combining and subsetting, and
every refusal matched word for word. The matrix Q decides the policy graph and so the sensitivity:
a wrong row here is a wrong privacy guarantee downstream."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from blowfish_te.constraints import Constraints, count_queries, known_total, marginals, rectangles
from blowfish_te.errors import ConstraintError

from tests.helpers import exactly


def _cells(shape):
    """(K, d) coordinates of the flat cells, row-major."""
    return np.array(list(itertools.product(*[range(k) for k in shape])), dtype=np.int64).reshape(-1, len(shape))


def _dense(c: Constraints) -> np.ndarray:
    return c.matrix.toarray()


# -- arbitrary count queries ----------------------------------------------------------------------
def test_cell_sets_become_0_1_rows():
    shape = (2, 3)
    mask = np.zeros(shape, dtype=bool)
    mask[1, 0] = mask[0, 2] = True
    flat_mask = np.zeros(6, dtype=bool)
    flat_mask[[1, 5]] = True
    c = count_queries(shape, [[4, 0, 4], mask, flat_mask, np.array([], dtype=np.int64), [5]])
    expected = np.array([[1, 0, 0, 0, 1, 0], [0, 0, 1, 1, 0, 0], [0, 1, 0, 0, 0, 1], [0] * 6, [0, 0, 0, 0, 0, 1]])
    assert np.array_equal(_dense(c), expected)  # a repeated cell is counted once
    assert c.matrix.dtype == np.float64
    assert c.names == ("q0", "q1", "q2", "q3", "q4")
    assert c.counts is None and c.scopes == (None,) * 5 and c.structure is None
    assert (c.num_queries, c.size, len(c)) == (5, 6, 5)
    for i in range(5):
        assert np.array_equal(c.cells(i), np.flatnonzero(expected[i]))
    assert repr(c) == "<Constraints: 5 count queries over (2, 3)>"


@pytest.mark.parametrize("dtype", [np.int64, np.float64, bool])
def test_a_matrix_is_kept_as_float_0_1_with_its_zeros_dropped(dtype):
    dense = np.array([[1, 0, 1, 0], [0, 1, 1, 1]], dtype=dtype)
    c = Constraints((4,), dense)
    assert c.matrix.dtype == np.float64 and np.array_equal(_dense(c), dense.astype(float))
    stored_zero = sp.csr_array((np.array([1.0, 0.0, 1.0]), np.array([0, 2, 3]), np.array([0, 2, 3])), shape=(2, 4))
    c = Constraints((4,), stored_zero)
    assert c.matrix.nnz == 2 and np.array_equal(_dense(c), [[1, 0, 0, 0], [0, 0, 0, 1]])
    assert stored_zero.nnz == 3  # the caller's matrix is not touched


def test_queries_are_refused_by_name():
    k = 6
    with pytest.raises(ValueError, match=exactly("queries must have one column per cell (6), got shape (2, 7)")):
        Constraints((2, 3), sp.csr_array(np.ones((2, 7))))
    with pytest.raises(ValueError, match=exactly("queries must be 0/1: a count query counts each record once or not at all")):
        Constraints((2, 3), sp.csr_array(np.full((1, k), 2.0)))
    for bad in (5, None, "012"):
        with pytest.raises(TypeError, match=exactly(f"queries must be a 0/1 matrix or a sequence of cell sets, got {type(bad).__name__}")):
            Constraints((2, 3), bad)
    with pytest.raises(ValueError, match=exactly("queries[1] is a boolean mask of shape (3, 2); masks must have the domain's shape (2, 3)")):
        Constraints((2, 3), [[0], np.ones((3, 2), dtype=bool)])
    with pytest.raises(TypeError, match=exactly("queries[0] must hold integer cell indices or be a boolean mask, got dtype float64")):
        Constraints((2, 3), [[0.0, 1.0]])
    for empty in ([], sp.csr_array((0, k)), np.zeros((0, k))):
        with pytest.raises(ValueError, match=exactly("queries must hold at least one count query")):
            Constraints((2, 3), empty)


@pytest.mark.parametrize("cells, bad", [([0, 6], 6), ([0, 1, 9], 9), ([-1, 3], -1), ([-2, -1, 6], -2), ([0, 5, 6], 6)])
def test_cells_outside_the_domain_are_named(cells, bad):
    with pytest.raises(ValueError, match=exactly(f"queries[1] holds cell {bad}, outside the domain's cells 0..5")):
        Constraints((2, 3), [[0], cells])
    assert _dense(Constraints((2, 3), [[0, 5]])).tolist() == [[1, 0, 0, 0, 0, 1]]  # both ends are inside


def test_names():
    c = count_queries((3,), [[0], [1, 2]], names=["left", "right"])
    assert c.names == ("left", "right")
    for bad in (["only"], ["a", "b", "c"], ["a", 2]):
        with pytest.raises(ValueError, match=exactly(f"names must be 2 strings, one per query, got {bad!r}")):
            Constraints((3,), [[0], [1, 2]], names=bad)
    with pytest.raises(ValueError, match=exactly("names must be distinct")):
        Constraints((3,), [[0], [1, 2]], names=["a", "a"])


# -- public counts --------------------------------------------------------------------------------
def test_counts_are_kept_as_int64_and_zero_is_a_count():
    c = count_queries((3,), [[0], [1, 2]], counts=[0, 7.0])
    assert c.counts.dtype == np.int64 and c.counts.tolist() == [0, 7]
    given = np.array([[0], [7]])
    c = count_queries((3,), [[0], [1, 2]], counts=given)
    assert c.counts.tolist() == [0, 7] and given.tolist() == [[0], [7]]


@pytest.mark.parametrize("counts", [[1.5, 2], [-1, 2], [np.nan, 1], [np.inf, 1]])
def test_counts_that_no_count_query_can_answer_are_refused(counts):
    shown = np.asarray(counts, dtype=float).tolist()
    with pytest.raises(ValueError, match=exactly(f"counts must be non-negative integers (answers of count queries), got {shown}")):
        count_queries((3,), [[0], [1, 2]], counts=counts)


def test_counts_of_the_wrong_size_or_kind_are_refused():
    with pytest.raises(ValueError, match=exactly("counts must hold one answer per query (2), got 3")):
        count_queries((3,), [[0], [1, 2]], counts=[1, 2, 3])
    with pytest.raises(TypeError, match="^counts must be an array, could not convert it: "):
        count_queries((3,), [[0], [1, 2]], counts=[[1, 2], [3]])


def test_evaluate_and_public_counts():
    c = count_queries((2, 3), [[0, 4], [1, 2, 3]], counts=[5, 6])
    x = np.array([[2, 1, 2], [3, 3, 0]])
    assert c.evaluate(x).dtype == np.int64 and c.evaluate(x).tolist() == [5, 6]
    assert c.public_counts(x.ravel()).tolist() == [5, 6]
    with pytest.raises(ConstraintError, match=exactly(
            "x does not satisfy the public constraint 'q1': it counts 7 records, the constraint says 6 (1 of 2 constraints differ)")):
        c.public_counts([[2, 1, 2], [4, 3, 0]])
    free = count_queries((2, 3), [[0, 4], [1, 2, 3]])
    assert free.public_counts(x).tolist() == [5, 6]


# -- scopes ---------------------------------------------------------------------------------------
def test_scopes_are_frozen_record_sets():
    c = count_queries((3,), [[0], [1], [2], [0, 2]], scopes=[None, {1, 2}, np.array([[3, 4], [5, 3]]), range(2)])
    assert c.scopes == (None, frozenset({1, 2}), frozenset({3, 4, 5}), frozenset({0, 1}))
    assert c.applicable().tolist() == [0] and c.applicable().dtype == np.int64
    assert c.applicable({1, 2}).tolist() == [1]  # a scope equal to the records counts
    assert c.applicable([0, 1, 2, 9]).tolist() == [1, 3]
    assert c.applicable(range(6)).tolist() == [1, 2, 3]
    empty = c.applicable({7})
    assert empty.size == 0 and empty.dtype == np.int64
    everyone = count_queries((3,), [[0]])
    assert everyone.applicable([1]).dtype == np.int64 and everyone.applicable([1]).size == 0
    scoped = count_queries((3,), [[0]], scopes=[{1}])
    assert scoped.applicable().dtype == np.int64 and scoped.applicable().size == 0


def test_scopes_are_refused_by_name():
    with pytest.raises(ValueError, match=exactly("scopes must give one record-id set (or None) per query (2), got 1")):
        count_queries((3,), [[0], [1]], scopes=[None])
    for bad in (5, "ab", b"ab"):
        with pytest.raises(TypeError, match=exactly(f"scopes[1] must be a collection of record ids or None, got {type(bad).__name__}")):
            count_queries((3,), [[0], [1]], scopes=[None, bad])
    with pytest.raises(ValueError, match=exactly("scopes[0] is empty: a query that counts nobody constrains nothing")):
        count_queries((3,), [[0], [1]], scopes=[set(), None])


# -- combining and subsetting ---------------------------------------------------------------------
def test_adding_constraints_stacks_everything():
    a = count_queries((2, 2), [[0], [1, 2]], names=["a0", "a1"], counts=[1, 2], scopes=[None, {4}])
    b = count_queries((2, 2), [[3]], names=["b0"], counts=[0], scopes=[{5}])
    c = a + b
    assert np.array_equal(_dense(c), np.vstack([_dense(a), _dense(b)]))
    assert c.names == ("a0", "a1", "b0") and c.counts.tolist() == [1, 2, 0]
    assert c.scopes == (None, frozenset({4}), frozenset({5})) and c.structure is None
    assert c.shape == (2, 2)
    free = count_queries((2, 2), [[0]], names=["f"]) + count_queries((2, 2), [[1]], names=["g"])
    assert free.counts is None and free.names == ("f", "g")
    assert (count_queries((2, 2), [[0]]).__add__(3)) is NotImplemented
    with pytest.raises(TypeError):
        count_queries((2, 2), [[0]]) + 3
    with pytest.raises(ValueError, match=exactly("cannot combine constraints over (2, 2) and (4,)")):
        a + count_queries((4,), [[0]], names=["z"])
    with pytest.raises(ValueError, match=exactly("combine constraints that both give their counts, or neither")):
        a + count_queries((2, 2), [[0]], names=["z"])
    with pytest.raises(ValueError, match=exactly("combine constraints that both give their counts, or neither")):
        count_queries((2, 2), [[0]], names=["z"]) + a
    with pytest.raises(ValueError, match=exactly("names must be distinct")):
        a + a


def test_subset_keeps_the_rows_names_counts_and_scopes():
    c = count_queries((4,), [[0], [1, 2], [3], [0, 3]], names=["w", "x", "y", "z"], counts=[1, 2, 3, 4],
                      scopes=[None, {1}, {2}, None])
    s = c.subset([3, 1])
    assert np.array_equal(_dense(s), _dense(c)[[3, 1]])
    assert s.names == ("z", "x") and s.counts.tolist() == [4, 2] and s.scopes == (None, frozenset({1}))
    assert s.structure is None
    assert count_queries((4,), [[0], [1]]).subset(np.array([1])).counts is None
    assert c.subset(np.array([2], dtype=np.uint8)).names == ("y",)


@pytest.mark.parametrize("rows, error, message", [
    ([True], TypeError, "rows must be an array of integer indices, got dtype bool"),
    ([1.0], TypeError, "rows must be an array of integer indices, got dtype float64"),
    ([-1], ValueError, "rows must hold indices in [0, 1], got values in [-1, -1]"),
    ([0, 2], ValueError, "rows must hold indices in [0, 1], got values in [0, 2]"),
    ([], ValueError, "rows must name at least one query"),
])
def test_subset_rows_are_refused_by_name(rows, error, message):
    with pytest.raises(error, match=exactly(message)):
        count_queries((4,), [[0], [1]]).subset(rows)


# -- marginals ------------------------------------------------------------------------------------
def _marginal_oracle(shape, subsets):
    coords = _cells(shape)
    rows, names = [], []
    for sub in subsets:
        for combo in itertools.product(*[range(shape[a]) for a in sub]):
            rows.append(np.all(coords[:, list(sub)] == np.array(combo, dtype=np.int64), axis=1).astype(float))
            names.append(",".join(f"A{a}={v}" for a, v in zip(sub, combo)) or "total")
    return np.array(rows), tuple(names)


@pytest.mark.parametrize("shape, axes, subsets", [
    ((2, 3), (0,), [(0,)]),
    ((2, 3), (1, 0), [(0, 1)]),
    ((2, 3, 2), [(2, 0), (1,)], [(0, 2), (1,)]),
    ((2, 3, 2), ((1,), (0, 2)), [(1,), (0, 2)]),
    ((3, 2), [()], [()]),
])
def test_marginals_against_the_definition(shape, axes, subsets):
    c = marginals(shape, axes)
    dense, names = _marginal_oracle(shape, subsets)
    assert np.array_equal(_dense(c), dense)
    assert c.names == names
    assert c.structure == ("marginals", tuple(subsets))
    assert repr(c) == f"<Constraints: {len(names)} marginals count queries over {shape}>"
    assert c.counts is None


def test_marginal_counts_and_names():
    c = marginals((2, 2), [(0,), (1,)], counts=[3, 1, 2, 2])
    assert c.names == ("A0=0", "A0=1", "A1=0", "A1=1") and c.counts.tolist() == [3, 1, 2, 2]
    assert marginals((2, 2), [()]).names == ("total",)


@pytest.mark.parametrize("axes, shown", [((0, 2), "(0, 2)"), ((0, 0), "(0, 0)"), ((-1,), "(-1,)"), ([(1,), (1, 1)], "(1, 1)"),
                                         ((5,), "(5,)")])
def test_marginal_axes_are_refused_by_name(axes, shown):
    with pytest.raises(ValueError, match=exactly(f"marginal axes must be distinct attribute indices in 0..1, got {shown}")):
        marginals((2, 3), axes)


def test_no_marginal_is_refused():
    with pytest.raises(ValueError, match=exactly("axes must name at least one marginal")):
        marginals((2, 3), [])


# -- rectangles -----------------------------------------------------------------------------------
def _box_oracle(shape, lo, hi):
    coords = _cells(shape)
    return np.array([np.all((coords >= np.atleast_1d(a)) & (coords <= np.atleast_1d(b)), axis=1) for a, b in zip(lo, hi)], dtype=float)


def test_rectangles_in_two_dimensions():
    lo, hi = [[0, 1], [1, 0], [2, 2]], [[1, 2], [2, 0], [2, 2]]
    c = rectangles((3, 3), lo, hi, counts=[4, 2, 1])
    assert np.array_equal(_dense(c), _box_oracle((3, 3), lo, hi))
    assert c.names == ("[0..1×1..2]", "[1..2×0..0]", "[2..2×2..2]")
    assert c.counts.tolist() == [4, 2, 1]
    kind, box_lo, box_hi = c.structure
    assert kind == "rectangles" and box_lo.tolist() == lo and box_hi.tolist() == hi
    assert repr(c) == "<Constraints: 3 rectangles count queries over (3, 3)>"


@pytest.mark.parametrize("lo, hi", [([1, 0], [3, 5]), ([[1], [0]], [[3], [5]])])
def test_rectangles_in_one_dimension_take_either_shape(lo, hi):
    c = rectangles((6,), lo, hi)
    assert np.array_equal(_dense(c), _box_oracle((6,), [1, 0], [3, 5]))
    assert c.names == ("[1..3]", "[0..5]")
    assert c.structure[1].tolist() == [[1], [0]] and c.structure[2].tolist() == [[3], [5]]


def test_rectangles_are_refused_by_name():
    with pytest.raises(ValueError, match=exactly("lo and hi must both have shape (m, 2) for domain (4, 4), got (2,) and (2,)")):
        rectangles((4, 4), [1, 2], [2, 3])
    with pytest.raises(TypeError, match="^lo must be an array, could not convert it: "):
        rectangles((4, 4), [[0, 1], [2]], [[1, 1], [2, 2]])
    with pytest.raises(TypeError, match="^hi must be an array, could not convert it: "):
        rectangles((4, 4), [[0, 1], [2, 2]], [[1, 1], [2]])


# -- the known total ------------------------------------------------------------------------------
def test_known_total():
    c = known_total((2, 3), count=5)
    assert _dense(c).tolist() == [[1.0] * 6]
    assert c.names == ("total",) and c.counts.tolist() == [5]
    assert c.structure == ("marginals", ((),))
    assert repr(c) == "<Constraints: 1 marginals count queries over (2, 3)>"
    assert known_total((4,)).counts is None
