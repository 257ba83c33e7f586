"""Grid mechanisms (UGrid, AGrid), the Hilbert order and DAWA on a 2-D grid."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import blowfish_te as bt
from blowfish_te import datasets, policies
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import hilbert_order
from blowfish_te.mechanisms.plain import best_linear
from blowfish_te.testing import Replay, close

DATA = pathlib.Path(__file__).resolve().parents[3] / "shared" / "datasets" / "dpbench"
needs_data = pytest.mark.skipif(not (DATA / "2D" / "SF-CABS-E.npy").exists(), reason="DPBench data not beside the clone")


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (8, 8), (16, 16), (3, 5), (7, 2)])
def test_hilbert_order_visits_every_cell_once_and_steps_to_neighbours(shape):
    order = hilbert_order(shape)
    assert np.array_equal(np.sort(order), np.arange(shape[0] * shape[1]))
    rows, cols = np.divmod(order, shape[1])
    steps = np.abs(np.diff(rows)) + np.abs(np.diff(cols))
    if shape[0] == shape[1] and shape[0] & (shape[0] - 1) == 0:  # a full curve: every step is to a neighbour
        assert (steps == 1).all()


@given(side=st.integers(1, 300), parts=st.integers(1, 300))
def test_cells_find_their_interval_of_a_cut(side, parts):
    from blowfish_te.mechanisms.spatial import _cuts, _part_of

    cuts = _cuts(side, parts)
    position = np.arange(side)
    expected = np.searchsorted(cuts, position, side="right") - 1
    found = _part_of(position, np.full(side, side), np.full(side, min(parts, side)))
    assert np.array_equal(found, expected) and np.all(np.diff(cuts) > 0)


class DeclaredReplay(Replay):
    """:class:`Replay` that also keeps what each draw declares to :func:`add_laplace`: the
    sensitivity (which must bound the shift a neighbour causes) and the ε it buys, sensitivity / scale."""

    def __init__(self):
        super().__init__()
        self.declared, self.shifts = [], []

    def __call__(self, values, scale, rng, *, sensitivity, integer):
        if not self.replaying:
            self.declared.append((sensitivity, scale))
        else:
            shift = float(np.abs(np.asarray(values, dtype=np.float64) - self.inputs_replay[len(self.inputs)]).sum())
            self.shifts.append((shift, sensitivity))
        return super().__call__(values, scale, rng, sensitivity=sensitivity, integer=integer)


GRID_MECHANISMS = [("UGrid", {"c": 1.0}), ("AGrid", {"c": 1.0}), ("UGrid", {"total": 50.0}), ("AGrid", {"total": 50.0, "alpha": 0.3}),
                   ("UGrid", {"c": 100.0}), ("UGrid", {"c": 100.0, "select": False}), ("UGrid", {"c": 0.5, "total_share": 0.2}),
                   ("AGrid", {"c": 1.0, "select": False})]


@pytest.mark.slow
@pytest.mark.parametrize("name, kwargs", GRID_MECHANISMS, ids=lambda v: str(v))
def test_grid_mechanisms_cost_at_most_epsilon_for_every_neighbour(name, kwargs, monkeypatch):
    """Every unbounded neighbour (one record added at any cell) of a few 6 × 6 grids: every
    Laplace draw replayed — the record total, the private check's features (UGrid's bias probe
    at c = 100, where blocks have several cells), the grids or the plain fallback. Each draw's
    declared sensitivity bounds the shift, and the ε the draws declare adds up to ε exactly."""
    import blowfish_te.mechanisms.base as base_module
    import blowfish_te.mechanisms.spatial as spatial
    import blowfish_te.selection as selection

    mech = getattr(M, name)(**kwargs)  # built here, so a changed constructor shows in this test
    epsilon = 0.8
    workload = wl.random_rects((6, 6), 10, rng=0)
    for seed in range(3):
        x = np.random.default_rng(seed).integers(0, 20, (6, 6)).ravel()
        for cell in range(x.size):
            replay = DeclaredReplay()
            monkeypatch.setattr(spatial, "add_laplace", replay)
            monkeypatch.setattr(selection, "add_laplace", replay)
            monkeypatch.setattr(base_module, "add_laplace", replay)  # the plain fallback's Laplace
            first = mech.run(workload, x, epsilon, rng=seed)
            replay.replay()
            neighbour = x.copy()
            neighbour[cell] += 1
            second = mech.run(workload, neighbour, epsilon, rng=seed)
            assert close(second, first)  # identical outputs under the shifted noise
            assert replay.cost <= epsilon * (1 + 1e-9)
            assert all(shift <= sensitivity * (1 + 1e-9) for shift, sensitivity in replay.shifts)
            assert sum(sensitivity / scale for sensitivity, scale in replay.declared) == pytest.approx(epsilon, rel=1e-9)


class ShiftedNoise:
    """Stands in for add_laplace: records each draw's (count, scale) and adds ``shifts[i]`` to
    every value of the i-th draw instead of noise."""

    def __init__(self, *shifts):
        self.shifts, self.draws = list(shifts), []

    def __call__(self, values, scale, gen, *, sensitivity, integer):
        self.draws.append((np.size(values), scale))
        return np.asarray(values, dtype=np.float64) + self.shifts[len(self.draws) - 1]


@pytest.mark.parametrize("c, epsilon, blocks", [(10, 0.1, 11 * 11), (10, 1.0, 32 * 32), (5, 0.1, 16 * 16)])
def test_ugrid_cuts_the_grid_by_qardajis_rule(c, epsilon, blocks, monkeypatch):
    """M = N ε / c blocks wanted, square blocks of ⌊√(K/M)⌋ cells: on 64² with N = 10⁴ that is
    blocks of 6 (ε = 0.1: 11 × 11 blocks), 2 (ε = 1) and 4 (c = 5) cells a side, each measured
    with Laplace(1/ε)."""
    import blowfish_te.mechanisms.spatial as spatial

    x = np.random.default_rng(0).multinomial(10**4, np.full(64 * 64, 1 / 4096))
    noise = ShiftedNoise(0.0)
    monkeypatch.setattr(spatial, "add_laplace", noise)
    out = M.UGrid(c=c, total=10**4, select=False).run(wl.identity((64, 64)), x, epsilon, rng=0)
    assert noise.draws == [(blocks, 1.0 / epsilon)]
    assert np.isclose(out.sum(), 10**4)


def test_agrid_levels_follow_the_rule_and_combine_by_inverse_variance(monkeypatch):
    """120² cells of 70 records, ε = 0.01, c = 10, α = 1/2: m₁ = max(10, ⌊√(N ε/c)/4⌋) = 10
    coarse blocks a side, of ⌊120/10⌋ = 12 cells; each of N' = 10,080 records is cut into
    m₂ = ⌊√(N' (1-α) ε/(c/2))⌋ = 3 parts a side, of ⌊12/3⌋ = 4 cells (DPComp's whole-cell sides).
    A coarse count off by 8 moves its block by 8 · (1/V₁)/(1/V₁ + 1/V₂) = 8 · 9/10, V₁ = 2/ε₁²
    and V₂ = 9 · 2/ε₂² the variances of the coarse count and of its 9 fine ones (the paper's
    layout: first_apart off)."""
    import blowfish_te.mechanisms.spatial as spatial

    x = np.full(120 * 120, 70)
    noise = ShiftedNoise(8.0, 0.0)
    monkeypatch.setattr(spatial, "add_laplace", noise)
    out = M.AGrid(c=10, alpha=0.5, total=int(x.sum()), select=False, first_apart=False).run(wl.identity((120, 120)), x, 0.01,
                                                                                           rng=0)
    assert noise.draws == [(100, 200.0), (900, 200.0)]  # Laplace(1/(αε)) and Laplace(1/((1-α)ε))
    blocks = out.reshape(10, 12, 10, 12).sum(axis=(1, 3))
    assert np.allclose(blocks, 70 * 144 + 8 * 9 / 10)


def test_grid_mechanisms_say_where_the_total_comes_from():
    x = datasets.synthetic_2d((16, 16), 5000, rng=0).ravel()
    w = wl.random_rects((16, 16), 50, rng=0)
    bought = bt.answer(w, x, policies.unbounded((16, 16)), 1.0, "agrid", rng=0)
    assert "record total measured with 0.02·ε" in bought.choice
    public = bt.answer(w, x, policies.unbounded((16, 16)), 1.0, M.UGrid(total=5000), rng=0)
    assert "record total given as public" in public.choice
    # the bought total moves with the seed: it is never the true count read for free
    totals = {float(M.UGrid(total_share=0.5).run(w, x, 1.0, rng=s).sum()) for s in range(5)}
    assert len(totals) > 1


def test_grid_mechanisms_refuse_what_is_not_a_grid():
    x = datasets.synthetic(64, 400, rng=0)
    with pytest.raises(ValueError, match="2-D grid"):
        bt.answer(wl.prefix(64), x, policies.unbounded(64), 1.0, "ugrid", rng=0)
    grid = policies.grid((8, 8))
    with pytest.raises(ValueError, match="records.*DP policy"):
        bt.answer(wl.prefix((8, 8)), x, grid, 1.0, "agrid", rng=0, tree="stars")
    with pytest.raises(ValueError, match="alpha"):
        M.AGrid(alpha=1.0)
    with pytest.raises(ValueError, match="total_share"):
        M.UGrid(total_share=1.0)


@pytest.mark.slow
def test_dawa_on_a_grid_follows_the_chosen_order():
    x = datasets.synthetic_2d((16, 16), 20000, rng=1).ravel()
    w = wl.random_rects((16, 16), 100, rng=0)
    curve = M.DAWA(order="hilbert").run(w, x, 1e5, rng=0)
    rows = M.DAWA(order="rows").run(w, x, 1e5, rng=0)
    truth = w.matvec(x)
    assert np.allclose(curve, truth, rtol=0.05, atol=5) and np.allclose(rows, truth, rtol=0.05, atol=5)
    with pytest.raises(ValueError, match="order"):
        M.DAWA(order="zigzag")


@needs_data
def test_grid_accuracy_on_sf_cabs_e():
    """128², 2000 random rectangles, ε = 0.1, unbounded DP, 10 seeds (seeded regression):
    AGrid ≤ 175 and DAWA ≤ 300 per-query RMSE, both below HB's analytic 491."""
    x = datasets.coarsen(np.load(DATA / "2D" / "SF-CABS-E.npy"), (128, 128)).ravel()
    w = wl.random_rects((128, 128), 2000, rng=0)
    policy = policies.unbounded((128, 128))
    truth = w.matvec(x)
    hb = bt.answer(w, x, policy, 0.1, "hb", rng=0).expected_mse ** 0.5
    for name, bound in (("agrid", 175), ("dawa", 300)):
        mse = np.mean([np.mean((bt.answer(w, x, policy, 0.1, name, rng=s).answers - truth) ** 2) for s in range(10)])
        assert mse**0.5 <= min(bound, hb), name


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("name, records, epsilon", [("ADULT-2D", 10**6, 0.01), ("GOWALLA", 10**4, 0.1)])
def test_dawa_on_a_grid_is_not_worse_than_the_plain_release(name, records, epsilon):
    """DPBench's 2000 rectangles over 128², the DPBench sample (seed 0), 3 seeds (seeded
    regression): DAWA's mean RMSE within 1.10 times the plain release's analytic RMSE. Spikes
    inside empty regions (ADULT-2D) made the interval tiling along the Hilbert curve 1.7 times it
    and GOWALLA's sparse sample 1.36 times; the deviation quadtree is 0.5–0.8 times."""
    shape = (128, 128)
    x = datasets.dpbench_sample(np.load(DATA / "2D" / f"{name}.npy"), records, domain=shape, rng=0).ravel()
    w = wl.dpbench_ranges(shape, 2000, rng=0)
    truth = w.matvec(x)
    plain = (best_linear(w).expected_error(w, epsilon) / w.num_queries) ** 0.5
    rmse = [np.mean((M.DAWA().run(w, x, epsilon, rng=s) - truth) ** 2) ** 0.5 for s in range(3)]
    assert np.mean(rmse) <= 1.10 * plain


