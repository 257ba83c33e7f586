import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blowfish_te import BOTTOM, policies, transform, trees
from blowfish_te.forest import RootedForest
from blowfish_te.testing import edge_set

from tests.helpers import forests, graphs

pytestmark = pytest.mark.core


def _nx(policy):
    g = nx.Graph()
    g.add_nodes_from(range(policy.num_vertices))
    g.add_edges_from(map(tuple, policy.edges))
    return g


def brute_stretch(policy, tree):
    """Tree distance of every policy edge by networkx shortest paths in the tree."""
    lengths = dict(nx.all_pairs_shortest_path_length(_nx(tree)))
    return [lengths[int(u)].get(int(v), np.inf) for u, v in policy.edges]


def check_stretch(policy, tree):
    measured = trees.stretch(policy, tree)
    dist = np.array(brute_stretch(policy, tree))
    finite = dist[np.isfinite(dist)].astype(int)
    assert measured.disconnected == int((~np.isfinite(dist)).sum())
    assert measured.maximum == (np.inf if measured.disconnected else (finite.max() if finite.size else 0))
    assert np.array_equal(measured.histogram[: finite.max() + 1 if finite.size else 1], np.bincount(finite, minlength=1))
    assert measured.mean == pytest.approx(finite.mean() if finite.size else 0)
    return measured


@given(forests(max_cells=10), st.integers(0, 2**32 - 1))
def test_forest_distances_against_networkx(case, seed):
    _check_forest(*case)


@pytest.mark.parametrize("edges", [[(i, i + 1) for i in range(8)], [(3, 0), (0, 7), (7, 1), (1, 5), (5, 8), (8, 2)],
                                   [(i, i + 1) for i in range(8)] + [(8, 9)]])
def test_chains_need_no_solve_and_agree_with_networkx(edges):
    """A chain from the root (line, a path in any labelling, a path ending at ⊥) takes the direct
    construction; it must agree with the general one."""
    _check_forest(9, edges)


def _check_forest(k, edges):
    forest = policies.from_edges(k, np.array(edges, dtype=int).reshape(-1, 2))
    rooted = RootedForest(forest)
    lengths = dict(nx.all_pairs_shortest_path_length(_nx(forest)))
    n = forest.num_vertices
    u, v = np.array(list(itertools.product(range(n), range(n)))).T
    expected = [lengths[a].get(b, -1) for a, b in zip(u, v)]
    assert np.array_equal(rooted.distances(u, v), expected)
    # preorder intervals: a vertex's subtree is exactly its descendants
    for vertex in range(n):
        inside = set(rooted.order[rooted.pos[vertex] : rooted.end[vertex]])
        below = {w for w in range(n) if vertex in _ancestors(rooted.parent, w)}
        assert inside == below


def _ancestors(parent, w):
    out = {w}
    while parent[w] >= 0:
        w = parent[w]
        out.add(w)
    return out


@given(graphs(max_cells=7), st.sampled_from(["bfs", "shortest_path", "mst"]))
def test_graph_trees_are_spanning_forests_with_the_policys_components(case, kind):
    k, edges = case
    policy = policies.from_edges(k, np.array(edges, dtype=int).reshape(-1, 2))
    tree = getattr(trees, kind)(policy)
    assert tree.is_forest and tree.size == policy.size
    assert edge_set(tree) <= edge_set(policy)
    assert tree.n_components == policy.n_components
    measured = check_stretch(policy, tree)
    assert measured.disconnected == 0


def test_bfs_tree_keeps_graph_distances_from_the_centre():
    policy = policies.grid((7, 9))
    tree = trees.bfs(policy, centre=(3, 4))
    centre = 3 * 9 + 4
    graph = dict(nx.single_source_shortest_path_length(_nx(policy), centre))
    in_tree = dict(nx.single_source_shortest_path_length(_nx(tree), centre))
    assert graph == in_tree


def test_shortest_path_tree_keeps_weighted_distances_from_the_centre():
    policy = policies.grid((6, 7), theta=3)
    coords = np.stack(np.unravel_index(np.arange(42), (6, 7)), 1)
    weight = lambda a, b: int(np.abs(coords[a] - coords[b]).sum())  # noqa: E731
    graph, tree = nx.Graph(), nx.Graph()
    graph.add_weighted_edges_from((int(u), int(v), weight(u, v)) for u, v in policy.edges)
    tree.add_weighted_edges_from((int(u), int(v), weight(u, v)) for u, v in trees.shortest_path(policy, centre=(2, 3)).edges)
    centre = 2 * 7 + 3
    assert nx.single_source_dijkstra_path_length(graph, centre) == nx.single_source_dijkstra_path_length(tree, centre)


