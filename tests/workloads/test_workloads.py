import itertools
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from blowfish_te import workloads as wl
from blowfish_te._graph import signed_incidence
from blowfish_te._grid import offset_pairs
from blowfish_te.testing import dense_boxes
from blowfish_te.workloads.base import Workload

pytestmark = pytest.mark.core


def twins():
    """(implicit workload, dense twin built from the definition) on small domains."""
    rng = np.random.default_rng(7)
    k = 9
    lo, hi = np.sort(rng.integers(0, k, (2, 6)), axis=0)
    yield wl.identity(k), np.eye(k)
    yield wl.prefix(k), np.tril(np.ones((k, k)))
    yield wl.all_ranges(k), np.array([[a <= j <= b for j in range(k)] for a in range(k) for b in range(a, k)], float)
    yield wl.ranges(k, lo, hi), np.array([[a <= j <= b for j in range(k)] for a, b in zip(lo, hi)], float)
    rr = wl.random_ranges(k, 12, rng=1)
    yield rr, dense_boxes((k,), rr.lo, rr.hi)
    rect = wl.random_rects((4, 5), 7, rng=2)
    yield rect, dense_boxes((4, 5), rect.lo, rect.hi)
    yield wl.rects((3, 3), [[0, 0], [1, 2]], [[2, 1], [1, 2]]), dense_boxes((3, 3), [[0, 0], [1, 2]], [[2, 1], [1, 2]])
    yield wl.identity((2, 3)), np.eye(6)
    yield wl.prefix((3, 2)), np.array(
        [[(i <= a) and (j <= b) for i in range(3) for j in range(2)] for a in range(3) for b in range(2)], float
    )
    coords = np.indices((2, 3, 2)).reshape(3, -1)
    marg = [coords[0] == i for i in range(2)] + [coords[2] == j for j in range(2)] + [np.ones(12, bool)]
    yield wl.marginals((2, 3, 2), [(0,), (2,), ()]), np.array(marg, float)
    mat = rng.integers(-2, 3, (5, 7)).astype(float)
    yield wl.from_matrix(mat), mat
    yield wl.from_matrix(sp.csr_array(mat)), mat


def weighted_twins():
    rng = np.random.default_rng(11)
    rr = wl.random_ranges(9, 12, rng=3)
    weights = rng.uniform(0.2, 3, 12)
    yield wl.Boxes((9,), rr.lo, rr.hi, weights=weights), dense_boxes((9,), rr.lo, rr.hi) * weights[:, None]
    rect = wl.random_rects((4, 5), 7, rng=4)
    weights = rng.uniform(0, 2, 7)
    yield wl.Boxes((4, 5), rect.lo, rect.hi, weights=weights), dense_boxes((4, 5), rect.lo, rect.hi) * weights[:, None]


TWINS = list(twins()) + list(weighted_twins())
IDS = [w.name for w, _ in TWINS]


@pytest.mark.parametrize("w, d", TWINS, ids=IDS)
def test_implicit_workloads_equal_their_dense_twins(w, d):
    rng = np.random.default_rng(0)
    m, k = d.shape
    assert w.shape == (m, k)
    assert np.allclose(w.dense(), d)
    x = rng.integers(0, 9, k)
    y = rng.normal(size=m)
    assert np.allclose(w @ x, d @ x)
    assert np.allclose(w.T @ y, d.T @ y)
    xs = rng.normal(size=(k, 3))
    ys = rng.normal(size=(m, 3))
    assert np.allclose(w.matmat(xs), d @ xs)
    assert np.allclose(w.rmatmat(ys), d.T @ ys)
    assert np.allclose(w.gram().matmat(xs), d.T @ d @ xs)
    assert np.allclose(w.gram_matrix(), d.T @ d)
    assert np.allclose(w.tosparse().toarray(), d)
    cells = rng.integers(0, k, 4)
    assert np.allclose(w.columns(cells), d[:, cells])
    assert np.isclose(w.frobenius_sq(), (d**2).sum())
    assert w.is_binary == bool(np.isin(d, (0, 1)).all())


