"""Policy graphs: which pairs of values an adversary must not tell apart (He, Machanavajjhala, Ding, SIGMOD 2014).

A policy is an undirected graph over the K cells of a domain grid (numbered 0..K-1 in row-major
order), optionally with the special vertex ⊥ (:data:`BOTTOM`, "no record"). Two histograms are
neighbours when one record moves along an edge; an edge (u, ⊥) adds or removes a record of value u.

In edge arrays ⊥ is encoded as the index K, one past the last cell, so that it can never be
mistaken for a cell. Edges are kept in blocks — all pairs at a fixed grid offset, explicit pairs,
or cliques — so that structured graphs with millions of edges are built in O(1) and processed
block by block; :attr:`Policy.edges` materialises them on demand.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ._digest import digest
from ._graph import csgraph_ready, signed_incidence
from ._grid import offset_pairs, positive_offsets
from ._grid import shape_label as _fmt
from ._validation import MAX_CELLS, MAX_DOMAIN_CELLS, as_array, check_int, check_shape, check_size, is_int
from .errors import SpecError

if TYPE_CHECKING:
    import networkx as nx

#: A domain's shape as the constructors take it: K, or the sides of a grid.
ShapeLike = int | Sequence[int]

__all__ = [
    "BOTTOM",
    "Policy",
    "OffsetEdges",
    "PairEdges",
    "BottomEdges",
    "CliqueEdges",
    "complete",
    "unbounded",
    "line",
    "threshold",
    "grid",
    "attribute",
    "partition",
    "from_networkx",
    "from_edges",
    "from_spec",
    "PolicySpec",
    "SPEC_FORMS",
    "spec_help",
    "SPEC_KINDS",
]

#: Refuse to list more edges than this in one array (16 bytes each); use ``edge_blocks`` instead.
MAX_LISTED_EDGES = 200_000_000


class _Bottom:
    """The vertex ⊥ ("no record"). An edge (u, ⊥) protects the presence of a record with value u."""

    _instance = None

    def __new__(cls) -> _Bottom:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "BOTTOM"

    def __reduce__(self) -> tuple[type[_Bottom], tuple[()]]:
        return (_Bottom, ())


#: The ⊥ sentinel for :func:`from_networkx` graphs and :meth:`Policy.distance`.
BOTTOM = _Bottom()


@dataclass(frozen=True)
class OffsetEdges:
    """All pairs (u, u + offset) of cells inside the grid; ``offset`` is lexicographically positive."""

    offset: tuple[int, ...]

    def count(self, shape: tuple[int, ...]) -> int:
        return math.prod(max(k - abs(d), 0) for k, d in zip(shape, self.offset))

    def pairs(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(u, v)`` with ``v = u + offset`` in row-major order."""
        return offset_pairs(shape, self.offset)


