"""The Ordered Hierarchical plan: ε split between the S-node and H-node groups, each group's
Laplace scale Δ_g/ε_g from its brute-force sensitivity, the weighted rows, and the helpers."""

import inspect
import math
import re

import numpy as np
import pytest

from blowfish_te import mechanisms as M
from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te._grid import ceil_log
from blowfish_te.mechanisms.ordered import _interior_bottom, _s_nodes, oh_constants, oh_optimal_split
from blowfish_te.sensitivity import sensitivity
from blowfish_te.workloads import Boxes, Stacked

EPSILONS = (0.3, 4.0)


def brute_delta(dense: np.ndarray, policy) -> float:
    """max over the policy's edges of the L1 change of the rows when one record moves along the
    edge (⊥, index k, adds or removes a record): the L1 sensitivity of linear rows."""
    padded = np.hstack([dense, np.zeros((dense.shape[0], 1))])
    return max(float(np.abs(padded[:, u] - padded[:, v]).sum()) for u, v in policy.edges)


def gap_partition():
    """12 cells in the classes {0,1,2} {3} {4,5,6} {7} {8..11}: no move changes the cumulative
    counts s_2, s_3, s_6, s_7 or n, so S nodes at 3 and 7 (plain or ramped over 2) cost nothing."""
    return policies.partition([0, 0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 4])


def expected_share(policy, block, fanout, public):
    share = oh_optimal_split(policy.size, block, fanout)
    if not public:
        share = max(share, 1.0 / (ceil_log(block, fanout) + 1))
    return share


def check_plan(groups, weighted, policy, epsilon, share, tight=True):
    """Every group's Δ is its brute-force sensitivity and its scale Δ/ε_g; the weighted rows are the
    groups' rows times 1/scale (1 when Δ = 0) and cost at most ε under the policy."""
    eps_of = {"S": share * epsilon, "H": (1 - share) * epsilon}
    blocks, charged = [], 0.0
    for label, rows, delta, scale in groups:
        dense = rows.dense()
        assert delta == pytest.approx(brute_delta(dense, policy), abs=1e-12)
        assert delta == pytest.approx(sensitivity(rows, policy), abs=1e-12)
        assert scale == pytest.approx(delta / eps_of[label], rel=1e-12)
        weight = 1.0 / scale if delta > 0 else 1.0
        if delta > 0:
            charged += eps_of[label]
        blocks.append(dense * weight)
    np.testing.assert_allclose(weighted.dense(), np.vstack(blocks), rtol=1e-12, atol=0)
    total = brute_delta(weighted.dense(), policy)
    assert total <= epsilon * (1 + 1e-12)
    if tight:  # one edge attains every group's Δ
        assert total == pytest.approx(charged, rel=1e-9)
    return {label: scale for label, _, _, scale in groups}


@pytest.mark.parametrize("k, theta, fanout, spacing, both", [(12, 4, 2, None, True), (12, 4, 2, 2, True),
                                                             (16, 8, 4, None, False), (13, 5, 3, 3, True)])
def test_plan_scales_and_weights_under_threshold_policies(k, theta, fanout, spacing, both):
    policy = policies.threshold(k, theta)
    mech = M.OrderedHierarchical(fanout=fanout, spacing=spacing)
    block = spacing or theta
    share = expected_share(policy, block, fanout, public=True)
    seen = set()
    for epsilon in EPSILONS:
        groups, weighted = mech._plan(policy, epsilon)
        assert [g[0] for g in groups] == ["S", "H"]
        assert isinstance(weighted, Boxes)
        assert weighted.name == f"oh({k}, theta={theta}, spacing={block})"
        scales = check_plan(groups, weighted, policy, epsilon, share)
        seen.update(s < 1 for s in scales.values())
        # exactly 1/scale per row
        expected = np.concatenate([np.full(rows.num_queries, 1.0 / scale) for _, rows, _, scale in groups])
        assert np.array_equal(weighted.weights, expected)
        measured = mech.measurements(wl.prefix(k), policy, epsilon)
        np.testing.assert_array_equal(measured.dense(), weighted.dense())
        assert measured.name == weighted.name
    assert seen == ({True, False} if both else {False})  # scales below and above 1


