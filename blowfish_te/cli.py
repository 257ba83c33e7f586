"""The ``blowfish-te`` command line."""

from __future__ import annotations

import contextlib
import csv
import functools
import glob
import json
import os
import pathlib
import sys

import click
import numpy as np

from . import __version__, datasets, policies, workloads
from ._csv import escape_row
from ._program import EXIT_INTERRUPTED, PROGRAM
from .errors import SpecError, first_line
from .progress import Progress
from .release import answer


class _Commands(click.Group):
    """The command group: any error of the library, of an engine (DuckDB, Spark) or of the system
    ends in one ``Error:`` line and status 1, never a traceback; an interrupt exits with 130."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as err:  # every other error: one line for the user
            raise click.ClickException(first_line(err)) from None


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name=PROGRAM)
def main() -> None:
    """blowfish_te: policy-aware differential privacy (Blowfish) through transformational equivalence.

    Exit status: 0 done, 1 an error (reported in one "Error:" line), 2 a usage error, 130
    interrupted (Ctrl-C)."""


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
    raise click.ClickException(first_line(err))


def _policy(spec: str, shape: tuple[int, ...]):
    try:
        return policies.from_spec(spec, shape)
    except SpecError as err:
        raise SpecError(f"--policy: {err}") from None


def _build_workload(spec: str, shape: tuple[int, ...], seed: int, ranges_file, domain=None, ranges_in: str = "values"):
    """The --workload, or the --ranges file's queries: 'lo,hi' per line, both ends included, in the
    records' column's values (``ranges_in`` "values") or in cell indices ("cells"); a histogram
    file's values are its cell indices, so there the two readings agree."""
    if ranges_file is not None:
        if len(shape) != 1:
            raise ValueError("--ranges needs a 1-D domain")
        with open(ranges_file, newline="", encoding="utf-8-sig") as f:
            rows = [row for row in csv.reader(f) if row]
        if not rows or any(len(row) != 2 for row in rows):
            raise ValueError(f"--ranges {ranges_file}: one query per line, 'lo,hi' (both included), and at least one")
        axis = None if domain is None or ranges_in == "cells" else domain.axes[0]
        bounds = []
        for number, (lo, hi) in enumerate(rows, start=1):
            try:
                bounds.append(axis.cells_of(lo, hi) if axis is not None else (int(lo), int(hi)))
            except ValueError as err:
                raise ValueError(f"--ranges {ranges_file}: line {number}: {err}" if axis is not None else
                                 f"--ranges {ranges_file}: line {number}: cell indices must be integers, got {lo!r}, {hi!r}") from None
        bounds = np.asarray(bounds, dtype=np.int64)
        return workloads.ranges(shape[0], bounds[:, 0], bounds[:, 1])
    try:
        return workloads.from_spec(spec, shape, seed)
    except SpecError as err:
        raise SpecError(f"--workload: {err}") from None


def _records_domain(columns, lower, upper, width, levels=(), bins=()):
    """The --column options as a records domain (one axis per column, in order): a column named by
    --levels NAME=a,b,... has those levels, one named by --bins NAME=e0,e1,... those bins, and the
    others, in order, take one --lower/--upper (and --width, if given) each."""
    from . import io

    named = {}
    for option, given in (("--levels", levels), ("--bins", bins)):
        for text in given:
            name, equals, values = text.partition("=")
            if not equals or not name or not values:
                raise ValueError(f"{option} {text!r}: give COLUMN=v1,v2,... (a --column's name, then its "
                                 + ("levels in order)" if option == "--levels" else "increasing bin edges)"))
            if name not in columns:
                raise ValueError(f"{option} {text!r}: {name!r} is not a --column ({', '.join(columns)})")
            if name in named:
                raise ValueError(f"{option} {text!r}: {name!r} already has {named[name][0]}; give one domain per column")
            named[name] = (option, next(csv.reader([values])))
    integers = [c for c in columns if c not in named]
    if not (len(lower) == len(upper) == len(integers)) or (width and len(width) != len(integers)):
        raise ValueError(f"give --lower and --upper (and --width, if any) once per integer --column ({len(integers)} here: "
                         f"{', '.join(integers) or 'none'}), in the same order, or --levels/--bins for category and "
                         "real-valued columns; the domain must not come from the data")
    ranges = iter(zip(lower, upper, width or (1,) * len(integers)))
    axes = []
    for column in columns:
        if column not in named:
            lo, hi, w = next(ranges)
            axes.append(io.IntegerRange(column, lo, hi, w))
            continue
        option, values = named[column]
        try:
            axes.append(io.Levels(column, values) if option == "--levels" else io.Bins(column, [float(v) for v in values]))
        except ValueError as err:
            raise ValueError(f"{option} {column}: {err}") from None
    return io.Grid(*axes)


