"""Draw the policy graphs of docs/concepts.md (docs/img/policies.svg) from the library's own policies.

Run: ``python docs/scripts/policy_pictures.py`` (needs matplotlib). Each panel is the graph of a
policy on a small domain, ⊥ drawn as a square: cells joined by an edge are the pairs an adversary
must not tell apart (at e^ε); a path of d edges gives e^(d·ε); no path, no protection.
"""

from __future__ import annotations

import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from blowfish_te import policies  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parents[1] / "img" / "policies.svg"


def _positions(policy) -> np.ndarray:
    """Cells on a row (1-D) or a grid (2-D); ⊥ below the middle."""
    shape = policy.shape
    if len(shape) == 1:
        cells = np.column_stack([np.arange(shape[0]), np.zeros(shape[0])])
    else:
        rows, cols = np.unravel_index(np.arange(policy.size), shape)
        cells = np.column_stack([cols, -rows]).astype(float)
    bottom = np.array([[cells[:, 0].mean(), cells[:, 1].min() - 1.5]])
    return np.vstack([cells, bottom])


def draw(ax, policy, title: str) -> None:
    pos = _positions(policy)
    t = np.linspace(0, 1, 20)[:, None]
    for u, v in policy.edges:
        a, b = pos[u], pos[v]
        length = float(np.hypot(*(b - a)))
        # edges that skip over cells bow out, perpendicular to the segment, so they stay visible
        bend = 0.25 * (length - 1) if v < policy.size else 0.0
        normal = np.array([a[1] - b[1], b[0] - a[0]]) / length
        path = a + (b - a) * t + bend * np.sin(np.pi * t) * normal
        ax.plot(path[:, 0], path[:, 1], color="0.45", lw=1)
    ax.scatter(pos[: policy.size, 0], pos[: policy.size, 1], s=140, color="#4c72b0", zorder=3)
    for i in range(policy.size):
        ax.annotate(str(i), pos[i], ha="center", va="center", color="white", fontsize=8, zorder=4)
    if policy.has_bottom:
        ax.scatter(*pos[-1], s=220, marker="s", color="#dd8452", zorder=3)
        ax.annotate("⊥", pos[-1], ha="center", va="center", color="white", fontsize=10, zorder=4)
    ax.set_title(title, fontsize=10)
    ax.set_axis_off()
    ax.set_aspect("equal", adjustable="datalim")


def main() -> None:
    panels = [
        (policies.line(6), "line: values 1 apart"),
        (policies.threshold(6, 2), "threshold θ = 2: within 2"),
        (policies.partition([0, 0, 0, 1, 1, 1]), "partition: within a block"),
        (policies.unbounded(6), "unbounded DP: any record, via ⊥"),
        (policies.grid((3, 3), 1), "grid θ = 1: 2-D neighbours"),
        (policies.attribute((3, 3)), "attribute: one coordinate"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(11, 5.5), layout="constrained")
    for ax, (policy, title) in zip(axes.flat, panels):
        draw(ax, policy, title)
    plt.rcParams["svg.hashsalt"] = "blowfish_te"
    fig.savefig(OUT, metadata={"Date": None})
    print(OUT)


if __name__ == "__main__":
    main()