def test_mst_has_minimum_total_cell_distance():
    policy = policies.grid((5, 6), theta=3)
    tree = trees.mst(policy)
    coords = np.stack(np.unravel_index(np.arange(30), (5, 6)), 1)
    g = nx.Graph()
    for u, v in policy.edges:
        g.add_edge(int(u), int(v), weight=int(np.abs(coords[u] - coords[v]).sum()))
    expected = nx.minimum_spanning_tree(g).size(weight="weight")
    weight = sum(int(np.abs(coords[u] - coords[v]).sum()) for u, v in tree.edges)
    assert tree.num_edges == 29 and weight == expected == 29


@pytest.mark.parametrize("k", [3, 5, 16, 17, 18, 100, 257])
@pytest.mark.parametrize("theta", [2, 3, 4, 7, 16])
def test_hub_tree_has_stretch_three_and_line_tree_theta(k, theta):
    """ℓ = 3 for the hub tree once a second block has a cell besides its hub (k >= θ + 2);
    the line tree has ℓ = θ."""
    if theta >= k:
        return
    policy = policies.threshold(k, theta)
    hub = trees.hub(k, theta)
    assert hub.is_forest and hub.is_connected
    measured = check_stretch(policy, hub) if k <= 100 else trees.stretch(policy, hub)
    assert measured.maximum == (3 if k >= theta + 2 else 2)
    assert trees.stretch(policy, trees.line(k)).maximum == theta


def test_tree_constructors_have_the_defined_edges():
    assert edge_set(trees.line(5)) == {(0, 1), (1, 2), (2, 3), (3, 4)}
    assert edge_set(trees.hub(7, 3)) == {(0, 1), (1, 2), (3, 4), (4, 5), (1, 4), (4, 6)}
    assert edge_set(trees.star(4, centre=2)) == {(0, 2), (1, 2), (2, 3)}
    assert edge_set(trees.star(3, centre=BOTTOM)) == {(0, 3), (1, 3), (2, 3)}
    # snake on 3 × 3: rows 0..2 as paths, turns at the right end then the left end
    assert edge_set(trees.snake((3, 3))) == {(0, 1), (1, 2), (3, 4), (4, 5), (6, 7), (7, 8), (2, 5), (3, 6)}
    assert edge_set(trees.comb((3, 3))) == {(0, 1), (1, 2), (3, 4), (4, 5), (6, 7), (7, 8), (1, 4), (4, 7)}
    for tree in [trees.snake((4, 6)), trees.comb((4, 6), spine=0), trees.line((4, 6)), trees.star((4, 6))]:
        assert tree.is_forest and tree.is_connected and tree.shape == (4, 6)


@pytest.mark.parametrize("policy", [policies.grid((6, 7)), policies.grid((5, 5), theta=2), policies.attribute((4, 5)),
                                    policies.complete(9), policies.threshold(30, 5)], ids=lambda p: p.name)
def test_stretch_of_every_candidate_against_brute_force(policy):
    for name, tree in trees.candidates(policy).items():
        measured = check_stretch(policy, tree)
        assert measured.disconnected == 0, name


@pytest.mark.slow
@given(graphs(max_cells=7, allow_bottom=False), st.integers(0, 2**32 - 1))
def test_maximum_only_stretch_agrees_on_clique_policies(case, seed):
    k, _ = case
    labels = np.random.default_rng(seed).integers(0, 3, k)
    for policy in [policies.complete(k), policies.partition(labels)]:
        for tree in [trees.line(k), trees.star(k), policies.from_edges(k, [[i, i + 1] for i in range(0, k - 1, 2)])]:
            full, quick = trees.stretch(policy, tree), trees.stretch(policy, tree, histogram=False)
            assert quick.maximum == full.maximum and bool(quick.disconnected) == bool(full.disconnected)


def test_star_stretch_is_two_on_connected_policies():
    for policy in [policies.complete(8), policies.grid((4, 4), 2), policies.threshold(20, 3)]:
        assert trees.stretch(policy, trees.star(policy.shape)).maximum == 2