def _query_labels(workload, domain) -> list[str]:
    """What every answer counts: the box of values (or of cells) of each query, else its index."""
    bounds = workload.query_bounds()
    if bounds is None:
        return [f"query {i}" for i in range(workload.num_queries)]
    lo, hi = bounds
    if domain is not None:
        return [domain.label(a, b) for a, b in zip(lo, hi)]
    axes = [[f"{a}" if a == b else f"{a}..{b}" for a, b in zip(lo[:, j].tolist(), hi[:, j].tolist())] for j in range(lo.shape[1])]
    return axes[0] if len(axes) == 1 else [" x ".join(parts) for parts in zip(*axes)]


def _check_output(output: pathlib.Path | None) -> None:
    """Refuse an output that cannot be written, before any noise is drawn."""
    if output is None:
        return
    folder = output.parent
    if output.is_dir():
        raise ValueError(f"--output {output}: is a folder (checked before any noise is drawn)")
    if not (folder.is_dir() and os.access(folder, os.W_OK)) or (output.exists() and not os.access(output, os.W_OK)):
        raise ValueError(f"--output {output}: the file or its folder is not writable or does not exist (checked before any noise is drawn)")


#: The mechanisms whose optimiser time --planning-seconds sets (their ``budget``).
PLANNERS = ("auto", "adaptive")


@main.command()
@click.argument("data")
@click.option("--policy", "policy_spec", default="line", show_default=True, help=policies.spec_help() + ".")
@click.option("--epsilon", required=True, type=click.FloatRange(min=0, min_open=True), help="Privacy budget ε.")
@click.option("--mechanism", default="auto", show_default=True,
              help="A name from blowfish_te.mechanisms.MECHANISMS; auto: the data-independent strategy of lowest expected "
                   "error for the workload and policy (the plan names it).")
@click.option("--workload", "workload_spec", default="identity", show_default=True,
              help=workloads.spec_help() + "; M queries drawn with --workload-seed, k-way marginals.")
@click.option("--ranges", "ranges_file", type=click.Path(exists=True, dir_okay=False),
              help="CSV of 'lo,hi' range queries, both ends included (overrides --workload; 1-D): values of the "
                   "--column (integers, bin edges [lo, hi) of --bins, or levels), or cell indices with --ranges-in cells. "
                   "A histogram file's values are its cell indices.")
@click.option("--ranges-in", type=click.Choice(["values", "cells"]), default="values", show_default=True,
              help="What the --ranges file holds: the --column's values or cell indices.")
@click.option("--workload-seed", default=0, show_default=True, type=click.IntRange(min=0), help="Seed of random workloads.")
@click.option("--tree", help="Spanning tree for a cyclic policy (e.g. bfs, hub, snake); default: the route planner decides.")
@click.option("--column", "columns", multiple=True,
              help="DATA is records (a CSV, Parquet or Arrow file, a glob or a folder of them; a header names the "
                   "columns): count this column; repeat for a grid.")
@click.option("--lower", type=int, multiple=True, help="Smallest value of each integer --column's domain.")
@click.option("--upper", type=int, multiple=True, help="Largest value of each integer --column's domain.")
@click.option("--width", type=click.IntRange(min=1), multiple=True, help="Values per cell of each integer --column (default 1).")
@click.option("--levels", multiple=True, metavar="COLUMN=A,B,...",
              help="A category --column's values, one cell each, in order (other values are refused and counted).")
@click.option("--bins", multiple=True, metavar="COLUMN=E0,E1,...",
              help="A real-valued --column's increasing bin edges: cells [E0, E1), [E1, E2), ..., the last closed.")
@click.option("--outside", type=click.Choice(["error", "clamp"]), default="error", show_default=True,
              help="Records outside --lower..--upper: refuse, or clamp to the nearest bound.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True,
              help="Engine that counts the records (spark: pip install 'blowfish_te[spark]').")
