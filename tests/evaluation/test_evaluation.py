import csv
import json
import math
import pathlib
import re
import zlib

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from blowfish_te import datasets, metrics
from blowfish_te.cli import main
from blowfish_te.evaluation import SUITES_DIR, SuiteError, cells, load_suite, markdown_table, parse_suite, read_rows, run_suite, summarize
from blowfish_te.evaluation.runner import describe_failures
from blowfish_te.evaluation.summary import MIN_RUNS_FOR_CI, pivot_table
from blowfish_te.mechanisms import MECHANISMS, Mechanism
from blowfish_te.release import plan

SUITES = sorted(p.stem for p in SUITES_DIR.glob("*.toml"))


def _suite(**changes):
    raw = {
        "name": "toy",
        "description": "a toy suite",
        "master_seed": 3,
        "trials": 2,
        "epsilons": [0.5, 1.0],
        "policies": ["unbounded", "line", "threshold:3"],
        "data": {"datasets": ["synthetic-1d"], "domain": 32, "scales": [500], "data_seeds": 2},
        "workload": {"kind": "random_ranges", "queries": 40, "seed": 1},
        "mechanisms": [
            "identity",
            {"name": "hb", "label": "HB f=4", "params": {"branching": 4}, "policies": ["unbounded", "line"]},
            {"name": "dawa", "tree": "hub", "epsilon_factor": 0.5},
        ],
    }
    for key, value in changes.items():
        if key in ("datasets", "domain", "scales", "data_seeds"):
            raw["data"][key] = value
        else:
            raw[key] = value
    return parse_suite(raw)


def _table(path: pathlib.Path) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "runtime_s"} for row in read_rows(path / "results.csv")]


@pytest.mark.slow
def test_runner_is_deterministic_across_runs_and_processes(tmp_path):
    suite = _suite()
    rows = run_suite(suite, tmp_path / "a")
    assert len(rows) == len(cells(suite)) == 2 * (3 + 2 + 3) * 2 * 2  # data seeds × (policy, mechanism) pairs × ε × trials
    assert all(r["status"] == "ok" for r in rows)
    run_suite(suite, tmp_path / "b")
    run_suite(suite, tmp_path / "c", jobs=2)
    assert _table(tmp_path / "a") == _table(tmp_path / "b") == _table(tmp_path / "c")
    other = run_suite(parse_suite({**_raw_of(suite), "master_seed": 4}), tmp_path / "d")
    assert [r["mse"] for r in other] != [r["mse"] for r in rows]


@pytest.mark.slow
def test_worker_processes_are_spawned_on_every_platform(tmp_path, monkeypatch):
    import concurrent.futures

    import blowfish_te.evaluation.runner as runner

    methods = []

    class Recording(concurrent.futures.ProcessPoolExecutor):
        def __init__(self, *args, mp_context=None, **kwargs):
            methods.append(None if mp_context is None else mp_context.get_start_method())
            super().__init__(*args, mp_context=mp_context, **kwargs)

    monkeypatch.setattr(runner, "ProcessPoolExecutor", Recording)
    suite = _suite(data_seeds=1)
    run_suite(suite, tmp_path / "spawned", jobs=2)
    assert methods == ["spawn"]
    run_suite(suite, tmp_path / "one")
    assert _table(tmp_path / "spawned") == _table(tmp_path / "one")


@pytest.mark.slow
def test_mechanisms_of_one_trial_share_their_seed(tmp_path):
    rows = run_suite(_suite(data_seeds=1), tmp_path)
    by_trial: dict = {}
    for r in rows:
        by_trial.setdefault((r["epsilon"], r["trial"]), set()).add(r["seed"])
    assert all(len(seeds) == 1 for seeds in by_trial.values())  # paired across mechanisms and policies
    assert len({next(iter(seeds)) for seeds in by_trial.values()}) == len(by_trial)  # fresh per trial and ε


def _raw_of(suite):
    return {
        "name": suite.name, "description": suite.description, "master_seed": suite.master_seed, "trials": suite.trials,
        "epsilons": list(suite.epsilons), "policies": list(suite.policies),
        "data": {"datasets": list(suite.datasets), "domain": list(suite.domains[0]), "scales": list(suite.scales), "data_seeds": suite.data_seeds},
        "workload": dict(suite.workload),
        "mechanisms": [{"name": m.name, "label": m.label, "params": m.params, "epsilon_factor": m.epsilon_factor,
                        **({"policies": list(m.policies)} if m.policies else {}), **({"tree": m.tree} if m.tree else {})}
                       for m in suite.mechanisms],
    }


def test_a_suite_runs_each_of_its_domains_and_keeps_the_first_domains_keys(tmp_path):
    one = run_suite(_suite(domain=32, mechanisms=["identity"]), tmp_path / "one")
    two = run_suite(_suite(domain=[[32], [16]], mechanisms=["identity"]), tmp_path / "two")
    assert [r["domain"] for r in two] == ["32"] * len(one) + ["16"] * len(one)
    assert [(r["key"], r["mse"]) for r in two[: len(one)]] == [(r["key"], r["mse"]) for r in one]
    assert all("@16|" in r["key"] for r in two[len(one):])
    with pytest.raises(SuiteError, match="same number of axes"):
        _suite(domain=[[32], [4, 4]])
    with pytest.raises(SuiteError, match="domain must hold ints > 0"):
        _suite(domain=[[32], [0]])