def test_hilbert_order_on_small_grids_is_the_classic_curve():
    """The classic curve (Wikipedia's d → (x, y), x the row): 2 × 2 is visited (0,0), (0,1),
    (1,1), (1,0); on 4 × 4 each cell holds the step at which it is visited; on 2 × 3 it is the
    4 × 4 curve with the cells outside the grid skipped."""
    assert hilbert_order((1, 1)).tolist() == [0]
    assert hilbert_order((2, 2)).tolist() == [0, 1, 3, 2]
    steps = np.array([[0, 3, 4, 5],
                      [1, 2, 7, 6],
                      [14, 13, 8, 9],
                      [15, 12, 11, 10]])
    assert np.array_equal(np.argsort(hilbert_order((4, 4))).reshape(4, 4), steps)
    assert hilbert_order((2, 3)).tolist() == [0, 3, 4, 1, 2, 5]


def test_grid_mechanisms_check_their_arguments():
    assert M.UGrid(c=0.5).c == 0.5 and M.AGrid(c=0.5).c == 0.5  # any c > 0, also below 1
    assert M.AGrid().alpha == 0.25
    for cls in (M.UGrid, M.AGrid):
        for c in (0, -1.0):
            with pytest.raises(ValueError, match="^c must be > 0"):
                cls(c=c)
        with pytest.raises(TypeError, match="^select must be True or False"):
            cls(select=1)
        assert cls(select=np.bool_(False)).select is False
    for alpha in (0, -0.5):
        with pytest.raises(ValueError, match="^alpha must be > 0"):
            M.AGrid(alpha=alpha)
    with pytest.raises(ValueError, match=r"^alpha must be in \(0, 1\)"):
        M.AGrid(alpha=1.0)
    with pytest.raises(TypeError, match="^first_apart must be True or False"):
        M.AGrid(first_apart="yes")
    assert M.AGrid().first_apart is True and M.AGrid(first_apart=np.bool_(False)).first_apart is False
    x = np.ones(64)
    for mech in (M.UGrid(), M.AGrid()):
        with pytest.raises(ValueError, match=rf"^{mech.name} partitions a 2-D grid of counts, got domain \(64,\); it runs under "
                                             "unbounded DP on the grid itself"):
            mech.run(wl.prefix(64), x, 1.0, rng=0)


