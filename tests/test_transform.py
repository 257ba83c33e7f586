import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blowfish_te import CyclicPolicyError, policies, transform
from blowfish_te import workloads as wl
from blowfish_te._graph import signed_incidence
from blowfish_te.transform import TreeTransform

from tests.helpers import forests

pytestmark = pytest.mark.core


def _policy(k, edges):
    return policies.from_edges(k, np.array(edges, dtype=int).reshape(-1, 2))


def _workloads(k, seed):
    rng = np.random.default_rng(seed)
    yield wl.random_ranges(k, 7, rng=rng)
    yield wl.prefix(k)
    yield wl.all_ranges(k)
    yield wl.from_matrix(rng.integers(-3, 4, (4, k)))


@given(forests(max_cells=9), st.integers(0, 2**32 - 1))
def test_workload_answers_are_preserved_exactly(case, seed):
    """W x == W_G x_G + offset(W), in integer arithmetic, on random forests with and without ⊥."""
    k, edges = case
    tree = transform(_policy(k, edges))
    x = np.random.default_rng(seed).integers(0, 1000, k)
    x_g, totals = tree.data(x), tree.totals(x)
    assert x_g.dtype == np.int64 and (x_g >= 0).all()
    assert np.array_equal(tree.reconstruct(x_g, totals), x)
    for w in _workloads(k, seed):
        w_g = tree.workload(w) if tree.num_edges else None
        lhs = w @ x
        rhs = tree.offset(w, totals) + (w_g @ x_g if w_g is not None else 0)
        assert np.array_equal(lhs, rhs)


@pytest.mark.slow
@given(forests(max_cells=8), st.integers(0, 2**32 - 1))
def test_transformed_workload_forms_agree(case, seed):
    k, edges = case
    tree = transform(_policy(k, edges))
    if tree.num_edges == 0:
        return
    p = signed_incidence(tree.child, tree.parent, k).toarray()
    assert np.array_equal(tree.incidence().toarray(), p)
    for w in _workloads(k, seed):
        w_g = tree.workload(w)
        expected = w.dense() @ p
        assert np.allclose(w_g.dense(), expected)
        assert np.allclose(w_g.tosparse().toarray(), expected)
        y = np.random.default_rng(seed).normal(size=w.num_queries)
        assert np.allclose(w_g.T @ y, expected.T @ y)
        assert np.allclose(w_g.column_norms(), np.abs(expected).sum(0))
        assert w_g.max_abs_entry() == np.abs(expected).max()  # MWEM's Δ on x_G: never 0 for a non-zero W_G
        assert np.isclose(w_g.frobenius_sq(), (expected**2).sum())
        assert np.allclose(w_g.gram_matrix(), expected.T @ expected)
        assert w_g.structured_gram == w.structured_gram  # all ranges: P_Gᵀ (WᵀW) P_G without the rows
        assert np.allclose(w_g.gram() @ np.eye(w_g.size), expected.T @ expected)


def _labeled_trees(n):
    """Every labelled tree on n vertices, from all Prüfer sequences."""
    if n == 1:
        yield nx.empty_graph(1)
        return
    if n == 2:
        yield nx.path_graph(2)
        return
    for seq in itertools.product(range(n), repeat=n - 2):
        yield nx.from_prufer_sequence(list(seq))


@pytest.mark.slow
@pytest.mark.parametrize("vertices", [2, 3, 4, 5])
@pytest.mark.parametrize("with_bottom", [False, True])
def test_a_move_along_any_edge_changes_one_coordinate_by_one(vertices, with_bottom):
    """Exhaustive over all labelled trees: G-neighbours are unit changes of x_G."""
    k = vertices - 1 if with_bottom else vertices
    if k == 0:
        return
    rng = np.random.default_rng(vertices)
    for tree_graph in _labeled_trees(vertices):
        edges = list(tree_graph.edges())  # vertex k, if present, is ⊥
        tree = transform(_policy(k, edges))
        x = rng.integers(1, 4, k)
        x_g = tree.data(x)
        for u, v in edges:
            for a, b in ((u, v), (v, u)):
                x2 = x.copy()
                if a < k:
                    x2[a] -= 1
                if b < k:
                    x2[b] += 1
                delta = tree.data(x2) - x_g
                assert np.abs(delta).sum() == 1, (edges, a, b, delta)
                assert np.array_equal(tree.totals(x2), tree.totals(x))


