"""MWEM and its exponential mechanism: the ε shares (record total, selection, measurement), the
Laplace scales and sensitivities of the measurements, the utility ε_sel·score/(2Δ) handed to the
exponential choice, the multiplicative-weights update against an independent reference, the
distribution of :func:`exponential_choice`, and the constructor's defaults and argument checks."""

import math

import numpy as np
import pytest

import blowfish_te.mechanisms.base as base
import blowfish_te.mechanisms.datadependent as dd
from blowfish_te.mechanisms.datadependent import MWEM
from blowfish_te.testing import Replay, added_records, close
from blowfish_te.workloads import MatrixWorkload

from tests.helpers import Float32Rows

# fixed "noise" returned by the recorded measurements, one per round, cycled
NOISE = (3.5, -2.25, 1.75, -4.0, 2.5, -1.5, 0.75, -3.25, 4.25, -0.5, 1.25, -2.75)
TOTAL_NOISE = 2.5  # offset of the recorded noisy record total


def _integer_matrix():
    """6 queries over 5 cells, integer entries, max |entry| 3 (so Δ = 3, not 1)."""
    return np.array(
        [
            [1, 2, 0, 0, 1],
            [0, 3, 1, 0, 0],
            [2, 0, 0, 1, 3],
            [0, 0, 2, 2, 0],
            [1, 1, 1, 1, 1],
            [3, 0, 1, 0, 2],
        ],
        dtype=float,
    )


def _fractional_matrix():
    """6 queries over 5 cells with non-integer entries, max |entry| 2.5."""
    return np.array(
        [
            [0.5, 1.5, 0.0, 0.0, 1.0],
            [0.0, 2.5, 0.5, 0.0, 0.0],
            [1.5, 0.0, 0.0, 0.5, 2.0],
            [0.0, 0.0, 1.5, 1.5, 0.0],
            [0.5, 0.5, 0.5, 0.5, 0.5],
            [2.0, 0.0, 1.0, 0.0, 1.5],
        ]
    )


def _instrument(monkeypatch):
    """Record every draw of MWEM: the measurements (returning truth + NOISE[i]), the noisy record
    total (truth + TOTAL_NOISE) and each exponential choice (made by the real function)."""
    real_choice = dd.exponential_choice
    log = {"measure": [], "total": [], "choice": []}

    def measure(values, scale, rng, *, sensitivity, integer):
        values = np.array(values, copy=True)
        i = len(log["measure"])
        log["measure"].append(
            {"values": values, "scale": scale, "rng": rng, "sensitivity": sensitivity, "integer": integer}
        )
        return np.asarray(values, dtype=np.float64) + NOISE[i % len(NOISE)]

    def total(values, scale, rng, *, sensitivity, integer):
        values = np.array(values, dtype=np.float64, copy=True)
        log["total"].append(
            {"values": values, "scale": scale, "rng": rng, "sensitivity": sensitivity, "integer": integer}
        )
        return values + TOTAL_NOISE

    def choice(utility, excluded, gen):
        entry = {
            "utility": np.array(utility, copy=True),
            "excluded": None if excluded is None else np.array(excluded, copy=True),
            "gen": gen,
        }
        q = real_choice(utility, excluded, gen)
        entry["q"] = q
        log["choice"].append(entry)
        return q

    monkeypatch.setattr(dd, "add_laplace", measure)
    monkeypatch.setattr(base, "add_laplace", total)
    monkeypatch.setattr(dd, "exponential_choice", choice)
    return log