@click.option("--seed", type=click.IntRange(min=0), help="Seeded fast noise, for experiments; without it the secure sampler is used.")
@click.option("--output", "output", type=click.Path(path_type=pathlib.Path), help="Write here instead of standard output.")
@click.option("--format", "fmt", type=click.Choice(["json", "csv", "text"]),
              help="Output format: json (default) or csv for a release; text (default) or json for --plan.")
@click.option("--plan", "plan_only", is_flag=True,
              help="Print the plan (route, tree, stretch, expected per-query error, the ε it would spend) and stop: "
                   "no record is read, no noise is drawn, no budget is charged.")
@click.option("--ledger", type=click.Path(dir_okay=False, path_type=pathlib.Path),
              help="A ledger file (SQLite, created when missing) that charges this release's ε to the dataset and refuses "
                   "it, before reading the data, when the dataset's budget would be exceeded. The charge is refunded only "
                   "if the run fails before reading any record.")
@click.option("--budget", "total", type=click.FloatRange(min=0, min_open=True),
              help="The dataset's total ε in the ledger, on its first release.")
@click.option("--dataset", "dataset_name", help="The dataset's name in the ledger (default: DATA's absolute path).")
@click.option("--quiet", is_flag=True,
              help="No plan summary and no progress on standard error (record counts and notes are still written).")
@click.option("--planning-seconds", type=click.FloatRange(min=0),
              help="With --mechanism auto or adaptive: the seconds their optimiser may be predicted to take (a cost model "
                   "of sizes; default 10). The plan says what each candidate is predicted to take; with --plan and a "
                   "larger value a new workload is planned ahead, its strategy kept in the strategy cache "
                   "($BLOWFISH_TE_CACHE_DIR), where later runs read it.")