def test_candidates_by_policy_kind():
    assert set(trees.candidates(policies.threshold(50, 4))) == {"hub", "line", "stars"}
    assert set(trees.candidates(policies.complete(9))) == {"hub", "line", "stars"}
    assert set(trees.candidates(policies.grid((5, 5)))) == {"bfs", "mst", "snake", "comb", "line", "stars"}
    assert {"bfs", "mst"} <= set(trees.candidates(policies.partition([0, 0, 1, 1])))
    with_bottom = trees.candidates(policies.from_edges(3, [[0, 1], [1, 2], [2, 3], [0, 3]]))
    assert set(with_bottom) == {"bfs", "mst", "stars"}
    line = policies.line(5)
    assert trees.candidates(line)["line"] is trees.candidates(line)["line"]  # cached on the policy


def test_embedded_transform_carries_the_stretch():
    policy = policies.threshold(40, 4)
    tr = transform(policy, trees.hub(40, 4))
    assert tr.stretch == 3 and tr.policy is policy and tr.tree.name == "hub(40, theta=4)"
    assert transform(policy, tr.tree) is tr
    x = np.random.default_rng(0).integers(0, 5, 40)
    assert np.array_equal(tr.reconstruct(tr.data(x), tr.totals(x)), x)


def test_trees_that_cannot_embed_the_policy_are_refused():
    policy = policies.threshold(10, 2)
    split = policies.from_edges(10, [[i, i + 1] for i in range(9) if i != 4])
    with pytest.raises(ValueError, match="does not connect"):
        transform(policy, split)
    with pytest.raises(ValueError, match="BOTTOM"):
        transform(policies.unbounded(4), trees.line(4))
    with pytest.raises(ValueError, match="cells"):
        transform(policy, trees.line(11))
    with pytest.raises(ValueError, match="cycles"):
        transform(policy, policies.threshold(10, 3))
    with pytest.raises(TypeError, match="tree"):
        transform(policy, "hub")


@pytest.mark.parametrize("build, exc, words", [
    (lambda: trees.snake(5), ValueError, "2-D"),
    (lambda: trees.comb((3, 4), spine=4), ValueError, "spine"),
    (lambda: trees.star((3, 3), centre=(3, 0)), ValueError, "centre"),
    (lambda: trees.star(5, centre=7), ValueError, "centre"),
    (lambda: trees.hub(10, 0), ValueError, "theta"),
    (lambda: trees.candidates("grid"), TypeError, "policy"),
])
def test_bad_tree_arguments(build, exc, words):
    with pytest.raises(exc, match=words):
        build()


@pytest.mark.parametrize("k", [1, 2, 3, 17])
def test_the_line_built_directly_equals_the_same_path_given_as_edges(k):
    direct = RootedForest(policies.line(k))
    general = RootedForest(policies.from_edges(k, np.stack([np.arange(k - 1), np.arange(1, k)], axis=1)))
    for name in ("parent", "order", "pos", "end", "depth", "roots"):
        assert np.array_equal(getattr(direct, name), getattr(general, name)), name


# -- exact constructions, names and refusals -------------------------------------------------------


def _refusal(call, exc=ValueError) -> str:
    with pytest.raises(exc) as info:
        call()
    return str(info.value)


def test_each_constructor_names_its_tree():
    assert trees.line(5).name == "line(5)" and trees.line((2, 3)).name == "line((2, 3))"
    assert trees.snake((4, 3)).name == "snake((4, 3))"
    assert trees.comb((3, 3)).name == "comb((3, 3), spine=1)"
    assert trees.star(7).name == "star(7, centre=3)"  # the middle cell (k - 1) // 2
    assert trees.star((5, 7)).name == "star((5, 7), centre=17)"  # (2, 3)
    assert trees.star((3, 3), centre=(0, 0)).name == "star((3, 3), centre=0)"
    assert trees.star(5, centre=0).name == "star(5, centre=0)"
    assert trees.star(4, centre=BOTTOM).name == "star(4, centre=BOTTOM)"
    grid = policies.grid((3, 4))
    assert trees.stars(grid).name == "stars(grid((3, 4), theta=1))"
    assert trees.mst(grid).name == "mst(grid((3, 4), theta=1))"
    assert trees.bfs(grid).name == "bfs(grid((3, 4), theta=1), centre=middle)"
    assert trees.bfs(grid, centre=(0, 0)).name == "bfs(grid((3, 4), theta=1), centre=(0, 0))"
    assert trees.shortest_path(grid).name == "shortest_path(grid((3, 4), theta=1), centre=middle)"
    assert trees.shortest_path(grid, centre=5).name == "shortest_path(grid((3, 4), theta=1), centre=5)"


