"""Empirical privacy audit of every mechanism × {line, threshold, grid, unbounded}.

Run: ``python benchmarks/audit_sweep.py [--config ci|large] [--secure] [--mechanisms hb dawa ...]
[--policies line grid ...] [--out table.md]``. Prints a markdown table: per mechanism and policy
the route, the noise samplers, the pair with the largest ε lower bound / claimed ε·d_G, the verdict
and the seconds, then the configuration and the total time. Seeded: the same command gives the
same table, except with ``--secure``, which audits the hardened samplers of ``rng=None`` (exact
discrete / lattice Laplace; the pairs stay seeded, the releases are not reproducible).
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import time

from _measure import Recorder, add_options

from blowfish_te.audit import SWEEP_CONFIGS, sweep, sweep_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(SWEEP_CONFIGS), default="ci")
    parser.add_argument("--secure", action="store_true", help="audit the hardened samplers of rng=None")
    parser.add_argument("--mechanisms", nargs="+", help="labels to audit (default: all)")
    parser.add_argument("--policies", nargs="+", help="policies to audit (default: all)")
    parser.add_argument("--out", type=pathlib.Path, help="also write the table to this markdown file")
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    config = SWEEP_CONFIGS[args.config]
    if args.secure:
        config = dataclasses.replace(config, name=f"{config.name}+secure", secure=True)
    start = time.perf_counter()
    rows = sweep(config, mechanisms=args.mechanisms, policies=args.policies)
    total = time.perf_counter() - start
    audited = [r for r in rows if r.report is not None]
    failed = [r for r in audited if not r.report.passed]
    record(f"{config.name}: audits that FAIL", len(failed), "count")
    record(f"{config.name}: the whole sweep", total, "s")
    settings = ", ".join(f"{f.name}={getattr(config, f.name)!r}" for f in dataclasses.fields(config))
    text = "\n".join([
        sweep_table(rows),
        "",
        f"{len(audited)} audits, {len(rows) - len(audited)} skipped, {len(failed)} FAIL; {total:.0f} s in total.",
        f"Configuration: {settings}. Confidence family-wise over the {len(audited)} audits (Bonferroni).",
    ])
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
