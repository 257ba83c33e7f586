"""The record total N (public or measured), native releases, measure/expected_error of the base kinds."""

import numpy as np
import pytest

import blowfish_te.mechanisms.base as base
import blowfish_te.selection as selection


def _total_class():
    class T(base.RecordTotal):
        name = "t"

        def __init__(self, total=None, total_share=0.1):
            self._init_total(total, total_share)

    return T


def _recorder(monkeypatch, offset=0.0):
    calls = []

    def fake(values, scale, rng, *, sensitivity, integer):
        calls.append({"values": np.array(values, dtype=float), "scale": scale, "rng": rng,
                      "sensitivity": sensitivity, "integer": integer})
        return np.asarray(values, dtype=float) + offset

    monkeypatch.setattr(base, "add_laplace", fake)
    monkeypatch.setattr(selection, "add_laplace", fake)  # the grids buy their total with their check's features
    return calls


# --- RecordTotal -------------------------------------------------------------------------------


def test_public_total_draws_nothing(monkeypatch):
    calls = _recorder(monkeypatch)
    T = _total_class()
    t = T(total=7, total_share=0.25)
    gen = np.random.default_rng(0)
    for eps in (0.3, 2.5):
        n, left = t._record_total(np.array([1, 2, 3]), eps, gen)
        assert n == 7.0 and type(n) is float
        assert left == eps
    assert calls == []
    assert t.total == 7.0 and t.total_share == 0.25


@pytest.mark.parametrize("eps", [0.3, 2.5])
@pytest.mark.parametrize("share", [0.1, 0.4])
def test_measured_total_one_draw(monkeypatch, eps, share):
    calls = _recorder(monkeypatch, offset=0.5)
    T = _total_class()
    t = T(total_share=share)
    gen = np.random.default_rng(1)
    x = np.array([3, 0, 4, 5])
    n, left = t._record_total(x, eps, gen)
    assert len(calls) == 1
    call = calls[0]
    assert call["values"].tolist() == [12.0]
    assert call["scale"] == pytest.approx(1.0 / (share * eps))
    assert call["rng"] is gen
    assert call["sensitivity"] == 1.0
    assert call["integer"] is True
    assert n == 12.5 and type(n) is float
    assert left == pytest.approx(eps - share * eps)


def test_measured_total_clamped_at_one(monkeypatch):
    T = _total_class()
    t = T(total_share=0.2)
    x = np.array([1, 2])
    _recorder(monkeypatch, offset=-10.0)
    n, left = t._record_total(x, 0.5, np.random.default_rng(2))
    assert n == 1.0
    assert left == pytest.approx(0.4)
    monkeypatch.undo()
    _recorder(monkeypatch, offset=-1.5)  # noisy total 1.5: kept as is
    n, _ = t._record_total(x, 0.5, np.random.default_rng(2))
    assert n == 1.5


def test_measured_total_real_noise_seeded():
    T = _total_class()
    t = T(total_share=0.3)
    x = np.array([40, 60])
    eps = 0.8
    n, left = t._record_total(x, eps, np.random.default_rng(5))
    from blowfish_te.noise import add_laplace

    ref = add_laplace(np.array([100.0]), 1.0 / (0.3 * eps), np.random.default_rng(5), sensitivity=1.0, integer=True)[0]
    assert n == max(float(ref), 1.0)
    assert left == pytest.approx(0.56)


def test_measured_total_secure_rng_is_integer():
    from blowfish_te.noise import SecureRandom

    T = _total_class()
    t = T(total_share=0.5)
    for _ in range(5):
        n, _ = t._record_total(np.array([50, 50]), 3.0, SecureRandom())
        assert n == int(n)


