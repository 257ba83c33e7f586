"""The ledger that keeps a dataset's budget across runs, and `run --plan` / `run --ledger`."""

import json
import multiprocessing
import threading

import numpy as np
import pytest
from click.testing import CliRunner

from blowfish_te import io
from blowfish_te.cli import main
from blowfish_te.ledger import BudgetExceeded, Ledger
from blowfish_te.routes import Plan


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_charges_add_up_exactly_and_the_last_one_past_the_total_is_refused(tmp_path):
    book = Ledger(tmp_path / "l.db")
    charges = [book.reserve("d", 0.1, "line(8)", "hb", "prefix(8)", total=1.0 if i == 0 else None) for i in range(10)]
    assert book.budget("d").spent == 1.0 and book.budget("d").remaining == 0.0  # ten times 0.1 is the whole budget
    with pytest.raises(BudgetExceeded, match="0.1 would exceed dataset 'd'.s budget: 1 of 1 spent"):
        book.reserve("d", 0.1, "line(8)", "hb", "prefix(8)")
    assert len(book.charges("d")) == 10  # the refused release charged nothing
    book.settle(charges[0], "refunded", "bad data")
    book.settle(charges[1], "failed", "disk full")
    book.settle(charges[2], "released")
    assert book.budget("d").spent == pytest.approx(0.9)  # a refund frees its ε, a failure keeps it
    book.reserve("d", 0.1, "line(8)", "hb", "prefix(8)")
    with pytest.raises(ValueError, match="not a reserved charge"):
        book.settle(charges[0], "released")
    assert [c.status for c in book.charges("d")][:3] == ["refunded", "failed", "released"]


@pytest.mark.parametrize("call, message", [
    (lambda b: b.reserve("new", 0.5, "line(8)", "hb", "w"), "no budget for dataset 'new'"),
    (lambda b: b.reserve("d", 0.5, "unbounded(8)", "hb", "w"), "budget is for policy line"),
    (lambda b: b.reserve("d", 0.5, "line(8)", "hb", "w", total=3.0), "total budget of 2"),
    (lambda b: b.reserve("d", -1, "line(8)", "hb", "w"), "epsilon must be a finite number > 0"),
    (lambda b: b.set_budget("d", "line(8)", 0.5), "already spent ε = 1"),
    (lambda b: b.settle(b.charges()[0], "lost"), "status must be one of"),
])
def test_bad_charges_name_what_is_wrong(tmp_path, call, message):
    book = Ledger(tmp_path / "l.db")
    book.reserve("d", 1.0, "line(8)", "hb", "w", total=2.0)
    with pytest.raises(ValueError, match=message):
        call(book)
    assert book.budget("d").spent == 1.0


def test_a_file_that_is_not_a_ledger_is_refused(tmp_path):
    (tmp_path / "x.db").write_text("not sqlite at all, " * 20)
    with pytest.raises(ValueError, match="not a ledger"):
        Ledger(tmp_path / "x.db")
    with pytest.raises(ValueError, match="is a folder"):
        Ledger(tmp_path)


def test_threads_racing_for_the_last_of_a_budget_cannot_both_get_it(tmp_path):
    book = Ledger(tmp_path / "l.db")
    book.set_budget("d", "line(8)", 1.0)
    start, outcomes = threading.Barrier(8), []

    def spend():
        start.wait()
        try:
            book.reserve("d", 0.3, "line(8)", "hb", "w")
            outcomes.append(True)
        except BudgetExceeded:
            outcomes.append(False)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == [False] * 5 + [True] * 3 and book.budget("d").spent == pytest.approx(0.9)


def _spend_in_a_process(path: str) -> bool:
    try:
        Ledger(path).reserve("d", 0.3, "line(8)", "hb", "w")
        return True
    except BudgetExceeded:
        return False


def test_processes_sharing_a_ledger_file_spend_at_most_the_budget(tmp_path):
    path = str(tmp_path / "l.db")
    Ledger(path).set_budget("d", "line(8)", 1.0)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        outcomes = pool.map(_spend_in_a_process, [path] * 8)
    assert sum(outcomes) == 3 and Ledger(path).budget("d").spent == pytest.approx(0.9)


@pytest.mark.parametrize("shape", [(7,), (1, 5), (4, 1), (3, 6)])
def test_histogram_shape_reads_no_count_and_matches_read_histogram(tmp_path, shape):
    x = np.arange(np.prod(shape)).reshape(shape)
    np.save(tmp_path / "x.npy", x)
    np.savetxt(tmp_path / "x.csv", x.reshape(shape[0], -1), fmt="%d", delimiter=",")
    for name in ("x.npy", "x.csv"):
        assert io.histogram_shape(tmp_path / name) == io.read_histogram(tmp_path / name).shape
    with pytest.raises(ValueError, match="a .npy or .csv file"):
        io.histogram_shape(tmp_path / "x.txt")


