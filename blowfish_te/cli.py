"""The ``blowfish-te`` command line."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import pathlib
import sys

import click
import numpy as np

from . import datasets, policies, workloads
from .errors import SpecError
from .release import answer


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="blowfish_te")
def main() -> None:
    """blowfish_te: policy-aware differential privacy (Blowfish) through transformational equivalence."""


@main.command()
@click.option("--epsilon", default=0.5, show_default=True, type=click.FloatRange(min=0, min_open=True), help="Privacy budget ε.")
@click.option("--k", "k", default=100, show_default=True, type=click.IntRange(min=2), help="Number of ordered cells (ages 0..k-1).")
@click.option("--n", "n", default=10_000, show_default=True, type=click.IntRange(min=0), help="Number of records.")
@click.option("--queries", default=1000, show_default=True, type=click.IntRange(min=1), help="Random range queries.")
@click.option("--show", default=6, show_default=True, type=click.IntRange(min=0), help="Queries to print one by one.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Seed for data, queries and noise.")
def demo(epsilon: float, k: int, n: int, queries: int, show: int, seed: int) -> None:
    """Answer random range queries on a built-in histogram under a line policy, next to DP.

    The line policy protects values one step apart (ages one year apart); bounded DP (complete
    graph) and unbounded DP protect every value, at a higher cost in error.
    """
    rng = np.random.default_rng(seed)
    x = datasets.synthetic(k, n, rng=rng)
    w = workloads.random_ranges(k, queries, rng=rng)
    truth = w @ x
    setups = [
        (policies.line(k), "identity", "Blowfish: values one step apart protected"),
        (policies.line(k), "laplace", "Blowfish, Laplace on the answers"),
        (policies.complete(k), "identity", "bounded DP (n public)"),
        (policies.unbounded(k), "identity", "unbounded DP"),
    ]
    click.echo(
        f"blowfish_te demo: {queries} random range queries on a built-in histogram of {n} records "
        f"over {k} ordered values, epsilon = {epsilon}, seed {seed}\n"
    )
    header = f"{'policy':<16} {'mechanism':<10} {'route':<10} {'expected RMSE':>14} {'measured RMSE':>14}  meaning"
    click.echo(header)
    click.echo("-" * len(header))
    releases = []
    for policy, mechanism, meaning in setups:
        rel = answer(w, x, policy, epsilon, mechanism, rng=rng)
        releases.append(rel)
        measured = float(np.sqrt(np.mean((rel.answers - truth) ** 2)))
        click.echo(
            f"{policy.name:<16} {mechanism:<10} {rel.route:<10} {np.sqrt(rel.expected_mse):>14.2f} "
            f"{measured:>14.2f}  {meaning}"
        )
    if show:
        line_rel, dp_rel = releases[0], releases[2]
        click.echo(f"\nFirst {min(show, queries)} queries: noisy answer (error)")
        click.echo(f"{'range':<12} {'true':>7}   {'line / identity':>21}   {'complete (DP) / identity':>25}")
        for i in range(min(show, queries)):
            lo, hi = int(w.lo[i, 0]), int(w.hi[i, 0])
            a, b = line_rel.answers[i], dp_rel.answers[i]
            click.echo(
                f"[{lo}, {hi}]".ljust(12)
                + f" {truth[i]:>7d}   {a:>11.1f} ({a - truth[i]:+7.1f})   {b:>15.1f} ({b - truth[i]:+7.1f})"
            )


def _fail(err: Exception) -> None:
    """One line for the user instead of a traceback."""
    raise click.ClickException(str(err).splitlines()[0] if str(err) else type(err).__name__)


def _read_histogram(path: pathlib.Path) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if path.suffix == ".csv":
        try:
            values = np.loadtxt(path, delimiter=",", ndmin=2)
        except ValueError as err:
            raise ValueError(f"{path}: a histogram CSV holds numbers only (one row per row of cells): {err}") from None
        return values[:, 0] if values.shape[1] == 1 else (values[0] if values.shape[0] == 1 else values)
    raise ValueError(f"{path}: a histogram must be a .npy or .csv file; for a file of records pass --column")


def _read_column(path: pathlib.Path, column: str) -> list:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ValueError("reading Parquet needs pyarrow: pip install 'blowfish_te[evaluation]'") from None
        table = pq.read_table(path)
        if column not in table.column_names:
            raise ValueError(f"--column {column!r} is not in {path}; columns: {', '.join(table.column_names)}")
        return table.column(column).to_pylist()
    if path.suffix != ".csv":
        raise ValueError(f"{path}: records must be a .csv or .parquet file")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or column not in reader.fieldnames:
            raise ValueError(f"--column {column!r} is not in {path}; columns: {', '.join(reader.fieldnames or [])}")
        return [row[column] for row in reader]


def records_to_histogram(values: list, lower: int, upper: int, outside: str) -> tuple[np.ndarray, int]:
    """Count integer records over the domain lower..upper (one cell per value).

    Records outside the domain are an error (``outside="error"``), or clamped to the nearest bound
    (``"clamp"``, which keeps the neighbour relation: every record still lands in one cell). Returns
    the histogram and the number of clamped records. Missing or non-integer values are always an
    error: no record is ever dropped.
    """
    if upper < lower:
        raise ValueError(f"--upper ({upper}) must be >= --lower ({lower})")
    cells = []
    for i, value in enumerate(values):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"record {i + 1}: value {value!r} is not a number (missing values are not allowed)") from None
        if not np.isfinite(number) or number != int(number):
            raise ValueError(f"record {i + 1}: value {value!r} is not an integer in the domain {lower}..{upper}")
        cells.append(int(number))
    cells = np.asarray(cells, dtype=np.int64)
    below, above = cells < lower, cells > upper
    n_out = int(below.sum() + above.sum())
    if n_out and outside == "error":
        first = int(cells[below | above][0])
        raise ValueError(
            f"{n_out} record(s) outside the domain {lower}..{upper} (first: {first}); widen --lower/--upper "
            "or pass --outside clamp to move them to the nearest bound"
        )
    clamped = np.clip(cells, lower, upper) - lower
    return np.bincount(clamped, minlength=upper - lower + 1).astype(np.int64), n_out


def _policy(spec: str, shape: tuple[int, ...]):
    try:
        return policies.from_spec(spec, shape)
    except SpecError as err:
        raise SpecError(f"--policy: {err}") from None


def _build_workload(spec: str, shape: tuple[int, ...], seed: int, ranges_file):
    if ranges_file is not None:
        bounds = np.loadtxt(ranges_file, delimiter=",", ndmin=2, dtype=np.int64)
        if bounds.shape[1] != 2:
            raise ValueError(f"--ranges {ranges_file}: one query per line, 'lo,hi' (inclusive cells)")
        if len(shape) != 1:
            raise ValueError("--ranges needs a 1-D domain")
        return workloads.ranges(shape[0], bounds[:, 0], bounds[:, 1])
    try:
        return workloads.from_spec(spec, shape, seed)
    except SpecError as err:
        raise SpecError(f"--workload: {err}") from None


@main.command()
@click.argument("data", type=click.Path(exists=True, dir_okay=False, path_type=pathlib.Path))
@click.option("--policy", "policy_spec", default="line", show_default=True,
              help="unbounded, complete, line, threshold:θ, threshold:full or grid:θ.")
@click.option("--epsilon", required=True, type=click.FloatRange(min=0, min_open=True), help="Privacy budget ε.")
@click.option("--mechanism", default="identity", show_default=True, help="A name from blowfish_te.mechanisms.MECHANISMS.")
@click.option("--workload", "workload_spec", default="identity", show_default=True,
              help="identity, prefix, all_ranges, random_ranges:M or random_rects:M.")
@click.option("--ranges", "ranges_file", type=click.Path(exists=True, dir_okay=False), help="CSV of 'lo,hi' range queries (overrides --workload).")
@click.option("--workload-seed", default=0, show_default=True, type=click.IntRange(min=0), help="Seed of random workloads.")
@click.option("--column", help="DATA is a CSV/Parquet file of records: count this column's integer values.")
@click.option("--lower", type=int, help="Smallest value of the domain (with --column).")
@click.option("--upper", type=int, help="Largest value of the domain (with --column).")
@click.option("--outside", type=click.Choice(["error", "clamp"]), default="error", show_default=True,
              help="Records outside --lower..--upper: refuse, or clamp to the nearest bound.")
@click.option("--seed", type=click.IntRange(min=0), help="Seeded fast noise, for experiments; without it the secure sampler is used.")
@click.option("--output", "output", type=click.Path(dir_okay=False, path_type=pathlib.Path), help="Write here instead of standard output.")
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
def run(data, policy_spec, epsilon, mechanism, workload_spec, ranges_file, workload_seed, column, lower, upper, outside, seed, output, fmt):
    """Answer a workload on DATA (a .npy/.csv histogram, or records with --column) privately.

    The output holds the answers with ε, the policy, the mechanism, the route, the stretch and the
    expected per-query error. Records outside the domain are never dropped: they are refused, or
    clamped with --outside clamp (the count of clamped records goes to standard error for the data
    owner; it is not private and is not part of the release).
    """
    try:
        if output is not None and not (output.parent.is_dir() and os.access(output.parent, os.W_OK)):
            raise ValueError(f"--output {output}: its folder does not exist or is not writable (checked before any noise is drawn)")
        if column is not None:
            if lower is None or upper is None:
                raise ValueError("--column needs the domain bounds --lower and --upper (they must not come from the data)")
            x, n_out = records_to_histogram(_read_column(data, column), lower, upper, outside)
            if n_out:
                click.echo(f"note: {n_out} record(s) outside {lower}..{upper} were clamped (this count is not private)", err=True)
        else:
            if lower is not None or upper is not None:
                raise ValueError("--lower/--upper apply to records (--column); a histogram's cells are its domain")
            x = _read_histogram(data)
        shape = tuple(np.shape(x))
        release = answer(_build_workload(workload_spec, shape, workload_seed, ranges_file), x, _policy(policy_spec, shape),
                         epsilon, mechanism, rng=seed)
    except (ValueError, TypeError, OSError) as err:
        _fail(err)
    fields = release.to_dict()
    with open(output, "w", newline="") if output else contextlib.nullcontext(sys.stdout) as stream:
        if fmt == "json":
            json.dump(fields, stream, indent=1)
            stream.write("\n")
        else:
            meta = {k: fields[k] for k in ("epsilon", "policy", "mechanism", "route", "tree", "stretch", "workload",
                                            "expected_mse", "noise_scale", "sampler")}
            writer = csv.writer(stream)
            writer.writerow(["query", "answer", *meta])
            for i, a in enumerate(fields["answers"]):
                writer.writerow([i, a, *meta.values()])


@main.command()
@click.argument("suite")
@click.option("--data-dir", type=click.Path(file_okay=False), help=f"DPBench folder (default ${datasets.DATA_DIR_ENV}).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=pathlib.Path), help="Results folder (default results/<suite>).")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(min=1), help="Processes.")
@click.option("--tiny", is_flag=True, help="The suite's [tiny] configuration: seconds, for CI.")
@click.option("--fresh", is_flag=True, help="Discard earlier results in the folder instead of resuming.")
@click.option("--plot/--no-plot", default=True, show_default=True, help="Draw the figures (needs matplotlib).")
def bench(suite, data_dir, out_dir, jobs, tiny, fresh, plot):
    """Run an experiment suite: a TOML file, or a name from the top-level workloads/ folder."""
    from .evaluation import load_suite, markdown_table, run_suite, summarize

    try:
        spec = load_suite(suite, tiny=tiny)
        out = out_dir or pathlib.Path("results") / (spec.name + ("-tiny" if tiny else ""))
        with click.progressbar(length=1, label=f"{spec.name}", file=sys.stderr) as bar:
            def progress(done, total):
                bar.length = total
                bar.update(done - bar.pos)

            rows = run_suite(spec, out, data_dir=data_dir, jobs=jobs, resume=not fresh, progress=progress)
    except (ValueError, TypeError, OSError) as err:
        _fail(err)
    click.echo(markdown_table(summarize(rows)))
    click.echo(f"results: {out / 'results.csv'}, summary: {out / 'summary.md'}")
    if plot:
        try:
            from .evaluation.plots import plot_results

            metrics = ("objective_ratio",) if spec.workload["kind"] == "kmeans" else ("mse", "scaled_l2") if spec.scales else ("mse",)
            files = [f for metric in metrics for f in plot_results(out, metric)]
            click.echo(f"figures: {len(files)} files in {out}")
        except ImportError as err:
            click.echo(f"no figures: {err}", err=True)


@main.command()
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=pathlib.Path))
@click.option("--metric", type=click.Choice(["mse", "scaled_l2", "objective_ratio"]), default="mse", show_default=True,
              help="What to draw; objective_ratio for kmeans suites.")
def plot(results, metric):
    """Draw error-vs-ε and error-vs-θ figures (PNG and SVG) for a results folder."""
    try:
        from .evaluation.plots import plot_results

        for path in plot_results(results, metric):
            click.echo(str(path))
    except (ValueError, ImportError) as err:
        _fail(err)


def _keys(text: str) -> tuple[str, ...]:
    return tuple(k.strip() for k in text.split(",") if k.strip())


@main.command()
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=pathlib.Path))
@click.option("--value", default="mse", show_default=True, help="mse, scaled_l2, expected_mse or runtime_s.")
@click.option("--rows", default="mechanism,policy", show_default=True, help="Comma-separated summary columns, one line per key.")
@click.option("--columns", default="epsilon", show_default=True, help="Comma-separated summary columns, one column per key.")
@click.option("--where", multiple=True, metavar="KEY=VALUE", help="Keep configurations with this value (repeatable).")
def table(results, value, rows, columns, where):
    """Print a markdown pivot of a results folder: means over everything not in rows or columns."""
    try:
        from .evaluation.runner import read_rows
        from .evaluation.summary import pivot_table, summarize

        pairs = {}
        for item in where:
            if "=" not in item:
                raise ValueError(f"--where must read KEY=VALUE, got {item!r}")
            key, _, wanted = item.partition("=")
            pairs[key.strip()] = wanted.strip()
        path = results / "results.csv"
        if not path.is_file():
            raise ValueError(f"no results.csv in {str(results)!r}: run the suite first")
        click.echo(pivot_table(summarize(read_rows(path)), value, _keys(rows), _keys(columns), pairs), nl=False)
    except ValueError as err:
        _fail(err)


@main.command("datasets")
@click.option("--data-dir", type=click.Path(file_okay=False), help=f"DPBench folder (default ${datasets.DATA_DIR_ENV}).")
def list_datasets(data_dir):
    """List the datasets by name with their native shapes."""
    try:
        names = datasets.available(data_dir)
    except ValueError as err:
        _fail(err)
    for name, shape in names.items():
        where = "built-in" if name in datasets.BUILTIN else "data directory"
        click.echo(f"{name:<14} {'x'.join(map(str, shape)):>9}  {where}")


if __name__ == "__main__":  # pragma: no cover
    main()