def test_the_snake_turns_at_alternate_ends_and_the_stars_hold_bottom():
    # rows 0..3 of 3 columns; turns after row 0 on the right, after row 1 on the left, after row 2 on the right
    assert edge_set(trees.snake((4, 3))) == {(0, 1), (1, 2), (3, 4), (4, 5), (6, 7), (7, 8), (9, 10), (10, 11),
                                              (2, 5), (3, 6), (8, 11)}
    assert edge_set(trees.star((3, 3), centre=(0, 0))) == {(0, c) for c in range(1, 9)}
    around = trees.star(3, centre=BOTTOM)
    assert around.has_bottom is True and around.num_vertices == 4 and around.is_connected
    unbounded = trees.stars(policies.unbounded(4))
    assert unbounded.has_bottom is True and edge_set(unbounded) == {(0, 4), (1, 4), (2, 4), (3, 4)}
    assert trees.stars(policies.line(4)).has_bottom is False


def test_the_tree_arguments_are_refused_by_name():
    assert _refusal(lambda: trees.star(5, centre=-1)) == "centre must be an integer >= 0, got -1"
    assert _refusal(lambda: trees.star(5, centre="a"), TypeError) == "centre must be an integer, got 'a' (str)"
    assert _refusal(lambda: trees.star(5, centre=5)) == "centre 5 is outside the domain of 5 cells"
    assert edge_set(trees.star(5, centre=4)) == {(0, 4), (1, 4), (2, 4), (3, 4)}  # the last cell is a cell
    assert _refusal(lambda: trees.star((3, 3), centre=(3, 0))) == "centre (3, 0) is not a cell of the domain (3, 3)"
    assert _refusal(lambda: trees.star((3, 3), centre=(0, -1))) == "centre (0, -1) is not a cell of the domain (3, 3)"
    assert _refusal(lambda: trees.comb((3, 4), spine=-1)) == "spine must be an integer >= 0, got -1"
    assert _refusal(lambda: trees.comb((3, 4), spine=1.0), TypeError) == "spine must be an integer, got 1.0 (float)"
    assert _refusal(lambda: trees.comb((3, 4), spine=4)) == "spine must be a column index below 4, got 4"
    assert _refusal(lambda: trees.hub(10, 0)) == "theta must be an integer >= 1, got 0"
    assert _refusal(lambda: trees.snake(5)) == "shape must be 2-D for this tree, got (5,)"
    assert _refusal(lambda: trees.stretch(policies.line(3), "tree"), TypeError) == "policy and tree must both be blowfish_te Policy objects"
    assert _refusal(lambda: trees.stretch("policy", trees.line(3)), TypeError) == "policy and tree must both be blowfish_te Policy objects"
    assert _refusal(lambda: trees.stretch(policies.line(3), trees.line(4))) == "tree line(4) has 4 cells but policy line(3) has 3"
    assert _refusal(lambda: trees.stretch(policies.unbounded(3), trees.line(3))) == (
        "policy unbounded(3) has BOTTOM edges but tree line(3) has no BOTTOM vertex")


def test_a_hub_tree_of_theta_one_is_the_line():
    tree = trees.hub(5, 1)
    assert tree.name == "hub(5, theta=1)" and edge_set(tree) == edge_set(trees.line(5))
    assert trees.hub(4, 9).name == "hub(4, theta=4)"  # θ >= k: one block
    assert edge_set(trees.hub(4, 9)) == {(0, 1), (1, 2), (1, 3)}