class Spy:
    """Wraps add_laplace: records each draw's (count, scale) and draws the noise as usual."""

    def __init__(self):
        from blowfish_te.noise import add_laplace

        self.real, self.draws = add_laplace, []

    def __call__(self, values, scale, gen, *, sensitivity, integer):
        self.draws.append((np.size(values), scale))
        return self.real(values, scale, gen, sensitivity=sensitivity, integer=integer)


@pytest.mark.parametrize("name, kwargs, x, grid_draws", [
    # UGrid: one 8 × 8 block, a million records in one cell: its bias is far too large, the plain release runs
    ("UGrid", {"c": 1e6, "total": 1e6}, np.eye(1, 64, 9).ravel() * 10**6, 1),
    # UGrid: blocks of 2 × 2
    ("UGrid", {"c": 100.0, "total": 16 * 64, "select": False}, np.full(64, 16), 1),
    # AGrid: both levels; and on uneven dense data its check picks the plain release
    ("AGrid", {"total": 16 * 64, "select": False}, np.full(64, 16), 2),
    ("AGrid", {}, np.random.default_rng(0).integers(0, 2000, 64), 0),
], ids=["ugrid-plain", "ugrid-blocks", "agrid-levels", "agrid-plain"])
def test_grid_mechanisms_draw_all_noise_from_the_seed(name, kwargs, x, grid_draws, monkeypatch):
    """Same seed, same release, on every path (the grids and the plain fallback); another seed, other noise."""
    import blowfish_te.mechanisms.spatial as spatial

    mech, workload = getattr(M, name)(**kwargs), wl.random_rects((8, 8), 20, rng=0)

    spy = Spy()
    monkeypatch.setattr(spatial, "add_laplace", spy)
    first = mech.run(workload, x, 1.0, rng=7)
    assert len(spy.draws) == grid_draws  # the path the case is meant to take
    assert np.array_equal(mech.run(workload, x, 1.0, rng=7), first)
    assert np.array_equal(mech.run(workload, x, 1.0, rng=np.random.default_rng(7)), first)
    assert not np.array_equal(mech.run(workload, x, 1.0, rng=8), first)


