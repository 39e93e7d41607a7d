"""The plots of a results directory, as PNGs in ``<out>/plots/``.

* per workload run at several thread counts: throughput (median ops/s,
  bars from the slowest to the fastest repetition) against threads, one
  line per allocator, with the machine's CPU count marked when some runs
  are oversubscribed (``throughput_<workload>.png``);
* per workload run at one thread count: throughput as horizontal bars;
* per workload: the peak RSS (median max_rss_kib) per allocator, grouped by
  thread count (``rss_<workload>.png``); for the enclave harness's
  workloads the heap bytes touched instead (``touched_<workload>.png``:
  the harness fills the heap, so the RSS is the heap's size);
* for frag: live bytes and footprint over time per allocator, one figure
  per thread count (``frag_series_t<N>.png``);
* per group of workloads (process-wide against the baseline, fixed-heap
  against the fixed-heap baseline): the geometric means of the throughput
  and memory ratios (``summary_vs_<baseline>.png``, the plots that depend
  on the baselines).

Figures are drawn on matplotlib's Agg canvas directly (no pyplot, no global
state). :func:`plot_plan` names every plot a results directory gets, so
the report finds them without drawing them again.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from pathlib import Path
from typing import Callable, Optional, Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from tessbench.aggregate import MEMORY, RSS, THROUGHPUT, Group, Results, Run, load_results

#: The plots' folder inside a results directory.
PLOTS_DIR = "plots"
#: Resolution of the PNGs.
DPI = 110
#: Above this max/min ratio of the medians, a throughput axis is logarithmic.
LOG_SPREAD = 30.0

KIB_PER_MIB = 1024.0
BYTES_PER_MIB = 1024.0 * 1024.0

#: Columns of a frag series CSV the plots use.
SERIES_TIME, SERIES_LIVE, SERIES_FOOTPRINT = "t_s", "live_bytes", "footprint_bytes"


@dataclasses.dataclass(frozen=True)
class PlannedPlot:
    """One plot a results directory gets.

    ``workload`` is None for plots across workloads; ``caption`` describes
    the plot (the report's caption and alt text).
    """

    path: Path
    workload: Optional[str]
    caption: str
    draw: Callable[[Results], Figure]


def safe_name(name: str) -> str:
    """A workload or allocator name as a file-name fragment."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"


def plots_dir(out_dir: Path) -> Path:
    """Where the plots of a results directory go."""
    return out_dir / PLOTS_DIR


# ---------------------------------------------------------------------------
# helpers


def _new_figure(width: float, height: float, rows: int = 1) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(rows, 1, i + 1) for i in range(rows)]
    return fig, axes


def threads_text(n: int) -> str:
    """"1 thread", "4 threads"."""
    return f"{n} thread" if n == 1 else f"{n} threads"


def plot_order(results: Results) -> list[str]:
    """The allocators in meta.json's order (not the baseline's first): plots do not
    depend on which allocator is the baseline."""
    known = [a for a in results.meta.allocators if a in results.allocators]
    return known + [a for a in results.allocators if a not in known]


def allocators_of(results: Results, workload: str) -> list[str]:
    """The allocators that ran the workload, in :func:`plot_order`."""
    present = set(results.allocators_of(workload))
    return [a for a in plot_order(results) if a in present]


def allocator_colors(results: Results) -> dict[str, str]:
    """A color per allocator, the same in every plot."""
    palette = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
               "tab:pink", "tab:gray", "tab:olive", "tab:cyan", "navy", "darkgoldenrod",
               "teal", "maroon", "lime", "black"]
    return {a: palette[i % len(palette)] for i, a in enumerate(plot_order(results))}


def _si(value: float, _pos: object = None) -> str:
    """A tick label: 1.5k, 20M, 3G ..."""
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{suffix}"
    return f"{value:.3g}"


def _runs_note(results: Results, workload: str) -> str:
    counts = sorted({c.ok for c in results.cells.values() if c.workload == workload})
    if not counts:
        return "no runs"
    shown = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"median of {shown} ok run(s)"


