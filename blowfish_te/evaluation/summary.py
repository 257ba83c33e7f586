"""Summaries of a results table: means and 95% confidence intervals per configuration."""

from __future__ import annotations

import csv
import math
import pathlib

import numpy as np
from scipy import stats

from .._csv import escape_row

__all__ = ["GROUP", "MEASURES", "MIN_RUNS_FOR_CI", "VALUES", "summarize", "write_summary", "markdown_table", "pivot_table"]

#: A configuration: the columns that are neither the trial, the seeds nor a measurement.
GROUP = ["dataset", "domain", "scale", "policy", "theta", "workload", "mechanism", "epsilon"]
#: Measurements averaged over trials with a 95% confidence interval (``<name>_ci95``).
MEASURES = ["mse", "scaled_l2", "objective_ratio"]
#: Fewest trials whose 95% interval a table or figure shows: below it the Student-t factor (12.7
#: for 2 trials, 4.3 for 3) and the skew of per-trial errors make the interval say little.
MIN_RUNS_FOR_CI = 5
#: The measured columns of a summary that :func:`pivot_table` can tabulate.
VALUES = [*MEASURES, "expected_mse", "runtime_s"]


def _mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% Student-t confidence interval (NaN for one value)."""
    a = np.asarray(values, dtype=np.float64)
    if a.size < 2:
        return float(a.mean()), math.nan
    return float(a.mean()), float(stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size))


def summarize(rows: list[dict]) -> list[dict]:
    """One row per configuration, in first-seen order: trials n (over data seeds and algorithm
    seeds), the mean of each of :data:`MEASURES` the rows hold (per-query MSE and scaled L2 error,
    or the k-means objective ratio) with its 95% CI, mean runtime, stretch and route;
    configurations whose every trial failed keep their error message in ``status``."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[c] for c in GROUP), []).append(row)
    out = []
    for key, members in groups.items():
        ok = [r for r in members if r["status"] == "ok"]
        entry = dict(zip(GROUP, key))
        entry["n"] = len(ok)
        for measure in MEASURES:
            values = [r.get(measure) for r in ok]
            known = bool(values) and all(v is not None for v in values)
            entry[measure], entry[measure + "_ci95"] = _mean_ci(values) if known else (None, None)
        if ok:
            entry["expected_mse"] = ok[0]["expected_mse"]
            entry["runtime_s"] = float(np.mean([r["runtime_s"] for r in ok]))
            entry["route"], entry["stretch"] = ok[0]["route"], ok[0]["stretch"]
            entry["status"] = "ok" if len(ok) == len(members) else f"{len(members) - len(ok)} trials failed"
        else:
            entry.update(expected_mse=None, runtime_s=None, route=None, stretch=None, status=members[0]["status"])
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
    """A markdown table of summary rows: ``mean ± ci`` for the error columns, the mean alone for
    configurations of fewer than :data:`MIN_RUNS_FOR_CI` trials (a line under the table says so)."""
    if columns is None:
        measured = [m for m in MEASURES if any(r[m] is not None for r in summary)] or MEASURES[:2]
        columns = [c for c in GROUP if any(r[c] not in (None, "") for r in summary)] + ["n", *measured, "runtime_s", "status"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    bare = False
    for r in summary:
        cells = []
        for c in columns:
            if c in MEASURES and r[c] is not None and r.get("n", 0) >= MIN_RUNS_FOR_CI:
                cells.append(f"{_fmt(r[c])} ± {_fmt(r[c + '_ci95'])}")
            else:
                bare |= c in MEASURES and r[c] is not None
                cells.append(_fmt(r.get(c)))
        lines.append("| " + " | ".join(cells) + " |")
    if bare:
        lines.append(f"\nMeans without ± are of fewer than {MIN_RUNS_FOR_CI} trials: too few for a 95% interval.")
    return "\n".join(lines) + "\n"


def _matches(row: dict, where: dict[str, str]) -> bool:
    for key, wanted in where.items():
        value = row[key]
        if isinstance(value, (int, float)):
            try:
                if float(wanted) == value:
                    continue
            except ValueError:
                pass
        if _fmt(value) != wanted:
            return False
    return True


def pivot_table(
    summary: list[dict],
    value: str = "mse",
    rows: tuple[str, ...] = ("mechanism", "policy"),
    columns: tuple[str, ...] = ("epsilon",),
    where: dict[str, str] | None = None,
) -> str:
    """A markdown table of ``value`` with one line per ``rows`` key and one column per ``columns``
    key; each cell is the mean over the configurations sharing both keys (e.g. over datasets), of
    the per-configuration means. Numeric column keys are sorted, others keep the summary's order.
    ``where`` keeps configurations whose columns read as given."""
    if value not in VALUES:
        raise ValueError(f"value must be one of {VALUES}, got {value!r}")
    for label, keys in (("rows", rows), ("columns", columns), ("where", tuple(where or ()))):
        unknown = [k for k in keys if k not in GROUP]
        if unknown:
            raise ValueError(f"{label} must name summary columns {GROUP}, got unknown {unknown}")
    if not rows or not columns or set(rows) & set(columns):
        raise ValueError(f"rows {list(rows)} and columns {list(columns)} must be non-empty and disjoint")
    kept = [r for r in summary if r.get(value) is not None and _matches(r, where or {})]
    if not kept:
        raise ValueError(f"no configuration with a {value} value matches where={where or {}}")
    cells: dict[tuple, dict[tuple, list[float]]] = {}
    heads: dict[tuple, None] = {}
    for r in kept:
        head = tuple(r[c] for c in columns)
        heads[head] = None
        cells.setdefault(tuple(r[c] for c in rows), {}).setdefault(head, []).append(float(r[value]))
    numeric = all(isinstance(x, (int, float)) or x is None for h in heads for x in h)
    # numbers ascending (None last); names in the order the suite lists them
    heads_sorted = sorted(heads, key=lambda h: tuple((x is None, x or 0) for x in h)) if numeric else list(heads)
    title = [" · ".join(f"{c}={_fmt(h)}" for c, h in zip(columns, head)) for head in heads_sorted]
    lines = ["| " + " | ".join(list(rows) + title) + " |", "|" + "---|" * (len(rows) + len(title))]
    for key, by_head in cells.items():
        values = [_fmt(float(np.mean(by_head[h]))) if h in by_head else "" for h in heads_sorted]
        lines.append("| " + " | ".join([_fmt(k) for k in key] + values) + " |")
    return "\n".join(lines) + "\n"


def write_summary(summary: list[dict], out_dir: str | pathlib.Path) -> None:
    """``summary.csv`` and ``summary.md`` in ``out_dir``."""
    out = pathlib.Path(out_dir)
    if summary:
        with open(out / "summary.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(summary[0]))
            writer.writeheader()
            writer.writerows(map(escape_row, summary))
    (out / "summary.md").write_text(markdown_table(summary) if summary else "no results\n")