def _draws_match(draws, expected):
    return [n for n, _ in draws] == [n for n, _ in expected] and np.allclose([s for _, s in draws], [s for _, s in expected])


@pytest.mark.parametrize("name", ["UGrid", "AGrid"])
@pytest.mark.parametrize("route", ["partition", "plain"])
def test_the_grids_check_reads_the_cost_along_the_curve_with_their_model(name, route, monkeypatch):
    """With ``select`` (the default): the total bought at ``total_share``·ε and DAWA's cost along
    the Hilbert curve (one ``measure``), read by the mechanism's model for the workload's class on
    a grid; a plain decision releases ``auto``'s strategy at ε less both."""
    import blowfish_te.mechanisms.spatial as spatial
    from blowfish_te.mechanisms.plain import plain_strategy
    from blowfish_te.selection import Decision, error_model

    x, epsilon, w = np.random.default_rng(3).integers(0, 9, 64), 0.8, wl.random_rects((8, 8), 20, rng=0)
    seen = []
    real_measure = spatial.measure

    def measure(values, eps, gen, **kwargs):
        features = real_measure(values, eps, gen, **kwargs)
        seen.append((np.array(values), eps, kwargs, features))
        return features

    monkeypatch.setattr(spatial, "measure", measure)
    monkeypatch.setattr(spatial, "decide", lambda features, model: seen.append(model) or Decision(route, "forced", 1.0, features))
    mech = getattr(M, name)()
    out = mech.run(w, x, epsilon, rng=5)
    (values, eps, kwargs, features), model = seen
    assert np.array_equal(values, x[hilbert_order((8, 8))]) and eps == epsilon
    assert kwargs == {"total": None, "total_budget": pytest.approx(0.02 * epsilon), "cost": True}
    from blowfish_te.mechanisms.plain import workload_class

    assert model == error_model(mech.name, 2, workload_class(w))
    if route == "plain":
        gen = np.random.default_rng(5)
        spatial.measure = real_measure  # the same draws, to leave the generator where the release did
        real_measure(x[hilbert_order((8, 8))], epsilon, gen, total=None, total_budget=0.02 * epsilon, cost=True)
        assert np.array_equal(out, plain_strategy(mech, w).run(w, x, epsilon - features.spent, gen))


