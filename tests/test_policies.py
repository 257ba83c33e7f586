import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blowfish_te import BOTTOM, policies
from blowfish_te import workloads as wl
from blowfish_te.errors import SpecError
from blowfish_te.testing import brute_edges, edge_set

from tests.helpers import forests, graphs

pytestmark = pytest.mark.core


@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_one_dimensional_constructors_have_the_exact_edge_sets(k):
    assert edge_set(policies.complete(k)) == brute_edges("complete", (k,))
    assert edge_set(policies.line(k)) == brute_edges("line", (k,))
    assert edge_set(policies.unbounded(k)) == brute_edges("unbounded", (k,))
    for theta in (1, 2, 3, 6, 10):
        assert edge_set(policies.threshold(k, theta)) == brute_edges("threshold", (k,), theta)


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 2), (1, 5), (5,)])
def test_grid_attribute_and_complete_on_multidimensional_domains(shape):
    for theta in (1, 2, 3, 20):
        assert edge_set(policies.grid(shape, theta)) == brute_edges("grid", shape, theta)
    assert edge_set(policies.attribute(shape)) == brute_edges("attribute", shape)
    assert edge_set(policies.complete(shape)) == brute_edges("complete", shape)


def test_partition_is_a_clique_per_label():
    labels = np.array([[0, 1, 0], [1, 2, 2]])
    pol = policies.partition(labels)
    assert pol.shape == (2, 3)
    assert edge_set(pol) == brute_edges("partition", (2, 3), labels=labels.ravel())
    assert edge_set(policies.partition(["x", "y", "x", "z"])) == {(0, 2)}


def test_edges_are_canonical_and_counted():
    for pol in [policies.threshold(20, 4), policies.grid((5, 6), 2), policies.partition([1, 1, 2, 2, 2])]:
        e = pol.edges
        assert e.shape == (pol.num_edges, 2)
        assert (e[:, 0] < e[:, 1]).all()
        assert len(edge_set(pol)) == pol.num_edges
        assert not e.flags.writeable


def test_bottom_is_encoded_as_k_and_reported():
    pol = policies.unbounded(4)
    assert pol.has_bottom and pol.bottom == 4 and pol.num_vertices == 5
    assert set(pol.edges[:, 1]) == {4}
    assert policies.line(4).bottom is None
    assert repr(BOTTOM) == "BOTTOM"


def test_from_networkx_accepts_int_nodes_tuple_nodes_bottom_and_directed_graphs():
    g = nx.path_graph(5)
    g.add_edge(2, BOTTOM)
    pol = policies.from_networkx(g)
    assert pol.has_bottom and edge_set(pol) == {(0, 1), (1, 2), (2, 3), (3, 4), (2, 5)}

    grid_graph = policies.from_networkx(nx.grid_2d_graph(3, 4), shape=(3, 4))
    assert edge_set(grid_graph) == edge_set(policies.grid((3, 4)))

    directed = nx.DiGraph([(0, 1), (1, 0), (2, 1)])
    assert edge_set(policies.from_networkx(directed)) == {(0, 1), (1, 2)}

    sparse_cells = policies.from_networkx(nx.Graph([(0, 3)]), shape=6)  # cells 1, 2, 4, 5 isolated
    assert sparse_cells.size == 6 and sparse_cells.n_components == 5


def test_from_edges_normalises_orientation_and_duplicates():
    pol = policies.from_edges(4, [[1, 0], [0, 1], [3, 4], [2, 3]])
    assert edge_set(pol) == {(0, 1), (2, 3), (3, 4)}
    assert pol.has_bottom


@pytest.mark.slow
@given(graphs(max_cells=7))
def test_components_forest_and_distance_agree_with_networkx(case):
    k, edges = case
    pol = policies.from_edges(k, np.array(edges, dtype=int).reshape(-1, 2))
    g = nx.Graph()
    g.add_nodes_from(range(pol.num_vertices))
    g.add_edges_from(edges)
    assert pol.is_forest == nx.is_forest(g)
    assert pol.n_components == nx.number_connected_components(g)
    same = pol.component_labels[:, None] == pol.component_labels[None, :]
    for comp in nx.connected_components(g):
        comp = sorted(comp)
        assert same[np.ix_(comp, comp)].all()
        assert same[comp].sum() == len(comp) * len(comp)
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    for u in range(k):
        for w in range(pol.num_vertices):
            expected = lengths[u].get(w, math.inf)
            assert pol.distance(u, BOTTOM if w == k else w) == expected


