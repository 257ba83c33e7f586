"""Fit the error models of the private checks (:mod:`blowfish_te.selection`) on the DPBench shapes.

Run: ``python benchmarks/train_selection.py --data-dir ../shared/datasets/dpbench [--holdout-dir DIR]
[--seeds 5] [--workers 2] [--write]`` (or set $BLOWFISH_TE_DATA). ``--write`` rewrites
``blowfish_te/_selection_models.py`` with the fitted coefficients (with ``--only NAMES`` and
``--ndim D``, those mechanisms' models of that dimension; the others are kept); ``--holdout-dir`` adds shapes
(``.npy`` histograms: 1-D of 4096 cells, 2-D of 256²) that are only scored, never fitted;
``--synthetic`` adds seeded 2-D shapes DPBench lacks to the training shapes (:func:`synthetic_shapes`).

For every shape, scale (DPBench's generator, ``datasets.dpbench_sample``, seed 0) and ε, and for
every data-dependent mechanism and workload class (1-D: the 4096 cells and the 4096 prefix sums;
2-D, 128²: the cells and DPBench's 2000 rectangles), it measures the mean squared error of the
mechanism's partition branch over ``--seeds`` seeds, the plain branch's at the same ε (its
analytic error, or, where the release post-processes it — smoothed counts, consistent 1-D prefix
answers —, measured over the same seeds; partition answers to 1-D prefixes are made consistent too) and
the features without noise (N·ε/K and DAWA's cost over aligned dyadic tilings, without and with
its guards, in units of K/ε). A release reads the features with Laplace noise of a known scale
(the mechanism's shares of ε), so each cell enters the fit as ``DRAWS`` noisy copies: a
least-squares fit of log10(error ratio) on the quadratic surface of
:class:`~blowfish_te.selection.ErrorModel` over the copies predicts from what a release sees; a
cost-weighted refinement replaces it where it makes cheaper picks on the training cells
(:func:`fit`). The report lists per cell the branch the model picks from the exact features and,
over fresh noisy copies, the mean and the worst cost of its picks (error over the better branch's).

``--only`` may name a registered mechanism the library does not fit (an installed plug-in with the
tag ``predicts_error``): its range-workload models are measured and fitted like the library's,
printed for its own ``model()`` (``--write`` leaves them out of the library's table), and
``--candidates`` scores ``adaptive``'s choice with it offered.

``--save-rows FILE`` keeps the measured cells (JSON); ``--rows FILE`` refits from them without
measuring again. ``--thresholds`` instead chooses each model's decision threshold on shapes held
out one at a time (:func:`held_out_threshold`) and, with ``--write``, writes only those: the
shipped coefficients stay (the held-out fits rerun the same fitting procedure, so a threshold
stays valid when that procedure refits the model). ``--candidates`` scores ``adaptive``'s choice
on range workloads over shapes held out one at a time (:func:`held_out_choice`), with the
mechanisms it is offered and with every one that has rows
(``blowfish_te.mechanisms.adaptive.NOT_OFFERED`` names the ones kept out). ``--twins TRIALS``
lists, per model, pairs of cells on opposite sides of the crossing whose features a release can
hardly tell apart (:func:`twins`): a lower bound, for any rule reading those features, on the
worst decision over TRIALS trials of each.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import pprint
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from _measure import Recorder, add_options

import blowfish_te as bt
from blowfish_te import datasets, policies
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te._selection_models import COEFFICIENTS, EXCESS_MAX, LEAST_SQUARES, SCALE_RANGES, THRESHOLDS
from blowfish_te.mechanisms.datadependent import SMOOTHING_COST
from blowfish_te.mechanisms.partition_then_transform import plain_release
from blowfish_te.mechanisms.plain import best_linear, best_plan_under
from blowfish_te.mechanisms.spatial import hilbert_order
from blowfish_te.partitions import BUCKET_GUARD, tree_costs
from blowfish_te.selection import MODEL_SPLIT, ErrorModel, Features, cost_share, measure, total_share
from blowfish_te.smoothing import consistent_prefix_answers

K_1D = 4096
SHAPE_2D = (128, 128)
SCALES = {1: (10**3, 10**4, 10**5, 10**6, 10**7), 2: (10**4, 10**5, 10**6, 10**7)}
EPSILONS = (0.01, 0.1)
#: (mechanism, dimension, workload class): the mechanisms whose check reads a model.
KEYS = [("dawa", 1, "cells"), ("dawa", 1, "ranges"), ("privtree", 1, "cells"), ("privtree", 1, "ranges"),
        ("partition_then_transform", 1, "cells"),
        ("dawa", 2, "cells"), ("dawa", 2, "ranges"), ("privtree", 2, "cells"), ("privtree", 2, "ranges"),
        ("agrid", 2, "cells"), ("agrid", 2, "ranges"), ("ugrid", 2, "cells"), ("ugrid", 2, "ranges")]
#: The comment above the least-squares table in ``blowfish_te/_selection_models.py``.
LEAST_SQUARES_DOC = ("#: The least-squares fits of the models whose decision fit above is the cost-weighted refinement:\n"
                     "#: their predictions compare across mechanisms (``selection.error_model(..., calibrated=True)``).\n")
#: The comment above the thresholds' table.
THRESHOLDS_DOC = ("#: Decision thresholds below 1 (``ErrorModel.threshold``), chosen by leave-one-shape-out validation\n"
                  "#: (``--thresholds``); every other model partitions below 1.\n")
#: Noisy copies of each cell's features in the fit (and, with another seed, in the report).
DRAWS = 30


def shapes(folder, ndim: int) -> dict[str, np.ndarray]:
    """The ``.npy`` histograms of ``ndim`` dimensions under ``folder`` (DPBench's 1D/ or 2D/)."""
    out = {}
    if folder is None:
        return out
    for path in sorted(pathlib.Path(folder).rglob("*.npy")):
        x = np.load(path, allow_pickle=False)
        if x.ndim == ndim and x.sum() > 0:
            out[path.stem] = np.rint(x).astype(np.int64)
    return out


def synthetic_shapes(ndim: int) -> dict[str, np.ndarray]:
    """Seeded 256² grids of shapes DPBench's 2-D sets lack, for ``--synthetic``: smooth mixtures
    of Gaussian bumps with every fourth row (and every third column) of 128² empty, as when an
    attribute's values are coarser than the grid (a comb; real sets such as a 2-D medical table
    have one); a grid whose first row and column hold half the records (zero-inflated
    attributes); tight clusters; and a smooth mixture. None in 1-D."""
    if ndim != 2:
        return {}
    side, gen = 256, np.random.default_rng(2026)
    rows, cols = np.mgrid[0:side, 0:side]

    def bumps(count: int) -> np.ndarray:
        field = np.zeros((side, side))
        for _ in range(count):
            (row, col), (height, width) = gen.uniform(20, 236, 2), gen.uniform(15, 60, 2)
            field += gen.uniform(0.3, 1) * np.exp(-((rows - row) ** 2 / (2 * height**2) + (cols - col) ** 2 / (2 * width**2)))
        return field

    def zero_inflated(first_row: float, first_col: float, records: int = 4_000_000) -> np.ndarray:
        r = np.where(gen.random(records) < first_row, 0, np.minimum(side - 1, 1 + gen.lognormal(3.2, 0.8, records).astype(int)))
        c = np.where(gen.random(records) < first_col, 0, np.minimum(side - 1, 1 + gen.lognormal(3.7, 0.6, records).astype(int)))
        return np.bincount(r * side + c, minlength=side * side).reshape(side, side).astype(float)

    def clusters(records: int = 4_000_000, count: int = 30, spread: float = 8.0) -> np.ndarray:
        centers, weights = gen.uniform(20, 236, (count, 2)), gen.dirichlet(np.ones(count))
        points = np.clip(np.rint(centers[gen.choice(count, records, p=weights)] + gen.normal(0, spread, (records, 2))),
                         0, side - 1).astype(int)
        return np.bincount(points[:, 0] * side + points[:, 1], minlength=side * side).reshape(side, side).astype(float)

    row_comb, col_comb = (np.arange(side) % 8 < 6)[:, None], (np.arange(side) % 6 < 4)[None, :]
    made = {"SYN-COMB-ROWS": bumps(6) * row_comb, "SYN-COMB-BOTH": bumps(6) * row_comb * col_comb,
            "SYN-ZEROS": zero_inflated(0.5, 0.4), "SYN-CLUSTERS": clusters(), "SYN-SMOOTH": bumps(3)}
    return {name: np.rint(grid / grid.sum() * 1e8).astype(np.int64) for name, grid in made.items()}


_WORKLOADS: dict = {}
_PLAIN: dict = {}


def workload(ndim: int, kind: str):
    """The class's workload, one object per process (plans are cached per workload object)."""
    if (ndim, kind) not in _WORKLOADS:
        if ndim == 1:
            _WORKLOADS[ndim, kind] = wl.identity(K_1D) if kind == "cells" else wl.prefix(K_1D)
        else:
            _WORKLOADS[ndim, kind] = wl.identity(SHAPE_2D) if kind == "cells" else wl.dpbench_ranges(SHAPE_2D, 2000, rng=0)
    return _WORKLOADS[ndim, kind]


def partition_branch(name: str, w, kind: str, x: np.ndarray, eps: float, seed: int, scale: float) -> np.ndarray:
    """The answers of ``name``'s data-dependent branch, as the checked release runs it (buckets
    priced by the scale for histogram-like workloads)."""
    gen = np.random.default_rng(seed)
    priced = scale if kind == "cells" else None
    if name == "dawa":
        mech = M.DAWA()
        ratio = mech.split(w)[0]
        answers = mech.partitioned(w, x, ratio * eps, (1 - ratio) * eps, gen, scale=priced)
    elif name == "partition_then_transform":
        policy = policies.line(K_1D)
        mech = M.PartitionThenTransform()
        answers = mech.partitioned(w, x, policy, eps, mech.split(w, policy) * eps, gen, "", scale=priced).answers
    else:
        answers = M.get_mechanism(name).unchecked().run(w, x, eps, gen)  # the grids, PrivTree and plug-ins
    return consistent_prefix_answers(w.query_bounds(), np.asarray(answers, dtype=np.float64))  # as the release answers


def plugin_keys(names, ndim: int | None) -> list[tuple[str, int, str]]:
    """(name, dimension, "ranges") for every name in ``names`` that the library does not fit
    itself and that is a registered mechanism predicting its error (an installed plug-in, say):
    the range workloads ``adaptive`` would offer it, in each dimension it fits."""
    library = {k[0] for k in KEYS}
    keys = []
    for name in names:
        if name in library:
            continue
        tags = M.get_mechanism(name).tags
        if not tags.predicts_error:
            raise SystemExit(f"{name} does not predict its error (tag predicts_error), so adaptive would not offer it")
        keys += [(name, d, "ranges") for d in (1, 2) if ndim in (None, d) and not (tags.needs_grid and d == 1)]
    return keys


def plain_error(name: str, w, eps: float) -> float:
    """The plain release's analytic per-query MSE at ``eps`` (under the line policy for PtT),
    computed once per workload at ε = 1: every analytic error scales as 1/ε²."""
    key = (name == "partition_then_transform", id(w))
    if key not in _PLAIN:
        if key[0]:
            _PLAIN[key] = best_plan_under(w, policies.line(K_1D))[1].expected_mse
        else:
            _PLAIN[key] = best_linear(w).expected_error(w, 1.0) / w.num_queries
    return _PLAIN[key] / (eps * eps)


def plain_branch_error(name: str, w, kind: str, x: np.ndarray, eps: float, seeds: int, cost: float) -> float:
    """The plain branch's per-query MSE as the checked release runs it, measured over ``seeds``
    seeds where the release post-processes it: for DAWA and PtT on cells (histograms), Laplace
    counts smoothed when the cost reads below ``SMOOTHING_COST``; on 1-D prefixes (under DP), the
    plain strategy's answers made consistent. Elsewhere the analytic error of :func:`plain_error`."""
    truth = np.asarray(w.matvec(x), dtype=np.float64)
    if kind == "ranges" and name != "partition_then_transform" and len(w.domain) == 1:
        strategy, bounds = best_linear(w), w.query_bounds()
        runs = [consistent_prefix_answers(bounds, np.asarray(strategy.run(w, x, eps, np.random.default_rng(s)), dtype=np.float64))
                for s in range(seeds)]
        return float(np.mean([np.mean((a - truth) ** 2) for a in runs]))
    if kind != "cells" or name not in ("dawa", "partition_then_transform") or cost >= SMOOTHING_COST:
        return plain_error(name, w, eps)
    if name == "dawa":  # with the check's noisy total, as the release smooths (at all of ε, as the partition branch)
        mech = M.DAWA()
        layout = mech.layout(w.domain)
        runs = []
        for s in range(seeds):
            gen = np.random.default_rng(s)
            runs.append(mech.plain(w, x, eps, gen, layout, measure(x[layout], eps, gen)))
    else:
        policy = policies.line(K_1D)
        estimator, chosen = best_plan_under(w, policy)
        runs = [plain_release(w, x, policy, eps, np.random.default_rng(s), estimator, chosen, True, "").answers
                for s in range(seeds)]
    return float(np.mean([np.mean((np.asarray(a) - truth) ** 2) for a in runs]))


def exact_features(flat: np.ndarray, ndim: int, eps: float) -> dict[str, float]:
    """The checks' features of the cells ``flat`` (1-D, or 128² in row order) at ``eps`` without
    noise: N·ε/K and DAWA's cost over aligned dyadic tilings along its layout, without and with its
    guards, in units of K/ε."""
    order = np.arange(flat.size) if ndim == 1 else hilbert_order(SHAPE_2D)
    k = flat.size
    price, guard = 1.0 / ((1 - MODEL_SPLIT) * eps), BUCKET_GUARD * 2.0 / (MODEL_SPLIT * eps)
    cost, guarded = tree_costs(flat[order], [price, price + guard]) / (k / eps)
    return dict(scale=float(flat.sum()) * eps / k, cost=float(cost), guarded_cost=float(guarded))


def measure_cell(job) -> list[dict]:
    """Every model's row for one (shape, scale, ε)."""
    label, data, ndim, scale, eps, seeds, keys = job
    domain = K_1D if ndim == 1 else SHAPE_2D
    x = datasets.dpbench_sample(data, scale, domain=domain, rng=0)
    flat = x.reshape(-1)
    k = flat.size
    features = exact_features(flat, ndim, eps)
    rows = []
    for name, dim, kind in keys:
        if dim != ndim:
            continue
        w = workload(ndim, kind)
        truth = np.asarray(w.matvec(flat), dtype=np.float64)
        errors = [float(np.mean((np.asarray(partition_branch(name, w, kind, flat, eps, s, features["scale"])) - truth) ** 2))
                  for s in range(seeds)]
        rows.append(dict(shape=label, records=scale, epsilon=eps, key=(name, ndim, kind), partition=float(np.mean(errors)),
                         plain=plain_branch_error(name, w, kind, flat, eps, seeds, features["cost"]), cells=k, **features))
    return rows


def feature_noise(name: str, k: int) -> tuple[float, float]:
    """Laplace scales of the features' noise as ``name``'s check draws it over ``k`` cells, in the
    features' units: (on N·ε/K — 0 where the total is public —, on each cost in K/ε)."""
    if name == "partition_then_transform":  # under line: the total is public, a record moves (sensitivity 2)
        return 0.0, 2.0 / (cost_share(k, 2) * k)
    share = 0.02 if name in ("agrid", "ugrid") else total_share(k)  # the grids buy their total at 0.02·ε
    return 1.0 / (share * k), 1.0 / (cost_share(k) * k)


def features_of(r, gen=None) -> Features:
    """The row's features, exact or (with ``gen``) as one release reads them."""
    scale, cost, guarded = r["scale"], r["cost"], r["guarded_cost"]
    if gen is not None:
        on_scale, on_cost = feature_noise(r["key"][0], r["cells"])
        if on_scale:
            scale += gen.laplace(0, on_scale)
        cost, guarded = np.array([cost, guarded]) + gen.laplace(0, on_cost, 2)
    return Features(scale, cost, 1, 1.0, 0.0, True, guarded)


def model_of(key, coefficients, threshold: float = 1.0) -> ErrorModel:
    return ErrorModel(str(key), coefficients, SCALE_RANGES[key[1]], EXCESS_MAX, cost_bound=key[2] == "cells",
                      threshold=threshold)


def noisy_design(rows, key, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The surface's terms over ``DRAWS`` noisy copies of every row, and each copy's log10 ratio."""
    gen, surface = np.random.default_rng(seed), model_of(key, ())
    terms = np.array([surface.terms(features_of(r, gen)) for r in rows for _ in range(DRAWS)])
    return terms, np.repeat(np.log10([r["partition"] / r["plain"] for r in rows]), DRAWS)


def mean_costs(coefficients, rows, key, seed: int = 2, threshold: float = 1.0) -> np.ndarray:
    """Per row, the mean over ``DRAWS`` noisy readings of the pick's error over the better branch's."""
    model, gen = model_of(key, coefficients, threshold), np.random.default_rng(seed)
    out = []
    for r in rows:
        truth = r["partition"] / r["plain"]
        out.append(np.mean([(truth if model.predict(features_of(r, gen)) < threshold else 1.0) / min(truth, 1.0)
                            for _ in range(DRAWS)]))
    return np.array(out)


def fit(rows, key) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Least squares of the log ratio over noisy copies of every row; then the same surface
    refined by a cost-weighted logistic loss — each copy on the side of the crossing its true
    ratio lies, weighted by |log ratio|, what a wrong pick there costs — kept only where it lowers
    the largest mean cost of the training cells' picks by a tenth at least, and their geometric
    mean too (a refinement that gains less is as likely to be fitting those cells' noise).
    Returns (the decision's fit, the least-squares fit): only the second predicts magnitudes that
    compare across mechanisms."""
    from scipy.optimize import minimize

    terms, target = noisy_design(rows, key, seed=1)
    least_squares, *_ = np.linalg.lstsq(terms, target, rcond=None)
    side, weight = np.where(target < 0, 1.0, -1.0), np.abs(target) + 0.01

    def loss(a):
        return float(np.sum(weight * np.logaddexp(0.0, 6.0 * side * (terms @ a)))) / target.size + 1e-4 * float(a @ a)

    weighted = minimize(loss, least_squares, method="L-BFGS-B").x
    costs = {name: mean_costs(c, rows, key) for name, c in (("least squares", least_squares), ("cost-weighted", weighted))}
    better = (costs["cost-weighted"].max() <= 0.9 * costs["least squares"].max()
              and np.mean(np.log(costs["cost-weighted"])) <= np.mean(np.log(costs["least squares"])))
    chosen = weighted if better else least_squares
    print(f"{key}: {'cost-weighted' if better else 'least squares'} fit "
          f"(largest mean cost {costs['least squares'].max():.3f} by least squares, {costs['cost-weighted'].max():.3f} weighted)")
    return tuple(float(round(c, 4)) for c in chosen), tuple(float(round(c, 4)) for c in least_squares)


def report(key, coefficients, rows, title: str, threshold: float = 1.0) -> float:
    """Per cell: the pick from the exact features, and the mean and worst cost of the picks over
    ``DRAWS`` noisy readings; returns the largest mean."""
    model, gen = model_of(key, coefficients, threshold), np.random.default_rng(2)
    print(f"\n{title} {key}: {len(rows)} cells")
    worst = 1.0
    for r in sorted(rows, key=lambda r: (r["shape"], r["records"], r["epsilon"])):
        truth = r["partition"] / r["plain"]
        predicted = model.predict(features_of(r))
        chose = "partition" if predicted < threshold else "plain"
        costs = [(truth if model.predict(features_of(r, gen)) < threshold else 1.0) / min(truth, 1.0) for _ in range(DRAWS)]
        worst = max(worst, float(np.mean(costs)))
        flag = f"  <-- costs {np.mean(costs):.2f} (worst reading {max(costs):.2f})" if max(costs) > 1.0001 else ""
        print(f"  {r['shape'][:14]:14s} {r['records']:>9.0e} {r['epsilon']:5.2f}  N·ε/K {r['scale']:9.3g}  cost {r['cost']:6.3f}"
              f"  excess {features_of(r).excess:6.2f}  ratio {truth:8.3f}  predicted {predicted:8.3f}  {chose}{flag}")
    print(f"  largest mean cost of the picks: {worst:.3f}")
    return worst


#: Decision thresholds tried by :func:`held_out_threshold`.
THRESHOLD_GRID = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)


def held_out_threshold(rows, key) -> tuple[float, dict[float, tuple[float, float]]]:
    """The decision threshold of ``key``'s model chosen on shapes held out one at a time: for
    each shape, the model fitted (:func:`fit`) on the other shapes decides that shape's cells at
    every threshold of :data:`THRESHOLD_GRID` (mean cost of the picks over noisy readings, as
    :func:`mean_costs`); the threshold with the smallest largest mean cost over all cells (to two
    decimals), the largest such: a threshold moves only where it lowers the worst held-out cost (a
    gain in the geometric mean alone moved PrivTree's 1-D ranges model to 0.5 and added flips of
    up to 2.1 times on the report's cells). Returns it and, per threshold, (largest, geometric
    mean) of the held-out costs."""
    import contextlib
    import io

    held_costs = {tau: [] for tau in THRESHOLD_GRID}
    for shape in sorted({r["shape"] for r in rows}):
        train, held = [r for r in rows if r["shape"] != shape], [r for r in rows if r["shape"] == shape]
        with contextlib.redirect_stdout(io.StringIO()):
            coefficients = fit(train, key)[0]
        for tau in THRESHOLD_GRID:
            held_costs[tau].extend(mean_costs(coefficients, held, key, threshold=tau))
    summary = {tau: (float(np.max(c)), float(np.exp(np.mean(np.log(c))))) for tau, c in held_costs.items()}
    best = min(THRESHOLD_GRID, key=lambda tau: (round(summary[tau][0], 2), -tau))
    return best, summary


def held_out_choice(rows, ndim: int, names) -> np.ndarray:
    """Per cell (range workloads on ``ndim`` dimensions), the mean RMSE of ``adaptive``'s choice
    among ``names`` (DAWA first) over the best of the plain release and every mechanism with
    rows, each shape held out in turn: the models (:func:`fit`) of the other six shapes read
    ``DRAWS`` noisy copies of the cell's features (as the release reads DAWA's), the lowest
    least-squares prediction is chosen and runs where its decision model puts it below its
    threshold, else the plain release."""
    import contextlib
    import io

    keys = sorted({r["key"] for r in rows if r["key"][1] == ndim and r["key"][2] == "ranges"})
    by_cell: dict = {}
    for r in rows:
        if r["key"] in keys:
            by_cell.setdefault((r["shape"], r["records"], r["epsilon"]), {})[r["key"][0]] = r
    cells = {c: v for c, v in sorted(by_cell.items()) if len(v) == len(keys) and "dawa" in v}
    models = {}
    for shape in sorted({c[0] for c in cells}):
        for key in keys:
            if key[0] in names:
                with contextlib.redirect_stdout(io.StringIO()):
                    decision, least = fit([r for r in rows if r["key"] == key and r["shape"] != shape], key)
                models[shape, key[0]] = (model_of(key, least), model_of(key, decision, THRESHOLDS.get(key, 1.0)))
    gen, costs = np.random.default_rng(7), []
    for (shape, _, _), by_name in cells.items():
        plain = by_name["dawa"]["plain"]
        best = min([plain] + [r["partition"] for r in by_name.values()])
        picks = []
        for _ in range(DRAWS):
            features = features_of(by_name["dawa"], gen)
            predicted = {n: models[shape, n][0].log_ratio(features) for n in names}
            chosen = min(predicted, key=predicted.get)
            decider = models[shape, chosen][1]
            picks.append(by_name[chosen]["partition"] if decider.predict(features) < decider.threshold else plain)
        costs.append(np.sqrt(np.mean(picks) / best))
    return np.array(costs)


def feature_distance(a, b, name: str, cells: int) -> float:
    """An upper bound on the total variation distance between the features ``name``'s check reads
    over ``cells`` cells on ``a`` and ``b`` (exact features: scale, cost, guarded_cost), each drawn
    with Laplace noise of one scale (:func:`feature_noise`): TV(Lap(u, β), Lap(v, β)) =
    1 − exp(−|u − v|/(2β)), and for independent coordinates 1 − TV of the product ≥ Π (1 − TV of
    each) (couple each coordinate maximally)."""
    on_scale, on_cost = feature_noise(name, cells)
    together = 1.0
    for name, beta in (("scale", on_scale), ("cost", on_cost), ("guarded_cost", on_cost)):
        gap = abs(a[name] - b[name])
        together *= (1.0 if gap == 0 else 0.0) if beta == 0 else math.exp(-gap / (2 * beta))
    return 1.0 - together


def some_trial_wrong(t: float, trials: int) -> float:
    """The least probability that a rule errs on some trial of two cells whose better branches
    differ and whose inputs are at total variation distance ``t``, over ``trials`` independent
    trials of each: partitioning with probabilities p and q, |p − q| ≤ t, it decides every trial
    right with probability at most max over p of (p(1 − p + t))^trials = ((1 + t)/2)^(2·trials)."""
    return 1.0 - ((1.0 + t) / 2.0) ** (2 * trials)


def twins(rows, key, trials: int) -> list[tuple[float, float, dict, dict]]:
    """Pairs of ``key``'s cells whose better branches differ but whose features a release can
    hardly tell apart, with (the least RMSE cost a wrong decision has on either, the probability
    that some rule reading these features errs on one of them over ``trials`` trials of each:
    :func:`some_trial_wrong` of their features' distance). Whichever rule the model is, one of the
    pair then has a trial whose decision costs at least the smaller of the two cells' wrong-branch
    costs. Costliest first."""
    out = []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            ra, rb = a["partition"] / a["plain"], b["partition"] / b["plain"]
            if (ra < 1) == (rb < 1):
                continue
            cost = math.sqrt(min(max(ra, 1 / ra), max(rb, 1 / rb)))
            t = feature_distance(a, b, key[0], a["cells"])
            out.append((cost, some_trial_wrong(t, trials), a, b))
    return sorted(out, key=lambda item: -item[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("BLOWFISH_TE_DATA"))
    parser.add_argument("--holdout-dir", default=None)
    parser.add_argument("--synthetic", action="store_true",
                        help="also train on seeded synthetic shapes DPBench lacks (synthetic_shapes; 2-D only)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default=None, help="comma list of mechanism names")
    parser.add_argument("--ndim", type=int, choices=(1, 2), default=None, help="only the models of this dimension")
    parser.add_argument("--classes", default=None, help="comma list of workload classes (cells, ranges): only their models")
    parser.add_argument("--write", action="store_true", help="rewrite blowfish_te/_selection_models.py")
    parser.add_argument("--save-rows", default=None, help="keep the measured cells in this JSON file")
    parser.add_argument("--rows", default=None, help="refit from cells saved by --save-rows (nothing measured)")
    parser.add_argument("--thresholds", action="store_true",
                        help="choose each model's decision threshold on held-out shapes (coefficients are kept)")
    parser.add_argument("--candidates", action="store_true",
                        help="score adaptive's choice on range workloads on held-out shapes, with the mechanisms it is "
                             "offered and with every one that predicts its error (the rows of --rows)")
    parser.add_argument("--twins", type=int, default=None, metavar="TRIALS",
                        help="list pairs of cells that no rule reading the features decides right over TRIALS trials each "
                             "(a lower bound on the worst decision cost; with --rows)")
    add_options(parser)
    args = parser.parse_args()
    recorder = Recorder(args.json)
    if args.data_dir is None and args.rows is None:
        raise SystemExit("give --data-dir (the DPBench folder with 1D/ and 2D/) or set $BLOWFISH_TE_DATA, or --rows")
    keys = [k for k in KEYS if (args.only is None or k[0] in args.only.split(",")) and args.ndim in (None, k[1])
            and (args.classes is None or k[2] in args.classes.split(","))]
    keys += plugin_keys(args.only.split(",") if args.only else (), args.ndim)
    if args.quick:  # one shape per dimension, a few cells: the pipeline, not the fit
        keys, args.seeds = [k for k in keys if k[0] in ("dawa", "agrid")], 1
    if args.rows is not None:
        saved = json.loads(pathlib.Path(args.rows).read_text())
        train, held = ([dict(r, key=tuple(r["key"])) for r in saved[part]] for part in ("training", "held out"))
    else:
        jobs, holdout = [], []
        for ndim in (1, 2):
            for folder, target in ((pathlib.Path(args.data_dir) / ("1D" if ndim == 1 else "2D"), jobs),
                                   (args.holdout_dir, holdout)):
                found = shapes(folder, ndim)
                if args.synthetic and target is jobs:
                    found.update(synthetic_shapes(ndim))
                for label, data in list(found.items())[: 1 if args.quick else None]:
                    for scale in SCALES[ndim]:
                        for eps in EPSILONS:
                            target.append((label, data, ndim, scale, eps, args.seeds, keys))
        with ProcessPoolExecutor(args.workers) as pool:
            train = [row for rows in pool.map(measure_cell, jobs) for row in rows]
            held = [row for rows in pool.map(measure_cell, holdout) for row in rows]
        if args.save_rows:
            pathlib.Path(args.save_rows).write_text(json.dumps({"training": train, "held out": held}))
    if args.twins is not None:
        for key in keys:
            rows = [r for r in train if r["key"] == key]
            pairs = [p for p in twins(rows, key, args.twins) if p[1] > 0.9]
            print(f"{key}: {len(pairs)} pairs decided wrong on some trial with probability > 0.9 by any rule; the costliest:")
            for cost, chance, a, b in pairs[:3]:
                print(f"  {a['shape']} {a['records']:.0e} {a['epsilon']} (ratio {a['partition'] / a['plain']:.2f}) and "
                      f"{b['shape']} {b['records']:.0e} {b['epsilon']} (ratio {b['partition'] / b['plain']:.2f}): "
                      f"at least {cost:.2f} × the better branch's RMSE with probability {chance:.3f}")
            recorder(f"{key} least worst decision cost of any rule", pairs[0][0] if pairs else 1.0, "ratio")
        return
    if args.candidates:
        from blowfish_te.mechanisms.adaptive import NOT_OFFERED

        for ndim in (1, 2):
            every = sorted({r["key"][0] for r in train if r["key"][1:] == (ndim, "ranges")}, key=lambda n: (n != "dawa", n))
            if not every:
                continue
            offered = [n for n in every if (n, ndim) not in NOT_OFFERED]
            for label, names in (("offered", offered), ("every one", every)):
                costs = held_out_choice(train, ndim, names)
                print(f"{ndim}-D ranges, {label} ({', '.join(names)}): the choice's RMSE over the best candidate's, held out: "
                      f"geometric mean {np.exp(np.mean(np.log(costs))):.3f}, median {np.median(costs):.3f}, "
                      f"worst {costs.max():.2f}, {int(np.sum(costs > 1.25))} of {costs.size} cells above 1.25")
        return
    fitted, calibrated, thresholds = {}, {}, dict(THRESHOLDS)
    for key in keys:
        rows = [r for r in train if r["key"] == key]
        if not rows:
            continue
        if args.thresholds:  # the shipped coefficients stay; only where the check decides moves
            thresholds[key], summary = held_out_threshold(rows, key)
            print(f"{key}: threshold {thresholds[key]:g}; held-out largest mean cost / geometric mean by threshold: "
                  + ", ".join(f"{tau:g}: {top:.2f} / {geo:.3f}" for tau, (top, geo) in summary.items()))
            recorder(f"{key} largest held-out mean cost at its threshold", summary[thresholds[key]][0], "ratio")
            continue
        fitted[key], calibrated[key] = fit(rows, key)
        recorder(f"{key} largest mean cost of the picks, training", report(key, fitted[key], rows, "training"),
                        "ratio")
        if held:
            recorder(f"{key} largest mean cost of the picks, held out",
                            report(key, fitted[key], [r for r in held if r["key"] == key], "held out"), "ratio")
    print("\nCOEFFICIENTS =")
    pprint.pprint(fitted, width=120)
    if args.write:
        path = pathlib.Path(bt.__file__).parent / "_selection_models.py"
        text = path.read_text()
        head = text[: text.index("COEFFICIENTS:")]
        fitted = {key: value for key, value in fitted.items() if key in KEYS}  # a plug-in ships its own model
        calibrated = {key: value for key, value in calibrated.items() if key in KEYS}
        kept = {**COEFFICIENTS, **fitted}  # models not refitted (``--only``) stay as they are
        # least squares where the decision's fit is another (the rest are their own least squares)
        least = {key: value for key, value in {**LEAST_SQUARES, **calibrated}.items() if value != kept[key]}

        def table(name, entries, kind="tuple[float, ...]"):
            rows = "".join(f"    {key!r}: {value!r},\n" for key, value in sorted(entries.items()))
            return f"{name}: dict[tuple[str, int, str], {kind}] = {{\n{rows}}}\n"

        below = {key: value for key, value in thresholds.items() if value != 1.0}
        path.write_text(head + table("COEFFICIENTS", kept) + LEAST_SQUARES_DOC + table("LEAST_SQUARES", least)
                        + THRESHOLDS_DOC + table("THRESHOLDS", below, "float"))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