def test_stars_centre_each_component_at_its_middle_vertex():
    """Brute force: the star of a component joins every other vertex to the lower middle of its
    vertices by index, or to ⊥ where the component has it."""
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 3, 61)
    bottom_edges = np.array([[0, 1], [1, 2], [2, 6], [6, 3], [4, 5], [5, 7], [7, 8], [8, 9]])  # ⊥ = 9
    for policy in [policies.partition(labels), policies.from_edges(9, bottom_edges), policies.from_edges(7, [[0, 6], [2, 4], [4, 5]])]:
        components = {}
        for vertex, label in enumerate(policy.component_labels):
            components.setdefault(int(label), []).append(vertex)
        expected = set()
        for members in components.values():
            centre = policy.size if policy.size in members else members[(len(members) - 1) // 2]
            expected |= {(min(v, centre), max(v, centre)) for v in members if v != centre}
        assert edge_set(trees.stars(policy)) == expected, policy.name


def test_bfs_from_bottom_and_from_a_cell_off_the_middle():
    policy = policies.from_edges(4, [[0, 1], [1, 2], [2, 3], [0, 4], [3, 4]])
    tree = trees.bfs(policy, centre=BOTTOM)
    assert tree.name == f"bfs({policy.name}, centre=BOTTOM)" and tree.has_bottom is True
    assert edge_set(tree) == {(0, 4), (3, 4), (0, 1), (2, 3)}
    for build in (trees.bfs, trees.shortest_path):
        corner = build(policies.grid((3, 4)), centre=(0, 0))
        assert edge_set(corner) != edge_set(build(policies.grid((3, 4))))
        in_tree = dict(nx.single_source_shortest_path_length(_nx(corner), 0))
        assert in_tree == dict(nx.single_source_shortest_path_length(_nx(policies.grid((3, 4))), 0))


def test_bfs_counts_hops_and_shortest_path_counts_cell_distance():
    """On a 5-cycle with the long edge (0, 4) the BFS tree reaches 3 through 4 (two hops), the
    shortest-path tree through 1 and 2 (distance 3, not 4 + 1)."""
    policy = policies.from_edges(5, [[0, 4], [0, 1], [1, 2], [2, 3], [3, 4]])
    hops = dict(nx.single_source_shortest_path_length(_nx(trees.bfs(policy, centre=0)), 0))
    assert hops == {0: 0, 1: 1, 4: 1, 2: 2, 3: 2}
    assert {(1, 2), (2, 3), (0, 1)} <= edge_set(trees.shortest_path(policy, centre=0))
    # a ⊥ edge weighs 1: 3 is nearer 0 through ⊥ (1 + 1) than along the edge (0, 3) (3)
    assert edge_set(trees.shortest_path(policies.from_edges(4, [[0, 3], [0, 4], [3, 4]]), centre=0)) == {(0, 4), (3, 4)}


def test_edge_span_reads_each_kind_of_block():
    assert trees.edge_span(policies.from_edges(5, [[1, 3], [3, 4]])) == 2
    assert trees.edge_span(policies.from_edges(4, [[0, 1], [1, 4]])) == 1  # the ⊥ edge (1, ⊥) spans nothing
    assert trees.edge_span(policies.from_edges(4, [[1, 4]])) == 0
    assert trees.edge_span(policies.from_edges(4, [])) == 0
    assert trees.edge_span(policies.unbounded(4)) == 0
    assert trees.edge_span(policies.threshold(9, 3)) == 3
    assert trees.edge_span(policies.Policy((9,), [policies.CliqueEdges(np.array([3, 4, 6]))])) == 3
    assert trees.edge_span(policies.Policy((9,), [policies.CliqueEdges(np.array([2, 5])), policies.PairEdges(np.array([0]), np.array([1]))])) == 3


def test_candidates_are_the_named_trees_and_the_sparse_bound_is_sixteen_edges_a_cell():
    grid = policies.grid((5, 5))
    names = {name: tree.name for name, tree in trees.candidates(grid).items()}
    assert names == {"stars": "stars(grid((5, 5), theta=1))", "bfs": "bfs(grid((5, 5), theta=1), centre=middle)",
                     "mst": "mst(grid((5, 5), theta=1))", "line": "line((5, 5))", "snake": "snake((5, 5))",
                     "comb": "comb((5, 5), spine=2)"}
    assert trees.candidates(policies.threshold(10, 2))["hub"].name == "hub(10, theta=2)"
    assert set(trees.candidates(policies.line(10))) == {"line", "stars"}  # θ = 1: the hub tree is the line
    # every pair of 33 cells listed as edges: 528 = 16 · 33 edges, still sparse; 35 cells: 595 = 17 · 35, dense
    for k, sparse in [(33, True), (35, False)]:
        pairs = np.array(list(itertools.combinations(range(k), 2)))
        assert ({"bfs", "mst"} <= set(trees.candidates(policies.from_edges(k, pairs)))) is sparse


def test_named_trees_are_the_cached_candidates_or_built_on_demand():
    line = policies.line(5)
    assert trees.named(line, "line") is trees.candidates(line)["line"]
    assert trees.named(line, "stars") is trees.candidates(line)["stars"]
    hub = trees.named(line, "hub")  # θ = 1: no candidate, built with θ = 1
    assert hub.name == "hub(5, theta=1)" and edge_set(hub) == edge_set(trees.line(5))
    assert trees.named(policies.from_edges(5, []), "hub").name == "hub(5, theta=1)"  # no edge: θ = 1 all the same
    assert trees.named(policies.threshold(6, 3), "hub").name == "hub(6, theta=3)"
    grid = policies.grid((3, 4))
    assert trees.named(grid, "shortest_path").name == "shortest_path(grid((3, 4), theta=1), centre=middle)"
    assert trees.named(grid, "comb") is trees.candidates(grid)["comb"]
    unbounded = policies.unbounded(4)
    assert trees.named(unbounded, "stars").has_bottom is True
    assert _refusal(lambda: trees.named(line, "foo")) == (
        "unknown tree 'foo' for line(5); known trees: stars, bfs, shortest_path, mst, line, hub, snake, comb")
    assert _refusal(lambda: trees.named(line, None)) == (
        "unknown tree None for line(5); known trees: stars, bfs, shortest_path, mst, line, hub, snake, comb")
    assert _refusal(lambda: trees.named(grid, "hub")) == "the hub tree is for 1-D policies; grid((3, 4), theta=1) has shape (3, 4)"
    assert _refusal(lambda: trees.named("line(5)", "line"), TypeError) == "policy must be a blowfish_te Policy, got str"
    for name, policy in [("line", unbounded), ("hub", unbounded), ("snake", policies.unbounded((2, 3))), ("comb", policies.unbounded((2, 3)))]:
        assert _refusal(lambda p=policy, n=name: trees.named(p, n)) == (
            f"tree {name!r} has no BOTTOM vertex, which {policy.name} needs; use 'stars', 'bfs' or 'mst'")


# -- stretch: exact counts --------------------------------------------------------------------------


def test_stretch_counts_every_edge_a_tree_separates_across_blocks():
    policy = policies.grid((2, 2))  # two blocks: (0, 1), (2, 3) and (0, 2), (1, 3)
    measured = trees.stretch(policy, policies.from_edges(4, [[0, 1]]))
    assert (measured.maximum, measured.mean, measured.disconnected) == (math.inf, 1.0, 3)
    assert np.array_equal(measured.histogram, [0, 1])
    none = trees.stretch(policies.from_edges(3, []), trees.line(3))
    assert (none.maximum, none.mean, none.disconnected) == (0, 0.0, 0) and np.array_equal(none.histogram, [0])
    own = trees.stretch(policies.line(4), trees.line(4))
    assert (own.maximum, own.mean) == (1, 1.0) and np.array_equal(own.histogram, [0, 3]) and own.histogram.dtype == np.int64


def test_maximum_only_stretch_of_clique_blocks_is_exact():
    """histogram=False: a clique's diameter by the double sweep (from cell 0 of a star centred at 0
    the farthest cell is 1 away, the diameter 2), a split clique's crossing pairs counted exactly,
    every block read; no mean and an empty int64 histogram."""
    clique = policies.CliqueEdges
    quick = trees.stretch(policies.complete(5), trees.star(5, centre=0), histogram=False)
    assert (quick.maximum, quick.disconnected) == (2, 0) and math.isnan(quick.mean)
    assert quick.histogram.dtype == np.int64 and quick.histogram.size == 0
    two = policies.Policy((6,), [clique(np.array([0, 1, 2])), clique(np.array([3, 4, 5]))])
    split = policies.from_edges(6, [[0, 1], [3, 4]])  # pieces {0, 1}, {2}, {3, 4}, {5}: 2 + 2 pairs cross
    for tree in [split, policies.from_edges(6, [[0, 1], [1, 2], [3, 4]])]:
        full, quick = trees.stretch(two, tree), trees.stretch(two, tree, histogram=False)
        assert quick.disconnected == full.disconnected == (4 if tree is split else 2)
        assert quick.maximum == full.maximum == math.inf
    three = policies.Policy((6,), [clique(np.array([0, 1])), clique(np.array([2, 3, 4, 5]))])
    assert trees.stretch(three, trees.line(6), histogram=False).maximum == 3  # the second clique's diameter
    mixed = policies.Policy((8,), [clique(np.array([0, 1, 2])), policies.PairEdges(np.array([0]), np.array([7]))])
    quick = trees.stretch(mixed, trees.line(8), histogram=False)
    assert (quick.maximum, quick.disconnected) == (7, 0)
    assert trees.stretch(mixed, trees.line(8)).maximum == 7


def test_stretch_uses_the_rooted_forest_it_is_given():
    calls = []

    class Counting(RootedForest):
        def distances(self, u, v):
            calls.append(len(u))
            return super().distances(u, v)

    tree = trees.line(6)
    assert trees.stretch(policies.threshold(6, 2), tree, rooted=Counting(tree)).maximum == 2
    assert calls == [5, 4]
