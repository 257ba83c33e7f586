"""Plots of a results folder: error against ε (or against the scale, when ε is fixed) and error
against θ, on log axes, saved as PNG and SVG beside the results. Needs matplotlib
(``pip install blowfish_te[evaluation]``)."""

from __future__ import annotations

import pathlib

from .runner import read_rows
from .summary import MEASURES, summarize

__all__ = ["plot_results"]


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


#: Lines beyond which the error-vs-ε (or scale) figure gets one panel per policy.
MAX_LINES_PER_PANEL = 12
_STYLES = ["-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]
_MARKERS = ["o", "s", "^", "D", "v", "P"]


def _panels(plt, count: int, width: float = 5.0, height: float = 4.0):
    ncols = min(count, 3)
    nrows = -(-count // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, layout="constrained")
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:count])


def plot_results(out_dir, metric: str = "mse") -> list[pathlib.Path]:
    """Draw every figure for the results in ``out_dir`` and return the files written.

    Per dataset: ``<metric>_vs_epsilon`` (one line per mechanism × policy; against the scale
    instead when the suite has one ε and several scales; one panel per policy beyond
    :data:`MAX_LINES_PER_PANEL` lines) and, when the suite has θ-policies, ``<metric>_vs_theta``
    (one panel per mechanism, one line per ε and scale; θ = full drawn at the domain size).
    Colours stand for mechanisms, line styles for policies, markers for scales. Error bars are
    the 95% confidence intervals (a bar reaching the bottom of a log axis means the interval
    holds values ≤ 0).
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
    for dataset in dict.fromkeys(r["dataset"] for r in summary):
        rows = [r for r in summary if r["dataset"] == dataset]
        epsilons = sorted({r["epsilon"] for r in rows})
        scales = sorted({r["scale"] for r in rows})
        mechanisms = list(dict.fromkeys(r["mechanism"] for r in rows))
        palette = plt.get_cmap("tab10" if len(mechanisms) <= 10 else "tab20").colors
        policies = list(dict.fromkeys(r["policy"] for r in rows))
        xkey = "scale" if len(epsilons) == 1 and len(scales) > 1 else "epsilon"
        split = xkey == "epsilon" and len(scales) > 1
        lines = list(dict.fromkeys((r["mechanism"], r["policy"], r["scale"] if split else None) for r in rows))
        by_policy = len(lines) > MAX_LINES_PER_PANEL and len(policies) > 1
        fig, axes = _panels(plt, len(policies)) if by_policy else _panels(plt, 1, 7.0, 4.5)
        for mech, policy, scale in lines:
            ax = axes[policies.index(policy)] if by_policy else axes[0]
            line = sorted((r for r in rows if (r["mechanism"], r["policy"]) == (mech, policy) and (not split or r["scale"] == scale)),
                          key=lambda r: r[xkey])
            ci = [r[metric + "_ci95"] for r in line]
            label = mech + ("" if by_policy else f" · {policy}") + (f" · s={scale:g}" if split else "")
            ax.errorbar([r[xkey] for r in line], [r[metric] for r in line], yerr=[0 if c != c else c for c in ci],
                        color=palette[mechanisms.index(mech) % len(palette)],
                        linestyle=_STYLES[policies.index(policy) % len(_STYLES)],
                        marker=_MARKERS[scales.index(scale) % len(_MARKERS)] if split else "o",
                        ms=3, capsize=2, label=label)
        for i, ax in enumerate(axes):
            title = f"{dataset} — {policies[i]}" if by_policy else f"{dataset} — {rows[0]['workload']}"
            ax.set(xscale="log", yscale="log", xlabel="ε" if xkey == "epsilon" else "scale (records)", ylabel=ylabel, title=title)
            ax.legend(fontsize=6, ncol=1 if by_policy else 2)
        _save(fig, out, f"{_safe(dataset)}_{metric}_vs_{xkey}", written)
        plt.close(fig)
        themed = [r for r in rows if r["theta"] is not None]
        if len({r["theta"] for r in themed}) > 1:
            panels = [m for m in mechanisms if len({r["theta"] for r in themed if r["mechanism"] == m}) > 1]
            fig, axes = _panels(plt, len(panels))
            for ax, mech in zip(axes, panels):
                for eps in epsilons:
                    for scale in scales:
                        line = sorted((r for r in themed if r["mechanism"] == mech and r["epsilon"] == eps and r["scale"] == scale),
                                      key=lambda r: r["theta"])
                        if line:
                            ax.plot([r["theta"] for r in line], [r[metric] for r in line], marker="o", ms=3,
                                    label=f"ε = {eps:g}" + (f" · s={scale:g}" if len(scales) > 1 else ""))
                ax.set(xscale="log", yscale="log", xlabel="θ (full = domain size)", ylabel=ylabel, title=f"{dataset} — {mech}")
                thetas = sorted({r["theta"] for r in themed if r["mechanism"] == mech})
                ax.set_xticks(thetas, labels=[f"{t:g}" for t in thetas])
                ax.xaxis.set_minor_locator(ticker.NullLocator())
                ax.tick_params(axis="x", labelsize=7, labelrotation=45)
                ax.legend(fontsize=6)
            _save(fig, out, f"{_safe(dataset)}_{metric}_vs_theta", written)
            plt.close(fig)
    return written
