"""The benchmark scripts measure what they say they measure."""

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))


@pytest.mark.slow
@pytest.mark.skipif(not pathlib.Path("/proc/self/status").exists(), reason="VmHWM is Linux's")
def test_bench_io_reports_the_child_s_own_peak_memory_not_the_parent_s(tmp_path):
    import bench_io

    path = tmp_path / "ages.csv"
    path.write_text("age\n" + "\n".join(map(str, range(100))) + "\n")
    ballast = np.ones(400 * 2**20 // 8)  # the parent's peak reaches 400 MB more than the child will use
    result = bench_io._measure("csv", path, "io")
    assert result["n"] == 100 and result["peak_mb"] < 400, result
    del ballast


def test_every_benchmark_script_is_in_the_runner_and_records_its_measurements():
    import run

    folder = pathlib.Path(run.__file__).parent
    scripts = {p.stem for p in folder.glob("*.py")} - {"run", "_measure"}
    assert scripts == set(run.SCRIPTS)
    for name in scripts:
        text = (folder / f"{name}.py").read_text()
        assert "add_options(" in text and "Recorder(" in text, name


def test_the_runner_records_a_script_s_measurements_with_the_commit(tmp_path):
    import run

    (tmp_path / "fake.py").write_text(
        "import argparse\nfrom _measure import Recorder, add_options\n"
        "parser = argparse.ArgumentParser()\nparser.add_argument('--size', type=int, default=10)\nadd_options(parser)\n"
        "args = parser.parse_args()\nrecord = Recorder(args.json)\n"
        "record('size', args.size, 'count')\nrecord('quick', float(args.quick), 'count')\n")
    (tmp_path / "broken.py").write_text("raise SystemExit('no data here')\n")
    scripts = {"fake": (["--size", "3"], False), "broken": ([], False)}
    record = run.run(["fake", "broken"], True, None, 60, folder=tmp_path, scripts=scripts)
    fake = record["scripts"]["fake"]
    assert (fake["status"], fake["measurements"], len(fake["load"])) == ("ok", 3, 1) and fake["peak_mb"] > 0
    assert record["scripts"]["broken"]["status"] == "failed: no data here"
    assert [(m["case"], m["value"], m["spread"], m["runs"]) for m in record["measurements"]][:2] == [("size", 3.0, [3.0, 3.0], 1),
                                                                                                  ("quick", 1.0, [1.0, 1.0], 1)]
    assert record["measurements"][2]["case"] == run.PEAK_CASE and record["measurements"][2]["value"] == fake["peak_mb"]
    assert record["measurements"][0]["script"] == "fake" and record["commit"] == (run._git("rev-parse", "HEAD") or "unknown")


def test_a_comparison_flags_what_got_worse_beyond_its_unit_s_tolerance(tmp_path):
    import json

    import run

    def record(commit, values):
        return {"commit": commit, "modified": False,
                "measurements": [{"script": "s", "case": c, "value": v, "unit": u} for c, v, u in values]}

    old = record("a" * 40, [("t", 1.0, "s"), ("rmse", 100.0, "rmse"), ("drift", 100.0, "rmse"), ("gone", 1.0, "s")])
    new = record("b" * 40, [("t", 1.2, "s"), ("rmse", 102.0, "rmse"), ("drift", 100.5, "rmse"), ("new", 1.0, "s")])
    table, worse = run.compare(old, new)
    assert worse == 1  # 20 % slower is within the timing noise; 2 % more error is not
    assert "| s | rmse | rmse | 100 | 102 | 1.020 | worse |" in table and "| s | t | s | 1 | 1.2 | 1.200 |  |" in table
    assert "1 case(s) of the old record are not in the new one: s: gone" in table
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    assert run.main(["--compare", str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1


def test_repeats_give_a_median_and_spread_and_each_child_s_own_peak_memory(tmp_path):
    import run

    (tmp_path / "counter.py").write_text(
        "import argparse, pathlib\nimport numpy as np\nfrom _measure import Recorder, add_options\n"
        "parser = argparse.ArgumentParser()\nadd_options(parser)\nargs = parser.parse_args()\n"
        "tally = pathlib.Path(__file__).with_name('tally')\nn = int(tally.read_text()) if tally.exists() else 0\n"
        "tally.write_text(str(n + 1))\nblock = np.ones(150 * 2**20 // 8)\n"
        "Recorder(args.json)('time', [3.0, 1.0, 2.0][n], 's')\n")
    ballast = np.ones(400 * 2**20 // 8)  # the runner's own memory must not count as the child's
    record = run.run(["counter"], False, None, 60, folder=tmp_path, scripts={"counter": ([], False)}, repeats=3)
    del ballast
    m, peak = record["measurements"]
    assert (m["value"], m["spread"], m["runs"]) == (2.0, [1.0, 3.0], 3)
    assert peak["case"] == run.PEAK_CASE and peak["runs"] == 3
    assert len(record["scripts"]["counter"]["load"]) == 3
    if pathlib.Path("/proc/self/status").exists():  # VmHWM: the child's own peak after exec
        assert 150 < record["scripts"]["counter"]["peak_mb"] < 400


def test_a_change_inside_the_measured_spread_is_not_flagged():
    import run

    def record(commit, value, spread, runs=3):
        return {"commit": commit, "measurements": [{"script": "s", "case": "t", "unit": "s", "value": value, "spread": spread,
                                                    "runs": runs}], "scripts": {"s": {"load": [0.5, 1.5]}}, "cpus": 2}

    same_commit = run.compare(record("a" * 40, 1.0, [0.8, 1.7]), record("a" * 40, 1.4, [1.1, 1.9]))
    assert same_commit[1] == 0 and "1.4 (1.1–1.9)" in same_commit[0] and "load average before the new runs: 0.5–1.5" in same_commit[0]
    slower = run.compare(record("a" * 40, 1.0, [0.8, 1.0]), record("b" * 40, 1.4, [1.3, 1.9]))
    assert slower[1] == 1  # every new run 25 % slower than every old one, and 40 % by the medians
    single = run.compare(record("a" * 40, 1.0, [1.0, 1.0], 1), record("b" * 40, 1.4, [1.4, 1.4], 1))
    assert single[1] == 1  # without repeats only the tolerance applies
    tiny = run.compare(record("a" * 40, 0.0006, [0.0005, 0.0006]), record("b" * 40, 0.001, [0.0009, 0.0011]))
    assert tiny[1] == 0  # a millisecond's change is process noise
    close = run.compare(record("a" * 40, 0.4, [0.35, 0.78]), record("b" * 40, 1.5, [0.92, 1.55]))
    assert close[1] == 0  # every new run slower, but not every one by 25 %: a fresh process's spread


def test_the_held_out_threshold_is_the_cheapest_over_shapes_each_left_out(monkeypatch):
    """Each shape is decided by a model fitted on the others; the threshold of the smallest largest
    held-out cost wins, the largest of those."""
    import train_selection as ts

    rows = [dict(shape=s, i=i) for s in ("A", "B", "C") for i in range(2)]
    fitted_on = []
    monkeypatch.setattr(ts, "fit", lambda train, key: fitted_on.append(sorted({r["shape"] for r in train})) or ((0.0,), ()))
    costs = {1.0: 3.0, 0.9: 2.0, 0.8: 1.5, 0.7: 1.5, 0.6: 2.0, 0.5: 1.5}  # largest cost per threshold, on shape B

    def mean_costs(coefficients, held, key, threshold=1.0):
        return np.array([costs[threshold] if r["shape"] == "B" else 1.1 for r in held])

    monkeypatch.setattr(ts, "mean_costs", mean_costs)
    tau, summary = ts.held_out_threshold(rows, ("m", 1, "cells"))
    assert fitted_on == [["B", "C"], ["A", "C"], ["A", "B"]]  # every shape left out once
    assert tau == 0.8  # 0.8, 0.7 and 0.5 tie on the smallest largest cost: the largest of them
    assert summary[1.0][0] == 3.0 and summary[0.8] == pytest.approx((1.5, (1.1**4 * 1.5**2) ** (1 / 6)))


def test_the_held_out_choice_reads_models_fitted_without_the_cell_s_shape(monkeypatch):
    """adaptive's held-out choice: the lowest least-squares prediction is chosen and runs where its
    decision model says so; its RMSE is scored against the best of the plain release and every
    mechanism with rows, whether offered or not; each shape is read by models fitted on the others."""
    import train_selection as ts

    def row(shape, name, partition):
        return dict(shape=shape, records=1000, epsilon=0.1, key=(name, 1, "ranges"), partition=partition, plain=100.0,
                    cells=4096, scale=1.0, cost=0.5, guarded_cost=0.6)

    rows = [row(s, "dawa", 50.0) for s in "ABC"] + [row(s, "other", 400.0) for s in "ABC"]
    fitted_on = []
    predicted = {"dawa": np.log10(0.5), "other": -1.0}

    def fit(train, key):
        fitted_on.append((key[0], sorted({r["shape"] for r in train})))
        coefficients = (predicted[key[0]],) + (0.0,) * 7
        return coefficients, coefficients

    monkeypatch.setattr(ts, "fit", fit)
    assert ts.held_out_choice(rows, 1, ["dawa"]) == pytest.approx([1.0] * 3)
    assert ts.held_out_choice(rows, 1, ["dawa", "other"]) == pytest.approx([np.sqrt(400 / 50)] * 3)
    assert ("other", ["A", "B"]) in fitted_on and ("dawa", ["B", "C"]) in fitted_on
    assert all(name != "other" for name, _ in fitted_on[:3])  # only the names chosen among are fitted


def test_the_report_charges_each_adaptive_choice_the_mean_of_what_it_ran(capsys):
    """adaptive's summary: its mean over the best single mechanism's (the analytic plain error
    among them), each trial's choice charged the chosen candidate's mean (a partition branch, or
    the plain route), and the spread of its own trials."""
    import datadependent_report as report

    result = dict(cell="1d/S/1000/prefix/0.1", plain=10.0, candidates=["dawa"],
                  runs={"dawa": [4.0, 6.0], "adaptive": [4.0, 9.0], "uniform": [20.0, 20.0]},
                  branch={"dawa": [5.0, 5.0]}, decisions={"dawa": ["partition", "plain"]},
                  routes={"adaptive": ["dawa", "plain"]})
    recorded = []
    report.summarise_adaptive([result], None, lambda name, value, unit: recorded.append((name, value)))
    text = capsys.readouterr().out
    assert "adaptive/best  1.30 (dawa)" in text  # mean 6.5 over dawa's 5
    assert "choice cost  2.00" in text  # the plain trial: 10 over the partition branch's 5
    assert "spread  1.80" in text and "best single's own  1.20" in text  # 9 / 5, and dawa's 6 / 5
    assert ("adaptive over best single, worst", pytest.approx(1.3)) in recorded


def test_the_training_script_measures_a_plugin_that_predicts_its_error(monkeypatch):
    """A registered mechanism the library does not fit, with the tag predicts_error, gets a range
    model per dimension it fits; its partition branch is its unchecked release; a mechanism that
    does not predict its error is refused by name."""
    import train_selection as ts

    from blowfish_te.mechanisms import MECHANISMS, Mechanism
    from blowfish_te.routes import Outcome

    class _Plugin(Mechanism, register=False):
        name = "measured_plugin"
        predicts_error = True
        needs_grid = False

        def __init__(self, select: bool = True):
            self.select = select

        def measure(self, workload, x, epsilon, gen, policy=None):
            _Plugin.selects = self.select
            return Outcome(np.full(workload.num_queries, float(np.sum(x)) / 2))

    monkeypatch.setitem(MECHANISMS, _Plugin.name, _Plugin)
    assert ts.plugin_keys(["dawa", "measured_plugin"], None) == [("measured_plugin", 1, "ranges"), ("measured_plugin", 2, "ranges")]
    assert ts.plugin_keys(["measured_plugin"], 2) == [("measured_plugin", 2, "ranges")]
    w = ts.workload(1, "ranges")
    answers = ts.partition_branch("measured_plugin", w, "ranges", np.arange(4096.0), 0.1, 0, 1.0)
    assert _Plugin.selects is False and np.all(answers == np.arange(4096.0).sum() / 2)
    with pytest.raises(SystemExit, match="identity does not predict its error"):
        ts.plugin_keys(["identity"], None)


def test_twins_bound_any_rule_s_worst_decision_from_the_features_noise():
    """Two cells on opposite sides of the crossing whose features a release reads with Laplace
    noise of scale β: the total variation distance of the draws is 1 − exp(−|Δ|/(2β)) per
    feature (multiplied across features), every rule then errs on some trial of the pair with
    probability ≥ 1 − ((1 + t)/2)^(2·trials), and the cost is the smaller wrong-branch RMSE ratio."""
    import train_selection as ts

    def row(shape, partition, cost):
        return dict(shape=shape, records=1000, epsilon=0.1, key=("dawa", 1, "ranges"), partition=partition, plain=100.0,
                    cells=4096, scale=0.5, cost=cost, guarded_cost=0.6)

    beta = ts.feature_noise("dawa", 4096)[1]
    same, apart, agree = row("A", 50.0, 0.5), row("B", 400.0, 0.5 + beta), row("C", 25.0, 0.5)
    assert ts.feature_distance(same, row("D", 1.0, 0.5), "dawa", 4096) == 0.0
    assert ts.feature_distance(same, apart, "dawa", 4096) == pytest.approx(1 - np.exp(-0.5))
    pairs = ts.twins([same, apart, agree], ("dawa", 1, "ranges"), trials=3)
    assert len(pairs) == 2  # A and C both partition: not a pair
    assert pairs[0][0] == pytest.approx(2.0)  # B and C: √min(400/100, 100/25)
    cost, chance, a, b = pairs[1]
    assert {a["shape"], b["shape"]} == {"A", "B"} and cost == pytest.approx(np.sqrt(2.0))  # √min(100/50, 400/100)
    t = 1 - np.exp(-0.5)
    assert chance == pytest.approx(1 - ((1 + t) / 2) ** 6)


def test_the_training_plain_error_of_1d_prefixes_is_the_consistent_release_s():
    """On 1-D prefixes the plain branch is the plain strategy's answers made consistent, as DAWA's
    and PrivTree's releases answer: the mean over seeds of that projection's error, never above
    the same draws' unprojected error."""
    import train_selection as ts

    from blowfish_te.mechanisms.plain import best_linear
    from blowfish_te.smoothing import consistent_prefix_answers

    w = ts.workload(1, "ranges")
    x = np.zeros(4096, dtype=np.int64)
    x[[100, 2000, 3000]] = [300, 500, 200]
    truth = np.asarray(w.matvec(x), dtype=np.float64)
    raw = [np.asarray(best_linear(w).run(w, x, 0.1, np.random.default_rng(s)), dtype=float) for s in range(3)]
    runs = [consistent_prefix_answers(w.query_bounds(), a) for a in raw]
    expected = np.mean([np.mean((a - truth) ** 2) for a in runs])
    assert ts.plain_branch_error("dawa", w, "ranges", x, 0.1, 3, 0.0) == pytest.approx(expected)
    assert all(np.sum((a - truth) ** 2) <= np.sum((r - truth) ** 2) for a, r in zip(runs, raw))


def test_the_choice_floor_is_the_best_any_rule_on_the_features_can_do():
    """Two cells whose best single mechanisms differ: with the same features every rule chooses
    alike on both (floor 1.5 with errors 1 and 2 swapped); with features a total variation t apart
    the choices may differ by t, and the floor is (3 − t)/2; far apart, each gets its best."""
    import datadependent_report as report
    import train_selection as ts

    def cell(name, dawa, uniform, cost):
        return dict(cell=f"1d/{name}/1000/prefix/0.1", candidates=["dawa"], plain=10.0,
                    features=dict(scale=0.5, cost=cost, guarded_cost=0.6),
                    runs={"dawa": [dawa, dawa], "uniform": [uniform, uniform], "adaptive": [dawa, dawa]})

    assert report.choice_floor([cell("A", 1.0, 2.0, 0.5), cell("B", 2.0, 1.0, 0.5)]) == {(1, "prefix"): pytest.approx(1.5)}
    beta = ts.feature_noise("dawa", 4096)[1]
    t = 1 - np.exp(-0.5)
    near = report.choice_floor([cell("A", 1.0, 2.0, 0.5), cell("B", 2.0, 1.0, 0.5 + beta)])
    assert near[1, "prefix"] == pytest.approx((3 - t) / 2)
    far = report.choice_floor([cell("A", 1.0, 2.0, 0.5), cell("B", 2.0, 1.0, 5.0)])
    assert far[1, "prefix"] == pytest.approx(1.0)
    under_a_policy = dict(cell("C", 1.0, 2.0, 0.5), candidates=["partition_then_transform"])
    assert report.choice_floor([under_a_policy]) == {}  # not DAWA's features: no floor claimed


def test_group_privacy_bounds_what_any_reading_at_a_share_of_epsilon_tells_apart():
    """Cells ‖x − y‖₁ = D records apart, read by anything (share·ε)-DP: likelihood ratios within
    e^(share·ε·D), so total variation at most tanh(share·ε·D/2); cells of different ε are apart."""
    import datadependent_report as report

    x, y = np.zeros(4), np.array([0.0, 3.0, 0.0, 1.0])
    data = {"1d/A/1000/prefix/0.1": x, "1d/B/1000/prefix/0.1": y, "1d/B/1000/prefix/0.01": y}
    apart = report.anything_apart(data, 0.5)
    a, b, c = ({"cell": name} for name in data)
    assert apart(a, b) == pytest.approx(np.tanh(0.5 * 0.1 * 4 / 2))
    assert apart(a, a) == 0.0 and apart(a, c) == 1.0


def test_the_decision_floor_holds_for_any_check_at_its_share():
    """Two cells of one ε whose better branches differ, D records apart: any check at share s
    decides all n trials of both right with probability at most ((1 + t)/2)^(2n), t = tanh(s·ε·D/2),
    and otherwise costs the smaller wrong-branch ratio on one of them; cells on one side, or too
    far apart to be confused, give no floor; a policy's cells are left out."""
    import datadependent_report as report

    data = {"1d/A/1000/identity/0.01": np.zeros(8), "1d/B/1000/identity/0.01": np.array([0.0, 2, 0, 0, 0, 0, 0, 0]),
            "1d/C/1000/identity/0.01": np.full(8, 1e5)}

    def cell(name, partition, plain, policy="unbounded(8)"):
        return dict(cell=f"1d/{name}/1000/identity/0.01", policy=policy, plain=1.0, branch={"dawa": [partition, partition]},
                    plain_branch={"dawa": [plain]}, decisions={"dawa": ["plain"] * 3})

    shares = {("dawa", 1, "identity"): 0.5}
    t = np.tanh(0.5 * 0.01 * 2 / 2)
    reached = 1 - ((1 + t) / 2) ** 6
    floor = report.decision_floor([cell("A", 2.0, 1.0), cell("B", 1.0, 1.5)], data, shares)
    assert floor == {("dawa", 1, "identity"): (pytest.approx(1.5), pytest.approx(reached), "1d/A/1000/identity/0.01",
                                               "1d/B/1000/identity/0.01")}
    assert reached > 0.9
    assert report.decision_floor([cell("A", 2.0, 1.0), cell("B", 3.0, 1.0)], data, shares)[("dawa", 1, "identity")][0] == 1.0
    assert report.decision_floor([cell("A", 2.0, 1.0), cell("C", 1.0, 1.5)], data, shares)[("dawa", 1, "identity")][0] == 1.0
    assert report.decision_floor([cell("A", 2.0, 1.0, "line(8)"), cell("B", 1.0, 1.5, "line(8)")], data, shares) == {}
    # the least share past which the pair is no longer reached: tanh(s·ε·D/2) = 2·0.1^(1/6) − 1
    pair = [cell("A", 2.0, 1.0), cell("B", 1.0, 1.5)]
    least = report.least_share(pair, "dawa", data, 1.2)
    assert least == pytest.approx(2 * np.arctanh(2 * 0.1 ** (1 / 6) - 1) / (0.01 * 2))
    for factor, floor in ((0.99, 1.5), (1.01, 1.0)):
        assert report.decision_floor(pair, data, {("dawa", 1, "identity"): least * factor})[("dawa", 1, "identity")][0] == \
            pytest.approx(floor)
    assert report.least_share(pair, "dawa", data, 1.5) == 0.0  # no pair costs more than 1.5


def test_a_checks_share_is_the_total_and_two_costs_it_buys():
    """DAWA's check on 4096 cells buys the record total and its two costs, nothing more."""
    import datadependent_report as report

    from blowfish_te.selection import cost_share, total_share

    x = np.zeros(4096)
    x[:10] = 100
    share = report.check_share("dawa", "1d/X/1000/identity/0.1", x)
    assert share == pytest.approx(total_share(4096) + 2 * cost_share(4096))


def test_the_synthetic_training_shapes_are_seeded_and_keep_their_gaps():
    """--synthetic adds the same five 256² grids on every call; the combs keep every fourth row
    (and third column) of the 128² grid empty; there are none in 1-D."""
    import train_selection as ts

    from blowfish_te import datasets

    first, again = ts.synthetic_shapes(2), ts.synthetic_shapes(2)
    assert sorted(first) == ["SYN-CLUSTERS", "SYN-COMB-BOTH", "SYN-COMB-ROWS", "SYN-SMOOTH", "SYN-ZEROS"]
    assert all(np.array_equal(first[name], again[name]) and first[name].shape == (256, 256) for name in first)
    comb = datasets.dpbench_sample(first["SYN-COMB-BOTH"], 10**6, domain=(128, 128), rng=0)
    assert comb[3::4].sum() == 0 and comb[:, 2::3].sum() == 0 and comb.sum() == 10**6
    assert ts.synthetic_shapes(1) == {}
