"""Prefix answers of a data-dependent release made consistent: nondecreasing from 0, up to the
record total where the policy discloses it (:func:`blowfish_te.smoothing.consistent_prefix_answers`;
post-processing, no budget; docs/theory.md, "Consistent running sums under the line policy")."""

from __future__ import annotations

from dataclasses import replace

from ..routes import Outcome
from ..smoothing import consistent_prefix_answers
from ..workloads import Workload


def consistent(outcome: Outcome, workload: Workload, total: float | None = None) -> Outcome:
    """``outcome`` with its answers to a 1-D prefix workload projected onto nondecreasing values
    from 0 (up to the public ``total``); other workloads' answers unchanged."""
    return replace(outcome, answers=consistent_prefix_answers(workload.query_bounds(), outcome.answers, total))
