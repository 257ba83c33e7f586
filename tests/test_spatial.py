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

from conftest import Replay

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "datasets" / "dpbench"
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


@pytest.mark.parametrize("mech", [M.UGrid(c=1.0), M.AGrid(c=1.0), M.UGrid(total=50.0), M.AGrid(total=50.0, alpha=0.3),
                                  M.UGrid(c=100.0), M.UGrid(c=100.0, select=False)], ids=repr)
def test_grid_mechanisms_cost_at_most_epsilon_for_every_neighbour(mech, monkeypatch):
    """Every unbounded neighbour (one record added at any cell) of a few 6 × 6 grids: every
    Laplace draw replayed — the record total, the private check's features (UGrid's bias probe
    at c = 100, where blocks have several cells), the grids or the plain fallback."""
    import blowfish_te.mechanisms.base as base_module
    import blowfish_te.mechanisms.spatial as spatial
    import blowfish_te.selection as selection

    epsilon = 0.8
    workload = wl.random_rects((6, 6), 10, rng=0)
    for seed in range(3):
        x = np.random.default_rng(seed).integers(0, 20, (6, 6)).ravel()
        for cell in range(x.size):
            replay = Replay()
            monkeypatch.setattr(spatial, "add_laplace", replay)
            monkeypatch.setattr(selection, "add_laplace", replay)
            monkeypatch.setattr(base_module, "add_laplace", replay)  # the plain fallback's Laplace
            first = mech.run(workload, x, epsilon, rng=seed)
            replay.replay()
            neighbour = x.copy()
            neighbour[cell] += 1
            second = mech.run(workload, neighbour, epsilon, rng=seed)
            assert np.allclose(first, second)  # identical outputs under the shifted noise
            assert replay.cost <= epsilon + 1e-9


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
    """120² cells of 70 records, ε = 0.01, c = 10, α = 1/2: m₁ = max(10, ⌈√(N ε/c)/4⌉) = 10
    coarse blocks a side, each of N' = 10,080 records cut into m₂ = ⌈√(N' (1-α) ε/(c/2))⌉ = 4
    a side. A coarse count off by 8 moves its block by 8 · (1/V₁)/(1/V₁ + 1/V₂) = 8 · 16/17,
    V₁ = 2/ε₁² and V₂ = 16 · 2/ε₂² the variances of the coarse count and of its 16 fine ones."""
    import blowfish_te.mechanisms.spatial as spatial

    x = np.full(120 * 120, 70)
    noise = ShiftedNoise(8.0, 0.0)
    monkeypatch.setattr(spatial, "add_laplace", noise)
    out = M.AGrid(c=10, alpha=0.5, total=int(x.sum()), select=False).run(wl.identity((120, 120)), x, 0.01, rng=0)
    assert noise.draws == [(100, 200.0), (1600, 200.0)]  # Laplace(1/(αε)) and Laplace(1/((1-α)ε))
    blocks = out.reshape(10, 12, 10, 12).sum(axis=(1, 3))
    assert np.allclose(blocks, 70 * 144 + 8 * 16 / 17)


def test_grid_mechanisms_say_where_the_total_comes_from():
    x = datasets.synthetic_2d((16, 16), 5000, rng=0).ravel()
    w = wl.random_rects((16, 16), 50, rng=0)
    bought = bt.answer(w, x, policies.unbounded((16, 16)), 1.0, "agrid", rng=0)
    assert "record total measured with 0.05·ε" in bought.choice
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
    AGrid ≤ 175 and Hilbert DAWA ≤ 300 per-query RMSE, both below HB's analytic 491."""
    x = datasets.coarsen(np.load(DATA / "2D" / "SF-CABS-E.npy"), (128, 128)).ravel()
    w = wl.random_rects((128, 128), 2000, rng=0)
    policy = policies.unbounded((128, 128))
    truth = w.matvec(x)
    hb = bt.answer(w, x, policy, 0.1, "hb", rng=0).expected_mse ** 0.5
    for name, bound in (("agrid", 175), ("dawa", 300)):
        mse = np.mean([np.mean((bt.answer(w, x, policy, 0.1, name, rng=s).answers - truth) ** 2) for s in range(10)])
        assert mse**0.5 <= min(bound, hb), name
