"""Plots of a results folder: error against ε (or against the scale, when ε is fixed) and error
against θ, on log axes, saved as PNG and SVG beside the results. Needs matplotlib
(``pip install blowfish_te[evaluation]``)."""

from __future__ import annotations

import pathlib

from .runner import read_rows
from .summary import summarize

__all__ = ["plot_results"]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plots need matplotlib: pip install 'blowfish_te[evaluation]'") from None
    return plt


def _save(fig, out: pathlib.Path, stem: str, written: list) -> None:
    for ext in ("png", "svg"):
        path = out / f"{stem}.{ext}"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        written.append(path)


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)


def plot_results(out_dir, metric: str = "mse") -> list[pathlib.Path]:
    """Draw every figure for the results in ``out_dir`` and return the files written.

    Per dataset: ``<metric>_vs_epsilon`` (one line per mechanism × policy; against the scale
    instead when the suite has one ε and several scales) and, when the suite has θ-policies,
    ``<metric>_vs_theta`` (one panel per mechanism, one line per ε; θ = full drawn at the domain
    size). Error bars are the 95% confidence intervals.
    """
    if metric not in ("mse", "scaled_l2"):
        raise ValueError(f"metric must be 'mse' or 'scaled_l2', got {metric!r}")
    out = pathlib.Path(out_dir)
    results = out / "results.csv"
    if not results.is_file():
        raise ValueError(f"no results.csv in {str(out)!r}: run the suite first")
    summary = [r for r in summarize(read_rows(results)) if r["n"] > 0]
    plt = _pyplot()
    written: list[pathlib.Path] = []
    ylabel = "per-query MSE" if metric == "mse" else "scaled L2 error"
    for dataset in dict.fromkeys(r["dataset"] for r in summary):
        rows = [r for r in summary if r["dataset"] == dataset]
        epsilons = sorted({r["epsilon"] for r in rows})
        scales = sorted({r["scale"] for r in rows})
        xkey = "scale" if len(epsilons) == 1 and len(scales) > 1 else "epsilon"
        split = xkey == "epsilon" and len(scales) > 1
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for mech, policy, scale in dict.fromkeys((r["mechanism"], r["policy"], r["scale"] if split else None) for r in rows):
            line = sorted((r for r in rows if (r["mechanism"], r["policy"]) == (mech, policy) and (not split or r["scale"] == scale)),
                          key=lambda r: r[xkey])
            ci = [r[metric + "_ci95"] for r in line]
            ax.errorbar([r[xkey] for r in line], [r[metric] for r in line], yerr=[0 if c != c else c for c in ci],
                        marker="o", ms=3, capsize=2, label=f"{mech} · {policy}" + (f" · s={scale:g}" if split else ""))
        ax.set(xscale="log", yscale="log", xlabel="ε" if xkey == "epsilon" else "scale (records)", ylabel=ylabel,
               title=f"{dataset} — {rows[0]['workload']}")
        ax.legend(fontsize=6, ncol=2)
        _save(fig, out, f"{_safe(dataset)}_{metric}_vs_{xkey}", written)
        plt.close(fig)
        themed = [r for r in rows if r["theta"] is not None]
        if len({r["theta"] for r in themed}) > 1:
            mechanisms = [m for m in dict.fromkeys(r["mechanism"] for r in themed)
                          if len({r["theta"] for r in themed if r["mechanism"] == m}) > 1]
            fig, axes = plt.subplots(1, len(mechanisms), figsize=(5 * len(mechanisms), 4), squeeze=False)
            for ax, mech in zip(axes[0], mechanisms):
                for eps in epsilons:
                    line = sorted((r for r in themed if r["mechanism"] == mech and r["epsilon"] == eps), key=lambda r: r["theta"])
                    ax.plot([r["theta"] for r in line], [r[metric] for r in line], marker="o", ms=3, label=f"ε = {eps:g}")
                ax.set(xscale="log", yscale="log", xlabel="θ (full = domain size)", ylabel=ylabel, title=f"{dataset} — {mech}")
                ax.legend(fontsize=6)
            _save(fig, out, f"{_safe(dataset)}_{metric}_vs_theta", written)
            plt.close(fig)
    return written