def run(data: str, policy_spec: str, epsilon: float, mechanism: str, workload_spec: str, ranges_file: str | None, ranges_in: str,
        workload_seed: int, tree: str | None, columns: tuple[str, ...], lower: tuple[int, ...], upper: tuple[int, ...],
        width: tuple[int, ...], levels: tuple[str, ...], bins: tuple[str, ...], outside: str, engine: str, seed: int | None,
        output: pathlib.Path | None, fmt: str | None, plan_only: bool, ledger: pathlib.Path | None, total: float | None,
        dataset_name: str | None, quiet: bool, planning_seconds: float | None) -> None:
    """Answer a workload on DATA (a .npy/.csv histogram, or records with --column) privately.

    Records are a CSV, Parquet or Arrow file, a glob ('big_*.csv') or a folder of them, with a
    header naming the columns. Each --column's domain is given, never read from the data: integers
    (--lower/--upper/--width), categories (--levels) or real-valued bins (--bins).

    The release is planned first, from the domain alone (--column's --lower/--upper/--width, or a
    histogram file's shape), and the plan goes to standard error before anything else; --plan
    stops there. With --ledger, the ε is then charged to the dataset (refused past its budget)
    before the data are read, and refunded only if the run fails before reading any record (a
    missing file, a header without a --column): a failure after reading keeps the charge, for its
    message and exit status depend on the records without noise.

    The output labels every answer with its query and records ε, the policy, the mechanism, the
    route, the tree and its stretch, the disclosed component totals, the sampler, whether it was
    secure, the seed (or fresh entropy) and the library version. Every record is counted, refused
    or clamped (--outside clamp); the counts go to standard error. Error messages and standard
    error depend on the data without noise: they are for the data owner, never for release.
    """
    from . import io
    from .ledger import Ledger, Run
    from .release import plan as make_plan

    if fmt == "csv" and plan_only:
        raise click.UsageError("--plan writes text or json, not csv")
    if fmt == "text" and not plan_only:
        raise click.UsageError("a release is written as json or csv; text is for --plan")
    if plan_only and (ledger or total or dataset_name):
        raise click.UsageError("--plan charges nothing: leave out --ledger, --budget and --dataset")
    if (total or dataset_name) and not ledger:
        raise click.UsageError("--budget and --dataset name the dataset in a --ledger: give --ledger too")
    if planning_seconds is not None:
        if mechanism not in PLANNERS:
            raise click.UsageError(f"--planning-seconds sets the optimiser time of {' or '.join(PLANNERS)}, not of {mechanism}")
        from .mechanisms import mechanism_class

        mechanism = mechanism_class(mechanism)(budget=planning_seconds)
    try:
        _check_output(output)
        domain = None
        if columns:
            domain = _records_domain(columns, lower, upper, width, levels, bins)
            shape = tuple(domain.shape)
        else:
            if lower or upper or width or levels or bins:
                raise ValueError("--lower/--upper/--width/--levels/--bins apply to records (--column); a histogram's "
                                 "cells are its domain")
            if pathlib.Path(data).is_dir() or glob.has_magic(data):
                raise ValueError(f"{data}: a histogram is one .npy or .csv file; records (a glob or a folder of files) "
                                 "need --column")
            if not pathlib.Path(data).exists():
                raise ValueError(f"{data}: no such file")
            shape = io.histogram_shape(data)
        workload = _build_workload(workload_spec, shape, workload_seed, ranges_file, domain, ranges_in)
        the_plan = make_plan(workload, _policy(policy_spec, shape), epsilon, mechanism, tree=tree)
        if plan_only:
            _write_plan(the_plan, fmt or "text", output)
            return
        if not quiet:
            click.echo("plan:\n" + _indent(the_plan.summary()), err=True)
        charged = contextlib.nullcontext(Run())
        if ledger is not None:
            book = Ledger(ledger)
            dataset = dataset_name or os.path.abspath(data)
            charged = book.charged(dataset, epsilon, the_plan.policy.name, the_plan.mechanism.name, workload.name, total)
        # the ledger's protocol: refunded if the run fails before reading a record, kept ("failed")
        # after, for then the failure (its message, its exit status) reveals records without noise
        with charged as run:
            if ledger is not None:
                left = book.budget(dataset)
                click.echo(f"ledger: charged ε = {epsilon:g} to {dataset!r} ({left.spent:g} of {left.total:g} spent)", err=True)
            if columns:  # the files and their headers, checked before any record is read
                files = io.engines.check_files(data, domain, engine)
                megabytes = sum(os.path.getsize(f) for f in files) / 1e6
            run.reading()
            if columns:
                marginals = the_plan.marginals_read()  # a plan that reads marginals only: never the grid
                with Progress("counting records", total=megabytes, unit="MB", enabled=not quiet) as bar:
                    count = io.histogram if marginals is None else functools.partial(io.marginal_counts, marginals=marginals)
                    result = count(files, domain, outside=outside, engine=engine,
                                   progress=lambda fraction: bar.update(fraction * megabytes))
                x = result.counts
                click.echo(f"records: {result.summary()} (exact counts, not private)", err=True)
            else:
                x = io.read_histogram(data)
            release = the_plan.release_checked(the_plan.check(x), seed)
    except (ValueError, TypeError, OSError, ImportError) as err:
        _fail(err)
    fields = {"version": __version__, "seed": "fresh entropy" if seed is None else seed, "plan": the_plan.to_dict(),
              **release.to_dict()}
    if release.component_totals:
        click.echo(f"note: the policy discloses {len(release.component_totals)} component total(s) exactly; "
                   "they are in the output as component_totals", err=True)
    labels = _query_labels(workload, domain)
    with open(output, "w", newline="") if output else contextlib.nullcontext(sys.stdout) as stream:
        if fmt in (None, "json"):
            fields["queries"] = labels
            # one line per field, each value compact: readable, and fast for a million answers
            lines = [f" {json.dumps(key)}: {json.dumps(value)}" for key, value in fields.items()]
            stream.write("{\n" + ",\n".join(lines) + "\n}\n")
        else:
            meta = {k: fields[k] for k in ("version", "epsilon", "policy", "mechanism", "route", "tree", "stretch", "workload",
                                            "expected_mse", "noise_scale", "sampler", "secure", "seed")}
            meta["component_totals"] = json.dumps(fields["component_totals"], separators=(",", ":"))
            writer = csv.writer(stream)
            writer.writerow(["index", "query", "answer", *meta])
            for i, (label, a) in enumerate(zip(labels, fields["answers"])):
                writer.writerow(escape_row([i, label, a, *meta.values()]))


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _write_plan(the_plan, fmt: str, output: pathlib.Path | None) -> None:
    """The plan as text (its summary) or JSON, to ``output`` or standard output."""
    text = the_plan.summary() + "\n" if fmt == "text" else json.dumps(the_plan.to_dict(), indent=1) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, "utf-8")