def test_init_total_validation():
    T = _total_class()
    with pytest.raises(ValueError, match=r"^total \(the public record count\) must be > 0, got 0\.0$"):
        T(total=0)
    with pytest.raises(ValueError, match=r"^total \(the public record count\) must be > 0, got -1\.0$"):
        T(total=-1)
    with pytest.raises(TypeError, match=r"^total \(the public record count\) must be a real number"):
        T(total="5")
    assert T(total=1e-9).total == 1e-9
    assert T(total=0.5).total == 0.5
    assert T(total=None).total is None
    assert T().total is None
    for bad in (0, 1, -0.1, 1.5, 2):
        with pytest.raises(ValueError, match=r"^total_share must be strictly between 0 and 1, got "):
            T(total_share=bad)
    with pytest.raises(TypeError, match=r"^total_share must be a real number"):
        T(total_share="0.1")
    with pytest.raises(TypeError, match=r"^total_share must be a real number"):
        T(total_share=None)
    assert T(total_share=1e-9).total_share == 1e-9
    assert T(total_share=1 - 1e-9).total_share == 1 - 1e-9
    assert T(total_share=0.3).total_share == 0.3
    # a public total still validates and stores the share
    assert T(total=5, total_share=0.7).total_share == 0.7
    with pytest.raises(ValueError, match="total_share"):
        T(total=5, total_share=1)


def test_total_source_strings():
    T = _total_class()
    assert T(total=7).total_source() == "t: record total given as public (7)"
    assert T(total=2.5).total_source() == "t: record total given as public (2.5)"
    assert T(total_share=0.25).total_source() == "t: record total measured with 0.25·ε (never read from the data)"


def test_defaults_of_users():
    from blowfish_te.mechanisms import MWEM, UGrid

    u = UGrid()
    assert u.total is None and u.total_share == 0.02
    m = MWEM()
    assert m.total is None and m.total_share == 0.1
    assert UGrid(total=9).total_source() == "ugrid: record total given as public (9)"
    assert MWEM(total_share=0.2).total_source() == "mwem: record total measured with 0.2·ε (never read from the data)"
    with pytest.raises(ValueError, match=r"^total \(the public record count\) must be > 0"):
        UGrid(total=0)
    with pytest.raises(ValueError, match=r"^total_share must be strictly between 0 and 1"):
        MWEM(total_share=1)


def test_real_users_spend_their_share(monkeypatch):
    from blowfish_te.mechanisms import MWEM, UGrid
    from blowfish_te.workloads import identity, prefix

    calls = _recorder(monkeypatch)
    x = np.arange(16).reshape(4, 4)
    UGrid(total_share=0.2, select=False).run(identity((4, 4)), x, 0.7, rng=np.random.default_rng(0))
    assert len(calls) == 1
    assert calls[0]["values"].tolist() == [float(x.sum())]
    assert calls[0]["scale"] == pytest.approx(1.0 / (0.2 * 0.7))
    assert calls[0]["sensitivity"] == 1.0 and calls[0]["integer"] is True

    calls.clear()
    xs = np.array([3, 1, 4, 1])
    MWEM(rounds=1, updates=1, total_share=0.3).run(prefix(4), xs, 0.9, rng=np.random.default_rng(1))
    assert len(calls) == 1
    assert calls[0]["values"].tolist() == [9.0]
    assert calls[0]["scale"] == pytest.approx(1.0 / (0.3 * 0.9))

    calls.clear()
    UGrid(total=100, select=False).run(identity((4, 4)), x, 0.7, rng=np.random.default_rng(0))
    assert calls == []


# --- NativeMechanism.release: validation, then serves and measure -------------------------------