@pytest.mark.parametrize("w, d", TWINS, ids=IDS)
def test_integer_products_are_exact(w, d):
    x = np.random.default_rng(1).integers(0, 10**9, w.size)
    if w.is_binary:
        assert (w @ x).dtype.kind == "i"
    if np.array_equal(d, np.round(d)):  # integer entries: exact in float64 up to 2**53
        assert np.array_equal(np.asarray(w @ x, dtype=np.float64), d @ x)
    else:
        assert np.allclose(w @ x, d @ x, rtol=1e-12)


@pytest.mark.parametrize("w, d", TWINS, ids=IDS)
@pytest.mark.parametrize("norm", ["l1", "l2sq"])
def test_difference_norms_and_column_diameter_match_brute_force(w, d, norm):
    rng = np.random.default_rng(2)
    k = w.size
    padded = np.vstack([d.T, np.zeros(d.shape[0])])  # row K is the zero column of ⊥
    u = rng.integers(0, k, 60)
    v = rng.integers(0, k + 1, 60)
    diff = padded[u] - padded[v]
    expected = np.abs(diff).sum(1) if norm == "l1" else (diff**2).sum(1)
    assert np.allclose(w.difference_norms(u, v, norm), expected)
    assert np.allclose(w.column_norms(norm), np.abs(d).sum(0) if norm == "l1" else (d**2).sum(0))
    pairs = list(itertools.combinations(range(k), 2))
    diameter = max(np.abs(d[:, i] - d[:, j]).sum() for i, j in pairs)
    assert w.column_diameter() == pytest.approx(diameter)
    subset = rng.choice(k, size=4, replace=False)
    sub_diameter = max(np.abs(d[:, i] - d[:, j]).sum() for i, j in itertools.combinations(subset, 2))
    assert w.column_diameter(subset) == pytest.approx(sub_diameter)


@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
    st.integers(1, 12),
    st.integers(0, 2**32 - 1),
)
def test_box_column_norms_on_random_boxes_both_paths(shape, m, seed):
    w = wl.random_rects(shape, m, rng=seed)
    d = dense_boxes(shape, w.lo, w.hi)
    rng = np.random.default_rng(seed)
    k = w.size
    u, v = rng.integers(0, k, (2, 40))
    expected = np.abs(d[:, u] - d[:, v]).sum(0)
    assert np.allclose(w.difference_norms(u, v), expected)
    assert np.allclose(w._pair_norms(u, v), expected)  # the per-pair path, whatever the cost model picks
    same_offset = np.arange(k)
    assert np.allclose(w.difference_norms(same_offset, same_offset), 0)


def test_box_per_offset_and_direct_paths_agree_at_scale():
    w = wl.random_ranges(3000, 400, rng=3)
    rng = np.random.default_rng(4)
    u = rng.integers(0, 2990, 5000)
    v = u + rng.integers(1, 10, 5000)  # few offsets: the per-offset path
    direct = (w._inside(u[:, None]) != w._inside(v[:, None])).sum(1)
    assert np.array_equal(w.difference_norms(u, v), direct)


def test_all_ranges_closed_forms():
    k = 30
    w = wl.all_ranges(k)
    u = np.arange(k)
    assert np.array_equal(w.column_norms(), (u + 1) * (k - u))
    g = w.gram_matrix()
    assert g[3, 10] == (3 + 1) * (k - 10)
    assert w.column_diameter() == (k + 1) ** 2 // 4


def test_all_ranges_stays_implicit():
    w = wl.all_ranges(2048)  # 2.1 million queries: a dense matrix would need 34 GB
    x = np.ones(2048)
    tracemalloc.start()
    answers = w @ x
    back = w.T @ np.ones(w.shape[0])
    gram = w.gram() @ x
    norms = w.column_norms()
    diameter = w.column_diameter(np.arange(0, 2048, 7))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 300 * 2**20
    assert answers.max() == 2048 and back[0] == 2048 and norms[0] == 2048
    assert gram[0] == 2048 * 2049 / 2  # Σ_v (min(0, v) + 1)(k - max(0, v))
    assert diameter > 0
    with pytest.raises(ValueError, match="dense"):
        w.dense()