def test_line_rooted_at_the_last_cell():
    k = 12
    tree = transform(policies.line(k))
    x = np.random.default_rng(0).integers(0, 9, k)
    assert np.array_equal(tree.data(x), np.cumsum(x)[:-1])
    assert np.array_equal(tree.roots, [k - 1])
    prefix_g = tree.workload(wl.prefix(k)).dense()
    assert np.array_equal(prefix_g, np.vstack([np.eye(k - 1), np.zeros(k - 1)]))
    ranges_g = tree.workload(wl.all_ranges(k)).tosparse()
    assert np.diff(ranges_g.indptr).max() == 2


@pytest.mark.parametrize("k", [2, 3, 17])
def test_the_lines_running_sums_equal_the_general_forest_transform(k):
    """The line's transform (no forest arrays) against the same edges given one by one."""
    line = transform(policies.line(k))
    general = transform(_policy(k, [(i, i + 1) for i in range(k - 1)]))
    assert line.is_line and not general.is_line
    assert np.array_equal(line.child, general.child) and np.array_equal(line.parent, general.parent)
    assert np.array_equal(line.roots, general.roots) and line.num_edges == general.num_edges
    assert np.array_equal(line.incidence().toarray(), general.incidence().toarray())
    rng = np.random.default_rng(k)
    x = rng.integers(0, 9, k)
    for ours, theirs in zip(line.data_and_totals(x), general.data_and_totals(x)):
        assert np.array_equal(ours, theirs)
    y = rng.normal(size=k - 1)
    assert np.allclose(line.reconstruct(y, [5]), general.reconstruct(y, [5]))
    for w in _workloads(k, k):
        ours, theirs = line.workload(w), general.workload(w)
        z = rng.normal(size=w.num_queries)
        assert np.allclose(ours @ y, theirs @ y) and np.allclose(ours.T @ z, theirs.T @ z)
        assert np.allclose(ours.column_norms(), theirs.column_norms())
        assert np.isclose(ours.frobenius_sq(), theirs.frobenius_sq())


def test_unbounded_is_the_identity_transform_and_discloses_nothing():
    tree = transform(policies.unbounded(6))
    x = np.arange(6)
    assert np.array_equal(tree.data(x), x)
    assert tree.roots.size == 0 and tree.totals(x).size == 0


def test_partition_discloses_block_totals():
    tree = transform(policies.partition([0, 0, 1, 1, 2]))
    x = np.array([3, 4, 5, 6, 7])
    assert dict(zip(tree.roots.tolist(), tree.totals(x).tolist())) == {1: 7, 3: 11, 4: 7}


@pytest.mark.slow
def test_transform_on_a_large_line_and_random_tree():
    k = 100_000
    x = np.random.default_rng(1).integers(0, 5, k)
    assert np.array_equal(transform(policies.line(k)).data(x), np.cumsum(x)[:-1])
    rng = np.random.default_rng(2)
    parent = (rng.random(k - 1) * np.arange(1, k)).astype(int)
    tree = transform(policies.from_edges(k, np.stack([np.arange(1, k), parent], 1)))
    x_g = tree.data(x)
    assert np.array_equal(tree.reconstruct(x_g, tree.totals(x)), x)
    # orientation and subtree sums the slow way: BFS depths from the root, deepest vertices first
    assert np.array_equal(tree.roots, [k - 1])
    depth = nx.single_source_shortest_path_length(nx.Graph(zip(range(1, k), parent)), k - 1)
    assert all(depth[int(p)] == depth[int(c)] - 1 for c, p in zip(tree.child, tree.parent))
    up = dict(zip(tree.child.tolist(), tree.parent.tolist()))
    sums = x.copy()
    for v in sorted(up, key=depth.get, reverse=True):
        sums[up[v]] += sums[v]
    assert np.array_equal(x_g, sums[tree.child])


@pytest.mark.parametrize(
    "policy",
    [policies.grid((2, 2)), policies.threshold(10, 2), policies.complete(3), policies.partition([0, 0, 0])],
    ids=lambda p: p.name,
)
def test_cyclic_policies_are_refused_with_the_tree_embedding_route_named(policy):
    """No pseudo-inverse transform of a cyclic graph, e.g. the 2 × 2 grid."""
    with pytest.raises(CyclicPolicyError, match="spanning tree") as info:
        transform(policy)
    assert "stretch" in str(info.value)