def _hbars(ax: Axes, results: Results, labels: Sequence[str], values: Sequence[float],
           spreads: Sequence[Optional[tuple[float, float]]], fmt: Callable[[float], str]) -> None:
    """Horizontal bars, one per allocator, top to bottom, valued at their ends."""
    colors = allocator_colors(results)
    ys = list(range(len(labels)))
    lows = [v - s[0] if s else 0.0 for v, s in zip(values, spreads)]
    highs = [s[1] - v if s else 0.0 for v, s in zip(values, spreads)]
    ax.barh(ys, values, color=[colors[a] for a in labels], xerr=[lows, highs],
            error_kw={"ecolor": "black", "capsize": 3, "elinewidth": 0.8})
    ax.set_yticks(ys, list(labels))
    ax.invert_yaxis()
    ends = [max(v, s[1]) if s else v for v, s in zip(values, spreads)]
    top = max(ends, default=1.0)
    for y, v, end in zip(ys, values, ends):
        ax.text(end, y, "  " + fmt(v), va="center", ha="left", fontsize=8)
    ax.set_xlim(0, top * 1.2 if top > 0 else 1.0)
    ax.xaxis.set_major_formatter(FuncFormatter(_si))
    ax.grid(axis="x", alpha=0.3)


def _oversubscription(ax: Axes, results: Results, workload: str,
                      threads: Sequence[int]) -> str:
    """A dashed line at the CPU count and the oversubscribed runs' region shaded, if
    any run is there; returns the note for the x axis label ("" when no run is
    oversubscribed). The region starts at the CPU count, or before it where a run
    keeps more threads busy than its thread count (frag's other threads)."""
    cpus = results.meta.machine.cpus
    over = results.oversubscribed(workload)
    if not cpus or not threads or not over:
        return ""
    start = float(cpus)
    if min(over) <= cpus:  # halfway (on the log axis) to the thread count below
        below = [t for t in threads if t < min(over)]
        start = math.sqrt(min(over) * max(below)) if below else min(over) / 1.3
    ax.axvline(cpus, color="dimgray", linestyle="--", linewidth=1.2)
    ax.axvspan(start, max(threads) * 1.2, color="gray", alpha=0.08, linewidth=0)
    ax.text(cpus, 0.01, f"{cpus} CPUs", transform=ax.get_xaxis_transform(), ha="center",
            va="bottom", fontsize=8, color="dimgray",
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.5})
    return f"dashed line: the machine's {cpus} CPUs; shaded: the oversubscribed runs"


def _legend_outside(fig: Figure, ax: Axes) -> None:
    """The legend to the right of the plot, where it hides no data."""
    if ax.get_legend_handles_labels()[0]:
        fig.legend(loc="outside right upper", fontsize=8)


# ---------------------------------------------------------------------------
# the plots


def draw_throughput_lines(results: Results, workload: str) -> Figure:
    """Median throughput against threads, a line per allocator (several thread counts)."""
    fig, (ax,) = _new_figure(9.5, 5.0)
    colors = allocator_colors(results)
    threads = results.threads_of(workload)
    medians: list[float] = []
    for allocator in allocators_of(results, workload):
        xs: list[int] = []
        ys: list[float] = []
        lows: list[float] = []
        highs: list[float] = []
        for t in threads:
            cell = results.cell(workload, allocator, t)
            value = cell.median(THROUGHPUT) if cell else None
            spread = cell.spread(THROUGHPUT) if cell else None
            if value is None or spread is None or value <= 0:
                continue
            xs.append(t)
            ys.append(value)
            lows.append(value - spread[0])
            highs.append(spread[1] - value)
        if not xs:
            continue
        medians.extend(ys)
        ax.errorbar(xs, ys, yerr=[lows, highs], marker="o", markersize=4, capsize=3,
                    linewidth=1.5, color=colors[allocator], label=allocator)
    ax.set_xscale("log", base=2)
    ax.set_xticks(threads, [str(t) for t in threads])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(min(threads) / 1.3, max(threads) * 1.2)
    if medians and min(medians) > 0 and max(medians) / min(medians) > LOG_SPREAD:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(_si))
    note = _oversubscription(ax, results, workload, threads)
    ax.set_xlabel("threads" + (f"\n({note})" if note else ""))
    ax.set_ylabel(f"throughput ({results.unit(workload)} per second)")
    ax.set_title(f"{workload}: throughput vs threads ({_runs_note(results, workload)}, "
                 "bars: min-max)", fontsize=11)
    ax.grid(alpha=0.3)
    _legend_outside(fig, ax)
    return fig


