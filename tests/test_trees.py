import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blowfish_te import BOTTOM, policies, transform, trees
from blowfish_te.forest import RootedForest

from conftest import edge_set, forests, graphs


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