@dataclass(frozen=True, eq=False)
class PairEdges:
    """Explicit edges ``(u[i], v[i])`` with ``u < v``; ``v == K`` stands for ⊥."""

    u: np.ndarray
    v: np.ndarray

    def count(self, shape: tuple[int, ...]) -> int:
        return int(self.u.size)

    def pairs(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        return self.u, self.v


class BottomEdges(PairEdges):
    """Every cell joined to ⊥ (unbounded differential privacy): the pairs (u, K) for u = 0..K-1,
    made on first use and then held, so a policy over a domain too large to list (10⁹ cells) costs
    nothing until a caller asks for its edges."""

    k: int

    def __init__(self, k: int):
        object.__setattr__(self, "k", int(k))

    @property
    def u(self) -> np.ndarray:
        if "_u" not in self.__dict__:
            object.__setattr__(self, "_u", _readonly(np.arange(self.k, dtype=np.int64)))
        return self.__dict__["_u"]

    @property
    def v(self) -> np.ndarray:
        return np.broadcast_to(np.int64(self.k), (self.k,))  # read-only: ⊥ held once

    def count(self, shape: tuple[int, ...]) -> int:
        return self.k

    def __repr__(self) -> str:
        return f"BottomEdges({self.k})"


@dataclass(frozen=True, eq=False)
class CliqueEdges:
    """Every pair of the (sorted, distinct) ``cells``."""

    cells: np.ndarray

    def count(self, shape: tuple[int, ...]) -> int:
        c = int(self.cells.size)
        return c * (c - 1) // 2

    def pairs(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        i, j = np.triu_indices(self.cells.size, k=1)
        return self.cells[i], self.cells[j]


EdgeBlock = OffsetEdges | PairEdges | CliqueEdges


def _kind(block: EdgeBlock) -> str:
    """``"offset"``, ``"bottom"`` (every cell to ⊥), ``"pairs"`` or ``"clique"``: the one place a
    block's class is read to answer the policy's structural questions."""
    match block:
        case OffsetEdges():
            return "offset"
        case BottomEdges():
            return "bottom"
        case PairEdges():
            return "pairs"
        case CliqueEdges():
            return "clique"
    _unknown(block)


def _bottom_count(block: EdgeBlock, k: int) -> int:
    """How many of the block's edges join a cell to ⊥ (vertex K)."""
    match block:
        case BottomEdges():
            return block.k
        case PairEdges():
            return int(np.count_nonzero(block.v == k))
        case OffsetEdges() | CliqueEdges():
            return 0
    _unknown(block)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _unknown(block: object) -> NoReturn:
    """Every dispatch over :data:`EdgeBlock` ends here: the union is closed, and a new kind of
    block must say how each structural question is answered for it."""
    raise TypeError(f"edge blocks must be OffsetEdges, PairEdges or CliqueEdges, got {type(block).__name__}; "
                    "for an edge list use from_edges(shape, edges)")


def _arrays(block: EdgeBlock) -> tuple[np.ndarray, ...]:
    match block:
        case BottomEdges():
            return ()  # made read-only when first made
        case PairEdges():
            return block.u, block.v
        case CliqueEdges():
            return (block.cells,)
        case OffsetEdges():
            return ()
    _unknown(block)


def _private_copy(block: EdgeBlock) -> EdgeBlock:
    """The block with copies of the caller's arrays (int64), so later edits cannot reach the policy."""
    match block:
        case BottomEdges():
            return BottomEdges(block.k)
        case PairEdges():
            return PairEdges(np.array(block.u, dtype=np.int64), np.array(block.v, dtype=np.int64))
        case CliqueEdges():
            return CliqueEdges(np.array(block.cells, dtype=np.int64))
        case OffsetEdges():
            return block
    _unknown(block)


def _restore(shape: tuple[int, ...], blocks: Iterable[EdgeBlock], has_bottom: bool, name: str) -> Policy:
    return Policy._trusted(shape, [_private_copy(b) for b in blocks], has_bottom=has_bottom, name=name)


def _check_block(block: object, shape: tuple[int, ...], k: int, has_bottom: bool) -> None:
    """Raise unless ``block`` is a well-formed edge block for the grid ``shape``."""
    match block:
        case OffsetEdges():
            off = block.offset
            if len(off) != len(shape) or not all(isinstance(d, numbers.Integral) for d in off):
                raise ValueError(f"OffsetEdges offset {off!r} must have {len(shape)} integer entries for shape {shape}")
            nonzero = [d for d in off if d != 0]
            if not nonzero or nonzero[0] < 0:
                raise ValueError(f"OffsetEdges offset {off!r} must be lexicographically positive (first non-zero entry > 0)")
        case PairEdges():
            u, v = np.asarray(block.u), np.asarray(block.v)
            if u.ndim != 1 or u.shape != v.shape or u.dtype.kind not in "iu" or v.dtype.kind not in "iu":
                raise ValueError("PairEdges u and v must be 1-D integer arrays of equal length")
            top = k if has_bottom else k - 1
            if u.size and (u.min() < 0 or (u >= v).any() or v.max() > top):
                raise ValueError(
                    f"PairEdges need 0 <= u < v <= {top} ({'K = ' + str(k) + ' is BOTTOM' if has_bottom else 'no BOTTOM: has_bottom=False'})"
                )
        case CliqueEdges():
            c = np.asarray(block.cells)
            if c.ndim != 1 or c.dtype.kind not in "iu" or (c.size and (c.min() < 0 or c.max() >= k)) or (np.diff(c) <= 0).any():
                raise ValueError(f"CliqueEdges cells must be a sorted 1-D array of distinct cells in [0, {k - 1}]")
        case _:
            _unknown(block)


class Policy:
    """An immutable policy graph over the cells of a domain grid (He, Machanavajjhala, Ding, SIGMOD 2014).

    Build one with a constructor (:func:`line`, :func:`threshold`, :func:`grid`, ...). Attributes:
    ``shape``, ``size`` (K), ``edges`` (``(|E|, 2)`` array, ⊥ encoded as K), ``has_bottom``,
    ``is_forest``, connected components and :meth:`distance`.
    """

    __slots__ = ("_shape", "_blocks", "_has_bottom", "_name", "_cache", "__weakref__")
    # the slots' types (set once by _init through object.__setattr__)
    _shape: tuple[int, ...]
    _blocks: tuple[EdgeBlock, ...]
    _has_bottom: bool
    _name: str
    _cache: dict

    def __init__(self, shape: ShapeLike, blocks: Iterable[EdgeBlock], *, has_bottom: bool = False,
                 name: str | None = None) -> None:
        """A policy from edge blocks, all checked: block types, index ranges, ⊥ only when
        ``has_bottom``, and no edge listed twice. Constructors such as :func:`from_edges` are simpler."""
        shape = check_shape(shape)
        try:
            blocks = list(blocks)
        except TypeError:
            raise TypeError(f"blocks must be an iterable of edge blocks, got {type(blocks).__name__}") from None
        k = math.prod(shape)
        for block in blocks:
            _check_block(block, shape, k, bool(has_bottom))
        self._init(shape, [_private_copy(b) for b in blocks], has_bottom, name)
        e = self.edges
        if e.shape[0] and np.unique(e[:, 0] * (k + 1) + e[:, 1]).size != e.shape[0]:
            raise ValueError("blocks list some edge more than once; each edge must appear in one block only")

    @classmethod
    def _trusted(cls, shape: ShapeLike, blocks: Sequence[EdgeBlock], *, has_bottom: bool = False,
                 name: str | None = None) -> Policy:
        """A policy from blocks that the library's constructors built canonical and disjoint."""
        self = cls.__new__(cls)
        self._init(check_shape(shape, "shape", MAX_DOMAIN_CELLS), blocks, has_bottom, name)
        return self

    def _init(self, shape: tuple[int, ...], blocks: Sequence[EdgeBlock], has_bottom: bool, name: str | None) -> None:
        for block in blocks:  # arrays the policy owns: nobody may edit them after use
            for array in _arrays(block):
                array.flags.writeable = False
        object.__setattr__(self, "_shape", shape)
        object.__setattr__(self, "_blocks", tuple(b for b in blocks if b.count(shape) > 0))
        object.__setattr__(self, "_has_bottom", bool(has_bottom))
        object.__setattr__(self, "_name", name or f"policy({shape})")
        object.__setattr__(self, "_cache", {})

    def __setattr__(self, key: str, value: object) -> NoReturn:
        raise AttributeError("Policy objects are immutable")

    def __reduce__(self) -> tuple[Callable[..., Policy], tuple[object, ...]]:
        # pickle and copy rebuild from the blocks (the caches are not carried over)
        return (_restore, (self._shape, self._blocks, self._has_bottom, self._name))

    # -- basic attributes -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the domain grid."""
        return self._shape

    @property
    def size(self) -> int:
        """Number of cells K."""
        return math.prod(self._shape)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def has_bottom(self) -> bool:
        """Whether the graph contains ⊥ (then n is not public in ⊥'s component)."""
        return self._has_bottom

    @property
    def bottom(self) -> int | None:
        """Index of ⊥ in edge arrays (K), or None when the policy has no ⊥."""
        return self.size if self._has_bottom else None

    @property
    def num_vertices(self) -> int:
        """K, plus one for ⊥."""
        return self.size + int(self._has_bottom)

    @property
    def name(self) -> str:
        return self._name

    @property
    def edge_blocks(self) -> tuple[EdgeBlock, ...]:
        """The edges as disjoint blocks (offset, explicit pairs, cliques)."""
        return self._blocks

    @property
    def num_edges(self) -> int:
        return sum(b.count(self._shape) for b in self._blocks)

    def __repr__(self) -> str:
        bottom = " + BOTTOM" if self._has_bottom else ""
        return f"<Policy {self._name}: {self.size} cells{bottom}, {self.num_edges} edges>"

    # -- edges and graph views --------------------------------------------------------------
    @property
    def edges(self) -> np.ndarray:
        """All edges as a read-only ``(|E|, 2)`` int64 array of pairs ``u < v`` (⊥ is K)."""
        if "edges" not in self._cache:
            n = self.num_edges
            if n > MAX_LISTED_EDGES:
                raise ValueError(
                    f"{self._name} has {n} edges, too many to list in one array "
                    f"(limit {MAX_LISTED_EDGES}); iterate over edge_blocks instead"
                )
            out = np.empty((n, 2), dtype=np.int64)
            start = 0
            for block in self._blocks:
                u, v = block.pairs(self._shape)
                out[start : start + u.size, 0] = u
                out[start : start + u.size, 1] = v
                start += u.size
            self._cache["edges"] = _readonly(out)
        return self._cache["edges"]

    def fingerprint(self) -> str:
        """A digest of the shape and the edges (equal for policies with the same edges, whatever
        their names), for results that depend on the policy alone."""
        if "fingerprint" not in self._cache:
            self._cache["fingerprint"] = digest("policy", self._shape, self._has_bottom, self.edges)
        return self._cache["fingerprint"]

    def adjacency(self) -> sp.csr_array:
        """Symmetric 0/1 adjacency matrix over the vertices (cells, then ⊥ if present)."""
        if "adjacency" not in self._cache:
            e = self.edges
            n = self.num_vertices
            rows = np.concatenate([e[:, 0], e[:, 1]])
            cols = np.concatenate([e[:, 1], e[:, 0]])
            adj = sp.csr_array((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(n, n))
            self._cache["adjacency"] = adj
        return self._cache["adjacency"]

    def incidence(self) -> sp.csc_array:
        """Signed incidence matrix P_G (K × |E|): column e = (u, v) has +1 at u and -1 at v (no row for ⊥)."""
        e = self.edges
        return signed_incidence(e[:, 0], e[:, 1], self.size)

    def _components(self) -> tuple[int, np.ndarray]:
        """Connected components from a graph with the same connectivity: each clique block is
        replaced by a star, so large cliques never list their O(c²) edges."""
        if "components" not in self._cache and (self._grid_connected() or self.is_unbounded_dp):
            if self.num_vertices > self.size and not self.touches_bottom:  # ⊥ alone
                labels = np.zeros(self.num_vertices, dtype=np.int64)
                labels[self.size] = 1
                self._cache["components"] = (2, _readonly(labels))
            else:  # one component: one label, held once
                self._cache["components"] = (1, np.broadcast_to(np.int64(0), (self.num_vertices,)))
        if "components" not in self._cache:
            us, vs = [], []
            for cells in self.cliques():  # a star spans a clique's component
                us.append(np.full(cells.size - 1, cells[0]))
                vs.append(cells[1:])
            for u, v in self.edge_pairs():
                us.append(u)
                vs.append(v)
            n = self.num_vertices
            u = np.concatenate(us) if us else np.zeros(0, dtype=np.int64)
            v = np.concatenate(vs) if vs else np.zeros(0, dtype=np.int64)
            graph = sp.csr_array((np.ones(u.size, dtype=np.int8), (u, v)), shape=(n, n))
            from scipy.sparse import csgraph  # loads scipy.sparse.linalg: on first use only
            count, labels = csgraph.connected_components(csgraph_ready(graph), directed=False)
            self._cache["components"] = (int(count), _readonly(labels.astype(np.int64)))
        return self._cache["components"]

    def _grid_connected(self) -> bool:
        """Whether offset blocks alone join every cell: a unit step along every axis longer than
        one cell (then the cells form one component whatever the other blocks add)."""
        steps = set(self.offsets())
        ndim = len(self._shape)
        return self.size > 0 and all(tuple(int(i == a) for i in range(ndim)) in steps
                                     for a in range(ndim) if self._shape[a] > 1)

    @property
    def touches_bottom(self) -> bool:
        """Whether some edge joins a cell to ⊥ (then the tree of an embedding must contain ⊥)."""
        return any(_bottom_count(block, self.size) for block in self._blocks)

    # -- the edges by structure: what callers ask instead of reading the blocks' classes ------------
    def offsets(self) -> tuple[tuple[int, ...], ...]:
        """The offsets d of the policy's offset blocks: every two cells c and c + d joined (grid and
        attribute policies). Their edges are not listed by :meth:`edge_pairs` with ``offsets=False``."""
        found = []
        for block in self._blocks:
            match block:
                case OffsetEdges():
                    found.append(block.offset)
        return tuple(found)

    def cliques(self) -> tuple[np.ndarray, ...]:
        """The cell sets (sorted) of the policy's clique blocks: every two cells of one joined
        (complete and partition policies). Their edges are never listed by :meth:`edge_pairs`."""
        found = []
        for block in self._blocks:
            match block:
                case CliqueEdges():
                    found.append(block.cells)
        return tuple(found)

    def edge_pairs(self, *, offsets: bool = True, bottom: bool = True) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(u, v), u < v, of the edges no clique describes, block by block (v = K stands for ⊥):
        with ``offsets`` the offset blocks' edges listed too, with ``bottom`` the edges to ⊥."""
        k = self.size
        for block in self._blocks:
            kind = _kind(block)
            if kind == "clique" or (kind == "offset" and not offsets):
                continue
            if kind == "bottom":
                if bottom:
                    yield block.pairs(self._shape)
                continue
            u, v = block.pairs(self._shape)
            if not bottom and kind == "pairs":
                cells = v < k
                u, v = u[cells], v[cells]
            if u.size:
                yield u, v

    def bottom_cells(self) -> np.ndarray:
        """The cells joined to ⊥, sorted (unbounded DP: every cell)."""
        k = self.size
        found = []
        for block in self._blocks:
            if _bottom_count(block, k):
                u, v = block.pairs(self._shape)
                found.append(u[v == k])
        return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)

    @property
    def joins_cells(self) -> bool:
        """Whether some edge joins two cells (not only cells to ⊥)."""
        return self.num_edges > sum(_bottom_count(block, self.size) for block in self._blocks)

    def offset_steps(self) -> frozenset[tuple[int, ...]] | None:
        """The offsets when every edge comes from an offset block (cells c and c + d joined for each
        offset d); None when some edge is given otherwise."""
        if any(_kind(block) != "offset" for block in self._blocks):
            return None
        return frozenset(self.offsets())

    @property
    def is_complete(self) -> bool:
        """True for bounded DP: every two cells joined and no ⊥ (the complete graph, however its
        edges were given)."""
        k = self.size
        return not self._has_bottom and self.num_edges == k * (k - 1) // 2

    @property
    def is_attribute(self) -> bool:
        """True for the attribute policy: two cells joined exactly when they differ in one attribute,
        no ⊥ (however its edges were given: offsets t·e_a, or e.g. one clique on a 1-D domain)."""
        if self._has_bottom:
            return False
        steps = self.offset_steps()
        if steps is not None:  # the constructor's form, read off the blocks
            return steps == {tuple(t if i == axis else 0 for i in range(self.ndim)) for axis, n in enumerate(self._shape)
                             for t in range(1, n)}
        # no edge is listed twice: as many edges as the attribute policy, each changing one attribute
        if self.num_edges != sum(self.size // n * (n * (n - 1) // 2) for n in self._shape):
            return False
        if any(np.count_nonzero(offset) != 1 for offset in self.offsets()):
            return False
        coords = np.unravel_index
        for cells in self.cliques():
            varying = [np.unique(c).size > 1 for c in coords(cells, self._shape)]
            if sum(varying) > 1:
                return False
        return all(bool(np.all((np.stack(coords(u, self._shape)) != np.stack(coords(v, self._shape))).sum(axis=0) == 1))
                   for u, v in self.edge_pairs(offsets=False))

    @property
    def n_components(self) -> int:
        """Number of connected components (⊥'s component included)."""
        return self._components()[0]

    @property
    def component_labels(self) -> np.ndarray:
        """Component label of every vertex: K cells, then ⊥ if present."""
        return self._components()[1]

    @property
    def is_forest(self) -> bool:
        """True when the graph (⊥ included) has no cycle."""
        if self.num_edges > self.num_vertices - 1:  # a forest on V vertices has at most V - 1 edges
            return False
        return self.num_edges == self.num_vertices - self.n_components

    @property
    def is_connected(self) -> bool:
        return self.n_components == 1

    @property
    def is_differential_privacy(self) -> bool:
        """True for plain DP: every pair of cells (bounded) or every cell to ⊥ and nothing else
        (unbounded), however the edges were given."""
        k = self.size
        if not self._has_bottom:
            return self.num_edges == k * (k - 1) // 2
        return self.num_edges == k and not self.joins_cells

    @property
    def is_unbounded_dp(self) -> bool:
        """True for unbounded DP: every cell joined to ⊥ and nothing else. Its tree transform is x
        itself (W_G = W), and its neighbours add or remove one record."""
        return self._has_bottom and self.is_differential_privacy

    def vertex(self, value: int | tuple[int, ...] | _Bottom) -> int:
        """Vertex index of a cell (flat index or coordinate tuple) or of :data:`BOTTOM`."""
        if value is BOTTOM:
            if not self._has_bottom:
                raise ValueError(f"{self._name} has no BOTTOM vertex")
            return self.size
        if isinstance(value, tuple):
            if len(value) != self.ndim or not all(
                is_int(c) and 0 <= c < k for c, k in zip(value, self._shape)
            ):
                raise ValueError(f"cell {value!r} is not a coordinate of the domain {self._shape}")
            return int(np.ravel_multi_index(value, self._shape))
        index = check_int(value, "cell")
        if not 0 <= index < self.size:
            raise ValueError(f"cell index {index} is outside the domain of {self.size} cells")
        return index

    def distance(self, u: int | tuple[int, ...] | _Bottom, v: int | tuple[int, ...] | _Bottom) -> int | float:
        """Graph distance between two vertices (cells or BOTTOM); ``inf`` when disconnected."""
        iu, iv = self.vertex(u), self.vertex(v)
        if iu == iv:
            return 0
        from scipy.sparse import csgraph  # loads scipy.sparse.linalg: on first use only
        dist = csgraph.shortest_path(csgraph_ready(self.adjacency()), method="D", unweighted=True, indices=iu)
        d = dist[iv]
        return int(d) if np.isfinite(d) else math.inf

    def to_networkx(self) -> nx.Graph:
        """The policy as a ``networkx.Graph`` on cells 0..K-1 (and BOTTOM)."""
        import networkx as nx

        if self.size > MAX_LISTED_EDGES:
            raise ValueError(f"{self._name} has {self.size} cells, too many for a networkx graph (limit {MAX_LISTED_EDGES})")
        e = self.edges  # refused before any node is added when there are too many edges to list
        g = nx.Graph()
        g.add_nodes_from(range(self.size))
        if self._has_bottom:
            g.add_node(BOTTOM)
        g.add_edges_from((int(a), BOTTOM if b == self.size else int(b)) for a, b in e)
        return g


# -- constructors -----------------------------------------------------------------------------


def _full_clique(shape: tuple[int, ...]) -> list[EdgeBlock]:
    return [CliqueEdges(_readonly(np.arange(math.prod(shape), dtype=np.int64)))]


def complete(shape: ShapeLike) -> Policy:
    """G_full: every pair of cells — bounded differential privacy (change one record arbitrarily).

    >>> complete(4).num_edges, complete(4).has_bottom
    (6, False)
    """
    shape = check_shape(shape, "shape")
    return Policy._trusted(shape, _full_clique(shape), name=f"complete({_fmt(shape)})")


def unbounded(shape: ShapeLike) -> Policy:
    """Edges (u, ⊥) for every cell — unbounded differential privacy (add or remove one record).

    >>> unbounded(3).edges.tolist()  # ⊥ is the index K = 3
    [[0, 3], [1, 3], [2, 3]]
    """
    shape = check_shape(shape, "shape", MAX_DOMAIN_CELLS)  # ⊥ edges are listed only when asked for
    return Policy._trusted(shape, [BottomEdges(math.prod(shape))], has_bottom=True, name=f"unbounded({_fmt(shape)})")


def line(k: int) -> Policy:
    """G^1_k: edges (i, i+1) — neighbouring values of an ordered domain (He et al.).

    >>> line(4).edges.tolist(), line(4).is_forest
    ([[0, 1], [1, 2], [2, 3]], True)
    """
    k = check_size(k)
    return Policy._trusted((k,), [OffsetEdges((1,))], name=f"line({k})")


def threshold(k: int, theta: int) -> Policy:
    """G^θ_k: edges (i, j) with 0 < |i - j| <= θ (1-D distance threshold).

    >>> threshold(5, 2).num_edges, threshold(5, 2).distance(0, 4)
    (7, 2)
    """
    k = check_size(k)
    theta = check_int(theta, "theta", minimum=1)
    name = f"threshold({k}, theta={theta})"
    if theta >= k - 1:
        return Policy._trusted((k,), _full_clique((k,)), name=name)
    return Policy._trusted((k,), [OffsetEdges((d,)) for d in range(1, theta + 1)], name=name)


def grid(shape: ShapeLike, theta: int = 1) -> Policy:
    """Cells at L1 distance <= θ; θ = 1 is the d-dimensional grid graph G^1_{k^d}.

    >>> grid((3, 3)).num_edges, grid((3, 3), theta=2).num_edges
    (12, 26)
    """
    shape = check_shape(shape, "shape", MAX_DOMAIN_CELLS)  # offsets, not edges
    theta = check_int(theta, "theta", minimum=1)
    name = f"grid({_fmt(shape)}, theta={theta})"
    if theta >= sum(k - 1 for k in shape):
        check_shape(shape, "shape", MAX_CELLS)  # a clique lists its cells
        return Policy._trusted(shape, _full_clique(shape), name=name)
    blocks = [OffsetEdges(tuple(int(c) for c in d)) for d in positive_offsets(shape, theta)]
    return Policy._trusted(shape, blocks, name=name)


def attribute(shape: ShapeLike) -> Policy:
    """G_attr: cells that differ in exactly one coordinate, by any amount."""
    shape = check_shape(shape, "shape", MAX_DOMAIN_CELLS)  # offsets, not edges
    blocks = []
    for axis, k in enumerate(shape):
        for t in range(1, k):
            offset = [0] * len(shape)
            offset[axis] = t
            blocks.append(OffsetEdges(tuple(offset)))
    return Policy._trusted(shape, blocks, name=f"attribute({_fmt(shape)})")


#: Partition blocks up to this size are listed as explicit pairs, larger ones kept as cliques.
SMALL_CLIQUE = 32


def partition(labels: ArrayLike) -> Policy:
    """G_P: a clique on each block of cells sharing a label; blocks are not protected from each other.

    ``labels`` has the domain's shape (or is flat); each block's total is disclosed exactly.
    """
    arr = as_array(labels, "labels")
    if arr.ndim == 0 or arr.size == 0:
        raise ValueError(f"labels must be a non-empty array with one label per cell, got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError("labels must not contain NaN or infinity: every cell needs a definite block")
    shape = check_shape(arr.shape, "labels.shape")
    try:
        _, inverse = np.unique(arr.reshape(-1), return_inverse=True)
    except TypeError as exc:
        raise TypeError(f"labels must be mutually comparable values (ints or strings): {exc}") from None
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable").astype(np.int64)  # cells grouped by label, increasing
    sizes = np.bincount(inverse)
    starts = np.cumsum(sizes) - sizes
    group = inverse[order]
    local = np.arange(order.size) - starts[group]
    small = (sizes[group] <= SMALL_CLIQUE)
    partners = np.where(small, sizes[group] - 1 - local, 0)  # pairs (a, b > a) inside small blocks
    first = np.repeat(np.arange(order.size), partners)
    second = first + 1 + np.arange(first.size) - np.repeat(np.cumsum(partners) - partners, partners)
    blocks: list[EdgeBlock] = [PairEdges(_readonly(order[first]), _readonly(order[second]))]
    for g in np.flatnonzero(sizes > SMALL_CLIQUE):
        blocks.append(CliqueEdges(_readonly(order[starts[g] : starts[g] + sizes[g]])))
    return Policy._trusted(shape, blocks, name=f"partition({sizes.size} blocks over {_fmt(shape)})")


def _canonical_pairs(a: np.ndarray, b: np.ndarray, k: int, what: str) -> PairEdges:
    loops = a == b
    if loops.any():
        i = int(np.flatnonzero(loops)[0])
        node = "BOTTOM" if a[i] == k else int(a[i])
        raise ValueError(f"{what} has a self-loop at {node}: a record moving to its own value is not a change")
    u, v = np.minimum(a, b), np.maximum(a, b)
    if u.size:
        pairs = np.unique(np.stack([u, v], axis=1), axis=0)
        u, v = pairs[:, 0].copy(), pairs[:, 1].copy()
    return PairEdges(_readonly(u.astype(np.int64)), _readonly(v.astype(np.int64)))


def from_edges(shape: ShapeLike, edges: ArrayLike) -> Policy:
    """A policy from an ``(|E|, 2)`` integer array of cell pairs; the index K stands for ⊥.

    Edges are undirected; duplicates and orientation are normalised, self-loops are refused.
    """
    shape = check_shape(shape, "shape")
    k = math.prod(shape)
    arr = as_array(edges, "edges")
    if arr.size == 0:
        arr = np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"edges must be an array of shape (E, 2), got shape {arr.shape}")
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        raise TypeError(f"edges must hold integer vertex indices, got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() > k):
        raise ValueError(f"edges must hold cell indices in [0, {k - 1}] or {k} for BOTTOM, got [{arr.min()}, {arr.max()}]")
    block = _canonical_pairs(arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64), k, "edges")
    has_bottom = bool(block.v.size and block.v.max() == k)
    return Policy._trusted(shape, [block], has_bottom=has_bottom, name=f"from_edges({_fmt(shape)}, {block.u.size} edges)")


def from_networkx(graph: nx.Graph, shape: ShapeLike | None = None) -> Policy:
    """A policy from a networkx graph whose nodes are cells (and optionally :data:`BOTTOM`).

    Without ``shape`` the cell nodes must be exactly the integers 0..K-1. With ``shape`` nodes may be
    flat indices or coordinate tuples (as in ``networkx.grid_2d_graph``); missing cells are isolated,
    so their counts are disclosed. Directed graphs are read as undirected; a BOTTOM node without
    edges is dropped (it protects nothing).
    """
    if not (hasattr(graph, "nodes") and hasattr(graph, "edges")):
        raise TypeError(f"graph must be a networkx graph, got {type(graph).__name__}")
    nodes = list(graph.nodes)
    cells = [n for n in nodes if n is not BOTTOM]
    if shape is None:
        k = len(cells)
        if k == 0:
            raise ValueError("graph has no cell nodes; pass shape= to build a policy without edges")
        if not all(is_int(n) for n in cells) or set(
            int(n) for n in cells
        ) != set(range(k)):
            raise ValueError(
                f"graph cell nodes must be exactly the integers 0..{k - 1} (or pass shape= to use "
                "coordinate tuples or a larger domain)"
            )
        shape = (k,)
    shape = check_shape(shape, "shape")
    k = math.prod(shape)
    bottom_index = k

    def index(node: Hashable) -> int:
        if node is BOTTOM:
            return bottom_index
        if isinstance(node, tuple) and len(node) == len(shape) and all(
            is_int(c) and 0 <= c < s for c, s in zip(node, shape)
        ):
            return int(np.ravel_multi_index(node, shape))
        if is_int(node) and 0 <= node < k:
            return int(node)
        raise ValueError(
            f"graph node {node!r} is not a cell of the domain {shape}: nodes must be flat indices "
            f"0..{k - 1}, coordinate tuples or BOTTOM"
        )

    for node in cells:
        index(node)
    pairs = np.array([(index(a), index(b)) for a, b in graph.edges()], dtype=np.int64).reshape(-1, 2)
    block = _canonical_pairs(pairs[:, 0], pairs[:, 1], k, "graph")
    has_bottom = bool(block.v.size and block.v.max() == k)  # an isolated BOTTOM node protects nothing
    return Policy._trusted(
        shape,
        [block],
        has_bottom=has_bottom,
        name=f"from_networkx({_fmt(shape)}, {block.u.size} edges{', BOTTOM' if has_bottom else ''})",
    )


#: The policy specs :func:`from_spec` reads (the CLI's ``--policy`` and suite files use them).
@dataclass(frozen=True)
class _SpecKind:
    """A policy family of the spec table: whether it takes θ (and ``full``), the dimensionality it
    needs, what to use otherwise, and its builder ``(shape, θ) -> Policy``."""

    takes_theta: bool
    ndim: int | None
    otherwise: str
    build: Callable[[tuple[int, ...], int | None], Policy]
    full: bool = False


#: The policy families a spec names (see :class:`PolicySpec`), in the order errors list them.
SPEC_KINDS = {
    "unbounded": _SpecKind(False, None, "", lambda shape, theta: unbounded(shape)),
    "complete": _SpecKind(False, None, "", lambda shape, theta: complete(shape)),
    "attribute": _SpecKind(False, None, "", lambda shape, theta: attribute(shape)),
    "line": _SpecKind(False, 1, "use grid:1", lambda shape, theta: line(shape[0])),
    "threshold": _SpecKind(True, 1, "use grid:θ", lambda shape, theta: complete(shape) if theta is None else threshold(shape[0], theta),
                           full=True),
    "grid": _SpecKind(True, None, "", lambda shape, theta: grid(shape) if theta is None else grid(shape, theta)),
}
#: Every spec text a family of :data:`SPEC_KINDS` takes, in its order: ``kind``, ``kind:θ``, ``kind:full``.
SPEC_FORMS = tuple(form for kind, family in SPEC_KINDS.items()
                   for form in ([f"{kind}:θ"] + ([f"{kind}:full"] if family.full else []) if family.takes_theta else [kind]))


def spec_help() -> str:
    """The policy specs of :data:`SPEC_KINDS` in one line, the 1-D ones marked (the CLI's help)."""
    forms = [f"{form} (1-D)" if SPEC_KINDS[form.partition(":")[0]].ndim == 1 else form for form in SPEC_FORMS]
    return ", ".join(forms[:-1]) + " or " + forms[-1]


@dataclass(frozen=True)
class PolicySpec:
    """A policy named by text — ``unbounded``, ``complete``, ``attribute``, ``line``,
    ``threshold:θ``, ``threshold:full`` or ``grid:θ`` — parsed once (:meth:`parse`) and shared by
    :func:`from_spec`, the CLI, :mod:`blowfish_te.explore`, suites and plots. ``theta`` is None
    for families without θ and for ``threshold:full`` (``full`` True: the complete graph)."""

    text: str
    kind: str
    theta: int | None = None
    full: bool = False

    @classmethod
    def parse(cls, spec: str | PolicySpec) -> PolicySpec:
        """The spec of ``spec`` (a string, or a PolicySpec); :class:`SpecError` names what is allowed."""
        if isinstance(spec, PolicySpec):
            return spec
        if not isinstance(spec, str):
            raise SpecError(f"policy spec must be a string such as 'line' or 'threshold:16', got {type(spec).__name__}")
        kind, colon, arg = spec.partition(":")
        family = SPEC_KINDS.get(kind)
        if family is None or family.takes_theta != bool(colon):
            raise SpecError(f"unknown policy {spec!r}; allowed: {', '.join(SPEC_FORMS)}")
        if not colon:
            return cls(spec, kind)
        if family.full and arg == "full":
            return cls(spec, kind, None, True)
        if not arg.isdigit() or int(arg) < 1:
            raise SpecError(f"policy {spec!r}: θ must be a positive integer{' or full' if family.full else ''}")
        return cls(spec, kind, int(arg))

    @property
    def one_dimensional(self) -> bool:
        """Whether the family needs a 1-D domain (``line``, ``threshold``)."""
        return SPEC_KINDS[self.kind].ndim == 1

    def theta_on(self, shape: ShapeLike) -> float | None:
        """θ on a domain of ``shape`` (``full`` counts as the domain's size), None without θ."""
        if self.full:
            return float(check_shape(shape, "shape")[0])
        return None if self.theta is None else float(self.theta)

    def build(self, shape: ShapeLike) -> Policy:
        """The policy on a domain of ``shape`` (an int for 1-D)."""
        try:
            shape = check_shape(shape, "shape", MAX_DOMAIN_CELLS)  # each constructor checks what it lists
        except (TypeError, ValueError) as err:
            raise SpecError(f"policy {self.text!r}: {err}") from None
        family = SPEC_KINDS[self.kind]
        if family.ndim is not None and len(shape) != family.ndim:
            raise SpecError(f"policy {self.text!r} needs a 1-D domain, got shape {shape}; {family.otherwise}")
        try:
            return family.build(shape, self.theta)
        except ValueError as err:
            raise SpecError(f"policy {self.text!r}: {err}") from None


def from_spec(spec: str | PolicySpec, shape: ShapeLike) -> Policy:
    """The policy named by ``spec`` on a domain of ``shape`` (an int for 1-D): see
    :class:`PolicySpec`. Raises :class:`SpecError` naming what is allowed.

    >>> from_spec("threshold:16", 4096).name
    'threshold(4096, theta=16)'
    """
    return PolicySpec.parse(spec).build(shape)


def check_policy(policy: object, name: str = "policy") -> Policy:
    """Return ``policy``; raise a TypeError naming the argument unless it is a :class:`Policy`."""
    if not isinstance(policy, Policy):
        raise TypeError(f"{name} must be a blowfish_te Policy, got {type(policy).__name__}")
    return policy


