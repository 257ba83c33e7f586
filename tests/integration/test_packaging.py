"""The package as users install it: a built wheel, in a fresh virtual environment, outside the
repository, still finds its suites and runs one."""

import json
import pathlib
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def _run(*args, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_the_listed_packages_are_the_package_folders():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "blowfish_te").rglob("__init__.py")}
    assert set(config["packages"]) == on_disk | {"blowfish_te.suites"}
    assert config["package-dir"] == {"blowfish_te.suites": "workloads"}


@pytest.mark.slow
def test_a_wheel_in_a_fresh_environment_runs_a_named_suite(tmp_path):
    _run(sys.executable, "-m", "pip", "wheel", REPO, "--no-deps", "-q", "-w", tmp_path / "dist")
    wheel = next((tmp_path / "dist").glob("blowfish_te-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    assert "License-Expression: MIT" in metadata
    assert all(f"Programming Language :: Python :: 3.{minor}" in metadata for minor in (11, 12, 13))
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / ("Scripts" if sys.platform == "win32" else "bin") / "python"
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    # the dependencies come from this environment (a plain path: its .pth files, including an
    # editable install of the repository, are not run); blowfish_te itself only from the wheel
    (pathlib.Path(site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # --ignore-installed: where this environment holds a regular (not editable) install, pip would
    # see it through that path and skip the wheel
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "--ignore-installed", "-q", wheel)
    where = _run(python, "-c", "import blowfish_te, blowfish_te.evaluation as e; print(blowfish_te.__file__); "
                 "print(e.SUITES_DIR)", cwd=tmp_path).stdout.split()
    assert all(pathlib.Path(p).is_relative_to(env) for p in where), where
    script = python.parent / "blowfish-te"
    _run(script, "bench", "dpbench_1d_prefix", "--tiny", "--out", tmp_path / "out", "--no-plot", cwd=tmp_path)
    meta = json.loads((tmp_path / "out" / "suite.json").read_text())
    assert meta["suite"] == "dpbench_1d_prefix" and (tmp_path / "out" / "results.csv").stat().st_size > 0
    # the optimised strategies of the standard workloads, and auto's choices for them, ship inside the wheel
    listed = _run(script, "strategies", "--list", cwd=tmp_path).stdout.splitlines()
    assert len(listed) == 18 * 3 and all(line.split()[-1] == "shipped" for line in listed), listed


def test_a_source_checkout_finds_the_suites_folder(monkeypatch):
    """Without an install (the repository on sys.path only) the suites come from workloads/."""
    from blowfish_te.evaluation import suite

    def not_installed(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(suite.resources, "files", not_installed)
    assert suite._suites_dir() == REPO / "workloads"
    assert (suite._suites_dir() / "anuarbek_fig4.toml").is_file()