def draw_throughput_bars(results: Results, workload: str) -> Figure:
    """Median throughput per allocator as horizontal bars (one thread count)."""
    (threads,) = results.threads_of(workload)
    labels: list[str] = []
    values: list[float] = []
    spreads: list[Optional[tuple[float, float]]] = []
    for allocator in allocators_of(results, workload):
        cell = results.cell(workload, allocator, threads)
        value = cell.median(THROUGHPUT) if cell else None
        if cell is None or value is None:
            continue
        labels.append(allocator)
        values.append(value)
        spreads.append(cell.spread(THROUGHPUT))
    fig, (ax,) = _new_figure(8.0, 1.4 + 0.42 * max(len(labels), 1))
    _hbars(ax, results, labels, values, spreads, _si)
    ax.set_xlabel(f"throughput ({results.unit(workload)} per second)")
    ax.set_title(f"{workload}: throughput at {threads_text(threads)} "
                 f"({_runs_note(results, workload)}, bars: min-max)", fontsize=11)
    return fig


def draw_memory(results: Results, workload: str) -> Figure:
    """The median of the workload's memory metric per allocator, grouped by thread count:
    the peak RSS, or the heap bytes touched in the enclave harness's workloads."""
    metric = results.memory_metric(workload)
    what = "peak RSS" if metric == RSS else "peak heap bytes touched"
    scale = KIB_PER_MIB if metric == RSS else BYTES_PER_MIB
    threads = results.threads_of(workload)
    allocators = allocators_of(results, workload)
    colors = allocator_colors(results)
    if len(threads) == 1:
        labels: list[str] = []
        values: list[float] = []
        spreads: list[Optional[tuple[float, float]]] = []
        for allocator in allocators:
            cell = results.cell(workload, allocator, threads[0])
            value = cell.median(metric) if cell else None
            spread = cell.spread(metric) if cell else None
            if value is None:
                continue
            labels.append(allocator)
            values.append(value / scale)
            spreads.append((spread[0] / scale, spread[1] / scale) if spread else None)
        fig, (ax,) = _new_figure(8.0, 1.4 + 0.42 * max(len(labels), 1))
        _hbars(ax, results, labels, values, spreads, lambda v: f"{v:,.1f}")
        ax.set_xlabel(f"{what} (MiB)")
    else:
        fig, (ax,) = _new_figure(min(14.0, max(9.5, 2.5 + 0.16 * len(threads) * len(allocators))),
                                 5.0)
        width = 0.8 / max(len(allocators), 1)
        for i, allocator in enumerate(allocators):
            xs: list[float] = []
            ys: list[float] = []
            for j, t in enumerate(threads):
                cell = results.cell(workload, allocator, t)
                value = cell.median(metric) if cell else None
                if value is not None:
                    xs.append(j - 0.4 + width * (i + 0.5))
                    ys.append(value / scale)
            ax.bar(xs, ys, width=width, color=colors[allocator], label=allocator)
        ax.set_xticks(range(len(threads)), [str(t) for t in threads])
        ax.set_xlabel("threads")
        ax.set_ylabel(f"{what} (MiB)")
        ax.grid(axis="y", alpha=0.3)
        _legend_outside(fig, ax)
    ax.set_title(f"{workload}: {what} ({_runs_note(results, workload)})", fontsize=11)
    return fig


@dataclasses.dataclass(frozen=True)
class Series:
    """A frag run's time series: seconds, live bytes, footprint (None: unknown)."""

    t_s: tuple[float, ...]
    live_bytes: tuple[float, ...]
    footprint_bytes: tuple[Optional[float], ...]