def test_ugrid_cuts_a_rectangular_grid_into_square_blocks(monkeypatch):
    """4 × 9 cells, N = 10 (public), ε = 1, c = 10: one block wanted, of ⌊√36⌋ = 6 cells a side,
    cut short by the grid: columns 0-5 (24 cells, 6 records) and 6-8 (12 cells, 4 records)."""
    import blowfish_te.mechanisms.spatial as spatial

    x = np.zeros((4, 9), dtype=int)
    x[0, 0], x[3, 2], x[1, 7] = 4, 2, 4
    noise = ShiftedNoise(0.0)
    monkeypatch.setattr(spatial, "add_laplace", noise)
    out = M.UGrid(total=10.0, select=False).run(wl.identity((4, 9)), x.ravel(), 1.0, rng=0).reshape(4, 9)
    assert noise.draws == [(2, 1.0)]
    assert np.allclose(out[:, :6], 6 / 24) and np.allclose(out[:, 6:], 4 / 12)


def test_ugrid_takes_one_block_when_no_block_is_wanted(monkeypatch):
    """N ε/c below the smallest double (N = 1, ε = 10⁻³⁰, c = 10³⁰⁰): the whole 3 × 5 grid is one block."""
    import blowfish_te.mechanisms.spatial as spatial

    noise = ShiftedNoise(0.0)
    monkeypatch.setattr(spatial, "add_laplace", noise)
    out = M.UGrid(c=1e300, total=1.0, select=False).run(wl.identity((3, 5)), np.arange(15), 1e-30, rng=0)
    assert _draws_match(noise.draws, [(1, 1e30)])
    assert np.allclose(out, 7.0)


@pytest.mark.parametrize("kwargs, coarse", [({}, 12 * 12), ({"c": 20.0}, 10 * 10)])
def test_agrid_coarse_grid_follows_c(kwargs, coarse, monkeypatch):
    """N = 25200 (public), ε = 1 on 60 × 60 cells: m₁ = max(10, ⌊√(N ε/c)/4⌋) is ⌊50.2/4⌋ = 12
    at the default c = 10 (blocks of ⌊60/12⌋ = 5 cells a side) and max(10, ⌊35.5/4⌋) = 10 at
    c = 20 (blocks of 6); α = 1/4 by default: the coarse level at Laplace(1/(ε/4)), the fine one
    at Laplace(1/(3ε/4))."""
    import blowfish_te.mechanisms.spatial as spatial

    x = np.full(3600, 7)
    noise = ShiftedNoise(0.0, 0.0)
    monkeypatch.setattr(spatial, "add_laplace", noise)
    out = M.AGrid(total=25200.0, select=False, **kwargs).run(wl.identity((60, 60)), x, 1.0, rng=0)
    assert noise.draws[0] == (coarse, 4.0) and np.isclose(noise.draws[1][1], 4.0 / 3.0)
    assert np.allclose(out, x)


def test_agrid_cuts_each_coarse_block_by_its_own_count(monkeypatch):
    """40 × 40 cells, N = 14 (public), ε = 20, α = 1/2, c = 10: 10 × 10 coarse blocks of 4 × 4
    cells; a block of N' records is cut into m₂ = ⌊√(N' · 10 / 5)⌋ parts a side (at least 1),
    of ⌊4/m₂⌋ whole cells: one block for each of the 97 empty blocks, 2 × 2 blocks of 2 cells for
    2 and for 4 records, 4 × 4 single cells for 8 — 121 fine blocks. Without noise each fine
    block's count is spread over its cells."""
    import blowfish_te.mechanisms.spatial as spatial

    x = np.zeros((40, 40))
    x[0, 4], x[1, 9], x[3, 15] = 2, 4, 8
    noise = ShiftedNoise(0.0, 0.0)
    monkeypatch.setattr(spatial, "add_laplace", noise)
    out = M.AGrid(c=10, alpha=0.5, total=14.0, select=False, first_apart=False).run(wl.identity((40, 40)), x.ravel(), 20.0,
                                                                                    rng=0)
    assert _draws_match(noise.draws, [(100, 0.1), (121, 0.1)])
    expected = np.zeros((40, 40))
    expected[0:2, 4:6] = 0.5  # the top-left of 2 × 2 parts of block (0, 1)
    expected[0:2, 8:10] = 1.0  # the top-left of 2 × 2 parts of block (0, 2)
    expected[3, 15] = 8.0  # single cells in block (0, 3)
    assert np.allclose(out.reshape(40, 40), expected)