@pytest.mark.parametrize("share", [0.2, 0.5, 0.85])
def test_plan_with_an_explicit_split(share):
    policy = policies.threshold(12, 4)
    for mech, args in ((M.OrderedHierarchical(fanout=2, split=share), ()), (M.OrderedHierarchical(fanout=2), ())):
        for epsilon in EPSILONS:
            if mech.split is None:
                groups, weighted = mech._plan(policy, epsilon, None, share)
            else:
                groups, weighted = mech._plan(policy, epsilon, *args)
            check_plan(groups, weighted, policy, epsilon, share)


def test_ramped_plan_is_stacked_with_exact_weights_and_name():
    policy = policies.threshold(12, 4)
    mech = M.OrderedHierarchical(fanout=2, spacing=3, ramp=2)
    share = expected_share(policy, 3, 2, public=True)
    for epsilon in (0.3, 12.0):  # scales above and below 1
        groups, weighted = mech._plan(policy, epsilon)
        assert isinstance(weighted, Stacked)
        assert weighted.name == "oh(12, theta=4, spacing=3)"
        scales = check_plan(groups, weighted, policy, epsilon, share, tight=False)
        assert (scales["S"] < 1) == (epsilon > 1)


@pytest.mark.parametrize("ramp", [None, 2])
def test_zero_sensitivity_group_gets_weight_one(ramp):
    policy = gap_partition()
    mech = M.OrderedHierarchical(fanout=2, spacing=4, ramp=ramp)
    share = expected_share(policy, 4, 2, public=False)
    for epsilon in EPSILONS:
        groups, weighted = mech._plan(policy, epsilon)
        deltas = {label: delta for label, _, delta, _ in groups}
        assert deltas["S"] == 0.0 and deltas["H"] > 0
        scales = check_plan(groups, weighted, policy, epsilon, share)
        assert scales["S"] == 0.0
        s_rows = groups[0][1]
        np.testing.assert_array_equal(weighted.dense()[: s_rows.num_queries], s_rows.dense())
        assert isinstance(weighted, Stacked if ramp else Boxes)
        assert weighted.name == "oh(12, theta=3, spacing=4)"


def test_default_share_when_n_is_measured():
    policy = policies.unbounded(6)  # ⊥ joins every cell: one block, the S node is n itself
    mech = M.OrderedHierarchical(fanout=2)
    assert oh_optimal_split(6, 6, 2) == 0.0
    assert mech._default_share(policy, 6, True) == 0.25  # 1 / (⌈log2 6⌉ + 1)
    assert mech._default_share(policy, 6, False) == 0.0
    for epsilon in EPSILONS:
        groups, weighted = mech._plan(policy, epsilon)
        assert [g[0] for g in groups] == ["S", "H"]
        s_rows = groups[0][1]
        np.testing.assert_array_equal(s_rows.dense(), np.ones((1, 6)))  # n
        assert weighted.name == "oh(6, theta=6, spacing=6)"
        check_plan(groups, weighted, policy, epsilon, 0.25)
        assert groups[0][3] == pytest.approx(1.0 / (0.25 * epsilon))


def test_default_share_with_public_n_is_equation_15():
    policy = policies.threshold(12, 4)
    mech = M.OrderedHierarchical(fanout=2)
    assert mech._default_share(policy, 4, True) == oh_optimal_split(12, 4, 2)
    assert M.OrderedHierarchical(fanout=2, split=0.7)._default_share(policy, 4, True) == 0.7


def test_single_group_gets_the_whole_budget():
    # n public, one block: no S node, the hierarchy takes all of ε
    policy = policies.threshold(8, 3)
    mech = M.OrderedHierarchical(fanout=2, spacing=8)
    for epsilon in EPSILONS:
        groups, weighted = mech._plan(policy, epsilon)
        assert [g[0] for g in groups] == ["H"]
        check_plan(groups, weighted, policy, epsilon, 0.0)
        assert weighted.name == "oh(8, theta=3, spacing=8)"
    # blocks of one cell: no hierarchy, the S nodes take all of ε
    policy = policies.line(6)
    mech = M.OrderedHierarchical(fanout=2, spacing=1)
    for epsilon in EPSILONS:
        groups, weighted = mech._plan(policy, epsilon, None, 0.3)
        assert [g[0] for g in groups] == ["S"]
        check_plan(groups, weighted, policy, epsilon, 1.0)


