"""Marginal strategies: the eigen-algebra against dense least squares, sensitivities from the
policy's structure against the generic computation, the optimiser, releases against their
analytic error, and ``auto`` against every registered mechanism by brute force."""

import itertools

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

from blowfish_te import datasets, plan, policies
from blowfish_te import workloads as wl
from blowfish_te.audit import audit
from blowfish_te.mechanisms import MECHANISMS, get_mechanism
from blowfish_te.mechanisms.auto import analytic_mechanisms
from blowfish_te.sensitivity import sensitivity
from blowfish_te.strategies.marginals import (
    UNIT_CHANGES,
    MarginalStrategy,
    marginal_table,
    move_patterns,
    optimize_weights,
    own_marginals,
)
from blowfish_te.workloads import from_matrix

pytestmark = pytest.mark.core


def _dense_marginals(shape, subsets) -> np.ndarray:
    return wl.marginals(shape, [tuple(s) for s in subsets]).dense()


def _dense_strategy(strategy: MarginalStrategy) -> np.ndarray:
    rows = [w * _dense_marginals(strategy.domain, [s]) for s, w in zip(strategy.subsets, strategy.weights)]
    return np.concatenate(rows) if rows else np.zeros((0, int(np.prod(strategy.domain))))


def _constrained_lstsq(a, y, c, known):
    """Least squares of A x ≈ y subject to C x = known, dense: x = x_p + Z (A Z)⁺ (y - A x_p)."""
    if c.shape[0] == 0:
        return np.linalg.pinv(a) @ y, np.linalg.pinv(a)
    x_p = np.linalg.pinv(c) @ known
    z = scipy.linalg.null_space(c)
    solve = z @ np.linalg.pinv(a @ z)
    return x_p + solve @ (y - a @ x_p), solve


subsets_strategy = st.lists(st.lists(st.integers(0, 2), max_size=3, unique=True).map(lambda s: tuple(sorted(s))),
                            min_size=1, max_size=4, unique=True)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=3, max_size=3).map(tuple),
       measured=subsets_strategy, asked=subsets_strategy, seed=st.integers(0, 2**16),
       exact=st.sampled_from([(), ((),), ((0,),)]))
def test_least_squares_over_marginals_equals_dense_least_squares(shape, measured, asked, seed, exact):
    gen = np.random.default_rng(seed)
    measured = [s for s in measured if not any(set(s) <= set(e) for e in exact)]
    strategy = MarginalStrategy(shape, measured, gen.uniform(0.3, 2.0, len(measured)), exact)
    a, w = _dense_strategy(strategy), _dense_marginals(shape, asked)
    c = _dense_marginals(shape, list(exact)) if exact else np.zeros((0, w.shape[1]))
    x = gen.integers(0, 20, w.shape[1]).astype(float)
    y = a @ x + gen.normal(size=a.shape[0])
    x_hat, solve = _constrained_lstsq(a, y, c, c @ x)
    free = np.eye(w.shape[1]) if c.shape[0] == 0 else scipy.linalg.null_space(c)
    rank = np.linalg.matrix_rank
    supported = rank(np.vstack([a @ free, w @ free])) == rank(a @ free) if a.size else np.allclose(w @ free, 0)
    factor = strategy.error_factor(asked)
    if not supported:
        assert factor == np.inf
        return
    assert factor == pytest.approx(float(((w @ solve) ** 2).sum()), rel=1e-9, abs=1e-9)
    tables, start = [], 0
    for s in strategy.subsets:
        n = int(np.prod([shape[i] for i in s]))
        tables.append(y[start:start + n].reshape([shape[i] for i in s]))
        start += n
    known = [marginal_table(x, shape, e) for e in strategy.exact]
    answers = strategy.answer(asked, tables, known)
    assert np.allclose(answers, w @ x_hat, atol=1e-8)


def test_answers_follow_each_marginals_own_attribute_order():
    shape = (2, 3, 4)
    x = np.arange(24.0)
    strategy = MarginalStrategy(shape, [(0, 2), (1,)], [1.0, 1.0])
    asked = [(2, 0), (1,)]
    exact_tables = strategy.tables(x)
    assert np.allclose(strategy.answer(asked, exact_tables, []), wl.marginals(shape, asked) @ x)


SHAPE = (3, 2, 4)
K = int(np.prod(SHAPE))