def test_a_mechanism_runs_only_on_the_domains_it_names(tmp_path):
    both = _suite(domain=[[32], [16]], mechanisms=["identity", {"name": "hb", "domains": [[16]]}])
    rows = run_suite(both, tmp_path)
    assert {(r["mechanism"], r["domain"]) for r in rows} == {("identity", "32"), ("identity", "16"), ("hb", "16")}
    unfiltered = _suite(domain=[[32], [16]], mechanisms=["identity", "hb"])
    assert len(cells(unfiltered)) == len(cells(both)) + len(cells(unfiltered)) // 4
    # a suite without a filter keeps the fingerprint it had before filters existed (its results resume)
    assert unfiltered.fingerprint() == "6cfdeae3f551e88d" != both.fingerprint()
    with pytest.raises(SuiteError, match=r"domains \[\[8\]\] are not among the suite's domains"):
        _suite(domain=[[32], [16]], mechanisms=[{"name": "hb", "domains": [[8]]}])
    with pytest.raises(SuiteError, match="domains applies only when the suite sets"):
        _suite(domain=None, mechanisms=[{"name": "hb", "domains": [[8]]}])


def test_rows_hold_parameters_errors_and_the_right_epsilon(tmp_path):
    rows = run_suite(_suite(), tmp_path)
    dawa = [r for r in rows if r["mechanism"] == "dawa"]
    assert all(r["epsilon_used"] == r["epsilon"] / 2 for r in dawa)
    hub = [r for r in dawa if r["policy"] == "threshold:3"]
    assert hub and all(r["tree"].startswith("hub") and r["stretch"] == 3 for r in hub)
    x = datasets.dpbench_sample(datasets.load("synthetic-1d"), 500, 32, rng=0)
    assert {r["scale"] for r in rows} == {500} and {r["domain"] for r in rows} == {"32"} and x.sum() == 500
    ident = [r for r in rows if r["mechanism"] == "identity" and r["policy"] == "line"]
    assert all(r["route"] == "transform" and r["expected_mse"] > 0 for r in ident)
    assert all(r["status"] == "ok" for r in rows)
    # a mechanism that refuses a policy is refused with the suite, before any cell runs
    with pytest.raises(SuiteError, match=r"mechanisms\[0\]: mechanism 'dawa' cannot run under policy 'threshold:3': "
                                         r"CyclicPolicyError: threshold\(32, theta=3\) has cycles"):
        _suite(mechanisms=[{"name": "dawa"}])  # no tree: a data-dependent mechanism under a cyclic policy


class _RecordLimit(Mechanism, register=False):
    """Laplace on the answers, refusing histograms of more than ``limit`` records: a refusal that
    only the data reveal (the suite loads; the cells of large samples fail)."""

    name = "record_limit"

    def __init__(self, limit: int = 1000):
        self.limit = limit

    def run(self, workload, x, epsilon, rng=None):
        workload, x, epsilon, gen = self._checked(workload, x, epsilon, rng)
        if x.sum() > self.limit:
            raise ValueError(f"{int(x.sum())} records, more than {self.limit}")
        return workload.matvec(x) + gen.laplace(0.0, workload.column_norms().max() / epsilon, workload.num_queries)


@pytest.fixture
def record_limit(monkeypatch):
    monkeypatch.setitem(MECHANISMS, "record_limit", _RecordLimit)


def test_a_refusal_only_the_data_reveal_leaves_error_rows(tmp_path, record_limit):
    suite = _suite(scales=[500, 5000], mechanisms=["identity", {"name": "record_limit", "policies": ["unbounded"]}])
    rows = run_suite(suite, tmp_path)
    failed = [r for r in rows if r["status"] != "ok"]
    assert len(failed) == 2 * 2 * 2  # data seeds × ε × trials of the large sample, not a crash and not a silent gap
    assert all(r["mechanism"] == "record_limit" and r["scale"] == 5000 and r["mse"] is None
               and r["status"] == "error: ValueError: 5000 records, more than 1000" for r in failed)
    by_config = {(s["mechanism"], s["scale"]): s for s in summarize(rows) if s["policy"] == "unbounded"}
    assert by_config["record_limit", 5000]["n"] == 0 and by_config["record_limit", 500]["n"] == 2 * 2
    assert describe_failures(rows) == f"8 of {len(rows)} cells failed: 8x ValueError: 5000 records, more than 1000"
    assert describe_failures([r for r in rows if r["status"] == "ok"]) is None


def test_failures_are_described_on_one_line_most_frequent_first():
    rows = [{"status": "ok"}] * 5 + [{"status": "error: ValueError: " + "x" * 300}] + [{"status": "error: E: b"}] * 3 + [
        {"status": f"error: E: c{i}"} for i in range(3)]
    line = describe_failures(rows, shown=2, width=40)
    assert line == f"7 of 12 cells failed: 3x E: b; 1x ValueError: {'x' * 25}...; and 3 more distinct error(s)"
    assert "\n" not in line


