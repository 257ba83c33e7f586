import numpy as np
import pytest

from blowfish_te import datasets


def test_synthetic_histogram_is_seeded_and_complete():
    x = datasets.synthetic(100, 5000, rng=3)
    assert x.shape == (100,) and x.dtype == np.int64 and x.sum() == 5000 and (x >= 0).all()
    assert np.array_equal(x, datasets.synthetic(100, 5000, rng=3))
    assert not np.array_equal(x, datasets.synthetic(100, 5000, rng=4))
    assert x[35] > x[5] and x[70] > x[90]  # the two peaks


def test_synthetic_rejects_bad_sizes():
    with pytest.raises(ValueError, match="k"):
        datasets.synthetic(0, 10)
    with pytest.raises(ValueError, match="n"):
        datasets.synthetic(10, -1)


def test_load_reads_dpbench_files_by_name(tmp_path, monkeypatch):
    (tmp_path / "1D").mkdir()
    np.save(tmp_path / "1D" / "TOY.npy", np.array([3, 0, 2]))
    assert np.array_equal(datasets.load("TOY", tmp_path), [3, 0, 2])
    monkeypatch.setenv(datasets.DATA_DIR_ENV, str(tmp_path))
    assert datasets.load("TOY").sum() == 5
    with pytest.raises(ValueError, match="unknown dataset 'NOPE'.*TOY"):
        datasets.load("NOPE")
    with pytest.raises(ValueError, match="does not exist"):
        datasets.load("TOY", tmp_path / "missing")
    np.save(tmp_path / "1D" / "BAD.npy", np.array([1.5, 2]))
    with pytest.raises(ValueError, match="fractional"):
        datasets.load("BAD")


def test_load_needs_a_directory(monkeypatch):
    monkeypatch.delenv(datasets.DATA_DIR_ENV, raising=False)
    with pytest.raises(ValueError, match="BLOWFISH_TE_DATA"):
        datasets.load("HEPTH")