@main.command()
@click.argument("suite")
@click.option("--data-dir", type=click.Path(file_okay=False), help=f"DPBench folder (default ${datasets.DATA_DIR_ENV}).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=pathlib.Path), help="Results folder (default results/<suite>).")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(min=1), help="Processes.")
@click.option("--scheduler", metavar="ADDRESS",
              help="Run the cells on the workers of this Dask scheduler, e.g. tcp://host:8786 "
                   "(pip install 'blowfish_te[distributed]'); not with --jobs > 1.")
@click.option("--tiny", is_flag=True, help="The suite's [tiny] configuration: seconds, for CI.")
@click.option("--fresh", is_flag=True, help="Discard earlier results in the folder instead of resuming.")
@click.option("--plot/--no-plot", default=True, show_default=True, help="Draw the figures (needs matplotlib).")
@click.option("--quiet", is_flag=True, help="No progress on standard error.")
def bench(suite: str, data_dir: str | None, out_dir: pathlib.Path | None, jobs: int, scheduler: str | None, tiny: bool, fresh: bool,
          plot: bool, quiet: bool) -> None:
    """Run an experiment suite: a TOML file, or a name from the top-level workloads/ folder.

    Exits with status 1 when any cell failed, after writing the results and a one-line account of
    the failures to standard error.
    """
    from .evaluation import load_suite, markdown_table, run_suite, summarize
    from .evaluation.experiments import experiment
    from .evaluation.runner import describe_failures

    if scheduler is not None and jobs > 1:
        raise click.UsageError("--scheduler and --jobs > 1 are mutually exclusive: the scheduler's workers run the cells")
    try:
        spec = load_suite(suite, tiny=tiny)
        out = out_dir or pathlib.Path("results") / (spec.name + ("-tiny" if tiny else ""))
        with Progress(spec.name, unit="cells", enabled=not quiet) as bar:
            rows = run_suite(spec, out, data_dir=data_dir, jobs=jobs, resume=not fresh, progress=bar.update, scheduler=scheduler)
    except (ValueError, TypeError, OSError, ImportError) as err:
        _fail(err)
    click.echo(markdown_table(summarize(rows)))
    click.echo(f"results: {out / 'results.csv'}, summary: {out / 'summary.md'}")
    if plot:
        try:
            from .evaluation.plots import plot_results

            metrics = experiment(spec.workload["kind"]).metrics(bool(spec.scales))
            files = [f for metric in metrics for f in plot_results(out, metric)]
            click.echo(f"figures: {len(files)} files in {out}")
        except (ImportError, ValueError) as err:  # no matplotlib, or no cell with a value to draw
            click.echo(f"no figures: {err}", err=True)
    failures = describe_failures(rows)
    if failures:
        click.echo(f"error: {failures}", err=True)
        click.get_current_context().exit(1)


@main.command("ledger")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=pathlib.Path))
@click.option("--dataset", "dataset_name", help="Only this dataset.")
@click.option("--budget", "total", type=click.FloatRange(min=0, min_open=True),
              help="Change --dataset's total ε (never below what it has spent).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def ledger_command(file: pathlib.Path, dataset_name: str | None, total: float | None, fmt: str) -> None:
    """List a ledger of releases: every dataset's policy, budget, spent and remaining ε, and every
    charge (time, ε, mechanism, workload, status: released, reserved, failed or refunded)."""
    from .ledger import Ledger

    try:
        book = Ledger(file)
        if total is not None:
            if dataset_name is None or book.budget(dataset_name) is None:
                raise ValueError("--budget changes the total of a dataset in the ledger: give its --dataset (a new dataset "
                                 "gets its budget from `run --ledger ... --budget ...`)")
            book.set_budget(dataset_name, book.budget(dataset_name).policy, total)
        budgets = [b for b in book.budgets() if dataset_name in (None, b.dataset)]
        if dataset_name is not None and not budgets:
            raise ValueError(f"--dataset {dataset_name!r}: not in the ledger; datasets: {', '.join(b.dataset for b in book.budgets())}")
        charges = {b.dataset: book.charges(b.dataset) for b in budgets}
    except (ValueError, TypeError, OSError) as err:
        _fail(err)
    if fmt == "json":
        out = [{**vars(b), "remaining": b.remaining, "charges": [vars(c) for c in charges[b.dataset]]} for b in budgets]
        click.echo(json.dumps(out, indent=1))
        return
    for b in budgets:
        click.echo(f"{b.dataset}: policy {b.policy}, budget ε = {b.total:g}, spent {b.spent:g}, left {b.remaining:g}")
        for c in charges[b.dataset]:
            note = f" ({c.note})" if c.note else ""
            click.echo(f"  #{c.id} {c.time} ε = {c.epsilon:g} {c.mechanism} on {c.workload}: {c.status}{note}")


@main.command()
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=pathlib.Path))
@click.option("--metric", type=click.Choice(["mse", "scaled_l2", "objective_ratio"]), default="mse", show_default=True,
              help="What to draw; objective_ratio for kmeans suites.")
