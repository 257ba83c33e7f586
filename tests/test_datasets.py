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
