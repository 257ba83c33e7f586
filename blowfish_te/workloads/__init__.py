"""Workloads: linear counting queries W (m × K) over a domain grid.

Builders return ready objects, in the style of networkx generators::

    W = workloads.prefix(4096)               # cumulative counts
    W = workloads.random_ranges(4096, 2000, rng=0)
    W = workloads.dpbench_ranges((256, 256), 2000, rng=0)   # DPBench's random rectangles

Every workload is an implicit linear map with the interface of scipy's ``LinearOperator``
(``W @ x``, ``W.T @ y``, scipy's solvers take it; ``W.as_linear_operator()`` for scipy's operator
algebra), with its domain, Gram operator, column-difference norms (for sensitivities) and a sparse
form where feasible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._grid import shape_label as _fmt
from .._validation import MAX_DOMAIN_CELLS, as_array, check_int, check_shape, check_size
from ..errors import SpecError
from ..noise import RNGLike, check_rng
from .all_ranges import AllRanges
from .base import QueryRows, Workload
from .boxes import Boxes
from .buckets import BucketWorkload
from .marginals import MarginalCounts, Marginals, all_marginals, marginals
from .matrix import MatrixWorkload
from .ramps import RampedPrefixes
from .stacked import Stacked

__all__ = [
    "SPEC_FORMS",
    "spec_help",
    "Workload",
    "Boxes",
    "AllRanges",
    "MatrixWorkload",
    "BucketWorkload",
    "QueryRows",
    "RampedPrefixes",
    "Stacked",
    "identity",
    "prefix",
    "all_ranges",
    "ranges",
    "random_ranges",
    "rects",
    "random_rects",
    "dpbench_ranges",
    "Marginals",
    "MarginalCounts",
    "marginals",
    "all_marginals",
    "from_matrix",
    "evenly_spaced_queries",
    "as_workload",
    "from_spec",
    "KINDS",
]



def _cells(shape: tuple[int, ...]) -> np.ndarray:
    """Coordinates of every cell, row-major, as a (K, d) array."""
    return np.indices(shape).reshape(len(shape), -1).T


def identity(shape: int | Sequence[int]) -> Boxes:
    """One query per cell: the histogram itself.

    >>> identity(3) @ [5, 0, 2]
    array([5, 0, 2])
    """
    shape = check_shape(shape, "shape")
    return Boxes(shape, None, None, name=f"identity({_fmt(shape)})")


def prefix(shape: int | Sequence[int]) -> Boxes:
    """Cumulative counts: for every cell t, the box [0, t] (in 1-D, the CDF counts x_0 + ... + x_t).

    >>> prefix(3) @ [5, 0, 2]
    array([5, 5, 7])
    """
    shape = check_shape(shape, "shape")
    cells = _cells(shape)
    return Boxes(shape, np.zeros_like(cells), cells, name=f"prefix({_fmt(shape)})")


def all_ranges(k: int) -> AllRanges:
    """All k(k+1)/2 ranges [a, b] of a 1-D domain, implicit (never an m × K array)."""
    return AllRanges(k)


def ranges(k: int, lo: ArrayLike, hi: ArrayLike) -> Boxes:
    """The ranges [lo[i], hi[i]] (inclusive) of a domain of k cells."""
    k = check_size(k)
    lo, hi = as_array(lo, "lo").reshape(-1), as_array(hi, "hi").reshape(-1)
    return Boxes((k,), lo, hi, name=f"ranges({k}, m={lo.size})")


def random_ranges(k: int, m: int, rng: RNGLike = None) -> Boxes:
    """m ranges whose two endpoints are drawn uniformly from the k cells, then sorted.

    >>> random_ranges(100, 5, rng=0).shape
    (5, 100)
    """
    k = check_size(k)
    m = check_int(m, "m", minimum=1)
    ends = check_rng(rng).integers(0, k, size=(2, m))
    return Boxes((k,), ends.min(0), ends.max(0), name=f"random_ranges({k}, m={m})")


def rects(shape: int | Sequence[int], lo: ArrayLike, hi: ArrayLike) -> Boxes:
    """The boxes [lo[i], hi[i]] of a grid (rectangles in 2-D); lo and hi have shape (m, d)."""
    shape = check_shape(shape, "shape")
    lo, hi = as_array(lo, "lo"), as_array(hi, "hi")
    return Boxes(shape, lo, hi, name=f"rects({_fmt(shape)}, m={lo.shape[0] if lo.ndim else 0})")


def random_rects(shape: int | Sequence[int], m: int, rng: RNGLike = None) -> Boxes:
    """m boxes with, on every axis, two endpoints drawn uniformly then sorted.

    Sides come out short: on an axis of k cells the mean side is about k/3, so a box covers
    about 1/9 of a 2-D grid (1,860 of 128² cells). This is not DPBench's workload, whose sides
    are uniform: see :func:`dpbench_ranges`.
    """
    shape = check_shape(shape, "shape")
    m = check_int(m, "m", minimum=1)
    gen = check_rng(rng)
    ends = np.stack([gen.integers(0, k, size=(2, m)) for k in shape], axis=-1)
    return Boxes(shape, ends.min(0), ends.max(0), name=f"random_rects({_fmt(shape)}, m={m})")


def dpbench_ranges(shape: int | Sequence[int], m: int, rng: RNGLike = None) -> Boxes:
    """m boxes drawn as DPBench's random range queries are (Hay et al., SIGMOD 2016): on every
    axis of k cells, a side s uniform on 1..k, then a lower corner uniform on 0..k - s, the axes
    independent. Sides are uniform, so a box covers Π (k + 1)/2 cells on average (4,160 of 128²;
    :func:`random_rects`, whose endpoints are uniform, covers under half of that). Any number of
    dimensions; in 1-D these are ranges.

    >>> dpbench_ranges((128, 128), 2000, rng=0).shape
    (2000, 16384)
    """
    shape = check_shape(shape, "shape")
    m = check_int(m, "m", minimum=1)
    gen = check_rng(rng)
    sides = np.stack([gen.integers(1, k + 1, size=m) for k in shape], axis=1)
    lo = gen.integers(0, np.array(shape) - sides + 1)
    return Boxes(shape, lo, lo + sides - 1, name=f"dpbench_ranges({_fmt(shape)}, m={m})")


def from_matrix(matrix: ArrayLike | sp.sparray | sp.spmatrix, domain: int | Sequence[int] | None = None) -> MatrixWorkload:
    """A workload from an explicit dense or sparse (m × K) matrix."""
    return MatrixWorkload(matrix, domain=domain)


def evenly_spaced_queries(workload: Workload, count: int) -> Workload:
    """At most ``count`` of the workload's queries, evenly spaced over its rows (first and last
    included): a fixed, data-independent probe of a large workload. Boxes stay boxes and a
    partition's view keeps its partition (their closed forms still apply); others are
    :class:`QueryRows`."""
    workload = as_workload(workload)
    count = check_int(count, "count", minimum=1)
    m = workload.num_queries
    rows = np.unique(np.linspace(0, m - 1, min(count, m)).round().astype(np.int64))
    return workload.rows(rows)


@dataclass(frozen=True)
class _SpecKind:
    """A workload kind of the spec table: the dimensionality it needs (None: any) and what to use
    otherwise, whether it takes a query count (random kinds), and its builder
    ``(shape, count, seed) -> Workload``."""

    ndim: int | None
    otherwise: str
    random: bool
    build: object
    #: Kinds that take the order k of their marginals (``marginals:k``) instead of a query count.
    order: bool = False


#: The workload kinds :func:`from_spec` builds (the random ones take a query count).
SPEC_KINDS = {
    "identity": _SpecKind(None, "", False, lambda shape, count, seed: identity(shape)),
    "prefix": _SpecKind(None, "", False, lambda shape, count, seed: prefix(shape)),
    "all_ranges": _SpecKind(1, "use random_rects", False, lambda shape, count, seed: all_ranges(shape[0])),
    "random_ranges": _SpecKind(1, "use random_rects", True, lambda shape, count, seed: random_ranges(shape[0], count, rng=seed)),
    "random_rects": _SpecKind(2, "", True, lambda shape, count, seed: random_rects(shape, count, rng=seed)),
    "dpbench_ranges": _SpecKind(None, "", True, lambda shape, count, seed: dpbench_ranges(shape, count, rng=seed)),
    "marginals": _SpecKind(None, "", False, lambda shape, order, seed: all_marginals(shape, order), order=True),
}
KINDS = tuple(SPEC_KINDS)
#: Every spec text of :data:`SPEC_KINDS`: ``kind``, ``kind:M`` (M random queries) or ``kind:k`` (k-way marginals).
SPEC_FORMS = tuple(f"{kind}:k" if family.order else f"{kind}:M" if family.random else kind for kind, family in SPEC_KINDS.items())


def spec_help() -> str:
    """The workload specs of :data:`SPEC_KINDS` in one line, with the dimension each needs (the CLI's help)."""
    forms = [f"{form} ({SPEC_KINDS[form.partition(':')[0]].ndim}-D)" if SPEC_KINDS[form.partition(':')[0]].ndim else form
             for form in SPEC_FORMS]
    return ", ".join(forms[:-1]) + " or " + forms[-1]


def from_spec(spec: str | dict[str, Any], shape: int | Sequence[int], seed: int = 0) -> Workload:
    """The workload named by ``spec`` on a domain of ``shape`` (an int for 1-D).

    ``spec`` is a kind of :data:`KINDS` — ``"identity"``, ``"prefix"``, ``"all_ranges"`` (1-D),
    ``"random_ranges:M"`` (1-D), ``"random_rects:M"`` (2-D) or ``"dpbench_ranges:M"`` (DPBench's
    random boxes, any dimension) with M queries drawn with ``seed``, or ``"marginals:k"`` (every
    k-way marginal) — or a mapping ``{"kind": ..., "queries": M, "seed": s}`` (``{"kind":
    "marginals", "order": k}``) as in suite files. Raises
    :class:`SpecError` naming what is allowed.

    >>> from_spec("random_ranges:2000", 4096).shape
    (2000, 4096)
    """
    if isinstance(spec, str):
        kind, colon, count = spec.partition(":")
        if kind == "marginals":
            if not (colon and count.isdigit()):
                raise SpecError(f"workload {spec!r}: give the order of the marginals, e.g. marginals:2 (all 2-way marginals)")
            return _built("marginals", shape, lambda s: all_marginals(s, int(count)))
        if colon and not (count.isdigit() and int(count) >= 1):
            raise SpecError(f"workload {spec!r}: give a positive number of queries, e.g. {kind}:1000")
        queries = int(count) if colon else None
    elif isinstance(spec, dict):
        kind, queries, seed = spec.get("kind"), spec.get("queries"), spec.get("seed", seed)
        if kind == "marginals":
            order = spec.get("order")
            if isinstance(order, bool) or not isinstance(order, int) or order < 0:
                raise SpecError(f"workload 'marginals': give its order as a non-negative integer, got {order!r}")
            return _built("marginals", shape, lambda s: all_marginals(s, order))
    else:
        raise SpecError(f"workload spec must be a string such as 'prefix' or 'random_ranges:2000', or a mapping, got {type(spec).__name__}")
    family = SPEC_KINDS.get(kind) if isinstance(kind, str) else None
    if family is None:
        raise SpecError(f"unknown workload {kind!r}; allowed: {', '.join(KINDS)} (random kinds as random_ranges:M)")
    try:
        shape = check_shape(shape, "shape")
    except (TypeError, ValueError) as err:
        raise SpecError(f"workload {kind!r}: {err}") from None
    if family.random != (queries is not None):
        raise SpecError(f"workload {kind!r}: " + (f"give the number of queries, e.g. {kind}:1000" if family.random
                                                 else "only random kinds take a count"))
    if family.ndim is not None and len(shape) != family.ndim:
        raise SpecError(f"workload {kind!r} needs a {family.ndim}-D domain, got shape {shape}"
                        + (f"; {family.otherwise}" if family.otherwise else ""))
    return family.build(shape, queries, seed)


def _built(kind: str, shape, build) -> Workload:
    """``build(shape)`` for a checked shape (marginals: up to :data:`MAX_DOMAIN_CELLS`), its errors as
    :class:`SpecError`."""
    try:
        return build(check_shape(shape, "shape", MAX_DOMAIN_CELLS))
    except (TypeError, ValueError) as err:
        raise SpecError(f"workload {kind!r}: {err}") from None


def as_workload(workload: Workload | ArrayLike | sp.sparray | sp.spmatrix, name: str = "workload") -> Workload:
    """Return ``workload`` if it is a :class:`Workload`, else wrap a matrix with :func:`from_matrix`
    (errors name the argument ``name``)."""
    if isinstance(workload, Workload):
        return workload
    if sp.issparse(workload) or isinstance(workload, (np.ndarray, list)):
        return from_matrix(workload)
    raise TypeError(
        f"{name} must be a blowfish_te Workload or a 2-D matrix (numpy array or scipy sparse), "
        f"got {type(workload).__name__}"
    )