def plot(results: pathlib.Path, metric: str) -> None:
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
def table(results: pathlib.Path, value: str, rows: str, columns: str, where: tuple[str, ...]) -> None:
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
def list_datasets(data_dir: str | None) -> None:
    """List the datasets by name with their native shapes."""
    try:
        names = datasets.available(data_dir)
    except ValueError as err:
        _fail(err)
    for name, shape in names.items():
        where = "built-in" if name in datasets.BUILTIN else "data directory"
        click.echo(f"{name:<14} {'x'.join(map(str, shape)):>9}  {where}")
    if data_dir is None and not os.environ.get(datasets.DATA_DIR_ENV):
        click.echo(f"(built-in sets only: --data-dir FOLDER or ${datasets.DATA_DIR_ENV} adds the DPBench histograms "
                   "of a data directory)", err=True)


@main.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=pathlib.Path),
              help="Folder to write to (default: the user's strategy cache, $BLOWFISH_TE_CACHE_DIR).")
@click.option("--only", "names", multiple=True, help="A standard workload by name (repeatable; default all).")
@click.option("--list", "list_only", is_flag=True, help="List the standard workloads and where each is stored; build nothing.")
def strategies(out_dir: pathlib.Path | None, names: tuple[str, ...], list_only: bool) -> None:
    """Optimise the standard workloads' strategies once (histograms, prefixes and all ranges over
    2^8..2^12 cells, DPBench's rectangles over 64x64, 128x128 and 256x256; up to ~100 s each) and plan `auto` for
    each under unbounded DP and line (1-D) or grid:1 (2-D), so that `optimized` and `auto` use
    them at once in every later run, at any epsilon."""
    from .mechanisms import Auto, Optimized
    from .mechanisms.optimized import build_standard
    from .strategies.standard import standard_policies, standard_workloads
    from .strategies.store import choice_key, default_store, shipped_directory

    try:
        if list_only:
            mech, store = Optimized(), default_store()

            def where(key, suffix):
                shipped = key is not None and (shipped_directory() / f"{key}{suffix}").is_file()
                found = store.contains(key) if suffix == ".npz" else store.load_record(key) is not None
                return "shipped" if shipped else ("cached" if found else "not built")

            for name, build in standard_workloads().items():
                workload = build()
                click.echo(f"{name:<44} {where(mech.store_key(workload), '.npz')}")
                for spec, policy in standard_policies(workload).items():
                    key = choice_key(Auto(), workload, policy, "auto")
                    click.echo(f"{name + '/auto/' + spec:<44} {where(key, '.json')}")
            return
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            _check_output(out_dir / "strategy.npz")
        for built in build_standard(out_dir, names or None):
            click.echo(f"{built.name:<44} {built.status:<7} {built.seconds:7.1f} s  {built.summary}")
    except (ValueError, OSError) as err:
        _fail(err)



def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1 or len(shape) > 2:
        raise click.BadParameter(f"{text!r}: give the number of cells, e.g. 4096, or a 2-D grid, e.g. 128x128")
    return shape


@main.command()
@click.option("--shape", "shape_text", required=True, help="The domain: cells (4096) or a grid (128x128). No data is read.")
@click.option("--workload", "workload_spec", default="prefix", show_default=True,
              help=workloads.spec_help() + "; M queries drawn with --workload-seed, k-way marginals.")