@pytest.mark.parametrize("share, kept", [(0.0, "H"), (1.0, "S")])
def test_group_without_budget_is_skipped(share, kept):
    policy = policies.threshold(12, 4)
    mech = M.OrderedHierarchical(fanout=2)
    for epsilon in EPSILONS:
        groups, weighted = mech._plan(policy, epsilon, None, share)
        assert [g[0] for g in groups] == [kept]
        check_plan(groups, weighted, policy, epsilon, share)


def test_overflowing_scales_are_refused():
    with pytest.raises(ValueError, match=re.escape("epsilon=1e-310 is too small: the noise scales overflow")):
        M.OrderedHierarchical(fanout=2, spacing=1)._plan(policies.line(6), 1e-310)
    with pytest.raises(ValueError, match=re.escape("epsilon=1e-310 is too small: the noise scales overflow")):
        M.OrderedHierarchical(fanout=2)._plan(policies.threshold(12, 4), 1e-310)
    # just above the overflow: finite scales
    groups, _ = M.OrderedHierarchical(fanout=2, spacing=1)._plan(policies.line(6), 1e-300)
    assert groups[0][3] == pytest.approx(1e300)


def test_plans_are_cached_per_policy():
    mech = M.OrderedHierarchical(fanout=2)
    first = mech._plan(policies.threshold(12, 4), 0.3)[1]
    second = mech._plan(policies.threshold(16, 4), 0.3)[1]
    assert first.domain == (12,) and second.domain == (16,)
    assert second.name == "oh(16, theta=4, spacing=4)"
    assert mech._measured_groups(policies.threshold(16, 4), None, None, None)[0].dense().shape == (3, 16)


def test_constructor_defaults():
    params = inspect.signature(M.OrderedHierarchical.__init__).parameters
    assert params["fanout"].default == 16
    mech = M.OrderedHierarchical()
    assert (mech.fanout, mech.split, mech.spacing, mech.ramp) == (16, None, None, None)
    mech = M.OrderedHierarchical(3, 0.25, 5, 2)
    assert (mech.fanout, mech.split, mech.spacing, mech.ramp) == (3, 0.25, 5, 2)


def test_constructor_validation_names_each_argument():
    with pytest.raises(ValueError, match=r"^fanout must be an integer >= 2, got 1$"):
        M.OrderedHierarchical(fanout=1)
    assert M.OrderedHierarchical(fanout=2).fanout == 2
    split = re.escape("split (ε_S / ε) must be")
    for bad in (0, 0.0, 1, 1.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="^" + split):
            M.OrderedHierarchical(split=bad)
    assert M.OrderedHierarchical(split=1e-9).split == 1e-9
    assert M.OrderedHierarchical(split=1 - 1e-9).split == 1 - 1e-9
    with pytest.raises(ValueError, match=re.escape("spacing (cells between S nodes) must be an integer >= 1, got 0")):
        M.OrderedHierarchical(spacing=0)
    assert M.OrderedHierarchical(spacing=1).spacing == 1
    with pytest.raises(ValueError, match=re.escape("ramp (cells an S node's step is spread over) must be an integer >= 1, got 0")):
        M.OrderedHierarchical(ramp=0)
    assert M.OrderedHierarchical(ramp=1).ramp == 1


def test_expected_error_refuses_a_2d_policy_by_name():
    policy = policies.grid((3, 3))
    with pytest.raises(ValueError, match="^ordered_hierarchical needs a 1-D ordered domain"):
        M.OrderedHierarchical().expected_error(wl.identity((3, 3)), 1.0, policy=policy)


def test_oh_constants_by_hand():
    # K = 31, θ = 16, f = 4: h = 2
    c1, c2 = oh_constants(31, 16, 4)
    assert c1 == pytest.approx(4 * 15 / 32)
    assert c2 == pytest.approx(8 * 3 * 8 * 31 / 32)  # 186
    # K = 7, θ = 8, f = 2: h = 3
    c1, c2 = oh_constants(7, 8, 2)
    assert c1 == pytest.approx(4 * (7 - 8) / 8)
    assert c2 == pytest.approx(8 * 1 * 27 * 7 / 8)  # 189
    c1, c2 = oh_constants(40, 8, 3)  # h = 2
    share = oh_optimal_split(40, 8, 3)
    assert share == pytest.approx(c1 ** (1 / 3) / (c1 ** (1 / 3) + c2 ** (1 / 3)))
    assert (c1, c2) == pytest.approx((4 * 32 / 41, 8 * 2 * 8 * 40 / 41))


