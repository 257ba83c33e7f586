"""Optimised strategies kept on disk: fingerprints, the store, the mechanism's use of it, and the
strategies shipped for the standard workloads."""

from __future__ import annotations

import sys
import tempfile
import types

import numpy as np
import pytest

import blowfish_te.strategies.pidentity as pidentity
import blowfish_te.strategies.store as store_module
from blowfish_te import policies, trees, workloads
from blowfish_te.mechanisms import Auto, Optimized
from blowfish_te.strategies import IdentityStrategy, PIdentityStrategy, StrategyStore
from blowfish_te.strategies.kronecker import KroneckerStrategy
from blowfish_te.strategies.standard import standard_workloads
from blowfish_te.strategies.store import cache_directory, default_store, shipped_directory, strategy_key
from blowfish_te.transform import transform

pytestmark = pytest.mark.core

# -- fingerprints ------------------------------------------------------------------------------


def test_equal_workloads_have_equal_fingerprints_and_different_ones_differ():
    same = [
        (workloads.prefix(64), workloads.prefix(64)),
        (workloads.all_ranges(32), workloads.all_ranges(32)),
        (workloads.dpbench_ranges((16, 16), 50, rng=3), workloads.dpbench_ranges((16, 16), 50, rng=3)),
        (workloads.identity((4, 5)), workloads.identity((4, 5))),
        (workloads.from_matrix(np.eye(3)), workloads.from_matrix(np.eye(3))),
    ]
    for a, b in same:
        assert a.fingerprint() == b.fingerprint()
    prints = [
        workloads.prefix(64), workloads.prefix(65), workloads.all_ranges(64),
        workloads.dpbench_ranges((16, 16), 50, rng=3), workloads.dpbench_ranges((16, 16), 50, rng=4),
        workloads.identity((4, 5)), workloads.identity((5, 4)), workloads.identity(20),
        workloads.Boxes((8,), [0, 2], [3, 5]), workloads.Boxes((8,), [0, 2], [3, 5], weights=[1.0, 2.0]),
        workloads.from_matrix(np.eye(3)), workloads.from_matrix(2 * np.eye(3)),
    ]
    digests = [w.fingerprint() for w in prints]
    assert len(set(digests)) == len(digests)


def test_policy_fingerprint_follows_the_edges_not_the_name():
    assert policies.line(8).fingerprint() == policies.threshold(8, 1).fingerprint()
    assert policies.line(8).fingerprint() != policies.threshold(8, 2).fingerprint()
    assert policies.line(8).fingerprint() != policies.line(9).fingerprint()


def test_transformed_workload_fingerprint_depends_on_the_tree():
    w = workloads.prefix(12)
    complete = policies.threshold(12, 11)
    line = transform(complete, trees.line(12)).workload(w)
    star = transform(complete, trees.star(12)).workload(w)
    assert line.fingerprint() == transform(policies.line(12)).workload(workloads.prefix(12)).fingerprint()
    assert line.fingerprint() != star.fingerprint()
    assert line.fingerprint() != transform(policies.line(12)).workload(workloads.all_ranges(12)).fingerprint()


# -- the store ------------------------------------------------------------------------------------


def _kinds():
    theta = np.random.default_rng(0).random((3, 10))
    return [
        IdentityStrategy((10,)),
        PIdentityStrategy(theta, (10,)),
        KroneckerStrategy([PIdentityStrategy(theta[:2, :4], (4,)), PIdentityStrategy(theta[:, :5], (5,))]),
    ]


@pytest.mark.parametrize("index", range(3))
def test_store_round_trip_is_exact(tmp_path, index):
    strategy = _kinds()[index]
    store = StrategyStore(tmp_path, shipped=False)
    store.save("k", strategy)
    loaded = store.load("k", strategy.domain)
    assert type(loaded) is type(strategy)
    w = workloads.prefix(strategy.domain) if len(strategy.domain) > 1 else workloads.all_ranges(strategy.size)
    assert loaded.lstsq_frobenius_sq(w) == strategy.lstsq_frobenius_sq(w)
    if isinstance(strategy, PIdentityStrategy):
        assert np.array_equal(loaded.theta, strategy.theta)


