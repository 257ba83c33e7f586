"""Datasets: DPBench histograms from a data directory, and a built-in synthetic histogram so that
examples, the demo and the tests run without external data."""

from __future__ import annotations

import os
import pathlib

import numpy as np

from ._validation import check_histogram, check_int
from .noise import RNGLike, check_rng

__all__ = ["DATA_DIR_ENV", "data_dir", "load", "synthetic"]

#: Environment variable naming the DPBench data directory (with ``1D/`` and ``2D/`` inside).
DATA_DIR_ENV = "BLOWFISH_TE_DATA"


def data_dir(path=None) -> pathlib.Path:
    """The DPBench directory: ``path`` if given, else ``$BLOWFISH_TE_DATA``; it must exist."""
    chosen = path if path is not None else os.environ.get(DATA_DIR_ENV)
    if chosen is None:
        raise ValueError(f"no data directory: pass data_dir= or set ${DATA_DIR_ENV} to the DPBench folder")
    folder = pathlib.Path(chosen).expanduser()
    if not folder.is_dir():
        raise ValueError(f"data directory {str(folder)!r} does not exist")
    return folder


def load(name: str, data_dir_path=None) -> np.ndarray:
    """A DPBench histogram by name (e.g. ``"HEPTH"`` from ``1D/``, ``"GOWALLA"`` from ``2D/``)."""
    folder = data_dir(data_dir_path)
    matches = sorted(folder.glob(f"*/{name}.npy"))
    if not matches:
        known = sorted(p.stem for p in folder.glob("*/*.npy"))
        raise ValueError(f"unknown dataset {name!r} in {str(folder)!r}; known datasets: {', '.join(known)}")
    counts = np.load(matches[0], allow_pickle=False)
    return check_histogram(counts, counts.shape, name=name).reshape(counts.shape)


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