@given(forests())
def test_random_forests_are_recognised(case):
    k, edges = case
    pol = policies.from_edges(k, np.array(edges, dtype=int).reshape(-1, 2))
    assert pol.is_forest
    assert pol.num_edges == pol.num_vertices - pol.n_components


def test_structured_policies_know_whether_they_are_forests():
    assert policies.line(10).is_forest and policies.unbounded(10).is_forest
    assert not policies.threshold(10, 2).is_forest
    assert not policies.grid((2, 2)).is_forest
    assert not policies.complete(3).is_forest and policies.complete(2).is_forest
    assert policies.partition([0, 0, 1, 2, 2]).is_forest
    assert not policies.partition([0, 0, 0, 1]).is_forest


def test_distances_on_standard_graphs():
    assert policies.line(10).distance(2, 9) == 7
    assert policies.threshold(100, 16).distance(0, 33) == 3
    assert policies.grid((5, 5)).distance((0, 0), (4, 3)) == 7
    assert policies.grid((5, 5), theta=2).distance(0, 24) == 4
    assert policies.attribute((4, 4)).distance((0, 0), (3, 3)) == 2
    assert policies.complete(6).distance(0, 5) == 1
    assert policies.unbounded(3).distance(0, 2) == 2
    assert policies.partition([0, 0, 1]).distance(0, 2) == math.inf


def test_incidence_matrix_columns():
    pol = policies.from_edges(3, [[0, 1], [1, 3]])
    p = pol.incidence().toarray()
    assert p.tolist() == [[1, 0], [-1, 1], [0, 0]]


def test_policies_are_immutable():
    pol = policies.line(5)
    with pytest.raises(AttributeError):
        pol.shape = (6,)
    with pytest.raises(ValueError):
        pol.edges[0, 0] = 3


def test_to_networkx_round_trip():
    pol = policies.from_edges(4, [[0, 1], [2, 4], [1, 3]])
    back = policies.from_networkx(pol.to_networkx())
    assert edge_set(back) == edge_set(pol) and back.has_bottom


@pytest.mark.parametrize(
    "build, exc, words",
    [
        (lambda: policies.threshold(10, 0), ValueError, "theta"),
        (lambda: policies.threshold(10, 1.5), TypeError, "theta"),
        (lambda: policies.grid((4, 4), theta=0), ValueError, "theta"),
        (lambda: policies.line(0), ValueError, "k"),
        (lambda: policies.line(True), TypeError, "k"),
        (lambda: policies.complete(()), ValueError, "shape"),
        (lambda: policies.grid((3, 0)), ValueError, "shape"),
        (lambda: policies.attribute("ab"), TypeError, "shape"),
        (lambda: policies.partition([]), ValueError, "labels"),
        (lambda: policies.from_edges(3, [[0, 0]]), ValueError, "self-loop"),
        (lambda: policies.from_edges(3, [[0, 5]]), ValueError, "edges"),
        (lambda: policies.from_edges(3, [[0.5, 1]]), TypeError, "edges"),
        (lambda: policies.from_networkx(nx.Graph([(0, 2)])), ValueError, "0..1"),
        (lambda: policies.from_networkx(nx.Graph([("a", "b")]), shape=2), ValueError, "'a'"),
        (lambda: policies.line(5).distance(0, 7), ValueError, "outside"),
        (lambda: policies.line(5).distance(0, BOTTOM), ValueError, "BOTTOM"),
    ],
)
def test_bad_arguments_are_named(build, exc, words):
    with pytest.raises(exc, match=words):
        build()


@given(st.integers(1, 40), st.integers(1, 45))
def test_threshold_edge_count(k, theta):
    t = min(theta, k - 1)
    assert policies.threshold(k, theta).num_edges == sum(k - d for d in range(1, t + 1))