def _reference(matrix, x, total, eps_select, delta, choices, updates):
    """MWEM from its definition, for fixed choices q_t and measurements truth[q_t] + NOISE[t]:
    start from the uniform estimate of mass N; after each measurement, ``updates`` passes over all
    measurements (q, v) so far of Â ← Â · exp(q (v - q·Â) / (2N)), renormalised to mass N.
    Returns (the utility ε_sel·|W x - W Â|/(2Δ) before each round, the final answers W Â)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    k = matrix.shape[1]
    truth = matrix @ np.asarray(x, dtype=np.float64)
    est = np.full(k, total / k)
    utilities, measurements = [], []
    for t, q in enumerate(choices):
        utilities.append(eps_select * np.abs(truth - matrix @ est) / (2 * delta))
        measurements.append((matrix[q], truth[q] + NOISE[t % len(NOISE)]))
        for _ in range(updates):
            for row, value in measurements:
                est = est * np.exp(row * (value - row @ est) / (2 * total))
                est = est * (total / est.sum())
    return utilities, matrix @ est


def _check_run(log, out, matrix, x, gen, *, epsilon, ratio, rounds, updates, total, share, integer):
    """Every recorded draw of one run, and its answers, against MWEM's definition."""
    matrix = np.asarray(matrix, dtype=np.float64)
    m = matrix.shape[0]
    delta = float(np.abs(matrix).max())
    truth = matrix @ np.asarray(x, dtype=np.float64)
    if total is None:
        assert len(log["total"]) == 1
        call = log["total"][0]
        assert call["values"].tolist() == [float(np.sum(x))]
        assert call["scale"] == pytest.approx(1.0 / (share * epsilon), rel=1e-12)
        n = max(float(np.sum(x)) + TOTAL_NOISE, 1.0)
        eps_left = epsilon - share * epsilon
    else:
        assert log["total"] == []
        n, eps_left = float(total), epsilon
    steps = min(rounds, m)
    eps_select = ratio * eps_left / steps
    eps_measure = (1 - ratio) * eps_left / steps

    # one exponential choice and one measurement per round, never the same query twice
    assert len(log["choice"]) == steps and len(log["measure"]) == steps
    chosen = np.zeros(m, dtype=bool)
    choices = []
    for entry in log["choice"]:
        assert entry["gen"] is gen
        assert entry["excluded"] is not None and entry["excluded"].shape == (m,)
        assert entry["excluded"].tolist() == chosen.tolist()
        q = entry["q"]
        assert type(q) is int and 0 <= q < m and not chosen[q]
        chosen[q] = True
        choices.append(q)

    for q, call in zip(choices, log["measure"]):
        assert call["rng"] is gen
        assert call["values"].shape == (1,)  # the chosen query only
        assert call["values"][0] == pytest.approx(truth[q], rel=1e-12, abs=1e-12)
        assert call["scale"] == pytest.approx(delta / eps_measure, rel=1e-12)
        assert call["sensitivity"] == pytest.approx(delta, rel=1e-12)
        assert call["integer"] in (True, False) and bool(call["integer"]) is integer

    utilities, answers = _reference(matrix, x, n, eps_select, delta, choices, updates)
    for entry, expected in zip(log["choice"], utilities):
        assert entry["utility"].dtype == np.float64
        assert np.allclose(entry["utility"], expected, rtol=1e-9, atol=1e-12)
    assert out.dtype == np.float64 and out.shape == (m,)
    assert np.allclose(out, answers, rtol=1e-9, atol=1e-9)


X = (7, 1, 12, 0, 5)  # the counts of most runs (an array is built in each test)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("ratio, rounds", [(0.5, 2), (0.25, 4), (0.8, 9)])
@pytest.mark.parametrize("kind", ["integer", "fractional"])
def test_public_total_run_follows_the_definition(monkeypatch, epsilon, ratio, rounds, kind):
    """With a public total no share of ε buys it; ε_sel = ratio·ε/T, ε_meas = (1-ratio)·ε/T with
    T = min(rounds, m) (rounds 9 > 6 queries), Laplace(Δ/ε_meas) on the chosen query's true answer."""
    matrix = _integer_matrix() if kind == "integer" else _fractional_matrix()
    workload = MatrixWorkload(matrix)
    log = _instrument(monkeypatch)
    gen = np.random.default_rng(11)
    mech = MWEM(rounds=rounds, ratio=ratio, updates=3, total=40.0)
    out = mech.run(workload, np.array(X), epsilon, rng=gen)
    _check_run(log, out, matrix, np.array(X), gen, epsilon=epsilon, ratio=ratio, rounds=rounds, updates=3,
               total=40.0, share=None, integer=kind == "integer")


