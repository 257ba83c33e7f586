"""Plots of a results folder: error against ε (or against the scale, when ε is fixed) and error
against θ, on log axes, saved as PNG and SVG beside the results. Needs matplotlib
(``pip install blowfish_te[evaluation]``).

What a reader can rely on: every panel of a figure shares one y scale; ε, θ and scales are
labelled with their plain values; titles name the dataset, the workload, the policy and ε;
legend text is 9 pt; 95% confidence bars are drawn only for points of at least
:data:`MIN_RUNS_FOR_CI` runs (fewer are drawn as bare points, and the figure says so), and a bar
whose interval reaches 0 is drawn upwards only, never down to the bottom of the log axis.
"""

from __future__ import annotations

import pathlib

from ..policies import PolicySpec
from .runner import read_rows
from .summary import MEASURES, MIN_RUNS_FOR_CI, summarize

__all__ = ["MIN_RUNS_FOR_CI", "plot_results"]

#: Lines beyond which the error-vs-ε (or scale) figure gets one panel per policy.
MAX_LINES_PER_PANEL = 12
#: Font size of legends and notes, in points.
LEGEND_POINTS = 9
_STYLES = ["-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]
_MARKERS = ["o", "s", "^", "D", "v", "P"]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plots need matplotlib: pip install 'blowfish_te[evaluation]'") from None
    return plt, matplotlib.ticker


def _save(fig, out: pathlib.Path, stem: str, written: list) -> None:
    for ext in ("png", "svg"):
        path = out / f"{stem}.{ext}"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        written.append(path)


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)


def _panels(plt, count: int, width: float = 5.0, height: float = 4.0):
    ncols = min(count, 3)
    nrows = -(-count // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, sharey=True,
                             layout="constrained")
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:count])