@pytest.mark.parametrize("data, policies, mechanism, message", [
    # Blowfish-native mechanisms pick their own measurements: no tree
    ({"domain": 32}, ["threshold:3"], {"name": "ordered", "tree": "hub"}, "'threshold:3': ValueError: .*Blowfish-native"),
    # record models on x_G of a policy that is not plain DP
    ({"domain": 32}, ["line"], {"name": "uniform"}, "'line': ValueError: .*models the data as records"),
    ({"domain": 4096}, ["threshold:1000"], {"name": "mwem", "tree": "hub"}, "'threshold:1000': ValueError: .*models the data"),
    # data-dependent mechanisms on cyclic policies need a spanning tree
    ({"domain": 32}, ["complete"], {"name": "privtree"}, "'complete': CyclicPolicyError"),
    ({"datasets": ["synthetic-2d"], "domain": [16, 16]}, ["grid:4"], {"name": "dawa", "tree": "hub"}, "'grid:4': .*hub tree is for 1-D"),
    # grid models need the grid itself: not a 1-D domain, not x_T of a spanning tree
    ({"domain": 32}, ["unbounded"], {"name": "ugrid"}, "'unbounded': ValueError: ugrid partitions a 2-D grid"),
    ({"datasets": ["synthetic-2d"], "domain": [16, 16]}, ["complete"], {"name": "agrid", "tree": "bfs"}, "'complete': .*agrid partitions a 2-D"),
    # 1-D mechanisms on a grid
    ({"datasets": ["synthetic-2d"], "domain": [16, 16]}, ["unbounded"], {"name": "ordered"}, "'unbounded': .*needs a 1-D ordered domain"),
    # datasets at their native shape: refused when neither 1-D nor 2-D could run it
    ({"datasets": ["HEPTH", "GOWALLA"], "domain": None}, ["complete"], {"name": "dawa"}, "'complete': CyclicPolicyError"),
])
def test_pairs_a_mechanism_cannot_run_are_refused_at_load(data, policies, mechanism, message):
    raw = _raw_of(_suite())
    raw["data"].update(scales=[1000], data_seeds=1, **data)
    if raw["data"]["domain"] is None:
        del raw["data"]["domain"]
    raw.update(policies=policies, mechanisms=[{**mechanism, "label": "the one"}], workload={"kind": "identity"})
    with pytest.raises(SuiteError, match=r"mechanisms\[0\]: mechanism 'the one' \(\w+\) cannot run under policy " + message):
        parse_suite(raw)


@pytest.mark.slow
def test_pairs_that_can_run_load_and_the_check_plans_on_small_domains(monkeypatch):
    from blowfish_te.evaluation import suite as suite_module

    sizes = []

    def recording(workload, policy, *args, **kwargs):
        sizes.append(policy.size)
        return plan(workload, policy, *args, **kwargs)

    raw = _raw_of(_suite())
    monkeypatch.setattr(suite_module, "plan", recording)
    raw["data"].update(domain=4096, scales=[1000], data_seeds=1)
    raw.update(policies=["unbounded", "line", "threshold:16", "threshold:4095"], mechanisms=[
        "identity", "ordered", "partition_then_transform", {"name": "dawa", "tree": "hub"},
        {"name": "uniform", "policies": ["unbounded"]},
        {"name": "mwem", "tree": "hub", "policies": ["unbounded", "threshold:4095"]},  # θ = 4095 spans 4096 cells: DP
    ])
    parse_suite(raw)
    assert len(sizes) == 4 * 4 + 1 + 2 and max(sizes) <= 32  # every pair, never on the 4096 cells
    sizes.clear()
    # native shapes: a 2-D grid model under DP may run on a 2-D dataset, so it is left to the run
    del raw["data"]["domain"]
    raw["data"]["datasets"] = ["GOWALLA"]
    raw.update(policies=["unbounded"], mechanisms=["ugrid"], workload={"kind": "identity"})
    parse_suite(raw)
    assert sizes == [32, 64]  # tried in 1-D (refused) and in 2-D (runs)
    raw.update(policies=["line"], workload={"kind": "random_rects", "queries": 5})
    with pytest.raises(SuiteError, match=r"'random_rects' and policies \['line'\] fit no common number of axes"):
        parse_suite(raw)


@pytest.mark.slow
def test_resume_skips_finished_cells_and_gives_the_same_table(tmp_path):
    suite = _suite()
    run_suite(suite, tmp_path / "full")
    out = tmp_path / "partial"
    run_suite(suite, out)
    first = json.loads((out / "suite.json").read_text())
    assert first["wall_s"] > 0 and first["workers"] == ["jobs=1"]
    lines = (out / "results.csv").read_text().splitlines()
    (out / "results.csv").write_text("\n".join(lines[:11]) + "\n")  # header + 10 rows survive a crash
    seen = []
    run_suite(suite, out, progress=lambda done, total: seen.append((done, total)))
    assert seen[0][0] > 10 and seen[-1] == (len(cells(suite)), len(cells(suite)))
    assert _table(out) == _table(tmp_path / "full")
    assert json.loads((out / "suite.json").read_text())["wall_s"] > first["wall_s"]  # resumed runs add up
    with pytest.raises(SuiteError, match="different configuration"):
        run_suite(_suite(trials=3), out)
    run_suite(_suite(trials=1), out, resume=False)
    assert len(read_rows(out / "results.csv")) == len(cells(_suite(trials=1)))