def test_a_native_release_passes_validated_arguments():
    from blowfish_te import policies
    from blowfish_te.noise import SecureRandom
    from blowfish_te.routes import Outcome
    from blowfish_te.workloads import prefix

    seen = {}

    class N(base.NativeMechanism, register=False):
        name = "n"

        def serves(self, workload, policy):
            seen["check"] = (workload, policy)
            return True

        def measure(self, workload, x, epsilon, gen, policy=None):
            seen["compute"] = (workload, x, policy, epsilon, gen)
            return Outcome(np.zeros(workload.num_queries))

    p = policies.line(4)
    mech = N()
    out = mech.release(np.tril(np.ones((4, 4))), [1, 2, 3, 4], 3, 7, policy=p)
    assert out.answers.tolist() == [0.0] * 4
    w, pol = seen["check"]
    assert isinstance(w, base.Workload) and w.size == 4 and pol is p
    w2, x, pol2, eps, gen = seen["compute"]
    assert w2 is w and pol2 is p
    assert x.dtype == np.int64 and x.tolist() == [1, 2, 3, 4]
    assert eps == 3.0 and type(eps) is float
    assert isinstance(gen, np.random.Generator)
    assert gen.random() == np.random.default_rng(7).random()
    g = np.random.default_rng(3)
    mech.release(prefix(4), np.array([1, 2, 3, 4]), 0.5, g, policy=p)
    assert seen["compute"][4] is g
    mech.release(prefix(4), np.array([1, 2, 3, 4]), 0.5, policy=p)
    assert isinstance(seen["compute"][4], SecureRandom)


def test_a_class_of_the_earlier_native_contract_still_releases_and_is_warned():
    """compute, check_policy and expected_error_native (the earlier contract) become measure,
    serves and expected_error, with a DeprecationWarning when the class is defined."""
    from blowfish_te import policies
    from blowfish_te.routes import Outcome
    from blowfish_te.workloads import prefix

    seen = {}
    with pytest.warns(DeprecationWarning, match="implements compute, check_policy, expected_error_native"):
        class Old(base.NativeMechanism, register=False):
            name = "old"

            def check_policy(self, workload, policy):
                seen["check"] = policy
                if policy.ndim != 1:
                    raise ValueError("1-D only")

            def compute(self, workload, x, policy, epsilon, gen):
                seen["compute"] = (policy, epsilon)
                return Outcome(np.full(workload.num_queries, float(x.sum())))

            def expected_error_native(self, workload, epsilon, policy):
                return 2.0 / epsilon**2

    line = policies.line(4)
    out = Old().release(prefix(4), [1, 2, 3, 4], 0.5, 0, policy=line)
    assert out.answers.tolist() == [10.0] * 4 and seen == {"check": line, "compute": (line, 0.5)}
    assert Old().expected_error(prefix(4), 0.5, policy=line) == 8.0 and Old().tags.analytic_error
    with pytest.raises(ValueError, match="1-D only"):
        Old().serves(prefix((2, 2)), policies.grid((2, 2)))
    with pytest.raises(TypeError, match="needs the policy"):
        Old().measure(prefix(4), np.arange(4), 0.5, np.random.default_rng(0))
    with pytest.warns(DeprecationWarning, match="release_native"):
        again = Old().release_native(prefix(4), [1, 2, 3, 4], line, 0.5, 0)
    assert again.answers.tolist() == [10.0] * 4


def test_a_unit_change_mechanism_refuses_a_policy_it_would_not_protect():
    """A data-dependent release is ε-DP for unit changes: given a policy directly it refuses,
    pointing to answer(), which runs it on the transformed counts."""
    from blowfish_te import policies
    from blowfish_te.mechanisms import DAWA, Uniform
    from blowfish_te.workloads import prefix

    for mech in (DAWA(), Uniform()):
        with pytest.raises(TypeError, match=r"ε-DP for unit changes of x; under line\(8\) release it with answer"):
            mech.release(prefix(8), np.arange(8), 1.0, 0, policy=policies.line(8))
        with pytest.raises(TypeError, match="unit changes"):
            mech.measure(prefix(8), np.arange(8), 1.0, np.random.default_rng(0), policy=policies.line(8))