def _plain_ticks(ax, ticker, values, axis: str = "x") -> None:
    """Ticks at ``values`` labelled as plain numbers (0.1, 1000000), no minor ticks."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(ticker.FixedLocator(values))
    target.set_major_formatter(ticker.FixedFormatter([f"{v:g}" if v < 1e4 else f"{v:,.0f}" for v in values]))
    target.set_minor_locator(ticker.NullLocator())


def _bars(line: list[dict], metric: str):
    """Asymmetric 95% CI bars, or None when a point has fewer than MIN_RUNS_FOR_CI runs. A lower
    end at or below 0 is dropped (the log axis cannot show it)."""
    if any(r["n"] < MIN_RUNS_FOR_CI or r[metric + "_ci95"] != r[metric + "_ci95"] for r in line):
        return None
    values, half = [r[metric] for r in line], [r[metric + "_ci95"] for r in line]
    return [[h if v - h > 0 else 0.0 for v, h in zip(values, half)], half]


def _note(fig, rows: list[dict]) -> None:
    runs = sorted({r["n"] for r in rows})
    shown = "; bars: 95% CI of the mean (upper half only where it reaches 0)" if runs[0] >= MIN_RUNS_FOR_CI else (
        f"; no confidence bars below {MIN_RUNS_FOR_CI} runs")
    fig.supxlabel(f"runs per point: {', '.join(map(str, runs))}{shown}", fontsize=LEGEND_POINTS)


def _legend(ax) -> None:
    ax.legend(fontsize=LEGEND_POINTS, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def plot_results(out_dir: str | pathlib.Path, metric: str = "mse") -> list[pathlib.Path]:
    """Draw every figure for the results in ``out_dir`` and return the files written.

    Per dataset (and domain, when the suite has several): ``<metric>_vs_epsilon`` (one line per
    mechanism × policy; against the scale instead when the suite has one ε and several scales;
    one panel per policy beyond :data:`MAX_LINES_PER_PANEL` lines) and, when the suite has
    θ-policies, ``<metric>_vs_theta`` (one panel per mechanism, one line per ε and scale;
    θ = full drawn at the domain size). Colours stand for mechanisms, line styles for policies,
    markers for scales.
    """
    if metric not in MEASURES:
        raise ValueError(f"metric must be one of {MEASURES}, got {metric!r}")
    out = pathlib.Path(out_dir)
    results = out / "results.csv"
    if not results.is_file():
        raise ValueError(f"no results.csv in {str(out)!r}: run the suite first")
    summary = [r for r in summarize(read_rows(results)) if r["n"] > 0 and r[metric] is not None]
    if not summary:
        raise ValueError(f"the results in {str(out)!r} hold no {metric!r} values")
    plt, ticker = _pyplot()
    written: list[pathlib.Path] = []
    ylabel = {"mse": "per-query MSE", "scaled_l2": "scaled L2 error", "objective_ratio": "objective / non-private"}[metric]
    several_domains = len({r["domain"] for r in summary}) > 1
    for dataset, domain in dict.fromkeys((r["dataset"], r["domain"]) for r in summary):
        rows = [r for r in summary if (r["dataset"], r["domain"]) == (dataset, domain)]
        name = f"{dataset} {domain}" if several_domains else dataset
        stem = _safe(f"{dataset}_{domain}" if several_domains else dataset)
        workload = rows[0]["workload"]
        epsilons = sorted({r["epsilon"] for r in rows})
        scales = sorted({r["scale"] for r in rows})
        mechanisms = list(dict.fromkeys(r["mechanism"] for r in rows))
        palette = plt.get_cmap("tab10" if len(mechanisms) <= 10 else "tab20").colors
        policies = list(dict.fromkeys(r["policy"] for r in rows))
        xkey = "scale" if len(epsilons) == 1 and len(scales) > 1 else "epsilon"
        split = xkey == "epsilon" and len(scales) > 1
        fixed = f"ε = {epsilons[0]:g}" if xkey == "scale" else None
        lines = list(dict.fromkeys((r["mechanism"], r["policy"], r["scale"] if split else None) for r in rows))
        by_policy = len(lines) > MAX_LINES_PER_PANEL and len(policies) > 1
        fig, axes = _panels(plt, len(policies)) if by_policy else _panels(plt, 1, 7.0, 4.5)
        for mech, policy, scale in lines:
            ax = axes[policies.index(policy)] if by_policy else axes[0]
            line = sorted((r for r in rows if (r["mechanism"], r["policy"]) == (mech, policy) and (not split or r["scale"] == scale)),
                          key=lambda r: r[xkey])
            label = mech + ("" if by_policy else f" · {policy}") + (f" · s={scale:g}" if split else "")
            ax.errorbar([r[xkey] for r in line], [r[metric] for r in line], yerr=_bars(line, metric),
                        color=palette[mechanisms.index(mech) % len(palette)],
                        linestyle=_STYLES[policies.index(policy) % len(_STYLES)],
                        marker=_MARKERS[scales.index(scale) % len(_MARKERS)] if split else "o",
                        ms=4, capsize=2, label=label)
        for i, ax in enumerate(axes):
            policy_part = f"policy {policies[i]}" if by_policy else (
                f"policy {policies[0]}" if len(policies) == 1 else "policies " + ", ".join(policies))
            title = " — ".join(p for p in ([policy_part, fixed] if by_policy else [name, workload, policy_part, fixed]) if p)
            ax.set(xscale="log", yscale="log", xlabel="ε" if xkey == "epsilon" else "scale (records)", ylabel=ylabel, title=title)
            _plain_ticks(ax, ticker, epsilons if xkey == "epsilon" else scales)
            _legend(ax)
        if by_policy:
            fig.suptitle(f"{name} — {workload}" + (f" — {fixed}" if fixed else ""))
        _note(fig, rows)
        _save(fig, out, f"{stem}_{metric}_vs_{xkey}", written)
        plt.close(fig)
        themed = [r for r in rows if r["theta"] is not None]
        if len({r["theta"] for r in themed}) > 1:
            panels = [m for m in mechanisms if len({r["theta"] for r in themed if r["mechanism"] == m}) > 1]
            family = sorted({PolicySpec.parse(r["policy"]).kind for r in themed})
            fig, axes = _panels(plt, len(panels))
            for ax, mech in zip(axes, panels):
                for eps in epsilons:
                    for scale in scales:
                        line = sorted((r for r in themed if r["mechanism"] == mech and r["epsilon"] == eps and r["scale"] == scale),
                                      key=lambda r: r["theta"])
                        if line:
                            ax.errorbar([r["theta"] for r in line], [r[metric] for r in line], yerr=_bars(line, metric),
                                        marker="o", ms=4, capsize=2,
                                        label=f"ε = {eps:g}" + (f" · s={scale:g}" if len(scales) > 1 else ""))
                ax.set(xscale="log", yscale="log", xlabel="θ (full = domain size)", ylabel=ylabel, title=mech)
                _plain_ticks(ax, ticker, sorted({r["theta"] for r in themed if r["mechanism"] == mech}))
                ax.tick_params(axis="x", labelrotation=45)
                _legend(ax)
            fig.suptitle(f"{name} — {workload} — policy {' / '.join(f + ':θ' for f in family)} — ε in the legend")
            _note(fig, themed)
            _save(fig, out, f"{stem}_{metric}_vs_theta", written)
            plt.close(fig)
    return written
