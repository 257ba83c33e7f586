"""Summaries of a results table: means and 95% confidence intervals per configuration (SPEC §11)."""

from __future__ import annotations

import csv
import math
import pathlib

import numpy as np
from scipy import stats

__all__ = ["GROUP", "summarize", "write_summary", "markdown_table"]

#: A configuration: the columns that are neither the trial, the seeds nor a measurement.
GROUP = ["dataset", "domain", "scale", "policy", "theta", "workload", "mechanism", "epsilon"]


def _mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% Student-t confidence interval (NaN for one value)."""
    a = np.asarray(values, dtype=np.float64)
    if a.size < 2:
        return float(a.mean()), math.nan
    return float(a.mean()), float(stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size))


def summarize(rows: list[dict]) -> list[dict]:
    """One row per configuration, in first-seen order: trials n (over data seeds and algorithm
    seeds), mean per-query MSE and scaled L2 error with 95% CIs, mean runtime, stretch and route;
    configurations whose every trial failed keep their error message in ``status``."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[c] for c in GROUP), []).append(row)
    out = []
    for key, members in groups.items():
        ok = [r for r in members if r["status"] == "ok"]
        entry = dict(zip(GROUP, key))
        entry["n"] = len(ok)
        if ok:
            entry["mse"], entry["mse_ci95"] = _mean_ci([r["mse"] for r in ok])
            entry["scaled_l2"], entry["scaled_l2_ci95"] = _mean_ci([r["scaled_l2"] for r in ok])
            entry["expected_mse"] = ok[0]["expected_mse"]
            entry["runtime_s"] = float(np.mean([r["runtime_s"] for r in ok]))
            entry["route"], entry["stretch"] = ok[0]["route"], ok[0]["stretch"]
            entry["status"] = "ok" if len(ok) == len(members) else f"{len(members) - len(ok)} trials failed"
        else:
            entry.update(mse=None, mse_ci95=None, scaled_l2=None, scaled_l2_ci95=None, expected_mse=None,
                         runtime_s=None, route=None, stretch=None, status=members[0]["status"])
        out.append(entry)
    return out


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:.4g}"
    return str(value)


def markdown_table(summary: list[dict], columns: list[str] | None = None) -> str:
    """A markdown table of summary rows: ``mean ± ci`` for the error columns."""
    columns = columns or [c for c in GROUP if any(r[c] not in (None, "") for r in summary)] + ["n", "mse", "scaled_l2", "runtime_s", "status"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in summary:
        cells = []
        for c in columns:
            if c in ("mse", "scaled_l2") and r[c] is not None:
                cells.append(f"{_fmt(r[c])} ± {_fmt(r[c + '_ci95'])}")
            else:
                cells.append(_fmt(r.get(c)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_summary(summary: list[dict], out_dir) -> None:
    """``summary.csv`` and ``summary.md`` in ``out_dir``."""
    out = pathlib.Path(out_dir)
    if summary:
        with open(out / "summary.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(summary[0]))
            writer.writeheader()
            writer.writerows(summary)
    (out / "summary.md").write_text(markdown_table(summary) if summary else "no results\n")
