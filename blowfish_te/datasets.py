"""Datasets: DPBench histograms from a data directory, the DPBench data generator, and built-in
synthetic histograms so that examples, the demo, the tests and tiny suites run without external
data (DPBench, Hay et al., SIGMOD 2016)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_histogram, check_int, check_shape
from .noise import RNGLike, check_rng

if TYPE_CHECKING:
    from .io import Grid

__all__ = ["BUILTIN", "CENSUS_6D", "CENSUS_ATTRIBUTES", "DATA_DIR_ENV", "available", "census_domain", "census_histogram",
           "census_records", "coarsen", "data_dir",
           "dpbench_sample", "load", "skin_like", "synthetic", "synthetic_2d"]

#: Environment variable naming the DPBench data directory (with ``1D/`` and ``2D/`` inside).
DATA_DIR_ENV = "BLOWFISH_TE_DATA"


def data_dir(path: str | pathlib.Path | None = None) -> pathlib.Path:
    """The DPBench directory: ``path`` if given, else ``$BLOWFISH_TE_DATA``; it must exist."""
    chosen = path if path is not None else os.environ.get(DATA_DIR_ENV)
    if chosen is None:
        raise ValueError(f"no data directory: pass data_dir= or set ${DATA_DIR_ENV} to the DPBench folder")
    folder = pathlib.Path(chosen).expanduser()
    if not folder.is_dir():
        raise ValueError(f"data directory {str(folder)!r} does not exist")
    return folder


def load(name: str, data_dir_path: str | pathlib.Path | None = None) -> np.ndarray:
    """A histogram by name: a built-in one (:data:`BUILTIN`, no data directory needed) or a DPBench
    histogram from the data directory (e.g. ``"HEPTH"`` from ``1D/``, ``"GOWALLA"`` from ``2D/``)."""
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a string, got {name!r}")
    if name in BUILTIN:
        return BUILTIN[name]()
    if not name or any(ch in name for ch in "*?[]/\\") or name.startswith("."):
        raise ValueError(f"dataset name {name!r} must be a plain name such as 'HEPTH' (no wildcards or paths)")
    folder = data_dir(data_dir_path)
    matches = sorted(folder.glob(f"*/{name}.npy"))
    if not matches:
        known = sorted(BUILTIN) + sorted(p.stem for p in folder.glob("*/*.npy"))
        raise ValueError(f"unknown dataset {name!r} in {str(folder)!r}; known datasets: {', '.join(known)}")
    counts = np.load(matches[0], allow_pickle=False)
    return check_histogram(counts, counts.shape, name=name).reshape(counts.shape)


def available(data_dir_path: str | pathlib.Path | None = None) -> dict[str, tuple[int, ...]]:
    """Every loadable dataset name with its native shape: the built-in ones, then those of the data
    directory when one is given or set."""
    names = {name: make().shape for name, make in BUILTIN.items()}
    if data_dir_path is not None or os.environ.get(DATA_DIR_ENV):
        for path in sorted(data_dir(data_dir_path).glob("*/*.npy")):
            names[path.stem] = tuple(np.load(path, mmap_mode="r").shape)
    return names


def coarsen(x: ArrayLike, domain: int | Sequence[int]) -> np.ndarray:
    """Sum adjacent cells of ``x`` down to ``domain`` (each axis of ``x`` a multiple of ``domain``'s),
    DPBench's reduction from the native domain: ``x.reshape(d, -1).sum(1)`` per axis."""
    x = np.asarray(x)
    domain = check_shape(domain, "domain")
    if len(domain) != x.ndim or any(n % d for n, d in zip(x.shape, domain)):
        raise ValueError(f"domain {domain} must have one axis per data axis, each dividing the data's shape {x.shape}")
    blocks = [axis for d, n in zip(domain, x.shape) for axis in (d, n // d)]
    return x.reshape(blocks).sum(axis=tuple(range(1, 2 * x.ndim, 2)))


def dpbench_sample(x: ArrayLike, scale: int, domain: int | Sequence[int] | None = None, rng: RNGLike = 0) -> np.ndarray:
    """DPBench's data generator (Hay et al. 2016): ``scale`` records drawn i.i.d. from the
    shape p = x / ‖x‖₁ at the native domain, then adjacent cells summed down to ``domain``."""
    x = check_histogram(x, np.shape(x), name="x").reshape(np.shape(x))
    scale = check_int(scale, "scale", minimum=1)
    total = x.sum()
    if total == 0:
        raise ValueError("x has no records: its shape x / ‖x‖₁ is undefined")
    sample = check_rng(rng).multinomial(scale, (x / total).ravel()).reshape(x.shape)
    return coarsen(sample, x.shape if domain is None else domain).astype(np.int64)


def synthetic(k: int = 100, n: int = 10_000, rng: RNGLike = 0) -> np.ndarray:
    """A smooth two-peaked histogram of ``n`` records over ``k`` ordered cells (e.g. ages 0..k-1).

    Records are drawn i.i.d. from a fixed shape — 60% around 0.35 k, 40% around 0.7 k, with a 5%
    uniform floor — so the same ``rng`` seed gives the same histogram.
    """
    k = check_int(k, "k", minimum=1)
    n = check_int(n, "n", minimum=0)
    cells = np.arange(k) + 0.5
    shape = (
        0.6 * np.exp(-0.5 * ((cells - 0.35 * k) / (0.12 * k)) ** 2)
        + 0.4 * np.exp(-0.5 * ((cells - 0.7 * k) / (0.08 * k)) ** 2)
    )
    p = 0.95 * shape / shape.sum() + 0.05 / k
    return check_rng(rng).multinomial(n, p / p.sum()).astype(np.int64)


def synthetic_2d(shape: Sequence[int] = (64, 64), n: int = 100_000, rng: RNGLike = 0) -> np.ndarray:
    """A clustered 2-D histogram of ``n`` records (three Gaussian blobs over a 5% uniform floor), as
    locations on a map would be; the same ``rng`` seed gives the same histogram."""
    rows, cols = check_shape(shape, "shape")
    n = check_int(n, "n", minimum=0)
    r, c = np.meshgrid((np.arange(rows) + 0.5) / rows, (np.arange(cols) + 0.5) / cols, indexing="ij")
    blobs = [(0.5, 0.3, 0.3, 0.08), (0.3, 0.7, 0.6, 0.05), (0.2, 0.5, 0.85, 0.03)]
    shape_2d = sum(w * np.exp(-((r - a) ** 2 + (c - b) ** 2) / (2 * s**2)) for w, a, b, s in blobs)
    p = 0.95 * shape_2d / shape_2d.sum() + 0.05 / (rows * cols)
    return check_rng(rng).multinomial(n, (p / p.sum()).ravel()).reshape(rows, cols).astype(np.int64)


def skin_like(shape: Sequence[int] = (64, 64), n: int = 2450, rng: RNGLike = 0) -> np.ndarray:
    """Four elongated, unequal Gaussian clusters of ``n`` points on a 2-D grid: the shape of the
    two-attribute projection of the UCI skin-segmentation data that He et al. (SIGMOD 2014, Fig. 1)
    cluster, at 1% of its 245,057 records by default. The same ``rng`` seed gives the same histogram."""
    shape = check_shape(shape, "shape")
    if len(shape) != 2:
        raise ValueError(f"shape must have two axes, got {shape}")
    n = check_int(n, "n", minimum=0)
    gen = check_rng(rng)
    upper = np.array(shape) - 1
    scale = np.array(shape) / 64.0  # the spreads below are for a 64 × 64 grid
    centres = np.array([[0.2, 0.3], [0.7, 0.2], [0.35, 0.75], [0.8, 0.7]]) * upper
    spread = np.array([[3.0, 8.0], [6.0, 3.0], [8.0, 4.0], [3.0, 3.0]]) * scale
    x = np.zeros(shape, dtype=np.int64)
    for c, s, m in zip(centres, spread, gen.multinomial(n, [0.4, 0.25, 0.2, 0.15])):
        pts = np.clip(np.rint(gen.normal(c, s, size=(m, 2))), 0, upper).astype(int)
        np.add.at(x, (pts[:, 0], pts[:, 1]), 1)
    return x


#: Built-in histograms by name, generated with seed 0 (the synthetic ones at DPBench's native domains).
BUILTIN = {
    "synthetic-1d": lambda: synthetic(4096, 100_000, rng=0),
    "synthetic-2d": lambda: synthetic_2d((256, 256), 100_000, rng=0),
    "skin-like": lambda: skin_like((64, 64), 2450, rng=0),
    "census-6d": lambda: census_histogram(CENSUS_6D, 100_000, rng=0),
}


#: The attributes of :func:`census_records` and their numbers of values (coded 0..n-1): ten
#: attributes of mixed sizes whose grid has 10⁹ cells.
CENSUS_ATTRIBUTES = {"age": 50, "sex": 2, "race": 5, "education": 10, "marital": 5, "occupation": 20, "hours": 10,
                     "region": 10, "income": 10, "tenure": 2}


def census_records(n: int = 100_000, rng: RNGLike = 0, attributes: dict[str, int] | None = None,
                   classes: int = 8) -> dict[str, np.ndarray]:
    """Synthetic census-like records: ``n`` rows over ``attributes`` (name → number of values;
    :data:`CENSUS_ATTRIBUTES` by default), as a dict of int columns. Each record belongs to one of
    ``classes`` hidden groups (drawn with Zipf-like weights), and each attribute is drawn from its
    group's own distribution (Dirichlet with concentration 0.5), so every marginal shows skew and
    correlation, as real tables do; no record is ever read from anywhere.

    >>> sorted(census_records(5, rng=1))[:3]
    ['age', 'education', 'hours']
    """
    n = check_int(n, "n", minimum=0)
    classes = check_int(classes, "classes", minimum=1)
    attributes = dict(CENSUS_ATTRIBUTES if attributes is None else attributes)
    for name, size in attributes.items():
        check_int(size, f"attributes[{name!r}]", minimum=1)
    gen = check_rng(rng)
    weights = 1.0 / np.arange(1, classes + 1)
    group = gen.choice(classes, size=n, p=weights / weights.sum())
    members = [np.flatnonzero(group == c) for c in range(classes)]
    columns = {}
    for name, size in attributes.items():
        column = np.empty(n, dtype=np.int64)
        for rows in members:
            column[rows] = gen.choice(size, size=rows.size, p=gen.dirichlet(np.full(size, 0.5)))
        columns[name] = column
    return columns


def census_domain(attributes: dict[str, int] | None = None) -> Grid:
    """The :class:`blowfish_te.io.Grid` of :func:`census_records`: one integer range per attribute."""
    from .io import Grid, IntegerRange

    attributes = CENSUS_ATTRIBUTES if attributes is None else attributes
    return Grid(*(IntegerRange(name, 0, size - 1) for name, size in attributes.items()))


#: Six attributes of :data:`CENSUS_ATTRIBUTES`, age in ten bands: a 20,000-cell grid (the
#: built-in histogram ``census-6d``).
CENSUS_6D = {"age": 10, "sex": 2, "race": 5, "education": 10, "income": 10, "tenure": 2}


def census_histogram(attributes: dict[str, int] | None = None, n: int = 100_000, rng: RNGLike = 0) -> np.ndarray:
    """The histogram of :func:`census_records` over its grid (one axis per attribute): for
    domains small enough to hold as counts."""
    attributes = CENSUS_ATTRIBUTES if attributes is None else attributes
    shape = check_shape(tuple(attributes.values()), "attributes")
    columns = census_records(n, rng, attributes)
    flat = np.ravel_multi_index([columns[name] for name in attributes], shape) if n else np.zeros(0, dtype=np.int64)
    return np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(np.int64)
