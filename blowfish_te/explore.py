"""Choosing a policy before spending any budget: what each candidate protects, and what it costs.

Both tables need only the domain's shape, never the data:

- :func:`guarantees`: for representative pairs of values, the bound e^{ε·d_G(u, v)} on how much
  better than chance an adversary can tell u from v under an (ε, G)-Blowfish release, d_G the
  policy graph's distance (He, Machanavajjhala & Ding, SIGMOD 2014, §4): 1 hop of the graph costs
  e^ε, pairs in different components are not protected at all, and with ⊥ (unbounded policies)
  the presence of a record is protected at distance d_G(u, ⊥).
- :func:`expected_errors`: the analytic per-query RMSE of a mechanism's planned release
  (:func:`blowfish_te.plan`: route, tree and stretch included) for every policy and ε.
- :func:`equal_protection`: the same error with each policy at the ε that gives one chosen pair
  of values the same bound — the same ε is not the same protection (unbounded DP's ε bounds a
  record's presence; a change of its value costs two hops, e^{2ε}).

:func:`plot_expected_errors` draws the second against ε and θ (``blowfish-te explore``).
"""

from __future__ import annotations

import math
import pathlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike
from scipy.sparse import csgraph

from ._graph import csgraph_ready
from ._validation import check_epsilon
from .errors import SpecError
from .policies import Policy, PolicySpec
from .release import plan
from .workloads import Workload, as_workload

if TYPE_CHECKING:
    from .mechanisms import Mechanism

__all__ = ["Guarantee", "equal_protection", "expected_errors", "guarantees", "plot_expected_errors"]


@dataclass(frozen=True)
class Guarantee:
    """One pair of values and the policy's distance between them (``inf``: not protected)."""

    pair: str
    distance: float

    def loss(self, epsilon: float) -> float:
        """ε·d: the bound on log(P[output | u] / P[output | v]) for any output (``inf``: none)."""
        return epsilon * self.distance if math.isfinite(self.distance) else math.inf

    def describe(self, epsilon: float) -> str:
        """e^{ε·d} as text: a number, e^x when it is astronomical, or "none" when unprotected."""
        loss = self.loss(epsilon)
        if math.isinf(loss):
            return "none"
        return f"{math.exp(loss):.3g}" if loss <= 40 else f"e^{loss:.0f}"


def _offsets(size: int) -> list[int]:
    """1, 2, 4, 16, 64, ... (powers of 4 after 2) below ``size``, then the farthest value."""
    steps = [1, 2] + [4**j for j in range(1, 12)]
    return sorted({s for s in steps if s < size - 1} | {size - 1}) if size > 1 else []


def _distances_from_first_cell(policy: Policy) -> np.ndarray:
    """Hops of the policy graph from cell 0 to every cell (and ⊥, last, where the policy has it)."""
    return csgraph.shortest_path(csgraph_ready(policy.adjacency()), method="D", unweighted=True, indices=0)


def guarantees(policy: Policy) -> list[Guarantee]:
    """The policy's distance for pairs of cells δ apart (δ = 1, 2, 4, 16, ..., the far end) from the
    first cell, along the first axis and, in 2-D, along the diagonal; and for a record's presence
    (cell 0 against ⊥), which only policies with ⊥ protect (else the count n is public)."""
    distances = _distances_from_first_cell(policy)
    shape = policy.shape
    rows = []
    for delta in _offsets(shape[0]):
        target = (delta,) + (0,) * (len(shape) - 1)
        rows.append(Guarantee(f"values {delta} apart" if len(shape) == 1 else f"cells {delta} apart on axis 0",
                              float(distances[np.ravel_multi_index(target, shape)])))
    if len(shape) == 2:
        for delta in _offsets(min(shape)):
            rows.append(Guarantee(f"cells ({delta}, {delta}) apart", float(distances[np.ravel_multi_index((delta, delta), shape)])))
    presence = float(distances[policy.size]) if policy.has_bottom else math.inf
    rows.append(Guarantee("a record present or absent (the count n)", presence))
    return rows