def test_agrid_keeps_the_first_row_and_column_apart(monkeypatch):
    """The grid above with first_apart (the default): every coarse block of the first row (column)
    that the fine level cuts keeps row (column) 0 as a part of its own and cuts the rest from row
    (column) 1; blocks left whole stay whole. Block (0, 1) is cut into row 0 and rows 1–2, 3, so
    its 2 records at (0, 4) spread over row 0's two cells instead of a 2 × 2 square; block (0, 2)'s
    4 records at (1, 9) over rows 1–2; block (0, 3)'s single cells are unchanged. Fine blocks: 6 in
    each of (0, 1) and (0, 2), 16 in (0, 3), 1 in each of the 97 empty blocks: 125."""
    import blowfish_te.mechanisms.spatial as spatial

    x = np.zeros((40, 40))
    x[0, 4], x[1, 9], x[3, 15] = 2, 4, 8
    noise = ShiftedNoise(0.0, 0.0)
    monkeypatch.setattr(spatial, "add_laplace", noise)
    out = M.AGrid(c=10, alpha=0.5, total=14.0, select=False).run(wl.identity((40, 40)), x.ravel(), 20.0, rng=0)
    assert _draws_match(noise.draws, [(100, 0.1), (125, 0.1)])
    expected = np.zeros((40, 40))
    expected[0, 4:6] = 1.0
    expected[1:3, 8:10] = 1.0
    expected[3, 15] = 8.0
    assert np.allclose(out.reshape(40, 40), expected)


@given(length=st.integers(1, 30), side=st.integers(1, 12), apart=st.booleans())
def test_fine_parts_tile_a_block_in_order(length, side, apart):
    """Along one axis a block's cells fall in parts 0, 1, …, parts − 1 in order, each part at most
    ``side`` cells; kept apart, the first cell is a part alone (when the block has more cells)."""
    from blowfish_te.mechanisms.spatial import _fine_parts

    offset = np.arange(length)
    parts, part = _fine_parts(np.array([length]), np.array([side]), np.array([apart]), offset, np.zeros(length, dtype=int))
    assert np.array_equal(np.unique(part), np.arange(parts[0])) and np.all(np.diff(part) >= 0)
    assert np.bincount(part).max() <= side
    if apart and length > 1:
        assert part[0] == 0 and part[1] == 1


def test_agrid_at_a_huge_epsilon_returns_the_data():
    """At ε = 10⁴⁰ both levels are single cells (the fine parts capped by the grid) and the noise vanishes."""
    x = np.random.default_rng(0).integers(1, 50, 144)
    out = M.AGrid(total=float(x.sum()), select=False).run(wl.identity((12, 12)), x, 1e40, rng=0)
    assert np.allclose(out, x, rtol=0, atol=1e-9)


def test_agrid_check_reads_the_total_and_the_levels_split_what_it_leaves(monkeypatch):
    """AGrid() checks by default: with N public the check buys the cost only (one draw), and
    when it partitions the levels share the rest of ε, α and 1 - α of it."""
    import blowfish_te.mechanisms.spatial as spatial
    import blowfish_te.selection as selection
    from blowfish_te.selection import Decision

    x, epsilon, alpha = np.full(256, 16), 1.0, 0.3
    check, levels = ShiftedNoise(0.0), ShiftedNoise(0.0, 0.0)
    monkeypatch.setattr(selection, "add_laplace", check)
    monkeypatch.setattr(spatial, "add_laplace", levels)
    monkeypatch.setattr(spatial, "decide", lambda features, model: Decision("partition", "forced", 0.5, features))
    out = M.AGrid(total=float(x.sum()), alpha=alpha).run(wl.identity((16, 16)), x, epsilon, rng=0)
    assert len(check.draws) == 1 and check.draws[0][0] == 2  # the two costs, the total public
    spent = 2 * 1.0 / check.draws[0][1]  # each cost's sensitivity is 1, at its own share
    assert 0 < spent < 0.05 * epsilon
    assert len(levels.draws) == 2
    assert np.isclose(levels.draws[0][1], 1 / (alpha * (epsilon - spent)))
    assert np.isclose(levels.draws[1][1], 1 / ((1 - alpha) * (epsilon - spent)))
    assert np.allclose(out, x)