def test_random_workloads_are_reproducible_and_sorted():
    a = wl.random_ranges(100, 50, rng=5)
    b = wl.random_ranges(100, 50, rng=np.random.default_rng(5))
    assert np.array_equal(a.lo, b.lo) and np.array_equal(a.hi, b.hi)
    assert (a.lo <= a.hi).all()
    c = wl.random_rects((10, 20), 30, rng=6)
    assert np.array_equal(c.lo, wl.random_rects((10, 20), 30, rng=6).lo)
    assert (c.lo <= c.hi).all() and (c.hi < np.array([10, 20])).all()


def test_random_range_endpoints_are_uniform():
    # Both endpoints uniform then sorted: P(lo = 0) = (2k - 1) / k², for every k.
    k, m = 10, 200_000
    w = wl.random_ranges(k, m, rng=8)
    p = (2 * k - 1) / k**2
    freq = np.mean(w.lo[:, 0] == 0)
    assert abs(freq - p) < 5 * np.sqrt(p * (1 - p) / m)


@pytest.mark.parametrize("k", [2, 9, 40])
def test_times_incidence_matches_the_dense_product(k):
    rng = np.random.default_rng(k)
    w = wl.random_ranges(k, 15, rng=rng)
    child = np.arange(k)
    parent = np.concatenate([rng.integers(0, k + 1, k - 1), [k]])  # any edges, ⊥ allowed
    parent = np.where(parent == child, k, parent)
    p = signed_incidence(child, parent, k).toarray()
    expected = w.dense() @ p
    assert np.allclose(w.times_incidence(child, parent).toarray(), expected)
    assert np.allclose(Workload.times_incidence(w, child, parent).toarray(), expected)


def test_as_workload_wraps_matrices_and_refuses_other_things():
    assert isinstance(wl.as_workload(np.eye(3)), wl.MatrixWorkload)
    assert isinstance(wl.as_workload([[1, 0], [0, 1]]), wl.MatrixWorkload)
    with pytest.raises(TypeError, match="workload"):
        wl.as_workload("prefix")


@pytest.mark.parametrize(
    "build, exc, words",
    [
        (lambda: wl.ranges(5, [3], [2]), ValueError, "lo <= hi"),
        (lambda: wl.ranges(5, [0], [5]), ValueError, "box 0"),
        (lambda: wl.ranges(5, [-1], [2]), ValueError, "box 0"),
        (lambda: wl.ranges(5, [0.5], [2]), TypeError, "lo"),
        (lambda: wl.ranges(5, [], []), ValueError, "at least one query"),
        (lambda: wl.rects((3, 3), [[0, 0]], [[1, 1, 1]]), ValueError, "shape"),
        (lambda: wl.random_ranges(5, 0), ValueError, "m"),
        (lambda: wl.random_ranges(0, 3), ValueError, "k"),
        (lambda: wl.random_ranges(5, 3, rng="seed"), TypeError, "rng"),
        (lambda: wl.marginals((2, 3), [(0, 0)]), ValueError, "repeats"),
        (lambda: wl.marginals((2, 3), [(2,)]), ValueError, "axes"),
        (lambda: wl.from_matrix(np.array([[np.nan, 1]])), ValueError, "NaN"),
        (lambda: wl.from_matrix(np.zeros((0, 3))), ValueError, "at least one"),
        (lambda: wl.from_matrix(np.ones(3)), ValueError, "2-D"),
        (lambda: wl.from_matrix(np.ones((2, 4)), domain=(3,)), ValueError, "columns"),
        (lambda: wl.identity(()), ValueError, "shape"),
        (lambda: wl.prefix(4).difference_norms([0], [9]), ValueError, "v"),
        (lambda: wl.prefix(4).difference_norms([0, 1], [2]), ValueError, "same length"),
        (lambda: wl.prefix(4).column_norms("l3"), ValueError, "norm"),
        (lambda: wl.prefix(4) @ np.ones(5), ValueError, r"matvec of prefix\(4\) needs a vector of 4 entries, one per cell; got shape \(5,\)"),
        (lambda: wl.random_ranges(6, 3, rng=0).rmatvec(np.ones(6)), ValueError, "vector of 3 entries, one per query"),
        (lambda: wl.prefix(4).matmat(np.ones((3, 2))), ValueError, r"\(4, n\) block, one row per cell"),
        (lambda: wl.prefix(4).rmatmat(np.ones(4)), ValueError, r"rmatmat .* got shape \(4,\)"),
    ],
)
def test_bad_workload_arguments_are_named(build, exc, words):
    with pytest.raises(exc, match=words):
        build()


