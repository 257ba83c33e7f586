"""Types of the lazily exported names of :mod:`blowfish_te.mechanisms` (read by type checkers
only; at run time each module loads on first use). Kept in step with its ``LIBRARY`` table by a test."""

from .adaptive import Adaptive as Adaptive
from .auto import Auto as Auto
from .base import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from .base import MECHANISMS as MECHANISMS
from .base import LinearMechanism as LinearMechanism
from .base import Mechanism as Mechanism
from .base import NativeMechanism as NativeMechanism
from .base import get_mechanism as get_mechanism
from .base import load_plugins as load_plugins
from .base import mechanism_class as mechanism_class
from .datadependent import AHP as AHP
from .datadependent import DAWA as DAWA
from .datadependent import MWEM as MWEM
from .hierarchical import H2 as H2
from .hierarchical import HB as HB
from .hierarchical import GreedyH as GreedyH
from .hierarchical import Privelet as Privelet
from .hierarchical import QuadTree as QuadTree
from .hierarchical import qardaji_branching as qardaji_branching
from .hierarchical import qardaji_branching_2d as qardaji_branching_2d
from .laplace import DirectLaplace as DirectLaplace
from .laplace import Identity as Identity
from .marginal import MarginalMechanism as MarginalMechanism
from .marginal import OptimizedMarginals as OptimizedMarginals
from .marginal import WorkloadMarginals as WorkloadMarginals
from .matrix import MatrixMechanism as MatrixMechanism
from .matrix import NonNegative as NonNegative
from .optimized import Optimized as Optimized
from .ordered import Ordered as Ordered
from .ordered import OrderedHierarchical as OrderedHierarchical
from .ordered import TunedOrderedHierarchical as TunedOrderedHierarchical
from .partition_then_transform import PartitionThenTransform as PartitionThenTransform
from .privtree import PrivTree as PrivTree
from .spatial import AGrid as AGrid
from .spatial import UGrid as UGrid
from .spatial import hilbert_order as hilbert_order
from .uniform import Uniform as Uniform

LIBRARY: dict[str, str]