def test_store_ignores_damaged_and_foreign_files_and_recomputes(tmp_path):
    store = StrategyStore(tmp_path, shipped=False)
    (tmp_path / "bad.npz").write_bytes(b"not a numpy file")
    assert store.contains("bad") and store.load("bad", (10,)) is None
    store.save("other", PIdentityStrategy(np.ones((2, 7)), (7,)))
    assert store.load("other", (10,)) is None  # 7 columns for 10 cells
    computed = []
    got = store.get("bad", (10,), lambda: computed.append(1) or IdentityStrategy((10,)))
    assert computed == [1] and isinstance(got, IdentityStrategy)
    assert isinstance(store.load("bad", (10,)), IdentityStrategy)  # rewritten


def _unusable(kind: str) -> dict[str, np.ndarray]:
    """Arrays that load (finite, >= 0, the right shapes) but make no usable strategy over 6 cells."""
    theta = {
        "huge": np.full((1, 6), 1e150),  # I + ΘΘᵀ fits a double, its least squares overflows
        "overflowing gram": np.full((1, 6), 1e200),  # I + ΘΘᵀ is infinite
        "one huge column": np.array([[0.5, 0.5, 1e160, 0.5, 0.5, 0.5]]),
        "beyond the scale bound": np.full((1, 6), 1e6),
    }
    if kind == "kronecker factor":
        return {"kind": np.array("kronecker"), "theta_0": np.full((1, 6), 1e150)}
    return {"kind": np.array("p-identity"), "theta": theta[kind]}


@pytest.mark.slow
@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("kind", ["huge", "overflowing gram", "one huge column", "beyond the scale bound", "kronecker factor"])
def test_a_stored_strategy_that_is_not_usable_is_recomputed(tmp_path, kind):
    """A file whose Θ loads but makes no usable strategy (least squares overflowing: a release
    once raised ValueError from scipy's Cholesky solve) is damaged: the release recomputes the
    strategy, rewrites the file, and matches a run that never saw it."""
    w, x = workloads.prefix(6), np.arange(6)
    clean = Optimized(store=StrategyStore(tmp_path / "clean", shipped=False))
    store = StrategyStore(tmp_path / "damaged", shipped=False)
    mech = Optimized(store=store)
    key = mech.store_key(w)
    store.directory.mkdir()
    np.savez(store.directory / f"{key}.npz", **_unusable(kind))
    assert store.contains(key) and store.load(key, w.domain) is None
    released = mech.release(w, x, 1.0, rng=0)
    expected = clean.release(w, x, 1.0, rng=0)
    assert np.array_equal(released.answers, expected.answers) and released.sensitivity == expected.sensitivity == 1.0
    assert mech.expected_error(w, 1.0) == clean.expected_error(w, 1.0)
    assert np.array_equal(store.load(key, w.domain).theta, clean.strategy(w).theta)  # rewritten


def test_store_without_key_or_directory_writes_nothing(tmp_path):
    StrategyStore(tmp_path, shipped=False).save(None, IdentityStrategy((3,)))
    StrategyStore(None, shipped=False).save("k", IdentityStrategy((3,)))
    assert list(tmp_path.iterdir()) == []
    unwritable = tmp_path / "file"
    unwritable.write_text("x")
    StrategyStore(unwritable / "sub", shipped=False).save("k", IdentityStrategy((3,)))  # skipped, no error
    assert not list(tmp_path.glob("**/*.npz"))


