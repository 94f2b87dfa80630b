"""One panel per metric against concurrency: a line at the mean, shading from min to max.

The x axis is log2 (a sweep doubles its concurrency), ticked at the concurrencies that were run;
each panel's title names the metric and which way is better, its y axis the unit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omni_deploy.bench.report import METRIC_COLUMNS, Metric, Row


def plot(rows: list[Row], out: Path, title: str = "Serving benchmark") -> None:
    """Write the figure to `out` (.png or .svg)."""
    import matplotlib.pyplot as plt

    fig = figure(rows, title)
    fig.savefig(out)
    plt.close(fig)


def figure(rows: list[Row], title: str) -> Any:
    """The figure: a title, one panel per metric, x ticks at the measured concurrencies."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    concurrencies = sorted({r.concurrency for r in rows})
    fig, axes = plt.subplots(2, 3, figsize=(13, 7), constrained_layout=True)
    fig.suptitle(title)
    for ax, metric in zip(axes.flat, METRIC_COLUMNS, strict=True):
        for source in sorted({r.source for r in rows}):
            points = [
                (r.concurrency, r.metrics[metric.key])
                for r in rows
                if r.source == source and r.metrics[metric.key]
            ]
            if not points:
                continue
            xs = [c for c, _ in points]
            ax.plot(xs, [s["mean"] for _, s in points], marker="o", label=source)  # type: ignore[index]
            ax.fill_between(xs, [s["min"] for _, s in points], [s["max"] for _, s in points], alpha=0.2)  # type: ignore[index]
        ax.set_title(panel_title(metric))
        ax.set_xlabel("concurrency")
        ax.set_ylabel(metric.unit)
        ax.set_xscale("log", base=2)
        # Log ticks would read 2^0..2^5; the sweep's own values (1, 4, 8, 16, 32) are what was run.
        ax.xaxis.set_major_locator(FixedLocator(concurrencies))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([str(c) for c in concurrencies])
        ax.grid(alpha=0.3)
    axes.flat[0].legend()
    return fig


def panel_title(metric: Metric) -> str:
    arrow = {"higher": "↑ higher is better", "lower": "↓ lower is better"}.get(metric.better or "")
    return f"{metric.title} ({arrow})" if arrow else metric.title
