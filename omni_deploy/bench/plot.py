"""One panel per metric against concurrency: a line at the mean, shading from min to max."""

from __future__ import annotations

from pathlib import Path

from omni_deploy.bench.report import _COLUMNS, Row


def plot(rows: list[Row], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 7), constrained_layout=True)
    for ax, (metric, title, _) in zip(axes.flat, _COLUMNS, strict=True):
        for source in sorted({r.source for r in rows}):
            points = [
                (r.concurrency, r.metrics[metric]) for r in rows if r.source == source and r.metrics[metric]
            ]
            if not points:
                continue
            xs = [c for c, _ in points]
            ax.plot(xs, [s["mean"] for _, s in points], marker="o", label=source)  # type: ignore[index]
            ax.fill_between(xs, [s["min"] for _, s in points], [s["max"] for _, s in points], alpha=0.2)  # type: ignore[index]
        ax.set_title(title)
        ax.set_xlabel("concurrency")
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
    axes.flat[0].legend()
    fig.savefig(out)
    plt.close(fig)
