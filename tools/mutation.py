"""Mutation testing of one privacy-carrying module against its own tests (mutmut 3).

Run: ``pip install mutmut`` then ``python tools/mutation.py blowfish_te/sensitivity.py [--jobs N]``.

The modules and the test files that exercise each one are listed in ``tools/mutation.toml`` (beside
this script) under ``[tests]``; mutants known to be equivalent (no test could tell them from the
original) under ``[equivalent]``, each with a one-line reason. The project-wide mutmut settings are
``[tool.mutmut]`` in ``pyproject.toml``, whose ``only_mutate`` lists the covered modules. The run
happens in a scratch copy of the repository whose ``[tool.mutmut]`` mutates this module only and
selects these test files only, so the working tree is never touched; ``--keep`` leaves the copy
(``cd`` there and ``mutmut show NAME`` to read a mutant). Prints one line per surviving mutant and a
summary row: mutants tried, caught, equivalent, surviving (and timeouts), and the time the run took.
Exits 1 when a non-equivalent mutant survives.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: the module → test files and equivalent-mutant tables
TABLES = pathlib.Path(__file__).resolve().with_name("mutation.toml")
#: mutmut's statuses of a mutant the tests detected (a hang or a crash of the tests detects it too)
DETECTED = ("killed", "caught by type check", "timeout", "segfault")


def _settings() -> tuple[dict, dict, dict]:
    """([tool.mutmut], module → test files, mutant name → reason it is equivalent)."""
    mutmut = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"].get("mutmut", {})
    ours = tomllib.loads(TABLES.read_text("utf-8"))
    return mutmut, ours.get("tests", {}), ours.get("equivalent", {})


def _module_path(name: str, listed: dict) -> str:
    path = name.replace("\\", "/")
    if not path.endswith(".py"):
        path = path.replace(".", "/") + ".py"
    if path not in listed:
        raise SystemExit(f"error: module {name!r} has no test files listed under [tests] in {TABLES.relative_to(ROOT)}; "
                         f"listed: {', '.join(sorted(listed))}")
    return path


def _toml_table(name: str, table: dict) -> str:
    """A flat TOML table of strings, numbers, booleans and lists of strings."""
    lines = [f"[{name}]"]
    for key, value in table.items():
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def _scratch_copy(module: str, tests: list[str], mutmut: dict) -> pathlib.Path:
    """A copy of the package, the tests, the benchmarks and pyproject.toml, set up to mutate ``module`` only."""
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="blowfish-te-mutation-"))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "blowfish_te", scratch / "blowfish_te", ignore=ignore)
    shutil.copytree(ROOT / "tests", scratch / "tests", ignore=ignore)
    shutil.copytree(ROOT / "benchmarks", scratch / "benchmarks", ignore=ignore)  # some tests import its scripts
    text = (ROOT / "pyproject.toml").read_text("utf-8")
    text = re.sub(r"^\[tool\.mutmut\]\n(?:(?!\[).*\n)*", "", text, flags=re.MULTILINE)  # replaced below
    settings = {**mutmut, "only_mutate": [module], "pytest_add_cli_args_test_selection": tests,
                "also_copy": [*mutmut.get("also_copy", []), "benchmarks"]}
    (scratch / "pyproject.toml").write_text(text + "\n" + _toml_table("tool.mutmut", settings), "utf-8")
    return scratch


def _statuses(scratch: pathlib.Path) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=scratch, check=True,
                         capture_output=True, text=True).stdout
    return dict(line.strip().rsplit(": ", 1) for line in out.splitlines() if ": " in line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="e.g. blowfish_te/sensitivity.py or blowfish_te.sensitivity")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants tested at once")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy and print its path")
    args = parser.parse_args()
    mutmut, listed, equivalent = _settings()
    module = _module_path(args.module, listed)
    scratch = _scratch_copy(module, listed[module], mutmut)
    start = time.perf_counter()
    try:
        run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs)], cwd=scratch,
                             capture_output=True, text=True)
        if run.returncode not in (0, 1):
            sys.stderr.write(run.stdout[-4000:] + run.stderr[-4000:])
            return run.returncode
        statuses = _statuses(scratch)
        if statuses and all(s == "not checked" for s in statuses.values()):
            sys.stderr.write(f"error: no test in {', '.join(listed[module])} calls {module}; list the test files that "
                             f"exercise it under [tests] in {TABLES.relative_to(ROOT)}\n")
            return 2
    finally:
        if args.keep:
            print(f"scratch copy: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.perf_counter() - start
    marked = {n for n in statuses if n in equivalent}
    # an equivalent mutant that times out (a cold cache can slow a test past the timeout) counts as equivalent only
    counted = [s for n, s in statuses.items() if n not in marked]
    caught = sum(s in ("killed", "caught by type check") for s in counted)
    timeouts = sum(s in ("timeout", "segfault") for s in counted)  # the mutant hangs or crashes the tests: caught
    surviving = sorted(n for n, s in statuses.items() if s not in DETECTED and n not in marked)
    for name in surviving:
        print(f"surviving: {name} ({statuses[name]})")
    for name in sorted(n for n in marked if statuses[n] in ("killed", "caught by type check")):
        print(f"listed as equivalent but caught (remove it from the list): {name}")
    for name in sorted(n for n in marked if statuses[n] in ("timeout", "segfault")):
        print(f"listed as equivalent but timed out (check it alone with MUTANT_UNDER_TEST): {name}")
    tried = len(statuses)
    rate = (caught + timeouts) / max(tried - len(marked), 1)
    print(f"| module | tried | caught | equivalent | surviving | caught of non-equivalent | time |\n|---|---|---|---|---|---|---|\n"
          f"| {module} | {tried} | {caught + timeouts} | {len(marked)} | {len(surviving)} | {100 * rate:.0f} % | {seconds:.0f} s |")
    return 1 if surviving else 0


if __name__ == "__main__":
    raise SystemExit(main())
