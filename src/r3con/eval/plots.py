"""PNG plots of a report (matplotlib's Agg canvas, no pyplot state): accuracy against cost, and per category.

matplotlib is the `eval` extra; without it the report keeps its tables and `unavailable()` says how
to get the plots. A report is passed in as any object with the `Report` shape (`rows_for`,
`reference`), so this module does not import the report module that calls it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigError
from .scoring import CATEGORIES, method_cost

INSTALL_HINT = "pip install 'r3con[eval]'"


class _Report(Protocol):
    @property
    def reference(self) -> Mapping[str, Sequence[Any]]: ...

    def rows_for(self, benchmark: str) -> Sequence[Any]: ...


def unavailable() -> str | None:
    """None when plots can be drawn; else one line saying they were skipped and how to get them."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return f"plots skipped: they need matplotlib ({INSTALL_HINT}); the tables are written"
    return None


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ConfigError(f"plots need matplotlib: {INSTALL_HINT}, or pass --no-plots") from exc
    figure = Figure(figsize=(width, height), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The Pareto front: points no other point beats on both lower cost and higher accuracy."""
    front: list[tuple[float, float]] = []
    for cost, acc in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or acc > front[-1][1]:
            front.append((cost, acc))
    return front


def plot_pareto(report: _Report, benchmark: str, path: Path) -> Path:
    """Accuracy against the method's cost in USD, one point per method and model; the paper's results beside."""
    figure = _figure(7.5, 5)
    ax = figure.add_subplot()
    points: list[tuple[float, float]] = []
    for row in report.rows_for(benchmark):
        cost, acc = method_cost(row.usage), row.summary.accuracy
        ax.errorbar([cost], [acc.percent], yerr=[acc.se_percent], fmt="o", capsize=3, label=f"{row.label}, n={acc.n}")
        points.append((cost, acc.percent))
    for ref in report.reference.get(benchmark, ()):
        if ref.accuracy is None:
            continue
        name = f"paper: {ref.label}" + (f" ({ref.model})" if ref.model else "")
        if ref.cost_usd is not None:
            ax.errorbar([ref.cost_usd], [ref.accuracy], yerr=[ref.se or 0.0], fmt="*", markersize=12, capsize=3,
                        label=name)
            points.append((float(ref.cost_usd), ref.accuracy))
        else:
            ax.axhline(ref.accuracy, linestyle=":", linewidth=1, color="grey")
            ax.annotate(f"{name}: {ref.accuracy:.2f} (cost n/a)", (0.01, ref.accuracy), xycoords=("axes fraction", "data"),
                        fontsize=7, color="grey", va="bottom")
    front = _frontier(points)
    if len(front) > 1:
        ax.step([c for c, _ in front], [a for _, a in front], where="post", linestyle="--", linewidth=1,
                color="black", alpha=0.5, label="Pareto front")
    costs = [c for c, _ in points if c > 0]
    if costs and len(costs) == len(points) and max(costs) / min(costs) > 20:
        ax.set_xscale("log")
    ax.set_xlabel("cost (USD, method only)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{benchmark}: accuracy against cost")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
    figure.savefig(path)
    return path


def plot_categories(report: _Report, benchmark: str, path: Path) -> Path:
    """Accuracy ± SE per category value (one panel per category), one bar per method and model."""
    rows = report.rows_for(benchmark)
    keys = [k for k in CATEGORIES.get(benchmark, ()) if any(r.summary.by_category.get(k) for r in rows)]
    figure = _figure(4.2 * max(1, len(keys)), 4)
    axes = figure.subplots(1, max(1, len(keys)), squeeze=False)[0]
    width = 0.8 / max(1, len(rows))
    for ax, key in zip(axes, keys, strict=False):
        values: list[str] = []
        for row in rows:
            values += [v for v in row.summary.by_category.get(key, {}) if v not in values]
        for i, row in enumerate(rows):
            cells = row.summary.by_category.get(key, {})
            xs = [j + (i - (len(rows) - 1) / 2) * width for j in range(len(values))]
            accs = [cells[v].percent if v in cells else 0.0 for v in values]
            ses = [cells[v].se_percent if v in cells else 0.0 for v in values]
            ax.bar(xs, accs, width=width, yerr=ses, capsize=2, label=row.label)
        ax.set_xticks(range(len(values)), values)
        ax.set_title(f"by {key}")
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(0, 100)
        ax.grid(axis="y", alpha=0.3)
    if rows:
        axes[0].legend(fontsize=7, loc="upper right")
    figure.suptitle(f"{benchmark}: accuracy per category (paper's per-category tables: not available)"
                    if not any(ref.categories for ref in report.reference.get(benchmark, ())) else
                    f"{benchmark}: accuracy per category")
    figure.savefig(path)
    return path