def test_from_matrix_never_shares_the_callers_arrays():
    """Review finding: a shared sparse matrix let later edits bypass the sensitivity."""
    a = sp.csr_array(np.array([[1.0, 0, 0], [0, 1, 1]]))
    a.data[0] = 0.0
    w = wl.from_matrix(a)
    assert a.nnz == 3  # the caller's matrix is not pruned in place
    b = sp.csr_array(np.array([[1.0, 1, 0], [0, 1, 1]]))
    w = wl.from_matrix(b)
    b.data[:] = 100.0
    assert np.array_equal(w @ np.array([1, 0, 0]), [1, 0])
    with pytest.raises(ValueError):
        w.matrix.data[0] = 5.0
    with pytest.raises(TypeError, match="real"):
        wl.from_matrix(sp.csr_array(np.array([[1 + 1j, 0]])))


def test_marginal_axes_of_the_wrong_form():
    with pytest.raises(TypeError, match="axes"):
        wl.marginals((2, 3), [0, 1])
    with pytest.raises(TypeError, match="axes"):
        wl.marginals((2, 3), 0)


def test_dense_does_not_build_a_k_by_k_identity():
    w = wl.random_ranges(200_000, 3, rng=0)
    tracemalloc.start()
    d = w.dense()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100 * 2**20
    assert np.array_equal(d.sum(1), w.hi[:, 0] - w.lo[:, 0] + 1)


def test_float32_inputs_are_summed_in_float64():
    assert wl.prefix(10**6).matvec(np.full(10**6, 100, np.float32))[-1] == 1e8
    assert wl.all_ranges(2000).matvec(np.full(2000, 0.1, np.float32))[0] == pytest.approx(0.1, rel=1e-7)


def test_all_ranges_times_incidence_uses_the_endpoints():
    k = 1024
    child, parent = np.arange(k - 1), np.arange(1, k)
    w_g = wl.all_ranges(k).times_incidence(child, parent)
    assert w_g.nnz == k * (k + 1) - 2 * k  # two non-zeros per range, one for those touching an end
    small = wl.all_ranges(9)
    p = signed_incidence(np.arange(8), np.arange(1, 9), 9).toarray()
    assert np.allclose(small.times_incidence(np.arange(8), np.arange(1, 9)).toarray(), small.dense() @ p)


def test_empty_pair_lists():
    assert wl.prefix(4).difference_norms([], []).size == 0
    assert wl.prefix(4).column_diameter([]) == 0


