"""All k-way marginals of 8-attribute domains: the expected per-query error of ``marginals_optimized``
against the workload's own marginals (``marginals``) and Laplace noise on the marginals
(``laplace``) and the SVD lower bound (from the marginals' eigen-algebra, any domain size), under
unbounded DP and under the attribute policy, ε = 1; with ``--hdmm SRC``, also
against HDMM's marginals template (McKenna et al., PVLDB 2018), imported from a checkout of
https://github.com/dpcomp-org/hdmm that you provide (its ``src`` folder), best of 5 seeds.

    python benchmarks/marginals_report.py
    python benchmarks/marginals_report.py --hdmm ~/hdmm/src
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

from _measure import Recorder, add_options

from blowfish_te import plan, policies
from blowfish_te import workloads as wl
from blowfish_te.bounds import lower_bound

DOMAINS = [(2, 3, 4, 5, 8, 10, 16, 20), (4, 5, 6, 8, 10, 12, 16, 20)]


def _hdmm_error(src: pathlib.Path, shape, k: int, seeds: int = 5) -> float:
    """HDMM's best expected per-query squared error at ε = 1 over ``seeds`` random starts."""
    sys.path.insert(0, str(src))
    from hdmm import error, templates, workload  # the user's checkout, outside this repository

    queries = workload.DimKMarginals(shape, k)
    best = float("inf")
    for seed in range(seeds):
        template = templates.Marginals(shape, seed=seed)
        template.optimize(queries)
        best = min(best, error.expected_error(queries, template.strategy(), eps=1.0) / queries.shape[0])
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hdmm", type=pathlib.Path, help="HDMM's src folder, to compare with its marginals template")
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    domains = DOMAINS[:1] if args.quick else DOMAINS
    head = "| domain | workload | policy | laplace | marginals | marginals_optimized | plan s | SVD bound | ratio to it |"
    if args.hdmm:
        head += " HDMM | ratio |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for shape in domains:
        for k in (2, 3):
            workload = wl.all_marginals(shape, k)
            for name, make in (("unbounded", policies.unbounded), ("attribute", policies.attribute)):
                policy = make(shape)
                start = time.perf_counter()
                optimized = plan(workload, policy, 1.0, "marginals_optimized").chosen.expected_mse
                seconds = time.perf_counter() - start
                own = plan(workload, policy, 1.0, "marginals").chosen.expected_mse
                laplace = plan(workload, policy, 1.0, "laplace", "exact").chosen.expected_mse
                bound = lower_bound(workload, 1.0, policy) / workload.num_queries
                row = (f"| {shape} | all {k}-way | {name} | {laplace:.1f} | {own:.1f} | {optimized:.1f} | {seconds:.2f} | "
                       f"{bound:.1f} | {optimized / bound:.2f} |")
                record(f"{'x'.join(map(str, shape))} {k}-way {name} ratio to the SVD bound", optimized / bound, "ratio")
                case = f"{'x'.join(map(str, shape))} {k}-way {name}"
                record(f"{case} optimized", optimized, "mse")
                record(f"{case} plan", seconds, "s")
                if args.hdmm:
                    if name == "unbounded":
                        theirs = _hdmm_error(args.hdmm, shape, k)
                        row += f" {theirs:.1f} | {optimized / theirs:.3f} |"
                        record(f"{case} ratio to HDMM", optimized / theirs, "ratio")
                    else:
                        row += " – | – |"
                print(row, flush=True)


if __name__ == "__main__":
    main()