def test_result_tables_escape_text_a_spreadsheet_would_run_and_read_it_back(tmp_path):
    formula = "=cmd|' /C calc'!A0"
    labels = [formula, "@SUM(A1)", "'quoted", "+hb", "plain"]
    mechanisms = [{"name": "identity", "label": labels[0]}, {"name": "laplace", "label": labels[1]},
                  {"name": "hb", "label": labels[2]}, {"name": "h2", "label": labels[3]}, {"name": "privelet", "label": labels[4]}]
    suite = _suite(name="-toy", trials=1, epsilons=[0.5], policies=["unbounded"], data_seeds=1, mechanisms=mechanisms)
    out = tmp_path / "out"
    run_suite(suite, out)
    with open(out / "results.csv", newline="") as f:
        written = list(csv.DictReader(f))
    assert [r["mechanism"] for r in written] == ["'" + formula, "'@SUM(A1)", "''quoted", "'+hb", "plain"]
    assert {r["suite"] for r in written} == {"'-toy"}
    assert all(float(r["epsilon"]) == 0.5 and float(r["mse"]) > 0 for r in written)  # numbers as they were
    with open(out / "summary.csv", newline="") as f:
        assert [r["mechanism"] for r in csv.DictReader(f)] == [r["mechanism"] for r in written]
    rows = read_rows(out / "results.csv")
    assert [r["mechanism"] for r in rows] == labels and {r["suite"] for r in rows} == {"-toy"}
    seen = []
    again = run_suite(suite, out, progress=lambda done, total: seen.append(done))
    assert seen == [] and again == rows  # every cell found again by its key: none runs twice

def test_summary_means_and_student_t_intervals():
    rows = [{"dataset": "d", "domain": "4", "scale": 10.0, "policy": "line", "theta": None, "workload": "w",
             "mechanism": "m", "epsilon": 1.0, "status": "ok", "mse": v, "scaled_l2": v / 10, "expected_mse": 2.0,
             "runtime_s": 0.1, "route": "transform", "stretch": 1.0} for v in (1.0, 2.0, 6.0)]
    (s,) = summarize(rows)
    assert s["n"] == 3 and s["mse"] == 3.0
    assert s["mse_ci95"] == pytest.approx(stats.t.ppf(0.975, 2) * math.sqrt(7.0) / math.sqrt(3))


@pytest.mark.parametrize("trials", [2, 4, 5])
def test_tables_show_intervals_only_from_enough_trials(trials):
    rows = [{"dataset": "d", "domain": "4", "scale": 10.0, "policy": "line", "theta": None, "workload": "w",
             "mechanism": "m", "epsilon": 1.0, "status": "ok", "mse": float(v), "scaled_l2": None, "expected_mse": 2.0,
             "runtime_s": 0.1, "route": "transform", "stretch": 1.0} for v in range(1, trials + 1)]
    text = markdown_table(summarize(rows))
    (row,) = [line for line in text.splitlines() if line.startswith("| d |")]
    assert ("±" in row) == (trials >= MIN_RUNS_FOR_CI) and ("too few for a 95% interval" in text) == (trials < MIN_RUNS_FOR_CI)
    assert f"| {(trials + 1) / 2:.4g}" in text


def _config(dataset, mechanism, epsilon, mse):
    return {"dataset": dataset, "domain": "4", "scale": 10.0, "policy": "line", "theta": 1, "workload": "w",
            "mechanism": mechanism, "epsilon": epsilon, "n": 2, "mse": mse, "scaled_l2": None, "expected_mse": None,
            "runtime_s": 0.5}