@pytest.mark.parametrize("kind", ["shared v", "shared u", "one offset", "scattered"])
def test_box_pair_groupings_against_the_dense_twin(kind, monkeypatch):
    """Each grouping of pairs (by endpoint, by offset, none) gives exact column-difference norms."""
    shape = (30, 30)
    w = wl.random_rects(shape, 50, rng=9)
    d = dense_boxes(shape, w.lo, w.hi)
    k = w.size
    rng = np.random.default_rng(1)
    centre = 437
    others = np.delete(np.arange(k), centre)
    u, v = {
        "shared v": (others, np.full(others.size, centre)),
        "shared u": (np.full(others.size, centre), others),
        "one offset": offset_pairs(shape, (1, 1)),
        "scattered": tuple(rng.integers(0, k, (2, 20))),
    }[kind]
    used = []
    monkeypatch.setattr(w, "_both_with", lambda cell, wts, f=w._both_with: used.append("endpoint") or f(cell, wts))
    monkeypatch.setattr(w, "_both", lambda off, wts, f=w._both: used.append("offset") or f(off, wts))
    assert np.array_equal(w.difference_norms(u, v), np.abs(d[:, u] - d[:, v]).sum(0))
    expected_path = {"shared v": ["endpoint"], "shared u": ["endpoint"], "one offset": ["offset"], "scattered": []}[kind]
    assert used == expected_path


@given(st.integers(1, 9), st.integers(2, 12), st.integers(0, 2**32 - 1))
def test_branch_and_bound_diameter_against_all_pairs(m, k, seed):
    rng = np.random.default_rng(seed)
    mat = rng.integers(-3, 4, (m, k)).astype(float)
    cells = np.unique(rng.integers(0, k, rng.integers(1, k + 1)))
    sub = mat[:, cells]
    expected = max((np.abs(sub[:, i] - sub[:, j]).sum() for i, j in itertools.combinations(range(cells.size), 2)), default=0)
    assert Workload.column_diameter(wl.from_matrix(mat), cells) == expected  # the generic path


