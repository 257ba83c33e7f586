"""The ``blowfish-te`` command line."""

from __future__ import annotations

import click
import numpy as np

from . import datasets, policies, workloads
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


if __name__ == "__main__":  # pragma: no cover
    main()