def test_pivot_table_averages_over_the_other_columns():
    summary = [_config("a", "m", 0.1, 10.0), _config("b", "m", 0.1, 30.0), _config("a", "m", 1.0, 2.0),
               _config("a", "n", 1.0, 7.0)]
    lines = pivot_table(summary, "mse", ("mechanism",), ("epsilon",)).splitlines()
    assert lines[0] == "| mechanism | epsilon=0.1 | epsilon=1 |"
    assert lines[2:] == ["| m | 20 | 2 |", "| n |  | 7 |"]  # the mean over datasets a and b; a gap stays empty
    assert pivot_table(summary, "mse", ("dataset",), ("mechanism",), where={"epsilon": "0.1"}).splitlines()[2:] == [
        "| a | 10 |", "| b | 30 |"]
    names = pivot_table(summary[::-1], "mse", ("epsilon",), ("mechanism",)).splitlines()[0]
    assert names == "| epsilon | mechanism=n | mechanism=m |"  # names keep the summary's order, numbers sort
    for kwargs, message in [({"value": "bias"}, "value must be one of"), ({"rows": ("colour",)}, "unknown ['colour']"),
                            ({"rows": ("epsilon",)}, "disjoint"), ({"where": {"dataset": "z"}}, "no configuration"),
                            ({"value": "scaled_l2"}, "no configuration with a scaled_l2")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            pivot_table(summary, **kwargs)


@pytest.mark.parametrize("changes, message", [
    ({"policies": ["line", "circle"]}, "unknown policy 'circle'"),
    ({"policies": ["threshold:0"]}, "θ must be a positive integer"),
    ({"epsilons": [0.1, -1]}, "epsilons must hold numbers > 0"),
    ({"epsilons": []}, "epsilons must be a non-empty list"),
    ({"trials": 0}, "trials must be an integer >= 1"),
    ({"mechanisms": ["telepathy"]}, "unknown mechanism 'telepathy'"),
    ({"mechanisms": [{"name": "hb", "params": {"branching": 1}}]}, "refuses params"),
    ({"mechanisms": [{"name": "hb", "colour": "red"}]}, "unknown key.*colour"),
    ({"mechanisms": [{"name": "hb", "policies": ["grid:1"]}]}, "not among the suite's policies"),
    ({"mechanisms": [{"name": "hb", "epsilon_factor": 2}]}, "epsilon_factor must be a number in"),
    ({"mechanisms": ["hb", "hb"]}, "labels must be distinct"),
    ({"scales": None, "data_seeds": 3}, "data_seeds needs scales"),
    ({"scales": [0]}, "scales must hold ints > 0"),
    ({"workload": {"kind": "cubes"}}, "unknown kind 'cubes'"),
    ({"workload": {"kind": "random_ranges"}}, "queries must be an integer >= 1"),
    ({"workload": {"kind": "prefix", "queries": 5}}, "apply to random workloads only"),
    ({"workload": {"kind": "prefix", "clusters": 4}}, "apply to kmeans only"),
    ({"workload": {"kind": "prefix", "order": 2}}, "order applies to marginals only"),
    ({"workload": {"kind": "marginals"}}, "order must be an integer >= 0"),
    ({"workload": {"kind": "marginals", "order": 1, "queries": 5}}, "apply to random workloads only"),
    ({"mechanisms": ["kmeans"]}, "kind 'kmeans' only"),
    ({"workload": {"kind": "kmeans"}}, "named 'kmeans'"),
    ({"workload": {"kind": "kmeans", "iterations": 0}, "mechanisms": ["kmeans"]}, "iterations must be an integer >= 1"),
    ({"workload": {"kind": "kmeans"}, "mechanisms": [{"name": "kmeans", "params": {"sensitivity": "2θ"}}]}, "sensitivity must be one of"),
    ({"workload": {"kind": "kmeans"}, "mechanisms": [{"name": "kmeans", "params": {"k": 3}}]}, "unknown key.*k; allowed"),
    ({"workload": {"kind": "kmeans"}, "mechanisms": [{"name": "kmeans", "tree": "hub"}]}, "tree does not apply"),
    ({"colour": "red"}, "unknown key.*colour"),
    ({"name": "a b"}, "name must be letters"),
])
@pytest.mark.slow
def test_suite_validation_errors_name_the_key(changes, message):
    raw = _raw_of(_suite())
    for key, value in changes.items():
        if key in raw["data"] or key in ("scales", "data_seeds"):
            if value is None:
                raw["data"].pop(key)
            else:
                raw["data"][key] = value
        else:
            raw[key] = value
    with pytest.raises(SuiteError, match=message):
        parse_suite(raw)


def test_suite_files_report_toml_and_lookup_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x\n")
    with pytest.raises(SuiteError, match="not valid TOML"):
        load_suite(bad)
    with pytest.raises(SuiteError, match="not found.*he14_fig2_adult"):
        load_suite("no_such_suite")
    missing = tmp_path / "missing.toml"
    missing.write_text("name = 'x'\ndescription = 'y'\n")
    with pytest.raises(SuiteError, match="missing required key 'epsilons'"):
        load_suite(missing)


def test_the_published_suites_are_all_here():
    assert {"he14_fig1_kmeans", "he14_fig2_adult", "anuarbek_fig4", "dpbench_1d_prefix", "dpbench_2d_ranges", "census_marginals"} <= set(SUITES)


@pytest.mark.slow
@pytest.mark.parametrize("name", SUITES)
def test_every_suite_validates_and_runs_in_its_tiny_configuration(name, tmp_path):
    full = load_suite(name)
    assert len(full.description) > 80  # says what is reproduced and how ours differs
    tiny = load_suite(name, tiny=True)
    assert len(cells(tiny)) < len(cells(full))
    rows = run_suite(tiny, tmp_path)
    assert rows and all(r["status"] == "ok" for r in rows), {r["status"] for r in rows}
    measure = "objective_ratio" if tiny.workload["kind"] == "kmeans" else "mse"
    assert all(np.isfinite(r[measure]) and r[measure] > 0 for r in rows)


def _kmeans_suite(**changes):
    raw = {
        "name": "toy_kmeans", "description": "k-means variants", "master_seed": 5, "trials": 3,
        "epsilons": [0.5, 2.0], "policies": ["complete", "grid:2"],
        "data": {"datasets": ["skin-like"], "domain": [16, 16]},
        "workload": {"kind": "kmeans", "clusters": 3, "iterations": 4},
        "mechanisms": [{"name": "kmeans", "label": "DP", "policies": ["complete"]},
                       {"name": "kmeans", "label": "paper", "params": {"sensitivity": "paper"}, "policies": ["grid:2"]},
                       {"name": "kmeans", "label": "ours", "params": {"size_share": 0.3}, "policies": ["grid:2"]}],
        **changes,
    }
    return parse_suite(raw)


def test_kmeans_rows_are_the_library_call_from_the_public_start(tmp_path):
    from blowfish_te import kmeans, policies

    suite = _kmeans_suite()
    rows = run_suite(suite, tmp_path)
    assert len(rows) == 2 * 3 + 2 * 2 * 3 and all(r["status"] == "ok" for r in rows)
    x = datasets.coarsen(datasets.load("skin-like"), (16, 16))
    for row in rows:
        variant = suite.mechanisms[[m.label for m in suite.mechanisms].index(row["mechanism"])]
        spec = row["policy"]
        policy = policies.complete((16, 16)) if spec == "complete" else policies.grid((16, 16), 2)
        cell = next(c for c in cells(suite) if c.key(suite) == row["key"])
        gen = np.random.default_rng(np.random.SeedSequence([5, zlib.crc32(cell.run_key().encode())]))
        start = kmeans.initial_centres((16, 16), 3, gen)
        private = kmeans.blowfish_kmeans(x, policy, row["epsilon"], 3, 4, gen, centres=start, **variant.params)
        base = kmeans.lloyd(x, (16, 16), 3, 4, centres=start)
        assert row["objective"] == pytest.approx(private.objective, rel=1e-12)
        assert row["objective_ratio"] == pytest.approx(private.objective / base.objective, rel=1e-12)
        assert row["mse"] is None and row["workload"] == "kmeans k=3 T=4"
    # the variants of one trial start from the same centres: at a huge ε every one is Lloyd itself
    huge = run_suite(_kmeans_suite(epsilons=[1e9]), tmp_path / "huge")
    assert all(r["objective_ratio"] == pytest.approx(1.0, rel=1e-6) for r in huge)
    summary = summarize(rows)
    assert all(s["mse"] is None and s["objective_ratio"] > 0 and s["n"] == 3 for s in summary)
    assert "objective_ratio" in (tmp_path / "summary.md").read_text().splitlines()[0]


@pytest.mark.slow
def test_kmeans_results_plot_their_objective_ratio_and_refuse_an_error_metric(tmp_path):
    pytest.importorskip("matplotlib")
    from blowfish_te.evaluation.plots import plot_results

    run_suite(_kmeans_suite(trials=2), tmp_path)
    names = {p.name for p in plot_results(tmp_path, "objective_ratio")}
    assert "skin-like_objective_ratio_vs_epsilon.png" in names
    with pytest.raises(ValueError, match="hold no 'mse' values"):
        plot_results(tmp_path, "mse")


def test_dpbench_sampling_and_coarsening():
    shape = np.array([0, 5, 3, 2, 0, 0, 6, 4])
    assert np.array_equal(datasets.coarsen(shape, 4), [5, 5, 0, 10])
    grid = np.arange(16).reshape(4, 4)
    assert np.array_equal(datasets.coarsen(grid, (2, 2)), [[10, 18], [42, 50]])
    a = datasets.dpbench_sample(shape, 10_000, 4, rng=5)
    assert a.sum() == 10_000 and np.array_equal(a, datasets.dpbench_sample(shape, 10_000, 4, rng=5))
    draws = np.array([datasets.dpbench_sample(shape, 1000, rng=t) for t in range(400)])
    p = shape / shape.sum()
    se = np.sqrt(1000 * p * (1 - p) / 400)
    assert np.all(np.abs(draws.mean(0) - 1000 * p) <= 5 * se + 1e-12)
    assert np.all(draws[:, shape == 0] == 0)
    with pytest.raises(ValueError, match="domain"):
        datasets.coarsen(shape, 3)
    with pytest.raises(ValueError, match="no records"):
        datasets.dpbench_sample(np.zeros(4), 10)
    with pytest.raises(ValueError, match="scale"):
        datasets.dpbench_sample(shape, 0)


def test_builtin_datasets_need_no_data_directory(monkeypatch):
    monkeypatch.delenv(datasets.DATA_DIR_ENV, raising=False)
    assert datasets.load("synthetic-1d").shape == (4096,)
    assert datasets.load("synthetic-2d").shape == (256, 256)
    assert np.array_equal(datasets.load("synthetic-2d"), datasets.synthetic_2d((256, 256), 100_000, rng=0))
    assert set(datasets.available()) == set(datasets.BUILTIN)


def test_metrics():
    truth, est = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 4.0, 3.0, 2.0])
    assert metrics.per_query_mse(truth, est) == 2.0
    assert metrics.scaled_l2_error(truth, est, 10) == pytest.approx(math.sqrt(8) / 40)
    with pytest.raises(ValueError, match="shape"):
        metrics.per_query_mse(truth, est[:3])


