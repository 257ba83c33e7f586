"""Write the measured parts of the documentation from suite results.

    blowfish-te bench NAME --data-dir PATH/TO/dpbench --out RESULTS/NAME     # for each suite
    python docs/scripts/reproductions.py RESULTS

For every shipped suite with results in ``RESULTS/NAME``, this writes, between the markers
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` of ``docs/reproductions.md``: the
command, the number of releases, the wall-clock time recorded by the runner, the headline tables
and the figure (copied to ``docs/img/reproductions/``). The measured-error tables of
``docs/mechanisms.md`` go between ``<!-- generated:measured -->`` markers. Text outside the
markers is left alone; suites without results keep their previous block.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
from dataclasses import dataclass

from blowfish_te.evaluation.plots import plot_results
from blowfish_te.evaluation.runner import read_rows
from blowfish_te.evaluation.summary import pivot_table, summarize

DOCS = pathlib.Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Table:
    """One pivot of a suite's summary (see ``blowfish-te table``), with a caption."""

    caption: str
    value: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    where: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Report:
    """What the documentation shows of a suite: its headline tables and one figure (a file stem
    that ``plot_results`` writes)."""

    tables: tuple[Table, ...]
    figure: str
    figure_metric: str


REPORTS = {
    "he14_fig2_adult": Report(
        (Table("Per-query MSE of 10,000 random ranges on ADULT, mean of {trials} trials", "mse", ("mechanism", "policy"), ("epsilon",),
               (("epsilon", "0.1"),)),
         Table("The same against ε, θ = 100", "mse", ("mechanism", "policy"), ("epsilon",), (("policy", "threshold:100"),))),
        "ADULT_mse_vs_theta", "mse"),
    "he14_fig1_kmeans": Report(
        (Table("k-means objective over the non-private one, mean of {trials} trials", "objective_ratio", ("dataset", "mechanism", "policy"),
               ("epsilon",)),),
        "skin-like_objective_ratio_vs_epsilon", "objective_ratio"),
    "anuarbek_fig4": Report(
        (Table("Per-query MSE of the histogram workload, mean of {trials} trials", "mse", ("dataset", "mechanism"), ("epsilon",)),),
        "HEPTH_mse_vs_epsilon", "mse"),
    "dpbench_1d_prefix": Report(
        (Table("Scaled L2 error of all prefixes under unbounded DP, mean over {datasets} datasets", "scaled_l2", ("mechanism",),
               ("scale",), (("policy", "unbounded"),)),
         Table("The same under each policy at scale 10^7", "scaled_l2", ("mechanism",), ("policy",), (("scale", "10000000"),))),
        "HEPTH_scaled_l2_vs_scale", "scaled_l2"),
    "dpbench_1d_scales": Report(
        (Table("Per-query MSE of the histogram workload under unbounded DP, mean of {trials} trials", "mse", ("dataset", "mechanism"),
               ("scale", "epsilon"), (("policy", "unbounded"),)),
         Table("The same under the line policy", "mse", ("dataset", "mechanism"), ("scale", "epsilon"), (("policy", "line"),))),
        "HEPTH_mse_vs_epsilon", "mse"),
    "dpbench_2d_ranges": Report(
        (Table("Scaled L2 error of 2000 DPBench random rectangles at 128 × 128, mean over {datasets} datasets", "scaled_l2", ("mechanism",),
               ("policy", "scale"), (("domain", "128x128"),)),
         Table("The same at 256 × 256", "scaled_l2", ("mechanism",), ("policy", "scale"), (("domain", "256x256"),))),
        "SF-CABS-E_128x128_scaled_l2_vs_scale", "scaled_l2"),
    "census_marginals": Report(
        (Table("Per-query MSE of all 2-way marginals of census-6d, mean of {trials} trials", "mse", ("mechanism", "policy"),
               ("epsilon",)),),
        "census-6d_mse_vs_epsilon", "mse"),
}

