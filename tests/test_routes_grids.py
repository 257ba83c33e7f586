"""Stretch, expected error of every route and the automatic choice on 2-D grids (fixture of benchmarks/cyclic_routes_2d.py)."""

import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
from cyclic_routes_2d import report  # noqa: E402

FIXTURE = json.loads((pathlib.Path(__file__).parent / "fixtures" / "grid_routes_64.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("expected", FIXTURE, ids=lambda r: f"grid{tuple(r['shape'])}-theta{r['theta']}")
def test_grid_routes_match_the_fixture(expected):
    got = report(expected["shape"][0], expected["theta"])
    assert got["stretch"] == expected["stretch"]
    assert got["chosen"] == expected["chosen"]
    for mechanism, routes in expected["routes"].items():
        evaluated, floors = got["routes"][mechanism], got["floors"][mechanism]
        assert set(evaluated) | set(floors) == set(routes)
        assert list(evaluated) == [label for label in routes if label in evaluated]  # same ranking
        for label, mse in evaluated.items():
            assert mse == pytest.approx(routes[label], rel=1e-9)
        # a route skipped by its floor: the floor is below its true error and above the chosen one's
        for label, floor in floors.items():
            assert min(evaluated.values()) < floor <= routes[label] * (1 + 1e-9)
    # the exact route or the stars tree (stretch 2) wins on grids: every other spanning tree of a
    # grid has stretch of order k (with DPBench's large rectangles the identity gains a little
    # from the stars tree's transform: 8,383 against 8,530 per query)
    assert all(v == "exact" or v.startswith("transform[stars(") for v in got["chosen"].values())
    assert got["stretch"]["stars"] == 2 and min(v for n, v in got["stretch"].items() if n != "stars") >= 32