# -- CLI ------------------------------------------------------------------------------------------


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_cli_run_on_a_histogram_file(tmp_path):
    x = datasets.synthetic(64, 2000, rng=1)
    np.save(tmp_path / "x.npy", x)
    result = _invoke("run", tmp_path / "x.npy", "--epsilon", 0.5, "--policy", "line", "--workload", "prefix", "--seed", 3,
                     "--mechanism", "identity")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert "discloses 1 component total(s) exactly" in result.stderr and out["component_totals"] == {"63": int(x.sum())}
    assert out["route"] == "transform" and out["policy"] == "line(64)" and out["stretch"] == 1 and out["epsilon"] == 0.5
    truth = np.cumsum(x)
    assert len(out["answers"]) == 64 and out["answers"][-1] == truth[-1]  # n is public under line
    assert np.mean((np.array(out["answers"]) - truth) ** 2) < 20 * out["expected_mse"]
    np.savetxt(tmp_path / "x.csv", x, fmt="%d")
    again = _invoke("run", tmp_path / "x.csv", "--epsilon", 0.5, "--policy", "line", "--workload", "prefix", "--seed", 3,
                    "--mechanism", "identity")
    assert json.loads(again.stdout)["answers"] == out["answers"]
    result = _invoke("run", tmp_path / "x.npy", "--epsilon", 1, "--policy", "threshold:4", "--workload", "random_ranges:25",
                     "--seed", 0, "--format", "csv", "--output", tmp_path / "out.csv")
    assert result.exit_code == 0, result.output
    with open(tmp_path / "out.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 25 and {"answer", "epsilon", "policy", "mechanism", "route", "stretch", "expected_mse"} <= set(table[0])
    assert all(re.fullmatch(r"\d+(\.\.\d+)?", row["query"]) for row in table)  # each answer's range of cells


def test_cli_run_on_records_never_drops_one(tmp_path):
    records = tmp_path / "people.csv"
    records.write_text("name,age\na,30\nb,31\nc,31\nd,150\ne,-2\n")
    result = _invoke("run", records, "--column", "age", "--lower", 0, "--upper", 99, "--epsilon", 1, "--seed", 0)
    assert result.exit_code == 1
    assert "1 below the domain" in result.output and "1 above the domain" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(main, ["run", str(records), "--column", "age", "--lower", "0", "--upper", "99",
                                                       "--epsilon", "1", "--seed", "0", "--outside", "clamp", "--policy", "unbounded"])
    assert result.exit_code == 0, result.output
    assert "5 record(s): 3 counted, 2 clamped to the domain (1 below, 1 above)" in result.stderr
    assert len(json.loads(result.stdout)["answers"]) == 100


@pytest.mark.parametrize("args, message", [
    (["--column", "age", "--lower", "0"], "--lower and --upper"),
    (["--column", "height", "--lower", "0", "--upper", "9"], "no column 'height'; columns: age, score, blank"),
    (["--column", "age", "--lower", "9", "--upper", "0"], "upper (0) must be >= lower (9)"),
    (["--column", "score", "--lower", "0", "--upper", "9"], "1 not a number in the domain"),
    (["--column", "blank", "--lower", "0", "--upper", "9"], "2 missing (NULL, NaN or blank)"),
    (["--column", "age", "--lower", "0", "--upper", "99", "--policy", "circle"], "--policy: unknown policy 'circle'"),
    (["--column", "age", "--lower", "0", "--upper", "99", "--workload", "cubes"], "--workload: unknown workload 'cubes'"),
    (["--column", "age", "--lower", "0", "--upper", "99", "--workload", "random_ranges"], "number of queries"),
    (["--column", "age", "--lower", "0", "--upper", "99", "--mechanism", "telepathy"], "unknown mechanism 'telepathy'"),
])
def test_cli_run_bad_arguments_get_one_line_errors(tmp_path, args, message):
    records = tmp_path / "r.csv"
    records.write_text("age,score,blank\n3,1.5,\n4,2,\n")
    result = _invoke("run", records, "--epsilon", 1, "--seed", 0, *args)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in result.output


@pytest.mark.slow
def test_cli_bench_plot_and_datasets(tmp_path):
    suite = tmp_path / "mini.toml"
    suite.write_text(
        'name = "mini"\ndescription = "a mini suite"\nepsilons = [0.5, 1.0]\npolicies = ["line", "threshold:2", "threshold:4"]\n'
        'trials = 2\n[data]\ndatasets = ["synthetic-1d"]\ndomain = 16\n[workload]\nkind = "prefix"\n'
        '[[mechanisms]]\nname = "identity"\n'
    )
    out = tmp_path / "res"
    result = _invoke("bench", suite, "--out", out, "--no-plot")
    assert result.exit_code == 0, result.output
    assert "| synthetic-1d | 16 |" in result.output and (out / "summary.md").exists()
    pytest.importorskip("matplotlib")
    result = _invoke("plot", out)
    assert result.exit_code == 0, result.output
    names = {pathlib.Path(line).name for line in result.output.split()}
    assert names == {f"synthetic-1d_mse_vs_{axis}.{ext}" for axis in ("epsilon", "theta") for ext in ("png", "svg")}
    assert _invoke("bench", tmp_path / "nope.toml").exit_code == 1
    table = _invoke("table", out, "--rows", "policy", "--where", "epsilon=1")
    assert table.exit_code == 0, table.output
    assert table.output.splitlines()[0] == "| policy | epsilon=1 |" and len(table.output.splitlines()) == 5
    for args, message in [(("--where", "epsilon"), "--where must read KEY=VALUE"), (("--value", "bias"), "value must be")]:
        bad = _invoke("table", out, *args)
        assert bad.exit_code == 1 and message in bad.output and bad.output.count("\n") == 1
    listing = _invoke("datasets")
    assert "synthetic-1d" in listing.stdout and "4096" in listing.stdout and "--data-dir" in listing.stderr
    assert "does not exist" in _invoke("datasets", "--data-dir", tmp_path / "nowhere").output


def test_cli_bench_exits_non_zero_when_cells_fail(tmp_path, record_limit):
    suite = tmp_path / "limits.toml"
    suite.write_text(
        'name = "limits"\ndescription = "a sample too large for one mechanism"\nepsilons = [1.0]\npolicies = ["unbounded"]\n'
        'trials = 2\n[data]\ndatasets = ["synthetic-1d"]\ndomain = 16\nscales = [100, 2000, 3000]\n[workload]\nkind = "prefix"\n'
        '[[mechanisms]]\nname = "identity"\n[[mechanisms]]\nname = "record_limit"\n'
    )
    out = tmp_path / "res"
    result = _invoke("bench", suite, "--out", out, "--no-plot")
    assert result.exit_code == 1, result.output
    assert len(read_rows(out / "results.csv")) == 12 and (out / "summary.md").exists()  # written all the same
    assert "| synthetic-1d | 16 |" in result.stdout
    assert result.stderr.splitlines()[-1] == ("error: 4 of 12 cells failed: 2x ValueError: 2000 records, more than 1000; "
                                              "2x ValueError: 3000 records, more than 1000")
    rerun = _invoke("bench", suite, "--out", out, "--no-plot")  # resuming runs nothing, and still says so
    assert rerun.exit_code == 1 and "4 of 12 cells failed" in rerun.stderr


def test_parquet_results_match_csv(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    rows = run_suite(_suite(trials=1, epsilons=[1.0]), tmp_path)
    table = pq.read_table(tmp_path / "results.parquet").to_pylist()
    assert [r["key"] for r in table] == [r["key"] for r in rows]
    assert [r["mse"] for r in table] == [r["mse"] for r in rows]


def test_dataset_names_are_not_patterns(tmp_path):
    (tmp_path / "1D").mkdir()
    np.save(tmp_path / "1D" / "TOY.npy", np.array([1, 2]))
    for name in ("*", "T?Y", "../TOY", "1D/TOY"):
        with pytest.raises(ValueError, match="plain name"):
            datasets.load(name, tmp_path)
    assert datasets.load("TOY", tmp_path).sum() == 3


def test_plots_split_crowded_figures_by_policy_and_lines_by_scale(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from blowfish_te.evaluation import plots

    suite = _suite(epsilons=[1.0], trials=1, data_seeds=1, scales=[100, 1000], policies=["unbounded", "threshold:1", "threshold:3"],
                   mechanisms=["identity", "laplace", "hb", "h2", "privelet"])
    run_suite(suite, tmp_path)
    figures = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out, stem, written: figures.update(
        {stem: [(ax.get_title(), len(ax.get_lines())) for ax in fig.axes if ax.get_visible()]}))
    plots.plot_results(tmp_path, "scaled_l2")
    # 5 mechanisms × 3 policies = 15 lines > MAX_LINES_PER_PANEL: one panel per policy, against the scale
    assert [t for t, _ in figures["synthetic-1d_scaled_l2_vs_scale"]] == [
        "policy unbounded — ε = 1", "policy threshold:1 — ε = 1", "policy threshold:3 — ε = 1"]
    # θ panels: one line per (ε, scale), never one line zig-zagging across scales
    theta = dict(figures["synthetic-1d_scaled_l2_vs_theta"])
    assert set(theta) == {"identity", "laplace", "hb", "h2", "privelet"}
    assert all(count == 2 for count in theta.values())


@pytest.mark.slow
@pytest.mark.parametrize("trials", [2, 5])
def test_figures_a_reader_can_trust(tmp_path, monkeypatch, trials):
    """Legible legends, one y scale per figure, plain ε and θ ticks, titles that say what was run,
    and confidence bars only where there are enough runs."""
    pytest.importorskip("matplotlib")
    from matplotlib.container import ErrorbarContainer

    from blowfish_te.evaluation import plots

    suite = _suite(epsilons=[0.1, 0.6, 1.0], trials=trials, data_seeds=1, policies=["unbounded", "threshold:1", "threshold:3"],
                   mechanisms=["identity", "hb", "h2", "privelet", "laplace"])
    run_suite(suite, tmp_path)
    figures = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out, stem, written: figures.update({stem: fig}))
    plots.plot_results(tmp_path, "mse")
    fig = figures["synthetic-1d_mse_vs_epsilon"]
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 3 and len({ax.get_ylim() for ax in axes}) == 1  # panels share one y scale
    for ax in axes:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "0.6", "1"]  # not 6×10^-1
        assert all(t.get_fontsize() >= 9 for t in ax.get_legend().get_texts())
        bars = [c.has_yerr for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert bars and all(bars) == (trials >= plots.MIN_RUNS_FOR_CI) and any(bars) == all(bars)
        for caps in (c.lines[2] for c in ax.containers if c.has_yerr):  # no bar runs to the bottom of the axis
            assert all(path.vertices[:, 1].min() > 0 for seg in caps for path in seg.get_paths())
    title = fig.get_suptitle() + " " + axes[1].get_title()
    assert all(part in title for part in ("synthetic-1d", "random_ranges", "threshold:1"))
    assert f"runs per point: {trials}" in fig.get_supxlabel()
    theta = figures["synthetic-1d_mse_vs_theta"]
    assert "ε = 0.1" in [t.get_text() for t in theta.axes[0].get_legend().get_texts()]
    assert [t.get_text() for t in theta.axes[0].get_xticklabels()] == ["1", "3"]