def test_minimum_norm_transform_of_the_2x2_grid_is_not_private():
    """Why route 3 is refused: P_G⁺ P_G has columns of L1 norm 1.5 on the 2 × 2 grid."""
    p = policies.grid((2, 2)).incidence().toarray()
    norms = np.abs(np.linalg.pinv(p) @ p).sum(0)
    assert np.allclose(norms, 1.5)


def test_transforms_are_cached_per_policy():
    pol = policies.line(5)
    assert transform(pol) is transform(pol)


def test_bad_data_and_arguments():
    tree = transform(policies.line(4))
    with pytest.raises(ValueError, match="shape"):
        tree.data([1, 2, 3])
    with pytest.raises(ValueError, match="negative"):
        tree.data([1, -2, 3, 4])
    with pytest.raises(ValueError, match="x_g"):
        tree.reconstruct(np.zeros(4), [1])
    with pytest.raises(ValueError, match="totals"):
        tree.reconstruct(np.zeros(3), [1, 2])
    with pytest.raises(ValueError, match="cells"):
        tree.workload(wl.prefix(5))
    with pytest.raises(TypeError, match="Policy"):
        transform("line")
    with pytest.raises(ValueError, match="no edges"):
        transform(policies.line(1)).workload(wl.prefix(1))


def test_high_degree_vertices_are_linear_time():
    """Review finding: scipy's depth-first order is O(deg²); a 200 000-cell ⊥-star took 20 s."""
    k = 200_000
    x = np.random.default_rng(0).integers(0, 3, k)
    assert np.array_equal(transform(policies.unbounded(k)).data(x), x)
    singletons = transform(policies.partition(np.arange(k)))
    assert singletons.num_edges == 0 and np.array_equal(singletons.totals(x), x)


def test_a_workload_the_tree_cannot_see_has_sensitivity_zero():
    """Under line (no ⊥) the total count is disclosed: W P_G = 0 for the total, so its Δ (MWEM's
    largest entry) is 0, while a prefix workload's is 1."""
    k = 8
    tree = transform(policies.line(k))
    total = wl.ranges(k, [0], [k - 1])
    assert tree.workload(total).max_abs_entry() == 0.0
    assert tree.workload(wl.prefix(k)).max_abs_entry() == 1.0


def test_a_tree_policy_has_stretch_one_and_a_spanning_tree_its_own():
    from blowfish_te import trees

    assert transform(policies.line(8)).stretch == 1 and transform(policies.unbounded(8)).stretch == 1
    assert transform(policies.threshold(8, 1), trees.line(8)).stretch == 1  # a spanning tree that is the policy
    threshold = policies.threshold(64, 4)
    assert transform(threshold, trees.hub(64, 4)).stretch == 3


def test_fingerprints_tell_trees_bases_and_sizes_apart():
    a, b = policies.line(8), policies.from_edges(8, [(i, 7 - i) for i in range(4)] + [(0, 1), (1, 2), (2, 3)])
    prefix = wl.prefix(8)
    fingerprints = {transform(a).workload(prefix).fingerprint(), transform(b).workload(prefix).fingerprint(),
                    transform(a).workload(wl.identity(8)).fingerprint(),
                    transform(policies.line(9)).workload(wl.prefix(9)).fingerprint()}
    assert len(fingerprints) == 4 and None not in fingerprints
    assert transform(a).workload(prefix).fingerprint() == transform(policies.line(8)).workload(wl.prefix(8)).fingerprint()
    star = policies.from_edges(8, [(i, 7) for i in range(7)])  # the line's children, other parents
    one, other = policies.from_edges(4, [(0, 2)]), policies.from_edges(4, [(1, 2)])  # one parent array, other children
    assert np.array_equal(transform(star).child, transform(a).child)
    assert np.array_equal(transform(one).parent, transform(other).parent)
    assert transform(star).workload(prefix).fingerprint() != transform(a).workload(prefix).fingerprint()
    assert transform(one).workload(wl.prefix(4)).fingerprint() != transform(other).workload(wl.prefix(4)).fingerprint()


