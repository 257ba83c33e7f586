"""What a fresh interpreter loads: ``import blowfish_te`` and a first Identity release load none of
the heavy optional dependencies, and ``blowfish-te --version`` loads neither the command line nor
numpy. Each case runs in its own interpreter, since this process has loaded everything."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

import pytest

import blowfish_te

pytestmark = pytest.mark.core

#: Modules a first Identity release has no use for: each costs 0.1–1 s to import.
HEAVY = ("scipy.optimize", "cvxpy", "networkx", "duckdb", "pyarrow", "click", "matplotlib", "pandas", "sklearn")

#: Loaded by scipy.sparse.linalg (and scipy.sparse.csgraph, which imports it): ~45 ms, a quarter of
#: ``import numpy, scipy.sparse``; workloads are linear maps of their own, so a release under a
#: line or unbounded policy never needs them.
LINALG = ("scipy.sparse.linalg", "scipy.linalg", "scipy.sparse.csgraph")


def _loaded_after(code: str) -> set[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(name for name in HEAVY if name in modules)


def test_importing_the_package_loads_no_heavy_module():
    loaded = _loaded_after("import blowfish_te")
    assert _heavy(loaded) == []
    assert "blowfish_te.mechanisms" not in loaded  # subpackages load on first use


@pytest.mark.parametrize("policy", ["unbounded((16,))", "line(16)"])
def test_a_first_identity_release_loads_no_heavy_module(policy):
    loaded = _loaded_after(
        "import numpy as np\nimport blowfish_te as bt\n"
        f"bt.answer(bt.workloads.identity(16), np.arange(16), bt.policies.{policy}, 1.0, 'identity', rng=0)"
    )
    assert "blowfish_te.release" in loaded  # the release did run
    assert _heavy(loaded) == []
    baseline = _loaded_after("import numpy, scipy.sparse")  # scipy < 1.13 loads scipy.sparse.linalg itself
    assert sorted(name for name in LINALG if name in loaded and name not in baseline) == []


def test_the_version_loads_neither_the_command_line_nor_numpy():
    script = ("import sys\nfrom blowfish_te.console import entry\nsys.argv = ['blowfish-te'] + sys.argv[1:]\n"
              "try:\n    entry()\nexcept SystemExit:\n    pass\nimport json\nprint(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", script, "--version"], capture_output=True, text=True, check=True).stdout
    first, last = out.splitlines()[0], out.splitlines()[-1]
    assert first == f"blowfish-te, version {blowfish_te.__version__}"
    loaded = set(json.loads(last))
    assert {"click", "numpy", "blowfish_te.cli"}.isdisjoint(loaded)


def test_the_fast_version_line_is_the_command_line_s():
    from click.testing import CliRunner

    from blowfish_te.cli import main

    script = "import sys\nfrom blowfish_te.console import entry\nsys.argv = ['blowfish-te', '--version']\nentry()"
    fast = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert CliRunner().invoke(main, ["--version"]).output == fast


def test_the_package_version_is_the_installed_one():
    assert blowfish_te.__version__ == metadata.version("blowfish_te")