@given(st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_all_ranges_subset_diameter_closed_form(k, seed):
    cells = np.unique(np.random.default_rng(seed).integers(0, k, 1 + k // 2))
    f = lambda a, b: (b - a) * (a + 1 + k - b)  # noqa: E731  ranges holding exactly one of a < b
    expected = max((f(a, b) for a, b in itertools.combinations(cells, 2)), default=0)
    assert wl.all_ranges(k).column_diameter(cells) == expected


@pytest.mark.parametrize("base", [wl.random_rects((12, 10), 30, rng=5), wl.prefix(40),
                                  wl.Boxes((9, 7), [[0, 0], [3, 2]], [[8, 6], [5, 2]], weights=[2.0, 0.5])], ids=repr)
def test_bucket_views_and_probes_equal_their_dense_twins(base):
    """W E (partition view) and an evenly spaced probe of it, by every path, against dense algebra."""
    from blowfish_te.strategies.base import sparse_rows

    labels = np.random.default_rng(0).integers(0, 9, base.size)
    labels = np.unique(labels, return_inverse=True)[1]
    view = wl.BucketWorkload(base, labels)
    spread = np.zeros((base.size, labels.max() + 1))
    spread[np.arange(base.size), labels] = 1.0 / np.bincount(labels)[labels]
    dense = Workload.dense(base) @ spread
    np.testing.assert_allclose(view.dense(), dense, atol=1e-12)
    assert view.frobenius_sq() == pytest.approx((dense**2).sum())
    np.testing.assert_allclose(view.gram_matrix(), dense.T @ dense, atol=1e-9)
    block = np.random.default_rng(1).normal(size=(view.size, 3))  # the optimisers' Gram operator, dense and implicit
    np.testing.assert_allclose(view.gram().matmat(block), dense.T @ (dense @ block), atol=1e-9)
    np.testing.assert_allclose(super(wl.BucketWorkload, view).gram().matmat(block), dense.T @ (dense @ block), atol=1e-9)
    _assert_bucket_norms(view, dense)
    rows = sparse_rows(view)
    if rows is not None:
        np.testing.assert_allclose(rows.toarray(), dense, atol=1e-12)
    probe = wl.evenly_spaced_queries(view, 7)
    picked = np.unique(np.linspace(0, base.num_queries - 1, 7).round().astype(int))
    np.testing.assert_allclose(probe.dense(), dense[picked], atol=1e-12)
    assert isinstance(base, wl.Boxes) and isinstance(probe.base, wl.Boxes)  # boxes stay boxes: closed forms apply



@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=3), seed=st.integers(0, 2**16), weighted=st.booleans())
def test_buckets_that_are_boxes_are_multiplied_from_overlaps(shape, seed, weighted):
    """When every bucket is a box (a tree's leaves), W E is formed from the per-axis overlaps of
    the queries' boxes with the buckets: equal to the dense product, and so are ‖W E‖_F², the Gram
    matrix and the sparse rows; a bucket that is not a box sends every product the general way."""
    from blowfish_te.mechanisms.privtree import box_labels, privtree_leaves
    from blowfish_te.strategies.base import sparse_rows

    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    base = wl.random_rects(shape, 6, rng=rng) if len(shape) > 1 else wl.random_ranges(shape[0], 6, rng=rng)
    if weighted:
        base = wl.Boxes(shape, base.lo, base.hi, weights=rng.uniform(0.1, 2, base.num_queries))
    lo, hi = privtree_leaves(rng.integers(0, 30, shape), 0.3, rng)
    labels = box_labels(shape, lo, hi)
    view = wl.BucketWorkload(base, labels)
    spread = np.zeros((base.size, labels.max() + 1))
    spread[np.arange(base.size), labels] = 1.0 / np.bincount(labels)[labels]
    dense = Workload.dense(base) @ spread
    assert view.bucket_boxes is not None
    np.testing.assert_allclose(view.overlap_matrix(), dense, atol=1e-12)
    assert view.frobenius_sq() == pytest.approx((dense**2).sum())
    np.testing.assert_allclose(view.gram_matrix(), dense.T @ dense, atol=1e-9)
    np.testing.assert_allclose(sparse_rows(view).toarray(), dense, atol=1e-12)
    _assert_bucket_norms(view, dense)
    if base.size > 2:
        mixed = labels.copy()
        mixed[[0, base.size - 1]] = labels.max() + 1  # two opposite corners as one bucket
        mixed = np.unique(mixed, return_inverse=True)[1]
        other = wl.BucketWorkload(base, mixed)
        assert other.bucket_boxes is None and other.overlap_matrix() is None


def _assert_bucket_norms(view, dense):
    """Column and column-difference norms of W E (read from its Gram matrix or its overlaps, with a
    zero column for ⊥), and its Gram matrix built by either product, against the dense W E."""
    import blowfish_te.workloads.buckets as buckets

    m = view.size
    rng = np.random.default_rng(m)
    u, v = rng.integers(0, m, 40), rng.integers(0, m + 1, 40)
    padded = np.concatenate([dense, np.zeros((dense.shape[0], 1))], axis=1)
    diff = padded[:, u] - padded[:, v]
    np.testing.assert_allclose(view.difference_norms(u, v, "l1"), np.abs(diff).sum(0), atol=1e-9)
    np.testing.assert_allclose(view.difference_norms(u, v, "l2sq"), (diff**2).sum(0), atol=1e-9)
    np.testing.assert_allclose(view.column_norms("l2sq"), (dense**2).sum(0), atol=1e-9)
    gram = dense.T @ dense
    assert view.disjoint_queries() == (not np.any(np.abs(gram - np.diag(np.diag(gram))) > 1e-12))
    for cost in (0, 10**12):  # Eᵀ Wᵀ (W E), and the dense product
        fresh = wl.BucketWorkload(view.base, view.labels)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(buckets, "TRANSPOSE_COST", cost)
            np.testing.assert_allclose(fresh.gram_matrix(), dense.T @ dense, atol=1e-9)


@pytest.mark.parametrize("pairs", [1, 7, 40, 10**6])
def test_bucket_frobenius_over_groups_of_boxes_equals_the_dense_one(pairs, monkeypatch):
    """‖W E‖_F² summed over groups of boxes (however the volume limit cuts them) is the dense one."""
    import blowfish_te.workloads.buckets as buckets

    base = wl.Boxes((9, 7), [[0, 0], [3, 2], [1, 1], [4, 0]], [[8, 6], [5, 2], [1, 5], [4, 6]], weights=[2.0, 0.5, 1.0, 3.0])
    labels = np.unique(np.random.default_rng(1).integers(0, 6, base.size), return_inverse=True)[1]
    spread = np.zeros((base.size, labels.max() + 1))
    spread[np.arange(base.size), labels] = 1.0 / np.bincount(labels)[labels]
    monkeypatch.setattr(buckets, "SPARSE_PAIRS", pairs)
    assert wl.BucketWorkload(base, labels).frobenius_sq() == pytest.approx(((Workload.dense(base) @ spread) ** 2).sum())

# -- ramped prefixes and stacked workloads, against their dense twins ----------------------------


def _random_windows(k: int, seed: int):
    """Sorted disjoint windows [start, start + width - 1] in [0, k - 1]."""
    gen = np.random.default_rng(seed)
    starts, widths, position = [], [], int(gen.integers(0, 3))
    while position < k:
        width = int(gen.integers(1, min(6, k - position) + 1))
        starts.append(position)
        widths.append(width)
        position += width + int(gen.integers(0, 4))
    return np.array(starts), np.array(widths)


def _dense_ramps(k, starts, widths):
    averages = np.zeros((starts.size, k))
    for i, (a, w) in enumerate(zip(starts, widths)):
        averages[i, a : a + w] = 1.0 / w
    return averages @ np.tril(np.ones((k, k)))  # the mean of w cumulative counts


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 25), seed=st.integers(0, 2**31))
def test_ramped_prefixes_and_stacks_match_their_dense_twins(k, seed):

    starts, widths = _random_windows(k, seed)
    ramps = wl.RampedPrefixes(k, starts, widths)
    dense = _dense_ramps(k, starts, widths)
    stacked = wl.Stacked([ramps, wl.prefix(k)], [0.5, 3.0])
    stacked_dense = np.vstack([0.5 * dense, 3.0 * np.tril(np.ones((k, k)))])
    u, v = (a.ravel() for a in np.meshgrid(np.arange(k), np.arange(k + 1)))  # v = K is ⊥
    for workload, matrix in ((ramps, dense), (stacked, stacked_dense)):
        assert np.allclose(workload.dense(), matrix)
        assert np.allclose(workload.rmatmat(np.eye(matrix.shape[0])), matrix.T)
        assert np.allclose(workload.tosparse().toarray(), matrix)
        padded = np.hstack([matrix, np.zeros((matrix.shape[0], 1))])
        diff = padded[:, u] - padded[:, v]
        assert np.allclose(workload.difference_norms(u, v, "l1"), np.abs(diff).sum(0))
        assert np.allclose(workload.difference_norms(u, v, "l2sq"), (diff**2).sum(0))
        keep = u != v
        product = workload.times_incidence(u[keep], v[keep]).toarray()
        assert np.allclose(product, matrix @ signed_incidence(u[keep], v[keep], k).toarray())
    assert ramps.is_binary == bool(np.all(widths == 1))


