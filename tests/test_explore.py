"""Choosing a policy before spending budget: guarantee tables from the policy graph's distances
and analytic errors from the planner (``blowfish_te.explore``, ``blowfish-te explore``)."""

import math
import sys

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from blowfish_te import plan, policies
from blowfish_te import workloads as wl
from blowfish_te.cli import main
from blowfish_te.explore import Guarantee, equal_protection, expected_errors, guarantees


def _distances(policy) -> dict[str, float]:
    return {g.pair: g.distance for g in guarantees(policy)}


def test_distances_of_the_named_policies():
    assert _distances(policies.line(8)) == {"values 1 apart": 1, "values 2 apart": 2, "values 4 apart": 4, "values 7 apart": 7,
                                            "a record present or absent (the count n)": math.inf}
    # unbounded DP: a move is a removal and an addition (2 hops through ⊥); presence is 1 hop
    assert set(_distances(policies.unbounded(8)).values()) == {2, 1}
    assert _distances(policies.unbounded(8))["a record present or absent (the count n)"] == 1
    assert set(_distances(policies.complete(8)).values()) == {1, math.inf}  # bounded DP: n is public
    split = _distances(policies.partition([0, 0, 0, 0, 1, 1, 1, 1]))
    assert split["values 2 apart"] == 1 and split["values 4 apart"] == math.inf  # different blocks: not protected
    grid = _distances(policies.grid((5, 5), 1))
    assert grid["cells 2 apart on axis 0"] == 2 and grid["cells (2, 2) apart"] == 4


@given(st.integers(2, 40), st.integers(1, 12))
def test_threshold_distance_is_the_number_of_theta_steps(k, theta):
    for pair, d in _distances(policies.threshold(k, theta)).items():
        if pair.startswith("values"):
            delta = int(pair.split()[1])
            assert d == math.ceil(delta / theta)


def test_a_guarantee_is_e_to_the_epsilon_d():
    assert Guarantee("p", 3).loss(0.5) == 1.5 and Guarantee("p", 3).describe(0.5) == f"{math.exp(1.5):.3g}"
    assert Guarantee("p", math.inf).describe(0.1) == "none"
    assert Guarantee("p", 1000).describe(1.0) == "e^1000"  # no overflow


def test_expected_errors_are_the_planned_errors():
    w = wl.prefix(64)
    rows = expected_errors(w, ["unbounded", "line", "threshold:4"], [0.1, 1.0], "hb")
    assert [(r["policy"], r["epsilon"]) for r in rows] == [(p, e) for p in ("unbounded", "line", "threshold:4") for e in (0.1, 1.0)]
    for r in rows:
        chosen = plan(w, policies.from_spec(r["policy"], 64), r["epsilon"], "hb").chosen
        assert r["rmse"] == pytest.approx(math.sqrt(chosen.expected_mse)) and r["route"] == chosen.label
    by = {(r["policy"], r["epsilon"]): r["rmse"] for r in rows}
    assert all(by[p, 0.1] == pytest.approx(10 * by[p, 1.0]) for p in ("unbounded", "line", "threshold:4"))  # error ∝ 1/ε
    assert [r["theta"] for r in rows] == [None, None, None, None, 4.0, 4.0]
    with pytest.raises(ValueError, match="no analytic expected error"):
        expected_errors(w, ["line"], [1.0], "dawa")


@pytest.mark.slow
def test_explore_prints_both_tables_and_draws_the_figure(tmp_path):
    pytest.importorskip("matplotlib")
    figure = tmp_path / "policies.png"
    result = CliRunner().invoke(main, ["explore", "--shape", "256", "--epsilon", "0.5", "--plot", str(figure)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "| pair | unbounded | line | threshold:4 | threshold:16 | threshold:64 |" in lines
    hops = [2, 16, 4, 1, 1]  # unbounded (via ⊥), line, threshold:4, :16, :64 for values 16 apart
    assert "| values 16 apart | " + " | ".join(f"{math.exp(0.5 * d):.3g}" for d in hops) + " |" in lines
    row = next(line for line in lines if line.startswith("| line |"))
    expected = math.sqrt(plan(wl.prefix(256), policies.line(256), 0.5, "hb").chosen.expected_mse)
    assert row.startswith(f"| line | {expected:.4g} [")
    assert figure.stat().st_size > 0


@pytest.mark.slow
def test_explore_in_2d_and_its_errors():
    result = CliRunner().invoke(main, ["explore", "--shape", "16x16", "--workload", "random_rects:50", "--epsilon", "1"])
    assert result.exit_code == 0 and "| pair | unbounded | grid:1 | grid:4 | grid:16 |" in result.output
    assert CliRunner().invoke(main, ["explore", "--shape", "16x0"]).exit_code == 2
    bad = CliRunner().invoke(main, ["explore", "--shape", "64", "--mechanism", "dawa"])
    assert bad.exit_code == 1 and "no analytic expected error" in bad.output and "Traceback" not in bad.output
    typo = CliRunner().invoke(main, ["explore", "--shape", "64", "--policy", "treshold:4"])
    assert typo.exit_code == 1 and "--policy" in typo.output


def test_explore_checks_the_figure_path_first(tmp_path):
    result = CliRunner().invoke(main, ["explore", "--shape", "64", "--plot", str(tmp_path / "missing" / "f.png")])
    assert result.exit_code == 1 and "not writable or does not exist" in result.output


def test_explore_without_matplotlib_prints_its_tables_and_exits_0(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    result = CliRunner().invoke(main, ["explore", "--shape", "64", "--epsilon", "1", "--plot", str(tmp_path / "f.png")])
    assert result.exit_code == 0, result.output
    assert "| pair | unbounded |" in result.stdout and result.stderr.startswith("no figure:")
    assert not (tmp_path / "f.png").exists()


def test_equal_protection_gives_each_policy_the_epsilon_of_the_same_bound():
    w = wl.prefix(64)
    rows = {r["policy"]: r for r in equal_protection(w, ["unbounded", "line", "threshold:4", "complete"], 0.5, apart=8)}
    assert rows["unbounded"]["hops"] == 2 and rows["unbounded"]["epsilon"] == 0.25  # a change of value: out and in
    assert rows["line"]["hops"] == 8 and rows["line"]["epsilon"] == 0.0625
    assert rows["threshold:4"]["hops"] == 2 and rows["threshold:4"]["epsilon"] == 0.25
    assert rows["complete"]["hops"] == 1 and rows["complete"]["epsilon"] == 0.5  # bounded DP: one swap
    for spec in ("unbounded", "line", "threshold:4"):
        (at_that_epsilon,) = expected_errors(w, [spec], [rows[spec]["epsilon"]], "hb")
        assert rows[spec]["rmse"] == at_that_epsilon["rmse"]
    with pytest.raises(ValueError, match="apart must be between 1 and 63"):
        equal_protection(w, ["line"], 0.5, apart=64)


def test_explore_prints_the_equal_protection_table():
    result = CliRunner().invoke(main, ["explore", "--shape", "256", "--epsilon", "0.5", "--policy", "unbounded",
                                       "--policy", "threshold:16"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("At equal protection: values 1 apart"))
    unbounded = math.sqrt(plan(wl.prefix(256), policies.unbounded(256), 0.25, "hb").chosen.expected_mse)
    assert lines[start + 3] == f"| unbounded | {unbounded:.4g} [ε 0.25] |"
    assert lines[start + 4].startswith("| threshold:16 |") and "[ε 0.5]" in lines[start + 4]