@click.option("--workload-seed", default=0, show_default=True, type=click.IntRange(min=0), help="Seed of random workloads.")
@click.option("--policy", "policy_specs", multiple=True,
              help="A candidate policy (repeatable): " + policies.spec_help() + ". Default: unbounded, line and "
                   "threshold:4/16/64 in 1-D; unbounded and grid:1/4/16 in 2-D.")
@click.option("--epsilon", "epsilons", multiple=True, type=click.FloatRange(min=0, min_open=True),
              help="ε to compare (repeatable). Default: 0.1, 0.5, 1.")
@click.option("--mechanism", default="hb", show_default=True, help="A data-independent mechanism (its error is analytic).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=pathlib.Path),
              help="Also draw the errors against ε and θ to this PNG or SVG file (needs matplotlib).")
@click.option("--apart", default=1, show_default=True, type=click.IntRange(min=1),
              help="The equal-protection table gives values this many cells apart the same bound under every policy.")
def explore(shape_text: str, workload_spec: str, workload_seed: int, policy_specs: tuple[str, ...], epsilons: tuple[float, ...],
            mechanism: str, plot_path: pathlib.Path | None, apart: int) -> None:
    """Compare candidate policies before spending any budget: what each protects and what it costs.

    Prints, for every policy, the bound e^(ε·d) on telling apart pairs of values d policy hops apart
    (or 'none' where the policy does not protect them), the analytic per-query RMSE of the
    mechanism's planned release for every policy and ε, and the same at equal protection: each
    policy at the ε that bounds values --apart cells apart by e^ε. Needs only the domain's shape.
    """
    from .evaluation.summary import markdown_table
    from .explore import equal_protection, expected_errors, guarantees, plot_expected_errors

    shape = _shape(shape_text)
    specs = list(policy_specs) or (["unbounded", "line", "threshold:4", "threshold:16", "threshold:64"] if len(shape) == 1
                                   else ["unbounded", "grid:1", "grid:4", "grid:16"])
    epsilons = sorted(set(epsilons or (0.1, 0.5, 1.0)))
    try:
        if plot_path is not None:
            _check_output(plot_path)
        workload = _build_workload(workload_spec, shape, workload_seed, None)
        candidates = {spec: _policy(spec, shape) for spec in specs}
        rows = expected_errors(workload, specs, epsilons, mechanism)
        equal = {epsilon: equal_protection(workload, specs, epsilon, apart, mechanism) for epsilon in epsilons}
    except (ValueError, TypeError, OSError) as err:
        _fail(err)

    table = {spec: guarantees(policy) for spec, policy in candidates.items()}
    pairs = [g.pair for g in table[specs[0]]]
    for epsilon in epsilons:
        click.echo(f"Guarantees at ε = {epsilon:g}: e^(ε·d), the most an output can favour one value of a pair over the other")
        click.echo(markdown_table([{"pair": pair, **{spec: table[spec][i].describe(epsilon) for spec in specs}}
                                   for i, pair in enumerate(pairs)], ["pair", *specs]))
        click.echo("")
    click.echo(f"Expected per-query RMSE of {mechanism} on {workload.name} (analytic; route in brackets)")
    columns = [f"ε = {epsilon:g}" for epsilon in epsilons]
    click.echo(markdown_table([{"policy": spec, **{f"ε = {r['epsilon']:g}": f"{r['rmse']:.4g} [{r['route']}]"
                                                   for r in rows if r["policy"] == spec}} for spec in specs], ["policy", *columns]))
    what = "values" if len(shape) == 1 else "cells on axis 0"
    click.echo(f"At equal protection: {what} {apart} apart told apart at most e^ε under every policy "
               "(each policy at ε / its hops between them); expected per-query RMSE [its ε]")
    click.echo(markdown_table([{"policy": spec, **{f"ε = {e:g}": "not protected" if r["rmse"] is None else
                                                   f"{r['rmse']:.4g} [ε {r['epsilon']:.3g}]"
                                                   for e in epsilons for r in equal[e] if r["policy"] == spec}}
                               for spec in specs], ["policy", *columns]))
    if plot_path is not None:
        try:
            plot_expected_errors(rows, plot_path, f"{mechanism} on {workload.name}")
        except ImportError as err:  # the tables are printed: a missing plotting library is a note, as for bench
            click.echo(f"no figure: {err}", err=True)
            return
        click.echo(f"figure: {plot_path}")


if __name__ == "__main__":  # pragma: no cover
    main()
