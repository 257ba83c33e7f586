"""Coefficients of the fitted error models of :mod:`blowfish_te.selection`, one per (mechanism,
dimension, workload class). Written by ``benchmarks/train_selection.py``; do not edit by hand.

Each entry: (c₀, …, c₇) of log10(ratio) = c₀ + c₁·s + c₂·c + c₃·s·c + c₄·s² + c₅·c² + c₆·g + c₇·s·g
(see :class:`blowfish_te.selection.ErrorModel`).
"""

#: log10 N·ε/K of the training cells, per dimension: 10³–10⁷ records × ε ∈ {0.01, 0.1} over 4096
#: cells, 10⁴–10⁷ over 128² (below -1.5 the noisy total cannot tell scales apart).
SCALE_RANGES: dict[int, tuple[float, float]] = {1: (-1.5, 2.39), 2: (-1.5, 1.79)}
#: log10 of the largest guards' excess in the training cells (about 20).
EXCESS_MAX = 1.3
#: Fitted over noisy copies of the cells that ``python benchmarks/train_selection.py --data-dir
#: ../shared/datasets/dpbench --seeds 5 --save-rows rows.json`` measures (``--rows rows.json --write``);
#: AGrid's with ``--only agrid --seeds 20`` (its error varies up to 3-fold from seed to seed),
#: DAWA's and PrivTree's 2-D models (deviation and count quadtrees) with ``--only dawa --ndim 2 --seeds 10``
#: and ``--only privtree --ndim 2 --seeds 10``; PrivTree's 1-D
#: ranges model with ``--only privtree --ndim 1 --seeds 20`` (its prefix errors vary 20-fold from seed to seed).
COEFFICIENTS: dict[tuple[str, int, str], tuple[float, ...]] = {
    ('agrid', 2, 'cells'): (-0.6675, 0.0982, 0.0163, -0.1922, 0.0092, -0.3152, 0.7779, -0.2113),
    ('agrid', 2, 'ranges'): (0.0038, 0.2291, 0.63, -0.1687, 0.1866, 0.1164, 0.2139, -0.0919),
    ('dawa', 1, 'cells'): (-0.3593, 0.3121, -0.9187, 0.165, 0.0416, -0.3568, 0.0394, -0.0794),
    ('dawa', 1, 'ranges'): (-0.4709, 0.2992, -0.3375, 0.0696, 0.0168, -0.2165, 0.1461, -0.0539),
    ('dawa', 2, 'cells'): (0.451, 0.1567, -0.1043, 0.0627, -0.0642, -0.093, 0.2622, 0.0204),
    ('dawa', 2, 'ranges'): (0.6972, -0.1048, 1.5568, 0.0159, -0.1465, 0.242, 0.6362, 0.2039),
    ('partition_then_transform', 1, 'cells'): (0.4366, -1.2735, 1.9774, -1.4847, 0.37, 1.6938, 0.5798, 0.5702),
    ('privtree', 1, 'cells'): (-1.1426, 3.7555, 3.0726, -0.0507, -1.7512, -0.7011, 2.4351, 0.5923),
    ('privtree', 1, 'ranges'): (0.3641, 0.3258, 0.2649, 0.0572, -0.0743, -0.0373, 0.1259, -0.0232),
    ('privtree', 2, 'cells'): (-0.0722, 0.0626, 0.9424, -0.038, -0.1549, -0.0784, 0.8789, 0.0319),
    ('privtree', 2, 'ranges'): (1.0533, -0.5367, 0.8904, 0.3046, -0.9419, -1.095, 1.1613, 2.0977),
    ('ugrid', 2, 'cells'): (-1.1383, 1.6272, -3.1529, 0.715, -0.9301, -0.8398, -0.3397, 0.0374),
    ('ugrid', 2, 'ranges'): (1.2126, 0.0274, -1.2815, -1.6115, -0.6597, 0.5746, -0.1257, 0.1241),
}
#: The least-squares fits of the models whose decision fit above is the cost-weighted refinement:
#: their predictions compare across mechanisms (``selection.error_model(..., calibrated=True)``).
LEAST_SQUARES: dict[tuple[str, int, str], tuple[float, ...]] = {
    ('privtree', 2, 'ranges'): (0.6544, -0.0939, 1.4853, 0.019, -0.1488, 0.2133, 0.6161, 0.2115),
}