def read_series(path: Path) -> Series:
    """A frag series CSV; a negative footprint (the allocator cannot tell) reads as None."""
    t_s: list[float] = []
    live: list[float] = []
    footprint: list[Optional[float]] = []
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            try:
                t, b = float(row[SERIES_TIME]), float(row[SERIES_LIVE])
            except (KeyError, TypeError, ValueError):
                continue
            try:
                fp: Optional[float] = float(row.get(SERIES_FOOTPRINT) or "")
            except ValueError:
                fp = None
            t_s.append(t)
            live.append(b)
            footprint.append(fp if fp is not None and fp >= 0 and math.isfinite(fp) else None)
    return Series(tuple(t_s), tuple(live), tuple(footprint))


def series_runs(results: Results, workload: str, threads: int) -> list[tuple[Run, Path]]:
    """The ok runs at that point with a series CSV that exists, and the CSV's path."""
    found: list[tuple[Run, Path]] = []
    for run in results.runs:
        if run.workload != workload or run.threads != threads or not run.ok:
            continue
        rel = run.extra.get("series_csv", "").strip()
        if rel and (results.out_dir / rel).is_file():
            found.append((run, results.out_dir / rel))
    return found


def draw_frag_series(results: Results, workload: str, threads: int) -> Figure:
    """Live bytes and footprint over time, a color per allocator, a line per repetition."""
    fig, (live_ax, fp_ax) = _new_figure(9.0, 7.0, rows=2)
    colors = allocator_colors(results)
    labelled: set[str] = set()
    unknown: list[str] = []
    runs = series_runs(results, workload, threads)
    order = {a: i for i, a in enumerate(plot_order(results))}
    runs.sort(key=lambda rp: (order.get(rp[0].allocator, 0), rp[0].repetition))
    for run, path in runs:
        series = read_series(path)
        first = run.allocator not in labelled
        labelled.add(run.allocator)
        label = run.allocator if first else None
        color = colors.get(run.allocator, "black")
        alpha = 1.0 if first else 0.45
        live_ax.plot(series.t_s, [b / BYTES_PER_MIB for b in series.live_bytes],
                     label=label, color=color, linewidth=1.2, alpha=alpha)
        fp = [float("nan") if v is None else v / BYTES_PER_MIB for v in series.footprint_bytes]
        if any(v is not None for v in series.footprint_bytes):
            fp_ax.plot(series.t_s, fp, label=label, color=color, linewidth=1.2, alpha=alpha)
        elif first:
            unknown.append(run.allocator)
    reps = "each repetition a line, the first solid"
    live_ax.set_title(f"{workload}: live bytes over time at {threads_text(threads)} ({reps})",
                      fontsize=11)
    live_ax.set_ylabel("live bytes (MiB)")
    fp_ax.set_title(f"{workload}: footprint over time at {threads_text(threads)}",
                    fontsize=11)
    fp_ax.set_ylabel("footprint (MiB)")
    fp_ax.set_xlabel("time (s)")
    if unknown:
        fp_ax.text(0.01, 0.02, "footprint not reported by: " + ", ".join(unknown),
                   transform=fp_ax.transAxes, fontsize=8, color="dimgray")
    for ax in (live_ax, fp_ax):
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
    return fig


def draw_summary(results: Results, group: Group) -> Figure:
    """Geometric means of the throughput and memory ratios to the group's baseline."""
    tput = results.geomeans(THROUGHPUT, workloads=group.workloads)
    memory = results.geomeans(MEMORY, workloads=group.workloads)
    shown = [a for a in results.allocators if tput[a].value is not None]
    fig, axes = _new_figure(8.0, 2.4 + 0.75 * max(len(shown), 1), rows=2)
    colors = allocator_colors(results)
    panels = ((tput, "throughput / baseline's (higher is faster)"),
              (memory, "memory / baseline's (lower is smaller)"))
    for ax, (means, title) in zip(axes, panels):
        names = [a for a in results.allocators if means[a].value is not None]
        values = [means[a].value or 0.0 for a in names]
        ys = list(range(len(names)))
        ax.barh(ys, values, color=[colors[a] for a in names])
        ax.set_yticks(ys, [f"{a} [{means[a].cells}/{means[a].total}]" for a in names])
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linewidth=0.8)
        for y, v in zip(ys, values):
            ax.text(v, y, f" {v:.2f}", va="center", ha="left", fontsize=8)
        ax.set_xlim(0, max([*values, 1.0]) * 1.2)
        ax.set_xlabel(f"geometric mean of the ratio to {group.baseline} over workloads "
                      "and thread counts")
        ax.set_title(title, fontsize=11)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"{group.title} against {group.baseline} "
                 "([cells covered/cells run] per allocator)", fontsize=11)
    return fig