def test_policy_blocks_are_checked():
    """Review finding: unrecognised blocks used to vanish, publishing exact answers."""
    from blowfish_te.policies import CliqueEdges, OffsetEdges, PairEdges

    with pytest.raises(TypeError, match="from_edges"):
        policies.Policy((3,), [(0, 1), (1, 2)])
    with pytest.raises(ValueError, match="has_bottom"):
        policies.Policy((3,), [PairEdges(np.array([0]), np.array([3]))])
    with pytest.raises(ValueError, match="offset"):
        policies.Policy((3,), [OffsetEdges((1, 1))])
    with pytest.raises(ValueError, match="lexicographically"):
        policies.Policy((3,), [OffsetEdges((-1,))])
    with pytest.raises(ValueError, match="distinct"):
        policies.Policy((3,), [CliqueEdges(np.array([1, 1]))])
    with pytest.raises(ValueError, match="more than once"):
        policies.Policy((4,), [OffsetEdges((1,)), PairEdges(np.array([0]), np.array([1]))])
    ok = policies.Policy((4,), [OffsetEdges((1,)), PairEdges(np.array([0, 1]), np.array([4, 4]))], has_bottom=True)
    assert edge_set(ok) == {(0, 1), (1, 2), (2, 3), (0, 4), (1, 4)}


def test_empty_edge_lists_and_bad_labels():
    assert policies.from_edges(3, []).num_edges == 0
    with pytest.raises(ValueError, match="NaN"):
        policies.partition([np.nan, np.nan, 1.0])
    with pytest.raises(ValueError, match="not a cell"):
        policies.from_networkx(nx.Graph([((True, 0), (0, 1))]), shape=(2, 2))
    with pytest.raises(ValueError, match="not a coordinate"):
        policies.grid((2, 2)).distance((True, 0), (0, 0))