@pytest.mark.parametrize("epsilon", [0.3, 2.5])
@pytest.mark.parametrize("share", [0.1, 0.35])
@pytest.mark.parametrize("kind", ["integer", "fractional"])
def test_measured_total_spends_its_share_first(monkeypatch, epsilon, share, kind):
    """Without a public total, total_share·ε buys a noisy N and the rounds split the rest."""
    matrix = _integer_matrix() if kind == "integer" else _fractional_matrix()
    workload = MatrixWorkload(matrix)
    log = _instrument(monkeypatch)
    gen = np.random.default_rng(5)
    mech = MWEM(rounds=3, ratio=0.4, updates=2, total_share=share)
    out = mech.run(workload, np.array(X), epsilon, rng=gen)
    _check_run(log, out, matrix, np.array(X), gen, epsilon=epsilon, ratio=0.4, rounds=3, updates=2,
               total=None, share=share, integer=kind == "integer")


def test_defaults(monkeypatch):
    """rounds 10, ratio 1/2, updates 100, total measured with 0.1·ε: seen in the recorded scales,
    utilities and answers (12 queries, so 10 rounds are not capped)."""
    rng = np.random.default_rng(2)
    matrix = rng.choice([0.0, 1.0, 2.0, 4.0], size=(12, 6))
    matrix[0, 0] = 4.0
    matrix[:, 5] = 0.0  # a cell no query reads
    x = np.array([9, 0, 3, 14, 6, 2])
    log = _instrument(monkeypatch)
    gen = np.random.default_rng(8)
    out = MWEM().run(MatrixWorkload(matrix), x, 2.0, rng=gen)
    _check_run(log, out, matrix, x, gen, epsilon=2.0, ratio=0.5, rounds=10, updates=100,
               total=None, share=0.1, integer=True)

    # a public total far above the counts: the estimate's mass drains slowly into the cell no query
    # reads, so 100 passes per round and 101 give visibly different answers
    monkeypatch.undo()
    log = _instrument(monkeypatch)
    gen = np.random.default_rng(8)
    out = MWEM(total=1e4).run(MatrixWorkload(matrix), x, 2.0, rng=gen)
    _check_run(log, out, matrix, x, gen, epsilon=2.0, ratio=0.5, rounds=10, updates=100,
               total=1e4, share=None, integer=True)
    choices = [entry["q"] for entry in log["choice"]]
    _, one_more = _reference(matrix, x, 1e4, 0.5 * 2.0 / 10, 4.0, choices, 101)
    assert not np.allclose(out, one_more, rtol=1e-4, atol=0)

    mech = MWEM()
    assert (mech.rounds, mech.ratio, mech.updates, mech.total, mech.total_share) == (10, 0.5, 100, None, 0.1)


@pytest.mark.parametrize("updates", [1, 2, 5])
def test_update_count(monkeypatch, updates):
    """The answers are those of exactly ``updates`` passes, and differ from one pass more."""
    matrix = _integer_matrix()
    log = _instrument(monkeypatch)
    gen = np.random.default_rng(3)
    out = MWEM(rounds=4, updates=updates, total=30.0).run(MatrixWorkload(matrix), np.array(X), 1.0, rng=gen)
    choices = [entry["q"] for entry in log["choice"]]
    delta = 3.0
    _, same = _reference(matrix, np.array(X), 30.0, 0.5 / 4, delta, choices, updates)
    _, more = _reference(matrix, np.array(X), 30.0, 0.5 / 4, delta, choices, updates + 1)
    assert np.allclose(out, same, rtol=1e-10)
    assert not np.allclose(out, more, rtol=1e-6)


def test_float32_workload_is_calibrated_in_float64(monkeypatch):
    """A workload whose products come back in float32: the utilities and answers stay float64,
    and the utility is computed from the float64 difference of the true and estimated answers."""
    matrix = np.array([[0.5, 1.25, 0.0, 2.5], [2.5, 0.0, 1.5, 0.5], [1.25, 2.5, 0.5, 0.0]], dtype=np.float32)
    workload = Float32Rows(matrix)
    x = np.array([1001, 3, 477, 10])
    log = _instrument(monkeypatch)
    gen = np.random.default_rng(4)
    total = 3.0  # the uniform estimate 0.75 per cell
    out = MWEM(rounds=1, ratio=0.5, updates=2, total=total).run(workload, x, 1.3, rng=gen)
    truth = np.asarray(workload.matvec(x), dtype=np.float64)
    estimated = np.asarray(workload.matvec(np.full(4, total / 4)), dtype=np.float64)
    (entry,) = log["choice"]
    assert entry["utility"].dtype == np.float64
    assert np.array_equal(entry["utility"], 0.5 * 1.3 * np.abs(truth - estimated) / (2 * 2.5))
    (call,) = log["measure"]
    assert call["values"][0] == truth[entry["q"]]
    assert call["scale"] == pytest.approx(2.5 / (0.5 * 1.3), rel=1e-12)
    assert out.dtype == np.float64 and out.shape == (3,)


