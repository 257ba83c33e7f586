import pathlib
import re

README = (pathlib.Path(__file__).parents[2] / "README.md").read_text()


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["release"].expected_mse == 2 / 0.5**2 * 99 / 100
    assert namespace["r"].tree == "hub(100, theta=16)" and namespace["r"].stretch == 3


def test_readme_commands_match_ci():
    ci = (pathlib.Path(__file__).parents[2] / ".ci" / "run").read_text()
    test_command = ('python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && ruff check . && mypy'
                    ' && python -m pytest -q')
    assert test_command in README and test_command in ci
    assert "pip install -e . && blowfish-te demo" in README


def test_the_quick_subset_is_documented_and_its_marker_registered():
    import tomllib

    config = tomllib.loads((pathlib.Path(__file__).parents[2] / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert 'python -m pytest -q -m "not slow"' in README
    assert any(m.startswith("slow:") for m in config["markers"]) and "--strict-markers" in config["addopts"]


def test_the_pre_commit_ruff_is_in_the_range_ci_installs():
    import re as regex

    from packaging.specifiers import SpecifierSet

    root = pathlib.Path(__file__).parents[2]
    config = (root / ".pre-commit-config.yaml").read_text()
    assert "astral-sh/ruff-pre-commit" in config and "id: ruff" in config
    rev = regex.search(r"rev: v([0-9.]+)", config).group(1)
    allowed = regex.search(r'"ruff([^"]*)"', (root / "pyproject.toml").read_text()).group(1)
    assert rev in SpecifierSet(allowed), f"pre-commit runs ruff {rev}, CI installs ruff{allowed}"


def test_the_type_checker_ci_runs_is_installed_and_checks_existing_modules():
    """CI's bare ``mypy`` reads its modules from pyproject.toml: they exist, and mypy is a test extra."""
    import tomllib

    root = pathlib.Path(__file__).parents[2]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    files = config["tool"]["mypy"]["files"]
    assert "blowfish_te/routes.py" in files and all((root / f).is_file() for f in files)
    assert config["tool"]["mypy"]["disallow_untyped_defs"] is True
    assert any(r.startswith("mypy") for r in config["project"]["optional-dependencies"]["test"])
