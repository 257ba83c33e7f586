"""The documentation site: every tutorial runs as written, the site builds with warnings as errors,
and the tables copied into the pages are what the library prints today."""

import contextlib
import html
import io
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

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TUTORIALS = sorted((DOCS / "tutorials").glob("*.md"))


def _blocks(page: pathlib.Path) -> list[str]:
    return re.findall(r"```python[^\n]*\n(.*?)```", page.read_text(), flags=re.S)


def test_every_tutorial_is_in_the_site_and_on_the_home_page_and_has_code():
    config = (ROOT / "mkdocs.yml").read_text()
    home = (DOCS / "index.md").read_text()
    assert len(TUTORIALS) == 6
    for page in TUTORIALS:
        assert f"tutorials/{page.name}" in config and _blocks(page), page.name
        assert f"(tutorials/{page.name})" in home, f"the home page does not link {page.name}"


def _commands(page: pathlib.Path) -> list[list[str]]:
    """The page's command lines (indented ``blowfish-te ...``), up to the first that names a
    folder the reader supplies (PATH/TO/...): the later ones read its results."""
    lines = re.findall(r"^    blowfish-te (.*)$", page.read_text(), flags=re.M)
    runnable = list(itertools.takewhile(lambda line: "PATH/TO" not in line, lines))
    return [shlex.split(line) for line in runnable]


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
    """The site, built once with warnings as errors (tutorials executed by markdown-exec)."""
    mkdocs = shutil.which("mkdocs", path=os.path.dirname(sys.executable)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[test]' installs it)")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(out)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _text(page: pathlib.Path) -> str:
    """A built page's text, tags removed and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text("utf-8")))


@pytest.mark.slow
def test_the_site_builds_and_docstring_references_are_links(site):
    api = (site / "api" / "index.html").read_text("utf-8")
    assert api.count("blowfish_te.release.answer") >= 1
    assert 'class="autorefs autorefs-internal" title="line(k) (blowfish_te.policies.line)"' in api
    written = ["people.csv", "dirty.csv", "old.csv", "ages.csv", "ledger.db", "policies.svg", "census.csv"]  # by the tutorials' code
    assert not [name for name in written if (ROOT / name).exists() or (DOCS / name).exists()]


@pytest.mark.slow
def test_no_page_shows_a_raw_sphinx_role(site):
    roles = re.compile(r":(?:py:)?(?:func|class|meth|data|mod|attr|exc|obj|const):`?")
    found = {str(page.relative_to(site)): roles.findall(_text(page)) for page in site.rglob("*.html")}
    assert not {page: hits for page, hits in found.items() if hits}


def test_code_blocks_wrap_instead_of_being_cut(site):
    css = (site / "stylesheets" / "extra.css").read_text()
    assert re.search(r"pre > code \{[^}]*white-space: pre-wrap", css)
    for page in site.rglob("index.html"):
        assert "stylesheets/extra.css" in page.read_text("utf-8"), page
    home = _text(site / "index.html")
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && blowfish-te demo" in home


def _untimed(text: str) -> str:
    """Text with run times ("2.2 s") blanked: they differ between the build and the test."""
    return re.sub(r"\d+(\.\d+)? s\b", "… s", text)


@pytest.mark.slow
@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_every_tutorial_page_shows_what_its_code_prints(page, site, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"tutorial_{page.stem.replace('-', '_')}"}
    built = _untimed(_text(site / "tutorials" / page.stem / "index.html"))
    outputs = []
    try:
        for block in _blocks(page):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(block, str(page), "exec"), namespace)
            outputs.append(printed.getvalue().strip())
    finally:
        for name in [name for name, cls in MECHANISMS.items() if not cls.__module__.startswith("blowfish_te.")]:
            del MECHANISMS[name]
    empty = [i + 1 for i, out in enumerate(outputs) if not out]
    assert not empty, f"{page.name}: code blocks {empty} print nothing, so the page shows an empty output box"
    for out in filter(None, outputs):
        if out.startswith("<svg"):
            assert "<svg" in (site / "tutorials" / page.stem / "index.html").read_text("utf-8")
        else:
            first = _untimed(out.splitlines()[0].strip())
            assert first in built, f"{page.name}: {first!r} is not on the page"


def _reproductions_script():
    sys.path.insert(0, str(DOCS / "scripts"))
    try:
        import reproductions
    finally:
        sys.path.pop(0)
    return reproductions


@pytest.mark.slow
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


def test_code_wraps_at_spaces_never_inside_a_word():
    css = "".join(path.read_text() for path in (DOCS / "stylesheets").glob("*.css"))
    rule = re.search(r"pre > code \{(.*?)\}", css, flags=re.S).group(1)
    assert "white-space: pre-wrap" in rule and "overflow-x: auto" in rule
    assert "anywhere" not in rule and "break-all" not in rule
