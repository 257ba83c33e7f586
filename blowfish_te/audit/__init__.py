"""Empirical privacy auditing of Blowfish mechanisms.

``audit(mechanism, policy, workload, epsilon)`` runs a mechanism many times on G-neighbour pairs
(:func:`neighbour_pairs`), chooses an event on a selection sample and bounds the privacy loss from
below on a fresh detection sample with Clopper–Pearson intervals; a pair FAILS when that bound
exceeds the claimed ε·d_G(u, v). :func:`sweep` audits every mechanism under the standard policies.

The auditor is a smoke test, not a proof: a FAIL is evidence of a violation (at the stated
confidence), a PASS is not evidence of privacy. With thousands of runs it cannot see noise 10%
too small, nor an output that leaks with probability 10⁻³. Exact checks belong elsewhere: for
additive-noise mechanisms the test suite shifts the noise of every neighbour pair (the coupling
argument), and :func:`check_mechanism` runs the plug-in contract. Pass your own base histogram
(``x``) or pairs (``pairs``) to probe the data you care about; the ``"scale"`` pairs put counts
up to 2²⁰ on the moved cells, so that behaviour above a count threshold is exercised.

    from blowfish_te import audit, policies, workloads
    report = audit.audit("hb", policies.line(8), workloads.prefix(8), 1.0, rng=0)
    report.passed, print(report.table())
"""

from .contract import check_mechanism
from .core import AuditReport, Batched, Event, HistogramAudit, PairResult, audit, audit_histograms, clopper_pearson
from .pairs import KINDS, NeighbourPair, default_histogram, make_pair, neighbour_pairs
from .sweep import (
    SWEEP_CONFIGS,
    SweepConfig,
    SweepRow,
    sweep,
    sweep_mechanisms,
    sweep_policies,
    sweep_table,
)

__all__ = [
    "AuditReport",
    "Batched",
    "Event",
    "HistogramAudit",
    "KINDS",
    "NeighbourPair",
    "PairResult",
    "SWEEP_CONFIGS",
    "SweepConfig",
    "SweepRow",
    "audit",
    "audit_histograms",
    "check_mechanism",
    "clopper_pearson",
    "default_histogram",
    "make_pair",
    "neighbour_pairs",
    "sweep",
    "sweep_mechanisms",
    "sweep_policies",
    "sweep_table",
]