def equal_protection(workload: Workload | ArrayLike, policy_specs: list[str], loss: float, apart: int = 1,
                     mechanism: str | Mechanism = "hb") -> list[dict]:
    """Policies compared at equal protection: for each, the ε at which a record's value and a value
    ``apart`` cells away (along the first axis) are told apart at most e^loss, ε = loss / d_G (d_G
    the policy's hops between them: 2 through ⊥ under unbounded DP, where a change of value is a
    removal and an addition, 1 under ``line`` for neighbours, ⌈apart/θ⌉ under ``threshold:θ``),
    and the analytic per-query RMSE of ``mechanism``'s release at that ε. A policy that does not
    protect the pair gets ε and RMSE None. Rows: policy, hops, epsilon, rmse, route."""
    workload = as_workload(workload)
    loss = check_epsilon(loss, "loss")
    shape = workload.domain
    if not 1 <= apart < shape[0]:
        raise ValueError(f"apart must be between 1 and {shape[0] - 1} (cells along the first axis), got {apart!r}")
    rows = []
    for spec in policy_specs:
        _, policy = _parse(spec, shape)
        hops = float(_distances_from_first_cell(policy)[np.ravel_multi_index((apart,) + (0,) * (len(shape) - 1), shape)])
        if not math.isfinite(hops):
            rows.append({"policy": spec, "hops": None, "epsilon": None, "rmse": None, "route": "not protected"})
            continue
        (row,) = expected_errors(workload, [spec], [loss / hops], mechanism)
        rows.append({**row, "hops": int(hops)})
    return rows


def _parse(spec: str, shape: tuple[int, ...]) -> tuple[PolicySpec, Policy]:
    try:
        parsed = PolicySpec.parse(spec)
        return parsed, parsed.build(shape)
    except SpecError as err:
        raise SpecError(f"policy {spec!r}: {err}") from None


def expected_errors(workload: Workload | ArrayLike, policy_specs: list[str], epsilons: list[float],
                    mechanism: str | Mechanism = "hb") -> list[dict]:
    """Rows (policy, epsilon, rmse, route) of the analytic per-query RMSE of ``mechanism``'s planned
    release of ``workload`` under each policy spec at each ε. Data-independent: no budget is spent.
    Raises ValueError when the mechanism has no analytic error (data-dependent mechanisms)."""
    workload = as_workload(workload)
    rows = []
    for spec in policy_specs:
        parsed, policy = _parse(spec, workload.domain)
        for epsilon in epsilons:
            chosen = plan(workload, policy, check_epsilon(epsilon), mechanism).chosen
            if chosen.expected_mse is None:
                raise ValueError(f"mechanism {mechanism!r} has no analytic expected error under {spec}: "
                                 "choose a data-independent one (identity, hb, privelet, quadtree, ...)")
            rows.append({"policy": spec, "theta": parsed.theta_on(workload.domain), "epsilon": float(epsilon),
                         "rmse": math.sqrt(chosen.expected_mse), "route": chosen.label})
    return rows


def plot_expected_errors(rows: list[dict], path: str | pathlib.Path, title: str) -> list[pathlib.Path]:
    """RMSE against ε (one line per policy) and, when there are several θ, against θ (one line
    per ε), as ``path`` (PNG or SVG by its suffix). Needs matplotlib."""
    from .evaluation.plots import LEGEND_POINTS, _panels, _plain_ticks, _pyplot

    plt, ticker = _pyplot()
    specs = list(dict.fromkeys(r["policy"] for r in rows))
    epsilons = sorted({r["epsilon"] for r in rows})
    thetas = sorted({r["theta"] for r in rows if r["theta"] is not None})
    fig, axes = _panels(plt, 2 if len(thetas) > 1 else 1)
    for spec in specs:
        line = sorted((r for r in rows if r["policy"] == spec), key=lambda r: r["epsilon"])
        axes[0].plot([r["epsilon"] for r in line], [r["rmse"] for r in line], marker="o", label=spec)
    axes[0].set(xscale="log", yscale="log", xlabel="ε", ylabel="expected per-query RMSE", title="against ε")
    _plain_ticks(axes[0], ticker, epsilons)
    if len(thetas) > 1:
        for epsilon in epsilons:
            line = sorted((r for r in rows if r["epsilon"] == epsilon and r["theta"] is not None), key=lambda r: r["theta"])
            axes[1].plot([r["theta"] for r in line], [r["rmse"] for r in line], marker="o", label=f"ε = {epsilon:g}")
        axes[1].set(xscale="log", yscale="log", xlabel="θ", title="against θ (threshold and grid policies)")
        _plain_ticks(axes[1], ticker, thetas)
    for ax in axes:
        ax.legend(fontsize=LEGEND_POINTS)
    fig.suptitle(title)
    path = pathlib.Path(path)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return [path]