def test_a_native_release_matches_its_measure():
    from blowfish_te import policies
    from blowfish_te.mechanisms import Ordered, OrderedHierarchical
    from blowfish_te.workloads import all_ranges, prefix

    x = np.array([5, 0, 3, 7, 2, 4])
    for mech in (Ordered(), Ordered(constrained=False), OrderedHierarchical(fanout=2)):
        for pol in (policies.line(6), policies.threshold(6, 2)):
            for w in (prefix(6), all_ranges(6)):
                out = mech.release(w, x, 0.6, np.random.default_rng(11), policy=pol)
                ref = mech.measure(w, x, 0.6, np.random.default_rng(11), policy=pol)
                assert out.answers.dtype == np.float64
                np.testing.assert_array_equal(out.answers, ref.answers)
                assert out.answers.shape == (w.num_queries,)
                assert out.component_totals == ref.component_totals
                assert out.sensitivity == ref.sensitivity
                assert out.noise_scale == ref.noise_scale
    o = Ordered(constrained=False).release(prefix(6), x.reshape(6), 0.6, 4, policy=policies.line(6))
    assert o.noise_scale == pytest.approx(o.sensitivity / 0.6)
    o2 = Ordered(constrained=False).release(prefix(6), x, 0.6, 4, policy=policies.threshold(6, 2))
    assert o2.sensitivity == 2.0 and o2.noise_scale == pytest.approx(2.0 / 0.6)


def test_native_release_refusals():
    from blowfish_te import policies
    from blowfish_te.mechanisms import Ordered, OrderedHierarchical
    from blowfish_te.workloads import identity, prefix

    x = np.array([1, 2, 3, 4, 5])
    for mech in (Ordered(), OrderedHierarchical()):
        with pytest.raises(ValueError, match=r"^workload prefix\(4\) has 4 cells but policy line\(5\) has 5$"):
            mech.release(prefix(4), x, 0.5, 1, policy=policies.line(5))
        with pytest.raises(TypeError, match=r"^policy must be a blowfish_te Policy, got str$"):
            mech.release(prefix(5), x, 0.5, 1, policy="line")
        with pytest.raises(ValueError, match=rf"^{mech.name} needs a 1-D ordered domain"):
            mech.release(identity((2, 3)), np.ones(6), 0.5, 1, policy=policies.complete((2, 3)))
        with pytest.raises(ValueError, match=r"^x has shape \(4,\), expected \(5,\) to match the domain$"):
            mech.release(prefix(5), x[:4], 0.5, 1, policy=policies.line(5))
        with pytest.raises(ValueError, match=r"^epsilon must be a finite number > 0, got 0$"):
            mech.release(prefix(5), x, 0, 1, policy=policies.line(5))
        with pytest.raises(ValueError, match=r"^rng seed must be a non-negative integer, got -1$"):
            mech.release(prefix(5), x, 0.5, -1, policy=policies.line(5))
        with pytest.raises(TypeError, match=r"^mechanism .* needs the policy"):
            mech.run(prefix(5), x, 0.5, 1)


# --- Mechanism.measure / _checked --------------------------------------------------------------


def test_mechanism_measure_and_checked():
    from blowfish_te.workloads import prefix

    seen = []

    class M(base.Mechanism, register=False):
        name = "m"

        def run(self, workload, x, epsilon, rng=None):
            seen.append(rng)
            return [int(v) for v in workload.matvec(x)]

    mech = M()
    gen = np.random.default_rng(0)
    out = mech.measure(prefix(3), np.array([1, 2, 3]), 0.5, gen)
    assert seen == [gen]
    assert out.answers.dtype == np.float64
    assert out.answers.tolist() == [1.0, 3.0, 6.0]
    assert out.sensitivity is None and out.noise_scale is None and out.component_totals == {}

    w, x, eps, g = base.Mechanism._checked(np.eye(3), [1.0, 2.0, 3.0], 2, 9)
    assert w.size == 3 and x.dtype == np.int64 and eps == 2.0
    assert isinstance(g, np.random.Generator)
    assert g.random() == np.random.default_rng(9).random()
    given = np.random.default_rng(1)
    assert base.Mechanism._checked(np.eye(3), [1, 2, 3], 2, given)[3] is given


# --- LinearMechanism: measure, expected_error, _frobenius ---------------------------------------


def _linear_class():
    from blowfish_te.strategies.general import GeneralStrategy, IdentityStrategy
    from blowfish_te.workloads import prefix

    class L(base.LinearMechanism, register=False):
        name = "l"

        def strategy(self, workload):
            return IdentityStrategy(workload.domain)

        def policy_strategy(self, workload, policy):
            return GeneralStrategy(prefix(workload.domain))

    return L