def test_ramped_prefixes_and_stacks_are_fingerprinted_by_content():
    ramps = wl.RampedPrefixes(10, [1, 4], [2, 3])
    assert ramps.fingerprint() == wl.RampedPrefixes(10, [1, 4], [2, 3]).fingerprint()
    assert ramps.fingerprint() != wl.RampedPrefixes(10, [1, 4], [2, 2]).fingerprint()
    assert ramps.fingerprint() != wl.RampedPrefixes(11, [1, 4], [2, 3]).fingerprint()
    stacked = wl.Stacked([ramps, wl.prefix(10)], [0.5, 3.0])
    assert stacked.fingerprint() == wl.Stacked([wl.RampedPrefixes(10, [1, 4], [2, 3]), wl.prefix(10)], [0.5, 3.0]).fingerprint()
    assert stacked.fingerprint() != wl.Stacked([ramps, wl.prefix(10)], [0.5, 2.0]).fingerprint()
    assert stacked.fingerprint() != wl.Stacked([wl.prefix(10), ramps], [3.0, 0.5]).fingerprint()  # rows in order

    class Bare(wl.Workload):  # products only, no fingerprint
        def _matmat(self, x):
            return np.asarray(x, dtype=np.float64)

        def _rmatmat(self, y):
            return np.asarray(y, dtype=np.float64)

    assert wl.Stacked([wl.prefix(10), Bare((10,), 10, "bare")]).fingerprint() is None


