"""Mechanisms from other packages: registered through the ``blowfish_te.mechanisms`` entry points
and usable by name in ``answer``, suites and the CLI; the registry's own rules."""

import importlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

import blowfish_te as bt
from blowfish_te import policies
from blowfish_te import workloads as wl
from blowfish_te.audit import check_mechanism
from blowfish_te.cli import main
from blowfish_te.errors import ContractError
from blowfish_te.evaluation import parse_suite
from blowfish_te.mechanisms import MECHANISMS, Identity, Mechanism, mechanism_class

PLUGIN = '''
from blowfish_te.mechanisms import LinearMechanism
from blowfish_te.strategies import GeneralStrategy
from blowfish_te import workloads


class PairsAndCells(LinearMechanism):
    """Every cell and every pair of neighbouring cells, answered by least squares."""

    name = "demo_pairs_and_cells"

    def strategy(self, workload):
        k = workload.size
        lo = list(range(k)) + list(range(0, k - 1, 2))
        hi = list(range(k)) + list(range(1, k, 2))
        return GeneralStrategy(workloads.ranges(k, lo, hi))
'''


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    """A tiny distribution as an installer lays it out: the module and its dist-info metadata
    with the entry point."""
    (tmp_path / "demo_plugin.py").write_text(textwrap.dedent(PLUGIN))
    info = tmp_path / "demo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[blowfish_te.mechanisms]\ndemo_pairs_and_cells = demo_plugin:PairsAndCells\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield "demo_pairs_and_cells"
    MECHANISMS.pop("demo_pairs_and_cells", None)
    sys.modules.pop("demo_plugin", None)


def test_an_installed_plugin_works_by_name_everywhere(installed_plugin, tmp_path):
    name = installed_plugin
    assert name not in MECHANISMS and "demo_plugin" not in sys.modules  # found only when asked for
    x = np.arange(16) % 4
    release = bt.answer(wl.prefix(16), x, policies.line(16), 1.0, name, rng=0)
    assert release.mechanism == name and release.expected_mse > 0
    assert MECHANISMS[name].__module__ == "demo_plugin"
    suite = parse_suite({
        "name": "plugin", "description": "d", "epsilons": [1.0], "policies": ["line"], "trials": 1,
        "data": {"datasets": ["synthetic-1d"], "domain": 16}, "workload": {"kind": "prefix"}, "mechanisms": [name],
    })
    assert suite.mechanisms[0].build().name == name
    histogram = tmp_path / "x.npy"
    np.save(histogram, x)
    result = CliRunner().invoke(main, ["run", str(histogram), "--epsilon", "1", "--mechanism", name, "--seed", "0"])
    assert result.exit_code == 0, result.output
    assert f'"mechanism": "{name}"' in result.output


def test_a_broken_entry_point_names_itself(tmp_path, monkeypatch):
    info = tmp_path / "broken_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[blowfish_te.mechanisms]\nbroken_demo = no_such_module:Thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with pytest.raises(ImportError, match="plug-in mechanism 'broken_demo' .*no_such_module"):
        mechanism_class("broken_demo")


def test_classes_register_when_defined_and_names_are_unique():
    assert mechanism_class("identity") is Identity and "partition_then_transform" in MECHANISMS

    class Local(Mechanism):  # defined inside a function: not registered
        name = "local_demo"

        def run(self, workload, x, epsilon, rng=None):
            return workload @ x

    assert "local_demo" not in MECHANISMS
    with pytest.raises(TypeError, match="'identity' .* already taken by blowfish_te.mechanisms.laplace.Identity"):
        type("Impostor", (Mechanism,), {"name": "identity", "__qualname__": "Impostor", "run": Local.run})
    with pytest.raises(ValueError, match="unknown mechanism 'nope'; known mechanisms: adaptive, agrid, ahp, auto, dawa"):
        mechanism_class("nope")