#: The tables of measured error on the mechanisms page: (suite, caption, filter).
MEASURED = (
    ("dpbench_1d_prefix", "1-D, all prefixes of 4096 cells, unbounded DP, ε = 0.1, scale 10^7: scaled L2 error per dataset",
     (("policy", "unbounded"), ("scale", "10000000"))),
    ("dpbench_2d_ranges", "2-D, 2000 DPBench random rectangles on 128 × 128, unbounded DP, ε = 0.1, scale 10^6: scaled L2 error per dataset",
     (("policy", "unbounded"), ("domain", "128x128"), ("scale", "1000000"))),
)


def _replace(page: pathlib.Path, name: str, text: str) -> None:
    start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    content = page.read_text()
    if start not in content or end not in content:
        raise ValueError(f"{page.name} has no {start} ... {end} block")
    before, rest = content.split(start, 1)
    after = rest.split(end, 1)[1]
    page.write_text(f"{before}{start}\n{text.strip()}\n{end}{after}")


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _pivot(summary: list[dict], value: str, rows, columns, where) -> str:
    """The pivot table, or a line saying that no result matches (a run of other datasets or scales)."""
    try:
        return pivot_table(summary, value, rows, columns, dict(where)).strip()
    except ValueError as err:
        if not str(err).startswith("no configuration"):
            raise
        return f"_No results match {', '.join(f'{k} = {v}' for k, v in where)}._"


def _figure(results: pathlib.Path, report: Report) -> pathlib.Path:
    """The report's figure, drawn if the run did not draw it; the first figure of its metric
    when the run holds other datasets than the report names."""
    figure = results / f"{report.figure}.png"
    if figure.exists():
        return figure
    drawn = [p for p in plot_results(results, report.figure_metric) if p.suffix == ".png"]
    return figure if figure.exists() else drawn[0]


def suite_block(name: str, results: pathlib.Path, docs: pathlib.Path) -> str:
    """The markdown of one suite's results, its figure copied under ``docs/img/reproductions``."""
    report = REPORTS[name]
    rows = read_rows(results / "results.csv")
    meta = json.loads((results / "suite.json").read_text())
    summary = summarize(rows)
    ok = sum(r["status"] == "ok" for r in rows)
    wall = (f"{_minutes(meta['wall_s'])} wall-clock ({', '.join(meta.get('workers', []))}, {meta.get('cpus', '?')} cores)"
            if "wall_s" in meta else "wall-clock time not recorded")
    counts = {"trials": len({r["trial"] for r in rows}), "datasets": len({r["dataset"] for r in rows})}
    lines = [f"`blowfish-te bench {name} --data-dir PATH/TO/dpbench`: {ok:,} releases"
             + (f" ({len(rows) - ok} failed)" if ok < len(rows) else "") + f", {wall}.", ""]
    for table in report.tables:
        lines += [f"**{table.caption.format(**counts)}**", "", _pivot(summary, table.value, table.rows, table.columns, table.where), ""]
    figure = _figure(results, report)
    target = docs / "img" / "reproductions" / f"{name}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(figure, target)
    lines.append(f"![{name}: {figure.stem.replace('_', ' ')}](img/reproductions/{name}.png)")
    return "\n".join(lines)


def measured_block(results: pathlib.Path) -> str:
    parts = []
    for name, caption, where in MEASURED:
        path = results / name / "results.csv"
        if not path.exists():
            continue
        parts += [f"**{caption}** (from the `{name}` suite)", "",
                  _pivot(summarize(read_rows(path)), "scaled_l2", ("mechanism",), ("dataset",), where), ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None, docs: pathlib.Path = DOCS) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=pathlib.Path, help="folder holding one results folder per suite")
    args = parser.parse_args(argv)
    written = []
    for name in REPORTS:
        folder = args.results / name
        if (folder / "results.csv").exists():
            _replace(docs / "reproductions.md", name, suite_block(name, folder, docs))
            written.append(name)
    measured = measured_block(args.results)
    if measured:
        _replace(docs / "mechanisms.md", "measured", measured)
        written.append("measured")
    print("wrote", ", ".join(written) or "nothing: no suite results found")
    return written


if __name__ == "__main__":
    main()