def test_expected_error_direct_and_cache_per_workload_and_strategy():
    from blowfish_te import policies
    from blowfish_te.sensitivity import sensitivity
    from blowfish_te.workloads import from_matrix

    L = _linear_class()
    mech = L()
    w1 = from_matrix(np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0]]))
    w2 = from_matrix(np.array([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0], [1.0, 1.0, 1.0, 1.0]]))
    pol = policies.line(4)
    a_pol = np.tril(np.ones((4, 4)))
    d_pol = sensitivity(from_matrix(a_pol), pol)
    for eps in (0.4, 2.5):
        for w in (w1, w2, w1):
            dense = w.dense()
            frob = float(np.sum(dense ** 2))
            assert mech.expected_error(w, eps) == pytest.approx(2 * (1.0 / eps) ** 2 * frob)
            assert mech._frobenius(w, mech.strategy(w)) == pytest.approx(frob)
            r = dense @ np.linalg.pinv(a_pol)
            frob_pol = float(np.sum(r ** 2))
            assert mech.expected_error(w, eps, policy=pol) == pytest.approx(2 * (d_pol / eps) ** 2 * frob_pol)
            assert mech.expected_error(w, eps, sensitivity=3.0) == pytest.approx(2 * (3.0 / eps) ** 2 * frob)
            assert mech.expected_error(w, eps, policy=pol, sensitivity=0.5) == pytest.approx(
                2 * (0.5 / eps) ** 2 * frob_pol)
    with pytest.raises(ValueError, match=r"^epsilon=1e-10 is too small: the noise scale Δ/ε = 1e\+300/1e-10 overflows$"):
        mech.expected_error(w1, 1e-10, sensitivity=1e300)


def test_linear_measure_policy_strategy_and_noise_arguments(monkeypatch):
    from blowfish_te import policies
    from blowfish_te.noise import SecureRandom
    from blowfish_te.sensitivity import sensitivity
    from blowfish_te.workloads import from_matrix, prefix

    L = _linear_class()
    mech = L()
    w = prefix(4)
    x = np.array([2, 1, 0, 3])
    pol = policies.threshold(4, 2)
    d_pol = sensitivity(prefix(4), pol)
    calls = _recorder(monkeypatch)
    out = mech.measure(w, x, 0.7, np.random.default_rng(0), policy=pol)
    assert calls[-1]["values"].tolist() == [2.0, 3.0, 3.0, 6.0]  # the policy strategy (prefix) measured
    assert calls[-1]["sensitivity"] == d_pol and calls[-1]["integer"] is True
    assert calls[-1]["scale"] == pytest.approx(d_pol / 0.7)
    assert out.sensitivity == d_pol and out.noise_scale == pytest.approx(d_pol / 0.7)
    np.testing.assert_allclose(out.answers, [2.0, 3.0, 3.0, 6.0])
    assert out.answers.dtype == np.float64
    out = mech.measure(w, x, 0.7, np.random.default_rng(0))
    assert calls[-1]["values"].tolist() == [2.0, 1.0, 0.0, 3.0]
    assert calls[-1]["sensitivity"] == 1.0 and calls[-1]["integer"] is True
    assert out.sensitivity == 1.0 and out.noise_scale == pytest.approx(1 / 0.7)
    from blowfish_te.strategies.general import GeneralStrategy

    half = GeneralStrategy(from_matrix(np.eye(4) * 0.5))

    class H(base.LinearMechanism, register=False):
        name = "h"

        def strategy(self, workload):
            return half

        def reconstruct(self, workload, strategy, y):
            return np.rint(np.asarray(y) * 2).astype(np.int64)

    out = H().measure(w, x, 0.5, SecureRandom())
    assert calls[-1]["integer"] is False and calls[-1]["sensitivity"] == 0.5
    assert out.answers.dtype == np.float64
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"^epsilon=1e-320 is too small: the noise scale Δ/ε = 1\.0/1e-320 overflows$"):
        mech.measure(w, x, 1e-320, np.random.default_rng(0))
