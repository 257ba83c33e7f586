"""The secure sampling path (Mironov 2012): exact discrete Laplace, the lattice scheme, rng=None.

The distribution tests draw from secure randomness, so they are not seeded: each is a χ² test
against the exact distribution at α = 1e-6 (a false alarm once in a million runs), with bins of
probability about 1/40 or more under the hypothesis. Each also shows power: the same test, with the noise
scale of the hypothesis off by 30 %, must reject with a wide margin (its statistic is several
times the critical value; expected margins are given at each test).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from blowfish_te import answer, policies
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import Mechanism, PartitionThenTransform
from blowfish_te.noise import NUMPY_LAPLACE, add_laplace, check_rng, laplace
from blowfish_te.partitions import (
    _report_noisy_min_scores,
    dawa_partition,
    matching_partition,
    noisy_pairing_partition,
)
from blowfish_te.secure import (
    SecureRandom,
    default_backend,
    discrete_laplace,
    integer_laplace,
    lattice_laplace,
    lattice_spacing,
    opendp_available,
    sampler_name,
)
from blowfish_te.testing import dlap_cdf

pytestmark = pytest.mark.core

ALPHA = 1e-6
BINS = 40
needs_opendp = pytest.mark.skipif(not opendp_available(), reason="OpenDP (the [secure] extra) is not installed")


def chi2_statistic(draws: np.ndarray, scale: float) -> tuple[float, float]:
    """χ² of integer draws against DLap(scale) and its critical value at ALPHA.

    Bins are cut at the integers just below the Laplace(scale) quantiles j/BINS (merged where
    they coincide), so under the hypothesis every bin has probability about 1/BINS or more; the
    bin probabilities are exact (from :func:`~blowfish_te.testing.dlap_cdf`).
    """
    p = np.arange(1, BINS) / BINS
    quantiles = np.where(p < 0.5, scale * np.log(2 * p), -scale * np.log(2 * (1 - p)))
    edges = np.unique(np.floor(quantiles))
    cdf = np.concatenate([[0.0], dlap_cdf(edges, scale), [1.0]])
    expected = draws.size * np.diff(cdf)
    observed = np.bincount(np.searchsorted(edges, draws, side="left"), minlength=edges.size + 1)
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    return statistic, float(stats.chi2.isf(ALPHA, edges.size))


def assert_fits_and_has_power(draws: np.ndarray, scale: float, margin: float) -> None:
    """Accept DLap(scale); reject DLap(1.3·scale) and DLap(0.7·scale) with statistic > margin × critical."""
    statistic, critical = chi2_statistic(draws, scale)
    assert statistic < critical, f"χ² {statistic:.1f} >= {critical:.1f}: draws do not fit DLap({scale})"
    for wrong in (1.3 * scale, 0.7 * scale):
        statistic, critical = chi2_statistic(draws, wrong)
        assert statistic > margin * critical, f"χ² {statistic:.1f} vs DLap({wrong}): no power"


SCALE = Fraction(10, 3)  # a rational scale with a denominator, so ⌊X/den⌋ is exercised


@pytest.fixture(scope="module")
def opendp_draws() -> np.ndarray:
    if not opendp_available():
        pytest.skip("OpenDP (the [secure] extra) is not installed")
    return discrete_laplace(SCALE, 10**5, backend="opendp")


@pytest.fixture(scope="module")
def builtin_draws() -> np.ndarray:
    return discrete_laplace(SCALE, 10**6, backend="builtin")


@pytest.mark.slow
def test_opendp_discrete_laplace_is_exact(opendp_draws):
    # 10^5 draws: against a 30 % wrong scale the statistic is about 90x (1.3·t) and 280x (0.7·t)
    # the critical value, with a standard deviation of about 3 % of that
    assert opendp_draws.dtype == np.int64 and opendp_draws.size == 10**5
    assert_fits_and_has_power(opendp_draws, float(SCALE), margin=20)


def test_builtin_discrete_laplace_is_exact(builtin_draws):
    # 10^6 draws: against a 30 % wrong scale the statistic is about 900x (1.3·t) and 2800x (0.7·t)
    # the critical value; the test also sees a 2 % error of the scale (statistic about 1.7x critical)
    assert builtin_draws.dtype == np.int64 and builtin_draws.size == 10**6
    assert_fits_and_has_power(builtin_draws, float(SCALE), margin=200)
    statistic, critical = chi2_statistic(builtin_draws, 1.02 * float(SCALE))
    assert statistic > critical


@pytest.mark.parametrize(
    "scale",
    [
        Fraction(1, 4),  # mostly zeros: the "-0" rejection carries the sampler
        Fraction(1),  # num = den = 1: U is always 0, X = V
        2.5,  # a double: num/den = 5/2
        Fraction(7919, 13),  # large, with a denominator
        Fraction(10**6),  # U uniform on 10^6 values
        Fraction(3**40, 7**20),  # numerator above 2^56: rounded up by less than 2^-54
    ],
    ids=str,
)
def test_builtin_discrete_laplace_fits_at_every_scale(scale):
    # 2·10^5 draws: against a 30 % wrong scale the statistic is at least 100x the critical value
    # at every scale here but 1/4, where DLap puts 96 % on 0 and the margin is about 10x
    draws = discrete_laplace(scale, 2 * 10**5, backend="builtin")
    statistic, critical = chi2_statistic(draws, float(scale))
    assert statistic < critical
    if scale == Fraction(1, 4):  # few bins: test P(Z = 0) and P(|Z| = 1) directly
        alpha = np.exp(-4.0)
        p0 = (1 - alpha) / (1 + alpha)
        counts = np.bincount(np.minimum(np.abs(draws), 2), minlength=3)
        p = np.array([p0, 2 * p0 * alpha, 1 - p0 - 2 * p0 * alpha])
        assert stats.chisquare(counts, draws.size * p).pvalue > ALPHA
        assert stats.chisquare(counts, draws.size * np.array([p0 - 0.01, 2 * p0 * alpha + 0.01, p[2]])).pvalue < ALPHA
    else:
        assert_fits_and_has_power(draws, float(scale), margin=10)


def test_a_huge_numerator_is_rounded_up_never_down():
    from blowfish_te.secure import _bounded

    for scale in (Fraction(3**40, 7**20), Fraction(2**60 + 1, 3 * 2**9), Fraction(2**57 + 1, 2**200 - 1)):
        bounded = _bounded(scale)
        assert bounded.numerator <= 2**56 and scale <= bounded < scale * (1 + Fraction(1, 2**54))
    for scale in (Fraction(10, 3), Fraction(2.0**-1070), Fraction(2.0**52)):  # doubles and small fractions
        assert _bounded(scale) is scale


def test_uniform_words_are_uniform_below_any_modulus():
    from blowfish_te.secure import _uniform_below

    for modulus in (1, 3, 2**32, 2**32 + 1, 3 * 2**62, 2**64):
        draws = _uniform_below(modulus, 6 * 10**4)
        assert draws.dtype == np.uint64 and int(draws.max()) < modulus
        if modulus > 1:  # slices of the range (each value, or 6 slices): probabilities exact up to 1/modulus
            slices = min(modulus, 6)
            counts = np.bincount([int(d) * slices // modulus for d in draws.tolist()], minlength=slices)
            cuts = [-(-modulus * j // slices) for j in range(slices + 1)]
            p = np.array([(hi - lo) / modulus for lo, hi in zip(cuts, cuts[1:])])
            assert stats.chisquare(counts, p * draws.size).pvalue > ALPHA
            tilted = p + np.r_[0.02, -0.02, np.zeros(slices - 2)]  # statistic about 100x critical
            assert stats.chisquare(counts, tilted * draws.size).pvalue < ALPHA


def test_bernoulli_exp_is_exact_beyond_64_bits():
    # den·k passes 2^64 at k = 2, so every lane that survives step 1 ends in Python integers
    from blowfish_te.secure import _bernoulli_exp

    den = 2**63 + 1
    for num, size in ((den // 2, 2 * 10**4), (den, 10**4), (0, 10**3)):
        hits = int(_bernoulli_exp(num, den, size).sum())
        p = np.exp(-num / den)
        assert stats.binomtest(hits, size, p).pvalue > ALPHA
        if num:
            assert stats.binomtest(hits, size, p + 0.05).pvalue < ALPHA
    lanes = np.array([0, 1, 2, 3] * 5000, dtype=np.uint64)  # num per lane, shared den
    hits = _bernoulli_exp(lanes, 3, lanes.size)
    for a in range(4):
        assert stats.binomtest(int(hits[lanes == a].sum()), 5000, np.exp(-a / 3)).pvalue > ALPHA


@pytest.mark.slow
def test_builtin_and_opendp_agree(opendp_draws, builtin_draws):
    # two-sample homogeneity on |Z| up to 9, the rest pooled (expected counts >= 200 per cell)
    table = np.array([np.bincount(np.minimum(np.abs(d), 10), minlength=11) for d in (opendp_draws, builtin_draws)])
    assert stats.chi2_contingency(table).pvalue > ALPHA
    shifted = table.copy()
    shifted[1] = np.bincount(np.minimum(np.abs(builtin_draws) // 2, 10), minlength=11)  # a broken sampler
    assert stats.chi2_contingency(shifted).pvalue < ALPHA


@pytest.mark.parametrize(
    "backend, size, margin",
    # grid-unit scales near 5e10, so DLap is close to continuous: against a 30 % wrong scale the
    # statistic is about 58x / 163x the critical value with 10^5 draws
    [pytest.param("opendp", 10**5, 20, marks=needs_opendp), ("builtin", 10**5, 20)],
)
@pytest.mark.slow
def test_lattice_laplace_is_exact(backend, size, margin):
    values = np.random.default_rng(1).normal(0.0, 50.0, size)  # real-valued, off any grid
    scale, delta = 0.7, 2.0
    e = lattice_spacing(delta, size)
    assert size * 2.0**e <= 2.0**-20 * delta < 2 * size * 2.0**e  # the largest such power of two
    out = lattice_laplace(values, scale, delta, backend=backend)
    units = np.ldexp(out, -e)
    assert np.array_equal(units, np.round(units))  # on the grid 2^e·ℤ
    noise = (units - np.rint(np.ldexp(values, -e))).astype(np.int64)
    t = scale / 2.0**e + size * scale / delta  # documented grid-unit scale: (Δ + dΛ)/(Λε)
    assert 1 <= t * 2.0**e / scale <= 1 + 2.0**-20
    assert_fits_and_has_power(noise, t, margin)


def test_lattice_scale_covers_the_worst_rounding_of_neighbours(monkeypatch):
    """Exact privacy loss on neighbours built so that rounding to the grid adds d - 1 grid steps
    to their distance (the most it can with Δ/Λ whole): ‖k(v) - k(v')‖₁ / t must stay <= ε for the
    scale t the release actually draws with."""
    import blowfish_te.secure as secure

    drawn = []

    def no_noise(scale, size, backend=None):  # keeps the lattice scale, adds nothing
        drawn.append(Fraction(scale))
        return np.zeros(size, dtype=np.int64)

    monkeypatch.setattr(secure, "discrete_laplace", no_noise)
    d, delta, scale = 4, 1.0, 0.5  # ε = Δ / scale = 2
    grid = Fraction(2) ** lattice_spacing(delta, d)
    steps = int(Fraction(delta) / grid)  # Δ/Λ, whole
    # v sits just below a half step (rounds down); three shifts of (Δ/(dΛ) - 1 + 1/32) steps each
    # cross a half step (round up), the fourth takes the rest: ‖v - v'‖₁ = Δ exactly
    below_half = Fraction(31, 64)
    shifts = [Fraction(steps, d) - 1 + Fraction(1, 32)] * (d - 1)
    shifts.append(steps - sum(shifts))
    v = [below_half * grid] * d
    moved = [(below_half + s) * grid for s in shifts]
    assert sum(b - a for a, b in zip(v, moved)) == Fraction(delta)
    low = np.ldexp(lattice_laplace(np.array([float(a) for a in v]), scale, delta), -lattice_spacing(delta, d))
    high = np.ldexp(lattice_laplace(np.array([float(b) for b in moved]), scale, delta), -lattice_spacing(delta, d))
    distance = int(np.abs(high - low).sum())
    assert distance == steps + d - 1  # rounding added d - 1 grid steps
    assert drawn[0] == drawn[1]
    assert Fraction(distance) / drawn[0] <= Fraction(delta) / Fraction(scale)


def test_integer_laplace_adds_exact_integers():
    base = np.array([0, 7, 2**40, -3])
    out = integer_laplace(base, 1.5)
    assert out.dtype == np.float64 and np.array_equal(out, np.round(out))
    assert np.abs(out - base).max() < 200  # P(|Z| >= 200) < 1e-50 per draw
    assert np.array_equal(integer_laplace(base, 0), base)
    with pytest.raises(ValueError, match="integers"):
        integer_laplace(np.array([0.5, 1.0]), 1.0)


def test_numpy_scalars_are_exact_scales():
    for scale in (np.int64(3), np.float32(2.5), Fraction(np.int64(7), np.int64(2))):
        draws = discrete_laplace(scale, 50, backend="builtin")
        assert draws.dtype == np.int64 and np.abs(draws).max() < 200


def test_zero_scale_and_empty_draws():
    assert np.array_equal(discrete_laplace(0, 4), np.zeros(4, dtype=np.int64))
    assert discrete_laplace(2.0, 0).shape == (0,)
    values = np.array([0.25, -1.5])
    assert np.array_equal(lattice_laplace(values, 0.0, 1.0), values)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: discrete_laplace(-1.0, 3), ValueError, "scale"),
        (lambda: discrete_laplace(float("nan"), 3), ValueError, "scale"),
        (lambda: discrete_laplace(2.0**53, 3), ValueError, "scale"),
        (lambda: discrete_laplace("1", 3), TypeError, "scale"),
        (lambda: discrete_laplace(1.0, -1), ValueError, "size"),
        (lambda: discrete_laplace(1.0, 2.5), TypeError, "size"),
        (lambda: discrete_laplace(1.0, 3, backend="numpy"), ValueError, "backend"),
        (lambda: lattice_laplace(np.zeros(3), 1.0, 0.0), ValueError, "sensitivity"),
        (lambda: lattice_laplace(np.zeros(3), 1.0, -1.0), ValueError, "sensitivity"),
        (lambda: lattice_laplace(np.array([np.inf]), 1.0, 1.0), ValueError, "finite"),
        (lambda: lattice_laplace(np.zeros(3), 1e16, 1e-16), ValueError, "2\\*\\*52"),
        (lambda: integer_laplace(np.zeros((2, 2)), 1.0), ValueError, "1-D"),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- rng=None in releases -------------------------------------------------------------------


def test_rng_arguments_are_checked_with_messages_that_name_them():
    assert check_rng(np.int64(3)).random() == np.random.default_rng(3).random()
    with pytest.raises(ValueError, match=r"^rng seed must be a non-negative integer, got -1$"):
        check_rng(-1)
    for bad, kind in ((True, "bool"), (1.5, "float"), ("7", "str")):
        with pytest.raises(TypeError, match=rf"^seed must be a numpy.random.Generator, .* or None, got {kind}$"):
            check_rng(bad, "seed")


def test_laplace_noise_keeps_the_shape_of_the_values():
    values = np.arange(6.0).reshape(2, 3)
    noisy = add_laplace(values, 1.0, np.random.default_rng(0), sensitivity=1.0, integer=False)
    assert noisy.shape == (2, 3)
    assert np.allclose(noisy - values, laplace(1.0, 6, np.random.default_rng(0)).reshape(2, 3), rtol=0, atol=1e-12)


def test_rng_none_is_the_secure_generator():
    gen = check_rng(None)
    assert isinstance(gen, SecureRandom) and gen.backend == default_backend()
    assert check_rng(gen) is gen
    before = gen.tally()
    assert sorted(gen.permutation(10)) == list(range(10))  # other draws still work ...
    assert gen.summary(before) == ("numpy.random.Generator.permutation (secrets-seeded, not hardened)", False)
    before = gen.tally()
    add_laplace(np.arange(3), 1.0, gen, sensitivity=1.0, integer=True)
    assert gen.summary(before) == (sampler_name("integer", gen.backend), True)
    assert gen.summary(gen.tally()) == ("none", True)
    assert not np.array_equal(SecureRandom().integers(0, 2**62, 4), SecureRandom().integers(0, 2**62, 4))


def test_secure_identity_release_is_integer_and_exact():
    # unbounded policy: x_G = x, Δ = 1, so the answers are x + DLap(1/ε) i.i.d.
    k, eps = 2 * 10**5, 0.4
    x = np.random.default_rng(5).integers(0, 1000, k)
    release = answer(wl.identity(k), x, policies.unbounded(k), eps, "identity")
    assert release.secure and release.sampler == sampler_name("integer", default_backend())
    assert release.noise_scale == 1 / eps
    noise = release.answers - x
    assert np.array_equal(noise, np.round(noise))
    assert_fits_and_has_power(noise.astype(np.int64), 1 / eps, margin=50)  # expected about 190x / 660x


def test_a_secure_random_chooses_the_backend():
    x = np.array([5, 0, 9])
    release = answer(wl.identity(3), x, policies.unbounded(3), 1.0, rng=SecureRandom("builtin"), mechanism="identity")
    assert release.secure and release.sampler == sampler_name("integer", "builtin")
    assert "blowfish_te builtin" in release.sampler and np.array_equal(release.answers, np.round(release.answers))
    if opendp_available():
        release = answer(wl.identity(3), x, policies.unbounded(3), 1.0, rng=SecureRandom("opendp"))
        assert release.secure and release.sampler == sampler_name("integer", "opendp")
    else:
        with pytest.raises(ValueError, match=r"blowfish_te\[secure\]"):
            SecureRandom("opendp")


def test_secure_release_of_a_real_strategy_uses_the_lattice():
    w = wl.from_matrix([[0.5, 1.0, 0.0], [1.0, 0.25, 1.0]])
    release = answer(w, [3, 1, 4], policies.complete(3), 1.0, "laplace", route="exact")
    assert release.secure and release.sampler == sampler_name("lattice", default_backend())
    assert not np.array_equal(release.answers, np.round(release.answers))


def test_seeded_releases_are_the_fast_path_bit_for_bit():
    x = np.array([3, 4, 5, 6, 7])
    release = answer(wl.identity(5), x, policies.unbounded(5), 0.5, rng=7, mechanism="identity")
    assert not release.secure and release.sampler == NUMPY_LAPLACE
    # what the fast path always computed: W (A x + Laplace(Δ/ε)), A = W = I, Δ = 1, ε = 0.5
    assert np.array_equal(release.answers, wl.identity(5) @ (x + np.random.default_rng(7).laplace(0.0, 2.0, 5)))
    again = answer(wl.identity(5), x, policies.unbounded(5), 0.5, "identity", rng=np.random.default_rng(7))
    assert np.array_equal(release.answers, again.answers)


class _TwoDraws(Mechanism, register=False):
    """Noisy answers from the hardened path, plus (optionally) a noise-only floating-point draw."""

    name = "two_draws"

    def __init__(self, also_float: bool):
        self.also_float = also_float

    def run(self, workload, x, epsilon, rng=None):
        gen = check_rng(rng)
        y = add_laplace(np.asarray(x), 1 / epsilon, gen, sensitivity=1.0, integer=True)
        if self.also_float:
            y = y + laplace(1 / epsilon, y.size, gen)
        return workload @ y


def test_a_release_is_secure_only_if_every_draw_was_hardened():
    x = np.array([1, 2, 3, 4])
    hardened = answer(wl.identity(4), x, policies.unbounded(4), 1.0, _TwoDraws(False))
    assert hardened.secure and hardened.sampler == sampler_name("integer", default_backend())
    mixed = answer(wl.identity(4), x, policies.unbounded(4), 1.0, _TwoDraws(True))
    assert not mixed.secure
    assert mixed.sampler.split("; ") == sorted(
        [sampler_name("integer", default_backend()), "numpy.random.Generator.laplace (secrets-seeded, not hardened)"]
    )


def test_secure_release_without_noise():
    release = answer(wl.prefix(3), np.array([2, 0, 5]), policies.partition([0, 1, 2]), 1.0, mechanism="identity")
    assert release.secure and release.sampler.startswith("none")
    assert np.array_equal(release.answers, [2, 2, 7])


# -- the other mechanisms on the secure path ----------------------------------------------------

K12 = 12
X12 = np.array([3, 0, 5, 1, 1, 7, 2, 0, 0, 4, 6, 2])
INTEGER, LATTICE = "integer", "lattice"


def _mechanism_cases():
    """(id, mechanism, policy, the hardened samplers its secure release must name)."""
    return [
        ("uniform", M.Uniform(), policies.unbounded(K12), {INTEGER}),
        ("ordered", M.Ordered(), policies.threshold(K12, 3), {INTEGER}),
        ("ordered_unconstrained", M.Ordered(constrained=False), policies.unbounded(K12), {INTEGER}),
        ("ordered_hierarchical", M.OrderedHierarchical(fanout=2), policies.threshold(K12, 4), {LATTICE}),
        ("ordered_hierarchical_unbounded", M.OrderedHierarchical(fanout=2), policies.unbounded(K12), {LATTICE}),
        ("ahp", M.AHP(), policies.line(K12), {INTEGER}),
        ("dawa", M.DAWA(), policies.line(K12), {INTEGER, LATTICE}),
        ("ptt_dawa", PartitionThenTransform("dawa", epsilon_split=0.25), policies.line(K12), {INTEGER, LATTICE}),
        ("ptt_matching", PartitionThenTransform("matching", epsilon_split=0.25), policies.line(K12), {INTEGER, LATTICE}),
        ("ptt_noisy_pairing", PartitionThenTransform("noisy_pairing", epsilon_split=0.25), policies.threshold(K12, 2),
         {INTEGER}),
    ]


@pytest.mark.parametrize("name, mech, policy, kinds", _mechanism_cases(), ids=[c[0] for c in _mechanism_cases()])
def test_every_laplace_mechanism_is_hardened_with_rng_none(name, mech, policy, kinds):
    release = answer(wl.prefix(K12), X12, policy, 0.7, mech)
    assert release.secure, release.sampler
    assert release.sampler.split("; ") == sorted(sampler_name(kind, default_backend()) for kind in kinds)
    assert release.answers.shape == (K12,) and np.isfinite(release.answers).all()


@pytest.mark.parametrize("mech", [M.MWEM(rounds=3, updates=5), M.MWEM(rounds=3, updates=5, total=31.0)], ids=repr)
def test_mwem_is_not_secure_because_of_its_gumbel_draw(mech):
    release = answer(wl.prefix(K12), X12, policies.unbounded(K12), 0.7, mech)
    assert not release.secure and np.isfinite(release.answers).all()
    # the Laplace draws are hardened (integer: a 0/1 workload); the exponential mechanism is not
    assert release.sampler.split("; ") == sorted(
        [sampler_name(INTEGER, default_backend()), "numpy.random.Generator.gumbel (secrets-seeded, not hardened)"]
    )


def test_mwem_measures_a_real_workload_on_the_lattice():
    w = wl.from_matrix([[0.5, 1.0, 0.0, 0.0], [0.0, 0.25, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    release = answer(w, [3, 1, 4, 1], policies.unbounded(4), 1.0, M.MWEM(rounds=2, updates=3, total=9.0))
    assert not release.secure and np.isfinite(release.answers).all()
    assert sampler_name(LATTICE, default_backend()) in release.sampler.split("; ")


class _Spy(SecureRandom):
    """A SecureRandom recording (number of values, sensitivity) of every lattice call."""

    def __init__(self):
        super().__init__()
        self.lattice_calls = []
        self.scales = []

    def lattice_laplace(self, values, scale, sensitivity):
        self.lattice_calls.append((np.size(values), sensitivity))
        self.scales.append(scale)
        return super().lattice_laplace(values, scale, sensitivity)


def test_report_noisy_min_and_max_scores_share_one_grid():
    # DAWA: sensitivity 2d for the d scores of each call -> every piece score on 2^-19 ℤ, with
    # ε·t = δ/Λ + 2 grid units for a threshold that moves by δ; the matching: sensitivity d ->
    # pair and twin weights on 2^-20 ℤ (see the partitions' docstrings)
    spy = _Spy()
    labels = dawa_partition(X12, 0.5, 0.5, spy)
    assert labels.shape == (K12,) and len(spy.lattice_calls) >= 10  # one call per (length, sub-length)
    assert {lattice_spacing(s, d) for d, s in spy.lattice_calls} == {-19}
    grid = 2.0**-19
    for delta in (1.0, 2.0):
        spy = _Spy()
        scores = _report_noisy_min_scores(np.linspace(0, 7, 5), delta, 0.5, spy)
        units = np.ldexp(scores, 19)
        assert np.array_equal(units, np.round(units))
        (size, sensitivity), scale = spy.lattice_calls[0], spy.scales[0]
        t = scale / grid + size * scale / sensitivity  # DLap(t) in grid units (lattice_laplace)
        assert 0.5 * t == pytest.approx(delta / grid + 2, rel=1e-12)
    spy = _Spy()
    labels = matching_partition(X12, 0.5, 0.5, spy)
    assert [d for d, _ in spy.lattice_calls] == [K12 * (K12 - 1) // 2, K12]
    assert {lattice_spacing(s, d) for d, s in spy.lattice_calls} == {-20}
    assert labels.shape == (K12,) and np.bincount(labels).max() <= 2


def test_ordered_hierarchical_lattice_sensitivity_is_the_composed_epsilon():
    # rows of group g weighted by ε_g/Δ_g: the weighted vector's sensitivity is ε_S + ε_H = ε
    spy = _Spy()
    mech, policy, eps = M.OrderedHierarchical(fanout=2), policies.threshold(K12, 4), 0.7
    groups, weighted = mech._plan(policy, eps)
    assert [label for label, *_ in groups] == ["S", "H"]
    mech.release(wl.prefix(K12), X12, eps, spy, policy=policy)
    assert spy.lattice_calls == [(weighted.num_queries, pytest.approx(eps, rel=1e-12))]


def test_noisy_pairing_partition_draws_exact_integers():
    spy = _Spy()
    before = spy.tally()
    labels = noisy_pairing_partition(X12, policies.line(K12), 0.5, 0.5, spy)
    assert spy.summary(before) == (sampler_name(INTEGER, default_backend()), True)
    assert labels.shape == (K12,) and not spy.lattice_calls


# Seeded answers recorded with the code before these mechanisms drew through add_laplace:
# Σ np.round(answers, 6) of answer(prefix(12), X12, policy, 0.7, mechanism, rng=3). DAWA and
# partition-then-transform were recorded again after their partition and bucket stage changed
# (DAWA again after each change of its private check or of its fitted 1-D models: on 12 cells a
# prefix workload counts as a histogram; partition-then-transform's matching and noisy pairing
# again when their prefix answers were made consistent: nondecreasing from 0 up to the total),
# Uniform and MWEM after they moved to the unbounded policy (they refuse the line policy).
SEEDED_SUMS = {
    "uniform": 185.11676400000002,
    "ordered": 171.19207,
    "ordered_unconstrained": 96.29440499999998,
    "ordered_hierarchical": 129.756955,
    "ordered_hierarchical_unbounded": 138.09412400000002,
    "ahp": 188.90180999999998,
    "dawa": 184.063027,
    "ptt_dawa": 202.267306,
    "ptt_matching": 121.978863,
    "ptt_noisy_pairing": 151.568081,
    "mwem": 47.028597,
    "mwem_total": 198.692843,
}


@pytest.mark.parametrize("name", sorted(SEEDED_SUMS))
def test_seeded_mechanisms_are_unchanged(name):
    cases = {c[0]: (c[1], c[2]) for c in _mechanism_cases()}
    cases["mwem"] = (M.MWEM(rounds=3, updates=5), policies.unbounded(K12))
    cases["mwem_total"] = (M.MWEM(rounds=3, updates=5, total=31.0), policies.unbounded(K12))
    mech, policy = cases[name]
    release = answer(wl.prefix(K12), X12, policy, 0.7, mech, rng=3)
    assert not release.secure and release.sampler == NUMPY_LAPLACE
    assert float(np.round(release.answers, 6).sum()) == pytest.approx(SEEDED_SUMS[name], abs=1e-9)


def test_seeded_partitions_are_unchanged():
    # recorded before the partitions drew through add_laplace
    assert dawa_partition(X12, 0.5, 0.5, rng=4).tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]  # recorded anew
    assert matching_partition(X12, 0.5, 0.5, rng=4).tolist() == [0, 1, 2, 3, 4, 1, 5, 6, 4, 2, 6, 0]
    assert noisy_pairing_partition(X12, policies.line(K12), 0.5, 0.5, rng=4).tolist() == [
        1, 5, 0, 7, 4, 2, 2, 6, 3, 3, 1, 4,
    ]


# -- exact arithmetic where it is rarely reached ------------------------------------------------
# Paths a random draw reaches with probability e^-127 or never at the test's sizes (integers past
# int64, scales past 2^63 in the denominator, values near the float range), driven here with the
# random parts fixed, so that every result can be checked exactly.


def test_builtin_draws_are_exact_where_int64_would_overflow(monkeypatch):
    """X = U + num·V leaves int64 for V >= 128 when num is near 2^56: those lanes are computed in
    Python integers. With U, V and the signs fixed, Y = ⌊X / den⌋ must be exact for every V."""
    import blowfish_te.secure as secure

    num, den = 2**56 - 1, 2**10
    vs = [0, 5, 126, 127, 128, 129, 200, 255, 256, 300]
    monkeypatch.setattr(secure, "_uniform_below", lambda modulus, count: np.full(count, modulus - 1, dtype=np.uint64))
    monkeypatch.setattr(secure, "_bernoulli_exp", lambda num, den, count: np.ones(count, dtype=bool))
    monkeypatch.setattr(secure, "_geometric_exp1", lambda count: np.resize(np.array(vs, dtype=np.int64), count))
    monkeypatch.setattr(secure.secrets, "token_bytes", lambda n: bytes(n))  # every sign bit 0: positive
    draws = secure._builtin_draws(Fraction(num, den), len(vs))
    assert draws.dtype == np.int64
    assert draws.tolist() == [(num - 1 + num * v) // den for v in vs]


def test_a_scale_below_two_to_the_minus_63_draws_zeros():
    """den >= 2^63 cannot be an int64 divisor; X < 2^63 <= den makes every draw 0."""
    for den in (2**63, 2**64, 2**70):
        draws = discrete_laplace(Fraction(1, den), 200, "builtin")
        assert draws.dtype == np.int64 and not draws.any()


def test_geometric_draws_and_every_output_are_int64():
    from blowfish_te.secure import _geometric_exp1

    assert _geometric_exp1(50).dtype == np.int64
    assert discrete_laplace(0, 3).dtype == np.int64 and discrete_laplace(Fraction(7, 2), 3).dtype == np.int64


def test_shifted_sums_exactly_past_two_to_the_62():
    from blowfish_te.secure import _shifted

    points = np.array([3.0, -2.0**62, 2.0**62, 2.0**70, -5.0, 2.0**61, 3 * 2.0**61, 2.0**61, 2.0**70])
    noise = np.array([-4, 1, 2**62, -(2**62), 2**62 + 5, 2**62 - 1, 2**62 - 1, 2**63 - 1, 3], dtype=np.int64)
    expected = [float(int(p) + int(n)) for p, n in zip(points, noise)]
    assert _shifted(points, noise).tolist() == expected
    big = np.array([2**53 + 1, 7], dtype=np.int64)  # exact integers beyond the double's 53 bits
    assert _shifted(big, np.array([1, 1], dtype=np.int64)).tolist() == [float(2**53 + 2), 8.0]


def test_integer_laplace_sums_int64_values_beyond_53_bits_exactly(monkeypatch):
    import blowfish_te.secure as secure

    monkeypatch.setattr(secure, "discrete_laplace", lambda scale, size, backend=None: np.ones(size, dtype=np.int64))
    assert integer_laplace(np.array([2**53 + 1, -(2**60) - 1]), 1.0).tolist() == [float(2**53 + 2), float(-(2**60))]
    assert integer_laplace(np.array([4.0, -1.0], dtype=np.float32), 1.0).tolist() == [5.0, 0.0]


def test_the_opendp_scale_is_the_smallest_double_at_least_the_exact_one():
    from blowfish_te.secure import _float_at_least

    for value in (Fraction(1, 3), Fraction(2, 3), Fraction(1, 10), Fraction(10**20 + 1), Fraction(1, 2), Fraction(3)):
        out = _float_at_least(value)
        assert Fraction(out) >= value and Fraction(math.nextafter(out, -math.inf)) < value


def test_bounded_scales_grow_by_less_than_two_to_the_minus_54():
    from blowfish_te.secure import _bounded

    rng = np.random.default_rng(5)
    for _ in range(200):
        scale = Fraction(int(rng.integers(2**57, 2**62)) | 1, int(rng.integers(2**20, 2**30)) | 1)  # at most 2^42
        bounded = _bounded(scale)
        assert bounded.numerator <= 2**56 and scale <= bounded < scale * (1 + Fraction(1, 2**54))
    assert _bounded(Fraction(2**56, 3)) == Fraction(2**56, 3)  # a numerator of 2^56 is kept


def test_bernoulli_exp_steps_are_strict_comparisons(monkeypatch):
    """⌊w/q⌋ < a is w < a·q: a word equal to a·q must stop the run (a ≤ would continue it), and a
    scalar run with num = 0 always stops at k = 1 (exp(0) = 1)."""
    import blowfish_te.secure as secure

    def boundary_words(modulus, count):
        q = 2**32 // modulus if modulus <= 2**32 else 2**64 // modulus
        return np.full(count, q * 1, dtype=np.uint64), q  # exactly a·q for a = 1

    monkeypatch.setattr(secure, "_uniform_words", boundary_words)
    assert secure._bernoulli_exp(1, 3, 4).tolist() == [True] * 4  # stopped at k = 1: odd
    monkeypatch.undo()
    for k in (1, 3, 301):  # the run ends at K = k, odd: True every time (a <= would go on with probability 1/(5k))
        assert all(secure._bernoulli_exp_scalar(0, 5, k) for _ in range(200))
    assert not any(secure._bernoulli_exp_scalar(0, 5, 2) for _ in range(50))  # K = 2, even


def test_uniform_words_refuse_the_word_at_the_limit(monkeypatch):
    import blowfish_te.secure as secure

    modulus = 3
    q = 2**32 // modulus
    limit = q * modulus
    served = iter([np.array([limit, 5], dtype=np.uint64), np.array([limit], dtype=np.uint64),
                   np.array([limit - 1], dtype=np.uint64)])
    monkeypatch.setattr(secure, "_words", lambda count, bits: next(served)[:count])
    words, q_out = secure._uniform_words(modulus, 2)
    assert q_out == q and words.tolist() == [limit - 1, 5]  # a word equal to the limit is drawn again, every time


def test_lattice_scale_counts_the_rounding_of_every_value(monkeypatch):
    """t = scale/Λ + d·scale/Δ exactly, for scales and sensitivities other than 1."""
    import blowfish_te.secure as secure

    drawn = []
    monkeypatch.setattr(secure, "discrete_laplace", lambda scale, size, backend=None: drawn.append(Fraction(scale)) or
                        np.zeros(size, dtype=np.int64))
    for scale, delta, d in ((0.75, 3.0, 5), (2.5, 0.25, 2), (0.1, 7.0, 3)):
        secure.lattice_laplace(np.zeros(d), scale, delta)
        grid = Fraction(2) ** lattice_spacing(delta, d)
        assert drawn[-1] == Fraction(scale) / grid + d * Fraction(scale) / Fraction(delta)


def test_lattice_releases_are_on_the_grid_even_for_one_value_and_clip_huge_ones(monkeypatch):
    import blowfish_te.secure as secure

    out = lattice_laplace(np.array([0.3]), 1.0, 1.0)
    grid = 2.0 ** lattice_spacing(1.0, 1)
    assert out[0] != 0.3 and float(out[0] / grid).is_integer()  # one value gets noise too
    assert np.array_equal(lattice_laplace(np.array([0.3, -2.5]), 0, 1.0), [0.3, -2.5])  # scale 0: the values
    monkeypatch.setattr(secure, "discrete_laplace", lambda scale, size, backend=None: np.zeros(size, dtype=np.int64))
    e = lattice_spacing(1e-3, 2)
    huge = secure.lattice_laplace(np.array([1.7e308, -1.7e308]), 1.0, 1e-3)
    assert huge.tolist() == [2.0 ** (1000 + e), -(2.0 ** (1000 + e))]  # clamped to ±2^1000·Λ, finite
    coarse = secure.lattice_laplace(np.array([1.7e308]), 1.0, 2.0**50)  # Λ = 2^30: 2^1030·Λ would overflow
    assert coarse.tolist() == [2.0**1023]  # clamped to 2^1023


def test_the_backend_asked_for_is_the_backend_used(monkeypatch):
    import blowfish_te.secure as secure

    calls = []
    monkeypatch.setattr(secure, "_builtin_draws", lambda scale, size: calls.append("builtin") or np.zeros(size, np.int64))
    monkeypatch.setattr(secure, "default_backend", lambda: "opendp")
    monkeypatch.setattr(secure, "opendp_available", lambda: True)
    monkeypatch.setattr(secure, "_opendp_sampler", lambda scale: lambda zeros: calls.append("opendp") or [0] * len(zeros))
    secure.integer_laplace(np.zeros(2), 1.0, "builtin")
    secure.lattice_laplace(np.zeros(2), 1.0, 1.0, "builtin")
    generator = secure.SecureRandom("builtin")
    generator.integer_laplace(np.zeros(2), 1.0)
    generator.lattice_laplace(np.zeros(2), 1.0, 1.0)
    assert calls == ["builtin"] * 4
    out = secure.discrete_laplace(1.0, 3, "opendp")
    assert calls[-1] == "opendp" and out.dtype == np.int64
    tally = generator.tally()
    assert tally[sampler_name("integer", "builtin")] == 1 and tally[sampler_name("lattice", "builtin")] == 1
    generator.integer_laplace(np.zeros(2), 1.0)
    generator.lattice_laplace(np.zeros(2), 1.0, 1.0)
    assert generator.tally()[sampler_name("lattice", "builtin")] == 2
    generator.random()
    generator.random()
    assert generator.tally()[sampler_name("integer", "builtin")] == 2
    assert generator.tally()["numpy.random.Generator.random (secrets-seeded, not hardened)"] == 2
    with pytest.raises(AttributeError, match="^_private$"):
        generator._private  # noqa: B018


def test_a_missing_opendp_is_named_and_the_builtin_backend_still_works(monkeypatch):
    import blowfish_te.secure as secure

    monkeypatch.setattr(secure, "opendp_available", lambda: False)
    with pytest.raises(ValueError, match=r"^backend='opendp' needs OpenDP: pip install 'blowfish_te\[secure\]'$"):
        secure.discrete_laplace(1.0, 3, "opendp")
    assert secure.discrete_laplace(1.0, 3, "builtin").shape == (3,)


@pytest.mark.parametrize("call, error, message", [
    (lambda: discrete_laplace(-1.0, 3), ValueError, "scale must be >= 0, got -1.0"),
    (lambda: discrete_laplace("1", 3), TypeError, "scale must be a real number >= 0, got '1' (str)"),
    (lambda: discrete_laplace(1.0, -1), ValueError, "size"),
    (lambda: lattice_spacing(1.0, 0), ValueError, "size"),
    (lambda: lattice_spacing(-1.0, 3), ValueError, "sensitivity must be >= 0, got -1.0"),
    (lambda: lattice_laplace(np.zeros(3), 1.0, -1.0), ValueError, "sensitivity must be >= 0, got -1.0"),
    (lambda: lattice_laplace(np.zeros(3), 1.0, 0.0), ValueError, "sensitivity must be > 0 for a lattice release"),
    (lambda: lattice_laplace(np.array([np.inf]), 1.0, 1.0), ValueError, "values must be finite"),
    (lambda: integer_laplace(np.array([0.5]), 1.0), ValueError,
     "values must be integers for integer_laplace; use lattice_laplace for real values"),
    (lambda: lattice_laplace(np.zeros(3), 1e15, 1e-3), ValueError,
     "the lattice noise scale 4.29e+24 (in units of 2^-32) exceeds 2**52: scale / sensitivity (1/epsilon) or the number "
     "of values is too large"),
])
def test_errors_name_the_argument_exactly(call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert str(raised.value).startswith(message), str(raised.value)


def test_a_sensitivity_has_no_upper_limit():
    assert lattice_spacing(2.0**60, 1) == 40  # Λ = 2^-20·Δ
    assert lattice_laplace(np.zeros(2), 1.0, 2.0**60).shape == (2,)


def test_the_largest_scale_is_accepted():
    assert discrete_laplace(2**52, 2).dtype == np.int64
    with pytest.raises(ValueError, match="at most 2"):
        discrete_laplace(2**52 + 1, 2)