def test_rounds_cover_every_query_once(monkeypatch):
    """With rounds = m, the real exponential mechanism (high ε: one query dominates) measures every
    query exactly once."""
    matrix = _integer_matrix()
    log = _instrument(monkeypatch)
    MWEM(rounds=6, updates=1, total=25.0).run(MatrixWorkload(matrix), np.array(X), 50.0, rng=np.random.default_rng(9))
    assert sorted(entry["q"] for entry in log["choice"]) == list(range(6))


def test_seeded_runs_repeat_and_use_the_given_generator():
    matrix = _fractional_matrix()
    a = MWEM(rounds=3, updates=4).run(MatrixWorkload(matrix), np.array(X), 1.0, rng=np.random.default_rng(21))
    b = MWEM(rounds=3, updates=4).run(MatrixWorkload(matrix), np.array(X), 1.0, rng=np.random.default_rng(21))
    assert np.array_equal(a, b) and a.dtype == np.float64


class ChoiceReplay:
    """The exponential choices of a run on x, then the same choices forced on a neighbour, charging
    |log P_x(q) - log P_x'(q)| for each (P ∝ exp(utility) over the queries not excluded)."""

    def __init__(self, real):
        self.real, self.picks, self.utilities, self.cost, self.replaying = real, [], [], 0.0, False

    @staticmethod
    def _log_prob(utility, excluded, q):
        u = np.where(excluded, -np.inf, utility)
        top = u.max()
        return float(u[q] - top - np.log(np.exp(u - top).sum()))

    def __call__(self, utility, excluded, gen):
        if not self.replaying:
            q = self.real(utility, excluded, gen)
            self.picks.append((q, np.array(excluded, copy=True)))
            self.utilities.append(np.array(utility, copy=True))
            return q
        step = len(self.done)
        q, recorded_excluded = self.picks[step]
        assert np.array_equal(recorded_excluded, excluded), "the neighbour took another path"
        self.cost += abs(self._log_prob(self.utilities[step], excluded, q) - self._log_prob(utility, excluded, q))
        self.done.append(q)
        return q

    def replay(self):
        self.replaying, self.done, self.cost = True, [], 0.0


@pytest.mark.parametrize("total", [None, 60.0])
@pytest.mark.parametrize("epsilon, ratio, rounds", [(0.3, 0.5, 3), (2.5, 0.7, 8)])
def test_privacy_loss_on_neighbours_is_at_most_epsilon(monkeypatch, total, epsilon, ratio, rounds):
    """Replaying each run on x on every neighbour (one record added or removed), with the same
    Laplace outputs and the same exponential choices, costs at most ε in all: the noisy total's
    share, Σ|Δ truth[q]|/scale of the measurements (exactly as computed from the chosen rows) and
    the selection's log-probability ratios (at most ε_sel per round)."""
    matrix = _fractional_matrix()
    x = np.array([4, 0, 9, 2, 6])
    neighbours = added_records(x) + [x - e for e in np.eye(x.size, dtype=x.dtype) if (x - e).min() >= 0]
    real_choice = dd.exponential_choice
    worst = worst_choice = 0.0
    for j, y in enumerate(neighbours):
        replay, chooser = Replay(), ChoiceReplay(real_choice)
        monkeypatch.setattr(dd, "add_laplace", replay)
        monkeypatch.setattr(base, "add_laplace", replay)
        monkeypatch.setattr(dd, "exponential_choice", chooser)
        mech = MWEM(rounds=rounds, ratio=ratio, updates=3, total=total)
        first = mech.run(MatrixWorkload(matrix), x, epsilon, rng=np.random.default_rng(100 + j))
        replay.replay()
        chooser.replay()
        second = mech.run(MatrixWorkload(matrix), y, epsilon, rng=np.random.default_rng(100 + j))
        assert close(second, first), "the neighbour took another path"
        steps = min(rounds, matrix.shape[0])
        assert len(chooser.done) == steps
        eps_left = epsilon if total is not None else 0.9 * epsilon
        scale = 2.5 / ((1 - ratio) * eps_left / steps)
        measured = sum(abs(float(matrix[q] @ (y - x))) for q in chooser.done) / scale
        assert replay.cost == pytest.approx(measured + (0.0 if total is not None else 0.1 * epsilon), rel=1e-9)
        assert 0.0 <= chooser.cost <= ratio * eps_left * (1 + 1e-9)
        worst = max(worst, replay.cost + chooser.cost)
        worst_choice = max(worst_choice, chooser.cost)
    assert worst <= epsilon * (1 + 1e-9)
    assert worst_choice > 0.0  # the choices do depend on the data