# ---------------------------------------------------------------------------
# planning and drawing


def _bind_workload(draw: Callable[[Results, str], Figure],
                   workload: str) -> Callable[[Results], Figure]:
    return lambda results: draw(results, workload)


def _bind_frag(workload: str, threads: int) -> Callable[[Results], Figure]:
    return lambda results: draw_frag_series(results, workload, threads)


def _bind_group(group: Group) -> Callable[[Results], Figure]:
    return lambda results: draw_summary(results, group)


def _has(results: Results, workload: str, metric: str) -> bool:
    return any(c.median(metric) is not None
               for c in results.cells.values() if c.workload == workload)


def summary_path(results: Results, group: Group) -> Path:
    """A group's summary plot: named after its baseline, as it depends on it."""
    return plots_dir(results.out_dir) / f"summary_vs_{safe_name(group.baseline)}.png"


def plot_plan(results: Results) -> list[PlannedPlot]:
    """Every plot the results get, in report order (per workload, then the summaries)."""
    folder = plots_dir(results.out_dir)
    plan: list[PlannedPlot] = []
    for workload in results.workloads:
        name = safe_name(workload)
        threads = results.threads_of(workload)
        unit = results.unit(workload)
        if _has(results, workload, THROUGHPUT):
            if len(threads) > 1:
                plan.append(PlannedPlot(
                    folder / f"throughput_{name}.png", workload,
                    f"{workload}: median throughput ({unit} per second) against threads, "
                    "one line per allocator",
                    _bind_workload(draw_throughput_lines, workload)))
            else:
                plan.append(PlannedPlot(
                    folder / f"throughput_{name}.png", workload,
                    f"{workload}: median throughput ({unit} per second) per allocator",
                    _bind_workload(draw_throughput_bars, workload)))
        metric = results.memory_metric(workload)
        if _has(results, workload, metric):
            kind, what = ("rss", "peak RSS") if metric == RSS else \
                ("touched", "peak heap bytes touched")
            plan.append(PlannedPlot(
                folder / f"{kind}_{name}.png", workload,
                f"{workload}: median {what} (MiB) per allocator",
                _bind_workload(draw_memory, workload)))
        for t in threads:
            if series_runs(results, workload, t):
                plan.append(PlannedPlot(
                    folder / f"{name}_series_t{t}.png", workload,
                    f"{workload}: live bytes and footprint over time at {threads_text(t)}",
                    _bind_frag(workload, t)))
    for group in results.groups():
        means = results.geomeans(THROUGHPUT, workloads=group.workloads)
        if any(g.value is not None and g.allocator != group.baseline for g in means.values()):
            plan.append(PlannedPlot(
                summary_path(results, group), None,
                f"{group.title}: geometric means of the throughput and memory ratios to "
                f"{group.baseline}", _bind_group(group)))
    return plan


def draw_plots(results: Results, plan: Optional[Sequence[PlannedPlot]] = None) -> list[Path]:
    """Draws the planned plots (default: all of :func:`plot_plan`); returns their paths."""
    todo = plot_plan(results) if plan is None else plan
    written: list[Path] = []
    for planned in todo:
        planned.path.parent.mkdir(parents=True, exist_ok=True)
        fig = planned.draw(results)
        fig.savefig(planned.path, dpi=DPI, format="png")
        written.append(planned.path)
    return written


def plot_all(out_dir: Path, baseline: Optional[str] = None,
             fixed_baseline: Optional[str] = None) -> list[Path]:
    """Draws every plot of the results in out_dir into out_dir/plots; returns the PNGs."""
    return draw_plots(load_results(Path(out_dir), baseline, fixed_baseline))