def test_run_plan_reads_no_record_and_draws_no_noise(tmp_path, monkeypatch):
    records = tmp_path / "people.csv"
    records.write_text("age\n3\n200\n")  # a record outside the domain: reading would refuse it
    monkeypatch.setattr(Plan, "release_checked", lambda *a: pytest.fail("noise drawn"))
    result = _invoke("run", records, "--column", "age", "--lower", 0, "--upper", 99, "--epsilon", 0.5,
                     "--workload", "prefix", "--policy", "threshold:4", "--mechanism", "hb", "--plan")
    assert result.exit_code == 0, result.output
    assert "records:" not in result.stderr and "spends: ε = 0.5" in result.stdout and "expected per-query error" in result.stdout
    result = _invoke("run", records, "--column", "age", "--lower", 0, "--upper", 99, "--epsilon", 0.5, "--workload", "prefix",
                     "--plan", "--format", "json", "--output", tmp_path / "plan.json")
    assert result.exit_code == 0, result.output
    planned = json.loads((tmp_path / "plan.json").read_text())
    assert planned["epsilon"] == 0.5 and planned["policy"] == "line(100)" and planned["route"] == "transform"
    assert planned["expected_rmse"] ** 2 == pytest.approx(planned["expected_mse"])
    assert planned["candidates"][0]["expected_mse"] == planned["expected_mse"]


def test_a_release_shows_its_plan_first_and_carries_it(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(16) % 5)
    result = _invoke("run", tmp_path / "x.npy", "--epsilon", 1, "--workload", "prefix", "--seed", 0)
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("plan:\n  identity on prefix(16) under line(16) at ε = 1")
    out = json.loads(result.stdout)
    assert out["plan"]["expected_mse"] == out["expected_mse"] and out["plan"]["route"] == out["route"]
    quiet = _invoke("run", tmp_path / "x.npy", "--epsilon", 1, "--workload", "prefix", "--seed", 0, "--quiet")
    assert "plan:" not in quiet.stderr and json.loads(quiet.stdout)["answers"] == out["answers"]


def test_run_with_a_ledger_refuses_before_reading_and_refunds_bad_data(tmp_path, monkeypatch):
    x = tmp_path / "x.npy"
    np.save(x, np.arange(16) % 5)
    book = tmp_path / "ledger.db"
    base = ["run", x, "--workload", "prefix", "--seed", 0, "--ledger", book]
    assert _invoke(*base, "--epsilon", 0.6).exit_code == 1  # a new dataset needs --budget
    first = _invoke(*base, "--epsilon", 0.6, "--budget", 1)
    assert first.exit_code == 0, first.output and "charged ε = 0.6" in first.stderr
    reads = []
    monkeypatch.setattr(io, "read_histogram", lambda path: reads.append(path))
    second = _invoke(*base, "--epsilon", 0.6)
    assert second.exit_code == 1 and "0.6 would exceed" in second.output and reads == []
    monkeypatch.undo()
    np.save(x, np.arange(16) - 3)  # negative counts: refused before any noise is drawn
    third = _invoke(*base, "--epsilon", 0.4)
    assert third.exit_code == 1 and "Error:" in third.output
    listed = _invoke("ledger", book, "--format", "json")
    (entry,) = json.loads(listed.stdout)
    assert entry["spent"] == 0.6 and [c["status"] for c in entry["charges"]] == ["released", "refunded"]
    assert entry["charges"][1]["note"] and entry["policy"] == "line(16)"
    text = _invoke("ledger", book).stdout
    assert f"{x.resolve()}: policy line(16), budget ε = 1, spent 0.6, left 0.4" in text and "refunded" in text
    assert _invoke("ledger", book, "--dataset", str(x.resolve()), "--budget", 0.5).exit_code == 1  # below what is spent
    assert _invoke("ledger", book, "--dataset", str(x.resolve()), "--budget", 2).exit_code == 0
    np.save(x, np.arange(16) % 5)
    assert _invoke(*base, "--epsilon", 1).exit_code == 0  # 0.6 + 1 within the raised total of 2
    assert _invoke(*base, "--epsilon", 0.5).exit_code == 1


def test_a_run_that_fails_after_noise_may_be_drawn_keeps_its_charge(tmp_path, monkeypatch):
    np.save(tmp_path / "x.npy", np.arange(16) % 5)

    def broken(*args):
        raise ValueError("the mechanism failed half way")

    monkeypatch.setattr(Plan, "release_checked", broken)
    result = _invoke("run", tmp_path / "x.npy", "--epsilon", 0.25, "--seed", 0, "--ledger", tmp_path / "l.db", "--budget", 1)
    assert result.exit_code == 1 and "half way" in result.output
    (charge,) = Ledger(tmp_path / "l.db").charges()
    assert charge.status == "failed" and Ledger(tmp_path / "l.db").budget(charge.dataset).spent == 0.25


@pytest.mark.parametrize("args, message", [
    (["--plan", "--ledger", "l.db"], "--plan charges nothing"),
    (["--budget", "1"], "give --ledger too"),
    (["--plan", "--format", "csv"], "--plan writes text or json"),
    (["--format", "text"], "text is for --plan"),
])
def test_run_plan_and_ledger_usage_errors(tmp_path, args, message):
    np.save(tmp_path / "x.npy", np.arange(8))
    result = _invoke("run", tmp_path / "x.npy", "--epsilon", 1, *args)
    assert result.exit_code == 2 and message in result.output
