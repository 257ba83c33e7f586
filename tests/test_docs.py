"""The documentation site: every tutorial runs as written, the site builds with warnings as errors,
and the tables copied into the pages are what the library prints today."""

import itertools
import os
import pathlib
import re
import shlex
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


def _commands(page: pathlib.Path) -> list[list[str]]:
    """The page's command lines (indented ``blowfish-te ...``), up to the first that names a
    folder the reader supplies (PATH/TO/...): the later ones read its results."""
    lines = re.findall(r"^    blowfish-te (.*)$", page.read_text(), flags=re.M)
    runnable = list(itertools.takewhile(lambda line: "PATH/TO" not in line, lines))
    return [shlex.split(line) for line in runnable]


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs(page, tmp_path, monkeypatch):
    """Every Python block in order, then every command line, in one folder: the commands use the
    files the blocks wrote."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"tutorial_{page.stem.replace('-', '_')}"}
    try:
        for block in _blocks(page):
            exec(compile(block, str(page), "exec"), namespace)
    finally:  # a tutorial's mechanism registers itself: not for the other tests (the library's stay)
        for name in [name for name, cls in MECHANISMS.items() if not cls.__module__.startswith("blowfish_te.")]:
            del MECHANISMS[name]
    for args in _commands(page):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, f"blowfish-te {shlex.join(args)}: {result.output}"


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


def _reproductions_script():
    sys.path.insert(0, str(DOCS / "scripts"))
    try:
        import reproductions
    finally:
        sys.path.pop(0)
    return reproductions


def test_the_reproductions_script_writes_tables_figures_and_times_between_the_markers(tmp_path):
    pytest.importorskip("matplotlib")
    from blowfish_te.evaluation import SUITES_DIR, load_suite, run_suite

    script = _reproductions_script()
    results = tmp_path / "results"
    for name in ("he14_fig1_kmeans", "anuarbek_fig4"):
        run_suite(load_suite(SUITES_DIR / f"{name}.toml", tiny=True), results / name)
    docs = tmp_path / "docs"
    docs.mkdir()
    for page in ("reproductions.md", "mechanisms.md"):
        shutil.copy(DOCS / page, docs / page)
    before = (docs / "reproductions.md").read_text()
    assert script.main([str(results)], docs=docs) == ["he14_fig1_kmeans", "anuarbek_fig4"]
    after = (docs / "reproductions.md").read_text()
    for name in ("he14_fig1_kmeans", "anuarbek_fig4"):
        block = after.split(f"<!-- generated:{name} -->")[1].split(f"<!-- /generated:{name} -->")[0]
        assert "releases," in block and "wall-clock (jobs=1" in block and "| mechanism |" in block.replace("| dataset ", "")
        assert f"(img/reproductions/{name}.png)" in block and (docs / "img" / "reproductions" / f"{name}.png").stat().st_size > 0
    assert after.split("<!-- generated:")[0] == before.split("<!-- generated:")[0]  # text outside the markers kept
    kept = "<!-- generated:dpbench_2d_ranges -->"  # no results: its block is left as it was
    assert before.split(kept)[1].split("<!-- /generated")[0] == after.split(kept)[1].split("<!-- /generated")[0]
    script.main([str(results)], docs=docs)
    assert (docs / "reproductions.md").read_text() == after  # a rerun changes nothing


def test_the_committed_pages_show_every_suite_and_mechanism_measured():
    """Every shipped suite has its generated section on the reproductions page, with the figure it
    names committed beside it, and the mechanisms page carries its measured tables."""
    from blowfish_te.evaluation import SUITES_DIR

    script = _reproductions_script()
    pages = {page: (DOCS / page).read_text() for page in ("reproductions.md", "mechanisms.md")}
    suites = sorted(path.stem for path in SUITES_DIR.glob("*.toml"))
    assert suites and set(suites) <= set(script.REPORTS)
    blocks = {name: pages["reproductions.md"].split(f"<!-- generated:{name} -->")[1].split(f"<!-- /generated:{name} -->")[0]
              for name in suites}
    blocks["measured"] = pages["mechanisms.md"].split("<!-- generated:measured -->")[1].split("<!-- /generated:measured -->")[0]
    for name, block in blocks.items():
        assert "Not run yet" not in block and "| mechanism |" in block.replace("| dataset ", ""), name
        for image in re.findall(r"\]\((img/[^)]+)\)", block):
            assert (DOCS / image).stat().st_size > 0, image
    for name in suites:
        assert "wall-clock" in blocks[name] and f"(img/reproductions/{name}.png)" in blocks[name], name