def test_oh_optimal_split_with_nothing_to_split():
    assert oh_constants(1, 1, 2) == (0.0, 0.0)
    assert oh_optimal_split(1, 1, 2) == 0.5


def test_interior_bottom():
    assert not _interior_bottom(policies.from_edges(4, [[0, 1], [1, 2], [2, 3]]))  # no ⊥
    assert not _interior_bottom(policies.from_edges(4, [[0, 1], [1, 2], [2, 3], [3, 4]]))  # ⊥ at the end
    assert _interior_bottom(policies.from_edges(4, [[0, 1], [1, 2], [2, 3], [2, 4]]))  # ⊥ at cell K-2
    assert _interior_bottom(policies.from_edges(4, [[0, 4], [1, 2], [2, 3]]))
    assert M.OrderedHierarchical._theta(policies.from_edges(6, [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6]])) == 1
    assert M.OrderedHierarchical._theta(policies.from_edges(6, [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [4, 6]])) == 6


def test_s_nodes_exact_rows():
    np.testing.assert_array_equal(_s_nodes(8, np.array([1, 3, 7]), 1).dense(),
                                  np.tril(np.ones((8, 8)))[[1, 3, 7]])
    np.testing.assert_allclose(_s_nodes(8, np.array([1, 3, 7]), 2).dense(), [
        [1, 0.5, 0, 0, 0, 0, 0, 0],
        [1, 1, 1, 0.5, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 1, 1, 1],
    ])
    # a window reaching below cell 0 starts at cell 0
    np.testing.assert_allclose(_s_nodes(6, np.array([0, 5]), 2).dense(), [
        [1, 0.5, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 1],
    ])


def test_groups_exact_rows():
    policy = policies.threshold(8, 4)
    mech = M.OrderedHierarchical(fanout=2)
    s_rows, h_rows, block = mech._groups(policy)
    assert block == 4
    assert isinstance(s_rows, Boxes)
    np.testing.assert_array_equal(s_rows.dense(), [[1, 1, 1, 1, 0, 0, 0, 0]])
    lo, hi = h_rows.lo[:, 0].tolist(), h_rows.hi[:, 0].tolist()
    assert sorted(zip(lo, hi)) == sorted([(0, 1), (2, 3), (0, 0), (1, 1), (2, 2), (3, 3),
                                          (4, 5), (6, 7), (4, 4), (5, 5), (6, 6), (7, 7)])
    assert h_rows.name == "blocks(8, size=4, f=2)"
    # n measured: the S nodes end with the total at the last cell
    s_rows, _, block = M.OrderedHierarchical(fanout=2, spacing=3)._groups(policies.unbounded(7))
    assert block == 3
    np.testing.assert_array_equal(s_rows.dense(), np.tril(np.ones((7, 7)))[[2, 5, 6]])
    s_rows, _, _ = M.OrderedHierarchical(fanout=2)._groups(policies.unbounded(5))
    np.testing.assert_array_equal(s_rows.dense(), np.ones((1, 5)))
    # the mechanism's own spacing when none is passed
    assert M.OrderedHierarchical(fanout=2, spacing=2)._groups(policy)[2] == 2
    assert mech._groups(policy, spacing=2)[2] == 2


def test_unramped_s_nodes_are_plain_steps():
    policy = policies.threshold(12, 4)
    for mech in (M.OrderedHierarchical(fanout=2), M.OrderedHierarchical(fanout=2, spacing=3)):
        s_rows = mech._measured_groups(policy, None, None, None)[0]
        assert isinstance(s_rows, Boxes)
        assert isinstance(mech._plan(policy, 0.3)[1], Boxes)
    s_rows = M.OrderedHierarchical(fanout=2, spacing=3)._measured_groups(policy, None, None, None)[0]
    np.testing.assert_array_equal(s_rows.dense(), np.tril(np.ones((12, 12)))[[2, 5, 8]])
    assert math.isclose(sensitivity(s_rows, policy), 2.0)
