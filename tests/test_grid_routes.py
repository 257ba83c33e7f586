"""Stretch, expected error of every route and the automatic choice on 2-D grids (fixture of benchmarks/cyclic_routes_2d.py)."""

import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
from cyclic_routes_2d import report  # noqa: E402

FIXTURE = json.loads((pathlib.Path(__file__).parent / "fixtures" / "grid_routes_64.json").read_text())


@pytest.mark.parametrize("expected", FIXTURE, ids=lambda r: f"grid{tuple(r['shape'])}-theta{r['theta']}")
def test_grid_routes_match_the_fixture(expected):
    got = report(expected["shape"][0], expected["theta"])
    assert got["stretch"] == expected["stretch"]
    assert got["chosen"] == expected["chosen"]
    for mechanism, routes in expected["routes"].items():
        assert list(got["routes"][mechanism]) == list(routes)  # same ranking
        for label, mse in routes.items():
            assert got["routes"][mechanism][label] == pytest.approx(mse, rel=1e-9)
    # the exact route wins on grids: every spanning tree of a grid has stretch of order k
    assert all(v == "exact" for v in got["chosen"].values())
    assert got["stretch"]["stars"] == 2 and min(v for n, v in got["stretch"].items() if n != "stars") >= 32