@pytest.mark.parametrize("name", ["UGrid", "AGrid"])
def test_grid_mechanisms_buy_the_total_with_their_share(name, monkeypatch):
    """total_share = 0.2 at ε = 2: the total at Laplace(1/0.4), the grids at the 1.6 left (AGrid's
    first draw, its coarse level, at a quarter of it)."""
    import blowfish_te.mechanisms.spatial as spatial
    import blowfish_te.selection as selection

    total, grids = ShiftedNoise(0.0), ShiftedNoise(0.0, 0.0)
    monkeypatch.setattr(selection, "add_laplace", total)
    monkeypatch.setattr(spatial, "add_laplace", grids)
    mech = getattr(M, name)(total_share=0.2, select=False)
    mech.run(wl.identity((12, 12)), np.full(144, 3), 2.0, rng=0)
    assert _draws_match(total.draws, [(1, 1 / 0.4)])
    eps_grid = 1.6 * (0.25 if name == "AGrid" else 1.0)  # AGrid: its coarse level, α = 1/4
    assert np.isclose(grids.draws[0][1], 1 / eps_grid)


def test_grid_mechanisms_release_counts_with_the_exact_samplers():
    """With a SecureRandom: integer counts (block totals, both AGrid levels, the plain release's
    cells) get discrete Laplace, the check's real-valued cost the lattice scheme, and so does
    UGrid's bias probe when the check's noisy cost picks blocks of several cells (about 1 draw in
    20 here; the total is public, so it is not drawn)."""
    from blowfish_te.secure import SecureRandom, sampler_name

    x, w = np.full(36, 2), wl.identity((6, 6))
    for mech, integer, lattice in ((M.UGrid(total=72.0, select=False), 1, {0}), (M.UGrid(c=24.0, total=72.0), 1, {1, 2}),
                                   (M.AGrid(total=72.0, select=False), 2, {0})):
        rng = SecureRandom()
        out = mech.run(w, x, 2.0, rng=rng)
        tally = rng.tally()
        drawn = tally[sampler_name("lattice", rng.backend)]
        assert tally[sampler_name("integer", rng.backend)] == integer, mech
        assert drawn in lattice, mech
        assert sum(tally.values()) == integer + drawn
        if lattice == 0 and isinstance(mech, M.UGrid):
            assert np.array_equal(out, np.round(out))  # single-cell blocks: the noisy counts themselves