def test_ramped_prefixes_and_stacks_refuse_bad_windows_and_parts():
    with pytest.raises(ValueError, match="disjoint"):
        wl.RampedPrefixes(10, [0, 2], [3, 2])
    with pytest.raises(ValueError, match="width"):
        wl.RampedPrefixes(10, [8], [3])
    with pytest.raises(ValueError, match="same length"):
        wl.RampedPrefixes(10, [0, 4], [2])
    with pytest.raises(ValueError, match="domain"):
        wl.Stacked([wl.prefix(4), wl.prefix(5)])
    with pytest.raises(ValueError, match="weights"):
        wl.Stacked([wl.prefix(4)], [0.0])
    with pytest.raises(TypeError, match="parts"):
        wl.Stacked([np.eye(3)])


@given(st.integers(1, 3), st.integers(1, 12), st.integers(0, 2**32 - 1), st.booleans())
def test_box_frobenius_norm_from_the_boxes_equals_the_dense_one(ndim, m, seed, weighted):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 6, ndim))
    corners = rng.integers(0, np.array(shape), size=(2, m, ndim))
    lo, hi = corners.min(axis=0), corners.max(axis=0)
    weights = rng.uniform(0, 3, m) if weighted else None
    boxes = wl.Boxes(shape, lo, hi, weights=weights)
    dense = dense_boxes(shape, lo, hi) * (1 if weights is None else weights[:, None])
    assert boxes.frobenius_sq() == pytest.approx(float((dense**2).sum()), rel=1e-12)


def test_dpbench_ranges_draw_uniform_sides_then_uniform_corners():
    """Every (lo, hi) of an axis of k cells has probability 1/k · 1/(k - s + 1), s = hi - lo + 1
    (DPBench's RandomRange); checked per box on a 2-D grid, axes independent, within 5 standard
    errors of the exact probabilities."""
    shape, m = (4, 3), 60_000
    w = wl.dpbench_ranges(shape, m, rng=5)
    assert w.shape == (m, 12) and w.is_binary and ((w.lo >= 0) & (w.hi < shape) & (w.lo <= w.hi)).all()
    for axis, k in enumerate(shape):
        lo, hi = w.lo[:, axis], w.hi[:, axis]
        for a in range(k):
            for b in range(a, k):
                p = 1 / k / (k - (b - a + 1) + 1)
                seen = np.mean((lo == a) & (hi == b))
                assert abs(seen - p) <= 5 * np.sqrt(p * (1 - p) / m), (axis, a, b)
    both = np.mean((w.lo[:, 0] == 0) & (w.lo[:, 1] == 0))  # independence: P(both corners at 0)
    p0 = np.mean(w.lo[:, 0] == 0) * np.mean(w.lo[:, 1] == 0)
    assert abs(both - p0) <= 5 * np.sqrt(p0 / m)
    area = (w.hi - w.lo + 1).prod(axis=1)
    assert abs(area.mean() - np.prod([(k + 1) / 2 for k in shape])) <= 5 * area.std() / np.sqrt(m)


def test_dpbench_ranges_are_seeded_and_named_by_spec():
    assert np.array_equal(wl.dpbench_ranges(50, 10, rng=3).lo, wl.from_spec("dpbench_ranges:10", 50, seed=3).lo)
    assert wl.from_spec({"kind": "dpbench_ranges", "queries": 7, "seed": 1}, (8, 8)).shape == (7, 64)
    with pytest.raises(ValueError, match="m"):
        wl.dpbench_ranges((8, 8), 0)