def test_parameters_come_from_the_constructor_and_drive_repr():
    from blowfish_te.mechanisms import PartitionThenTransform

    for cls in MECHANISMS.values():
        mechanism = cls()
        params = mechanism.get_params()
        assert cls(**params).get_params() == params
        assert repr(mechanism) == f"{cls.__name__}(" + ", ".join(f"{k}={v!r}" for k, v in params.items()) + ")"
    assert PartitionThenTransform(epsilon_split=0.5).get_params() == {"partition": "dawa", "epsilon_split": 0.5, "estimator": None,
                                                                      "select": True}
    assert repr(bt.mechanisms.HB(branching=4)) == "HB(branching=4, root=False)"


#: Quicker settings for the contract check of slow defaults (the contract does not depend on them).
QUICK = {"mwem": {"rounds": 2, "updates": 10}, "optimized": {"restarts": 1, "maxiter": 20}}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_every_registered_mechanism_keeps_the_contract(name):
    mechanism = mechanism_class(name)(**QUICK.get(name, {}))
    assert check_mechanism(mechanism, runs=200).passed


def test_the_contract_catches_what_it_promises():
    class IgnoresTheSeed(Mechanism):
        name = "ignores_the_seed"

        def run(self, workload, x, epsilon, rng=None):
            return workload @ x + np.random.default_rng(0).laplace(size=workload.num_queries) / epsilon

    with pytest.raises(ContractError, match="two seeds gave the same release"):
        check_mechanism(IgnoresTheSeed(), runs=200)

    class TooLittleNoise(Mechanism):
        name = "too_little_noise"

        def __init__(self, shrink: float = 0.2):
            self.shrink = shrink

        def run(self, workload, x, epsilon, rng=None):
            return workload @ x + np.random.default_rng(rng).laplace(size=workload.num_queries) * self.shrink / epsilon

    with pytest.raises(ContractError, match="audit found a privacy violation"):
        check_mechanism(TooLittleNoise(), runs=400)

    class HidesItsParameter(Mechanism):
        name = "hides_its_parameter"

        def __init__(self, width: int = 3):
            self._w = width

        def run(self, workload, x, epsilon, rng=None):
            return workload @ x

    with pytest.raises(ContractError, match="store each __init__ argument under its own name"):
        check_mechanism(HidesItsParameter())


def test_every_library_mechanism_is_found_by_name_in_a_fresh_process():
    """The lazy table of library mechanisms names each registered class's module: a lookup by
    name, before anything listed the registry, finds it."""
    from blowfish_te import mechanisms

    names = {name: cls.__module__ for name, cls in mechanisms.MECHANISMS.items() if cls.__module__.startswith("blowfish_te.")}
    assert {name: f"blowfish_te.mechanisms.{module}" for name, module in mechanisms._NAMES.items()} == names
    script = ("import sys; from blowfish_te.mechanisms import mechanism_class; "
              "print(all(mechanism_class(n).name == n for n in sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr


def test_one_table_generates_the_exports_the_registry_names_and_the_stub():
    """LIBRARY (name → module:Class) is where a library mechanism is added: each entry is the
    class registered under that name, the package exports it lazily and lists it in __all__, and
    the type stub imports exactly the package's public names."""
    import ast
    import importlib
    import pathlib

    from blowfish_te import mechanisms

    for name, entry in mechanisms.LIBRARY.items():
        module, cls = entry.split(":")
        assert mechanisms.mechanism_class(name) is getattr(importlib.import_module(f"blowfish_te.mechanisms.{module}"), cls)
        assert cls in mechanisms.__all__ and getattr(mechanisms, cls) is mechanisms.mechanism_class(name)
    stub = ast.parse((pathlib.Path(mechanisms.__file__).with_suffix(".pyi")).read_text())
    imported = {alias.asname for node in stub.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    declared = {node.target.id for node in stub.body if isinstance(node, ast.AnnAssign)}
    assert imported | declared == set(mechanisms.__all__)
    assert len(mechanisms.__all__) == len(set(mechanisms.__all__))