# --- exponential_choice ------------------------------------------------------------------------


def _choice_counts(utility, excluded, n, seed):
    gen = np.random.default_rng(seed)
    counts = np.zeros(utility.size, dtype=int)
    for _ in range(n):
        q = dd.exponential_choice(utility, excluded, gen)
        assert type(q) is int
        counts[q] += 1
    return counts


@pytest.mark.parametrize(
    "utility, excluded",
    [
        ([0.0, 1.0, 2.0, 0.5], [False, False, False, False]),
        ([5.0, 0.0, 1.0, 4.0, 2.0], [True, False, False, True, False]),
        ([0.3, -1.0, 0.8, 0.0], [False, True, False, False]),
    ],
)
def test_exponential_choice_distribution(utility, excluded):
    """P(q) ∝ exp(utility_q) over the queries not excluded (excluded ones never come up), each
    frequency within 5 binomial standard deviations for n draws."""
    utility, excluded = np.array(utility), np.array(excluded)
    n = 20000
    counts = _choice_counts(utility, excluded, n, seed=17)
    weights = np.where(excluded, 0.0, np.exp(utility))
    p = weights / weights.sum()
    assert counts[excluded].sum() == 0
    for c, pq in zip(counts, p):
        assert abs(c - n * pq) <= 5 * math.sqrt(n * pq * (1 - pq))


def test_exponential_choice_leaves_its_inputs_and_returns_an_int():
    utility = np.array([1.0, 2.0, 3.0])
    excluded = np.array([False, False, True])
    q = dd.exponential_choice(utility, excluded, np.random.default_rng(0))
    assert type(q) is int and q in (0, 1)
    assert utility.tolist() == [1.0, 2.0, 3.0] and excluded.tolist() == [False, False, True]


def test_exponential_choice_only_one_left():
    utility = np.array([10.0, -5.0, 7.0, 30.0])
    excluded = np.array([True, False, True, True])
    gen = np.random.default_rng(1)
    assert {dd.exponential_choice(utility, excluded, gen) for _ in range(50)} == {1}


# --- constructor --------------------------------------------------------------------------------


def test_constructor_keeps_valid_arguments():
    mech = MWEM(rounds=1, ratio=0.2, updates=1, total=12, total_share=0.3)
    assert (mech.rounds, mech.ratio, mech.updates, mech.total, mech.total_share) == (1, 0.2, 1, 12.0, 0.3)
    assert type(mech.rounds) is int and type(mech.updates) is int and type(mech.ratio) is float
    assert MWEM(rounds=np.int64(3), updates=np.int64(7)).rounds == 3


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        ({"rounds": 0}, ValueError, "rounds"),
        ({"rounds": -2}, ValueError, "rounds"),
        ({"rounds": 2.0}, TypeError, "rounds"),
        ({"rounds": True}, TypeError, "rounds"),
        ({"ratio": 0}, ValueError, "ratio"),
        ({"ratio": 1}, ValueError, "ratio"),
        ({"ratio": 1.5}, ValueError, "ratio"),
        ({"ratio": "0.5"}, TypeError, "ratio"),
        ({"updates": 0}, ValueError, "updates"),
        ({"updates": -1}, ValueError, "updates"),
        ({"updates": 1.5}, TypeError, "updates"),
        ({"total_share": 0}, ValueError, "total_share"),
        ({"total_share": 1.0}, ValueError, "total_share"),
        ({"total": 0}, ValueError, "total"),
        ({"total": -3.0}, ValueError, "total"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs, error, name):
    with pytest.raises(error) as info:
        MWEM(**kwargs)
    assert str(info.value).startswith(f"{name} ")