@given(rows=st.integers(1, 9), cols=st.integers(1, 9), block=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_block_spread_terms_match_the_dense_operator(rows, cols, block, seed):
    """Column norms of W(I − U) and Σ_q Σ_B a_q(B)² against W, U and the blocks' averaging written out."""
    from blowfish_te.mechanisms.spatial import _block_labels, _square_cuts, block_spread_terms

    w = wl.random_rects((rows, cols), 7, rng=seed)
    row_cuts, col_cuts = _square_cuts(rows, block), _square_cuts(cols, block)
    labels = _block_labels((rows, cols), row_cuts, col_cuts)
    members = np.eye(labels.max() + 1)[labels]  # K × blocks
    average = members / members.sum(axis=0)  # column B: 1/|B| on B's cells
    dense = w.tosparse().toarray()
    columns, noise_terms = block_spread_terms(w.lo, w.hi, (rows, cols), row_cuts, col_cuts)
    assert np.allclose(columns, ((dense - dense @ average @ members.T) ** 2).sum(axis=0))
    assert noise_terms == pytest.approx(float(((dense @ average) ** 2).sum()))


def _forced_blocks(monkeypatch):
    """UGrid's model made to pick the blocks, so its bias probe always runs; returns the probe's calls."""
    import blowfish_te.mechanisms.spatial as spatial
    from blowfish_te.selection import Decision

    calls = []
    terms = spatial.block_spread_terms
    monkeypatch.setattr(spatial, "decide", lambda features, model: Decision("partition", "forced", 0.5, features))
    monkeypatch.setattr(spatial, "block_spread_terms", lambda *a: calls.append(a) or terms(*a))
    return calls


@pytest.mark.parametrize("c", [100.0, 400.0])
def test_ugrid_bias_probe_costs_its_share_for_every_neighbour(c, monkeypatch):
    """The probe's path, replayed for every unbounded neighbour of a 6 × 6 grid: the noisy bias's
    declared sensitivity L = max_j ‖W(I − U)e_j‖ bounds its shift, the same route and output
    follow, and the draws' ε adds up to ε exactly."""
    import blowfish_te.mechanisms.base as base_module
    import blowfish_te.mechanisms.spatial as spatial
    import blowfish_te.selection as selection

    calls = _forced_blocks(monkeypatch)
    mech, epsilon, workload = M.UGrid(c=c), 0.8, wl.random_rects((6, 6), 10, rng=0)
    for seed in range(2):
        x = np.random.default_rng(seed).integers(0, 20, (6, 6)).ravel()
        for cell in range(x.size):
            replay = DeclaredReplay()
            for module in (spatial, selection, base_module):
                monkeypatch.setattr(module, "add_laplace", replay)
            first = mech.run(workload, x, epsilon, rng=seed)
            replay.replay()
            neighbour = x.copy()
            neighbour[cell] += 1
            assert close(mech.run(workload, neighbour, epsilon, rng=seed), first)
            assert all(shift <= sensitivity * (1 + 1e-9) for shift, sensitivity in replay.shifts)
            assert sum(sensitivity / scale for sensitivity, scale in replay.declared) == pytest.approx(epsilon, rel=1e-9)
    assert calls  # the probe ran


def test_ugrid_bias_probe_vetoes_spread_heavy_cells_and_keeps_even_data(monkeypatch):
    """16 × 16, 4 × 4 blocks (c chosen for it): a few heavy cells spread over their blocks cost far
    more than the plain release, and the probe says so; evenly spread records lose nothing to the
    blocks, and the probe lets them through."""
    calls = _forced_blocks(monkeypatch)
    w, epsilon, total = wl.random_rects((16, 16), 40, rng=1), 1.0, 10**5
    mech = M.UGrid(c=total * 0.95 / 16, total=total)  # N·ε_left/c = 16 blocks wanted: 4 × 4 cells each
    heavy = np.zeros(256, dtype=np.int64)
    heavy[[17, 90, 200]] = total // 3
    veto = mech.check(w, heavy, epsilon, np.random.default_rng(0))
    assert veto.route == "plain" and "bias probe" in veto.reason
    even = np.full(256, total // 256)
    kept = mech.check(w, even, epsilon, np.random.default_rng(0))
    assert kept.route == "partition" and "bias probe" in kept.reason
    from blowfish_te.selection import cost_share

    assert len(calls) == 2  # the public total is free: the two costs and the probe
    assert veto.spent == kept.spent == pytest.approx((2 * cost_share(256) + mech.probe_share) * epsilon)


def test_ugrid_single_cell_blocks_are_judged_exactly_without_a_probe(monkeypatch):
    """When the noisy total asks for a block per cell, UGrid is Laplace on the cells: no bias to
    probe, so nothing more is spent and the release compares that known error with the plain
    release's (on rectangles the plain strategy is far better)."""
    calls = _forced_blocks(monkeypatch)
    w, epsilon, total = wl.random_rects((16, 16), 40, rng=1), 1.0, 10**7
    mech = M.UGrid(total=total)
    x = np.full(256, total // 256)
    decision = mech.check(w, x, epsilon, np.random.default_rng(0))
    assert decision.route == "plain" and "1×1 blocks carry no bias" in decision.reason
    from blowfish_te.selection import cost_share

    assert decision.spent == pytest.approx(2 * cost_share(256) * epsilon)  # the costs only, no probe
    assert calls and calls[0][3][1] - calls[0][3][0] == 1  # the blocks' terms read at single cells


def test_ugrid_blocks_without_bias_for_the_queries_spend_nothing_on_a_probe(monkeypatch):
    """Queries made of whole 4 × 4 blocks: W(I − U) = 0, so the blocks' error is their noise alone,
    compared exactly with the plain release's, and no probe is bought."""
    from blowfish_te.selection import cost_share
    from blowfish_te.workloads import Boxes

    calls = _forced_blocks(monkeypatch)
    corners = np.array([(4 * i, 4 * j) for i in range(4) for j in range(4)])
    w, epsilon, total = Boxes((16, 16), corners, corners + 3), 1.0, 10**5
    rest = epsilon * (1 - 2 * cost_share(256) - 0.02)
    mech = M.UGrid(c=total * rest / 16 * 1.001, total=total)  # 16 blocks wanted: 4 × 4 cells each
    decision = mech.check(w, np.random.default_rng(0).integers(0, 800, 256), epsilon, np.random.default_rng(0))
    assert "4×4 blocks carry no bias" in decision.reason and len(calls) == 1
    assert decision.spent == pytest.approx(2 * cost_share(256) * epsilon)


def test_ugrid_refuses_a_probe_share_that_leaves_nothing_to_release():
    """``probe_share`` is named when it is outside (0, 1) or leaves no ε for the check and the release."""
    assert M.UGrid(probe_share=0.05).probe_share == 0.05
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="probe_share"):
            M.UGrid(probe_share=bad)
    with pytest.raises(ValueError, match=r"total_share \+ probe_share must leave ε"):
        M.UGrid(total_share=0.5, probe_share=0.4)