def test_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", str(tmp_path))
    assert cache_directory() == tmp_path
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", "off")
    assert cache_directory() is None and default_store().directory is None
    monkeypatch.delenv("BLOWFISH_TE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    if sys.platform.startswith("linux"):
        assert cache_directory() == tmp_path / "blowfish_te" / "strategies"


# -- the mechanism ------------------------------------------------------------------------------


def test_optimized_computes_once_then_loads(tmp_path, monkeypatch):
    w = workloads.all_ranges(48)
    store = StrategyStore(tmp_path, shipped=False)
    first = Optimized(store=store)
    assert first.predicted_seconds(w) > 0
    error = first.expected_error(w, 1.0)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    assert Optimized(store=store).predicted_seconds(w) == 0.0

    def refuse(*args, **kwargs):
        raise AssertionError("the stored strategy should have been used")

    monkeypatch.setattr(pidentity, "minimize_nonnegative", refuse)
    assert Optimized(store=store).expected_error(w, 1.0) == error
    with pytest.raises(AssertionError, match="should have been used"):
        Optimized(store=store, seed=1).expected_error(w, 1.0)  # another seed is another entry
    with pytest.raises(AssertionError, match="should have been used"):
        Optimized(store=False).expected_error(w, 1.0)


def test_policy_aware_strategies_are_stored_per_policy(tmp_path):
    w = workloads.prefix(32)
    store = StrategyStore(tmp_path, shipped=False)
    line = policies.line(32)
    mech = Optimized(store=store, maxiter=100)
    mech.policy_strategy(w, line)
    keys = {mech.store_key(w), mech.store_key(w, line)}
    assert len(keys) == 2
    assert {p.stem for p in tmp_path.glob("*.npz")} == keys
    assert Optimized(store=store, maxiter=100).predicted_seconds(w, line) == 0.0
    assert Optimized(store=store, maxiter=100).predicted_seconds(w, policies.threshold(32, 2)) > 0


def test_store_argument_is_checked():
    with pytest.raises(TypeError, match="store must be True, False or a StrategyStore"):
        Optimized(store="yes")


def test_key_needs_a_fingerprint():
    class Anonymous(workloads.Workload):
        def _matmat(self, x):
            return x

        def _rmatmat(self, y):
            return y

    assert strategy_key("optimized", Anonymous((3,), 3, "anon"), None, ()) is None


# -- shipped strategies -------------------------------------------------------------------------


def test_every_standard_workload_ships_its_strategy_for_this_version():
    """Each standard workload's strategy ships, and so do the ones its ``auto`` choices planned
    under the standard policies (optimised against the policy): nothing else, nothing stale."""
    from blowfish_te.strategies.standard import standard_policies
    from blowfish_te.transform import transform

    mech = Optimized(store=StrategyStore(None))
    expected, planned = set(), set()
    for build in standard_workloads().values():
        workload = build()
        expected.add(mech.store_key(workload))
        for policy in standard_policies(workload).values():
            planned.add(mech.store_key(workload, policy))  # the exact route's
            if policy.is_forest:  # a transform route's, over the transformed workload
                planned.add(mech.store_key(transform(policy).workload(workload)))
    shipped = {p.name[:-4] for p in shipped_directory().iterdir() if p.name.endswith(".npz")}
    rebuild = "rebuild with: blowfish-te strategies --out blowfish_te/data/strategies"
    assert expected <= shipped and shipped <= expected | planned, rebuild


@pytest.mark.slow
@pytest.mark.parametrize("name", ["prefix:256", "all_ranges:256", "dpbench_ranges:2000@64x64"])
def test_auto_weighs_the_shipped_strategy_within_any_budget(name):
    w = standard_workloads()[name]()
    shipped_only = StrategyStore(None)
    optimized = Optimized(store=shipped_only)
    assert optimized.predicted_seconds(w) == 0.0
    auto = Auto(budget=0.0)
    pairs, note = auto.choices(w)
    assert any(m.name == "optimized" for m, _ in pairs), note
    assert auto.expected_error(w, 1.0) <= 1.01 * optimized.expected_error(w, 1.0)


# -- exact paths, refusals and writes ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "  ", "off", " Off ", "none", "NONE", "0"])
def test_the_cache_directory_is_turned_off_by_any_of_its_words(monkeypatch, value):
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", value)
    assert cache_directory() is None


def test_the_cache_directory_of_each_platform(monkeypatch, tmp_path):
    monkeypatch.delenv("BLOWFISH_TE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("USERPROFILE", str(tmp_path / "home"))  # Path.home() on Windows
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", "~/strategies")
    assert cache_directory() == tmp_path / "home" / "strategies"
    monkeypatch.delenv("BLOWFISH_TE_CACHE_DIR")
    home = tmp_path / "home"
    for platform, variable, fallback in [("win32", "LOCALAPPDATA", home / "AppData" / "Local"),
                                         ("darwin", None, home / "Library" / "Caches"),
                                         ("linux", "XDG_CACHE_HOME", home / ".cache")]:
        monkeypatch.setattr(store_module, "sys", types.SimpleNamespace(platform=platform))
        for name in ("LOCALAPPDATA", "XDG_CACHE_HOME"):
            monkeypatch.delenv(name, raising=False)
        assert cache_directory() == fallback / "blowfish_te" / "strategies", platform
        if variable is not None:
            monkeypatch.setenv(variable, str(tmp_path / "set"))
            assert cache_directory() == tmp_path / "set" / "blowfish_te" / "strategies", platform
    monkeypatch.setattr(store_module, "sys", types.SimpleNamespace(platform="darwin"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "set"))  # read on Linux only
    assert cache_directory() == home / "Library" / "Caches" / "blowfish_te" / "strategies"


def test_what_cannot_be_stored_or_read_is_refused_by_name():
    with pytest.raises(TypeError) as info:
        store_module.to_arrays(object())
    assert str(info.value) == "cannot store a strategy of type object"
    with pytest.raises(ValueError) as info:
        store_module.from_arrays({"kind": np.array("wavelet")}, (4,))
    assert str(info.value) == "unknown stored strategy kind 'wavelet'"


@pytest.mark.parametrize("theta", [np.full((1, 4), True), np.full((1, 4), "0.5"), np.full((1, 4), 0.5 + 0j)], ids=["bool", "str", "complex"])
def test_a_stored_theta_not_of_real_numbers_is_ignored(tmp_path, theta):
    store = StrategyStore(tmp_path, shipped=False)
    np.savez(tmp_path / "p.npz", kind=np.array("p-identity"), theta=theta)
    np.savez(tmp_path / "k.npz", kind=np.array("kronecker"), theta_0=theta[:, :2], theta_1=theta[:, :2])
    assert store.load("p", (4,)) is None and store.load("k", (2, 2)) is None
    np.savez(tmp_path / "i.npz", kind=np.array("p-identity"), theta=np.ones((1, 4), dtype=np.int32))  # integers are numbers
    assert store.load("i", (4,)).theta.dtype == np.float64


def test_the_shipped_files_come_first_and_a_file_that_fails_is_passed_over(monkeypatch, tmp_path):
    shipped, own = tmp_path / "shipped", tmp_path / "own"
    shipped.mkdir()
    monkeypatch.setattr(store_module, "shipped_directory", lambda: shipped)
    store = StrategyStore(own)
    store.save("k", PIdentityStrategy(np.full((1, 4), 0.5), (4,)))
    assert np.array_equal(store.load("k", (4,)).theta, np.full((1, 4), 0.5))  # no shipped file: the cache's
    StrategyStore(shipped).save("k", PIdentityStrategy(np.full((1, 4), 0.25), (4,)))
    assert np.array_equal(store.load("k", (4,)).theta, np.full((1, 4), 0.25))  # the shipped one first
    assert StrategyStore(own, shipped=False).load("k", (4,)).theta[0, 0] == 0.5
    (shipped / "k.npz").write_bytes(b"damaged")
    assert np.array_equal(store.load("k", (4,)).theta, np.full((1, 4), 0.5))  # then the cache's
    StrategyStore(shipped).save("k", PIdentityStrategy(np.full((1, 5), 0.25), (5,)))
    assert np.array_equal(store.load("k", (4,)).theta, np.full((1, 4), 0.5))  # a shipped file of another domain too


def test_a_save_makes_missing_folders_and_writes_through_a_tmp_file_beside_the_entry(monkeypatch, tmp_path):
    seen = []
    write = np.savez_compressed

    def watching(out, **arrays):
        seen.extend(sorted(p.name for p in folder.iterdir()))
        write(out, **arrays)

    folder = tmp_path / "a" / "b"
    monkeypatch.setattr(np, "savez_compressed", watching)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no such folder"))  # never the system's temporary folder
    StrategyStore(folder, shipped=False).save("k", IdentityStrategy((3,)))
    assert len(seen) == 1 and seen[0].startswith("tmp") and seen[0].endswith(".tmp")
    assert sorted(p.name for p in folder.iterdir()) == ["k.npz"]


def test_a_save_that_cannot_replace_the_entry_leaves_nothing(tmp_path):
    (tmp_path / "k.npz").mkdir()  # a folder in the way: the rename fails
    StrategyStore(tmp_path, shipped=False).save("k", IdentityStrategy((3,)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.npz"] and (tmp_path / "k.npz").is_dir()


def test_records_keep_numpy_numbers_as_plain_ones_and_read_back(tmp_path):
    store = StrategyStore(tmp_path, shipped=False)
    store.save_record("k", {"settings": [np.int64(4), np.float64(0.25), None, 3]})
    assert store.load_record("k") == {"settings": [4, 0.25, None, 3]}
    assert store.load_record("absent") is None and store.load_record(None) is None
    (tmp_path / "bad.json").write_text("[1, 2]")  # not a record
    assert store.load_record("bad") is None