def _policies():
    labels = np.arange(K).reshape(SHAPE) % 3
    product = np.add.outer(np.add.outer(np.arange(3) // 2 * 10, np.zeros(2)), np.arange(4) // 2)
    return [policies.unbounded(SHAPE), policies.complete(SHAPE), policies.attribute(SHAPE), policies.grid(SHAPE),
            policies.grid(SHAPE, 2), policies.partition(labels), policies.partition(product),
            policies.partition(np.zeros(SHAPE, dtype=int))]


@pytest.mark.parametrize("policy", _policies(), ids=lambda p: p.name)
def test_sensitivity_from_the_policys_moves_equals_the_generic_computation(policy):
    gen = np.random.default_rng(3)
    moves = move_patterns(policy)
    for subsets in ([(0,), (1, 2)], [(), (0, 1), (2,)], [(0, 1, 2)], [(1,)]):
        strategy = MarginalStrategy(SHAPE, subsets, gen.uniform(0.2, 2.0, len(subsets)))
        generic = sensitivity(from_matrix(_dense_strategy(strategy), domain=SHAPE), policy)
        assert strategy.sensitivity(moves) == pytest.approx(generic)
    assert MarginalStrategy(SHAPE, [(0,), (2,)], [1.0, 0.5]).sensitivity(UNIT_CHANGES) == 1.5


def test_nothing_is_exact_where_a_record_can_be_added_or_removed():
    # under unbounded DP the total changes too: it must carry noise like every other marginal
    for moves in (UNIT_CHANGES, move_patterns(policies.unbounded(SHAPE))):
        assert own_marginals(SHAPE, [(), (0,)], moves).exact == ()
        assert optimize_weights(SHAPE, [(), (0, 1)], moves).exact == ()
    assert own_marginals(SHAPE, [(), (0,)], move_patterns(policies.attribute(SHAPE))).exact == ((),)
    with pytest.raises(ValueError, match="without noise"):
        MarginalStrategy(SHAPE, [(0,)], [1.0], exact=[()]).sensitivity(UNIT_CHANGES)


def test_a_large_partition_block_that_is_not_a_product_is_read_pair_by_pair():
    # 40 cells in one block (kept as a clique), no two of which differ in all three attributes
    shape = (10, 10, 2)
    labels = np.ones(shape, dtype=int)
    labels[:, :, 0] = 0
    labels[0, :, 1] = 0
    labels[:4, :, 1] = 2  # block 2: 40 cells with attribute 2 fixed
    policy = policies.partition(labels)
    strategy = MarginalStrategy(shape, [(0,), (1,), (2,), (0, 1)], [1.0, 0.7, 2.5, 0.3])
    generic = sensitivity(from_matrix(_dense_strategy(strategy), domain=shape), policy)
    assert strategy.sensitivity(move_patterns(policy)) == pytest.approx(generic)


def test_marginals_on_attributes_no_edge_changes_are_exact_and_free():
    # a partition by attribute 0: its marginal is disclosed, the others carry noise
    shape = (3, 4, 2)
    labels = np.broadcast_to(np.arange(3)[:, None, None], shape)
    policy = policies.partition(labels)
    workload = wl.marginals(shape, [(0,), (1, 2), (0, 2)])
    mech = get_mechanism("marginals")
    x = np.random.default_rng(0).integers(0, 9, int(np.prod(shape)))
    release = plan(workload, policy, 1.0, mech).release(x, rng=0)
    assert np.allclose(release.answers[:3], wl.marginals(shape, [(0,)]) @ x, rtol=0, atol=1e-9)
    assert "exact" in release.choice and "(0,)" in release.choice
    # every marginal free: no noise at all
    free = plan(wl.marginals(shape, [(0,)]), policy, 1.0, mech)
    assert free.chosen.expected_mse == 0.0
    assert np.allclose(free.release(x, rng=0).answers, wl.marginals(shape, [(0,)]) @ x, rtol=0, atol=1e-9)


@pytest.mark.parametrize("policy", [policies.unbounded((4, 3, 5, 2)), policies.attribute((4, 3, 5, 2)),
                                    policies.complete((4, 3, 5, 2))], ids=lambda p: p.name)
@pytest.mark.slow
@pytest.mark.parametrize("name", ["marginals", "marginals_optimized"])
def test_releases_have_the_analytic_error(policy, name):
    shape = policy.shape
    workload = wl.marginals(shape, [(0, 1), (2, 3), (1, 2)])
    x = np.random.default_rng(1).integers(0, 20, int(np.prod(shape)))
    chosen = plan(workload, policy, 1.0, name)
    errors = np.array([np.mean((chosen.release(x, rng=s).answers - workload @ x) ** 2) for s in range(300)])
    # the mean of 300 per-release MSEs: 5 standard errors, from the sample
    assert abs(errors.mean() - chosen.chosen.expected_mse) < 5 * errors.std() / np.sqrt(errors.size)
    assert chosen.chosen.mechanism.name == name
    secure = chosen.release(x)  # rng=None: exact samplers
    assert secure.secure and secure.sensitivity == pytest.approx(chosen.chosen.mechanism.strategy_sensitivity(
        chosen.chosen.mechanism.policy_strategy(workload, policy), policy))


def test_the_optimiser_never_loses_to_the_workloads_own_marginals_and_beats_them_on_small_attributes():
    shape = (2,) * 6
    subsets = list(itertools.combinations(range(6), 2))
    for moves in (UNIT_CHANGES, move_patterns(policies.attribute(shape))):
        own = own_marginals(shape, subsets, moves)
        best = optimize_weights(shape, subsets, moves)
        score = [s.sensitivity(moves) ** 2 * s.error_factor(subsets) for s in (own, best)]
        assert score[1] <= score[0]
    # binary attributes: measuring larger marginals beats the 15 pairs under unbounded DP
    assert score_ratio(shape, subsets) < 0.9


def test_the_optimiser_runs_blas_on_one_thread_and_gives_the_threads_back(monkeypatch):
    """L-BFGS's BLAS calls on a few thousand weights are too small to share: on a busy 2-core
    machine two threads made a plan 20 times slower. Every solve sees one BLAS thread; after the
    search the caller's setting is back."""
    from threadpoolctl import threadpool_info

    from blowfish_te.strategies import marginals

    def blas_threads():
        return {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}

    before = blas_threads()
    seen = []
    minimize = marginals.minimize_nonnegative

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return minimize(*args, **kwargs)

    monkeypatch.setattr(marginals, "minimize_nonnegative", spy)
    optimize_weights((2,) * 5, list(itertools.combinations(range(5), 2)), UNIT_CHANGES, restarts=2)
    assert seen and all(threads <= {1} for threads in seen)
    assert blas_threads() == before


def score_ratio(shape, subsets) -> float:
    own, best = own_marginals(shape, subsets, UNIT_CHANGES), optimize_weights(shape, subsets, UNIT_CHANGES)
    return (best.sensitivity(UNIT_CHANGES) ** 2 * best.error_factor(subsets)) / (
        own.sensitivity(UNIT_CHANGES) ** 2 * own.error_factor(subsets))


def test_marginal_mechanisms_refuse_other_workloads_and_auto_says_so():
    with pytest.raises(ValueError, match="marginal workloads only"):
        plan(wl.prefix(8), policies.unbounded(8), 1.0, "marginals")
    chosen = plan(wl.prefix(8), policies.unbounded(8), 1.0, "auto")
    assert "marginals (answers marginal workloads only" in chosen.reason
    with pytest.raises(ValueError, match="restarts"):
        MECHANISMS["marginals_optimized"](restarts=1)


def _cases():
    line16, grid44, cube = (16,), (4, 4), (3, 2, 4)
    one_d = [policies.unbounded(16), policies.complete(16), policies.line(16), policies.threshold(16, 3),
             policies.partition(np.arange(16) // 5)]
    two_d = [policies.unbounded(grid44), policies.complete(grid44), policies.grid(grid44), policies.attribute(grid44),
             policies.partition(np.arange(16).reshape(grid44) % 3)]
    three_d = [policies.unbounded(cube), policies.complete(cube), policies.grid(cube), policies.attribute(cube),
               policies.partition(np.arange(24).reshape(cube) // 6)]
    workloads = [(wl.identity(line16), one_d), (wl.prefix(line16), one_d), (wl.random_ranges(16, 12, rng=0), one_d),
                 (wl.random_rects(grid44, 10, rng=0), two_d), (wl.marginals(grid44, [(0,), (1,)]), two_d),
                 (wl.all_marginals(cube, 2), three_d), (wl.marginals(cube, [(0, 1), (2,)]), three_d)]
    return [(w, p) for w, pols in workloads for p in pols]


@pytest.mark.slow
@pytest.mark.parametrize("workload, policy", _cases(), ids=lambda v: v.name)
def test_auto_is_within_one_percent_of_every_registered_mechanism(workload, policy):
    chosen = plan(workload, policy, 1.0, "auto").chosen.expected_mse
    best, best_name = np.inf, None
    for name in (*analytic_mechanisms(), "optimized"):
        for route in ("exact", "transform"):
            try:
                found = plan(workload, policy, 1.0, name, route)
            except (ValueError, TypeError):
                continue  # a mechanism for other workloads or policies, or a route it lacks
            for c in found.considered:
                if c.expected_mse is not None and c.expected_mse < best:
                    best, best_name = c.expected_mse, f"{name} {c.label}"
        if name.startswith("ordered"):
            try:
                native = plan(workload, policy, 1.0, name).chosen.expected_mse
            except ValueError:
                continue
            if native is not None and native < best:
                best, best_name = native, name
    assert chosen <= 1.01 * best, (best_name, best, chosen)


@pytest.mark.parametrize("policy", [policies.attribute((3, 2)), policies.partition(np.array([[0, 0], [0, 1], [1, 1]])),
                                    policies.complete((3, 2))], ids=lambda p: p.name)
@pytest.mark.slow
def test_the_auditor_finds_no_violation_where_some_marginals_are_exact(policy):
    workload = wl.marginals(policy.shape, [(0,), (1,), ()])
    report = audit(get_mechanism("marginals_optimized"), policy, workload, 1.0, n_select=300, n_detect=1500, rng=2)
    assert report.passed, report


def _counts_of(x, subsets):
    shape = x.shape
    return wl.MarginalCounts(shape, {tuple(s): marginal_table(x, shape, tuple(s)) for s in subsets})


@pytest.mark.parametrize("policy", [policies.unbounded((4, 3, 5)), policies.attribute((4, 3, 5))], ids=lambda p: p.name)
def test_a_release_from_marginal_counts_is_the_release_from_the_histogram(policy):
    x = np.random.default_rng(2).integers(0, 6, (4, 3, 5))
    workload = wl.all_marginals(x.shape, 2)
    for name in ("marginals", "marginals_optimized"):
        chosen = plan(workload, policy, 1.0, name)
        counts = _counts_of(x, chosen.marginals_read())
        assert np.array_equal(chosen.release(counts, rng=7).answers, chosen.release(x, rng=7).answers)
        assert chosen.release(counts).secure
    assert plan(workload, policy, 1.0, "identity").marginals_read() is None
    with pytest.raises(ValueError, match="needs the histogram, not marginal counts"):
        plan(workload, policy, 1.0, "identity").release(counts)
    with pytest.raises(ValueError, match="lack"):
        plan(workload, policy, 1.0, "marginals").release(_counts_of(x, [(0,)]))
    with pytest.raises(ValueError, match="are over"):
        plan(workload, policy, 1.0, "marginals").release(_counts_of(x[:3], [(0, 1, 2)]))


def test_marginal_counts_are_checked_on_arrival():
    with pytest.raises(ValueError, match="different record totals"):
        wl.MarginalCounts((2, 3), {(0,): np.array([1, 2]), (1,): np.array([1, 1, 2])})
    with pytest.raises(ValueError, match="negative"):
        wl.MarginalCounts((2, 3), {(0,): np.array([-1, 2])})
    with pytest.raises(ValueError, match="expected"):
        wl.MarginalCounts((2, 3), {(1,): np.array([1, 2])})
    with pytest.raises(ValueError, match="integer counts"):
        wl.MarginalCounts((2, 3), {(0,): np.array([0.5, 2])})
    with pytest.raises(ValueError, match="distinct attribute indices"):
        wl.MarginalCounts((2, 3), {(2,): np.array([1, 2])})
    counts = wl.MarginalCounts((2, 3), {(1, 0): np.array([[1, 2], [0, 1], [3, 0]])})
    assert counts.table((0,)).tolist() == [4, 3] and counts.table((0, 1)).tolist() == [[1, 0, 3], [2, 1, 0]]
    with pytest.raises(ValueError, match="no counted marginal contains"):
        wl.MarginalCounts((2, 3, 2), {(0,): np.array([1, 2])}).table((1,))


#: The census-like attributes and two more: a grid of 10¹² cells.
TRILLION_CELLS = {**datasets.CENSUS_ATTRIBUTES, "state": 50, "industry": 20}


@pytest.mark.slow
@pytest.mark.parametrize("attributes", [datasets.CENSUS_ATTRIBUTES, TRILLION_CELLS], ids=["1e9 cells", "1e12 cells"])
def test_a_large_domain_is_planned_counted_and_released_without_its_grid(attributes):
    import tracemalloc

    from blowfish_te import io

    domain = datasets.census_domain(attributes)
    cells = int(np.prod(domain.shape))
    assert cells in (10**9, 10**12)
    workload = wl.all_marginals(domain.shape, 2)
    tracemalloc.start()
    chosen = {name: plan(workload, maker(domain.shape), 1.0, "auto")
              for name, maker in (("unbounded", policies.unbounded), ("attribute", policies.attribute))}
    records = datasets.census_records(2000, rng=3, attributes=attributes)
    for chosen_plan in chosen.values():
        counted = io.marginal_counts(records, domain, chosen_plan.marginals_read(), engine="memory")
        release = chosen_plan.release(counted.counts, rng=0)
        assert counted.rows == counted.counted == 2000
        assert release.answers.shape == (workload.num_queries,) and np.isfinite(release.answers).all()
        assert release.mechanism.startswith("marginals")
        # least squares answers consistently: every 2-way marginal has one and the same total
        sizes = [int(np.prod([domain.shape[a] for a in s])) for s in workload.subsets]
        totals = [part.sum() for part in np.split(release.answers, np.cumsum(sizes)[:-1])]
        assert np.allclose(totals, totals[0], rtol=0, atol=1e-6 * max(1.0, abs(totals[0])))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 200 * 2**20  # far from the 8 bytes per cell of the grid
    assert "skipped for marginals" in chosen["unbounded"].reason


def test_beyond_a_histogram_only_implicit_structures_are_built():
    """Past MAX_CELLS only marginal workloads and policies of offsets or ⊥ are built; whatever
    would list the cells refuses by name, and so does a domain past MAX_DOMAIN_CELLS."""
    from blowfish_te._validation import MAX_CELLS, MAX_DOMAIN_CELLS

    shape = (100,) * 6  # 10¹² cells
    assert MAX_CELLS < 10**12 <= MAX_DOMAIN_CELLS
    assert wl.all_marginals(shape, 2).num_queries == 15 * 100**2
    small = wl.marginals((3, 4, 2), [(2, 0), ()])  # corners made on request, row-major over each tuple, then held
    assert small._lo is None
    assert small.lo.tolist() == [[0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 0, 1], [1, 0, 1], [2, 0, 1], [0, 0, 0]]
    assert small.hi.tolist()[0] == [0, 3, 0] and small.hi.tolist()[-1] == [2, 3, 1] and small.lo is small.lo
    assert policies.unbounded(shape).size == policies.attribute(shape).size == policies.grid(shape).size == 10**12
    for build in (lambda: wl.identity(shape), lambda: wl.prefix(10**12), lambda: policies.complete(shape),
                  lambda: policies.grid(shape, theta=600), lambda: policies.line(10**12)):
        with pytest.raises(ValueError, match="2147483648"):
            build()
    with pytest.raises(ValueError, match=r"2\*\*62"):
        wl.marginals((2,) * 63, [(0,)])
    with pytest.raises(ValueError, match="more than the 2147483648 allowed where arrays"):
        plan(wl.all_marginals(shape, 2), policies.unbounded(shape), 1.0, "identity")
    with pytest.raises(ValueError, match="2147483648"):
        wl.Boxes(shape, None, None)  # a box per cell
    # a mechanism that would release from the histogram is refused when planned, before any record is read
    with pytest.raises(ValueError, match="mechanism 'laplace' releases from the histogram"):
        plan(wl.all_marginals(shape, 2), policies.unbounded(shape), 1.0, "laplace")
    for policy in (policies.unbounded(shape), policies.attribute(shape)):
        for listing in (lambda p=policy: p.edges, policy.adjacency, policy.incidence, policy.to_networkx):
            with pytest.raises(ValueError, match="too many"):
                listing()


def test_marginal_workloads_by_spec():
    from blowfish_te.errors import SpecError

    built = wl.from_spec("marginals:2", (3, 2, 4))
    assert isinstance(built, wl.Marginals) and built.subsets == ((0, 1), (0, 2), (1, 2))
    assert wl.from_spec({"kind": "marginals", "order": 1}, (3, 2)).subsets == ((0,), (1,))
    for bad, message in (("marginals", "order of the marginals"), ("marginals:x", "order of the marginals"),
                         ({"kind": "marginals"}, "non-negative integer"), ("marginals:4", "at most the number of attributes")):
        with pytest.raises(SpecError, match=message):
            wl.from_spec(bad, (3, 2, 4))


def test_the_census_histogram_counts_its_records():
    from blowfish_te import datasets

    x = datasets.load("census-6d")
    assert x.shape == tuple(datasets.CENSUS_6D.values()) and x.sum() == 100_000
    records = datasets.census_records(500, rng=4, attributes={"a": 3, "b": 2})
    assert np.array_equal(datasets.census_histogram({"a": 3, "b": 2}, 500, rng=4),
                          np.histogram2d(records["a"], records["b"], bins=[np.arange(4), np.arange(3)])[0])
    assert datasets.census_records(5, rng=1).keys() == datasets.CENSUS_ATTRIBUTES.keys()


@pytest.mark.parametrize("policy", [None, policies.unbounded((3, 2, 4)), policies.complete((3, 2, 4)),
                                    policies.attribute((3, 2, 4))], ids=lambda p: "unit changes" if p is None else p.name)
def test_the_svd_bound_of_marginals_from_the_algebra_equals_the_dense_one(policy):
    from blowfish_te.bounds import lower_bound, marginal_lower_bound

    for workload in (wl.all_marginals((3, 2, 4), 2), wl.marginals((3, 2, 4), [(0,), (1, 2), ()])):
        dense = lower_bound(wl.from_matrix(workload.dense(), domain=(3, 2, 4)), 0.7, policy)
        assert marginal_lower_bound(workload, 0.7, policy) == pytest.approx(dense, rel=1e-7)
        assert lower_bound(workload, 0.7, policy) == pytest.approx(dense, rel=1e-7)
        # no strategy beats the bound
        best = plan(workload, policy or policies.unbounded((3, 2, 4)), 0.7, "marginals_optimized").chosen.expected_mse
        assert best * workload.num_queries >= dense * (1 - 1e-9)
    assert marginal_lower_bound(wl.all_marginals((3, 2, 4), 2), 0.7, policies.grid((3, 2, 4))) is None


def test_the_cli_counts_only_the_marginals_a_plan_reads(tmp_path):
    import json

    from click.testing import CliRunner

    from blowfish_te import datasets
    from blowfish_te.cli import main

    records = datasets.census_records(3000, rng=2)
    path = tmp_path / "census.csv"
    np.savetxt(path, np.column_stack(list(records.values())), fmt="%d", delimiter=",", header=",".join(records), comments="")
    args = ["run", str(path), "--workload", "marginals:2", "--policy", "unbounded", "--mechanism", "marginals", "--seed", "3", "--epsilon", "1",
            "--output", str(tmp_path / "out.json")]
    for name, size in datasets.CENSUS_ATTRIBUTES.items():  # a 10⁹-cell domain: its grid would take 8 GB
        args += ["--column", name, "--lower", "0", "--upper", str(size - 1)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "3000 record(s): 3000 counted; 45 marginal(s) counted" in result.output
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["mechanism"] == "marginals" and len(out["answers"]) == wl.all_marginals(datasets.census_domain().shape, 2).num_queries
    assert out["queries"][0].startswith("age=0 & sex=0 & race=0..4")


def test_auto_answers_marginals_of_a_large_grid_with_strategies_over_marginals():
    shape = (50, 40, 30, 20)  # 1.2·10⁶ cells: strategies over cells would plan for minutes, for 10³ times the error
    chosen = plan(wl.marginals(shape, [(0, 1), (2, 3)]), policies.attribute(shape), 1.0, "auto")
    assert "skipped for marginals" in chosen.reason and "greedyh" in chosen.reason
    assert {c.mechanism.name for c in chosen.considered} == {"laplace", "marginals", "marginals_optimized"}
    assert all(c.route == "exact" for c in chosen.considered)
    # each record moves in one attribute, so in one of the two marginals: Δ = 2, and the disclosed
    # total makes least squares a little better than Laplace noise on the counts (2 (2/ε)² = 8)
    assert chosen.chosen.expected_mse < 8.0