def test_integer_data_stays_integer_and_the_tree_s_arrays_are_read_only():
    tree = transform(policies.line(8))
    x = np.arange(8, dtype=np.int64)
    x_g, totals = tree.data_and_totals(x)
    assert x_g.dtype == np.int64 and totals.dtype == np.int64
    assert np.array_equal(tree.reconstruct(x_g, totals), x)
    branching = transform(policies.from_edges(8, [(0, 1), (0, 2), (2, 3), (2, 4), (4, 5), (4, 6), (6, 7)]))
    for t in (tree, branching):  # P_G of integer x_G by index arithmetic: exact integers, no float detour
        y = t.data(x)
        spread = t.spread(y[:, None])[:, 0]
        assert spread.dtype == np.int64 and np.array_equal(spread + t._root_vector(t.totals(x)), x)
    for array in (tree.child, tree.parent, tree.roots, tree.workload(wl.prefix(8)).column_norms(),
                  branching.child, branching.parent, branching.roots):
        assert not array.flags.writeable
    small = np.array([[100], [-100], [100], [100], [-100], [100], [100]], dtype=np.int8)
    wide = branching.spread(small)  # computed in int64 whatever the input's integer type
    assert wide.dtype == np.int64 and np.array_equal(wide, branching._incidence.toarray() @ small.astype(np.int64))
    with pytest.raises(ValueError, match="^totals"):
        tree.reconstruct(x_g, [-1])


def test_the_transformed_gram_operator_and_matrix_are_p_transpose_c_p():
    tree = transform(policies.from_edges(6, [(0, 1), (1, 2), (1, 3), (3, 4), (3, 5)]))
    for base in (wl.prefix(6), wl.random_ranges(6, 9, rng=1)):
        w_g = tree.workload(base)
        dense = w_g.tosparse().toarray()
        gram = w_g.gram()
        assert gram.dtype == np.float64 and np.allclose(gram.matmat(np.eye(w_g.size)), dense.T @ dense)
        assert np.allclose(gram.matvec(np.arange(w_g.size, dtype=float)), dense.T @ dense @ np.arange(w_g.size))
        assert np.allclose(w_g.gram_matrix(), dense.T @ dense)
    with pytest.raises(ValueError, match=r"would have 25 entries \(limit 24\)"):
        tree.workload(wl.prefix(6)).gram_matrix(max_entries=24)


@pytest.mark.parametrize("call, message", [
    (lambda: transform("line"), "policy must be a blowfish_te Policy, got str"),
    (lambda: transform(policies.threshold(8, 2), "hub"), "tree must be a blowfish_te Policy (a forest), got str"),
    (lambda: TreeTransform(3), "policy must be a blowfish_te Policy, got int"),
    (lambda: TreeTransform(policies.threshold(8, 2), [1, 2]), "tree must be a blowfish_te Policy (a forest), got list"),
])
def test_transform_type_errors_name_the_argument_and_the_type(call, message):
    with pytest.raises(TypeError) as raised:
        call()
    assert str(raised.value) == message


def test_difference_norms_of_a_transformed_workload_are_those_of_its_columns():
    tree = transform(policies.from_edges(6, [(0, 1), (1, 2), (1, 3), (3, 4), (3, 5)]))
    for base in (wl.prefix(6), wl.from_matrix(np.arange(18, dtype=float).reshape(3, 6) % 5)):
        w_g = tree.workload(base)
        dense = w_g.tosparse().toarray()
        u, v = np.array([0, 1, 4, 2]), np.array([3, 4, 0, 2])
        for norm, f in (("l1", lambda c: np.abs(c).sum(axis=0)), ("l2sq", lambda c: (c**2).sum(axis=0))):
            assert np.allclose(w_g.difference_norms(u, v, norm), f(dense[:, u] - dense[:, v]))
            alone = w_g.difference_norms(u, np.full(4, w_g.size), norm)  # against ⊥: the column itself
            assert np.allclose(alone, f(dense[:, u]))
            alone[0] = -1.0  # a copy: the cached norms stay as they were
            assert np.allclose(w_g.difference_norms(u, np.full(4, w_g.size), norm), f(dense[:, u]))
        assert np.array_equal(w_g.difference_norms(u, v), w_g.difference_norms(u, v, "l1"))  # L1 by default


def test_a_transform_says_what_it_discloses():
    from blowfish_te import trees

    assert repr(transform(policies.line(8))) == "<TreeTransform of line(8): 7 edges, 1 disclosed totals>"
    assert repr(transform(policies.threshold(64, 4), trees.hub(64, 4))) == (
        "<TreeTransform of threshold(64, theta=4) via hub(64, theta=4) (stretch 3): 63 edges, 1 disclosed totals>")
    assert transform(policies.line(8)).workload(wl.prefix(8)).name == "prefix(8) under line(8)"
    with pytest.raises(ValueError, match="^x_g must hold finite numbers"):
        transform(policies.line(8)).reconstruct(np.array([np.nan] * 7), [3])