@pytest.mark.parametrize("sizes", [[40, 3, 1, 33], [2] * 50, [100]])
def test_partition_with_large_and_small_blocks(sizes):
    labels = np.repeat(np.arange(len(sizes)), sizes)
    labels = np.random.default_rng(0).permutation(labels)
    pol = policies.partition(labels)
    assert edge_set(pol) == brute_edges("partition", (labels.size,), labels=labels)
    assert pol.num_edges == sum(s * (s - 1) // 2 for s in sizes)


def test_policies_own_read_only_copies_of_their_edges():
    """Editing the arrays a policy was built from, after a release, must not change it: a line
    once turned into a star this way and kept its cached Δ = 1 (true Δ = 3)."""
    u, v = np.arange(3), np.arange(1, 4)
    policy = policies.Policy(4, [policies.PairEdges(u, v)])
    before = answers_sensitivity(policy)
    u[:] = 0
    v[:] = [1, 2, 3]
    assert np.array_equal(policy.edges, [[0, 1], [1, 2], [2, 3]]) and answers_sensitivity(policy) == before
    for block in policy.edge_blocks:
        with pytest.raises(ValueError, match="read-only"):
            block.u[0] = 2
    with pytest.raises(ValueError, match="read-only"):
        policy.edges[0, 0] = 3


def answers_sensitivity(policy):
    from blowfish_te import answer, workloads

    return answer(workloads.identity(policy.shape), np.ones(policy.size, int), policy, 1.0, "laplace", rng=0).sensitivity


@pytest.mark.parametrize("policy", [policies.line(9), policies.unbounded((3, 3)), policies.complete(6),
                                    policies.partition([0, 0, 1, 2, 2, 2]), policies.from_edges(5, [(0, 4), (1, 2)])])
def test_policies_pickle_and_copy(policy):
    import copy
    import pickle

    for clone in (pickle.loads(pickle.dumps(policy)), copy.deepcopy(policy), copy.copy(policy)):
        assert clone.name == policy.name and clone.shape == policy.shape and clone.has_bottom == policy.has_bottom
        assert np.array_equal(clone.edges, policy.edges) and not clone.edges.flags.writeable
        assert all(not a.flags.writeable for b in clone.edge_blocks for a in vars(b).values() if isinstance(a, np.ndarray))


# -- names, refusals and edge blocks, exactly ------------------------------------------------------
def _refusal(call) -> str:
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    return str(info.value)


def test_constructors_name_their_policies():
    assert [p.name for p in (policies.complete(4), policies.complete((2, 3)), policies.unbounded((2, 3)), policies.line(5),
                             policies.threshold(6, 2), policies.threshold(6, 5), policies.grid((3, 3)),
                             policies.grid((3, 3), 4), policies.attribute((2, 3)), policies.partition([0, 1, 1]),
                             policies.from_edges(4, [[0, 1], [2, 3]]))] == [
        "complete(4)", "complete((2, 3))", "unbounded((2, 3))", "line(5)", "threshold(6, theta=2)",
        "threshold(6, theta=5)", "grid((3, 3), theta=1)", "grid((3, 3), theta=4)", "attribute((2, 3))",
        "partition(2 blocks over 3)", "from_edges(4, 2 edges)"]
    g = nx.path_graph(3)
    assert policies.from_networkx(g).name == "from_networkx(3, 2 edges)"
    g.add_edge(0, BOTTOM)
    assert policies.from_networkx(g).name == "from_networkx(3, 3 edges, BOTTOM)"
    assert policies.Policy((3,), [], name="mine").name == "mine"
    assert policies.Policy((3,), []).name == "policy((3,))"
    assert repr(policies.unbounded(3)) == "<Policy unbounded(3): 3 cells + BOTTOM, 3 edges>"
    assert repr(policies.line(4)) == "<Policy line(4): 4 cells, 3 edges>"


def test_constructors_refuse_bad_shapes_and_thetas_by_name():
    for build in (policies.complete, policies.unbounded, policies.attribute, policies.grid,
                  lambda shape: policies.from_edges(shape, []), lambda shape: policies.from_networkx(nx.Graph(), shape)):
        assert _refusal(lambda build=build: build(0)) == "shape[0] must be >= 1 (no empty axes), got 0 in (0,)"
    assert _refusal(lambda: policies.grid((3, 3), 0)) == "theta must be an integer >= 1, got 0"
    assert _refusal(lambda: policies.threshold(5, 0)) == "theta must be an integer >= 1, got 0"
    assert _refusal(lambda: policies.check_policy("line")) == "policy must be a blowfish_te Policy, got str"
    assert _refusal(lambda: policies.line(3).vertex(1.5)) == "cell must be an integer, got 1.5 (float)"
    assert _refusal(lambda: policies.line(3).vertex(3)) == "cell index 3 is outside the domain of 3 cells"  # K is ⊥'s index
    assert _refusal(lambda: policies.grid((2, 3)).vertex((2, 0))) == "cell (2, 0) is not a coordinate of the domain (2, 3)"


def test_a_full_threshold_or_grid_is_one_clique_block():
    """θ reaching the domain's diameter gives the complete graph, kept as one clique (never listed
    pair by pair); one less gives offset blocks."""
    assert [type(b) for b in policies.threshold(6, 5).edge_blocks] == [policies.CliqueEdges]
    assert {type(b) for b in policies.threshold(6, 4).edge_blocks} == {policies.OffsetEdges}
    assert [type(b) for b in policies.grid((3, 3), 4).edge_blocks] == [policies.CliqueEdges]
    assert {type(b) for b in policies.grid((3, 3), 3).edge_blocks} == {policies.OffsetEdges}
    assert policies.line(1).edge_blocks == () and policies.from_edges(3, []).edge_blocks == ()  # empty blocks are dropped


def test_partition_lists_small_blocks_as_pairs_and_keeps_large_ones_as_cliques():
    small = policies.SMALL_CLIQUE
    at = policies.partition([0] * small + [1, 1])
    assert at.num_edges == small * (small - 1) // 2 + 1
    assert [type(b) for b in at.edge_blocks] == [policies.PairEdges]
    above = policies.partition([0] * (small + 1) + [1, 1])
    assert above.num_edges == (small + 1) * small // 2 + 1
    assert [type(b) for b in above.edge_blocks] == [policies.PairEdges, policies.CliqueEdges]
    single = policies.partition([7])
    assert single.size == 1 and single.num_edges == 0


def test_partition_refuses_labels_that_make_no_blocks():
    assert _refusal(lambda: policies.partition(5)) == "labels must be a non-empty array with one label per cell, got shape ()"
    assert _refusal(lambda: policies.partition([])) == "labels must be a non-empty array with one label per cell, got shape (0,)"
    assert _refusal(lambda: policies.partition([1.0, np.nan])) == (
        "labels must not contain NaN or infinity: every cell needs a definite block")
    assert _refusal(lambda: policies.partition([[1], [2, 3]])).startswith("labels must be an array, could not convert it: ")
    assert _refusal(lambda: policies.partition(np.array([1, "a"], dtype=object))) == (
        "labels must be mutually comparable values (ints or strings): '<' not supported between instances of 'str' and 'int'")


def test_from_edges_refuses_what_is_no_edge_list_by_name():
    assert _refusal(lambda: policies.from_edges(3, [0, 1, 2])) == "edges must be an array of shape (E, 2), got shape (3,)"
    assert _refusal(lambda: policies.from_edges(3, [[0, 1.5]])) == "edges must hold integer vertex indices, got dtype float64"
    assert _refusal(lambda: policies.from_edges(3, [[0, 4]])) == "edges must hold cell indices in [0, 2] or 3 for BOTTOM, got [0, 4]"
    assert _refusal(lambda: policies.from_edges(3, [[0, 1], [2]])).startswith("edges must be an array, could not convert it: ")
    assert _refusal(lambda: policies.from_edges(3, [[1, 1]])) == (
        "edges has a self-loop at 1: a record moving to its own value is not a change")
    assert _refusal(lambda: policies.from_edges(3, [[3, 3]])) == (
        "edges has a self-loop at BOTTOM: a record moving to its own value is not a change")
    pol = policies.from_edges(5, [[3, 2], [0, 1], [1, 0], [3, 5]])
    assert pol.edges.tolist() == [[0, 1], [2, 3], [3, 5]] and pol.num_edges == 3  # sorted, each edge once
    # the canonical block is one the checked constructor accepts (integer arrays)
    assert edge_set(policies.Policy(pol.shape, pol.edge_blocks, has_bottom=True)) == edge_set(pol)


def test_from_networkx_refuses_what_is_no_policy_graph_by_name():
    class NodesOnly:
        nodes = [0, 1]

    assert _refusal(lambda: policies.from_networkx(NodesOnly())) == "graph must be a networkx graph, got NodesOnly"
    assert _refusal(lambda: policies.from_networkx(nx.Graph())) == (
        "graph has no cell nodes; pass shape= to build a policy without edges")
    assert _refusal(lambda: policies.from_networkx(nx.Graph([(0, 2)]))) == (
        "graph cell nodes must be exactly the integers 0..1 (or pass shape= to use coordinate tuples or a larger domain)")
    assert _refusal(lambda: policies.from_networkx(nx.Graph([(0, 4)]), shape=4)) == (
        "graph node 4 is not a cell of the domain (4,): nodes must be flat indices 0..3, coordinate tuples or BOTTOM")
    assert _refusal(lambda: policies.from_networkx(nx.Graph([((3, 0), (0, 0))]), shape=(3, 2))) == (
        "graph node (3, 0) is not a cell of the domain (3, 2): nodes must be flat indices 0..5, coordinate tuples or BOTTOM")
    loop = nx.Graph([(0, 1)])
    loop.add_edge(2, 2)
    assert _refusal(lambda: policies.from_networkx(loop)) == (
        "graph has a self-loop at 2: a record moving to its own value is not a change")
    loop = nx.Graph([(0, 1)])
    loop.add_edge(BOTTOM, BOTTOM)
    assert _refusal(lambda: policies.from_networkx(loop)) == (
        "graph has a self-loop at BOTTOM: a record moving to its own value is not a change")
    one = nx.Graph()
    one.add_node(0)
    assert policies.from_networkx(one).shape == (1,)  # a single cell is a domain


def test_checked_blocks_are_refused_by_name():
    def policy(block, has_bottom=False):
        return lambda: policies.Policy((4,), [block], has_bottom=has_bottom)

    def pairs(u, v, dtype=np.int64):
        return policies.PairEdges(np.array(u, dtype=dtype), np.array(v, dtype=dtype))

    shape_message = "PairEdges u and v must be 1-D integer arrays of equal length"
    for bad in (policies.PairEdges(np.array([0]), np.array([1.0])), policies.PairEdges(np.array([0.0]), np.array([1])),
                pairs([0, 1], [2]), pairs([[0, 1]], [[2, 3]])):
        assert _refusal(policy(bad)) == shape_message
    for bad in (pairs([1], [0]), pairs([1], [1]), pairs([-1], [2]), pairs([0], [4])):
        assert _refusal(policy(bad)) == "PairEdges need 0 <= u < v <= 3 (no BOTTOM: has_bottom=False)"
    assert _refusal(policy(pairs([0], [5]), True)) == "PairEdges need 0 <= u < v <= 4 (K = 4 is BOTTOM)"
    clique_message = "CliqueEdges cells must be a sorted 1-D array of distinct cells in [0, 3]"
    for cells in ([[0, 1], [2, 3]], [0.0, 1.0], [-1, 2], [1, 4], [2, 1], [1, 1]):
        assert _refusal(policy(policies.CliqueEdges(np.array(cells)))) == clique_message
    assert _refusal(policy(policies.OffsetEdges((0,)))) == (
        "OffsetEdges offset (0,) must be lexicographically positive (first non-zero entry > 0)")
    assert _refusal(lambda: policies.Policy((3,), 5)) == "blocks must be an iterable of edge blocks, got int"
    assert _refusal(lambda: policies.Policy((3,), [(0, 1)])) == (
        "edge blocks must be OffsetEdges, PairEdges or CliqueEdges, got tuple; for an edge list use from_edges(shape, edges)")
    assert _refusal(lambda: policies.Policy((3,), [policies.OffsetEdges((1,)), pairs([0], [1])])) == (
        "blocks list some edge more than once; each edge must appear in one block only")


def test_checked_blocks_are_taken_as_given():
    clique = policies.Policy((4,), [policies.CliqueEdges(np.array([0, 2, 3]))])
    assert clique.edges.tolist() == [[0, 2], [0, 3], [2, 3]]
    bottom = policies.Policy((3,), [policies.PairEdges(np.array([0], np.int32), np.array([3], np.int32))], has_bottom=True)
    assert bottom.has_bottom and bottom.touches_bottom and bottom.edges.tolist() == [[0, 3]]
    assert {a.dtype for b in bottom.edge_blocks for a in (b.u, b.v)} == {np.dtype(np.int64)}  # the policy's own int64 copies
    small = policies.Policy((3,), [policies.CliqueEdges(np.array([0, 1], np.int32))])
    assert small.edge_blocks[0].cells.dtype == np.int64
    # distinct edges whose codes u·(K + 1) + v are distinct integers beyond float64's 2^53
    k = 2**30
    far = policies.Policy((k,), [policies.PairEdges(np.array([0, 1]), np.array([k - 1, k - 1]))])
    assert far.num_edges == 2


def test_components_of_offsets_that_skip_cells():
    every_other = policies.Policy((5,), [policies.OffsetEdges((2,))])
    assert every_other.component_labels.tolist() == [0, 1, 0, 1, 0] and every_other.n_components == 2
    alone = policies.Policy((3,), [policies.OffsetEdges((1,))], has_bottom=True)  # ⊥ without an edge
    assert alone.component_labels.tolist() == [0, 0, 0, 1] and alone.n_components == 2
    assert alone.component_labels.dtype == np.int64 and not alone.component_labels.flags.writeable


def test_policies_joined_by_unit_offsets_hold_one_label_without_listing_edges():
    """Offsets with a unit step along every axis longer than one cell join every cell, and
    unbounded DP joins every cell to ⊥: one component, its label held once (a domain too large to
    list costs nothing)."""
    for pol in (policies.line(50), policies.grid((1, 5)), policies.grid((4, 6), 2), policies.unbounded(10**6)):
        assert pol.n_components == 1 and pol.component_labels.shape == (pol.num_vertices,)
        assert pol.component_labels.strides == (0,)  # one label for every vertex
    pol = policies.unbounded(10**6)
    assert pol.n_components == 1
    assert "_u" not in pol.edge_blocks[0].__dict__  # the million (u, ⊥) pairs were never made


def test_fingerprints_follow_the_shape_the_bottom_vertex_and_the_edges():
    line = policies.line(8)
    assert line.fingerprint() == policies.threshold(8, 1).fingerprint() == line.fingerprint()  # not the name
    assert isinstance(line.fingerprint(), str)
    assert line.fingerprint() != policies.threshold(8, 2).fingerprint()  # other edges
    assert policies.from_edges(3, [[0, 1]]).fingerprint() != policies.from_edges(4, [[0, 1]]).fingerprint()  # other shape
    with_bottom = policies.Policy((8,), [policies.OffsetEdges((1,))], has_bottom=True)  # ⊥ present, joined to nothing
    assert with_bottom.fingerprint() != line.fingerprint()


def test_policy_specs_parse_build_and_refuse_exactly():
    full = policies.PolicySpec.parse("threshold:full")
    assert full == policies.PolicySpec("threshold:full", "threshold", None, True)
    assert full.theta_on(7) == 7.0 and full.build(5).edges.tolist() == policies.complete(5).edges.tolist()
    assert policies.PolicySpec.parse("grid:1") == policies.PolicySpec("grid:1", "grid", 1)
    assert policies.PolicySpec.parse("grid:3").theta_on((4, 4)) == 3.0 and policies.PolicySpec.parse("line").theta_on(4) is None
    with pytest.raises(ValueError, match=r"^shape\[0\] must be >= 1 \(no empty axes\), got 0 in \(0,\)$"):
        full.theta_on(0)
    for spec, message in [
        (3, "policy spec must be a string such as 'line' or 'threshold:16', got int"),
        ("ring", "unknown policy 'ring'; allowed: unbounded, complete, attribute, line, threshold:θ, threshold:full, grid:θ"),
        ("grid:0", "policy 'grid:0': θ must be a positive integer"),
        ("threshold:x", "policy 'threshold:x': θ must be a positive integer or full"),
    ]:
        with pytest.raises(SpecError) as info:
            policies.PolicySpec.parse(spec)
        assert str(info.value) == message
    with pytest.raises(SpecError) as info:
        policies.PolicySpec.parse("line").build(0)
    assert str(info.value) == "policy 'line': shape[0] must be >= 1 (no empty axes), got 0 in (0,)"


# -- structural questions: the policy answers them, whatever blocks hold its edges ----------------

def _policies_of_every_block_kind():
    """One policy per edge-block kind, and mixtures (⊥ among explicit pairs, cliques beside offsets)."""
    return [
        policies.grid((4, 5), 2),  # offset blocks
        policies.attribute((3, 4)),  # offset blocks: the attribute policy
        policies.unbounded((3, 4)),  # every cell to ⊥
        policies.complete((6,)),  # one clique: bounded DP
        policies.partition([0, 0, 1, 1, 2, 2, 2, 0]),  # cliques
        policies.from_edges(8, [(0, 3), (2, 5), (4, 8), (1, 8)]),  # explicit pairs, some to ⊥
        policies.Policy((9,), [policies.CliqueEdges(np.array([0, 2, 5])), policies.OffsetEdges((1,)),
                               policies.PairEdges(np.array([3, 6]), np.array([8, 9]))], has_bottom=True),
    ]


@pytest.mark.parametrize("policy", _policies_of_every_block_kind(), ids=lambda p: p.name)
def test_the_structural_questions_account_for_every_edge_once(policy):
    """offsets(), cliques() and edge_pairs() list each edge exactly once between them; edges to ⊥,
    joined cells, offset steps, completeness and the attribute structure agree with the edge list."""
    k, shape, edges = policy.size, policy.shape, policy.edges
    listed = []
    for offset in policy.offsets():
        listed += zip(*(a.tolist() for a in policies.OffsetEdges(offset).pairs(shape)))
    for cells in policy.cliques():
        listed += [(int(cells[i]), int(cells[j])) for i, j in zip(*np.triu_indices(cells.size, 1))]
    for u, v in policy.edge_pairs(offsets=False):
        listed += zip(u.tolist(), v.tolist())
    assert sorted(listed) == sorted(map(tuple, edges.tolist()))
    clique_pairs = [e for cells in policy.cliques() for e in zip(*np.triu_indices(cells.size, 1))]
    assert sum(u.size for u, _ in policy.edge_pairs()) + len(clique_pairs) == policy.num_edges
    assert all((v < k).all() for _, v in policy.edge_pairs(bottom=False))
    assert sum(u.size for u, _ in policy.edge_pairs(bottom=False)) + len(clique_pairs) == int((edges[:, 1] < k).sum())
    np.testing.assert_array_equal(policy.bottom_cells(), np.unique(edges[edges[:, 1] == k, 0]))
    assert policy.joins_cells == bool((edges[:, 1] < k).any())
    assert policy.touches_bottom == bool((edges[:, 1] == k).any())
    steps = policy.offset_steps()
    if steps is not None:
        expected = {e for d in steps for e in zip(*(a.tolist() for a in policies.OffsetEdges(d).pairs(shape)))}
        assert expected == set(map(tuple, edges.tolist()))
    pairs = set(itertools.combinations(range(k), 2))
    assert policy.is_complete == (not policy.has_bottom and set(map(tuple, edges.tolist())) == pairs)
    coords = np.array(np.unravel_index(np.arange(k), shape)).T
    one_attribute = {(a, b) for a, b in pairs if (coords[a] != coords[b]).sum() == 1}
    assert policy.is_attribute == (not policy.has_bottom and set(map(tuple, edges.tolist())) == one_attribute)


def test_every_edge_block_kind_is_covered_and_an_unknown_one_refused():
    """The structural questions dispatch over the closed union of edge blocks: the policies above
    hold every kind, and a block of another kind is refused by name."""
    import typing

    from blowfish_te.policies import EdgeBlock

    kinds = {type(b) for p in _policies_of_every_block_kind() for b in p.edge_blocks}
    assert set(typing.get_args(EdgeBlock)) | {policies.BottomEdges} <= kinds

    class Strange:
        pass

    with pytest.raises(TypeError, match="edge blocks must be OffsetEdges, PairEdges or CliqueEdges, got Strange"):
        policies.Policy((3,), [Strange()])
    with pytest.raises(TypeError, match="got Strange"):
        policies._kind(Strange())


@pytest.mark.parametrize("policy", _policies_of_every_block_kind(), ids=lambda p: p.name)
def test_structure_algorithms_agree_with_the_listed_edges(policy):
    """Sensitivity, the quotient policy and the marginal moves, read through the structural
    questions, equal their brute force over the policy's listed edges (every block kind)."""
    from blowfish_te.partitions import quotient_policy
    from blowfish_te.sensitivity import sensitivity

    k, edges = policy.size, policy.edges
    w = wl.prefix(k) if policy.ndim == 1 else wl.random_rects(policy.shape, 6, rng=2)
    dense = np.concatenate([w.dense(), np.zeros((w.num_queries, 1))], axis=1)
    brute = max((np.abs(dense[:, u] - dense[:, v]).sum() for u, v in edges.tolist()), default=0.0)
    assert sensitivity(w, policy) == pytest.approx(brute)
    labels = np.arange(k) % 3
    extended = np.append(labels, 3)
    mapped = {(min(a, b), max(a, b)) for a, b in zip(extended[edges[:, 0]], extended[edges[:, 1]]) if a != b}
    assert set(map(tuple, quotient_policy(policy, labels).edges.tolist())) == mapped
