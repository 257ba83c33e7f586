"""The documentation site: every tutorial runs as written, the site builds with warnings as errors,
and the tables copied into the pages are what the library prints today."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from blowfish_te.cli import main
from blowfish_te.mechanisms import MECHANISMS

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TUTORIALS = sorted((DOCS / "tutorials").glob("*.md"))


def _blocks(page: pathlib.Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def test_every_tutorial_is_in_the_site_and_has_code():
    config = (ROOT / "mkdocs.yml").read_text()
    assert len(TUTORIALS) == 5
    for page in TUTORIALS:
        assert f"tutorials/{page.name}" in config and _blocks(page), page.name


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    registered = dict(MECHANISMS)  # a tutorial's mechanism registers itself: not for the other tests
    namespace: dict = {"__name__": f"tutorial_{page.stem.replace('-', '_')}"}
    try:
        for block in _blocks(page):
            exec(compile(block, str(page), "exec"), namespace)
    finally:
        MECHANISMS.clear()
        MECHANISMS.update(registered)


def test_the_concepts_table_is_what_explore_prints():
    result = CliRunner().invoke(main, ["explore", "--shape", "1024", "--epsilon", "0.5"])
    assert result.exit_code == 0
    table = [line for line in result.output.splitlines() if line.startswith("|")][:10]
    page = (DOCS / "concepts.md").read_text()
    assert "\n".join(table) in page


def test_the_policy_pictures_script_draws_every_panel(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(DOCS / "scripts"))
    try:
        import policy_pictures
    finally:
        sys.path.pop(0)
    monkeypatch.setattr(policy_pictures, "OUT", tmp_path / "policies.svg")
    policy_pictures.main()
    svg = (tmp_path / "policies.svg").read_text()
    assert svg.count("<g id=\"axes_") == 6 and (DOCS / "img" / "policies.svg").exists()


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    mkdocs = shutil.which("mkdocs", path=os.path.dirname(sys.executable)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[test]' installs it)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").read_text().count("blowfish_te.release.answer") >= 1
